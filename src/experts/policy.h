/*
 * policy.h - the expert-cache policy interface: a table of functions that the cache calls on
 * every event it sees, plus a registry that creates a policy by name.
 *
 * Expert ids. An expert is the pair (layer, expert); policies and the cache name it by one flat
 * id = layer * n_experts + expert, in [0, n_layers * n_experts).
 *
 * Event order. The driver (the engine, or the simulator's replay) reports, for each request:
 *
 *   on_request_begin(index)
 *     for each forward iteration: one decode token, or a prefill micro-batch of n_tokens
 *       on_token_begin(phase, n_tokens)
 *         for each MoE layer l = 0..L-1, one "step" (experts/step.h runs it):
 *           on_step_begin(l, ids, counts, n)  the distinct experts the iteration's tokens chose
 *                                             (first-appearance order over token, then router
 *                                             rank) and how many tokens chose each
 *             in waves of at most `capacity` ids (one wave unless n > capacity): the cache
 *             pins the wave, then per id: [choose_victim + on_evict] [on_admit]
 *             on_access(id, hit); the wave is unpinned after its compute
 *           on_step_end(l)
 *           propose_prefetch(l, out, max)     the driver may admit the proposals: each one
 *                                             goes through [choose_victim + on_evict] on_admit
 *       on_token_end()
 *   on_request_end()
 *
 * A decode token (and a trace replayed per token) is an iteration of one token: its step is
 * the token's top_k ids in router-rank order with counts of 1, in one wave.
 *
 * A demand miss always admits the expert (there is no bypass). When the cache is full the
 * policy chooses the victim among resident experts that are not pinned; the cache (not the
 * policy) owns the pins, which mark the experts the current step needs. choose_victim is
 * called only when such an expert exists, and it must return one (the cache checks).
 *
 * Policies see each event only when it happens. An offline policy is the exception: the
 * simulator hands it the whole demand-access sequence (ops->set_future, Belady) or every
 * request's expert counts (ops->set_request_counts, freq-oracle) before replay, and the engine
 * refuses it. No policy parameter may depend on anything but the
 * geometry below (never on a trace's name or other header fields).
 *
 * Registering a policy: write policy_<name>.c defining
 *   const struct moeinf_policy_ops moeinf_policy_<name> = {.name = "<name>", ...};
 * declare it in this header, and add &moeinf_policy_<name> to the table in policy.c. The
 * simulator lists every registered policy (plus its offline ones) in `moeinf sim --help`.
 */
#ifndef MOEINF_EXPERTS_POLICY_H
#define MOEINF_EXPERTS_POLICY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "moeinf.h"

#define MOEINF_EXPERT_NONE UINT32_MAX
/* Upper bound on n_layers * n_experts: keeps ids, slot numbers and per-id tables small. */
#define MOEINF_MAX_EXPERT_IDS (1u << 24)

struct moeinf_cache;

/* Which model a policy's saved state (the EAMC file, experts/eam.h) was learned on. */
enum moeinf_model_id_kind {
    MOEINF_MODEL_ID_NONE = 0,    /* unknown: a reader with none checks no file's identity */
    MOEINF_MODEL_ID_ROUTERS = 1, /* a model: hash of its geometry and router weights */
    MOEINF_MODEL_ID_TRACE = 2,   /* a trace that names no model_id: hash of its model line */
};

/* Bytes of a model identity's name (a label for messages: printable ASCII, NUL-terminated). */
#define MOEINF_MODEL_NAME_BYTES 48

struct moeinf_model_id {
    enum moeinf_model_id_kind kind;
    uint64_t hash;
    char name[MOEINF_MODEL_NAME_BYTES];
};

/* Everything a policy may be parameterised by. `model` is not a parameter: policies carry it
 * into their saved state and never decide anything by it. */
struct moeinf_policy_geometry {
    int n_layers;  /* MoE layers L */
    int n_experts; /* routed experts per layer E */
    int top_k;     /* experts the router selects per token and layer */
    int capacity;  /* cache slots C, top_k <= C */
    struct moeinf_model_id model;
};

struct moeinf_policy_ops {
    const char *name;    /* registry key: "lru", "lfu", ... */
    const char *summary; /* one line for --help */

    /* Allocates the policy's state for this geometry (already validated by the registry). */
    enum moeinf_status (*init)(const struct moeinf_policy_geometry *geom, void **state,
                               struct moeinf_error *err);
    /* Frees the state (accepts NULL). */
    void (*free)(void *state);

    /* (optional) a request starts; index counts requests from 0 since the policy was made */
    void (*on_request_begin)(void *state, uint64_t index);
    /* (optional) the current request finished */
    void (*on_request_end)(void *state);
    /* (optional) a forward iteration of n_tokens tokens (1 for decode; a prefill micro-batch
     * may hold more) starts in the given phase */
    void (*on_token_begin)(void *state, enum moeinf_phase phase, int n_tokens);
    /* (optional) the forward iteration finished */
    void (*on_token_end)(void *state);
    /* (optional) the routers of `layer` chose `ids` (flat ids, n of them, all distinct; up to
     * n_experts in a prefill micro-batch), `counts[i]` tokens of the iteration chose ids[i]
     * (counts NULL: one each); called before their accesses */
    void (*on_step_begin)(void *state, int layer, const uint32_t *ids, const uint32_t *counts,
                          int n);
    /* (optional) the accesses of the step are done; pins are released */
    void (*on_step_end)(void *state, int layer);

