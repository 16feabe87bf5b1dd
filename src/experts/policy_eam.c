/*
 * policy_eam.c - "moe-infinity": Algorithm 1 of the MoE-Infinity paper as PAPER.md writes it.
 *
 * After each layer's router has chosen (a step), PredictEAM matches the current request's EAM
 * against the EAMC (the N_MATCH closest entries by cosine; PAPER.md: "the closest stored
 * EAM"), sums them and normalises each layer's row. When the cache is full, every resident,
 * unpinned expert e of layer l gets the priority
 *
 *     p = (pEAM[l][e] + EPS) / sum(pEAM[l]) * (1 - l / L)
 *
 * and the lowest is evicted (ties: the least recently used). pEAM's rows sum to 1 here, and
 * the paper's layer-proximity weight of PredictEAM scales a whole row, so it cancels in p;
 * it orders prefetch candidates instead. The prediction is recomputed lazily, at the first
 * eviction or prefetch after a step changed the request's EAM, which gives the same decisions
 * as recomputing after every router. The choices PAPER.md leaves open are listed in
 * docs/CACHE_POLICY.md.
 *
 * Prefetch: after layer l, the experts of the following layers (l+1, l+2, ... cyclically,
 * the next token's early layers last) ranked by pEAM x proximity, skipping resident ones.
 */
#include <stdlib.h>

#include "base/le.h"
#include "base/status.h"
#include "experts/cache.h"
#include "experts/eam.h"
#include "experts/policy.h"

#define N_MATCH 1
#define EPS     1e-4

struct eam_policy {
    struct moeinf_policy_geometry geom;
    int n_layers, n_experts;
    uint32_t n_ids;
    struct moeinf_eamc *eamc;
    float *peam;        /* (n_ids) PredictEAM, rows sum to 1 */
    bool stale;         /* the request's EAM changed since peam was computed */
    bool changed;       /* the collection or the phase changed: peam must be rebuilt */
    int match[N_MATCH]; /* the entries peam was built from */
    int n_match;
    uint64_t clock;
    uint64_t *stamp;   /* (n_ids) last use or admission, for ties */
    uint8_t *resident; /* (n_ids) */
    int layer;         /* layer of the current step */
};

static void eam_free(void *state) {
    struct eam_policy *s = state;
    if (!s) return;
    moeinf_eamc_free(s->eamc);
    free(s->peam);
    free(s->stamp);
    free(s->resident);
    free(s);
}

static enum moeinf_status eam_init(const struct moeinf_policy_geometry *geom, void **state,
                                   struct moeinf_error *err) {
    struct eam_policy *s = calloc(1, sizeof *s);
    if (!s) return moeinf_fail(err, MOEINF_ERR_NOMEM, "policy moe-infinity: out of memory");
    s->geom = *geom;
    s->n_layers = geom->n_layers;
    s->n_experts = geom->n_experts;
    s->n_ids = (uint32_t)geom->n_layers * (uint32_t)geom->n_experts;
    enum moeinf_status st = moeinf_eamc_init(geom, MOEINF_EAMC_DEFAULT_CAPACITY, &s->eamc, err);
    if (st != MOEINF_OK) {
        free(s);
        return st;
    }
    s->peam = malloc(s->n_ids * sizeof *s->peam);
    s->stamp = calloc(s->n_ids, sizeof *s->stamp);
    s->resident = calloc(s->n_ids, sizeof *s->resident);
    if (!s->peam || !s->stamp || !s->resident) {
        eam_free(s);
        return moeinf_fail(err, MOEINF_ERR_NOMEM, "policy moe-infinity: out of memory");
    }
    s->stale = s->changed = true;
    *state = s;
    return MOEINF_OK;
}

static void eam_request_begin(void *state, uint64_t index) {
    (void)index;
    struct eam_policy *s = state;
    moeinf_eamc_request_begin(s->eamc);
    s->stale = s->changed = true;
}

