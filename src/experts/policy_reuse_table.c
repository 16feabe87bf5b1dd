/*
 * policy_reuse_table.c - the reuse policy's learned table (policy_reuse.c, DESIGN): each
 * expert's cell of features at its layer's next visit, the observations that teach each cell
 * how often an expert in it is used at that visit, and the estimates eviction and prefetch
 * rank by.
 */
#include <stdint.h>

#include "experts/eam.h"
#include "experts/policy_reuse_impl.h"

#define N_MATCH 16  /* EAMC entries summed by PredictEAM */
#define BETA    8.0 /* tokens of pseudo-evidence the EAMC prediction is worth in F */
#define F_SCALE 4.0 /* F's buckets are for F_SCALE x uses per token */
#define SMOOTH  0.5 /* pseudo-observations at the base rate top_k / n_experts per cell */
#define G_MIX   0.5 /* weight of the EAMC prediction against the global frequency in G */

/* Pseudo-observations a cell takes from the estimate of its age bucket alone (summed over F
 * and G): until a cell has seen this many visits its estimate leans on recency, which the
 * age row learns within a few tokens. Without it a cell seen a handful of times ranked on
 * those few observations, and 20-request replays of the Llama-4 trace from an empty table
 * were worse than LRU (25 % cache: 8546 vs 8144 misses; 7808 with it). The choice is flat
 * between 32 and 256 on first-half slices of both traces, docs/CACHE_POLICY.md. */
#define BACKOFF 128.0

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

double moeinf_reuse_cell_rate(const struct reuse *s, uint16_t cell) {
    double base = (double)s->top_k / s->n_experts;
    int a = cell % NA;
    double age_rate = (s->used_age[a] + SMOOTH * base) / (s->seen_age[a] + SMOOTH);
    return (s->used[cell] + BACKOFF * age_rate) / (s->seen[cell] + BACKOFF);
}

/* ---- events ---------------------------------------------------------------------------- */

void moeinf_reuse_table_token_begin(struct reuse *s) {
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
}

void moeinf_reuse_table_learn(struct reuse *s, int layer, const uint32_t *ids,
                              const uint32_t *counts, int n) {
    const int n_exp = s->n_experts;
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
}

void moeinf_reuse_table_on_use(struct reuse *s, uint32_t id) {
    /* Used now: its next visit is the next token's, with the count that includes this use. */
    s->cell_next[id] =
        (uint16_t)(cell_base(s, id, request_count(s, id), s->req_tokens) + age_bucket(1));
}

/* ---- estimates ------------------------------------------------------------------------- */

int moeinf_reuse_steps_away(const struct reuse *s, uint32_t id) {
    int l = (int)(id / (uint32_t)s->n_experts);
    return l > s->layer ? l - s->layer : l - s->layer + s->n_layers;
}

double moeinf_reuse_next_visit(const struct reuse *s, uint32_t id, int *steps) {
    *steps = moeinf_reuse_steps_away(s, id);
    bool ahead = (int)(id / (uint32_t)s->n_experts) > s->layer;
    return moeinf_reuse_cell_rate(s, ahead ? s->cell[id] : s->cell_next[id]);
}
