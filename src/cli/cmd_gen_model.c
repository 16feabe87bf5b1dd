/* cmd_gen_model.c - moeinf gen-model: write a GGUF MoE model with random weights. */
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "app/gen_types.h"
#include "cli/cli.h"

#define CMD "gen-model"

static void usage(FILE *out) {
    fprintf(out, "usage: moeinf gen-model -o FILE [--preset NAME] [options]\n"
                 "\n"
                 "Writes a GGUF model with random weights that llama.cpp and moeinf load: arch\n"
                 "'llama' (Mixtral-style routed experts, or a dense Llama with --experts 0),\n"
                 "'qwen2moe' (a shared expert, q/k/v biases), 'qwen3moe' (per-head q/k norm) or\n"
                 "'olmoe' (q/k norm over the whole projection). The file is\n"
                 "generated tensor by tensor, so memory stays small whatever its size; the same\n"
                 "options and seed give the same bytes.\n"
                 "\n"
                 "  -o, --output FILE     where to write (required)\n"
                 "  --preset NAME         start from a geometry and arch: default, mixtral-8x7b\n"
                 "                        (llama), olmoe-1b-7b (olmoe), qwen3-30b-a3b (qwen3moe),\n"
                 "                        qwen1.5-moe-a2.7b (qwen2moe); later options override it\n"
                 "  --arch NAME           llama, qwen2moe, qwen3moe or olmoe\n"
                 "  --layers N            transformer blocks\n"
                 "  --experts N           routed experts per layer (0 = dense)\n"
                 "  --top-k N             experts used per token\n"
                 "  --shared-experts N    shared experts: qwen2moe's one shared FFN is N x --ff\n"
                 "                        wide (N >= 1); 0 for the other archs\n"
                 "  --embd N              model width\n"
                 "  --ff N                FFN width of one expert\n"
                 "  --heads N             query heads\n"
                 "  --kv-heads N          key/value heads\n"
                 "  --head-dim N          head dimension (default embd / heads)\n"
                 "  --ctx N               training context length written to the metadata\n"
                 "  --type T              f32, f16, q8_0, q4_0, q4_1, q5_0, q5_1, q2_k, q3_k,\n"
                 "                        q4_k, q5_k, q6_k, iq4_nl, iq4_xs or mxfp4 for every big\n"
                 "                        matrix (norms and router stay f32), or q4_k_m:\n"
                 "                        llama-quantize's Q4_K_M mix of types per tensor. The\n"
                 "                        iq4 types are quantized simply, not as llama-quantize\n"
                 "                        does: each weight the nearest codebook value for a\n"
                 "                        scale set by its block's largest weight; mxfp4 as\n"
                 "                        ggml's reference (E8M0 scale from the block maximum,\n"
                 "                        nearest E2M1 value)\n"
                 "  --tied                no output.weight: the lm_head is token_embd\n"
                 "  --seed S              random seed (default 42)\n"
                 "  --threads N           generator threads (default: all CPUs; same bytes)\n"
                 "  --vocab-from GGUF     copy the tokenizer of another GGUF (default: a small\n"
                 "                        SentencePiece-style vocabulary of its own)\n"
                 "  -h, --help            this help\n");
}

/* Prints "moeinf gen-model: <what> '<arg>'<tail>" and the usage; returns the usage exit code. */
static int bad_usage(const char *what, const char *arg, const char *tail) {
    if (arg) {
        fprintf(stderr, "moeinf " CMD ": %s '%s'%s\n", what, arg, tail);
    } else {
        fprintf(stderr, "moeinf " CMD ": %s%s\n", what, tail);
    }
    usage(stderr);
    return CLI_EXIT_USAGE;
}

static bool apply_preset(const char *name, struct moeinf_gen_params *p) {
    *p = moeinf_gen_params_default();
    if (!strcmp(name, "default")) return true;
    if (!strcmp(name, "mixtral-8x7b")) {
        p->n_layer = 32;
        p->n_expert = 8;
        p->n_expert_used = 2;
        p->n_embd = 4096;
        p->n_ff = 14336;
        p->n_head = 32;
        p->n_head_kv = 8;
        p->n_ctx_train = 32768;
        p->rope_freq_base = 1e6f;
        return true;
    }
    if (!strcmp(name, "olmoe-1b-7b")) {
        p->arch = "olmoe";
        p->n_layer = 16;
        p->n_expert = 64;
        p->n_expert_used = 8;
        p->n_embd = 2048;
        p->n_ff = 1024;
        p->n_head = 16;
        p->n_head_kv = 16;
        p->n_ctx_train = 4096;
        p->rope_freq_base = 10000.0f;
        return true;
    }
    if (!strcmp(name, "qwen3-30b-a3b")) {
        p->arch = "qwen3moe";
        p->n_layer = 48;
        p->n_expert = 128;
        p->n_expert_used = 8;
        p->n_embd = 2048;
        p->n_ff = 768;
        p->n_head = 32;
        p->n_head_kv = 4;
        p->n_embd_head = 128;
        p->n_ctx_train = 40960;
        p->rope_freq_base = 1e6f;
        p->rms_eps = 1e-6f;
        return true;
    }
    if (!strcmp(name, "qwen1.5-moe-a2.7b")) { /* shared expert 4 x 1408 = 5632 wide */
        p->arch = "qwen2moe";
        p->n_layer = 24;
        p->n_expert = 60;
        p->n_expert_used = 4;
        p->n_expert_shared = 4;
        p->n_embd = 2048;
        p->n_ff = 1408;
        p->n_head = 16;
        p->n_head_kv = 16;
        p->n_ctx_train = 8192;
        p->rope_freq_base = 1e6f;
        p->rms_eps = 1e-6f;
        return true;
    }
    return false;
}

