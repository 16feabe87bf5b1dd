/* cmd_bench.c - moeinf bench: prefill and decode tokens/s (llama-bench's pp/tg tests).
 *
 * The work per call matches llama.cpp's eval without logits_all (what bench/llamacpp_bench.py
 * times): every prefill micro-batch and every decoded token ends with the final norm and the
 * lm_head for its last position, unless --no-logits. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "app/model_args.h"
#include "app/text_file.h"
#include "cli/bench.h"
#include "cli/cli.h"

static void usage(FILE *out) {
    fprintf(out,
            "usage: moeinf bench [-m MODEL] [-p 64 | -f FILE] [-n 32] [-r 3] [options]\n\n"
            "Prefill: a prompt of P tokens in a fresh context. Decode: N tokens one at a time\n"
            "after it. Each test runs once as a warm-up (discarded), then R times; the median\n"
            "is printed, with the decode rate against the weight bytes each token reads.\n"
            "Every prefill micro-batch (-b) and every decoded token computes the logits of its\n"
            "last position, as llama.cpp's eval does.\n"
            "  -p P          prompt tokens (default 64; 0 skips prefill)\n"
            "  -f FILE       (--file) the prompt: the tokens of FILE's text (- for standard\n"
            "                input; one final newline dropped) instead of P pseudo-random\n"
            "                ids; P is their count. Every run feeds the same prompt\n"
            "  -n N          decoded tokens (default 32; 0 skips decode)\n"
            "  -r R          repetitions (default 3)\n"
            "  --no-logits   stop before the final norm and the lm_head (less work than\n"
            "                llama.cpp does; the output says so)\n"
            "With --parallel N (1 .. 256), N sequences in one context decode together: each\n"
            "its own P-token prompt (pseudo-random ids, or -f's tokens rotated per\n"
            "sequence), the prompts packed into iterations of -b tokens, then N tokens per\n"
            "iteration, one per sequence; -c is the total (default N x (P + N + 1)). It\n"
            "prints aggregate and per-sequence tokens/s, and the expert cache's figures per\n"
            "token of all sequences. Not with --record-routing or --route-trace.\n"
            "With --expert-cache, every run (the first included) feeds different token ids,\n"
            "so that repeated identical prompts do not flatter the cache; the first run is\n"
            "reported as cold and the median of the other R as warm, with the cache's hit\n"
            "ratio, demand misses, MiB read, read seconds and stall seconds per token of each.\n"
            "  --record-routing F  write the expert routing of every run (the warm-up\n"
            "                      included, one request each) to F as a moe-trace v1 file,\n"
            "                      so that `moeinf sim` replays the runs' exact accesses\n"
            "                      (e.g. --policy belady for the fewest misses possible);\n"
            "                      written atomically at the end (also when SIGINT/SIGTERM\n"
            "                      stops the runs; a failed run leaves F as it was)\n"
            "Routing replay (a cache study on real routing):\n"
            "  --route-trace FILE     run requests of a moe-trace v1 file (what `moeinf sim`\n"
            "                         reads), each once, in file order, in one context: its\n"
            "                         prompt and decode lengths, bench's pseudo-random token\n"
            "                         ids, and the recorded experts instead of the router's\n"
            "                         choice (mixed with the router's own probabilities of\n"
            "                         them). The trace's MoE layers, experts and top-k must be\n"
            "                         the model's (`moeinf gen-model` makes such a model).\n"
            "                         Not with -p, -f, -n or -r. Gate lookahead is off (the\n"
            "                         model's routers did not make the recorded choices)\n"
            "  --trace-requests A-B   only the requests at positions A..B in the file (from 0;\n"
            "                         or A: that one). Default: all\n"
            "%s",
            model_args_help);
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* The expert cache's figures of the cold run and of the warm run whose time is the median
 * (pp, tg: the median prefill and decode times). */
