/*
 * policy_reuse_impl.h - the inside of the reuse policy (experts/policy.h's table
 * moeinf_policy_reuse), shared by its files, one concern each:
 *   policy_reuse.c           the events and the choice of victim (DESIGN: the whole policy)
 *   policy_reuse_table.c     the learned table: features, cells, estimates of use
 *   policy_reuse_duel.c      the frequency ranking and the set duel between the two rankings
 *   policy_reuse_prefetch.c  the layer-to-layer co-occurrence table and the proposals
 *   policy_reuse_state.c     allocation, and the saved state (save, load)
 * Calls go one way: policy_reuse.c calls the table, the duel and the prefetch files; the duel
 * and the prefetch call the table; the state calls the duel. Nothing outside these files
 * includes this header.
 */
#ifndef MOEINF_EXPERTS_POLICY_REUSE_IMPL_H
#define MOEINF_EXPERTS_POLICY_REUSE_IMPL_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "experts/eam.h"
#include "experts/idset.h"
#include "experts/policy.h"

/* The frequency ranking (policy_reuse_duel.c): half-life of a use's weight, in tokens. Chosen
 * on gen-model's recorded routing (16 against 32, 64, 128 and no decay); the real traces are
 * neutral to it, since the table wins the duel there. */
#define FREQ_HALF_LIFE 16.0
#define FREQ_POW_N     1024 /* d^k tabulated for k below this */

/* The two rankings the duel chooses between (policy_reuse_duel.c). */
enum ranking {
    RANK_TABLE,
    RANK_FREQ,
    N_RANKINGS
};

/* The table's cells (policy_reuse_table.c): A buckets x F buckets x G buckets. */
#define NA      14
#define NF      14
#define NG      9
#define N_CELLS (NA * NF * NG)

struct reuse {
    struct moeinf_policy_geometry geom;
    int n_layers, n_experts, top_k;
    uint32_t n_ids;
    struct moeinf_eamc *eamc;
    double *soon;         /* (n_layers + 1) (L / steps)^SOON */
    int64_t tok;          /* tokens seen since the policy was made */
    uint32_t req_tokens;  /* completed tokens of the current request */
    int layer;            /* layer of the current (or last) step */
    int64_t *last_use;    /* (n_ids) token of the last demand use, INT64_MIN / 2 if never */
    uint64_t *last_stamp; /* (n_ids) event counter at the last use or admission: LRU ties */
    uint64_t clock;
    double *global;       /* (n_ids) demand uses since the start */
    float *pe;            /* (n_ids) PredictEAM for the current token, rows sum to 1 */
    float *prior;         /* (n_ids) G's likelihood, rows sum to 1 */
    uint16_t *cell;       /* (n_ids) feature cell at this token's visit */
    uint16_t *cell_next;  /* (n_ids) cell at the next token's visit (updated on use) */
    double used[N_CELLS]; /* observations per cell that were used at the visit */
    double seen[N_CELLS];
    double used_age[NA]; /* the same summed over F and G: the estimate a sparse cell backs off to */
    double seen_age[NA];
    struct moeinf_idset res; /* the resident ids (capacity) */
    /* prefetch: co-occurrence of consecutive layers within a token */
    float *co;          /* ((n_layers - 1) x E x E) uses of b at l+1 after a at l */
    float *co_src;      /* ((n_layers - 1) x E) uses of a at l followed by a layer l+1 */
    uint32_t *step_ids; /* (n_experts) ids of the current step */
    uint32_t *prev_ids; /* (n_experts) ids of the previous step of this iteration */
    int n_step, n_prev;
    uint32_t *step_count; /* (n_ids) tokens of the current iteration that chose the id */
    int batch;            /* tokens in the current iteration (1, or a prefill micro-batch) */
    /* the frequency ranking and the duel, both reset when a request begins */
    double freq_pow[FREQ_POW_N]; /* d^k, d = 2^(-1 / FREQ_HALF_LIFE) */
    double *freq_use;            /* (n_ids) weighted uses in this request, as of token freq_tok */
    int64_t *freq_tok;           /* (n_ids) */
    struct moeinf_idset shadow[N_RANKINGS]; /* (capacity) each ranking's shadow cache */
    uint64_t shadow_misses[N_RANKINGS];     /* in this request */
    double freq_mass[2];    /* this token's weighted token count: layers ahead, layers done */
    uint8_t *shadow_pin;    /* (n_ids) the ids the shadows are admitting: never their victims */
    struct candidate *cand; /* (capacity) a shadow's eviction candidates */
};