struct int_opt {
    const char *name;
    long lo, hi;
    size_t offset; /* of the int field in struct moeinf_gen_params */
};

static const struct int_opt int_opts[] = {
    {"--layers", 1, 4096, offsetof(struct moeinf_gen_params, n_layer)},
    {"--experts", 0, 4096, offsetof(struct moeinf_gen_params, n_expert)},
    {"--top-k", 0, 4096, offsetof(struct moeinf_gen_params, n_expert_used)},
    {"--shared-experts", 0, 4096, offsetof(struct moeinf_gen_params, n_expert_shared)},
    {"--embd", 1, 1 << 20, offsetof(struct moeinf_gen_params, n_embd)},
    {"--ff", 1, 1 << 20, offsetof(struct moeinf_gen_params, n_ff)},
    {"--heads", 1, 4096, offsetof(struct moeinf_gen_params, n_head)},
    {"--kv-heads", 1, 4096, offsetof(struct moeinf_gen_params, n_head_kv)},
    {"--head-dim", 1, 65536, offsetof(struct moeinf_gen_params, n_embd_head)},
    {"--ctx", 1, 1 << 24, offsetof(struct moeinf_gen_params, n_ctx_train)},
    {"--threads", 0, 64, offsetof(struct moeinf_gen_params, n_threads)},
};

int cmd_gen_model(int argc, char **argv) {
    struct moeinf_gen_params p = moeinf_gen_params_default();
    const char *out = NULL;

    /* Pass 1: --help and the preset, which later options override wherever they appear. */
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
            usage(stdout);
            return CLI_EXIT_OK;
        }
        if (!strcmp(argv[i], "--preset")) {
            const char *v = cli_option_value(CMD, argc, argv, &i);
            if (!v) return CLI_EXIT_USAGE;
            if (!apply_preset(v, &p)) return bad_usage("unknown preset", v, "");
        }
    }
    bool top_k_given = false;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--preset")) {
            i++;
            continue;
        }
        if (!strcmp(a, "--tied")) {
            p.tied_output = true;
            continue;
        }
        bool matched = false;
        for (size_t k = 0; k < sizeof int_opts / sizeof int_opts[0]; k++) {
            if (strcmp(a, int_opts[k].name) != 0) continue;
            const char *v = cli_option_value(CMD, argc, argv, &i);
            long n;
            if (!v || !cli_parse_long(CMD, a, v, int_opts[k].lo, int_opts[k].hi, &n)) {
                return CLI_EXIT_USAGE;
            }
            *(int *)((char *)&p + int_opts[k].offset) = (int)n;
            if (!strcmp(a, "--top-k")) top_k_given = true;
            matched = true;
            break;
        }
        if (matched) continue;
        if (!strcmp(a, "-o") || !strcmp(a, "--output") || !strcmp(a, "--arch") ||
            !strcmp(a, "--type") || !strcmp(a, "--seed") || !strcmp(a, "--vocab-from")) {
            const char *v = cli_option_value(CMD, argc, argv, &i);
            if (!v) return CLI_EXIT_USAGE;
            if (a[1] == 'o' || !strcmp(a, "--output")) {
                out = v;
            } else if (!strcmp(a, "--arch")) {
                p.arch = v;
            } else if (!strcmp(a, "--type")) {
                p.type = cli_gen_type_by_name(v);
                if (p.type < 0) {
                    char tail[160];
                    snprintf(tail, sizeof tail, " (%s)", cli_gen_type_names());
                    return bad_usage("unknown type", v, tail);
                }
            } else if (!strcmp(a, "--seed")) {
                if (!cli_parse_u64(CMD, a, v, &p.seed)) return CLI_EXIT_USAGE;
            } else {
                p.vocab_from = v;
            }
            continue;
        }
        if (a[0] == '-') return bad_usage("unknown option", a, "");
        return bad_usage("unexpected argument", a, "");
    }
    if (!out) return bad_usage("missing -o FILE", NULL, "");
    if (p.n_expert == 0 && !top_k_given) p.n_expert_used = 0; /* a dense model */

    struct moeinf_error err = {0};
    if (moeinf_gen_params_check(&p, &err) != MOEINF_OK) { /* an impossible geometry: exit 2 */
        fprintf(stderr, "moeinf " CMD ": %s\n", err.msg);
        return CLI_EXIT_USAGE;
    }
    cli_remove_on_signal(out);
    enum moeinf_status gst = moeinf_gen_model(&p, out, &err);
    cli_remove_on_signal(NULL);
    if (gst != MOEINF_OK) return cli_fail(&err);
    struct stat st;
    long long size = stat(out, &st) == 0 ? (long long)st.st_size : -1;
    printf("wrote %s (%lld bytes): arch %s, %d layers, %d experts (top-%d), n_embd %d, n_ff %d, "
           "%d/%d heads, type %s, seed %llu\n",
           out, size, p.arch ? p.arch : "llama", p.n_layer, p.n_expert, p.n_expert_used, p.n_embd,
           p.n_ff, p.n_head, p.n_head_kv, cli_gen_type_name(p.type), (unsigned long long)p.seed);
    return CLI_EXIT_OK;
}