static void print_cache_table(const struct phase_stats cold[2], const struct phase_stats *warm,
                              long reps, long n_prompt, long n_gen, double pp, double tg) {
    printf("expert cache, per token: cold = the first run, warm = the median run of %ld\n", reps);
    printf("%-13s %8s %10s %10s %8s %10s %9s %11s %11s\n", "test", "tokens", "seconds", "tokens/s",
           "hit", "misses", "MiB read", "read s", "stall s");
    for (int ph = 0; ph < 2; ph++) {
        long n_tok = ph == 0 ? n_prompt : n_gen;
        if (n_tok == 0) continue;
        const char *name = ph == 0 ? "prefill" : "decode";
        bench_phase_stats_print(name, "cold", &cold[ph], n_tok);
        double med = ph == 0 ? pp : tg;
        for (long r = 0; r < reps; r++) {
            if (warm[2 * r + ph].seconds == med) {
                bench_phase_stats_print(name, "warm", &warm[2 * r + ph], n_tok);
                break;
            }
        }
    }
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a;
    double y = *(const double *)b;
    return (x > y) - (x < y);
}

struct bench_opts {
    struct model_args ma;
    long n_prompt, n_gen, reps;
    bool ctx_set, no_logits;
    const char *lengths_opt;    /* the first of -p, -f, -n, -r given, or NULL */
    const char *prompt_file;    /* -f FILE, or NULL */
    bool prompt_set;            /* -p given */
    const char *route_trace;    /* --route-trace FILE, or NULL */
    const char *record_path;    /* --record-routing FILE, or NULL */
    const char *trace_requests; /* --trace-requests A-B as given, or NULL */
    int64_t first, last;        /* its positions (last -1: to the end) */
    long n_par;                 /* --parallel N, or 0 */
};

/* --trace-requests "A-B" (A <= B) or "A" into [first, last]; false (message printed) if bad. */
static bool parse_positions(const char *s, int64_t *first, int64_t *last) {
    const char *dash = strchr(s, '-');
    char a[32];
    size_t n = dash ? (size_t)(dash - s) : strlen(s);
    long va = 0;
    long vb = 0;
    if (n > 0 && n < sizeof a) {
        memcpy(a, s, n);
        a[n] = '\0';
        char *end = NULL;
        va = strtol(a, &end, 10);
        bool ok = *end == '\0' && a[0] >= '0' && a[0] <= '9' && va < INT32_MAX;
        vb = va;
        if (ok && dash) {
            vb = strtol(dash + 1, &end, 10);
            ok = dash[1] >= '0' && dash[1] <= '9' && *end == '\0' && vb < INT32_MAX;
        }
        if (ok && vb >= va) {
            *first = va;
            *last = vb;
            return true;
        }
    }
    fprintf(stderr,
            "moeinf bench: invalid value '%s' for --trace-requests: expected A-B (positions in "
            "the file, from 0, A <= B) or A\n",
            s);
    return false;
}

