/*
 * trace_tools.h - internals of the trace tools (public API in moeinf_sim.h, "trace tools"):
 * the measures they are built from, exposed so tests can check them on hand-made numbers.
 */
#ifndef MOEINF_SIM_TRACE_TOOLS_H
#define MOEINF_SIM_TRACE_TOOLS_H

#include <stdint.h>

#include "moeinf_sim.h"

/* Transitional: the old public spellings of the phase enum, now moeinf.h's enum moeinf_phase.
 * trace_tools.c still uses them because it is being split into several files on another
 * branch; once that split is merged, its files take the moeinf_phase names and these go. */
#define moeinf_trace_phase         moeinf_phase
#define MOEINF_TRACE_PHASE_PREFILL MOEINF_PHASE_PREFILL
#define MOEINF_TRACE_PHASE_DECODE  MOEINF_PHASE_DECODE
#define MOEINF_TRACE_PHASE_ALL     MOEINF_PHASE_ALL

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

#endif
