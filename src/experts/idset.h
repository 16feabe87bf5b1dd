/*
 * idset.h - a set of expert ids (flat, 0..n_ids-1) of bounded size: a dense list of the ids
 * held with each id's index, so that adding, removing and testing are O(1) and a scan visits
 * only the ids held. The default policy (policy_reuse.c) keeps its resident experts in one,
 * and the shadow caches of its set dueling (the ids a cache of the same capacity would hold
 * had it followed another ranking; no expert bytes behind them) in others.
 */
#ifndef MOEINF_EXPERTS_IDSET_H
#define MOEINF_EXPERTS_IDSET_H

#include <stdbool.h>
#include <stdint.h>

#include "moeinf.h"

struct moeinf_idset {
    uint32_t *ids; /* (cap) the ids held, in no order */
    int32_t *pos;  /* (n_ids) index in ids, -1 when absent */
    int n, cap;
};

/* An empty set of at most `cap` of the ids 0..n_ids-1. */
enum moeinf_status moeinf_idset_init(struct moeinf_idset *s, uint32_t n_ids, int cap,
                                     struct moeinf_error *err);
void moeinf_idset_free(struct moeinf_idset *s);
void moeinf_idset_clear(struct moeinf_idset *s);

static inline bool moeinf_idset_holds(const struct moeinf_idset *s, uint32_t id) {
    return s->pos[id] >= 0;
}

/* Adds id (not held; the set not full). */
void moeinf_idset_add(struct moeinf_idset *s, uint32_t id);
/* Removes a held id. */
void moeinf_idset_remove(struct moeinf_idset *s, uint32_t id);

#endif