/* Returns -1 after --help, CLI_EXIT_USAGE on a bad argument (message printed), else 0. */
static int parse(int argc, char **argv, struct bench_opts *o) {
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage(stdout);
            return -1;
        }
        if (!strcmp(a, "--no-logits")) {
            o->no_logits = true;
            continue;
        }
        if (!strcmp(a, "--parallel")) {
            const char *v = cli_option_value("bench", argc, argv, &i);
            if (!v || !cli_parse_long("bench", a, v, 1, MOEINF_SEQ_MAX, &o->n_par)) {
                return CLI_EXIT_USAGE;
            }
            continue;
        }
        if (!strcmp(a, "-f") || !strcmp(a, "--file")) {
            if (!(o->prompt_file = cli_option_value("bench", argc, argv, &i))) {
                return CLI_EXIT_USAGE;
            }
            if (!o->lengths_opt) o->lengths_opt = a;
            continue;
        }
        if (!strcmp(a, "--route-trace") || !strcmp(a, "--trace-requests") ||
            !strcmp(a, "--record-routing")) {
            const char *v = cli_option_value("bench", argc, argv, &i);
            if (!v) return CLI_EXIT_USAGE;
            if (!strcmp(a, "--route-trace")) {
                o->route_trace = v;
            } else if (!strcmp(a, "--record-routing")) {
                o->record_path = v;
            } else {
                o->trace_requests = v;
                if (!parse_positions(v, &o->first, &o->last)) return CLI_EXIT_USAGE;
            }
            continue;
        }
        if (!strcmp(a, "-c")) o->ctx_set = true;
        int r = model_args_parse("bench", &o->ma, argc, argv, &i);
        if (r < 0) return CLI_EXIT_USAGE;
        if (r > 0) continue;
        const char *val = NULL;
        long *dst = !strcmp(a, "-p")   ? &o->n_prompt
                    : !strcmp(a, "-n") ? &o->n_gen
                    : !strcmp(a, "-r") ? &o->reps
                                       : NULL;
        if (!dst) {
            fprintf(stderr, "moeinf bench: unknown argument '%s'\n", a);
            usage(stderr);
            return CLI_EXIT_USAGE;
        }
        if (!o->lengths_opt) o->lengths_opt = a;
        if (dst == &o->n_prompt) o->prompt_set = true;
        if (!(val = cli_option_value("bench", argc, argv, &i))) return CLI_EXIT_USAGE;
        if (!cli_parse_long("bench", a, val, dst == &o->reps ? 1 : 0, 1 << 20, dst)) {
            return CLI_EXIT_USAGE;
        }
    }
    if (o->prompt_set && o->prompt_file) {
        fprintf(stderr, "moeinf bench: -p and -f both give the prompt: use one\n");
        return CLI_EXIT_USAGE;
    }
    if (o->trace_requests && !o->route_trace) {
        fprintf(stderr, "moeinf bench: --trace-requests needs --route-trace\n");
        return CLI_EXIT_USAGE;
    }
    if (o->route_trace && o->record_path) {
        fprintf(stderr, "moeinf bench: --record-routing does not go with --route-trace: the "
                        "routing is the trace's\n");
        return CLI_EXIT_USAGE;
    }
    if (o->n_par && (o->route_trace || o->record_path)) {
        fprintf(stderr, "moeinf bench: --parallel does not go with %s: %s\n",
                o->route_trace ? "--route-trace" : "--record-routing",
                o->route_trace ? "the trace's requests run one at a time"
                               : "the routing record follows one sequence");
        return CLI_EXIT_USAGE;
    }
    if (o->route_trace && o->lengths_opt) {
        fprintf(stderr,
                "moeinf bench: %s does not go with --route-trace: the trace gives each "
                "request's prompt and decode lengths, and each request runs once\n",
                o->lengths_opt);
        return CLI_EXIT_USAGE;
    }
    return 0;
}

/* The progress line of run r's decode (the warm-up is run 1 of reps + 1); cleared at its end. */
static void decode_progress(struct cli_progress *p, long r, long reps, long done, long total,
                            double seconds) {
    char label[64];
    snprintf(label, sizeof label, "bench run %ld/%ld, decode", r + 2, reps + 1);
    cli_progress_tokens(p, label, done, total, seconds);
}

/* The runs' prefill and decode seconds (sorted by print_summary). */
struct run_times {
    double *pp, *tg;
    long reps, n_prompt, n_gen;
};

