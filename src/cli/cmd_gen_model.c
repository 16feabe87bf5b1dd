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
                 "'qwen2moe' (a shared expert, q/k/v biases), 'qwen3moe' (per-head q/k\n"
                 "norm), 'olmoe' (q/k norm over the whole projection), 'gpt-oss' (biases,\n"
                 "attention sinks, a sliding window, YaRN), 'deepseek2' (multi-head latent\n"
                 "attention in the split attn_k_b/attn_v_b layout, leading dense layers,\n"
                 "shared experts, YaRN), 'glm4moe' (q/k/v biases, partial RoPE, leading dense\n"
                 "layers, a shared expert, next-token-prediction blocks), or the hybrid\n"
                 "'qwen35moe' and 'qwen3next' (Gated DeltaNet layers, a gated full-attention\n"
                 "layer every --full-attn-interval, a shared expert). The file is generated\n"
                 "tensor by tensor, so memory stays small whatever its size; the same options\n"
                 "and seed give the same bytes.\n"
                 "\n"
                 "  -o, --output FILE     where to write (required, unless --list)\n"
                 "  --list                print the tensors it would write (name, type, shape,\n"
                 "                        bytes) and their total, and write nothing\n"
                 "  --preset NAME         start from a geometry and arch: default, mixtral-8x7b\n"
                 "                        (llama), olmoe-1b-7b (olmoe), qwen3-30b-a3b\n"
                 "                        (qwen3moe), qwen1.5-moe-a2.7b (qwen2moe),\n"
                 "                        qwen3.6-35b-a3b (qwen35moe), qwen3-next-80b-a3b\n"
                 "                        (qwen3next), gpt-oss-20b and gpt-oss-120b (gpt-oss,\n"
                 "                        --type mxfp4_moe), deepseek-v2-lite, deepseek-v3 and\n"
                 "                        kimi-k2 (deepseek2), glm-4.5-air (glm4moe); later\n"
                 "                        options override it\n"
                 "  --arch NAME           llama, qwen2moe, qwen3moe, olmoe, qwen35moe,\n"
                 "                        qwen3next, gpt-oss, deepseek2 or glm4moe\n"
                 "  --layers N            transformer blocks\n"
                 "  --experts N           routed experts per layer (0 = dense)\n"
                 "  --top-k N             experts used per token\n"
                 "  --shared-experts N    shared experts: the one shared FFN of qwen2moe,\n"
                 "                        qwen35moe, qwen3next, deepseek2 and glm4moe is\n"
                 "                        N x --ff wide (N >= 1); 0 for the others\n"
                 "  --embd N              model width\n"
                 "  --ff N                FFN width of one expert\n"
                 "  --heads N             query heads\n"
                 "  --kv-heads N          key/value heads\n"
                 "  --head-dim N          head dimension (default embd / heads)\n"
                 "  --ctx N               training context length written to the metadata\n"
                 "  --vocab-size N        pad the vocabulary with unused tokens to N (default:\n"
                 "                        its own size; --vocab-from's file keeps its size)\n"
                 "qwen35moe and qwen3next only:\n"
                 "  --rope-dims N         rotary dims of the full-attention heads (default: all)\n"
                 "  --linear-key-heads N  Gated DeltaNet key heads\n"
                 "  --linear-value-heads N\n"
                 "                        value heads (a multiple of the key heads)\n"
                 "  --linear-head-dim N   key and value head dimension\n"
                 "  --conv-kernel N       causal conv1d width (default 4)\n"
                 "  --full-attn-interval N\n"
                 "                        every Nth layer is full attention (default 4)\n"
                 "gpt-oss only:\n"
                 "  --sliding-window N    attention window of layers 0, 2, 4, .. (default 128)\n"
                 "deepseek2 and glm4moe only (--rope-dims: default half the head):\n"
                 "  --dense-layers N      the first N layers have a dense FFN (default 0)\n"
                 "  --dense-ff N          its width\n"
                 "  --expert-groups N     expert groups (default 0: no group keys written)\n"
                 "  --groups-used N       groups kept per token\n"
                 "  --nextn N             glm4moe: prediction blocks after --layers (default 0)\n"
                 "  --q-lora N            deepseek2: query rank (default 0: plain attn_q)\n"
                 "  --kv-lora N           deepseek2: latent KV width (default 512)\n"
                 "  --v-head-dim N        deepseek2: value head dim (default 128); --head-dim\n"
                 "                        is the query/key head, rotary dims included\n"
                 "  --type T              f32, f16, q8_0, q4_0, q4_1, q5_0, q5_1, q2_k, q3_k,\n"
                 "                        q4_k, q5_k, q6_k, iq4_nl, iq4_xs or mxfp4 for every big\n"
                 "                        matrix (norms and router stay f32), or a mix of\n"
                 "                        llama-quantize's: q4_k_m, or mxfp4_moe (experts\n"
                 "                        mxfp4, the other matrices q8_0). The iq4 types are\n"
                 "                        quantized simply, not as llama-quantize does: each\n"
                 "                        weight the nearest codebook value for a scale set by\n"
                 "                        its block's largest weight; mxfp4 codes are drawn at\n"
                 "                        random as a normal weight's nearest E2M1 value, under\n"
                 "                        one E8M0 scale per tensor\n"
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