    /* A demand access to `id`, after the cache resolved it: on a miss the expert has just been
     * admitted (on_admit came first). */
    void (*on_access)(void *state, uint32_t id, bool hit);
    /* `id` became resident, on a demand miss (prefetch false) or by a prefetch */
    void (*on_admit)(void *state, uint32_t id, bool prefetch);
    /* `id` left the cache (it was the victim) */
    void (*on_evict)(void *state, uint32_t id);
    /* The expert to evict: resident and not pinned (see moeinf_cache_is_pinned). Called only
     * when the cache is full and such an expert exists. */
    uint32_t (*choose_victim)(void *state, const struct moeinf_cache *cache);

    /* (optional) after the step of `layer`: writes up to `max` flat ids to prefetch (experts
     * of later layers, or of the next token) into out and returns how many */
    int (*propose_prefetch)(void *state, int layer, uint32_t *out, int max);

    /* (optional) writes / reads the state that should survive a restart (EAMC) */
    enum moeinf_status (*save)(const void *state, FILE *f, struct moeinf_error *err);
    enum moeinf_status (*load)(void *state, FILE *f, struct moeinf_error *err);

    /* (optional; offline policies only, simulator only) the whole demand-access sequence, in
     * replay order, before the first event; `ids` is borrowed for the call only */
    enum moeinf_status (*set_future)(void *state, const uint32_t *ids, size_t n,
                                     struct moeinf_error *err);
    /* (optional; offline policies only, simulator only) every request's expert counts by
     * phase before the first event: counts[(r * 2 + phase) * n_ids + id] = tokens of the r-th
     * request (the index of on_request_begin) in that phase (enum moeinf_phase: PREFILL 0,
     * DECODE 1) whose router chose id; borrowed for the call only */
    enum moeinf_status (*set_request_counts)(void *state, const uint32_t *counts, size_t n_requests,
                                             struct moeinf_error *err);
};

/* An offline policy: it is told the future before replay (simulator only). */
static inline bool moeinf_policy_ops_offline(const struct moeinf_policy_ops *ops) {
    return ops->set_future || ops->set_request_counts;
}

/* A policy instance: its table, its geometry and its opaque state. */
struct moeinf_policy {
    const struct moeinf_policy_ops *ops;
    struct moeinf_policy_geometry geom;
    void *state;
};

/* The online policies of the engine. */
extern const struct moeinf_policy_ops moeinf_policy_lru;
extern const struct moeinf_policy_ops moeinf_policy_lfu;
extern const struct moeinf_policy_ops moeinf_policy_count;
extern const struct moeinf_policy_ops moeinf_policy_reuse;        /* policy_reuse.c */
extern const struct moeinf_policy_ops moeinf_policy_moe_infinity; /* policy_eam.c */

/* The name of the policy used when none is given. */
#define MOEINF_POLICY_DEFAULT "reuse"

/* Registered (online) policies by index; NULL past the end. */
const struct moeinf_policy_ops *moeinf_policy_registry(size_t i);
/* The registered policy called `name`, or NULL. */
const struct moeinf_policy_ops *moeinf_policy_find(const char *name);

/* Validates geom (MOEINF_ERR_ARG: a cache smaller than top_k, ids beyond
 * MOEINF_MAX_EXPERT_IDS, ...) and creates a policy from a table. */
enum moeinf_status moeinf_policy_create_ops(const struct moeinf_policy_ops *ops,
                                            const struct moeinf_policy_geometry *geom,
                                            struct moeinf_policy **out, struct moeinf_error *err);
/* Creates the registered policy `name` (MOEINF_ERR_ARG if unknown). */
enum moeinf_status moeinf_policy_create(const char *name, const struct moeinf_policy_geometry *geom,
                                        struct moeinf_policy **out, struct moeinf_error *err);
void moeinf_policy_free(struct moeinf_policy *p);

/* Checks a geometry; the message names `what` (a path or "policy"). */
enum moeinf_status moeinf_policy_geometry_check(const struct moeinf_policy_geometry *geom,
                                                const char *what, struct moeinf_error *err);

/* Event wrappers: skip optional slots that are NULL. */
static inline void moeinf_policy_request_begin(struct moeinf_policy *p, uint64_t index) {
    if (p->ops->on_request_begin) p->ops->on_request_begin(p->state, index);
}

static inline void moeinf_policy_request_end(struct moeinf_policy *p) {
    if (p->ops->on_request_end) p->ops->on_request_end(p->state);
}

/* An iteration of n_tokens tokens (moeinf_policy_token_begin: one). */
static inline void moeinf_policy_tokens_begin(struct moeinf_policy *p, enum moeinf_phase phase,
                                              int n_tokens) {
    if (p->ops->on_token_begin) p->ops->on_token_begin(p->state, phase, n_tokens);
}

static inline void moeinf_policy_token_begin(struct moeinf_policy *p, enum moeinf_phase phase) {
    moeinf_policy_tokens_begin(p, phase, 1);
}

static inline void moeinf_policy_step_begin(struct moeinf_policy *p, int layer,
                                            const uint32_t *ids, const uint32_t *counts, int n) {
    if (p->ops->on_step_begin) p->ops->on_step_begin(p->state, layer, ids, counts, n);
}

static inline void moeinf_policy_step_end(struct moeinf_policy *p, int layer) {
    if (p->ops->on_step_end) p->ops->on_step_end(p->state, layer);
}

static inline void moeinf_policy_token_end(struct moeinf_policy *p) {
    if (p->ops->on_token_end) p->ops->on_token_end(p->state);
}

/* Prefetch proposals after the step of `layer` (0 when the policy has none). */
static inline int moeinf_policy_propose_prefetch(struct moeinf_policy *p, int layer, uint32_t *out,
                                                 int max) {
    if (!p->ops->propose_prefetch || max <= 0) return 0;
    return p->ops->propose_prefetch(p->state, layer, out, max);
}

#endif
