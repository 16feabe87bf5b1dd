/* tier.c - cache + policy + fast tier + store + loader behind the forward pass (see tier.h). */
#include "offload/tier.h"

#include <assert.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/status.h"
#include "experts/cache.h"
#include "experts/step.h"
#include "offload/loader.h"
#include "offload/prefetch_auto.h"

_Static_assert(MOEINF_SOURCE_COUNT == MOEINF_PREFETCH_AUTO_SOURCES, "one controller per source");

struct moeinf_tier {
    struct moeinf_cache *cache;
    struct moeinf_policy *policy;
    struct moeinf_fast_tier *fast;
    struct moeinf_store *store;
    struct moeinf_loader *loader;
    struct moeinf_step step;
    int prefetch;                      /* policy proposals admitted per step */
    struct moeinf_cache_event *events; /* (capacity) the current wave's accesses */
    const uint32_t *wave_ids;
    int wave_n;
    int n_layers, n_experts, top_k, capacity;
    bool in_request;
    bool decoding; /* the iteration decodes */
    uint64_t n_requests;
    struct moeinf_tier_counters *layer; /* (n_layers) */
    uint64_t tokens, decode_tokens;
    /* reads in flight (forward thread only). They pin nothing: the cache decides as if every
     * read had arrived (as the simulator does), and a slot whose read is still in flight when
     * the cache gives it to another expert is released first (release_slot). */
    int *inflight; /* (capacity) slots with a job not yet retired */
    int n_inflight;
    uint8_t *slot_busy; /* (capacity) 1 while the slot is in inflight[] */
    int *wait_slots;    /* (capacity) the current wave's reads to wait for */
    int n_wait;
    int wait_pos;        /* wait_slots[0..wait_pos) are known to have arrived */
    uint32_t *proposals; /* (prefetch) policy proposals */
    uint32_t *hints;     /* (n_layers * top_k) lookahead hints awaiting the wave */
    int n_hints;
    uint8_t *in_step;   /* (n_experts) 1 for the experts of the current step */
    uint8_t *predicted; /* (layers x experts) bit per source: named for the layer's next step;
                           bit COLD + source: named while not in the cache */
    struct moeinf_tier_prediction prediction[MOEINF_SOURCE_COUNT];
    /* auto (prefetch_auto.h) */
    bool auto_src[MOEINF_SOURCE_COUNT];
    struct moeinf_prefetch_auto *pfa;
    int io_threads;
    uint64_t mark_ns, mark_busy; /* when the current layer's window began, and the loader's busy
                                    time then */
    uint64_t read_ns_sum, loads_sum; /* every read retired: I/O thread time and experts */
    uint64_t iter_t0; /* when the iteration began (the controller's wall-time check) */
};

#define COLD 2 /* predicted[]: bit COLD + source */

static uint64_t spare_since_mark(struct moeinf_tier *t);

static uint64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Slots for the budget: MOEINF_ERR_ARG under top_k, cut to every expert above. */
static enum moeinf_status slots_for(const struct moeinf_tier_params *p, uint64_t slot_bytes,
                                    int *slots, struct moeinf_error *err) {
    const uint64_t total = (uint64_t)p->n_layers * (uint64_t)p->n_experts;
    const uint64_t n = p->budget_bytes / slot_bytes;
    if (n < (uint64_t)p->top_k) {
        return moeinf_fail(err, MOEINF_ERR_ARG,
                           "expert_cache: %llu MiB hold%s %llu slot%s of %.2f MiB, too small: "
                           "one token uses %d experts per layer, so at least %d slots (%.1f MiB) "
                           "are needed",
                           (unsigned long long)(p->budget_bytes >> 20),
                           p->budget_bytes >> 20 == 1 ? "s" : "", (unsigned long long)n,
                           n == 1 ? "" : "s", (double)slot_bytes / (1024.0 * 1024.0), p->top_k,
                           p->top_k, (double)slot_bytes * p->top_k / (1024.0 * 1024.0));
    }
    *slots = (int)(n < total ? n : total);
    return MOEINF_OK;
}

