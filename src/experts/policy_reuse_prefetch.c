/*
 * policy_reuse_prefetch.c - the reuse policy's prefetch (policy_reuse.c, DESIGN): after layer
 * l, the experts of layer l + 1 most likely to be used by this token, from a layer-to-layer
 * co-occurrence table (P(b at l+1 | the experts chosen at l), learned online), each only when
 * it is at least PREFETCH_MIN likely and beats the (unweighted) estimate of the resident
 * expert that would make room for it.
 */
#include <stdint.h>
#include <string.h>

#include "experts/idset.h"
#include "experts/policy_reuse_impl.h"

#define CO_PSEUDO 1.0 /* pseudo-observations of the prior in the co-occurrence estimate */
/* A proposal's least likelihood of use: wasted prefetches cost bandwidth (chosen on the first
 * half of both traces under the time model, docs/CACHE_POLICY.md). */
#define PREFETCH_MIN 0.3

void moeinf_reuse_co_learn(struct reuse *s, int layer, const uint32_t *ids, int n) {
    const int n_exp = s->n_experts;
    const uint32_t base = (uint32_t)layer * (uint32_t)n_exp;
    /* Co-occurrence of the previous layer's choice with this one. */
    memcpy(s->prev_ids, s->step_ids, (size_t)s->n_step * sizeof *s->prev_ids);
    s->n_prev = s->n_step;
    memcpy(s->step_ids, ids, (size_t)n * sizeof *ids);
    s->n_step = n;
    if (layer > 0 && s->n_prev > 0) {
        size_t src_layer = (size_t)(layer - 1);
        for (int i = 0; i < s->n_prev; i++) {
            size_t a = s->prev_ids[i] - (uint32_t)(layer - 1) * (uint32_t)n_exp;
            size_t row = src_layer * (size_t)n_exp + a;
            s->co_src[row] += 1.0f;
            float *co = s->co + row * (size_t)n_exp;
            for (int j = 0; j < n; j++)
                co[ids[j] - base] += 1.0f;
        }
    }
}

/* Keeps the k largest (value, id) pairs of a stream in vals/ids, descending (or, with
 * `lowest`, the k smallest, ascending). Ties keep the earlier pair first. */
static void keep_top(double *vals, uint32_t *ids, int *n, int k, double v, uint32_t id,
                     bool lowest) {
    int i = *n;
    if (i == k) {
        if (lowest ? !(v < vals[k - 1]) : !(v > vals[k - 1])) return;
        i = k - 1;
    } else {
        (*n)++;
    }
    while (i > 0 && (lowest ? vals[i - 1] > v : vals[i - 1] < v)) {
        vals[i] = vals[i - 1];
        ids[i] = ids[i - 1];
        i--;
    }
    vals[i] = v;
    ids[i] = id;
}

#define MAX_PREFETCH 64

/*
 * After layer `layer`: the experts of the next layer this token (or layer 0 of the next token)
 * most likely to be used, best first. Within a token the estimate conditions on the experts
 * the router just chose, P(b | a) averaged over the chosen a, each shrunk towards the table's
 * estimate for b by CO_PSEUDO observations. A candidate is proposed only when it beats the
 * resident expert it would displace (the i-th proposal against the i-th lowest resident), so a
 * prefetch never trades a likelier expert for a less likely one.
 */
int moeinf_reuse_propose_prefetch(void *state, int layer, uint32_t *out, int max) {
    struct reuse *s = state;
    const int n_exp = s->n_experts;
    if (max <= 0) return 0;
    if (max > MAX_PREFETCH) max = MAX_PREFETCH;
    const int next = layer + 1 < s->n_layers ? layer + 1 : 0;
    const uint32_t base = (uint32_t)next * (uint32_t)n_exp;
    double cand_v[MAX_PREFETCH];
    double low_v[MAX_PREFETCH];
    uint32_t cand_id[MAX_PREFETCH];
    uint32_t low_id[MAX_PREFETCH];
    int n_cand = 0;
    int n_low = 0;
    for (int b = 0; b < n_exp; b++) {
        uint32_t id = base + (uint32_t)b;
        if (moeinf_idset_holds(&s->res, id)) continue;
        double q;
        if (next > layer) {
            double prior = moeinf_reuse_cell_rate(s, s->cell[id]);
            q = 0;
            for (int i = 0; i < s->n_step; i++) {
                size_t row =
                    (size_t)layer * n_exp + (s->step_ids[i] - (uint32_t)layer * (uint32_t)n_exp);
                q += ((double)s->co[row * (size_t)n_exp + (size_t)b] + CO_PSEUDO * prior) /
                     ((double)s->co_src[row] + CO_PSEUDO);
            }
            q = s->n_step > 0 ? q / s->n_step : prior;
        } else {
            q = moeinf_reuse_cell_rate(s, s->cell_next[id]);
        }
        keep_top(cand_v, cand_id, &n_cand, max, q, id, false);
    }
    if (n_cand == 0) return 0;
    /* Room that is free costs nothing; beyond it each proposal displaces a resident. */
    int free_slots = s->geom.capacity - s->res.n;
    for (int i = 0; i < s->res.n; i++) {
        uint32_t id = s->res.ids[i];
        int steps;
        keep_top(low_v, low_id, &n_low, max, moeinf_reuse_next_visit(s, id, &steps), id, true);
    }
    int n = 0;
    for (int i = 0; i < n_cand; i++) {
        int displaced = i - free_slots;
        if (!(cand_v[i] >= PREFETCH_MIN)) break;
        if (displaced >= 0 && (displaced >= n_low || !(cand_v[i] > low_v[displaced]))) break;
        out[n++] = cand_id[i];
    }
    return n;
}
