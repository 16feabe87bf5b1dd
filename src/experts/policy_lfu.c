/*
 * policy_lfu.c - least frequently used: evict the resident expert with the fewest demand
 * accesses since the policy started (counts survive eviction), the least recently used among
 * equal counts. Resident experts sit in an indexed min-heap keyed by (count, last use).
 */
#include <stdlib.h>

#include "base/status.h"
#include "experts/cache.h"
#include "experts/heap.h"
#include "experts/policy.h"

struct lfu {
    struct moeinf_heap heap; /* key = accesses since start (every id), tie = last use */
    uint64_t clock;          /* events seen, for recency */
};

static void lfu_free(void *state) {
    struct lfu *s = state;
    if (!s) return;
    moeinf_heap_free(&s->heap);
    free(s);
}

static enum moeinf_status lfu_init(const struct moeinf_policy_geometry *geom, void **state,
                                   struct moeinf_error *err) {
    struct lfu *s = calloc(1, sizeof *s);
    if (!s) return moeinf_fail(err, MOEINF_ERR_NOMEM, "policy lfu: out of memory");
    uint32_t n_ids = (uint32_t)geom->n_layers * (uint32_t)geom->n_experts;
    enum moeinf_status st = moeinf_heap_init(&s->heap, n_ids, (uint32_t)geom->capacity, err);
    if (st != MOEINF_OK) {
        free(s);
        return st;
    }
    *state = s;
    return MOEINF_OK;
}

static void lfu_on_access(void *state, uint32_t id, bool hit) {
    (void)hit;
    struct lfu *s = state;
    s->heap.key[id]++;
    s->heap.tie[id] = ++s->clock;
    moeinf_heap_update(&s->heap, id);
}

static void lfu_on_admit(void *state, uint32_t id, bool prefetch) {
    (void)prefetch;
    struct lfu *s = state;
    s->heap.tie[id] = ++s->clock;
    moeinf_heap_push(&s->heap, id);
}

static void lfu_on_evict(void *state, uint32_t id) {
    struct lfu *s = state;
    moeinf_heap_remove(&s->heap, id);
}

static uint32_t lfu_choose_victim(void *state, const struct moeinf_cache *cache) {
    const struct lfu *s = state;
    return moeinf_heap_min_unpinned(&s->heap, cache);
}

const struct moeinf_policy_ops moeinf_policy_lfu = {
    .name = "lfu",
    .summary = "least frequently used (accesses since start, ties by recency)",
    .init = lfu_init,
    .free = lfu_free,
    .on_access = lfu_on_access,
    .on_admit = lfu_on_admit,
    .on_evict = lfu_on_evict,
    .choose_victim = lfu_choose_victim,
};