/* The medians, the expert cache's table (cold non-NULL) and the decode weight traffic. */
static void print_summary(const struct moeinf_model *model, struct run_times *t, bool no_logits,
                          const struct phase_stats *cold, const struct phase_stats *warm) {
    qsort(t->pp, (size_t)t->reps, sizeof(double), cmp_double);
    qsort(t->tg, (size_t)t->reps, sizeof(double), cmp_double);
    double gb = (double)moeinf_model_decode_bytes(model) / 1e9;
    printf("%-8s %8s %10s %12s\n", "test", "tokens", "seconds", "tokens/s");
    double pp = t->pp[t->reps / 2];
    double tg = t->tg[t->reps / 2];
    if (t->n_prompt > 0) {
        printf("%-8s %8ld %10.4f %12.2f\n", "prefill", t->n_prompt, pp, (double)t->n_prompt / pp);
    }
    if (t->n_gen > 0) {
        printf("%-8s %8ld %10.4f %12.2f\n", "decode", t->n_gen, tg, (double)t->n_gen / tg);
    }
    if (cold) print_cache_table(cold, warm, t->reps, t->n_prompt, t->n_gen, pp, tg);
    if (t->n_gen > 0) {
        if (no_logits) {
            printf("decode weight traffic: not given with --no-logits (the byte count includes "
                   "the lm_head)\n");
        } else {
            printf("decode weight traffic: %.2f GB/s\n", gb * (double)t->n_gen / tg);
        }
    }
}

/* -f: the prompt's ids (*ids, malloc'ed) and count, and the context sized to them unless -c
 * was given; prints why it failed and returns the exit code. */
static int file_prompt(const struct bench_opts *o, struct model_args *ma,
                       const struct moeinf_model *model, int32_t **ids, long *n_prompt) {
    struct moeinf_error err = {0};
    char *text = NULL;
    size_t len = 0;
    size_t n = 0;
    enum moeinf_status st = cli_read_text_file(o->prompt_file, &text, &len, &err);
    if (st == MOEINF_OK) st = moeinf_tokenize(model, text, len, true, false, ids, &n, &err);
    free(text);
    if (st != MOEINF_OK) return cli_fail(&err);
    *n_prompt = (long)n;
    const int n_seq = ma->ctx.n_seq;
    if (!o->ctx_set) ma->ctx.n_ctx = (int)((*n_prompt + o->n_gen + 1) * n_seq);
    if (*n_prompt + o->n_gen + 1 > ma->ctx.n_ctx / n_seq) {
        fprintf(stderr, "moeinf bench: -f's %ld tokens + -n must fit in the context (-c %d%s)\n",
                *n_prompt, ma->ctx.n_ctx, n_seq > 1 ? ", shared by the --parallel sequences" : "");
        return CLI_EXIT_USAGE;
    }
    return CLI_EXIT_OK;
}

/* The model (the outputs checked against the inputs first), the prompt of -f and the context;
 * prints why it failed and returns the exit code (nothing left to free then). */
static int open_bench(const struct bench_opts *o, struct model_args *ma,
                      struct moeinf_model **model, struct moeinf_context **ctx,
                      int32_t **prompt_ids, long *n_prompt) {
    ma->outputs[0] = (struct cli_file){"--record-routing", o->record_path};
    if (o->prompt_file && strcmp(o->prompt_file, "-") != 0) {
        ma->inputs[0] = (struct cli_file){"-f", o->prompt_file};
    }
    int rc = model_args_load(ma, model);
    if (rc != CLI_EXIT_OK) return rc;
    if (o->prompt_file) rc = file_prompt(o, ma, *model, prompt_ids, n_prompt);
    if (rc == CLI_EXIT_OK) rc = model_args_context(ma, *model, ctx);
    if (rc != CLI_EXIT_OK) {
        free(*prompt_ids);
        *prompt_ids = NULL;
        moeinf_model_free(*model);
        *model = NULL;
        return rc;
    }
    /* with an output written at the end, a signal stops the runs so that what was measured is
     * written (the routing, --stats-json) or saved (--eamc) before the process dies of it */
    if (ma->experts.eamc || ma->experts.stats_json || o->record_path) cli_stop_on_signal(true);
    return CLI_EXIT_OK;
}

/* --parallel: bench_parallel.c's runs on the opened model and context, then everything
 * freed; returns the exit code. */
