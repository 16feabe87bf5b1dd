/* step.c - one layer's step in waves that fit the cache (see step.h). */
#include "experts/step.h"

#include <stdlib.h>
#include <string.h>

#include "base/status.h"

enum moeinf_status moeinf_step_init(struct moeinf_step *s, int n_experts,
                                    struct moeinf_error *err) {
    memset(s, 0, sizeof *s);
    s->n_experts = n_experts;
    size_t n = n_experts > 0 ? (size_t)n_experts : 1;
    s->ids = malloc(n * sizeof *s->ids);
    s->counts = malloc(n * sizeof *s->counts);
    s->order = malloc(n * sizeof *s->order);
    s->index_of = malloc(n * sizeof *s->index_of);
    if (!s->ids || !s->counts || !s->order || !s->index_of) {
        moeinf_step_free(s);
        return moeinf_fail(err, MOEINF_ERR_NOMEM, "out of memory for the expert step");
    }
    for (size_t e = 0; e < n; e++)
        s->index_of[e] = -1;
    return MOEINF_OK;
}

void moeinf_step_free(struct moeinf_step *s) {
    free(s->ids);
    free(s->counts);
    free(s->order);
    free(s->index_of);
    memset(s, 0, sizeof *s);
}

void moeinf_step_collect(struct moeinf_step *s, int layer, const int32_t *sel, int m, int top_k) {
    const uint32_t base = (uint32_t)layer * (uint32_t)s->n_experts;
    s->layer = layer;
    s->n = 0;
    for (int i = 0; i < m * top_k; i++) {
        int e = sel[i];
        if (s->index_of[e] < 0) {
            s->index_of[e] = s->n;
            s->ids[s->n] = base + (uint32_t)e;
            s->counts[s->n++] = 0;
        }
        s->counts[s->index_of[e]]++;
    }
    for (int i = 0; i < s->n; i++)
        s->index_of[s->ids[i] - base] = -1;
}

void moeinf_step_begin(struct moeinf_step *s, const struct moeinf_cache *c,
                       struct moeinf_policy *p) {
    moeinf_policy_step_begin(p, s->layer, s->ids, s->counts, s->n);
    s->pos = s->wave_begin = 0;
    if (s->n <= moeinf_cache_capacity(c)) {
        memcpy(s->order, s->ids, (size_t)s->n * sizeof *s->ids);
        return;
    }
    /* More experts than slots: the resident ones first, while they are still there. */
    int k = 0;
    for (int i = 0; i < s->n; i++)
        if (moeinf_cache_is_resident(c, s->ids[i])) s->order[k++] = s->ids[i];
    for (int i = 0; i < s->n; i++)
        if (!moeinf_cache_is_resident(c, s->ids[i])) s->order[k++] = s->ids[i];
}

enum moeinf_status moeinf_step_wave(struct moeinf_step *s, struct moeinf_cache *c,
                                    struct moeinf_policy *p, const uint32_t **ids,
                                    struct moeinf_cache_event *ev, int *n_wave,
                                    struct moeinf_error *err) {
    int n = s->n - s->pos;
    if (n > moeinf_cache_capacity(c)) n = moeinf_cache_capacity(c);
    s->wave_begin = s->pos;
    *ids = s->order + s->pos;
    *n_wave = 0;
    for (int i = 0; i < n; i++)
        moeinf_cache_pin(c, s->order[s->pos + i]);
    s->pos += n;
    for (int i = 0; i < n; i++) {
        enum moeinf_status st = moeinf_cache_access(c, p, s->order[s->wave_begin + i], &ev[i], err);
        if (st != MOEINF_OK) {
            moeinf_step_wave_end(s, c);
            return st;
        }
    }
    *n_wave = n;
    return MOEINF_OK;
}

void moeinf_step_wave_end(struct moeinf_step *s, struct moeinf_cache *c) {
    for (int i = s->wave_begin; i < s->pos; i++)
        moeinf_cache_unpin(c, s->order[i]);
    s->wave_begin = s->pos;
}

void moeinf_step_end(struct moeinf_step *s, struct moeinf_policy *p) {
    moeinf_policy_step_end(p, s->layer);
}
