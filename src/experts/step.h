/*
 * step.h - one MoE layer's step: the experts that one forward iteration (a decode token, or a
 * prefill micro-batch of many tokens) routes to at that layer, run through the cache in waves
 * that fit its slots. The engine (offload/tier.c) and the simulator (sim/replay.c) both run
 * steps through this file, so that they make the same cache and policy calls in the same
 * order and count the same hits and misses.
 *
 *   moeinf_step_collect(s, layer, sel, m, top_k);   the distinct experts of m tokens' choices
 *   moeinf_step_begin(s, cache, policy);            the policy sees the step (ids, counts)
 *   while (moeinf_step_wave(s, cache, policy, &ids, events, &n, err) == OK && n > 0) {
 *       ... misses: read the experts into their slots; compute the wave's experts ...
 *       moeinf_step_wave_end(s, cache);             unpin the wave
 *   }
 *   moeinf_step_end(s, policy);
 *
 * Ids are in first-appearance order (token by token, router rank within a token), so a step of
 * one token is its top_k in router-rank order: the per-token replay of a trace. When the step
 * holds more experts than the cache has slots (a prefill micro-batch can choose every expert
 * of a layer), it runs in waves of at most `capacity` experts: first the experts already
 * resident (hits, in order), then the rest in order; each wave is pinned while it is
 * accessed and computed and unpinned before the next, whose misses may evict it.
 */
#ifndef MOEINF_EXPERTS_STEP_H
#define MOEINF_EXPERTS_STEP_H

#include <stdint.h>

#include "experts/cache.h"
#include "experts/policy.h"

struct moeinf_step {
    int n_experts; /* experts per layer */
    int layer;
    int n;             /* distinct experts in the step */
    uint32_t *ids;     /* (n_experts) flat ids, first-appearance order */
    uint32_t *counts;  /* (n_experts) tokens that chose ids[i] */
    uint32_t *order;   /* (n_experts) the ids in wave order */
    int32_t *index_of; /* (n_experts) position of expert e in ids, -1 if absent */
    int pos;           /* next position in order */
    int wave_begin;    /* the current wave: order[wave_begin, pos) */
};

enum moeinf_status moeinf_step_init(struct moeinf_step *s, int n_experts, struct moeinf_error *err);
void moeinf_step_free(struct moeinf_step *s);

/* The step of `layer` for m tokens whose choices are sel[j * top_k + r] (experts of the
 * layer, 0 <= e < n_experts). */
void moeinf_step_collect(struct moeinf_step *s, int layer, const int32_t *sel, int m, int top_k);

/* Tells the policy (on_step_begin with ids and counts) and plans the waves. */
void moeinf_step_begin(struct moeinf_step *s, const struct moeinf_cache *c,
                       struct moeinf_policy *p);

/*
 * The next wave: pins at most capacity ids, then accesses each in order (admitting misses,
 * evicting the policy's victims). *ids receives the wave's ids, ev[i] (room for the cache's
 * capacity) what access i did, *n_wave their number, 0 when the step is done. Errors are the
 * cache's (moeinf_cache_access).
 */
enum moeinf_status moeinf_step_wave(struct moeinf_step *s, struct moeinf_cache *c,
                                    struct moeinf_policy *p, const uint32_t **ids,
                                    struct moeinf_cache_event *ev, int *n_wave,
                                    struct moeinf_error *err);
/* Unpins the current wave. */
void moeinf_step_wave_end(struct moeinf_step *s, struct moeinf_cache *c);
/* Tells the policy the step is over (on_step_end). */
void moeinf_step_end(struct moeinf_step *s, struct moeinf_policy *p);

#endif
