/* bench_parallel.c - `moeinf bench --parallel N`: N sequences of one context decode together
 * (moeinf_decode_batch), each with its own prompt. A run prefills every sequence's prompt,
 * packed in sequence order into iterations of up to n_batch tokens (the last token of each
 * sequence in an iteration, and the iteration's last, computing logits, as one sequence's
 * prefill does), then decodes n_gen iterations of one token per sequence. With N = 1 the
 * iterations, tokens and expert accesses are those of the single-sequence path (cmd_bench.c),
 * but for a prompt whose last micro-batch holds one token: moeinf_decode counts that one as a
 * decode iteration, this (as the server's iterations) as prefill. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli/bench.h"
#include "cli/cli.h"

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Sequence s's tokens (prompt, then the ids it decodes) for a run with id seed `seed`:
 * sequence 0 has the single path's ids; the others their own pseudo-random ids, or with -f
 * the file's prompt with its tokens after the first rotated by s * P / N places. */
static void fill_seq(int32_t *ids, long len, uint64_t seed, int s, int n_seq, int n_vocab,
                     const int32_t *prompt_ids, long n_prompt) {
    bench_fill_ids(ids, len, seed + (uint64_t)s * 0x10001ull, n_vocab);
    if (!prompt_ids) return;
    if (s == 0 || n_prompt < 2) {
        memcpy(ids, prompt_ids, (size_t)n_prompt * sizeof *ids);
        return;
    }
    long rest = n_prompt - 1;
    long shift = ((long)s * n_prompt / n_seq) % rest;
    ids[0] = prompt_ids[0];
    for (long i = 0; i < rest; i++)
        ids[1 + i] = prompt_ids[1 + (i + shift) % rest];
}

struct par_run {
    double pp, tg; /* prefill and decode seconds */
    double *first; /* per sequence: seconds from the run's start to its prompt's end */
    struct phase_stats st[2];
};

static int cmp_pp(const void *a, const void *b) {
    double x = ((const struct par_run *)a)->pp;
    double y = ((const struct par_run *)b)->pp;
    return (x > y) - (x < y);
}

static int cmp_run(const void *a, const void *b) {
    double x = ((const struct par_run *)a)->tg;
    double y = ((const struct par_run *)b)->tg;
    return (x > y) - (x < y);
}

/* The batch buffers of one iteration. */
struct par_batch {
    int32_t *tok, *pos, *seq;
    bool *want;
    int n;
};

static enum moeinf_status flush(struct moeinf_context *ctx, struct par_batch *b,
                                enum moeinf_phase phase, float *logits, bool no_logits,
                                struct moeinf_error *err) {
    if (b->n == 0) return MOEINF_OK;
    struct moeinf_batch mb = {b->n, b->tok, b->pos, b->seq, no_logits ? NULL : b->want};
    enum moeinf_status st = moeinf_decode_batch(ctx, &mb, phase, no_logits ? NULL : logits, err);
    b->n = 0;
    return st;
}

static void add(struct par_batch *b, int32_t tok, int32_t pos, int32_t seq, bool want) {
    b->tok[b->n] = tok;
    b->pos[b->n] = pos;
    b->seq[b->n] = seq;
    b->want[b->n] = want;
    b->n++;
}

