/*
 * policy_belady.c - Belady's offline optimum (MIN): evict the resident expert whose next use
 * lies furthest in the future, or that is never used again. With every miss admitted, this
 * maximises hits, so it is the bound the online policies are measured against. Offline and
 * simulator-only: set_future receives the whole demand-access sequence before replay.
 *
 * next[i] is the position of the next access to the expert of access i (precomputed in one
 * backward pass); resident experts sit in an indexed heap keyed by their next use, furthest
 * first, so each access and each victim costs O(log C): a replay is O(n log C).
 */
#include <stdlib.h>

#include "base/status.h"
#include "experts/cache.h"
#include "experts/heap.h"
#include "experts/policy.h"
#include "sim/replay.h"

#define NEVER UINT32_MAX

struct belady {
    struct moeinf_heap heap; /* key = UINT64_MAX - next use: the furthest comes first */
    uint32_t *next;          /* (n) position of the next access to the same expert, or NEVER */
    size_t n;                /* accesses in the sequence */
    size_t pos;              /* accesses seen so far */
    uint32_t n_ids;
};

static void belady_free(void *state) {
    struct belady *s = state;
    if (!s) return;
    moeinf_heap_free(&s->heap);
    free(s->next);
    free(s);
}

static enum moeinf_status belady_init(const struct moeinf_policy_geometry *geom, void **state,
                                      struct moeinf_error *err) {
    struct belady *s = calloc(1, sizeof *s);
    if (!s) return moeinf_fail(err, MOEINF_ERR_NOMEM, "policy belady: out of memory");
    s->n_ids = (uint32_t)geom->n_layers * (uint32_t)geom->n_experts;
    enum moeinf_status st = moeinf_heap_init(&s->heap, s->n_ids, (uint32_t)geom->capacity, err);
    if (st != MOEINF_OK) {
        free(s);
        return st;
    }
    *state = s;
    return MOEINF_OK;
}

static enum moeinf_status belady_set_future(void *state, const uint32_t *ids, size_t n,
                                            struct moeinf_error *err) {
    struct belady *s = state;
    if (n >= NEVER) {
        return moeinf_fail(err, MOEINF_ERR_UNSUPPORTED,
                           "policy belady: %zu accesses, at most %u supported", n, NEVER - 1);
    }
    uint32_t *next = malloc((n ? n : 1) * sizeof *next);
    uint32_t *last = malloc((size_t)s->n_ids * sizeof *last);
    if (!next || !last) {
        free(next);
        free(last);
        return moeinf_fail(err, MOEINF_ERR_NOMEM,
                           "policy belady: out of memory for %zu "
                           "accesses",
                           n);
    }
    for (uint32_t i = 0; i < s->n_ids; i++)
        last[i] = NEVER;
    for (size_t i = n; i-- > 0;) {
        next[i] = last[ids[i]];
        last[ids[i]] = (uint32_t)i;
    }
    free(last);
    free(s->next);
    s->next = next;
    s->n = n;
    s->pos = 0;
    return MOEINF_OK;
}

static void belady_on_access(void *state, uint32_t id, bool hit) {
    (void)hit;
    struct belady *s = state;
    /* Accesses beyond the announced future (a driver bug) count as never used again. */
    uint32_t next = s->pos < s->n ? s->next[s->pos] : NEVER;
    s->pos++;
    s->heap.key[id] = UINT64_MAX - next;
    moeinf_heap_update(&s->heap, id);
}

static void belady_on_admit(void *state, uint32_t id, bool prefetch) {
    (void)prefetch;
    struct belady *s = state;
    /* The key is set by the on_access that follows a demand admission. */
    s->heap.key[id] = 0;
    moeinf_heap_push(&s->heap, id);
}

static void belady_on_evict(void *state, uint32_t id) {
    struct belady *s = state;
    moeinf_heap_remove(&s->heap, id);
}

static uint32_t belady_choose_victim(void *state, const struct moeinf_cache *cache) {
    const struct belady *s = state;
    return moeinf_heap_min_unpinned(&s->heap, cache);
}

const struct moeinf_policy_ops moeinf_policy_belady = {
    .name = "belady",
    .summary = "offline optimum: evict the expert used furthest in the future (simulator only)",
    .init = belady_init,
    .free = belady_free,
    .on_access = belady_on_access,
    .on_admit = belady_on_admit,
    .on_evict = belady_on_evict,
    .choose_victim = belady_choose_victim,
    .set_future = belady_set_future,
};
