/*
 * policy_freq_oracle.c - an oracle of each request's most frequent experts: evict the resident
 * expert that the current request uses least in the current phase, counted over the whole
 * request in advance (the tokens of the phase whose router chose the expert; prefill and
 * decode kept apart, as the paper keeps a request's EAMs); among equals the least recently
 * used (demand access or admission). Experts the phase never uses count 0, so they go first.
 *
 * This is the best a cache that knows only which experts a request prefers, and not when it
 * uses them, can aim at: on routing where a request draws its experts independently each
 * token from a skewed mix of its own, holding its most frequent experts is what an online
 * policy can at best learn, while Belady's advantage is foresight of the order. Offline and
 * simulator-only: set_request_counts receives every request's counts before replay; between
 * requests (before the first one) every count is 0 and the order is LRU.
 *
 * Resident experts sit in an indexed heap keyed by (count in the current request, last use);
 * a new request re-keys the resident experts (O(C)), each access and victim costs O(log C).
 */
#include <stdlib.h>
#include <string.h>

#include "base/status.h"
#include "experts/cache.h"
#include "experts/heap.h"
#include "experts/policy.h"
#include "sim/replay.h"

struct freq_oracle {
    struct moeinf_heap heap; /* key = the current request's count, tie = last use */
    uint32_t *counts;        /* (n_requests x 2 x n_ids) every request's counts by phase */
    size_t n_requests;
    const uint32_t *req; /* (2 x n_ids) the current request's rows, NULL between requests */
    const uint32_t *cur; /* (n_ids) the current phase's row, NULL between requests */
    uint32_t n_ids;
    uint64_t tick; /* uses so far (accesses and admissions) */
};

static void oracle_free(void *state) {
    struct freq_oracle *s = state;
    if (!s) return;
    moeinf_heap_free(&s->heap);
    free(s->counts);
    free(s);
}

static enum moeinf_status oracle_init(const struct moeinf_policy_geometry *geom, void **state,
                                      struct moeinf_error *err) {
    struct freq_oracle *s = calloc(1, sizeof *s);
    if (!s) return moeinf_fail(err, MOEINF_ERR_NOMEM, "policy freq-oracle: out of memory");
    s->n_ids = (uint32_t)geom->n_layers * (uint32_t)geom->n_experts;
    enum moeinf_status st = moeinf_heap_init(&s->heap, s->n_ids, (uint32_t)geom->capacity, err);
    if (st != MOEINF_OK) {
        free(s);
        return st;
    }
    *state = s;
    return MOEINF_OK;
}

static enum moeinf_status oracle_set_request_counts(void *state, const uint32_t *counts,
                                                    size_t n_requests, struct moeinf_error *err) {
    struct freq_oracle *s = state;
    size_t n = n_requests * 2 * (size_t)s->n_ids;
    uint32_t *copy = malloc((n ? n : 1) * sizeof *copy);
    if (!copy) {
        return moeinf_fail(err, MOEINF_ERR_NOMEM,
                           "policy freq-oracle: out of memory for the counts of %zu requests",
                           n_requests);
    }
    if (n) memcpy(copy, counts, n * sizeof *copy);
    free(s->counts);
    s->counts = copy;
    s->n_requests = n_requests;
    s->req = s->cur = NULL;
    return MOEINF_OK;
}

static uint32_t count_of(const struct freq_oracle *s, uint32_t id) {
    return s->cur ? s->cur[id] : 0;
}

/* The resident experts' keys for the current request. */
static void rekey(struct freq_oracle *s) {
    for (uint32_t i = 0; i < s->heap.n; i++) {
        uint32_t id = s->heap.items[i];
        s->heap.key[id] = count_of(s, id);
    }
    moeinf_heap_rebuild(&s->heap);
}

static void oracle_on_request_begin(void *state, uint64_t index) {
    struct freq_oracle *s = state;
    /* A request beyond the announced ones (a driver bug) uses nothing it knows of. */
    s->req = index < s->n_requests ? s->counts + (size_t)index * 2 * s->n_ids : NULL;
    s->cur = NULL; /* set by the first iteration's phase */
    rekey(s);
}

static void oracle_on_request_end(void *state) {
    struct freq_oracle *s = state;
    s->req = s->cur = NULL;
    rekey(s);
}

static void oracle_on_token_begin(void *state, enum moeinf_phase phase, int n_tokens) {
    (void)n_tokens;
    struct freq_oracle *s = state;
    const uint32_t *row =
        s->req ? s->req + (phase == MOEINF_PHASE_DECODE ? (size_t)s->n_ids : 0) : NULL;
    if (row == s->cur) return;
    s->cur = row;
    rekey(s);
}

static void oracle_on_access(void *state, uint32_t id, bool hit) {
    (void)hit;
    struct freq_oracle *s = state;
    s->heap.tie[id] = ++s->tick;
    moeinf_heap_update(&s->heap, id);
}

static void oracle_on_admit(void *state, uint32_t id, bool prefetch) {
    (void)prefetch;
    struct freq_oracle *s = state;
    s->heap.key[id] = count_of(s, id);
    s->heap.tie[id] = ++s->tick;
    moeinf_heap_push(&s->heap, id);
}

static void oracle_on_evict(void *state, uint32_t id) {
    struct freq_oracle *s = state;
    moeinf_heap_remove(&s->heap, id);
}

static uint32_t oracle_choose_victim(void *state, const struct moeinf_cache *cache) {
    const struct freq_oracle *s = state;
    return moeinf_heap_min_unpinned(&s->heap, cache);
}

const struct moeinf_policy_ops moeinf_policy_freq_oracle = {
    .name = "freq-oracle",
    .summary = "offline: keep the experts the request uses most in the current phase, counted "
               "in advance (simulator only)",
    .init = oracle_init,
    .free = oracle_free,
    .on_request_begin = oracle_on_request_begin,
    .on_request_end = oracle_on_request_end,
    .on_token_begin = oracle_on_token_begin,
    .on_access = oracle_on_access,
    .on_admit = oracle_on_admit,
    .on_evict = oracle_on_evict,
    .choose_victim = oracle_choose_victim,
    .set_request_counts = oracle_set_request_counts,
};
