/*
 * policy_reuse.c - moeinf's default expert-cache policy: evict the resident expert least
 * likely to be used at its layer's next visit, with that likelihood learned online from the
 * replay itself. docs/CACHE_POLICY.md gives the measurements behind every choice here.
 *
 * DESIGN. Every expert, at every visit of its layer (one per token), is described by a cell
 * of three features, fixed when the token starts:
 *   A  tokens since its last use (recency; 14 log-spaced buckets, "never" last),
 *   F  its expected uses per token in the current request: the request's own counts (rEAM)
 *      shrunk towards the EAMC prediction, (count + BETA * top_k * pEAM) / (tokens + BETA),
 *   G  its prior likelihood relative to uniform: half the EAMC prediction (PredictEAM over the
 *      N_MATCH closest past requests), half the global frequency of the expert in its layer.
 * When the router of a layer has chosen, each of that layer's E experts adds one observation
 * to its cell: used or not. A cell's estimate is (used + B * r_A) / (seen + B): the observed
 * rate of use at the next visit, backed off to r_A, the rate of its age bucket over all F and
 * G, itself (used + S * K/E) / (seen + S), smoothed towards the router's base rate. The
 * victim is the resident, unpinned expert with the lowest estimate p at its next visit (the
 * current token's visit for layers still ahead, the next token's otherwise), ranked as
 * p x (L / steps)^SOON where steps is how many layer steps away that visit is; ties go to the
 * expert whose layer comes back last, then to the least recently used.
 *
 * TWO RANKINGS. The table ranks well where recency and the EAMC carry the signal (the real
 * traces), but where a request's experts are drawn almost independently each token from a
 * skewed mix of its own that past requests do not share, the best a cache can do online is
 * to hold that request's most frequent experts, and the table's EAMC features then mislead it
 * (gen-model's routing: 13.4 decode misses per token at 204 slots, 11.0 for the frequency
 * ranking below alone and 11.4 with the duel, docs/CACHE_POLICY.md). So the policy can also rank by
 * frequency: the expert's uses in this request, each weighted by 2^(-tokens ago / FREQ_HALF_LIFE),
 * per token of the request weighted the same way, shrunk towards the EAMC prediction by FREQ_PRIOR
 * tokens. Which ranking evicts is decided per request by set dueling: two shadow caches of the same
 * capacity (experts/idset.h) replay the request's demand accesses, each evicting by one ranking,
 * and the real cache follows the frequency ranking only while its shadow has missed strictly less.
 * Both shadows start empty with each request, so a request starts on the table and the choice
 * depends on nothing a saved state would have to hold.
 *
 * Why a learned table rather than a formula: the paper's likelihood (EAMC only) ranks worse
 * than recency on real traces, recency alone ignores the request's skew, and the right mix
 * differs between models (top-1 with long decode vs top-6 prefill). The table finds the mix
 * per model from the model's own routing, with no parameter tuned per trace: its only inputs
 * are the geometry (n_layers, n_experts, top_k) and the events. Cost: O(n_ids) per token to
 * refresh cells (plus PredictEAM), O(E) per layer step to learn, O(capacity) per eviction.
 *
 * Prefetch (propose_prefetch): after layer l, the experts of layer l + 1 most likely to be
 * used by this token, from a layer-to-layer co-occurrence table (P(b at l+1 | the experts
 * chosen at l), learned online), each only when it is at least PREFETCH_MIN likely and beats
 * the (unweighted) estimate of the resident expert that would make room for it.
 */
#include <assert.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/le.h"
#include "base/status.h"
#include "experts/cache.h"
#include "experts/eam.h"
#include "experts/idset.h"
#include "experts/policy.h"

