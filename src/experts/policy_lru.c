/*
 * policy_lru.c - least recently used: evict the resident expert whose last use (demand access
 * or admission) is oldest. The resident experts form an intrusive doubly linked list over
 * expert ids, most recent at the head; the victim is the first unpinned expert from the tail,
 * so a choice skips at most the pinned experts (top_k of them in a step).
 */
#include <stdlib.h>

#include "base/status.h"
#include "experts/cache.h"
#include "experts/policy.h"

#define NIL UINT32_MAX

struct lru {
    uint32_t *prev; /* (n_ids) towards the head (more recent); NIL at the head */
    uint32_t *next; /* (n_ids) towards the tail (less recent); NIL at the tail */
    uint32_t head;  /* most recently used, NIL when empty */
    uint32_t tail;  /* least recently used */
};

static void lru_free(void *state) {
    struct lru *s = state;
    if (!s) return;
    free(s->prev);
    free(s->next);
    free(s);
}

static enum moeinf_status lru_init(const struct moeinf_policy_geometry *geom, void **state,
                                   struct moeinf_error *err) {
    size_t n_ids = (size_t)geom->n_layers * (size_t)geom->n_experts;
    struct lru *s = calloc(1, sizeof *s);
    if (!s) goto fail;
    s->prev = malloc(n_ids * sizeof *s->prev);
    s->next = malloc(n_ids * sizeof *s->next);
    if (!s->prev || !s->next) goto fail;
    s->head = s->tail = NIL;
    *state = s;
    return MOEINF_OK;
fail:
    lru_free(s);
    return moeinf_fail(err, MOEINF_ERR_NOMEM, "policy lru: out of memory");
}

static void unlink_id(struct lru *s, uint32_t id) {
    uint32_t p = s->prev[id];
    uint32_t n = s->next[id];
    if (p != NIL)
        s->next[p] = n;
    else
        s->head = n;
    if (n != NIL)
        s->prev[n] = p;
    else
        s->tail = p;
}

static void push_head(struct lru *s, uint32_t id) {
    s->prev[id] = NIL;
    s->next[id] = s->head;
    if (s->head != NIL)
        s->prev[s->head] = id;
    else
        s->tail = id;
    s->head = id;
}

static void lru_on_access(void *state, uint32_t id, bool hit) {
    struct lru *s = state;
    /* A miss was just admitted at the head already. */
    if (hit && s->head != id) {
        unlink_id(s, id);
        push_head(s, id);
    }
}

static void lru_on_admit(void *state, uint32_t id, bool prefetch) {
    (void)prefetch;
    push_head(state, id);
}

static void lru_on_evict(void *state, uint32_t id) {
    unlink_id(state, id);
}

static uint32_t lru_choose_victim(void *state, const struct moeinf_cache *cache) {
    const struct lru *s = state;
    uint32_t id = s->tail;
    while (id != NIL && moeinf_cache_is_pinned(cache, id))
        id = s->prev[id];
    return id == NIL ? MOEINF_EXPERT_NONE : id;
}

const struct moeinf_policy_ops moeinf_policy_lru = {
    .name = "lru",
    .summary = "least recently used (recency of demand accesses and admissions)",
    .init = lru_init,
    .free = lru_free,
    .on_access = lru_on_access,
    .on_admit = lru_on_admit,
    .on_evict = lru_on_evict,
    .choose_victim = lru_choose_victim,
};
