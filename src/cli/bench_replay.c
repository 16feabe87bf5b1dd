/* bench_replay.c - moeinf bench --route-trace: requests of a routing trace run through the
 * engine with their recorded expert choices (app/route_replay.h: routing replay is a
 * benchmark tool, not public API).
 *
 * All selected requests run once, in file order, in one context whose expert cache starts
 * empty and carries over from request to request, as `moeinf sim` replays a trace; so the
 * cache's hits and misses are the simulator's at the same capacity, policy and -b. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "app/model_args.h"
#include "app/route_replay.h"
#include "cli/bench.h"
#include "cli/cli.h"

/* Adds the counters from a to b to acc, and seconds. */
static void phase_add(struct phase_stats *acc, const struct moeinf_expert_stats *a,
                      const struct moeinf_expert_stats *b, double seconds) {
    struct phase_stats d;
    bench_phase_stats_set(&d, a, b, seconds);
    acc->seconds += d.seconds;
    acc->d.accesses += d.d.accesses;
    acc->d.hits += d.d.hits;
    acc->d.misses += d.d.misses;
    acc->d.bytes_read += d.d.bytes_read;
    acc->d.expert_bytes += d.d.expert_bytes;
    acc->d.read_seconds += d.d.read_seconds;
    acc->d.stall_seconds += d.d.stall_seconds;
}

/* What one replay did: per phase, seconds and (with a cache) counters. */
struct replay_totals {
    struct phase_stats ph[2]; /* prefill, decode */
    long tokens[2];
};

/* What the replay needs per call. */
struct replay_run {
    struct moeinf_context *ctx;
    const struct cli_route_trace *t;
    int32_t *ids;  /* the longest request's tokens */
    float *logits; /* one row, or NULL (--no-logits) */
    int n_vocab;
    long chunk; /* prefill micro-batch */
    bool cached;
};

/* One call of m tokens starting at token i of request r, with their recorded experts. */
static enum moeinf_status replay_call(const struct replay_run *rr, int r, int i, int m,
                                      bool prefill, struct replay_totals *tot,
                                      struct moeinf_error *err) {
    struct moeinf_expert_stats s0;
    struct moeinf_expert_stats s1;
    memset(&s0, 0, sizeof s0);
    memset(&s1, 0, sizeof s1);
    enum moeinf_status st = cli_route_trace_replay(rr->ctx, rr->t, r, i, m, prefill, err);
    if (st != MOEINF_OK) return st;
    if (rr->cached) moeinf_context_expert_stats(rr->ctx, -1, &s0, err);
    double t0 = cli_now();
    st = moeinf_decode(rr->ctx, rr->ids + i, m, rr->logits, false, err);
    double t1 = cli_now();
    if (st != MOEINF_OK) return st;
    if (rr->cached) moeinf_context_expert_stats(rr->ctx, -1, &s1, err);
    int ph = prefill ? 0 : 1;
    phase_add(&tot->ph[ph], &s0, &s1, t1 - t0);
    tot->tokens[ph] += m;
    return MOEINF_OK;
}

/* Request r: its prompt in micro-batches of -b, then its decode tokens one at a time. */
static enum moeinf_status replay_request(const struct replay_run *rr, int r,
                                         struct replay_totals *tot, struct moeinf_error *err) {
    const struct cli_route_request rq = cli_route_trace_request(rr->t, r);
    /* one sequence per request position */
    bench_fill_ids(rr->ids, rq.n_prefill + rq.n_decode, (uint64_t)rq.position, rr->n_vocab);
    moeinf_context_reset(rr->ctx);
    enum moeinf_status st = MOEINF_OK;
    for (int i0 = 0; i0 < rq.n_prefill && st == MOEINF_OK; i0 += (int)rr->chunk) {
        int m = (int)(rq.n_prefill - i0 < rr->chunk ? rq.n_prefill - i0 : rr->chunk);
        st = replay_call(rr, r, i0, m, true, tot, err);
    }
    for (int i = rq.n_prefill; i < rq.n_prefill + rq.n_decode && st == MOEINF_OK; i++)
        st = replay_call(rr, r, i, 1, false, tot, err);
    return st;
}

/* The selection, in words: "FILE, requests at positions A-B of N (ids X-Y)". */
static void describe(char *buf, size_t size, const char *path, const struct cli_route_trace *t) {
    const int n = cli_route_trace_n_requests(t);
    const struct cli_route_request a = cli_route_trace_request(t, 0);
    const struct cli_route_request b = cli_route_trace_request(t, n - 1);
    snprintf(buf, size, "%s, %d requests at positions %lld-%lld of %lld (ids %lld-%lld)", path, n,
             (long long)a.position, (long long)b.position,
             (long long)cli_route_trace_n_file_requests(t), (long long)a.id, (long long)b.id);
}