static void eam_request_end(void *state) {
    struct eam_policy *s = state;
    moeinf_eamc_request_end(s->eamc);
    s->stale = s->changed = true;
}

static void eam_token_begin(void *state, enum moeinf_phase phase, int n_tokens) {
    struct eam_policy *s = state;
    if (phase != moeinf_eamc_phase(s->eamc)) s->changed = true;
    moeinf_eamc_tokens_begin(s->eamc, phase, n_tokens);
    s->stale = true;
}

/* The router's choice enters the request's EAM at once: PredictEAM runs "after each MoE
 * layer's router has chosen its experts", so one prediction serves the whole step. */
static void eam_step_begin(void *state, int layer, const uint32_t *ids, const uint32_t *counts,
                           int n) {
    struct eam_policy *s = state;
    s->layer = layer;
    for (int i = 0; i < n; i++)
        moeinf_eamc_record_n(s->eamc, ids[i], counts ? counts[i] : 1);
    s->stale = true;
}

static void eam_on_access(void *state, uint32_t id, bool hit) {
    (void)hit;
    struct eam_policy *s = state;
    s->stamp[id] = ++s->clock;
}

static void eam_on_admit(void *state, uint32_t id, bool prefetch) {
    struct eam_policy *s = state;
    s->resident[id] = 1;
    if (!prefetch) s->stamp[id] = ++s->clock;
}

static void eam_on_evict(void *state, uint32_t id) {
    struct eam_policy *s = state;
    s->resident[id] = 0;
}

/* PredictEAM, rebuilt only when the matched entries differ from the last ones. */
static void refresh(struct eam_policy *s) {
    if (!s->stale) return;
    s->stale = false;
    int ids[N_MATCH] = {0};
    int n = moeinf_eamc_size(s->eamc) > 0 ? moeinf_eamc_match(s->eamc, N_MATCH, ids) : 0;
    bool same = !s->changed && n == s->n_match;
    for (int i = 0; same && i < n; i++)
        same = ids[i] == s->match[i];
    if (same) return;
    moeinf_eamc_predict_matched(s->eamc, ids, n, s->peam);
    for (int i = 0; i < n; i++)
        s->match[i] = ids[i];
    s->n_match = n;
    s->changed = false;
}

static uint32_t eam_choose_victim(void *state, const struct moeinf_cache *cache) {
    struct eam_policy *s = state;
    refresh(s);
    uint32_t best = MOEINF_EXPERT_NONE;
    double bp = 0;
    const int cap = moeinf_cache_capacity(cache);
    for (int slot = 0; slot < cap; slot++) {
        uint32_t id = moeinf_cache_slot_expert(cache, slot);
        if (id == MOEINF_EXPERT_NONE || moeinf_cache_is_pinned(cache, id)) continue;
        int l = (int)(id / (uint32_t)s->n_experts);
        /* rows of peam sum to 1: the division by sum(pEAM[l]) is already done */
        double p = ((double)s->peam[id] + EPS) * (1.0 - (double)l / s->n_layers);
        if (best == MOEINF_EXPERT_NONE || p < bp || (p == bp && s->stamp[id] < s->stamp[best])) {
            best = id;
            bp = p;
        }
    }
    return best;
}