/* One run: every prompt, then n_gen iterations of one token per sequence. */
static enum moeinf_status one_run(struct moeinf_context *ctx, const struct bench_parallel *p,
                                  int32_t **ids, struct par_batch *b, float *logits,
                                  struct par_run *out, struct cli_progress *prog, long r,
                                  struct moeinf_error *err) {
    const int n_seq = p->n_seq;
    const bool cached = p->ma->experts.cache != NULL;
    struct moeinf_expert_stats s0;
    struct moeinf_expert_stats s1;
    struct moeinf_expert_stats s2;
    for (int s = 0; s < n_seq; s++)
        if (moeinf_context_seq_reset(ctx, s, err) != MOEINF_OK) return MOEINF_ERR_ARG;
    moeinf_context_request_end(ctx); /* each run is a request, as the single path's are */
    if (cached) moeinf_context_expert_stats(ctx, -1, &s0, err);
    enum moeinf_status st = MOEINF_OK;
    double t0 = now_s();
    int pending = 0; /* sequences whose last prompt token waits in b: first[] after the flush */
    for (int s = 0; s < n_seq && st == MOEINF_OK; s++) {
        for (long i = 0; i < p->n_prompt && st == MOEINF_OK; i++) {
            /* logits for the iteration's last token and each prompt's last, as one
             * sequence's prefill computes them */
            bool last = i == p->n_prompt - 1;
            add(b, ids[s][i], (int32_t)i, s, last || b->n + 1 == p->chunk);
            if (last) {
                out->first[s] = -1;
                pending++;
            }
            if (b->n == p->chunk || (s == n_seq - 1 && last)) {
                st = flush(ctx, b, MOEINF_PHASE_PREFILL, logits, p->no_logits, err);
                for (int q = 0; pending > 0 && q <= s; q++) {
                    if (out->first[q] < 0) {
                        out->first[q] = now_s() - t0;
                        pending--;
                    }
                }
            }
        }
    }
    double t1 = now_s();
    if (cached) moeinf_context_expert_stats(ctx, -1, &s1, err);
    for (long i = 0; i < p->n_gen && st == MOEINF_OK && !cli_stop_signal(); i++) {
        for (int s = 0; s < n_seq; s++)
            add(b, ids[s][p->n_prompt + i], (int32_t)(p->n_prompt + i), s, true);
        st = flush(ctx, b, MOEINF_PHASE_DECODE, logits, p->no_logits, err);
        char label[64];
        snprintf(label, sizeof label, "bench run %ld/%ld, decode", r + 2, p->reps + 1);
        cli_progress_tokens(prog, label, (i + 1) * n_seq, p->n_gen * n_seq, now_s() - t1);
    }
    double t2 = now_s();
    if (st != MOEINF_OK) return st;
    if (cached) {
        moeinf_context_expert_stats(ctx, -1, &s2, err);
        bench_phase_stats_set(&out->st[0], &s0, &s1, t1 - t0);
        bench_phase_stats_set(&out->st[1], &s1, &s2, t2 - t1);
    }
    out->pp = t1 - t0;
    out->tg = t2 - t1;
    return MOEINF_OK;
}

static void print_parallel(const struct bench_parallel *p, struct par_run *runs,
                           const struct par_run *cold) {
    const int n_seq = p->n_seq;
    const long reps = p->reps;
    /* prefill's median, then the median run by decode time (the one reported) */
    qsort(runs, (size_t)reps, sizeof *runs, cmp_pp);
    const double pp_med = runs[reps / 2].pp;
    qsort(runs, (size_t)reps, sizeof *runs, cmp_run);
    const struct par_run *med = &runs[reps / 2];
    const long n_pp = p->n_prompt * n_seq;
    const long n_tg = p->n_gen * n_seq;
    printf("parallel: %d sequences in one context, each its own prompt of %ld tokens; prefill "
           "packs the prompts into iterations of up to %ld tokens, decode runs %ld iterations "
           "of one token per sequence\n",
           n_seq, p->n_prompt, p->chunk, p->n_gen);
    printf("%-8s %8s %10s %12s\n", "test", "tokens", "seconds", "tokens/s");
    if (n_pp > 0)
        printf("%-8s %8ld %10.4f %12.2f\n", "prefill", n_pp, pp_med, (double)n_pp / pp_med);
    if (n_tg > 0)
        printf("%-8s %8ld %10.4f %12.2f\n", "decode", n_tg, med->tg, (double)n_tg / med->tg);
    printf("per sequence (the median run by decode time of %ld; first token: seconds from the "
           "run's start to its prompt's last iteration)\n",
           reps);
    printf("%-8s %8s %8s %13s %12s\n", "sequence", "prompt", "decoded", "first token s",
           "tokens/s");
    for (int s = 0; s < n_seq; s++) {
        printf("%-8d %8ld %8ld %13.4f %12.2f\n", s, p->n_prompt, p->n_gen, med->first[s],
               med->tg > 0 ? (double)p->n_gen / med->tg : 0.0);
    }
    printf("%-8s %8ld %8ld %13s %12.2f\n", "total", n_pp, n_tg, "",
           med->tg > 0 ? (double)n_tg / med->tg : 0.0);
    if (!p->ma->experts.cache) return;
    printf("expert cache, per token of all sequences: cold = the first run, warm = the median "
           "run of %ld\n",
           reps);
    printf("%-13s %8s %10s %10s %8s %10s %9s %11s %11s\n", "test", "tokens", "seconds", "tokens/s",
           "hit", "misses", "MiB read", "read s", "stall s");
    for (int ph = 0; ph < 2; ph++) {
        long n_tok = ph == 0 ? n_pp : n_tg;
        if (n_tok == 0) continue;
        const char *name = ph == 0 ? "prefill" : "decode";
        bench_phase_stats_print(name, "cold", &cold->st[ph], n_tok);
        bench_phase_stats_print(name, "warm", &med->st[ph], n_tok);
    }
}