static void print_results(const struct replay_totals *tot, bool cached) {
    printf("%-8s %8s %10s %12s\n", "test", "tokens", "seconds", "tokens/s");
    const char *names[2] = {"prefill", "decode"};
    for (int ph = 0; ph < 2; ph++) {
        if (tot->tokens[ph] == 0) continue;
        printf("%-8s %8ld %10.4f %12.2f\n", names[ph], tot->tokens[ph], tot->ph[ph].seconds,
               (double)tot->tokens[ph] / tot->ph[ph].seconds);
    }
    long all = tot->tokens[0] + tot->tokens[1];
    double secs = tot->ph[0].seconds + tot->ph[1].seconds;
    printf("%-8s %8ld %10.4f %12.2f\n", "all", all, secs, (double)all / secs);
    if (!cached) return;
    printf("expert cache, per token (one pass, the cache starting empty):\n");
    printf("%-13s %8s %10s %10s %8s %10s %9s %11s %11s\n", "test", "tokens", "seconds",
           "tokens/s", "hit", "misses", "MiB read", "read s", "stall s");
    for (int ph = 0; ph < 2; ph++) {
        if (tot->tokens[ph] > 0)
            bench_phase_stats_print(names[ph], "replay", &tot->ph[ph], tot->tokens[ph]);
    }
}

int bench_replay(struct model_args *ma, const char *trace, int64_t first, int64_t last,
                 bool ctx_set, bool no_logits) {
    struct cli_route_trace *t = NULL;
    struct moeinf_error err = {0};
    enum moeinf_status st = cli_route_trace_load(trace, first, last, &t, &err);
    if (st != MOEINF_OK) {
        cli_fail(&err);
        return st == MOEINF_ERR_ARG ? CLI_EXIT_USAGE : CLI_EXIT_FAIL;
    }
    const int n_requests = cli_route_trace_n_requests(t);
    int longest = 1;
    for (int i = 0; i < n_requests; i++) {
        const struct cli_route_request rq = cli_route_trace_request(t, i);
        int n = rq.n_prefill + rq.n_decode;
        if (n > longest) longest = n;
    }
    if (!ctx_set) ma->ctx.n_ctx = longest;
    if (longest > ma->ctx.n_ctx) {
        fprintf(stderr, "moeinf bench: a request of the trace has %d tokens: more than -c %d\n",
                longest, ma->ctx.n_ctx);
        cli_route_trace_free(t);
        return CLI_EXIT_USAGE;
    }
    char what[1200];
    describe(what, sizeof what, trace, t);
    ma->experts.routing = what;
    struct moeinf_model *model = NULL;
    struct moeinf_context *ctx = NULL;
    int rc = model_args_open(ma, &model, &ctx);
    if (rc != CLI_EXIT_OK) {
        cli_route_trace_free(t);
        return rc;
    }
    rc = CLI_EXIT_FAIL;
    struct replay_run rr = {
        .ctx = ctx,
        .t = t,
        .ids = malloc((size_t)longest * sizeof(int32_t)),
        .logits = no_logits ? NULL : malloc((size_t)moeinf_model_n_vocab(model) * sizeof(float)),
        .n_vocab = moeinf_model_n_vocab(model),
        .chunk = ma->ctx.n_batch < ma->ctx.n_ctx ? ma->ctx.n_batch : ma->ctx.n_ctx,
        .cached = ma->experts.cache != NULL,
    };
    struct replay_totals tot;
    memset(&tot, 0, sizeof tot);
    if (cli_route_trace_fits(ctx, t, &err) != MOEINF_OK) {
        char msg[sizeof err.msg];
        snprintf(msg, sizeof msg, "%s", err.msg);
        snprintf(err.msg, sizeof err.msg, "%s: the trace's routing does not fit the model: %s",
                 trace, msg);
        goto done;
    }
    if (!rr.ids || (!no_logits && !rr.logits)) {
        snprintf(err.msg, sizeof err.msg, "out of memory");
        goto done;
    }
    /* with --stats-json, a signal stops the replay so that what was measured is written */
    if (ma->experts.stats_json) cli_stop_on_signal(true);
    for (int i = 0; i < n_requests && !cli_stop_signal(); i++) {
        if (replay_request(&rr, i, &tot, &err) != MOEINF_OK) goto done;
    }
    if (!cli_stop_signal()) {
        bench_print_header(model, ctx, rr.cached, no_logits, rr.chunk);
        printf("routing:  replayed from %s\n", what);
        print_results(&tot, rr.cached);
    }
    rc = CLI_EXIT_OK;
    if (!expert_args_report(&ma->experts, ctx, tot.ph[0].seconds + tot.ph[1].seconds)) {
        rc = CLI_EXIT_FAIL; /* the message is out */
        err.msg[0] = '\0';
    }
    if (rc == CLI_EXIT_OK) cli_stop_finish(); /* a signal stopped it: all written, die of it */
done:
    if (rc != CLI_EXIT_OK && err.msg[0]) cli_fail(&err);
    expert_args_close(&ma->experts);
    free(rr.ids);
    free(rr.logits);
    moeinf_context_free(ctx);
    moeinf_model_free(model);
    cli_route_trace_free(t);
    return rc;
}