/* --list: one line per tensor, then the total. */
struct list_state {
    uint64_t bytes;
    int n;
};

static void list_tensor(void *user, const char *name, int type, int n_dims, const int64_t ne[3]) {
    struct list_state *ls = user;
    uint64_t rows = (uint64_t)ne[1] * (uint64_t)ne[2];
    uint64_t bytes = cli_tensor_row_bytes(type, ne[0]) * rows;
    ls->bytes += bytes;
    ls->n++;
    printf("%-40s %-6s %d [%lld, %lld, %lld] %llu\n", name, cli_tensor_type_name(type), n_dims,
           (long long)ne[0], (long long)ne[1], (long long)ne[2], (unsigned long long)bytes);
}

/* The deepseek2 and glm4moe presets (the published config.json of each). */
static bool apply_preset_ds(const char *name, struct moeinf_gen_params *p) {
    if (!strcmp(name, "deepseek-v2-lite")) { /* deepseek-ai/DeepSeek-V2-Lite's config.json */
        p->arch = "deepseek2";
        p->n_layer = 27;
        p->n_dense_lead = 1;
        p->n_ff_dense = 10944;
        p->n_expert = 64;
        p->n_expert_used = 6;
        p->n_expert_shared = 2;
        p->n_embd = 2048;
        p->n_ff = 1408;
        p->n_head = 16;
        p->n_head_kv = 1;
        p->n_embd_head = 192; /* qk_nope 128 + qk_rope 64 */
        p->n_rot = 64;
        p->q_lora_rank = 0;
        p->kv_lora_rank = 512;
        p->v_head_dim = 128;
        p->expert_gating = 1; /* softmax, greedy top-6, weights neither normed nor scaled */
        p->expert_weights_scale = 1.0f;
        p->expert_weights_norm = false;
        p->n_expert_groups = 1;
        p->n_group_used = 1;
        p->rope_freq_base = 10000.0f;
        p->rope_yarn_factor = 40.0f;
        p->rope_yarn_orig_ctx = 4096;
        p->rope_yarn_log_mul = 0.0707f; /* 0.1 x mscale_all_dim 0.707 */
        p->n_ctx_train = 163840;
        p->n_vocab = 102400;
        p->rms_eps = 1e-6f;
        return true;
    }
    if (!strcmp(name, "deepseek-v3") || !strcmp(name, "kimi-k2")) {
        const bool kimi = !strcmp(name, "kimi-k2"); /* moonshotai/Kimi-K2-Instruct */
        p->arch = "deepseek2";
        p->n_layer = 61;
        p->n_dense_lead = kimi ? 1 : 3;
        p->n_ff_dense = 18432;
        p->n_expert = kimi ? 384 : 256;
        p->n_expert_used = 8;
        p->n_expert_shared = 1;
        p->n_embd = 7168;
        p->n_ff = 2048;
        p->n_head = kimi ? 64 : 128;
        p->n_head_kv = 1;
        p->n_embd_head = 192;
        p->n_rot = 64;
        p->q_lora_rank = 1536;
        p->kv_lora_rank = 512;
        p->v_head_dim = 128;
        p->expert_gating = 2; /* sigmoid with e_score_correction_bias (exp_probs_b) */
        p->expert_weights_scale = kimi ? 2.827f : 2.5f;
        p->expert_weights_norm = true;
        p->n_expert_groups = kimi ? 1 : 8;
        p->n_group_used = kimi ? 1 : 4;
        p->rope_freq_base = kimi ? 50000.0f : 10000.0f;
        p->rope_yarn_factor = kimi ? 32.0f : 40.0f;
        p->rope_yarn_orig_ctx = 4096;
        p->rope_yarn_log_mul = 0.1f; /* 0.1 x mscale_all_dim 1.0 */
        p->n_ctx_train = kimi ? 131072 : 163840;
        p->n_vocab = kimi ? 163840 : 129280;
        p->rms_eps = 1e-6f;
        return true;
    }
    if (!strcmp(name, "glm-4.5-air")) { /* zai-org/GLM-4.5-Air's config.json */
        p->arch = "glm4moe";
        p->n_layer = 46;
        p->n_nextn = 1;
        p->n_dense_lead = 1;
        p->n_ff_dense = 10944;
        p->n_expert = 128;
        p->n_expert_used = 8;
        p->n_expert_shared = 1;
        p->n_embd = 4096;
        p->n_ff = 1408;
        p->n_head = 96;
        p->n_head_kv = 8;
        p->n_embd_head = 128;
        p->n_rot = 64; /* partial_rotary_factor 0.5 */
        p->expert_gating = 2;
        p->expert_weights_scale = 1.0f;
        p->expert_weights_norm = true;
        p->rope_freq_base = 1e6f;
        p->n_ctx_train = 131072;
        p->n_vocab = 151552;
        p->rms_eps = 1e-5f;
        return true;
    }
    return false;
}

