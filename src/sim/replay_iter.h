/*
 * replay_iter.h - the simulator's forward iteration (internal to src/sim): the replay's state
 * and one iteration of m tokens over every layer, used by the sequential replay (replay.c) and
 * by the replay of continuous batching (replay_parallel.c).
 */
#ifndef MOEINF_SIM_REPLAY_ITER_H
#define MOEINF_SIM_REPLAY_ITER_H

#include <stdbool.h>
#include <stdint.h>

#include "experts/cache.h"
#include "experts/policy.h"
#include "experts/step.h"
#include "moeinf_sim.h"

struct moeinf_trace_reader;

struct replay {
    const struct moeinf_sim_params *params;
    struct moeinf_sim_result *res;
    struct moeinf_cache *cache;
    struct moeinf_policy *policy;
    struct moeinf_step step;
    uint8_t *pf_counted; /* (n_ids) the pending prefetch of this expert was issued in a
                            counted request */
    struct moeinf_cache_event *events; /* (capacity) one wave's accesses */
    uint32_t *proposals;               /* (prefetch) */
    int batch;                         /* tokens per iteration (params->batch, at least 1) */
    int32_t *pending;                  /* (batch x n_layers x top_k) buffered tokens' choices */
    int n_pending;
    int32_t *sel;   /* (batch x top_k) one layer's choices of the buffered tokens */
    double load_ms; /* time model: one expert over the link */
    double total_ms, decode_ms;
};

/* One forward iteration over the m tokens whose choices are tokens[j * L * top_k ...]: each
 * layer's step over their distinct experts, the policy's token events around them; counted
 * iterations go into the result (and the time model). */
enum moeinf_status moeinf_replay_iteration(struct replay *rp, const int32_t *tokens, int m,
                                           enum moeinf_phase phase, bool counted,
                                           struct moeinf_error *err);

/* Continuous batching (replay_parallel.c): the trace's requests in params->parallel sequences,
 * iterations composed as the server composes them. */
enum moeinf_status moeinf_replay_parallel(struct replay *rp, struct moeinf_trace_reader *r,
                                          struct moeinf_error *err);

#endif
