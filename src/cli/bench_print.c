/* bench_print.c - what `moeinf bench` (cmd_bench.c) and its routing replay (bench_replay.c)
 * share (bench.h): the header of what ran, the expert cache's per-phase rows, the
 * pseudo-random token ids. Kept apart so that the two call this file and not each other. */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "cli/bench.h"

void bench_phase_stats_set(struct phase_stats *ps, const struct moeinf_expert_stats *a,
                           const struct moeinf_expert_stats *b, double seconds) {
    memset(ps, 0, sizeof *ps); /* every field is defined: the replay sums them all */
    ps->seconds = seconds;
    ps->d.accesses = b->accesses - a->accesses;
    ps->d.hits = b->hits - a->hits;
    ps->d.misses = b->misses - a->misses;
    ps->d.bytes_read = b->bytes_read - a->bytes_read;
    ps->d.expert_bytes = b->expert_bytes - a->expert_bytes;
    ps->d.read_seconds = b->read_seconds - a->read_seconds;
    ps->d.stall_seconds = b->stall_seconds - a->stall_seconds;
}

void bench_phase_stats_print(const char *phase, const char *run, const struct phase_stats *ps,
                             long n_tok) {
    char name[32];
    snprintf(name, sizeof name, "%s-%s", phase, run);
    double n = (double)n_tok;
    printf("%-13s %8ld %10.4f %10.2f %8.3f %10.2f %9.2f %11.5f %11.5f\n", name, n_tok, ps->seconds,
           n / ps->seconds, ps->d.accesses ? (double)ps->d.hits / (double)ps->d.accesses : 0.0,
           (double)ps->d.misses / n, (double)ps->d.bytes_read / (1024.0 * 1024.0) / n,
           ps->d.read_seconds / n, ps->d.stall_seconds / n);
}

void bench_print_header(const struct moeinf_model *model, const struct moeinf_context *ctx,
                        bool offloaded, bool no_logits, long chunk) {
    char desc[256];
    moeinf_model_desc(model, desc, sizeof desc);
    printf("model:    %s\n", desc);
    printf("threads:  %d, kernels %s, decode reads %.3f GB of weights per token\n",
           moeinf_context_n_threads(ctx), moeinf_context_kernels(ctx),
           (double)moeinf_model_decode_bytes(model) / 1e9);
    if (offloaded) {
        printf("weights:  routed experts read from the file through the expert cache, the "
               "others read into memory\n");
    } else {
        printf("weights:  %s\n", moeinf_model_load_mode(model) == MOEINF_LOAD_READ
                                     ? "read into memory (--mmap maps the file)"
                                     : "mapped from the file (--no-mmap reads them into memory)");
    }
    if (no_logits) {
        printf("logits:   none (--no-logits: no final norm and lm_head, less work than "
               "llama.cpp's eval)\n");
    } else {
        printf("logits:   last position of every prefill micro-batch (-b %ld) and every decoded "
               "token\n",
               chunk);
    }
}

void bench_fill_ids(int32_t *ids, long n, uint64_t seed, int n_vocab) {
    uint64_t state = 0x9E3779B97F4A7C15ull + seed;
    for (long i = 0; i < n; i++) {
        state = state * 6364136223846793005ull + 1442695040888963407ull;
        ids[i] = (int32_t)((state >> 33) % (uint64_t)n_vocab);
    }
}