static enum moeinf_status tier_buffers(struct moeinf_tier *t, struct moeinf_error *err) {
    const size_t ns = (size_t)t->capacity;
    const size_t ne = (size_t)t->n_experts;
    t->events = malloc(ns * sizeof *t->events);
    t->layer = calloc((size_t)t->n_layers, sizeof *t->layer);
    t->inflight = malloc(ns * sizeof *t->inflight);
    t->slot_busy = calloc(ns, 1);
    t->wait_slots = malloc(ns * sizeof *t->wait_slots);
    /* a policy proposes at most `prefetch` experts, from any layers (moe-infinity's may come
     * from several, so more than one layer's experts) */
    t->proposals = malloc((size_t)(t->prefetch > 0 ? t->prefetch : 1) * sizeof *t->proposals);
    t->hints = malloc((size_t)t->n_layers * (size_t)t->top_k * sizeof *t->hints);
    t->in_step = calloc(ne, 1);
    t->predicted = calloc((size_t)t->n_layers * ne, 1);
    if (!t->events || !t->layer || !t->inflight || !t->slot_busy || !t->wait_slots ||
        !t->proposals || !t->hints || !t->in_step || !t->predicted) {
        return moeinf_fail(err, MOEINF_ERR_NOMEM, "out of memory for the expert cache");
    }
    return MOEINF_OK;
}