static int run_parallel(struct model_args *ma, struct moeinf_model *model,
                        struct moeinf_context *ctx, const struct bench_opts *o, long n_prompt,
                        int32_t *prompt_ids) {
    struct moeinf_error err = {0};
    const struct bench_parallel p = {.ma = ma,
                                     .n_seq = (int)o->n_par,
                                     .n_prompt = n_prompt,
                                     .n_gen = o->n_gen,
                                     .reps = o->reps,
                                     .chunk = ma->ctx.n_batch < ma->ctx.n_ctx ? ma->ctx.n_batch
                                                                              : ma->ctx.n_ctx,
                                     .no_logits = o->no_logits,
                                     .prompt_ids = prompt_ids};
    int rc = bench_parallel_run(model, ctx, &p, &err);
    if (rc != CLI_EXIT_OK && err.msg[0]) {
        if (rc == CLI_EXIT_USAGE) {
            fprintf(stderr, "moeinf bench: %s\n", err.msg);
        } else {
            cli_fail(&err);
        }
    }
    expert_args_close(&ma->experts);
    free(prompt_ids);
    moeinf_context_free(ctx);
    moeinf_model_free(model);
    return rc;
}

int cmd_bench(int argc, char **argv) {
    struct bench_opts o = {
        .ma = {.ctx = moeinf_context_params_default(), .model = moeinf_model_params_default()},
        .n_prompt = 64,
        .n_gen = 32,
        .reps = 3,
        .last = -1};
    int prc = parse(argc, argv, &o);
    if (prc < 0) return CLI_EXIT_OK;
    if (prc > 0) return prc;
    if (o.route_trace) {
        o.ma.inputs[0] = (struct cli_file){"--route-trace", o.route_trace};
        return bench_replay(&o.ma, o.route_trace, o.first, o.last, o.ctx_set, o.no_logits);
    }
    struct model_args ma = o.ma;
    long n_prompt = o.n_prompt;
    const long n_gen = o.n_gen;
    const long reps = o.reps;
    const bool ctx_set = o.ctx_set;
    const bool no_logits = o.no_logits;
    const int n_seq = o.n_par ? (int)o.n_par : 1;
    ma.ctx.n_seq = n_seq;
    if (!ctx_set) ma.ctx.n_ctx = (int)((n_prompt + n_gen + 1) * n_seq);
    if (!o.prompt_file && n_prompt + n_gen + 1 > ma.ctx.n_ctx / n_seq) {
        fprintf(stderr, "moeinf bench: -p + -n must fit in the context (-c %d%s)\n", ma.ctx.n_ctx,
                n_seq > 1 ? ", shared by the --parallel sequences" : "");
        return CLI_EXIT_USAGE;
    }
    struct moeinf_model *model = NULL;
    struct moeinf_context *ctx = NULL;
    struct moeinf_error err = {0};
    int32_t *prompt_ids = NULL; /* -f: the file's tokens */
    int orc = open_bench(&o, &ma, &model, &ctx, &prompt_ids, &n_prompt);
    if (orc != CLI_EXIT_OK) return orc;
    if (o.n_par) return run_parallel(&ma, model, ctx, &o, n_prompt, prompt_ids);
    const int n_vocab = moeinf_model_n_vocab(model);
    int32_t *ids = malloc((size_t)(n_prompt + n_gen + 1) * sizeof *ids);
    double *t_pp = calloc((size_t)reps, sizeof(double));
    double *t_tg = calloc((size_t)reps, sizeof(double));
    const bool cached = ma.experts.cache != NULL;
    struct phase_stats cold[2];
    memset(cold, 0, sizeof cold);
    struct phase_stats *warm = calloc(2 * (size_t)reps, sizeof *warm);
    float *logits = no_logits ? NULL : malloc((size_t)n_vocab * sizeof *logits);
    /* the context clamps its micro-batch to n_ctx, as this does */
    const long chunk = ma.ctx.n_batch < ma.ctx.n_ctx ? ma.ctx.n_batch : ma.ctx.n_ctx;
    int rc = CLI_EXIT_FAIL;
    struct cli_progress prog = cli_progress_start();
    if (!ids || !t_pp || !t_tg || !warm || (!no_logits && !logits)) {
        snprintf(err.msg, sizeof err.msg, "out of memory");
        goto done;
    }
    if (o.record_path &&
        moeinf_context_record_open(ctx, o.record_path, "moeinf/bench", &err) != MOEINF_OK) {
        goto done;
    }
    double t_start = now_s();
    for (long r = -1; r < reps && !cli_stop_signal(); r++) {
        /* the same ids every run, but different ones per run through a cache, so that
         * repeated prompts do not flatter it */
        bench_fill_ids(ids, n_prompt + n_gen + 1, cached ? (uint64_t)(r + 1) : 0, n_vocab);
        if (prompt_ids) memcpy(ids, prompt_ids, (size_t)n_prompt * sizeof *ids);
        moeinf_context_reset(ctx);
        struct moeinf_expert_stats s0;
        struct moeinf_expert_stats s1;
        struct moeinf_expert_stats s2;
        if (cached) moeinf_context_expert_stats(ctx, -1, &s0, &err);
        double t0 = now_s();
        /* one call per micro-batch: moeinf_decode computes logits for its last one only */
        for (long i0 = 0; i0 < n_prompt; i0 += chunk) {
            int m = (int)(n_prompt - i0 < chunk ? n_prompt - i0 : chunk);
            if (moeinf_decode(ctx, &ids[i0], m, logits, false, &err)) goto done;
        }
        double t1 = now_s();
        if (cached) moeinf_context_expert_stats(ctx, -1, &s1, &err);
        for (long i = 0; i < n_gen && !cli_stop_signal(); i++) {
            if (moeinf_decode(ctx, &ids[n_prompt + i], 1, logits, false, &err)) goto done;
            decode_progress(&prog, r, reps, i + 1, n_gen, now_s() - t1);
        }
        double t2 = now_s();
        if (cached) {
            moeinf_context_expert_stats(ctx, -1, &s2, &err);
            struct phase_stats *ps = r < 0 ? cold : &warm[2 * r];
            bench_phase_stats_set(&ps[0], &s0, &s1, t1 - t0);
            bench_phase_stats_set(&ps[1], &s1, &s2, t2 - t1);
        }
        if (r >= 0) {
            t_pp[r] = t1 - t0;
            t_tg[r] = t2 - t1;
        }
    }
    double t_total = now_s() - t_start;
    if (moeinf_context_record_close(ctx, &err) != MOEINF_OK) goto done;
    /* stopped by a signal: no summary of runs that did not all happen, but the outputs */
    if (!cli_stop_signal()) {
        bench_print_header(model, ctx, cached, no_logits, chunk);
        struct run_times times = {t_pp, t_tg, reps, n_prompt, n_gen};
        print_summary(model, &times, no_logits, cached ? cold : NULL, warm);
    }
    rc = expert_args_save_state(&ma.experts, ctx) ? CLI_EXIT_OK : CLI_EXIT_FAIL;
    if (!expert_args_report(&ma.experts, ctx, t_total)) {
        rc = CLI_EXIT_FAIL; /* the message is out */
        err.msg[0] = '\0';
    }
    if (rc == CLI_EXIT_OK) cli_stop_finish(); /* a signal stopped it: all written, die of it */
done:
    cli_progress_end(&prog);
    if (rc != CLI_EXIT_OK && err.msg[0]) cli_fail(&err);
    if (rc != CLI_EXIT_OK) moeinf_context_record_discard(ctx); /* the file stays as it was */
    expert_args_close(&ma.experts);
    free(prompt_ids);
    free(warm);
    free(ids);
    free(t_pp);
    free(t_tg);
    free(logits);
    moeinf_context_free(ctx);
    moeinf_model_free(model);
    return rc;
}