#define N_MATCH   16  /* EAMC entries summed by PredictEAM */
#define BETA      8.0 /* tokens of pseudo-evidence the EAMC prediction is worth in F */
#define F_SCALE   4.0 /* F's buckets are for F_SCALE x uses per token */
#define SMOOTH    0.5 /* pseudo-observations at the base rate top_k / n_experts per cell */
#define G_MIX     0.5 /* weight of the EAMC prediction against the global frequency in G */
#define CO_PSEUDO 1.0 /* pseudo-observations of the prior in the co-occurrence estimate */
/* Eviction ranks p x (L / steps)^SOON: of two experts equally likely to be used at their next
 * visit, the one whose layer runs sooner holds its slot for less time before paying off
 * (0 = ignore the distance; 1 = likelihood per step held; chosen on the first halves). */
#define SOON 0.3
/* A proposal's least likelihood of use: wasted prefetches cost bandwidth (chosen on the first
 * half of both traces under the time model, docs/CACHE_POLICY.md). */
#define PREFETCH_MIN 0.3

/* Pseudo-observations a cell takes from the estimate of its age bucket alone (summed over F
 * and G): until a cell has seen this many visits its estimate leans on recency, which the
 * age row learns within a few tokens. Without it a cell seen a handful of times ranked on
 * those few observations, and 20-request replays of the Llama-4 trace from an empty table
 * were worse than LRU (25 % cache: 8546 vs 8144 misses; 7808 with it). The choice is flat
 * between 32 and 256 on first-half slices of both traces, docs/CACHE_POLICY.md. */
#define BACKOFF 128.0

/* The frequency ranking (TWO RANKINGS above): half-life of a use's weight, in tokens, and the
 * tokens of pseudo-evidence the EAMC prediction is worth. Chosen on gen-model's recorded
 * routing (16 against 32, 64, 128 and no decay); the real traces are neutral to it, since the
 * table wins the duel there. */
#define FREQ_HALF_LIFE 16.0
#define FREQ_PRIOR     2.0
#define FREQ_POW_N     1024 /* d^k tabulated for k below this */

enum ranking {
    RANK_TABLE,
    RANK_FREQ,
    N_RANKINGS
};

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

/* ---- features ------------------------------------------------------------------------ */

/* Bucket of "tokens since the last use": 1, 2, 3, 4, 5-6, 7-8, 9-12, 13-16, 17-24, 25-32,
 * 33-48, 49-64, 65-128, more (or never). */
static const uint8_t age_table[129] = {
    0,  0,  1,  2,  3,  4,  4,  5,  5,  6,  6,  6,  6,  7,  7,  7,  7,  8,  8,  8,  8,  8,
    8,  8,  8,  9,  9,  9,  9,  9,  9,  9,  9,  10, 10, 10, 10, 10, 10, 10, 10, 10, 10, 10,
    10, 10, 10, 10, 10, 11, 11, 11, 11, 11, 11, 11, 11, 11, 11, 11, 11, 11, 11, 11, 11, 12,
    12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12,
    12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12,
    12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12, 12,
};

static int age_bucket(int64_t age) {
    return age >= 0 && age <= 128 ? age_table[age] : NA - 1;
}

/* Number of thresholds at or below v: the bucket, without branches. */
static int count_below(const double *lim, int n, double v) {
    int b = 0;
    for (int i = 0; i < n; i++)
        b += v >= lim[i];
    return b;
}

static int f_bucket(double f) {
    static const double lim[NF - 1] = {0.02, 0.05, 0.1, 0.2, 0.3, 0.5, 0.75, 1, 1.5, 2, 3, 4.5, 7};
    return count_below(lim, NF - 1, f);
}

static int g_bucket(double ratio) {
    static const double lim[NG - 1] = {0.125, 0.25, 0.5, 0.8, 1.25, 2, 4, 8};
    return count_below(lim, NG - 1, ratio);
}

/* The request-and-prior part of an expert's cell ((G * NF + F) * NA), given its count in the
 * current request and `tokens` completed tokens of the request. */
