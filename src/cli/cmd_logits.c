/* cmd_logits.c - moeinf logits: every position's logits of one prompt, raw float32. */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "app/expert_args.h"
#include "app/grow.h"
#include "app/param_flags.h"
#include "app/text_file.h"
#include "cli/cli.h"

static void usage(FILE *out) {
    fprintf(out,
            "usage: moeinf logits -m MODEL (--ids \"ID ID ...\" | -f TEXT_FILE) -o FILE\n"
            "                     [--kv-type f16|f32] [-t N] [-c N] [-b N]\n\n"
            "Evaluates the ids as one prompt in a fresh context and writes (replacing FILE\n"
            "atomically at the end; a failed run leaves it as it was) the logits of every\n"
            "position: n_ids x n_vocab float32, little-endian, row-major, no header.\n"
            "  --ids \"ID ...\" the prompt as token ids\n"
            "  -f FILE       (--file) the prompt as the tokens of FILE's text, BOS as the\n"
            "                model asks (- for standard input; one final newline dropped)\n"
            "  -o FILE       the output; it may not be -m's, -f's or --stats-json's file\n"
            "  --kv-type T   KV cache type (default f16)\n"
            "  -t N          threads (default: the CPUs this process may use)\n"
            "  -c N          context size (default: the number of ids)\n"
            "  -b N          prefill micro-batch (default 512)\n"
            "%s",
            expert_args_help);
}

/* Parses "1 2 3" into a malloc'ed array; on a bad id prints which and returns false. */
static bool parse_ids(const char *s, int32_t **out, int *n_out) {
    size_t cap = 0;
    size_t n = 0;
    int32_t *ids = moeinf_grow(NULL, &cap, 1, sizeof *ids);
    if (!ids) return false;
    const char *p = s;
    for (;;) {
        while (*p == ' ' || *p == '\t' || *p == ',')
            p++;
        if (!*p) break;
        char *end = NULL;
        errno = 0;
        long v = strtol(p, &end, 10);
        if (end == p || errno == ERANGE || v < 0 || v > INT32_MAX ||
            (*end && *end != ' ' && *end != '\t' && *end != ',')) {
            int len = (int)strcspn(p, " \t,");
            fprintf(stderr, "moeinf logits: --ids: '%.*s' is not a token id\n", len > 40 ? 40 : len,
                    p);
            free(ids);
            return false;
        }
        int32_t *grown = moeinf_grow(ids, &cap, n + 1, sizeof *ids);
        if (!grown) {
            free(ids);
            return false;
        }
        ids = grown;
        ids[n++] = (int32_t)v;
        p = end;
    }
    *out = ids;
    *n_out = (int)n;
    return true;
}

struct logits_opts {
    const char *model_path;
    const char *ids_arg;
    const char *text_path; /* -f FILE */
    const char *out_path;
    struct moeinf_context_params cp;
    struct moeinf_model_params mp;
    struct expert_args ea;
};

/* Returns -1 after --help, CLI_EXIT_USAGE on a bad argument (message printed), else 0. */
static int parse(int argc, char **argv, struct logits_opts *o) {
    long v;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *val = NULL;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage(stdout);
            return -1;
        }
        int er = expert_args_parse("logits", &o->ea, argc, argv, &i);
        if (er < 0) return CLI_EXIT_USAGE;
        if (er > 0) continue;
        if (!strcmp(a, "-m") || !strcmp(a, "--ids") || !strcmp(a, "-o") || !strcmp(a, "-f") ||
            !strcmp(a, "--file") || !strcmp(a, "--kv-type") || !strcmp(a, "-t") ||
            !strcmp(a, "-c") || !strcmp(a, "-b")) {
            if (!(val = cli_option_value("logits", argc, argv, &i))) return CLI_EXIT_USAGE;
        } else {
            fprintf(stderr, "moeinf logits: unknown argument '%s'\n", a);
            usage(stderr);
            return CLI_EXIT_USAGE;
        }
        if (!strcmp(a, "-m")) {
            o->model_path = val;
        } else if (!strcmp(a, "--ids")) {
            o->ids_arg = val;
        } else if (!strcmp(a, "-f") || !strcmp(a, "--file")) {
            o->text_path = val;
        } else if (!strcmp(a, "-o")) {
            o->out_path = val;
        } else if (!strcmp(a, "--kv-type")) {
            if (!strcmp(val, "f16")) {
                o->cp.kv_type = MOEINF_KV_F16;
            } else if (!strcmp(val, "f32")) {
                o->cp.kv_type = MOEINF_KV_F32;
            } else {
                fprintf(stderr, "moeinf logits: --kv-type must be f16 or f32, not '%s'\n", val);
                return CLI_EXIT_USAGE;
            }
        } else if (!strcmp(a, "-t")) {
            if (!cli_parse_long("logits", a, val, INT_MIN, INT_MAX, &v)) return CLI_EXIT_USAGE;
            o->cp.n_threads = (int)v;
        } else if (!strcmp(a, "-c")) {
            if (!cli_parse_long("logits", a, val, INT_MIN, INT_MAX, &v)) return CLI_EXIT_USAGE;
            o->cp.n_ctx = (int)v;
        } else if (!strcmp(a, "-b")) {
            if (!cli_parse_long("logits", a, val, INT_MIN, INT_MAX, &v)) return CLI_EXIT_USAGE;
            o->cp.n_batch = (int)v;
        }
    }
    return 0;
}

