/* tier.c - cache + policy + store behind the forward pass (see tier.h). */
#include "experts/tier.h"

#include <stdlib.h>

#include "base/status.h"

enum moeinf_status moeinf_tier_init(const char *path, const struct moeinf_store_layer *layers,
                                    int n_layers, int n_experts, int top_k, int n_slots,
                                    const char *policy, bool page_cache, struct moeinf_tier **out,
                                    struct moeinf_error *err) {
    const char *name = policy ? policy : MOEINF_POLICY_DEFAULT;
    const struct moeinf_policy_ops *ops = moeinf_policy_find(name);
    if (!ops) {
        return moeinf_fail(err, MOEINF_ERR_ARG,
                           "unknown cache policy '%s' (the engine runs the online policies of "
                           "`moeinf sim --help`; belady is offline, simulator only)",
                           name);
    }
    struct moeinf_policy_geometry g = {n_layers, n_experts, top_k, n_slots};
    struct moeinf_tier *t = calloc(1, sizeof *t);
    if (!t) return moeinf_fail(err, MOEINF_ERR_NOMEM, "out of memory for the expert cache");
    t->n_layers = n_layers;
    t->n_experts = n_experts;
    enum moeinf_status st = moeinf_policy_create_ops(ops, &g, &t->policy, err);
    if (st == MOEINF_OK) st = moeinf_cache_init(&g, &t->cache, err);
    if (st == MOEINF_OK) st = moeinf_step_init(&t->step, n_experts, err);
    if (st == MOEINF_OK) {
        st = moeinf_store_open(path, layers, n_layers, n_experts, n_slots, page_cache, &t->store,
                               err);
    }
    if (st == MOEINF_OK) {
        t->events = malloc((size_t)n_slots * sizeof *t->events);
        t->layer = calloc((size_t)n_layers, sizeof *t->layer);
        if (!t->events || !t->layer) {
            st = moeinf_fail(err, MOEINF_ERR_NOMEM, "out of memory for the expert cache");
        }
    }
    if (st != MOEINF_OK) {
        moeinf_tier_free(t);
        return st;
    }
    *out = t;
    return MOEINF_OK;
}

void moeinf_tier_free(struct moeinf_tier *t) {
    if (!t) return;
    moeinf_store_free(t->store);
    if (t->step.ids) moeinf_step_free(&t->step);
    moeinf_cache_free(t->cache);
    moeinf_policy_free(t->policy);
    free(t->events);
    free(t->layer);
    free(t);
}

void moeinf_tier_request_begin(struct moeinf_tier *t) {
    moeinf_tier_request_end(t);
    moeinf_policy_request_begin(t->policy, t->n_requests++);
    t->in_request = true;
}

void moeinf_tier_request_end(struct moeinf_tier *t) {
    if (!t->in_request) return;
    moeinf_policy_request_end(t->policy);
    t->in_request = false;
}

void moeinf_tier_iteration_begin(struct moeinf_tier *t, enum moeinf_phase phase, int m) {
    moeinf_policy_tokens_begin(t->policy, phase, m);
    t->tokens += (uint64_t)m;
    if (phase == MOEINF_PHASE_DECODE) t->decode_tokens += (uint64_t)m;
}

void moeinf_tier_iteration_end(struct moeinf_tier *t) {
    moeinf_policy_token_end(t->policy);
}

void moeinf_tier_layer_begin(struct moeinf_tier *t, int layer, const int32_t *sel, int m,
                             int top_k) {
    moeinf_step_collect(&t->step, layer, sel, m, top_k);
    moeinf_step_begin(&t->step, t->cache, t->policy);
}

enum moeinf_status moeinf_tier_wave(struct moeinf_tier *t, const uint32_t **ids, int *n,
                                    struct moeinf_error *err) {
    enum moeinf_status st =
        moeinf_step_wave(&t->step, t->cache, t->policy, &t->wave_ids, t->events, &t->wave_n, err);
    if (st != MOEINF_OK) return st;
    struct moeinf_tier_counters *c = &t->layer[t->step.layer];
    for (int i = 0; i < t->wave_n; i++) {
        const struct moeinf_cache_event *ev = &t->events[i];
        c->accesses++;
        if (ev->hit) {
            c->hits++;
            continue;
        }
        c->misses++;
        if (ev->evicted != MOEINF_EXPERT_NONE) moeinf_store_release(t->store, ev->slot);
        uint32_t id = t->wave_ids[i];
        st = moeinf_store_load(t->store, ev->slot, (int)(id / (uint32_t)t->n_experts),
                               (int)(id % (uint32_t)t->n_experts), &c->io, err);
        if (st != MOEINF_OK) {
            /* This slot and those of the wave's later misses hold no valid expert: the cache
             * must forget them. */
            moeinf_step_wave_end(&t->step, t->cache);
            for (int j = i; j < t->wave_n; j++) {
                if (!t->events[j].hit) moeinf_cache_drop(t->cache, t->policy, t->wave_ids[j]);
            }
            t->wave_n = 0;
            return st;
        }
    }
    *ids = t->wave_ids;
    *n = t->wave_n;
    return MOEINF_OK;
}

const uint8_t *moeinf_tier_part(const struct moeinf_tier *t, int i, int part) {
    return moeinf_store_part(t->store, t->events[i].slot, part);
}

void moeinf_tier_wave_end(struct moeinf_tier *t) {
    moeinf_step_wave_end(&t->step, t->cache);
    t->wave_n = 0;
}

void moeinf_tier_layer_end(struct moeinf_tier *t) {
    moeinf_step_end(&t->step, t->policy);
}
