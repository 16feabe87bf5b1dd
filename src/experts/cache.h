/*
 * cache.h - the fast tier's expert slots: which expert sits in which slot, which experts are
 * pinned (needed by the current step, or in use), and the access protocol that drives a policy.
 *
 * The cache holds `capacity` slots over flat expert ids (layer * n_experts + expert). It owns
 * residency and pins; the policy (policy.h) owns the order of eviction. The engine
 * (model/forward.c through offload/tier.c) and the simulator (sim/replay.c) drive the same
 * two objects through experts/step.h, which runs one layer's step in waves; for a step that
 * fits in one wave it amounts to:
 *
 *   moeinf_cache_step_begin(c, p, layer, ids, n);      pin the router's choice, tell the policy
 *   for each id: moeinf_cache_access(c, p, id, &ev, err);   hit, or admit (evicting ev.evicted)
 *   moeinf_cache_step_end(c, p, layer, ids, n);        unpin, tell the policy
 *   n = moeinf_policy_propose_prefetch(p, layer, buf, k);
 *   for each: moeinf_cache_prefetch(c, p, buf[i], &ev, err);
 *
 * The cache moves no bytes: ev.slot says where the expert must be (or is), and ev.evicted
 * which expert's bytes that slot held before; in the engine, offload/store.c reads the
 * expert's bytes into that slot.
 */
#ifndef MOEINF_EXPERTS_CACHE_H
#define MOEINF_EXPERTS_CACHE_H

#include <stdbool.h>
#include <stdint.h>

#include "experts/policy.h"
#include "moeinf.h"

struct moeinf_cache;

/* What one access or prefetch did. */
struct moeinf_cache_event {
    bool hit;                     /* the expert was already resident */
    bool prefetch_hit;            /* a demand hit on an expert that a prefetch brought in and
                                     no demand access has touched since (counted once) */
    bool admitted;                /* the expert was brought in by this call */
    int slot;                     /* slot holding the expert now; -1 if a prefetch was skipped */
    uint32_t evicted;             /* expert evicted to make room, or MOEINF_EXPERT_NONE */
    bool evicted_unused_prefetch; /* that expert was prefetched and never demanded */
};

/* A cache of `capacity` slots over n_layers x n_experts ids, all free. MOEINF_ERR_ARG for an
 * impossible geometry (see moeinf_policy_geometry_check). */
enum moeinf_status moeinf_cache_init(const struct moeinf_policy_geometry *geom,
                                     struct moeinf_cache **out, struct moeinf_error *err);
void moeinf_cache_free(struct moeinf_cache *c);

int moeinf_cache_capacity(const struct moeinf_cache *c);
/* Slot of `id`, or -1 when it is not resident. */
int moeinf_cache_slot(const struct moeinf_cache *c, uint32_t id);
bool moeinf_cache_is_resident(const struct moeinf_cache *c, uint32_t id);
/* Expert in `slot`, or MOEINF_EXPERT_NONE for a free slot. */
uint32_t moeinf_cache_slot_expert(const struct moeinf_cache *c, int slot);
/* True while a prefetch's expert has not been demanded yet. */
bool moeinf_cache_is_prefetched(const struct moeinf_cache *c, uint32_t id);

/* Pins are counts: an expert pinned n times needs n unpins. A pinned expert is never evicted;
 * an id may be pinned before it is resident (the step that needs it admits it). */
void moeinf_cache_pin(struct moeinf_cache *c, uint32_t id);
void moeinf_cache_unpin(struct moeinf_cache *c, uint32_t id);
bool moeinf_cache_is_pinned(const struct moeinf_cache *c, uint32_t id);

/* A one-token step: pins the `n` ids the router of `layer` chose and calls the policy's
 * on_step_begin (counts of one); step_end unpins them and calls on_step_end. */
void moeinf_cache_step_begin(struct moeinf_cache *c, struct moeinf_policy *p, int layer,
                             const uint32_t *ids, int n);
void moeinf_cache_step_end(struct moeinf_cache *c, struct moeinf_policy *p, int layer,
                           const uint32_t *ids, int n);

/*
 * A demand access: a hit if `id` is resident, otherwise a miss that admits it, first evicting
 * the policy's victim when the cache is full. Then calls the policy's on_access.
 * MOEINF_ERR_ARG for an id out of range, when every resident expert is pinned (the caller
 * pinned more than the capacity allows), or when the policy chose an invalid victim.
 */
enum moeinf_status moeinf_cache_access(struct moeinf_cache *c, struct moeinf_policy *p, uint32_t id,
                                       struct moeinf_cache_event *ev, struct moeinf_error *err);

/*
 * Admits `id` ahead of need, marking it prefetched. Nothing happens if it is resident
 * (ev->hit) or if the cache is full and every resident expert is pinned (ev->slot == -1).
 * Errors as for moeinf_cache_access.
 */
enum moeinf_status moeinf_cache_prefetch(struct moeinf_cache *c, struct moeinf_policy *p,
                                         uint32_t id, struct moeinf_cache_event *ev,
                                         struct moeinf_error *err);

/* Forgets `id` (its slot's bytes are not valid: a failed read), telling the policy as for an
 * eviction. Nothing happens if it is not resident. */
void moeinf_cache_drop(struct moeinf_cache *c, struct moeinf_policy *p, uint32_t id);

#endif