enum moeinf_status moeinf_tier_init(const struct moeinf_tier_params *p, struct moeinf_tier **out,
                                    struct moeinf_error *err) {
    assert(p->prefetch >= 0 && p->io_threads >= 0 && (p->io_threads > 0 || p->prefetch == 0));
    const char *name = p->policy ? p->policy : MOEINF_POLICY_DEFAULT;
    const struct moeinf_policy_ops *ops = moeinf_policy_find(name);
    if (!ops) {
        return moeinf_fail(err, MOEINF_ERR_ARG,
                           "expert_policy: unknown cache policy '%s' (the engine runs the online "
                           "policies; belady is offline, simulator only)",
                           name);
    }
    const uint64_t slot_bytes = moeinf_store_slot_bytes_for(p->layers, p->n_layers, p->n_experts);
    int n_slots = 0;
    enum moeinf_status st = slots_for(p, slot_bytes, &n_slots, err);
    if (st != MOEINF_OK) return st;
    struct moeinf_policy_geometry g = {p->n_layers, p->n_experts, p->top_k, n_slots, p->model};
    struct moeinf_tier *t = calloc(1, sizeof *t);
    if (!t) return moeinf_fail(err, MOEINF_ERR_NOMEM, "out of memory for the expert cache");
    t->n_layers = p->n_layers;
    t->n_experts = p->n_experts;
    t->top_k = p->top_k;
    t->capacity = n_slots;
    t->prefetch = p->prefetch;
    t->auto_src[MOEINF_SOURCE_POLICY] = p->prefetch_auto;
    t->auto_src[MOEINF_SOURCE_LOOKAHEAD] = p->lookahead_auto;
    t->io_threads = p->io_threads;
    const struct moeinf_fast_tier_ops *fast = p->fast ? p->fast : &moeinf_fast_tier_ram;
    st = moeinf_policy_create_ops(ops, &g, &t->policy, err);
    if (st == MOEINF_OK) st = moeinf_cache_init(&g, &t->cache, err);
    if (st == MOEINF_OK) st = moeinf_step_init(&t->step, p->n_experts, err);
    if (st == MOEINF_OK) st = moeinf_fast_tier_init(fast, slot_bytes, n_slots, &t->fast, err);
    if (st == MOEINF_OK) {
        st = moeinf_store_open(p->path, p->layers, p->n_layers, p->n_experts, t->fast,
                               p->io, &t->store, err);
    }
    if (st == MOEINF_OK) st = moeinf_loader_init(t->store, p->io_threads, &t->loader, err);
    if (st == MOEINF_OK) st = tier_buffers(t, err);
    if (st == MOEINF_OK && (p->prefetch_auto || p->lookahead_auto)) {
        st = moeinf_prefetch_auto_init(p->n_layers, &t->pfa, err);
    }
    if (st == MOEINF_OK) (void)spare_since_mark(t);
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
    moeinf_fast_tier_free(t->fast);
    if (t->step.ids) moeinf_step_free(&t->step);
    moeinf_cache_free(t->cache);
    moeinf_policy_free(t->policy);
    moeinf_prefetch_auto_free(t->pfa);
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

/* Removes inflight[i], a finished read of expert `id` (the one its slot held when the read
 * was queued): its counters go to id's layer, and a failed read makes the cache forget the
 * expert if it still holds it (its slot holds no valid bytes). */
static enum moeinf_status retire_read(struct moeinf_tier *t, int i, uint32_t id,
                                      struct moeinf_error *err) {
    int slot = t->inflight[i];
    struct moeinf_store_counters io;
    enum moeinf_status st = moeinf_loader_retire(t->loader, slot, &io, err);
    moeinf_store_counters_add(&t->layer[layer_of(t, id)].io, &io);
    t->read_ns_sum += io.read_ns;
    t->loads_sum += io.loads;
    if (st != MOEINF_OK && moeinf_cache_slot_expert(t->cache, slot) == id) {
        moeinf_cache_drop(t->cache, t->policy, id);
    }
    t->slot_busy[slot] = 0;
    t->inflight[i] = t->inflight[--t->n_inflight];
    return st;
}

static enum moeinf_status retire_at(struct moeinf_tier *t, int i, struct moeinf_error *err) {
    return retire_read(t, i, moeinf_cache_slot_expert(t->cache, t->inflight[i]), err);
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
    assert(!t->slot_busy[slot]);
    t->slot_busy[slot] = 1;
    t->inflight[t->n_inflight++] = slot;
    moeinf_loader_submit(t->loader, slot, layer_of(t, id), (int)(id % (uint32_t)t->n_experts),
                         prefetch);
}

/* The cache has just given `slot` to another expert, evicting `old` (a prefetched expert:
 * demand reads are retired before their wave ends), whose read is still in flight: a queued
 * read is cancelled (a dropped prefetch), a running one waited for (the current step's stall)
 * and retired, so that the slot is free for the new expert's read. */
static void release_slot(struct moeinf_tier *t, int slot, uint32_t old) {
    int i = 0;
    while (i < t->n_inflight && t->inflight[i] != slot)
        i++;
    assert(i < t->n_inflight);
    if (moeinf_loader_cancel(t->loader, slot)) {
        t->layer[layer_of(t, old)].dropped_prefetches++;
        t->slot_busy[slot] = 0;
        t->inflight[i] = t->inflight[--t->n_inflight];
        return;
    }
    uint64_t ns;
    (void)moeinf_loader_wait(t->loader, slot, &ns, NULL);
    t->layer[t->step.layer].stall_ns += ns;
    (void)retire_read(t, i, old, NULL); /* a failed read of an evicted expert changes nothing */
}

void moeinf_tier_quiesce(struct moeinf_tier *t) {
    for (int i = 0; i < t->n_inflight; i++) {
        uint64_t ns;
        (void)moeinf_loader_wait(t->loader, t->inflight[i], &ns, NULL);
        t->layer[t->step.layer].stall_ns += ns; /* the step that had to wait */
    }
    reap(t);
}

/* Admits `id` ahead of need and queues its read; nothing if it is resident or if the cache
 * has no unpinned victim: what the simulator's moeinf_cache_prefetch does, whatever the reads
 * in flight. */
static enum moeinf_status prefetch_one(struct moeinf_tier *t, uint32_t id,
                                       struct moeinf_error *err) {
    struct moeinf_cache_event ev;
    enum moeinf_status st = moeinf_cache_prefetch(t->cache, t->policy, id, &ev, err);
    if (st != MOEINF_OK || !ev.admitted) return st;
    struct moeinf_tier_counters *c = &t->layer[layer_of(t, id)];
    if (ev.evicted != MOEINF_EXPERT_NONE && ev.evicted_unused_prefetch) {
        t->layer[layer_of(t, ev.evicted)].wasted_prefetches++;
    }
    if (ev.evicted != MOEINF_EXPERT_NONE && t->slot_busy[ev.slot]) {
        release_slot(t, ev.slot, ev.evicted);
    }
    c->prefetches++;
    submit(t, ev.slot, id, true);
    return MOEINF_OK;
}

/* Whether the source's reads are issued for `layer`: always unless the source is auto, then
 * where the controller has it on. */
static bool source_on(const struct moeinf_tier *t, int layer, enum moeinf_tier_source src) {
    return !t->auto_src[src] || moeinf_prefetch_auto_on(t->pfa, layer, (int)src);
}

static void predict(struct moeinf_tier *t, uint32_t id, enum moeinf_tier_source src) {
    uint8_t bit = (uint8_t)(1u << src);
    if (!(t->predicted[id] & bit)) {
        t->predicted[id] |= bit;
        t->prediction[src].predicted++;
        if (!moeinf_cache_is_resident(t->cache, id)) t->predicted[id] |= (uint8_t)(bit << COLD);
    }
}

/* Scores the predictions made for this layer's step against the step, then forgets them;
 * with an auto source, the controller gets the step (and the I/O threads' idle time since the
 * window began, spare_ns). */
static void score(struct moeinf_tier *t, int layer, uint64_t spare_ns) {
    uint8_t *pred = t->predicted + (size_t)layer * (size_t)t->n_experts;
    struct moeinf_tier_counters *c = &t->layer[layer];
    struct moeinf_prefetch_auto_obs obs = {.spare_ns = spare_ns};
    uint8_t any = 0;
    for (int e = 0; e < t->n_experts; e++) {
        if (!pred[e]) continue;
        any |= pred[e];
        for (int s = 0; s < MOEINF_SOURCE_COUNT; s++) {
            if ((pred[e] >> s) & 1u) t->prediction[s].correct += t->in_step[e];
            if ((pred[e] >> (COLD + s)) & 1u) {
                obs.reads[s]++;
                obs.used[s] += t->in_step[e];
            }
        }
        pred[e] = 0;
    }
    for (int s = 0; s < MOEINF_SOURCE_COUNT; s++) {
        if ((any >> s) & 1u) t->prediction[s].actual += (uint64_t)t->step.n;
        c->reads[s] += obs.reads[s];
        c->reads_used[s] += obs.used[s];
    }
    c->spare_ns += spare_ns;
    if (t->pfa) {
        uint64_t read_ns = t->loads_sum ? t->read_ns_sum / t->loads_sum : 0;
        moeinf_prefetch_auto_step(t->pfa, layer, &obs, read_ns);
    }
}

/* The I/O threads' idle time since the last mark (I/O threads x wall time, less their busy
 * time), and a new mark. 0 without I/O threads. */
static uint64_t spare_since_mark(struct moeinf_tier *t) {
    if (t->io_threads == 0) return 0;
    uint64_t now = now_ns();
    uint64_t busy = moeinf_loader_busy_ns(t->loader);
    uint64_t wall = (now - t->mark_ns) * (uint64_t)t->io_threads;
    uint64_t used = busy - t->mark_busy;
    t->mark_ns = now;
    t->mark_busy = busy;
    return wall > used ? wall - used : 0;
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
    t->decoding = phase == MOEINF_PHASE_DECODE;
    (void)spare_since_mark(t); /* the time between iterations is not the layers' */
    if (t->pfa) t->iter_t0 = now_ns();
}

void moeinf_tier_iteration_end(struct moeinf_tier *t) {
    moeinf_policy_token_end(t->policy);
    if (t->pfa && t->decoding) {
        /* a layer's reads are judged by the whole iteration: a read's CPU cost lands in
         * whichever layer computes when it runs */
        moeinf_prefetch_auto_iteration(t->pfa, now_ns() - t->iter_t0);
    }
}

void moeinf_tier_layer_begin(struct moeinf_tier *t, int layer, const int32_t *sel, int m,
                             int top_k) {
    moeinf_step_collect(&t->step, layer, sel, m, top_k);
    const uint32_t base = (uint32_t)layer * (uint32_t)t->n_experts;
    memset(t->in_step, 0, (size_t)t->n_experts);
    for (int i = 0; i < t->step.n; i++)
        t->in_step[t->step.ids[i] - base] = 1;
    score(t, layer, spare_since_mark(t));
    reap(t);
    /* A prefetch this step does not use stays, read or not: the cache keeps the expert, as the
     * simulator's does (only an eviction cancels its read, release_slot). */
    moeinf_step_begin(&t->step, t->cache, t->policy);
    t->n_hints = 0;
}

void moeinf_tier_hint(struct moeinf_tier *t, int layer, const int *experts, int n) {
    const uint32_t base = (uint32_t)layer * (uint32_t)t->n_experts;
    for (int i = 0; i < n; i++) {
        uint32_t id = base + (uint32_t)experts[i];
        predict(t, id, MOEINF_SOURCE_LOOKAHEAD);
        if (t->n_hints < t->n_layers * t->top_k) {
            t->hints[t->n_hints++] = id;
        }
    }
}

enum moeinf_status moeinf_tier_wave(struct moeinf_tier *t, const uint32_t **ids, int *n,
                                    struct moeinf_error *err) {
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
            /* A resident expert whose prefetch read has not finished is a hit for the cache
             * (and the simulator) but the step waits for it: a late prefetch, not a hit. */
            bool arriving = t->slot_busy[ev->slot] &&
                            moeinf_loader_state(t->loader, ev->slot) != MOEINF_JOB_DONE;
            if (arriving) {
                c->late_prefetches++;
                moeinf_loader_promote(t->loader, ev->slot);
                t->wait_slots[n_wait++] = ev->slot;
            } else {
                c->hits++;
                c->prefetch_hits += ev->prefetch_hit;
            }
            continue;
        }
        c->misses++;
        if (ev->evicted != MOEINF_EXPERT_NONE && ev->evicted_unused_prefetch) {
            t->layer[layer_of(t, ev->evicted)].wasted_prefetches++;
        }
        if (ev->evicted != MOEINF_EXPERT_NONE && t->slot_busy[ev->slot]) {
            release_slot(t, ev->slot, ev->evicted);
        }
        submit(t, ev->slot, t->wave_ids[i], false);
        t->wait_slots[n_wait++] = ev->slot;
    }
    /* Lookahead prefetches queue behind this wave's demand reads. */
    for (int i = 0; i < t->n_hints && st == MOEINF_OK; i++) {
        if (source_on(t, layer_of(t, t->hints[i]), MOEINF_SOURCE_LOOKAHEAD)) {
            st = prefetch_one(t, t->hints[i], err);
        }
    }
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
    moeinf_fast_tier_compute(t->fast, ffn, pool, kern);
}