/* A resident expert as eviction ranks it. */
struct candidate {
    double p;       /* rank: lower goes first */
    int steps;      /* layer steps until its next visit: more goes first on equal p */
    uint64_t stamp; /* recency: older goes first on equal p and steps */
    uint32_t id;
};

/* True when (p, steps, stamp) should be evicted before the current best. */
static inline bool moeinf_reuse_worse(double p, int steps, uint64_t stamp, double bp, int bsteps,
                                      uint64_t bstamp) {
    if (p != bp) return p < bp;
    if (steps != bsteps) return steps > bsteps;
    return stamp < bstamp;
}

/* ---- policy_reuse_table.c ----------------------------------------------------------------- */

/* A token starts: PredictEAM, G's prior per expert, and every expert's cell at this token's
 * visit and at the next one's. */
void moeinf_reuse_table_token_begin(struct reuse *s);
/* The routers of `layer` chose ids (counts: tokens per id, NULL: one each): every expert of
 * the layer adds its observation to its cell; sets step_count. */
void moeinf_reuse_table_learn(struct reuse *s, int layer, const uint32_t *ids,
                              const uint32_t *counts, int n);
/* id was used (after the EAMC recorded it): its cell at the next token's visit. */
void moeinf_reuse_table_on_use(struct reuse *s, uint32_t id);
/* A cell's estimate of use at the visit. */
double moeinf_reuse_cell_rate(const struct reuse *s, uint16_t cell);
/* How many layer steps away the next visit of id's layer is (this token's for layers still
 * ahead, the next token's otherwise). */
int moeinf_reuse_steps_away(const struct reuse *s, uint32_t id);
/* The estimate of id at its layer's next visit, and how many steps away that visit is. */
double moeinf_reuse_next_visit(const struct reuse *s, uint32_t id, int *steps);

/* ---- policy_reuse_duel.c ------------------------------------------------------------------ */

/* A request starts with no uses counted and the duel even (both shadows empty). */
void moeinf_reuse_duel_reset(struct reuse *s);
/* A token starts: the frequency ranking's weighted token counts. */
void moeinf_reuse_duel_token_begin(struct reuse *s);
/* Replays a step's accesses in both shadows (after learning, before the real accesses). */
void moeinf_reuse_duel_step(struct reuse *s, const uint32_t *ids, int n);
/* A demand use of id: its weighted use count in the request. */
void moeinf_reuse_duel_on_use(struct reuse *s, uint32_t id);
/* The ranking the real cache follows now. */
enum ranking moeinf_reuse_ranking_now(const struct reuse *s);
/* The eviction rank of id under ranking r (lower goes first) and its layer's steps away. */
double moeinf_reuse_rank(const struct reuse *s, uint32_t id, enum ranking r, int *steps);

/* ---- policy_reuse_prefetch.c -------------------------------------------------------------- */

/* The step's choice after the previous layer's: the co-occurrence counts. */
void moeinf_reuse_co_learn(struct reuse *s, int layer, const uint32_t *ids, int n);
int moeinf_reuse_propose_prefetch(void *state, int layer, uint32_t *out, int max);

/* ---- policy_reuse_state.c ----------------------------------------------------------------- */

enum moeinf_status moeinf_reuse_init(const struct moeinf_policy_geometry *geom, void **state,
                                     struct moeinf_error *err);
void moeinf_reuse_free(void *state);
enum moeinf_status moeinf_reuse_save(const void *state, FILE *f, struct moeinf_error *err);
enum moeinf_status moeinf_reuse_load(void *state, FILE *f, struct moeinf_error *err);

#endif
