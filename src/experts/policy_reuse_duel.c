/*
 * policy_reuse_duel.c - the reuse policy's second ranking and the duel that picks between the
 * two (policy_reuse.c, DESIGN, TWO RANKINGS): the frequency ranking ranks an expert by its
 * decayed uses in the request, shrunk towards the EAMC prediction; two shadow caches of the
 * real capacity replay each request's demand accesses, one per ranking, and the real cache
 * follows the frequency ranking only while its shadow has missed strictly less. Both
 * shadows start empty with each request.
 */
#include <assert.h>
#include <math.h>
#include <string.h>

#include "experts/idset.h"
#include "experts/policy_reuse_impl.h"

/* Tokens of pseudo-evidence the EAMC prediction is worth in the frequency ranking (chosen
 * with FREQ_HALF_LIFE, policy_reuse_impl.h). */
#define FREQ_PRIOR 2.0

void moeinf_reuse_duel_reset(struct reuse *s) {
    memset(s->freq_use, 0, s->n_ids * sizeof *s->freq_use);
    for (int k = 0; k < N_RANKINGS; k++) {
        moeinf_idset_clear(&s->shadow[k]);
        s->shadow_misses[k] = 0;
    }
}

void moeinf_reuse_duel_token_begin(struct reuse *s) {
    /* the frequency ranking's token count, weighted as its uses are (freq_rate) */
    const double d = s->freq_pow[1];
    for (int done = 0; done < 2; done++)
        s->freq_mass[done] = (1.0 - pow(d, (double)s->req_tokens + done)) / (1.0 - d);
}

/* 2^(-k / FREQ_HALF_LIFE) for k tokens ago (k >= 0 in a request; 1 for k < 0, which only a
 * use count of zero, reset with its request, can meet: the product stays 0). */
static double decay(const struct reuse *s, int64_t k) {
    if (k <= 0) return 1.0;
    return k < FREQ_POW_N ? s->freq_pow[k] : pow(2.0, -(double)k / FREQ_HALF_LIFE);
}

void moeinf_reuse_duel_on_use(struct reuse *s, uint32_t id) {
    s->freq_use[id] = s->freq_use[id] * decay(s, s->tok - s->freq_tok[id]) + s->step_count[id];
    s->freq_tok[id] = s->tok;
}

/* The frequency ranking's estimate of id: its uses in this request per token of the request,
 * both weighted by 2^(-tokens ago / FREQ_HALF_LIFE) as seen from the token of its layer's last
 * visit (this token's for layers done, the previous one's for layers ahead), shrunk towards
 * the EAMC prediction by FREQ_PRIOR tokens. A micro-batch's uses count at its first token. */
static double freq_rate(const struct reuse *s, uint32_t id) {
    bool done = (int)(id / (uint32_t)s->n_experts) <= s->layer;
    int64_t now = done ? s->tok : s->tok - 1;
    double uses = s->freq_use[id] * decay(s, now - s->freq_tok[id]);
    return (uses + FREQ_PRIOR * s->top_k * (double)s->pe[id]) / (s->freq_mass[done] + FREQ_PRIOR);
}

double moeinf_reuse_rank(const struct reuse *s, uint32_t id, enum ranking r, int *steps) {
    double p;
    if (r == RANK_FREQ) {
        *steps = moeinf_reuse_steps_away(s, id);
        p = freq_rate(s, id);
    } else {
        p = moeinf_reuse_next_visit(s, id, steps);
    }
    return p * s->soon[*steps];
}

/* Frequency while its shadow has missed less. */
enum ranking moeinf_reuse_ranking_now(const struct reuse *s) {
    return s->shadow_misses[RANK_FREQ] < s->shadow_misses[RANK_TABLE] ? RANK_FREQ : RANK_TABLE;
}

/*
 * Replays a step's accesses in shadow k: the misses are admitted, making room by evicting the
 * lowest-ranked ids under k's ranking that the step does not use, in chunks of at most the
 * capacity (a prefill micro-batch's step may name more experts than fit). Ranks do not move
 * within a step, so one scan per chunk ranks all candidates and the victims are its lowest.
 */
static void shadow_step(struct reuse *s, enum ranking k, const uint32_t *ids, int n) {
    struct moeinf_idset *sh = &s->shadow[k];
    for (int c0 = 0; c0 < n; c0 += sh->cap) {
        int c1 = n - c0 > sh->cap ? c0 + sh->cap : n;
        int misses = 0;
        for (int i = c0; i < c1; i++) {
            s->shadow_pin[ids[i]] = 1;
            misses += !moeinf_idset_holds(sh, ids[i]);
        }
        s->shadow_misses[k] += (uint64_t)misses;
        int need = sh->n + misses - sh->cap;
        if (need > 0) {
            struct candidate *c = s->cand;
            int n_cand = 0;
            for (int j = 0; j < sh->n; j++) {
                uint32_t id = sh->ids[j];
                if (s->shadow_pin[id]) continue;
                c[n_cand].id = id;
                c[n_cand].p = moeinf_reuse_rank(s, id, k, &c[n_cand].steps);
                c[n_cand].stamp = s->last_stamp[id];
                n_cand++;
            }
            assert(need <= n_cand);
            for (int v = 0; v < need; v++) { /* selection of the `need` lowest */
                int best = v;
                for (int j = v + 1; j < n_cand; j++) {
                    if (moeinf_reuse_worse(c[j].p, c[j].steps, c[j].stamp, c[best].p, c[best].steps,
                                           c[best].stamp))
                        best = j;
                }
                moeinf_idset_remove(sh, c[best].id);
                c[best] = c[v];
            }
        }
        for (int i = c0; i < c1; i++) {
            if (!moeinf_idset_holds(sh, ids[i])) moeinf_idset_add(sh, ids[i]);
            s->shadow_pin[ids[i]] = 0;
        }
    }
}

void moeinf_reuse_duel_step(struct reuse *s, const uint32_t *ids, int n) {
    for (int k = 0; k < N_RANKINGS; k++)
        shadow_step(s, (enum ranking)k, ids, n);
}