/* The prompt of -f: the tokens of the file's text (BOS as the model asks). */
static enum moeinf_status file_ids(const struct moeinf_model *model, const char *path,
                                   int32_t **ids, int *n, struct moeinf_error *err) {
    char *text = NULL;
    size_t len = 0;
    size_t count = 0;
    enum moeinf_status st = cli_read_text_file(path, &text, &len, err);
    if (st == MOEINF_OK) st = moeinf_tokenize(model, text, len, true, false, ids, &count, err);
    free(text);
    if (st == MOEINF_OK && (count == 0 || count > INT32_MAX)) {
        free(*ids);
        *ids = NULL;
        snprintf(err->msg, sizeof err->msg, "%s: %s", path,
                 count ? "too many tokens" : "no tokens (an empty text and no BOS)");
        return MOEINF_ERR_ARG;
    }
    *n = (int)count;
    return st;
}

int cmd_logits(int argc, char **argv) {
    struct logits_opts o = {.cp = moeinf_context_params_default(),
                            .mp = moeinf_model_params_default()};
    o.cp.n_ctx = 0;
    int prc = parse(argc, argv, &o);
    if (prc < 0) return CLI_EXIT_OK;
    if (prc > 0) return prc;
    const char *model_path = o.model_path;
    const char *out_path = o.out_path;
    struct moeinf_context_params cp = o.cp;
    struct moeinf_model_params mp = o.mp;
    struct expert_args ea = o.ea;
    if (o.ids_arg && o.text_path) {
        fprintf(stderr, "moeinf logits: --ids and -f both give the prompt: use one\n");
        return CLI_EXIT_USAGE;
    }
    if (!model_path || (!o.ids_arg && !o.text_path) || !out_path) {
        usage(stderr);
        return CLI_EXIT_USAGE;
    }
    if (ea.eamc) {
        fprintf(stderr, "moeinf logits: --eamc is for run, chat, bench and serve\n");
        return CLI_EXIT_USAGE;
    }
    int32_t *ids = NULL;
    int n = 0;
    if (o.ids_arg) {
        if (!parse_ids(o.ids_arg, &ids, &n)) return CLI_EXIT_USAGE;
        if (n == 0) {
            free(ids);
            fprintf(stderr, "moeinf logits: --ids must be a non-empty list of token ids\n");
            return CLI_EXIT_USAGE;
        }
        if (cp.n_ctx == 0) cp.n_ctx = n;
    }
    const int n_ctx_asked = cp.n_ctx;
    if (cp.n_ctx == 0) cp.n_ctx = 1; /* -f: the prompt's length, once it is known */
    int arc = expert_args_apply("logits", &ea, &mp, &cp);
    if (arc != CLI_EXIT_OK) {
        free(ids);
        return arc;
    }
    /* the outputs are written after the work: checked now, also against the inputs */
    struct cli_file outputs[3] = {{"-o", out_path}};
    expert_args_outputs(&ea, outputs + 1);
    const char *text_in = o.text_path && strcmp(o.text_path, "-") != 0 ? o.text_path : NULL;
    const struct cli_file inputs[2] = {{"-m", model_path}, {"-f", text_in}};
    arc = cli_check_outputs("logits", outputs, 3, inputs, 2);
    if (arc == CLI_EXIT_OK) arc = expert_args_check_cache("logits", model_path, &cp);
    if (arc != CLI_EXIT_OK) {
        free(ids);
        return arc;
    }
    struct moeinf_error err = {0};
    struct moeinf_model *model = NULL;
    struct moeinf_context *ctx = NULL;
    float *logits = NULL;
    int rc = CLI_EXIT_FAIL;
    double t0 = 0.0;
    if (moeinf_model_load(model_path, &mp, &model, &err) != MOEINF_OK) goto done;
    if (o.text_path) {
        if (file_ids(model, o.text_path, &ids, &n, &err) != MOEINF_OK) goto done;
        cp.n_ctx = n_ctx_asked ? n_ctx_asked : n;
    }
    size_t n_vocab = (size_t)moeinf_model_n_vocab(model);
    for (int i = 0; i < n; i++) { /* a bad id is a bad option value, whatever its size */
        if ((size_t)ids[i] >= n_vocab) {
            fprintf(stderr,
                    "moeinf logits: --ids: token id %d is outside the vocabulary [0, %zu)\n",
                    ids[i], n_vocab);
            rc = CLI_EXIT_USAGE;
            goto done;
        }
    }
    if (moeinf_context_init(model, &cp, &ctx, &err) != MOEINF_OK) goto done;
    if (ea.cache) expert_args_announce(ctx);
    t0 = cli_now();
    logits = malloc((size_t)n * n_vocab * sizeof(float));
    if (!logits) {
        snprintf(err.msg, sizeof err.msg, "out of memory for %d x %zu logits", n, n_vocab);
        goto done;
    }
    if (moeinf_decode(ctx, ids, n, logits, true, &err) != MOEINF_OK) goto done;
    double seconds = cli_now() - t0;
    /* a temp file renamed over out_path when complete: a failure leaves the old file */
    if (moeinf_file_write_atomic(out_path, logits, (size_t)n * n_vocab * sizeof(float), &err) !=
        MOEINF_OK) {
        goto done;
    }
    rc = CLI_EXIT_OK;
    if (!expert_args_report(&ea, ctx, seconds)) rc = CLI_EXIT_FAIL; /* message out */
done:
    if (rc != CLI_EXIT_OK && err.msg[0]) cli_param_fail("logits", &err, rc);
    expert_args_close(&ea);
    free(logits);
    free(ids);
    moeinf_context_free(ctx);
    moeinf_model_free(model);
    return rc;
}