void moeinf_tier_wave_end(struct moeinf_tier *t) {
    moeinf_step_wave_end(&t->step, t->cache);
    t->wave_n = 0;
}

enum moeinf_status moeinf_tier_layer_end(struct moeinf_tier *t, struct moeinf_error *err) {
    moeinf_step_end(&t->step, t->policy);
    int n = moeinf_policy_propose_prefetch(t->policy, t->step.layer, t->proposals, t->prefetch);
    for (int i = 0; i < n && i < t->prefetch; i++) {
        if (t->proposals[i] >= (uint32_t)(t->n_layers * t->n_experts)) continue;
        predict(t, t->proposals[i], MOEINF_SOURCE_POLICY);
        if (!source_on(t, layer_of(t, t->proposals[i]), MOEINF_SOURCE_POLICY)) continue;
        enum moeinf_status st = prefetch_one(t, t->proposals[i], err);
        if (st != MOEINF_OK) return st;
    }
    return MOEINF_OK;
}

/* ---- what the tier is and did ------------------------------------------------------------ */

void moeinf_tier_info(const struct moeinf_tier *t, struct moeinf_tier_info *out) {
    memset(out, 0, sizeof *out);
    out->slots = t->capacity;
    out->slot_bytes = t->fast->slot_bytes;
    out->policy = t->policy->ops->name;
    out->fast = t->fast->ops->name;
    out->direct_io = moeinf_store_direct(t->store);
    out->io_note = moeinf_store_note(t->store);
}

