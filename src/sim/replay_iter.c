/* replay_iter.c - one forward iteration of the simulator (replay_iter.h): each layer's step
 * over the iteration's distinct experts, in the waves the cache allows, its prefetch
 * proposals, and the time model. */
#include "sim/replay_iter.h"

#include <string.h>

/* One layer's step of an iteration of m tokens (choices in rp->sel): its waves of accesses,
 * then the prefetch proposals. */
static enum moeinf_status replay_step(struct replay *rp, int layer, int m, bool counted,
                                      bool decode, uint64_t *misses, uint64_t *loads,
                                      struct moeinf_error *err) {
    struct moeinf_sim_result *res = rp->res;
    const struct moeinf_policy_geometry *g = &rp->policy->geom;
    moeinf_step_collect(&rp->step, layer, rp->sel, m, g->top_k);
    /* The replay's buffers are freed by moeinf_sim_replay; the analyzer loses them across the
     * policy's function pointers. */
    // NOLINTNEXTLINE(clang-analyzer-unix.Malloc)
    moeinf_step_begin(&rp->step, rp->cache, rp->policy);
    for (;;) {
        const uint32_t *ids;
        int n = 0;
        enum moeinf_status st =
            moeinf_step_wave(&rp->step, rp->cache, rp->policy, &ids, rp->events, &n, err);
        if (st != MOEINF_OK) return st;
        if (n == 0) break;
        for (int j = 0; j < n; j++) {
            const struct moeinf_cache_event *ev = &rp->events[j];
            if (ev->evicted_unused_prefetch && rp->pf_counted[ev->evicted]) {
                res->wasted_prefetches++;
            }
            if (ev->prefetch_hit && rp->pf_counted[ids[j]]) res->prefetch_hits++;
            if (!counted) continue;
            res->accesses++;
            res->hits += ev->hit;
            if (decode) {
                res->decode_accesses++;
                res->decode_hits += ev->hit;
                if (!ev->hit && rp->params->decode_misses) rp->params->decode_misses[ids[j]]++;
            }
            *misses += !ev->hit;
        }
        moeinf_step_wave_end(&rp->step, rp->cache);
    }
    moeinf_step_end(&rp->step, rp->policy);
    int n = moeinf_policy_propose_prefetch(rp->policy, layer, rp->proposals, rp->params->prefetch);
    for (int i = 0; i < n && i < rp->params->prefetch; i++) {
        struct moeinf_cache_event ev;
        enum moeinf_status st =
            moeinf_cache_prefetch(rp->cache, rp->policy, rp->proposals[i], &ev, err);
        if (st != MOEINF_OK) return st;
        if (ev.evicted_unused_prefetch && rp->pf_counted[ev.evicted]) res->wasted_prefetches++;
        if (!ev.admitted) continue;
        rp->pf_counted[rp->proposals[i]] = counted;
        if (counted) {
            res->prefetch_loads++;
            (*loads)++;
        }
    }
    return MOEINF_OK;
}

/* Time model of one iteration of m tokens: m tokens' compute, the demand loads, and the
 * prefetch loads that compute did not hide. */
static void iteration_time(struct replay *rp, int m, uint64_t misses, uint64_t loads, bool decode) {
    const struct moeinf_sim_params *p = rp->params;
    double compute_ms = p->compute_ms * (double)m;
    double prefetch_ms = (double)loads * rp->load_ms;
    double ms = compute_ms + (double)misses * rp->load_ms +
                (prefetch_ms > compute_ms ? prefetch_ms - compute_ms : 0.0);
    rp->total_ms += ms;
    if (decode) rp->decode_ms += ms;
}

/* One forward iteration over the m tokens whose choices are tokens[j * L * top_k ...]. */
enum moeinf_status moeinf_replay_iteration(struct replay *rp, const int32_t *tokens, int m,
                                           enum moeinf_phase phase, bool counted,
                                           struct moeinf_error *err) {
    const struct moeinf_policy_geometry *g = &rp->policy->geom;
    struct moeinf_sim_result *res = rp->res;
    const size_t row = (size_t)g->n_layers * (size_t)g->top_k;
    bool decode = phase == MOEINF_PHASE_DECODE;
    moeinf_policy_tokens_begin(rp->policy, phase, m);
    uint64_t misses = 0;
    uint64_t loads = 0;
    for (int l = 0; l < g->n_layers; l++) {
        for (int j = 0; j < m; j++) {
            memcpy(rp->sel + (size_t)j * g->top_k, tokens + (size_t)j * row + (size_t)l * g->top_k,
                   (size_t)g->top_k * sizeof *rp->sel);
        }
        enum moeinf_status st = replay_step(rp, l, m, counted, decode, &misses, &loads, err);
        if (st != MOEINF_OK) return st;
    }
    moeinf_policy_token_end(rp->policy);
    if (counted) {
        res->tokens += (uint64_t)m;
        res->decode_tokens += decode ? (uint64_t)m : 0;
        res->iterations++;
        if (res->timed) iteration_time(rp, m, misses, loads, decode);
    }
    return MOEINF_OK;
}
