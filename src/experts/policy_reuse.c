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
 *
 * FILES. This file turns the policy events into calls on the parts and chooses the victim;
 * the table is policy_reuse_table.c, the frequency ranking and the duel
 * policy_reuse_duel.c, the prefetch policy_reuse_prefetch.c, allocation and the saved state
 * policy_reuse_state.c (policy_reuse_impl.h lists them and their one-way calls).
 */
#include <assert.h>
#include <stdint.h>

#include "experts/cache.h"
#include "experts/eam.h"
#include "experts/idset.h"
#include "experts/policy.h"
#include "experts/policy_reuse_impl.h"

static void reuse_request_begin(void *state, uint64_t index) {
    (void)index;
    struct reuse *s = state;
    moeinf_eamc_request_begin(s->eamc);
    s->req_tokens = 0;
    moeinf_reuse_duel_reset(s);
}

static void reuse_request_end(void *state) {
    struct reuse *s = state;
    moeinf_eamc_request_end(s->eamc);
}

static void reuse_token_begin(void *state, enum moeinf_phase phase, int n_tokens) {
    struct reuse *s = state;
    moeinf_eamc_tokens_begin(s->eamc, phase, n_tokens);
    s->batch = n_tokens;
    moeinf_reuse_table_token_begin(s);
    moeinf_reuse_duel_token_begin(s);
    s->n_prev = 0;
    s->n_step = 0;
}

static void reuse_token_end(void *state) {
    struct reuse *s = state;
    s->tok += s->batch;
    s->req_tokens += (uint32_t)s->batch;
}

static void reuse_step_begin(void *state, int layer, const uint32_t *ids, const uint32_t *counts,
                             int n) {
    struct reuse *s = state;
    assert(n <= s->n_experts);
    s->layer = layer;
    moeinf_reuse_table_learn(s, layer, ids, counts, n);
    moeinf_reuse_co_learn(s, layer, ids, n);
    /* The duel: after learning, before this step's accesses touch any rank. */
    moeinf_reuse_duel_step(s, ids, n);
}

static void reuse_on_access(void *state, uint32_t id, bool hit) {
    (void)hit;
    struct reuse *s = state;
    moeinf_reuse_duel_on_use(s, id);
    s->last_use[id] = s->tok;
    s->last_stamp[id] = ++s->clock;
    s->global[id] += (double)s->step_count[id];
    moeinf_eamc_record_n(s->eamc, id, s->step_count[id]);
    moeinf_reuse_table_on_use(s, id);
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

/* The lowest-ranked resident unpinned expert and its estimate. */
static uint32_t lowest(const struct reuse *s, const struct moeinf_cache *cache, double *rate) {
    uint32_t best = MOEINF_EXPERT_NONE;
    double bp = 0;
    int bsteps = 0;
    uint64_t bstamp = 0;
    const enum ranking r = moeinf_reuse_ranking_now(s);
    const int cap = moeinf_cache_capacity(cache);
    for (int slot = 0; slot < cap; slot++) {
        uint32_t id = moeinf_cache_slot_expert(cache, slot);
        if (id == MOEINF_EXPERT_NONE || moeinf_cache_is_pinned(cache, id)) continue;
        int steps;
        double p = moeinf_reuse_rank(s, id, r, &steps);
        if (best == MOEINF_EXPERT_NONE ||
            moeinf_reuse_worse(p, steps, s->last_stamp[id], bp, bsteps, bstamp)) {
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

const struct moeinf_policy_ops moeinf_policy_reuse = {
    .name = "reuse",
    .summary = "learned reuse likelihood from recency, request EAM and EAMC (moeinf default)",
    .init = moeinf_reuse_init,
    .free = moeinf_reuse_free,
    .on_request_begin = reuse_request_begin,
    .on_request_end = reuse_request_end,
    .on_token_begin = reuse_token_begin,
    .on_token_end = reuse_token_end,
    .on_step_begin = reuse_step_begin,
    .on_access = reuse_on_access,
    .on_admit = reuse_on_admit,
    .on_evict = reuse_on_evict,
    .choose_victim = reuse_choose_victim,
    .propose_prefetch = moeinf_reuse_propose_prefetch,
    .save = moeinf_reuse_save,
    .load = moeinf_reuse_load,
};