static void counters_add(struct moeinf_tier_counters *o, const struct moeinf_tier_counters *c) {
    o->accesses += c->accesses;
    o->hits += c->hits;
    o->misses += c->misses;
    o->prefetches += c->prefetches;
    o->prefetch_hits += c->prefetch_hits;
    o->late_prefetches += c->late_prefetches;
    o->wasted_prefetches += c->wasted_prefetches;
    o->dropped_prefetches += c->dropped_prefetches;
    o->stall_ns += c->stall_ns;
    moeinf_store_counters_add(&o->io, &c->io);
    for (int s = 0; s < MOEINF_SOURCE_COUNT; s++) {
        o->reads[s] += c->reads[s];
        o->reads_used[s] += c->reads_used[s];
    }
    o->spare_ns += c->spare_ns;
}

void moeinf_tier_report(const struct moeinf_tier *t, int layer, struct moeinf_tier_report *out) {
    assert(layer >= -1 && layer < t->n_layers);
    memset(out, 0, sizeof *out);
    for (int il = 0; il < t->n_layers; il++) {
        if (layer != -1 && layer != il) continue;
        counters_add(&out->counters, &t->layer[il]);
        for (int s = 0; s < MOEINF_SOURCE_COUNT; s++) {
            out->layers_on[s] += t->auto_src[s] && moeinf_prefetch_auto_wanted(t->pfa, il, s);
            out->layers_read[s] += t->auto_src[s] && moeinf_prefetch_auto_on(t->pfa, il, s);
        }
    }
    for (int s = 0; s < MOEINF_SOURCE_COUNT; s++) {
        if (!t->auto_src[s]) out->layers_on[s] = out->layers_read[s] = -1;
    }
    if (t->pfa) moeinf_prefetch_auto_checks(t->pfa, &out->auto_checks, &out->auto_checks_kept);
    /* As the simulator counts at the end of a replay: a prefetched expert that no step has
     * used yet is wasted as of now (if a later step uses it, the next report counts a
     * prefetch hit instead). */
    for (int slot = 0; slot < t->capacity; slot++) {
        uint32_t id = moeinf_cache_slot_expert(t->cache, slot);
        if (id == MOEINF_EXPERT_NONE || (layer != -1 && layer_of(t, id) != layer)) continue;
        out->counters.wasted_prefetches += moeinf_cache_is_prefetched(t->cache, id);
    }
    /* Reads queued or running: their bytes and time are not in counters.io yet. */
    for (int i = 0; i < t->n_inflight; i++) {
        uint32_t id = moeinf_cache_slot_expert(t->cache, t->inflight[i]);
        if (layer == -1 || layer_of(t, id) == layer) out->counters.reads_in_flight++;
    }
    out->tokens = t->tokens;
    out->decode_tokens = t->decode_tokens;
    memcpy(out->prediction, t->prediction, sizeof out->prediction);
}

void moeinf_tier_report_reset(struct moeinf_tier *t) {
    moeinf_tier_quiesce(t); /* reads in flight would count after the reset */
    memset(t->layer, 0, (size_t)t->n_layers * sizeof *t->layer);
    memset(t->prediction, 0, sizeof t->prediction);
    t->tokens = t->decode_tokens = 0;
}

struct moeinf_policy *moeinf_tier_policy(struct moeinf_tier *t) {
    return t->policy;
}

int moeinf_tier_reads_in_flight(const struct moeinf_tier *t) {
    return t->n_inflight;
}

bool moeinf_tier_in_request(const struct moeinf_tier *t) {
    return t->in_request;
}

void moeinf_tier_evict_all(struct moeinf_tier *t) {
    moeinf_tier_quiesce(t); /* no pin is left once every read is retired */
    for (int slot = 0; slot < t->capacity; slot++) {
        uint32_t id = moeinf_cache_slot_expert(t->cache, slot);
        if (id == MOEINF_EXPERT_NONE) continue;
        if (moeinf_cache_is_prefetched(t->cache, id)) t->layer[layer_of(t, id)].wasted_prefetches++;
        moeinf_cache_drop(t->cache, t->policy, id);
    }
}
