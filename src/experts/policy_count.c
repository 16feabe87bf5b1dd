/*
 * policy_count.c - global activation counts with periodic decay, in the manner of BrainStorm's
 * frequency-based expert cache: every demand access adds 1 to its expert's count; every
 * `period` accesses all counts are halved, so that the ranking follows the recent workload
 * rather than the whole history (which is what plain LFU ranks by). Evict the resident expert
 * with the lowest count, the least recently used among equal counts.
 *
 * period = DECAY_IDS x n_layers x n_experts accesses: on average every expert could be
 * touched DECAY_IDS times per period whatever the model's size and top_k.
 */
#include <stdlib.h>

#include "base/status.h"
#include "experts/cache.h"
#include "experts/heap.h"
#include "experts/policy.h"

#define DECAY_IDS 1

struct count {
    struct moeinf_heap heap; /* key = decayed count (every id), tie = last use */
    uint64_t clock;          /* events seen, for recency */
    uint64_t period;         /* accesses between two halvings */
    uint64_t until_decay;    /* accesses left before the next halving */
    uint32_t n_ids;
};

static void count_free(void *state) {
    struct count *s = state;
    if (!s) return;
    moeinf_heap_free(&s->heap);
    free(s);
}

static enum moeinf_status count_init(const struct moeinf_policy_geometry *geom, void **state,
                                     struct moeinf_error *err) {
    struct count *s = calloc(1, sizeof *s);
    if (!s) return moeinf_fail(err, MOEINF_ERR_NOMEM, "policy count: out of memory");
    s->n_ids = (uint32_t)geom->n_layers * (uint32_t)geom->n_experts;
    s->period = (uint64_t)DECAY_IDS * s->n_ids;
    s->until_decay = s->period;
    enum moeinf_status st = moeinf_heap_init(&s->heap, s->n_ids, (uint32_t)geom->capacity, err);
    if (st != MOEINF_OK) {
        free(s);
        return st;
    }
    *state = s;
    return MOEINF_OK;
}

static void count_on_access(void *state, uint32_t id, bool hit) {
    (void)hit;
    struct count *s = state;
    s->heap.key[id]++;
    s->heap.tie[id] = ++s->clock;
    moeinf_heap_update(&s->heap, id);
    if (--s->until_decay == 0) {
        /* O(n_ids) once per n_ids accesses: O(1) per access amortised. Halving can make
         * counts equal, which hands the order to the tie key: rebuild the heap. */
        for (uint32_t i = 0; i < s->n_ids; i++)
            s->heap.key[i] >>= 1;
        moeinf_heap_rebuild(&s->heap);
        s->until_decay = s->period;
    }
}

static void count_on_admit(void *state, uint32_t id, bool prefetch) {
    (void)prefetch;
    struct count *s = state;
    s->heap.tie[id] = ++s->clock;
    moeinf_heap_push(&s->heap, id);
}

static void count_on_evict(void *state, uint32_t id) {
    struct count *s = state;
    moeinf_heap_remove(&s->heap, id);
}

static uint32_t count_choose_victim(void *state, const struct moeinf_cache *cache) {
    const struct count *s = state;
    return moeinf_heap_min_unpinned(&s->heap, cache);
}

const struct moeinf_policy_ops moeinf_policy_count = {
    .name = "count",
    .summary = "global activation counts, halved every L x E accesses (BrainStorm-style)",
    .init = count_init,
    .free = count_free,
    .on_access = count_on_access,
    .on_admit = count_on_admit,
    .on_evict = count_on_evict,
    .choose_victim = count_choose_victim,
};