static int cell_base(const struct reuse *s, uint32_t id, double count, uint32_t tokens) {
    double f = (count + BETA * s->top_k * (double)s->pe[id]) / ((double)tokens + BETA) * F_SCALE;
    int g = g_bucket((double)s->prior[id] * s->n_experts);
    return (g * NF + f_bucket(f)) * NA;
}

static double request_count(const struct reuse *s, uint32_t id) {
    return (double)moeinf_eamc_current(s->eamc, MOEINF_PHASE_PREFILL)[id] +
           (double)moeinf_eamc_current(s->eamc, MOEINF_PHASE_DECODE)[id];
}

static double cell_rate(const struct reuse *s, uint16_t cell) {
    double base = (double)s->top_k / s->n_experts;
    int a = cell % NA;
    double age_rate = (s->used_age[a] + SMOOTH * base) / (s->seen_age[a] + SMOOTH);
    return (s->used[cell] + BACKOFF * age_rate) / (s->seen[cell] + BACKOFF);
}

/* ---- life cycle ---------------------------------------------------------------------- */

static void reuse_free(void *state) {
    struct reuse *s = state;
    if (!s) return;
    moeinf_eamc_free(s->eamc);
    free(s->last_use);
    free(s->last_stamp);
    free(s->global);
    free(s->pe);
    free(s->prior);
    free(s->cell);
    free(s->cell_next);
    free(s->soon);
    moeinf_idset_free(&s->res);
    free(s->co);
    free(s->co_src);
    free(s->step_ids);
    free(s->prev_ids);
    free(s->step_count);
    free(s->freq_use);
    free(s->freq_tok);
    for (int k = 0; k < N_RANKINGS; k++)
        moeinf_idset_free(&s->shadow[k]);
    free(s->shadow_pin);
    free(s->cand);
    free(s);
}

static enum moeinf_status reuse_init(const struct moeinf_policy_geometry *geom, void **state,
                                     struct moeinf_error *err) {
    struct reuse *s = calloc(1, sizeof *s);
    if (!s) return moeinf_fail(err, MOEINF_ERR_NOMEM, "policy reuse: out of memory");
    s->geom = *geom;
    s->n_layers = geom->n_layers;
    s->n_experts = geom->n_experts;
    s->top_k = geom->top_k;
    s->n_ids = (uint32_t)geom->n_layers * (uint32_t)geom->n_experts;
    enum moeinf_status st = moeinf_eamc_init(geom, MOEINF_EAMC_DEFAULT_CAPACITY, &s->eamc, err);
    if (st != MOEINF_OK) {
        free(s);
        return st;
    }
    size_t n = s->n_ids;
    size_t pairs = (size_t)(geom->n_layers - 1) * (size_t)geom->n_experts;
    s->last_use = malloc(n * sizeof *s->last_use);
    s->last_stamp = calloc(n, sizeof *s->last_stamp);
    s->global = calloc(n, sizeof *s->global);
    s->pe = malloc(n * sizeof *s->pe);
    s->prior = malloc(n * sizeof *s->prior);
    s->cell = calloc(n, sizeof *s->cell);
    s->cell_next = calloc(n, sizeof *s->cell_next);
    s->soon = malloc(((size_t)geom->n_layers + 1) * sizeof *s->soon);
    s->co = calloc(pairs * (size_t)geom->n_experts + 1, sizeof *s->co);
    s->co_src = calloc(pairs + 1, sizeof *s->co_src);
    s->step_ids = malloc((size_t)geom->n_experts * sizeof *s->step_ids);
    s->prev_ids = malloc((size_t)geom->n_experts * sizeof *s->prev_ids);
    s->step_count = malloc(n * sizeof *s->step_count);
    s->batch = 1;
    s->freq_use = calloc(n, sizeof *s->freq_use);
    s->freq_tok = calloc(n, sizeof *s->freq_tok);
    s->shadow_pin = calloc(n, sizeof *s->shadow_pin);
    s->cand = malloc((size_t)geom->capacity * sizeof *s->cand);
    if (!s->last_use || !s->last_stamp || !s->global || !s->pe || !s->prior || !s->cell ||
        !s->cell_next || !s->soon || !s->co || !s->co_src || !s->step_ids || !s->prev_ids ||
        !s->step_count || !s->freq_use || !s->freq_tok || !s->shadow_pin || !s->cand) {
        reuse_free(s);
        return moeinf_fail(err, MOEINF_ERR_NOMEM, "policy reuse: out of memory");
    }
    st = moeinf_idset_init(&s->res, s->n_ids, geom->capacity, err);
    for (int k = 0; k < N_RANKINGS && st == MOEINF_OK; k++)
        st = moeinf_idset_init(&s->shadow[k], s->n_ids, geom->capacity, err);
    if (st != MOEINF_OK) {
        reuse_free(s);
        return st;
    }
    for (int k = 0; k < FREQ_POW_N; k++)
        s->freq_pow[k] = pow(2.0, -k / FREQ_HALF_LIFE);
    s->soon[0] = 1.0;
    for (int d = 1; d <= geom->n_layers; d++)
        s->soon[d] = pow((double)geom->n_layers / d, SOON);
    for (size_t i = 0; i < n; i++) {
        s->last_use[i] = INT64_MIN / 2;
        s->step_count[i] = 1;
        s->pe[i] = s->prior[i] = 1.0f / (float)geom->n_experts;
    }
    *state = s;
    return MOEINF_OK;
}

