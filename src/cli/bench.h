/* bench.h - what `moeinf bench` (cmd_bench.c) and its routing replay (bench_replay.c) share:
 * bench_print.c's functions, and bench_replay.c's entry. */
#ifndef MOEINF_CLI_BENCH_H
#define MOEINF_CLI_BENCH_H

#include <stdbool.h>
#include <stdint.h>

#include "app/model_args.h"
#include "moeinf.h"

/* What one phase of one run did through the expert cache. */
struct phase_stats {
    double seconds;
    struct moeinf_expert_stats d; /* counters of the phase alone */
};

/* ps = the counters from a to b, and the phase's seconds; every other field of ps is 0. */
void bench_phase_stats_set(struct phase_stats *ps, const struct moeinf_expert_stats *a,
                           const struct moeinf_expert_stats *b, double seconds);

/* One row "<phase>-<run> tokens seconds tokens/s hit misses MiB-read read-s stall-s", per
 * token. */
void bench_phase_stats_print(const char *phase, const char *run, const struct phase_stats *ps,
                             long n_tok);

/* Bench's pseudo-random token ids: n of them, below n_vocab, the same for the same seed. */
void bench_fill_ids(int32_t *ids, long n, uint64_t seed, int n_vocab);

/* What ran: the model, threads, kernels, bytes per token, how the weights are held (offloaded:
 * routed experts through the expert cache), and which logits were computed. */
void bench_print_header(const struct moeinf_model *model, const struct moeinf_context *ctx,
                        bool offloaded, bool no_logits, long chunk);

/* `moeinf bench --route-trace FILE [--trace-requests A-B]`: the requests at positions
 * first..last (last < 0: to the end) of the trace, each once, in one context, with the
 * trace's routing (bench_replay.c). Returns the exit code. */
int bench_replay(struct model_args *ma, const char *trace, int64_t first, int64_t last,
                 bool ctx_set, bool no_logits);

/* `moeinf bench --parallel N` (bench_parallel.c): what cmd_bench.c parsed and opened. */
struct bench_parallel {
    struct model_args *ma;
    int n_seq;                  /* N: the context's sequences */
    long n_prompt, n_gen, reps; /* per sequence */
    long chunk;                 /* the micro-batch: tokens of one iteration */
    bool no_logits;
    const int32_t *prompt_ids; /* -f: the file's tokens (n_prompt), or NULL */
};

/* Runs the warm-up and reps runs of N sequences decoding together, prints their figures
 * (the header, prefill and aggregate decode, per sequence, the expert cache's table) and the
 * expert arguments' reports. Returns the exit code; a message left in err is not yet
 * printed. */
int bench_parallel_run(struct moeinf_model *model, struct moeinf_context *ctx,
                       const struct bench_parallel *p, struct moeinf_error *err);

#endif
