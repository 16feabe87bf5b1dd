/*
 * heap.h - an indexed binary min-heap of expert ids, ordered by (key[id], tie[id]). Each id's
 * position is tracked, so that a key can change or an id leave in O(log n). Policies that rank
 * resident experts by a number (LFU counts, Belady's next use) keep them in one.
 */
#ifndef MOEINF_EXPERTS_HEAP_H
#define MOEINF_EXPERTS_HEAP_H

#include <stdbool.h>
#include <stdint.h>

#include "moeinf.h"

struct moeinf_cache;

struct moeinf_heap {
    uint32_t *items; /* (cap) ids in heap order; items[0] is the minimum */
    uint32_t *pos;   /* (n_ids) index of each id in items, UINT32_MAX when absent */
    uint64_t *key;   /* (n_ids) primary key, smaller first; set by the owner */
    uint64_t *tie;   /* (n_ids) secondary key for equal primaries */
    uint32_t n;      /* ids in the heap */
    uint32_t cap;
};

/* A heap of up to `cap` of the ids 0..n_ids-1, keys zeroed. */
enum moeinf_status moeinf_heap_init(struct moeinf_heap *h, uint32_t n_ids, uint32_t cap,
                                    struct moeinf_error *err);
void moeinf_heap_free(struct moeinf_heap *h);

static inline bool moeinf_heap_contains(const struct moeinf_heap *h, uint32_t id) {
    return h->pos[id] != UINT32_MAX;
}

/* Inserts id (absent, heap not full) with its current key/tie. */
void moeinf_heap_push(struct moeinf_heap *h, uint32_t id);
/* Restores the order after the owner changed key[id] or tie[id] of a contained id. */
void moeinf_heap_update(struct moeinf_heap *h, uint32_t id);
/* Removes a contained id. */
void moeinf_heap_remove(struct moeinf_heap *h, uint32_t id);
/* Restores the order after the owner changed many keys at once (O(n)). */
void moeinf_heap_rebuild(struct moeinf_heap *h);
/* The smallest id that the cache does not pin, or UINT32_MAX. Visits only the pinned ids
 * that sit above it and their children, so the cost is O(pinned), not O(n). */
uint32_t moeinf_heap_min_unpinned(const struct moeinf_heap *h, const struct moeinf_cache *c);

#endif