/* ---- events -------------------------------------------------------------------------- */

/* A request starts with no uses counted and the duel even (both shadows empty). */
static void duel_reset(struct reuse *s) {
    memset(s->freq_use, 0, s->n_ids * sizeof *s->freq_use);
    for (int k = 0; k < N_RANKINGS; k++) {
        moeinf_idset_clear(&s->shadow[k]);
        s->shadow_misses[k] = 0;
    }
}

static void reuse_request_begin(void *state, uint64_t index) {
    (void)index;
    struct reuse *s = state;
    moeinf_eamc_request_begin(s->eamc);
    s->req_tokens = 0;
    duel_reset(s);
}

static void reuse_request_end(void *state) {
    struct reuse *s = state;
    moeinf_eamc_request_end(s->eamc);
}

static void reuse_token_begin(void *state, enum moeinf_phase phase, int n_tokens) {
    struct reuse *s = state;
    moeinf_eamc_tokens_begin(s->eamc, phase, n_tokens);
    s->batch = n_tokens;
    int used = moeinf_eamc_predict(s->eamc, N_MATCH, s->pe);
    const int n_exp = s->n_experts;
    const double mix = used > 0 ? G_MIX : 0.0;
    for (int l = 0; l < s->n_layers; l++) {
        const double *g = s->global + (size_t)l * n_exp;
        double row = 0;
        for (int e = 0; e < n_exp; e++)
            row += g[e];
        for (int e = 0; e < n_exp; e++) {
            size_t id = (size_t)l * n_exp + e;
            double pg = (g[e] + 1e-3) / (row + 1e-3 * n_exp);
            s->prior[id] = (float)((1.0 - mix) * pg + mix * (double)s->pe[id]);
        }
    }
    const float *pre = moeinf_eamc_current(s->eamc, MOEINF_PHASE_PREFILL);
    const float *dec = moeinf_eamc_current(s->eamc, MOEINF_PHASE_DECODE);
    for (uint32_t id = 0; id < s->n_ids; id++) {
        int base = cell_base(s, id, (double)pre[id] + (double)dec[id], s->req_tokens);
        int64_t age = s->tok - s->last_use[id];
        s->cell[id] = (uint16_t)(base + age_bucket(age));
        s->cell_next[id] = (uint16_t)(base + age_bucket(age + 1));
    }
    /* the frequency ranking's token count, weighted as its uses are (freq_rate) */
    const double d = s->freq_pow[1];
    for (int done = 0; done < 2; done++)
        s->freq_mass[done] = (1.0 - pow(d, (double)s->req_tokens + done)) / (1.0 - d);
    s->n_prev = 0;
    s->n_step = 0;
}