bool cli_gen_preset(const char *name, struct moeinf_gen_params *p) {
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
    if (!strcmp(name, "qwen3.6-35b-a3b") || !strcmp(name, "qwen3-next-80b-a3b")) {
        const bool next = !strcmp(name, "qwen3-next-80b-a3b");
        p->arch = next ? "qwen3next" : "qwen35moe";
        p->n_layer = next ? 48 : 40;
        p->n_expert = next ? 512 : 256;
        p->n_expert_used = next ? 10 : 8;
        p->n_expert_shared = 1; /* one shared expert as wide as a routed one (512) */
        p->n_embd = 2048;
        p->n_ff = 512;
        p->n_head = 16;
        p->n_head_kv = 2;
        p->n_embd_head = 256;
        p->n_rot = 64; /* partial_rotary_factor 0.25; qwen35moe's sections default to
                          [11, 11, 10, 0], its mrope_section */
        p->ssm_d_conv = 4;
        p->ssm_d_state = 128;
        p->ssm_n_group = 16;
        p->ssm_dt_rank = 32;
        p->full_attn_interval = 4;
        p->n_vocab = next ? 151936 : 248320;
        p->n_ctx_train = 262144;
        p->rope_freq_base = 1e7f;
        p->rms_eps = 1e-6f;
        return true;
    }
    if (!strcmp(name, "gpt-oss-20b") || !strcmp(name, "gpt-oss-120b")) {
        const bool big = !strcmp(name, "gpt-oss-120b");
        p->arch = "gpt-oss";
        p->n_layer = big ? 36 : 24;
        p->n_expert = big ? 128 : 32;
        p->n_expert_used = 4;
        p->n_embd = 2880;
        p->n_ff = 2880;
        p->n_head = 64;
        p->n_head_kv = 8;
        p->n_embd_head = 64;
        p->n_vocab = 201088; /* o200k_harmony, padded */
        p->n_ctx_train = 131072;
        p->rope_freq_base = 150000.0f;
        p->rms_eps = 1e-5f;
        p->n_swa = 128;
        p->rope_yarn_factor = 32.0f;
        p->rope_yarn_orig_ctx = 4096;
        p->type = MOEINF_GEN_TYPE_MXFP4_MOE; /* as ggml-org's gpt-oss-*-mxfp4.gguf */
        return true;
    }
    return apply_preset_ds(name, p);
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
    {"--vocab-size", 0, 1 << 22, offsetof(struct moeinf_gen_params, n_vocab)},
    {"--rope-dims", 0, 65536, offsetof(struct moeinf_gen_params, n_rot)},
    {"--linear-key-heads", 1, 4096, offsetof(struct moeinf_gen_params, ssm_n_group)},
    {"--linear-value-heads", 1, 4096, offsetof(struct moeinf_gen_params, ssm_dt_rank)},
    {"--linear-head-dim", 1, 4096, offsetof(struct moeinf_gen_params, ssm_d_state)},
    {"--conv-kernel", 1, 64, offsetof(struct moeinf_gen_params, ssm_d_conv)},
    {"--full-attn-interval", 1, 4096, offsetof(struct moeinf_gen_params, full_attn_interval)},
    {"--sliding-window", 1, 1 << 24, offsetof(struct moeinf_gen_params, n_swa)},
    {"--dense-layers", 0, 4096, offsetof(struct moeinf_gen_params, n_dense_lead)},
    {"--dense-ff", 1, 1 << 20, offsetof(struct moeinf_gen_params, n_ff_dense)},
    {"--expert-groups", 0, 4096, offsetof(struct moeinf_gen_params, n_expert_groups)},
    {"--groups-used", 0, 4096, offsetof(struct moeinf_gen_params, n_group_used)},
    {"--nextn", 0, 16, offsetof(struct moeinf_gen_params, n_nextn)},
    {"--q-lora", 0, 1 << 20, offsetof(struct moeinf_gen_params, q_lora_rank)},
    {"--kv-lora", 1, 1 << 20, offsetof(struct moeinf_gen_params, kv_lora_rank)},
    {"--v-head-dim", 1, 65536, offsetof(struct moeinf_gen_params, v_head_dim)},
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
            if (!cli_gen_preset(v, &p)) return bad_usage("unknown preset", v, "");
        }
    }
    bool top_k_given = false;
    bool list = false;
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
        if (!strcmp(a, "--list")) {
            list = true;
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
    if (!out && !list) return bad_usage("missing -o FILE", NULL, "");
    if (p.n_expert == 0 && !top_k_given) p.n_expert_used = 0; /* a dense model */

    struct moeinf_error err = {0};
    if (moeinf_gen_params_check(&p, &err) != MOEINF_OK) { /* an impossible geometry: exit 2 */
        fprintf(stderr, "moeinf " CMD ": %s\n", err.msg);
        return CLI_EXIT_USAGE;
    }
    if (list) {
        struct list_state ls = {0};
        if (moeinf_gen_model_tensors(&p, list_tensor, &ls, &err) != MOEINF_OK)
            return cli_fail(&err);
        printf("%d tensors, %llu bytes of weights\n", ls.n, (unsigned long long)ls.bytes);
        return CLI_EXIT_OK;
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