static int eam_propose_prefetch(void *state, int layer, uint32_t *out, int max) {
    struct eam_policy *s = state;
    refresh(s);
    const int n_exp = s->n_experts;
    int n = 0;
    /* Layer by layer in the order they run next; within a layer the most likely first. A
     * simple selection: max is small (a few experts per step). */
    for (int d = 1; d < s->n_layers && n < max; d++) {
        int l = (layer + d) % s->n_layers;
        double w = moeinf_eam_proximity(l, layer, s->n_layers);
        for (int pick = 0; pick < max && n < max; pick++) {
            uint32_t best = MOEINF_EXPERT_NONE;
            double bv = 0;
            for (int e = 0; e < n_exp; e++) {
                uint32_t id = (uint32_t)(l * n_exp + e);
                if (s->resident[id]) continue;
                bool taken = false;
                for (int i = 0; i < n; i++)
                    taken |= out[i] == id;
                if (taken) continue;
                double v = (double)s->peam[id] * w;
                if (best == MOEINF_EXPERT_NONE || v > bv) {
                    best = id;
                    bv = v;
                }
            }
            /* Below uniform the prediction says nothing: stop with this layer. */
            if (best == MOEINF_EXPERT_NONE || bv <= w / n_exp) break;
            out[n++] = best;
        }
    }
    return n;
}

/* The saved state: the EAMC, then this section (little-endian): u64 clock, u64
 * stamp[n_ids] (the recency that breaks ties), so that a reloaded policy decides exactly as
 * the one that saved it. */
static size_t section_bytes(const struct eam_policy *s) {
    return 8 + (size_t)s->n_ids * 8;
}

static enum moeinf_status eam_save(const void *state, FILE *f, struct moeinf_error *err) {
    const struct eam_policy *s = state;
    size_t len = section_bytes(s);
    uint8_t *buf = malloc(len);
    if (!buf) return moeinf_fail(err, MOEINF_ERR_NOMEM, "policy moe-infinity: out of memory");
    moeinf_le_put_u64(buf, s->clock);
    for (uint32_t id = 0; id < s->n_ids; id++)
        moeinf_le_put_u64(buf + 8 + (size_t)id * 8, s->stamp[id]);
    enum moeinf_status st = moeinf_eamc_write_policy(
        s->eamc, f, "EAMC", moeinf_policy_moe_infinity.name, buf, len, err);
    free(buf);
    return st;
}

/* All or nothing: the current collection is replaced only by a fully checked one. A version 1
 * file (the EAMC alone) gives no recency. */
static enum moeinf_status eam_load(void *state, FILE *f, struct moeinf_error *err) {
    struct eam_policy *s = state;
    struct moeinf_eamc *fresh = NULL;
    uint8_t *section = NULL;
    enum moeinf_status st =
        moeinf_eamc_read_policy(&s->geom, f, "EAMC", moeinf_policy_moe_infinity.name,
                                section_bytes(s), &fresh, &section, NULL, err);
    if (st != MOEINF_OK) return st;
    uint64_t clock = section ? moeinf_le_u64(section) : 0;
    for (uint32_t id = 0; section && id < s->n_ids; id++) {
        if (moeinf_le_u64(section + 8 + (size_t)id * 8) > clock) {
            free(section);
            moeinf_eamc_free(fresh);
            return moeinf_fail(err, MOEINF_ERR_FORMAT,
                               "EAMC: bad count: a recency stamp is later than the clock");
        }
    }
    for (uint32_t id = 0; id < s->n_ids; id++)
        s->stamp[id] = section ? moeinf_le_u64(section + 8 + (size_t)id * 8) : 0;
    s->clock = clock;
    free(section);
    moeinf_eamc_free(s->eamc);
    s->eamc = fresh;
    s->stale = s->changed = true;
    return MOEINF_OK;
}

const struct moeinf_policy_ops moeinf_policy_moe_infinity = {
    .name = "moe-infinity",
    .summary = "MoE-Infinity Algorithm 1: EAMC-predicted likelihood x (1 - layer/L)",
    .init = eam_init,
    .free = eam_free,
    .on_request_begin = eam_request_begin,
    .on_request_end = eam_request_end,
    .on_token_begin = eam_token_begin,
    .on_step_begin = eam_step_begin,
    .on_access = eam_on_access,
    .on_admit = eam_on_admit,
    .on_evict = eam_on_evict,
    .choose_victim = eam_choose_victim,
    .propose_prefetch = eam_propose_prefetch,
    .save = eam_save,
    .load = eam_load,
};
