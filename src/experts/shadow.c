/*
 * shadow.c - the id set behind shadow.h: a dense list with each id's index, so that adding,
 * removing and testing are O(1) and a scan visits only the ids held.
 */
#include "experts/shadow.h"

#include <assert.h>
#include <stdlib.h>

#include "base/status.h"

enum moeinf_status moeinf_shadow_init(struct moeinf_shadow *s, uint32_t n_ids, int cap,
                                      struct moeinf_error *err) {
    s->ids = malloc((size_t)cap * sizeof *s->ids);
    s->pos = malloc((size_t)n_ids * sizeof *s->pos);
    s->n = 0;
    s->cap = cap;
    s->misses = 0;
    if (!s->ids || !s->pos) {
        moeinf_shadow_free(s);
        return moeinf_fail(err, MOEINF_ERR_NOMEM, "shadow cache: out of memory");
    }
    for (uint32_t id = 0; id < n_ids; id++)
        s->pos[id] = -1;
    return MOEINF_OK;
}

void moeinf_shadow_free(struct moeinf_shadow *s) {
    free(s->ids);
    free(s->pos);
    s->ids = NULL;
    s->pos = NULL;
    s->n = 0;
}

void moeinf_shadow_clear(struct moeinf_shadow *s) {
    for (int i = 0; i < s->n; i++)
        s->pos[s->ids[i]] = -1;
    s->n = 0;
    s->misses = 0;
}

void moeinf_shadow_add(struct moeinf_shadow *s, uint32_t id) {
    assert(s->pos[id] < 0 && s->n < s->cap);
    s->pos[id] = s->n;
    s->ids[s->n++] = id;
}

void moeinf_shadow_remove(struct moeinf_shadow *s, uint32_t id) {
    int i = s->pos[id];
    assert(i >= 0);
    uint32_t last = s->ids[--s->n];
    s->ids[i] = last;
    s->pos[last] = i;
    s->pos[id] = -1;
}
