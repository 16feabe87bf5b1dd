/*
 * shadow.h - a shadow cache: the ids a cache of the same capacity would hold had it followed
 * another ranking, and how many misses it would have had, with no expert bytes behind it. The
 * default policy (policy_reuse.c) keeps one per ranking it can follow and follows the one that
 * misses least in the current request: set dueling, as adaptive hardware caches do.
 */
#ifndef MOEINF_EXPERTS_SHADOW_H
#define MOEINF_EXPERTS_SHADOW_H

#include <stdbool.h>
#include <stdint.h>

#include "moeinf.h"

struct moeinf_shadow {
    uint32_t *ids; /* (cap) the ids held, in no order */
    int32_t *pos;  /* (n_ids) index in ids, -1 when absent */
    int n, cap;
    uint64_t misses; /* accesses to ids not held, since the last clear */
};

/* An empty shadow of `cap` slots over the ids 0..n_ids-1. */
enum moeinf_status moeinf_shadow_init(struct moeinf_shadow *s, uint32_t n_ids, int cap,
                                      struct moeinf_error *err);
void moeinf_shadow_free(struct moeinf_shadow *s);
/* Empties the shadow and zeroes its misses. */
void moeinf_shadow_clear(struct moeinf_shadow *s);

static inline bool moeinf_shadow_holds(const struct moeinf_shadow *s, uint32_t id) {
    return s->pos[id] >= 0;
}

/* Adds id (not held; the shadow not full). */
void moeinf_shadow_add(struct moeinf_shadow *s, uint32_t id);
/* Removes a held id. */
void moeinf_shadow_remove(struct moeinf_shadow *s, uint32_t id);

#endif