static void reuse_token_end(void *state) {
    struct reuse *s = state;
    s->tok += s->batch;
    s->req_tokens += (uint32_t)s->batch;
}

static void shadow_step(struct reuse *s, enum ranking k, const uint32_t *ids, int n);

static void reuse_step_begin(void *state, int layer, const uint32_t *ids, const uint32_t *counts,
                             int n) {
    struct reuse *s = state;
    const int n_exp = s->n_experts;
    assert(n <= n_exp);
    s->layer = layer;
    /* Learn: every expert of this layer was visited by each token of the iteration; the
     * routers' choices say which won, how often. */
    const uint32_t base = (uint32_t)layer * (uint32_t)n_exp;
    for (int e = 0; e < n_exp; e++) {
        uint16_t c = s->cell[base + (uint32_t)e];
        s->seen[c] += (double)s->batch;
        s->seen_age[c % NA] += (double)s->batch;
    }
    for (int i = 0; i < n; i++) {
        uint16_t c = s->cell[ids[i]];
        s->step_count[ids[i]] = counts ? counts[i] : 1;
        s->used[c] += (double)s->step_count[ids[i]];
        s->used_age[c % NA] += (double)s->step_count[ids[i]];
    }
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
    /* The duel: after learning, before this step's accesses touch any rank. */
    for (int k = 0; k < N_RANKINGS; k++)
        shadow_step(s, (enum ranking)k, ids, n);
}

/* 2^(-k / FREQ_HALF_LIFE) for k tokens ago (k >= 0 in a request; 1 for k < 0, which only a
 * use count of zero, reset with its request, can meet: the product stays 0). */
static double decay(const struct reuse *s, int64_t k) {
    if (k <= 0) return 1.0;
    return k < FREQ_POW_N ? s->freq_pow[k] : pow(2.0, -(double)k / FREQ_HALF_LIFE);
}

static void reuse_on_access(void *state, uint32_t id, bool hit) {
    (void)hit;
    struct reuse *s = state;
    s->freq_use[id] = s->freq_use[id] * decay(s, s->tok - s->freq_tok[id]) + s->step_count[id];
    s->freq_tok[id] = s->tok;
    s->last_use[id] = s->tok;
    s->last_stamp[id] = ++s->clock;
    s->global[id] += (double)s->step_count[id];
    moeinf_eamc_record_n(s->eamc, id, s->step_count[id]);
    /* Used now: its next visit is the next token's, with the count that includes this use. */
    s->cell_next[id] =
        (uint16_t)(cell_base(s, id, request_count(s, id), s->req_tokens) + age_bucket(1));
}

static void reuse_on_admit(void *state, uint32_t id, bool prefetch) {
    struct reuse *s = state;
    moeinf_idset_add(&s->res, id);
    if (!prefetch) s->last_stamp[id] = ++s->clock;
}

static void reuse_on_evict(void *state, uint32_t id) {
    struct reuse *s = state;
    moeinf_idset_remove(&s->res, id);
}

/* How many layer steps away the next visit of id's layer is (this token's for layers still
 * ahead, the next token's otherwise). */
static int steps_away(const struct reuse *s, uint32_t id) {
    int l = (int)(id / (uint32_t)s->n_experts);
    return l > s->layer ? l - s->layer : l - s->layer + s->n_layers;
}

