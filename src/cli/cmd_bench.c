/* cmd_bench.c - moeinf bench: prefill and decode tokens/s (llama-bench's pp/tg tests).
 *
 * The work per call matches llama.cpp's eval without logits_all (what bench/llamacpp_bench.py
 * times): every prefill micro-batch and every decoded token ends with the final norm and the
 * lm_head for its last position, unless --no-logits. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli/cli.h"
#include "cli/model_args.h"

static void usage(FILE *out) {
    fprintf(out,
            "usage: moeinf bench [-m MODEL] [-p 64] [-n 32] [-r 3] [options]\n\n"
            "Prefill: a prompt of P tokens in a fresh context. Decode: N tokens one at a time\n"
            "after it. Each test runs once as a warm-up (discarded), then R times; the median\n"
            "is printed, with the decode rate against the weight bytes each token reads.\n"
            "Every prefill micro-batch (-b) and every decoded token computes the logits of its\n"
            "last position, as llama.cpp's eval does.\n"
            "  -p P          prompt tokens (default 64; 0 skips prefill)\n"
            "  -n N          decoded tokens (default 32; 0 skips decode)\n"
            "  -r R          repetitions (default 3)\n"
            "  --no-logits   stop before the final norm and the lm_head (less work than\n"
            "                llama.cpp does; the output says so)\n"
            "%s",
            model_args_help);
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a;
    double y = *(const double *)b;
    return (x > y) - (x < y);
}

int cmd_bench(int argc, char **argv) {
    struct model_args ma = {.ctx = moeinf_context_params_default(),
                            .model = moeinf_model_params_default()};
    long n_prompt = 64;
    long n_gen = 32;
    long reps = 3;
    bool ctx_set = false;
    bool no_logits = false;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage(stdout);
            return CLI_EXIT_OK;
        }
        if (!strcmp(a, "--no-logits")) {
            no_logits = true;
            continue;
        }
        if (!strcmp(a, "-c")) ctx_set = true;
        int r = model_args_parse("bench", &ma, argc, argv, &i);
        if (r < 0) return CLI_EXIT_USAGE;
        if (r > 0) continue;
        const char *val = NULL;
        long *dst = !strcmp(a, "-p") ? &n_prompt : !strcmp(a, "-n") ? &n_gen
                                                 : !strcmp(a, "-r") ? &reps : NULL;
        if (!dst) {
            fprintf(stderr, "moeinf bench: unknown argument '%s'\n", a);
            usage(stderr);
            return CLI_EXIT_USAGE;
        }
        if (!(val = cli_option_value("bench", argc, argv, &i))) return CLI_EXIT_USAGE;
        if (!cli_parse_long("bench", a, val, dst == &reps ? 1 : 0, 1 << 20, dst)) {
            return CLI_EXIT_USAGE;
        }
    }
    if (!ctx_set) ma.ctx.n_ctx = (int)(n_prompt + n_gen + 1);
    if (n_prompt + n_gen + 1 > ma.ctx.n_ctx) {
        fprintf(stderr, "moeinf bench: -p + -n must fit in the context (-c %d)\n", ma.ctx.n_ctx);
        return CLI_EXIT_USAGE;
    }
    struct moeinf_model *model = NULL;
    struct moeinf_context *ctx = NULL;
    if (!model_args_open(&ma, &model, &ctx)) return CLI_EXIT_FAIL;
    const int n_vocab = moeinf_model_n_vocab(model);
    int32_t *ids = malloc((size_t)(n_prompt + n_gen + 1) * sizeof *ids);
    double *t_pp = calloc((size_t)reps, sizeof(double));
    double *t_tg = calloc((size_t)reps, sizeof(double));
    float *logits = no_logits ? NULL : malloc((size_t)n_vocab * sizeof *logits);
    /* the context clamps its micro-batch to n_ctx, as this does */
    const long chunk = ma.ctx.n_batch < ma.ctx.n_ctx ? ma.ctx.n_batch : ma.ctx.n_ctx;
    struct moeinf_error err = {0};
    int rc = CLI_EXIT_FAIL;
    if (!ids || !t_pp || !t_tg || (!no_logits && !logits)) {
        snprintf(err.msg, sizeof err.msg, "out of memory");
        goto done;
    }
    uint64_t state = 0x9E3779B97F4A7C15ull; /* fixed token ids: every run reads the same */
    for (long i = 0; i < n_prompt + n_gen + 1; i++) {
        state = state * 6364136223846793005ull + 1442695040888963407ull;
        ids[i] = (int32_t)((state >> 33) % (uint64_t)n_vocab);
    }
    for (long r = -1; r < reps; r++) {
        moeinf_context_reset(ctx);
        double t0 = now_s();
        /* one call per micro-batch: moeinf_decode computes logits for its last one only */
        for (long i0 = 0; i0 < n_prompt; i0 += chunk) {
            int m = (int)(n_prompt - i0 < chunk ? n_prompt - i0 : chunk);
            if (moeinf_decode(ctx, &ids[i0], m, logits, false, &err)) goto done;
        }
        double t1 = now_s();
        for (long i = 0; i < n_gen; i++) {
            if (moeinf_decode(ctx, &ids[n_prompt + i], 1, logits, false, &err)) goto done;
        }
        double t2 = now_s();
        if (r >= 0) {
            t_pp[r] = t1 - t0;
            t_tg[r] = t2 - t1;
        }
    }
    qsort(t_pp, (size_t)reps, sizeof(double), cmp_double);
    qsort(t_tg, (size_t)reps, sizeof(double), cmp_double);
    char desc[256];
    moeinf_model_desc(model, desc, sizeof desc);
    double gb = (double)moeinf_model_decode_bytes(model) / 1e9;
    printf("model:    %s\n", desc);
    printf("threads:  %d, kernels %s, decode reads %.3f GB of weights per token\n",
           moeinf_context_n_threads(ctx), moeinf_context_kernels(ctx), gb);
    if (no_logits) {
        printf("logits:   none (--no-logits: no final norm and lm_head, less work than "
               "llama.cpp's eval)\n");
    } else {
        printf("logits:   last position of every prefill micro-batch (-b %ld) and every decoded "
               "token\n",
               chunk);
    }
    printf("%-8s %8s %10s %12s\n", "test", "tokens", "seconds", "tokens/s");
    double pp = t_pp[reps / 2];
    double tg = t_tg[reps / 2];
    if (n_prompt > 0)
        printf("%-8s %8ld %10.4f %12.2f\n", "prefill", n_prompt, pp, (double)n_prompt / pp);
    if (n_gen > 0) {
        printf("%-8s %8ld %10.4f %12.2f\n", "decode", n_gen, tg, (double)n_gen / tg);
        if (no_logits) {
            printf("decode weight traffic: not given with --no-logits (the byte count includes "
                   "the lm_head)\n");
        } else {
            printf("decode weight traffic: %.2f GB/s\n", gb * (double)n_gen / tg);
        }
    }
    rc = CLI_EXIT_OK;
done:
    if (rc != CLI_EXIT_OK) cli_fail(&err);
    free(ids);
    free(t_pp);
    free(t_tg);
    free(logits);
    moeinf_context_free(ctx);
    moeinf_model_free(model);
    return rc;
}