int bench_parallel_run(struct moeinf_model *model, struct moeinf_context *ctx,
                       const struct bench_parallel *p, struct moeinf_error *err) {
    const int n_seq = p->n_seq;
    const int n_vocab = moeinf_model_n_vocab(model);
    const long len = p->n_prompt + p->n_gen + 1;
    const long cap = p->chunk > n_seq ? p->chunk : n_seq;
    const bool cached = p->ma->experts.cache != NULL;
    int rc = CLI_EXIT_FAIL;
    int32_t **ids = calloc((size_t)n_seq, sizeof *ids);
    struct par_batch b = {
        malloc((size_t)cap * sizeof(int32_t)), malloc((size_t)cap * sizeof(int32_t)),
        malloc((size_t)cap * sizeof(int32_t)), malloc((size_t)cap * sizeof(bool)), 0};
    /* rows asked per iteration: each sequence's last prompt token and the iteration's last
     * (prefill), or one per sequence (decode) */
    const size_t rows = (size_t)n_seq + 1;
    float *logits = p->no_logits ? NULL : malloc(rows * (size_t)n_vocab * sizeof *logits);
    struct par_run *runs = calloc((size_t)p->reps + 1, sizeof *runs);
    double *first = calloc((size_t)(p->reps + 1) * (size_t)n_seq, sizeof *first);
    struct cli_progress prog = cli_progress_start();
    bool ok = ids && b.tok && b.pos && b.seq && b.want && (p->no_logits || logits) && runs && first;
    for (int s = 0; ok && s < n_seq; s++)
        ok = (ids[s] = malloc((size_t)len * sizeof(int32_t))) != NULL;
    if (!ok) {
        snprintf(err->msg, sizeof err->msg, "out of memory");
        goto done;
    }
    if (p->chunk < n_seq) {
        snprintf(err->msg, sizeof err->msg,
                 "--parallel %d needs a micro-batch (-b) of at least %d tokens: a decode iteration "
                 "holds one token per sequence",
                 n_seq, n_seq);
        rc = CLI_EXIT_USAGE;
        goto done;
    }
    double t_start = now_s();
    /* runs[0] is the warm-up (the cold run with a cache), runs[1 .. reps] the measured */
    for (long r = -1; r < p->reps && !cli_stop_signal(); r++) {
        uint64_t seed = cached ? (uint64_t)(r + 1) : 0;
        for (int s = 0; s < n_seq; s++)
            fill_seq(ids[s], len, seed, s, n_seq, n_vocab, p->prompt_ids, p->n_prompt);
        struct par_run *run = &runs[r + 1];
        run->first = first + (size_t)(r + 1) * (size_t)n_seq;
        if (one_run(ctx, p, ids, &b, logits, run, &prog, r, err) != MOEINF_OK) goto done;
    }
    double t_total = now_s() - t_start;
    cli_progress_end(&prog);
    if (!cli_stop_signal()) {
        bench_print_header(model, ctx, cached, p->no_logits, p->chunk);
        print_parallel(p, runs + 1, &runs[0]);
    }
    rc = expert_args_save_state(&p->ma->experts, ctx) ? CLI_EXIT_OK : CLI_EXIT_FAIL;
    if (!expert_args_report(&p->ma->experts, ctx, t_total)) {
        rc = CLI_EXIT_FAIL; /* the message is out */
        err->msg[0] = '\0';
    }
    if (rc == CLI_EXIT_OK) cli_stop_finish();
done:
    cli_progress_end(&prog);
    for (int s = 0; ids && s < n_seq; s++)
        free(ids[s]);
    free(ids);
    free(b.tok);
    free(b.pos);
    free(b.seq);
    free(b.want);
    free(logits);
    free(runs);
    free(first);
    return rc;
}
