/* heap.c - indexed binary min-heap of expert ids (see heap.h). */
#include "experts/heap.h"

#include <assert.h>
#include <stdlib.h>

#include "base/status.h"
#include "experts/cache.h"

#define ABSENT UINT32_MAX

enum moeinf_status moeinf_heap_init(struct moeinf_heap *h, uint32_t n_ids, uint32_t cap,
                                    struct moeinf_error *err) {
    h->items = malloc((size_t)cap * sizeof *h->items);
    h->pos = malloc((size_t)n_ids * sizeof *h->pos);
    h->key = calloc(n_ids, sizeof *h->key);
    h->tie = calloc(n_ids, sizeof *h->tie);
    h->n = 0;
    h->cap = cap;
    if (!h->items || !h->pos || !h->key || !h->tie) {
        moeinf_heap_free(h);
        return moeinf_fail(err, MOEINF_ERR_NOMEM, "heap of %u experts: out of memory",
                           (unsigned)n_ids);
    }
    for (uint32_t i = 0; i < n_ids; i++)
        h->pos[i] = ABSENT;
    return MOEINF_OK;
}

void moeinf_heap_free(struct moeinf_heap *h) {
    if (!h) return;
    free(h->items);
    free(h->pos);
    free(h->key);
    free(h->tie);
    h->items = h->pos = NULL;
    h->key = h->tie = NULL;
    h->n = h->cap = 0;
}

static bool less(const struct moeinf_heap *h, uint32_t a, uint32_t b) {
    return h->key[a] < h->key[b] || (h->key[a] == h->key[b] && h->tie[a] < h->tie[b]);
}

static void place(struct moeinf_heap *h, uint32_t i, uint32_t id) {
    h->items[i] = id;
    h->pos[id] = i;
}

static void sift_up(struct moeinf_heap *h, uint32_t i) {
    uint32_t id = h->items[i];
    while (i > 0) {
        uint32_t parent = (i - 1) / 2;
        if (!less(h, id, h->items[parent])) break;
        place(h, i, h->items[parent]);
        i = parent;
    }
    place(h, i, id);
}

static void sift_down(struct moeinf_heap *h, uint32_t i) {
    uint32_t id = h->items[i];
    for (;;) {
        uint32_t child = 2 * i + 1;
        if (child >= h->n) break;
        if (child + 1 < h->n && less(h, h->items[child + 1], h->items[child])) child++;
        if (!less(h, h->items[child], id)) break;
        place(h, i, h->items[child]);
        i = child;
    }
    place(h, i, id);
}

void moeinf_heap_push(struct moeinf_heap *h, uint32_t id) {
    assert(h->pos[id] == ABSENT && h->n < h->cap);
    place(h, h->n++, id);
    sift_up(h, h->n - 1);
}

void moeinf_heap_update(struct moeinf_heap *h, uint32_t id) {
    uint32_t i = h->pos[id];
    assert(i != ABSENT);
    sift_up(h, i);
    sift_down(h, h->pos[id]);
}

void moeinf_heap_remove(struct moeinf_heap *h, uint32_t id) {
    uint32_t i = h->pos[id];
    assert(i != ABSENT);
    h->pos[id] = ABSENT;
    uint32_t last = h->items[--h->n];
    if (i == h->n) return;
    place(h, i, last);
    sift_up(h, i);
    sift_down(h, h->pos[last]);
}

void moeinf_heap_rebuild(struct moeinf_heap *h) {
    for (uint32_t i = h->n / 2; i-- > 0;)
        sift_down(h, i);
}

/* Every unpinned id whose ancestors are all pinned is a candidate; the minimum is among them
 * (an unpinned ancestor would be no larger). Recursion depth is the heap's height. */
static uint32_t min_unpinned_at(const struct moeinf_heap *h, const struct moeinf_cache *c,
                                uint32_t i) {
    if (i >= h->n) return ABSENT;
    uint32_t id = h->items[i];
    if (!moeinf_cache_is_pinned(c, id)) return id;
    uint32_t a = min_unpinned_at(h, c, 2 * i + 1);
    uint32_t b = min_unpinned_at(h, c, 2 * i + 2);
    if (a == ABSENT) return b;
    if (b == ABSENT) return a;
    return less(h, b, a) ? b : a;
}

uint32_t moeinf_heap_min_unpinned(const struct moeinf_heap *h, const struct moeinf_cache *c) {
    return min_unpinned_at(h, c, 0);
}