/* The estimate of id at its layer's next visit, and how many steps away that visit is. */
static double next_visit(const struct reuse *s, uint32_t id, int *steps) {
    *steps = steps_away(s, id);
    bool ahead = (int)(id / (uint32_t)s->n_experts) > s->layer;
    return cell_rate(s, ahead ? s->cell[id] : s->cell_next[id]);
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

/* The eviction rank of id under ranking r (lower goes first) and its layer's steps away. */
static double rank_of(const struct reuse *s, uint32_t id, enum ranking r, int *steps) {
    double p;
    if (r == RANK_FREQ) {
        *steps = steps_away(s, id);
        p = freq_rate(s, id);
    } else {
        p = next_visit(s, id, steps);
    }
    return p * s->soon[*steps];
}

/* The ranking the real cache follows: frequency while its shadow has missed less. */
static enum ranking ranking_now(const struct reuse *s) {
    return s->shadow_misses[RANK_FREQ] < s->shadow_misses[RANK_TABLE] ? RANK_FREQ : RANK_TABLE;
}

/* True when (p, steps, stamp) should be evicted before the current best. */
static bool worse(double p, int steps, uint64_t stamp, double bp, int bsteps, uint64_t bstamp) {
    if (p != bp) return p < bp;
    if (steps != bsteps) return steps > bsteps;
    return stamp < bstamp;
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
                c[n_cand].p = rank_of(s, id, k, &c[n_cand].steps);
                c[n_cand].stamp = s->last_stamp[id];
                n_cand++;
            }
            assert(need <= n_cand);
            for (int v = 0; v < need; v++) { /* selection of the `need` lowest */
                int best = v;
                for (int j = v + 1; j < n_cand; j++) {
                    if (worse(c[j].p, c[j].steps, c[j].stamp, c[best].p, c[best].steps,
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

/* The lowest-ranked resident unpinned expert and its estimate. */
static uint32_t lowest(const struct reuse *s, const struct moeinf_cache *cache, double *rate) {
    uint32_t best = MOEINF_EXPERT_NONE;
    double bp = 0;
    int bsteps = 0;
    uint64_t bstamp = 0;
    const enum ranking r = ranking_now(s);
    const int cap = moeinf_cache_capacity(cache);
    for (int slot = 0; slot < cap; slot++) {
        uint32_t id = moeinf_cache_slot_expert(cache, slot);
        if (id == MOEINF_EXPERT_NONE || moeinf_cache_is_pinned(cache, id)) continue;
        int steps;
        double p = rank_of(s, id, r, &steps);
        if (best == MOEINF_EXPERT_NONE || worse(p, steps, s->last_stamp[id], bp, bsteps, bstamp)) {
            best = id;
            bp = p;
            bsteps = steps;
            bstamp = s->last_stamp[id];
        }
    }
    *rate = bp;
    return best;
}

static uint32_t reuse_choose_victim(void *state, const struct moeinf_cache *cache) {
    double rate;
    return lowest(state, cache, &rate);
}

/*
 * The saved state: the EAMC, then this section (little-endian) with everything else the
 * policy learned, so that a reloaded policy decides exactly as the one that saved it would
 * with the same cache contents:
 *   i64 tok, u64 clock, i64 last_use[n_ids], u64 last_stamp[n_ids], f64 global[n_ids],
 *   f64 used[N_CELLS], f64 seen[N_CELLS], f32 co[(L-1) x E x E], f32 co_src[(L-1) x E].
 * What the cache holds (resident) is the cache's, not learned, and is neither saved nor
 * replaced by a load.
 */
static size_t co_cells(const struct reuse *s) {
    return (size_t)(s->n_layers - 1) * (size_t)s->n_experts * (size_t)s->n_experts;
}

static size_t co_rows(const struct reuse *s) {
    return (size_t)(s->n_layers - 1) * (size_t)s->n_experts;
}

static size_t section_bytes(const struct reuse *s) {
    return 16 + (size_t)s->n_ids * 24 + (size_t)N_CELLS * 16 + (co_cells(s) + co_rows(s)) * 4;
}

/* Cursor forms of base/le.h: each writes or reads one value and moves past it. */
static uint8_t *put64(uint8_t *p, uint64_t v) {
    moeinf_le_put_u64(p, v);
    return p + 8;
}

static uint8_t *put_f64(uint8_t *p, double d) {
    moeinf_le_put_f64(p, d);
    return p + 8;
}

static uint8_t *put_f32(uint8_t *p, float f) {
    moeinf_le_put_f32(p, f);
    return p + 4;
}

static uint64_t get64(const uint8_t **p) {
    uint64_t v = moeinf_le_u64(*p);
    *p += 8;
    return v;
}

static double get_f64(const uint8_t **p) {
    double d = moeinf_le_f64(*p);
    *p += 8;
    return d;
}

static float get_f32(const uint8_t **p) {
    float f = moeinf_le_f32(*p);
    *p += 4;
    return f;
}

static enum moeinf_status reuse_save(const void *state, FILE *f, struct moeinf_error *err) {
    const struct reuse *s = state;
    size_t len = section_bytes(s);
    uint8_t *buf = malloc(len);
    if (!buf) return moeinf_fail(err, MOEINF_ERR_NOMEM, "policy reuse: out of memory");
    uint8_t *p = put64(buf, (uint64_t)s->tok);
    p = put64(p, s->clock);
    for (uint32_t id = 0; id < s->n_ids; id++)
        p = put64(p, (uint64_t)s->last_use[id]);
    for (uint32_t id = 0; id < s->n_ids; id++)
        p = put64(p, s->last_stamp[id]);
    for (uint32_t id = 0; id < s->n_ids; id++)
        p = put_f64(p, s->global[id]);
    for (int c = 0; c < N_CELLS; c++)
        p = put_f64(p, s->used[c]);
    for (int c = 0; c < N_CELLS; c++)
        p = put_f64(p, s->seen[c]);
    for (size_t i = 0; i < co_cells(s); i++)
        p = put_f32(p, s->co[i]);
    for (size_t i = 0; i < co_rows(s); i++)
        p = put_f32(p, s->co_src[i]);
    assert((size_t)(p - buf) == len);
    enum moeinf_status st =
        moeinf_eamc_write_policy(s->eamc, f, "EAMC", moeinf_policy_reuse.name, buf, len, err);
    free(buf);
    return st;
}

static bool count_ok(double v) {
    return isfinite(v) && v >= 0;
}

/* Parses a section into a fresh state t; false when a value is out of range. */
static bool parse_section(struct reuse *t, const uint8_t *p) {
    t->tok = (int64_t)get64(&p);
    t->clock = get64(&p);
    bool ok = t->tok >= 0;
    for (uint32_t id = 0; id < t->n_ids; id++) {
        t->last_use[id] = (int64_t)get64(&p);
        ok &=
            t->last_use[id] == INT64_MIN / 2 || (t->last_use[id] >= 0 && t->last_use[id] <= t->tok);
    }
    for (uint32_t id = 0; id < t->n_ids; id++) {
        t->last_stamp[id] = get64(&p);
        ok &= t->last_stamp[id] <= t->clock;
    }
    for (uint32_t id = 0; id < t->n_ids; id++)
        ok &= count_ok(t->global[id] = get_f64(&p));
    for (int c = 0; c < N_CELLS; c++)
        ok &= count_ok(t->used[c] = get_f64(&p));
    for (int c = 0; c < N_CELLS; c++)
        ok &= count_ok(t->seen[c] = get_f64(&p));
    for (size_t i = 0; i < co_cells(t); i++)
        ok &= count_ok((double)(t->co[i] = get_f32(&p)));
    for (size_t i = 0; i < co_rows(t); i++)
        ok &= count_ok((double)(t->co_src[i] = get_f32(&p)));
    return ok;
}

/*
 * All or nothing: the file is read and checked into a fresh state whose learned tables then
 * replace the current ones. A version 1 file (the EAMC alone) gives empty tables.
 */
static enum moeinf_status reuse_load(void *state, FILE *f, struct moeinf_error *err) {
    struct reuse *s = state;
    void *fresh_state = NULL;
    enum moeinf_status st = reuse_init(&s->geom, &fresh_state, err);
    if (st != MOEINF_OK) return st;
    struct reuse *t = fresh_state;
    if (!t) return moeinf_fail(err, MOEINF_ERR_NOMEM, "policy reuse: out of memory");
    struct moeinf_eamc *eamc = NULL;
    uint8_t *section = NULL;
    st = moeinf_eamc_read_policy(&s->geom, f, "EAMC", moeinf_policy_reuse.name, section_bytes(s),
                                 &eamc, &section, NULL, err);
    if (st == MOEINF_OK && section && !parse_section(t, section)) {
        st = moeinf_fail(err, MOEINF_ERR_FORMAT,
                         "EAMC: bad count: the reuse policy's section holds a value out of range");
        moeinf_eamc_free(eamc);
        eamc = NULL;
    }
    free(section);
    if (st == MOEINF_OK) {
        /* t takes the old tables (freed with it), s the new ones */
        struct moeinf_eamc *old_eamc = s->eamc;
        s->eamc = eamc;
        eamc = old_eamc;
        int64_t *last_use = s->last_use;
        uint64_t *last_stamp = s->last_stamp;
        double *global = s->global;
        float *co = s->co;
        float *co_src = s->co_src;
        s->last_use = t->last_use;
        s->last_stamp = t->last_stamp;
        s->global = t->global;
        s->co = t->co;
        s->co_src = t->co_src;
        t->last_use = last_use;
        t->last_stamp = last_stamp;
        t->global = global;
        t->co = co;
        t->co_src = co_src;
        s->tok = t->tok;
        s->clock = t->clock;
        memcpy(s->used, t->used, sizeof s->used);
        memcpy(s->seen, t->seen, sizeof s->seen);
        memset(s->used_age, 0, sizeof s->used_age);
        memset(s->seen_age, 0, sizeof s->seen_age);
        for (int c = 0; c < N_CELLS; c++) {
            s->used_age[c % NA] += s->used[c];
            s->seen_age[c % NA] += s->seen[c];
        }
        s->req_tokens = 0;
        duel_reset(s);
    }
    moeinf_eamc_free(eamc);
    reuse_free(t);
    return st;
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
static int reuse_propose_prefetch(void *state, int layer, uint32_t *out, int max) {
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
            double prior = cell_rate(s, s->cell[id]);
            q = 0;
            for (int i = 0; i < s->n_step; i++) {
                size_t row =
                    (size_t)layer * n_exp + (s->step_ids[i] - (uint32_t)layer * (uint32_t)n_exp);
                q += ((double)s->co[row * (size_t)n_exp + (size_t)b] + CO_PSEUDO * prior) /
                     ((double)s->co_src[row] + CO_PSEUDO);
            }
            q = s->n_step > 0 ? q / s->n_step : prior;
        } else {
            q = cell_rate(s, s->cell_next[id]);
        }
        keep_top(cand_v, cand_id, &n_cand, max, q, id, false);
    }
    if (n_cand == 0) return 0;
    /* Room that is free costs nothing; beyond it each proposal displaces a resident. */
    int free_slots = s->geom.capacity - s->res.n;
    for (int i = 0; i < s->res.n; i++) {
        uint32_t id = s->res.ids[i];
        int steps;
        keep_top(low_v, low_id, &n_low, max, next_visit(s, id, &steps), id, true);
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

const struct moeinf_policy_ops moeinf_policy_reuse = {
    .name = "reuse",
    .summary = "learned reuse likelihood from recency, request EAM and EAMC (moeinf default)",
    .init = reuse_init,
    .free = reuse_free,
    .on_request_begin = reuse_request_begin,
    .on_request_end = reuse_request_end,
    .on_token_begin = reuse_token_begin,
    .on_token_end = reuse_token_end,
    .on_step_begin = reuse_step_begin,
    .on_access = reuse_on_access,
    .on_admit = reuse_on_admit,
    .on_evict = reuse_on_evict,
    .choose_victim = reuse_choose_victim,
    .propose_prefetch = reuse_propose_prefetch,
    .save = reuse_save,
    .load = reuse_load,
};
