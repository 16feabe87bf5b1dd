/* tier.c - cache + policy + store + loader behind the forward pass (see tier.h). */
#include "offload/tier.h"

#include <stdlib.h>
#include <string.h>

#include "base/status.h"

enum moeinf_status moeinf_tier_init(const char *path, const struct moeinf_store_layer *layers,
                                    int n_layers, int n_experts, int top_k, int n_slots,
                                    const struct moeinf_tier_config *cfg, struct moeinf_tier **out,
                                    struct moeinf_error *err) {
    const char *name = cfg->policy ? cfg->policy : MOEINF_POLICY_DEFAULT;
    const struct moeinf_policy_ops *ops = moeinf_policy_find(name);
    if (!ops) {
        return moeinf_fail(err, MOEINF_ERR_ARG,
                           "unknown cache policy '%s' (the engine runs the online policies of "
                           "`moeinf sim --help`; belady is offline, simulator only)",
                           name);
    }
    if (cfg->prefetch < 0 || cfg->lookahead < 0 || cfg->io_threads < 0) {
        return moeinf_fail(err, MOEINF_ERR_ARG, "prefetch, lookahead and I/O threads must be >= 0");
    }
    struct moeinf_policy_geometry g = {n_layers, n_experts, top_k, n_slots};
    struct moeinf_tier *t = calloc(1, sizeof *t);
    if (!t) return moeinf_fail(err, MOEINF_ERR_NOMEM, "out of memory for the expert cache");
    t->n_layers = n_layers;
    t->n_experts = n_experts;
    t->top_k = top_k;
    t->capacity = n_slots;
    t->cfg = *cfg;
    if (cfg->io_threads == 0) t->cfg.prefetch = t->cfg.lookahead = 0; /* nothing reads ahead */
    enum moeinf_status st = moeinf_policy_create_ops(ops, &g, &t->policy, err);
    if (st == MOEINF_OK) st = moeinf_cache_init(&g, &t->cache, err);
    if (st == MOEINF_OK) st = moeinf_step_init(&t->step, n_experts, err);
    if (st == MOEINF_OK) {
        st = moeinf_store_open(path, layers, n_layers, n_experts, n_slots, cfg->page_cache,
                               &t->store, err);
    }
    if (st == MOEINF_OK) st = moeinf_loader_init(t->store, cfg->io_threads, &t->loader, err);
    if (st == MOEINF_OK) {
        size_t ns = (size_t)n_slots;
        size_t ne = (size_t)n_experts;
        t->events = malloc(ns * sizeof *t->events);
        t->layer = calloc((size_t)n_layers, sizeof *t->layer);
        t->inflight = malloc(ns * sizeof *t->inflight);
        t->slot_busy = calloc(ns, 1);
        t->wait_slots = malloc(ns * sizeof *t->wait_slots);
        t->proposals = malloc(ne * sizeof *t->proposals);
        t->hints =
            malloc(ne * (size_t)(cfg->lookahead > 0 ? cfg->lookahead : 1) * sizeof *t->hints);
        t->in_step = calloc(ne, 1);
        t->predicted = calloc((size_t)n_layers * ne, 1);
        if (!t->events || !t->layer || !t->inflight || !t->slot_busy || !t->wait_slots ||
            !t->proposals || !t->hints || !t->in_step || !t->predicted) {
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
    moeinf_loader_free(t->loader); /* before the store: its threads read into the slots */
    moeinf_store_free(t->store);
    if (t->step.ids) moeinf_step_free(&t->step);
    moeinf_cache_free(t->cache);
    moeinf_policy_free(t->policy);
    free(t->events);
    free(t->layer);
    free(t->inflight);
    free(t->slot_busy);
    free(t->wait_slots);
    free(t->proposals);
    free(t->hints);
    free(t->in_step);
    free(t->predicted);
    free(t);
}

static int layer_of(const struct moeinf_tier *t, uint32_t id) {
    return (int)(id / (uint32_t)t->n_experts);
}

/* Removes inflight[i]: the slot's pin goes, and a failed read makes the cache forget the
 * expert (its slot holds no valid bytes). */
static enum moeinf_status retire_at(struct moeinf_tier *t, int i, struct moeinf_error *err) {
    int slot = t->inflight[i];
    uint32_t id = moeinf_cache_slot_expert(t->cache, slot); /* pinned: still there */
    struct moeinf_store_counters io;
    enum moeinf_status st = moeinf_loader_retire(t->loader, slot, &io, err);
    moeinf_store_counters_add(&t->layer[layer_of(t, id)].io, &io);
    moeinf_cache_unpin(t->cache, id);
    if (st != MOEINF_OK) moeinf_cache_drop(t->cache, t->policy, id);
    t->slot_busy[slot] = 0;
    t->inflight[i] = t->inflight[--t->n_inflight];
    return st;
}

/* Retires every finished read (failed prefetches are simply forgotten). */
static void reap(struct moeinf_tier *t) {
    for (int i = 0; i < t->n_inflight;) {
        enum moeinf_job_state s = moeinf_loader_state(t->loader, t->inflight[i]);
        if (s == MOEINF_JOB_DONE || s == MOEINF_JOB_FAILED) {
            (void)retire_at(t, i, NULL);
        } else {
            i++;
        }
    }
}

static void submit(struct moeinf_tier *t, int slot, uint32_t id, bool prefetch) {
    moeinf_cache_pin(t->cache, id);
    t->slot_busy[slot] = 1;
    t->inflight[t->n_inflight++] = slot;
    moeinf_loader_submit(t->loader, slot, layer_of(t, id), (int)(id % (uint32_t)t->n_experts),
                         prefetch);
}

/* Cancels a queued prefetch of the slot; true if it had not started (the expert is gone). */
static bool drop_queued(struct moeinf_tier *t, int i) {
    int slot = t->inflight[i];
    if (!moeinf_loader_cancel(t->loader, slot)) return false;
    uint32_t id = moeinf_cache_slot_expert(t->cache, slot);
    moeinf_cache_unpin(t->cache, id);
    moeinf_cache_drop(t->cache, t->policy, id);
    t->layer[layer_of(t, id)].dropped_prefetches++;
    t->slot_busy[slot] = 0;
    t->inflight[i] = t->inflight[--t->n_inflight];
    return true;
}

void moeinf_tier_quiesce(struct moeinf_tier *t) {
    for (int i = 0; i < t->n_inflight;) {
        if (!moeinf_loader_is_prefetch(t->loader, t->inflight[i]) || !drop_queued(t, i)) i++;
    }
    for (int i = 0; i < t->n_inflight; i++) {
        uint64_t ns;
        (void)moeinf_loader_wait(t->loader, t->inflight[i], &ns, NULL);
        t->layer[t->step.layer].stall_ns += ns; /* the step that had to wait */
    }
    reap(t);
}

/* Admits `id` ahead of need and queues its read; nothing if it is resident, if the cache has
 * no unpinned victim, or if so many reads are in flight that a step's experts might not find
 * unpinned slots. */
static enum moeinf_status prefetch_one(struct moeinf_tier *t, uint32_t id,
                                       struct moeinf_error *err) {
    if (t->n_inflight + t->top_k >= t->capacity) return MOEINF_OK;
    struct moeinf_cache_event ev;
    enum moeinf_status st = moeinf_cache_prefetch(t->cache, t->policy, id, &ev, err);
    if (st != MOEINF_OK || !ev.admitted) return st;
    struct moeinf_tier_counters *c = &t->layer[layer_of(t, id)];
    if (ev.evicted != MOEINF_EXPERT_NONE && ev.evicted_unused_prefetch) {
        t->layer[layer_of(t, ev.evicted)].wasted_prefetches++;
    }
    c->prefetches++;
    submit(t, ev.slot, id, true);
    return MOEINF_OK;
}

static void predict(struct moeinf_tier *t, uint32_t id, enum moeinf_tier_source src) {
    uint8_t bit = (uint8_t)(1u << src);
    if (!(t->predicted[id] & bit)) {
        t->predicted[id] |= bit;
        t->prediction[src].predicted++;
    }
}

/* Scores the predictions made for this layer's step against the step, then forgets them. */
static void score(struct moeinf_tier *t, int layer) {
    uint8_t *pred = t->predicted + (size_t)layer * (size_t)t->n_experts;
    uint8_t any = 0;
    for (int e = 0; e < t->n_experts; e++) {
        if (!pred[e]) continue;
        any |= pred[e];
        for (int s = 0; s < MOEINF_SOURCE_COUNT; s++) {
            if ((pred[e] >> s) & 1u) t->prediction[s].correct += t->in_step[e];
        }
        pred[e] = 0;
    }
    for (int s = 0; s < MOEINF_SOURCE_COUNT; s++) {
        if ((any >> s) & 1u) t->prediction[s].actual += (uint64_t)t->step.n;
    }
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
    const uint32_t base = (uint32_t)layer * (uint32_t)t->n_experts;
    memset(t->in_step, 0, (size_t)t->n_experts);
    for (int i = 0; i < t->step.n; i++)
        t->in_step[t->step.ids[i] - base] = 1;
    score(t, layer);
    reap(t);
    /* A prefetch for this layer that has not started and that the step does not use came
     * too late to matter: drop it so that it neither occupies the disk nor a slot. */
    for (int i = 0; i < t->n_inflight;) {
        int slot = t->inflight[i];
        uint32_t id = moeinf_cache_slot_expert(t->cache, slot);
        if (layer_of(t, id) == layer && !t->in_step[id - base] &&
            moeinf_loader_is_prefetch(t->loader, slot) && drop_queued(t, i)) {
            continue;
        }
        i++;
    }
    moeinf_step_begin(&t->step, t->cache, t->policy);
    t->n_hints = 0;
}

void moeinf_tier_hint(struct moeinf_tier *t, int layer, const int *experts, int n) {
    const uint32_t base = (uint32_t)layer * (uint32_t)t->n_experts;
    for (int i = 0; i < n; i++) {
        uint32_t id = base + (uint32_t)experts[i];
        predict(t, id, MOEINF_SOURCE_LOOKAHEAD);
        if (t->n_hints < t->n_experts * (t->cfg.lookahead > 0 ? t->cfg.lookahead : 1)) {
            t->hints[t->n_hints++] = id;
        }
    }
}

enum moeinf_status moeinf_tier_wave(struct moeinf_tier *t, const uint32_t **ids, int *n,
                                    struct moeinf_error *err) {
    int left = t->step.n - t->step.pos;
    int size = left < t->capacity ? left : t->capacity;
    /* The wave pins up to `size` experts: reads in flight (pinned too) must leave room. */
    if (size > 0 && t->n_inflight + size > t->capacity) moeinf_tier_quiesce(t);
    enum moeinf_status st =
        moeinf_step_wave(&t->step, t->cache, t->policy, &t->wave_ids, t->events, &t->wave_n, err);
    if (st != MOEINF_OK) return st;
    struct moeinf_tier_counters *c = &t->layer[t->step.layer];
    int n_wait = 0;
    t->n_wait = 0;
    for (int i = 0; i < t->wave_n; i++) {
        const struct moeinf_cache_event *ev = &t->events[i];
        c->accesses++;
        if (ev->hit) {
            c->hits++;
            bool arriving = t->slot_busy[ev->slot] &&
                            moeinf_loader_state(t->loader, ev->slot) != MOEINF_JOB_DONE;
            if (arriving) {
                c->late_prefetches++;
                moeinf_loader_promote(t->loader, ev->slot);
                t->wait_slots[n_wait++] = ev->slot;
            } else if (ev->prefetch_hit) {
                c->prefetch_hits++;
            }
            continue;
        }
        c->misses++;
        if (ev->evicted != MOEINF_EXPERT_NONE && ev->evicted_unused_prefetch) {
            t->layer[layer_of(t, ev->evicted)].wasted_prefetches++;
        }
        submit(t, ev->slot, t->wave_ids[i], false);
        t->wait_slots[n_wait++] = ev->slot;
    }
    /* Lookahead prefetches queue behind this wave's demand reads. */
    for (int i = 0; i < t->n_hints && st == MOEINF_OK; i++)
        st = prefetch_one(t, t->hints[i], err);
    t->n_hints = 0;
    t->n_wait = n_wait;
    t->wait_pos = 0;
    if (st != MOEINF_OK) {
        /* the wave's reads finish before it ends (its slots may be reassigned after) */
        if (moeinf_tier_wave_wait(t, NULL) == MOEINF_OK) {
            moeinf_step_wave_end(&t->step, t->cache);
            t->wave_n = 0;
        }
        return st;
    }
    *ids = t->wave_ids;
    *n = t->wave_n;
    return MOEINF_OK;
}

bool moeinf_tier_ready(const struct moeinf_tier *t, int i) {
    int slot = t->events[i].slot;
    return !t->slot_busy[slot] || moeinf_loader_state(t->loader, slot) == MOEINF_JOB_DONE;
}

enum moeinf_status moeinf_tier_wave_wait(struct moeinf_tier *t, struct moeinf_error *err) {
    struct moeinf_tier_counters *c = &t->layer[t->step.layer];
    enum moeinf_status first = MOEINF_OK;
    for (int i = 0; i < t->n_wait; i++) {
        uint64_t ns;
        struct moeinf_error e;
        enum moeinf_status r = moeinf_loader_wait(t->loader, t->wait_slots[i], &ns, &e);
        c->stall_ns += ns;
        if (r != MOEINF_OK && first == MOEINF_OK) {
            first = r;
            if (err) *err = e;
        }
    }
    t->n_wait = 0;
    reap(t);
    if (first != MOEINF_OK) {
        /* Failed reads were forgotten by reap (their slots hold nothing valid). */
        moeinf_step_wave_end(&t->step, t->cache);
        t->wave_n = 0;
    }
    return first;
}

enum moeinf_status moeinf_tier_wave_wait_next(struct moeinf_tier *t, struct moeinf_error *err) {
    while (t->wait_pos < t->n_wait) {
        int slot = t->wait_slots[t->wait_pos];
        enum moeinf_job_state s = moeinf_loader_state(t->loader, slot);
        if (s == MOEINF_JOB_FAILED) return moeinf_tier_wave_wait(t, err); /* reports it */
        t->wait_pos++;
        if (s == MOEINF_JOB_DONE) continue;
        uint64_t ns;
        enum moeinf_status st = moeinf_loader_wait(t->loader, slot, &ns, NULL);
        t->layer[t->step.layer].stall_ns += ns;
        if (st != MOEINF_OK) return moeinf_tier_wave_wait(t, err);
        return MOEINF_OK;
    }
    return MOEINF_OK;
}

const uint8_t *moeinf_tier_part(const struct moeinf_tier *t, int i, int part) {
    return moeinf_store_part(t->store, t->events[i].slot, part);
}

void moeinf_tier_compute(struct moeinf_tier *t, const struct moeinf_expert_ffn *ffn,
                         struct moeinf_pool *pool, const struct moeinf_kernels *kern) {
    (void)t;
    moeinf_expert_ffn_run(pool, kern, ffn);
}

void moeinf_tier_wave_end(struct moeinf_tier *t) {
    moeinf_step_wave_end(&t->step, t->cache);
    t->wave_n = 0;
}

enum moeinf_status moeinf_tier_layer_end(struct moeinf_tier *t, struct moeinf_error *err) {
    moeinf_step_end(&t->step, t->policy);
    int n = moeinf_policy_propose_prefetch(t->policy, t->step.layer, t->proposals, t->cfg.prefetch);
    for (int i = 0; i < n && i < t->cfg.prefetch; i++) {
        if (t->proposals[i] >= (uint32_t)(t->n_layers * t->n_experts)) continue;
        predict(t, t->proposals[i], MOEINF_SOURCE_POLICY);
        enum moeinf_status st = prefetch_one(t, t->proposals[i], err);
        if (st != MOEINF_OK) return st;
    }
    return MOEINF_OK;
}
