/* idset.c - a bounded set of expert ids (see idset.h). */
#include "experts/idset.h"

#include <assert.h>
#include <stdlib.h>

#include "base/status.h"

enum moeinf_status moeinf_idset_init(struct moeinf_idset *s, uint32_t n_ids, int cap,
                                     struct moeinf_error *err) {
    s->ids = malloc((size_t)(cap > 0 ? cap : 1) * sizeof *s->ids);
    s->pos = malloc((size_t)(n_ids > 0 ? n_ids : 1) * sizeof *s->pos);
    s->n = 0;
    s->cap = cap;
    if (!s->ids || !s->pos) {
        moeinf_idset_free(s);
        return moeinf_fail(err, MOEINF_ERR_NOMEM, "expert id set: out of memory");
    }
    for (uint32_t id = 0; id < n_ids; id++)
        s->pos[id] = -1;
    return MOEINF_OK;
}

void moeinf_idset_free(struct moeinf_idset *s) {
    free(s->ids);
    free(s->pos);
    s->ids = NULL;
    s->pos = NULL;
    s->n = 0;
}

void moeinf_idset_clear(struct moeinf_idset *s) {
    for (int i = 0; i < s->n; i++)
        s->pos[s->ids[i]] = -1;
    s->n = 0;
}

void moeinf_idset_add(struct moeinf_idset *s, uint32_t id) {
    assert(s->pos[id] < 0 && s->n < s->cap);
    s->pos[id] = s->n;
    s->ids[s->n++] = id;
}

void moeinf_idset_remove(struct moeinf_idset *s, uint32_t id) {
    int i = s->pos[id];
    assert(i >= 0);
    uint32_t last = s->ids[--s->n];
    s->ids[i] = last;
    s->pos[last] = i;
    s->pos[id] = -1;
}
