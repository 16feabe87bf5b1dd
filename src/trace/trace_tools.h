/*
 * trace_tools.h - internals of the trace tools (public API in moeinf_sim.h, "trace tools"):
 * the measures they are built from, exposed so tests can check them on hand-made numbers,
 * and what the files of the tools share (trace_measures.c, trace_eam.c, trace_copy.c,
 * trace_stats.c; the heatmap's SVG is drawn by the programs, src/app/trace_svg.c).
 */
#ifndef MOEINF_TRACE_TRACE_TOOLS_H
#define MOEINF_TRACE_TRACE_TOOLS_H

#include <stdint.h>

#include "moeinf_sim.h"
#include "trace/trace.h"

/* Gini coefficient of n non-negative counts, sorting them in place (ascending):
 * sum_i sum_j |x_i - x_j| / (2 n sum x); 0 when all are equal; NaN when they sum to 0. */
double moeinf_trace_gini(uint64_t *x, int n);

/* Sum of the k largest of n counts (k clamped to n); x is left partly reordered. */
uint64_t moeinf_trace_top_sum(uint64_t *x, int n, int k);

/* Uniform-routing expectation of the per-layer skew: every one of `tokens` tokens picks
 * top_k distinct experts of n_experts uniformly at random. Fills the uniform_* fields of
 * *out (distinct exactly, the shares by `draws` seeded Monte Carlo draws). */
enum moeinf_status moeinf_trace_uniform_skew(int n_experts, int top_k, int64_t tokens, int draws,
                                             struct moeinf_trace_skew *out,
                                             struct moeinf_error *err);

/* The trace tools' index (MOEINF_PHASE_PREFILL or _DECODE) of a token's phase. */
static inline int moeinf_trace_phase_index(enum moeinf_phase p) {
    return p == MOEINF_PHASE_PREFILL ? MOEINF_PHASE_PREFILL : MOEINF_PHASE_DECODE;
}

/* Tokens of one request's EAM in a phase (MOEINF_PHASE_ALL: both). */
int64_t moeinf_trace_eam_tokens(const struct moeinf_trace_eam *m, enum moeinf_phase phase);

#endif
