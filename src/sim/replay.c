/*
 * replay.c - the expert-cache simulator: streams a trace through the cache and a policy in
 * the replay order of moeinf_sim.h, counting hits, prefetches and modelled time. Everything a
 * policy decides happens behind moeinf_cache_* and the policy table; this file only reports
 * events and counts their outcomes.
 */
#include "sim/replay.h"

#include <assert.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/status.h"
#include "experts/cache.h"
#include "experts/eam.h"
#include "experts/step.h"
#include "sim/replay_iter.h"
#include "trace/trace.h"

static const struct moeinf_policy_ops *const offline[] = {
    &moeinf_policy_belady,
    &moeinf_policy_freq_oracle,
};

#define N_OFFLINE (sizeof offline / sizeof offline[0])

static const struct moeinf_policy_ops *policy_at(size_t i) {
    const struct moeinf_policy_ops *ops = moeinf_policy_registry(i);
    if (ops) return ops;
    size_t n_online = 0;
    while (moeinf_policy_registry(n_online))
        n_online++;
    return i - n_online < N_OFFLINE ? offline[i - n_online] : NULL;
}

const char *moeinf_sim_policy_name(size_t i) {
    const struct moeinf_policy_ops *ops = policy_at(i);
    return ops ? ops->name : NULL;
}

const char *moeinf_sim_policy_summary(size_t i) {
    const struct moeinf_policy_ops *ops = policy_at(i);
    return ops ? ops->summary : NULL;
}

const char *moeinf_sim_default_policy(void) {
    return MOEINF_POLICY_DEFAULT;
}

const struct moeinf_policy_ops *moeinf_sim_policy_find(const char *name) {
    const struct moeinf_policy_ops *ops = moeinf_policy_find(name);
    for (size_t i = 0; !ops && i < N_OFFLINE; i++) {
        if (!strcmp(offline[i]->name, name)) ops = offline[i];
    }
    return ops;
}

struct moeinf_sim_params moeinf_sim_params_default(void) {
    struct moeinf_sim_params p;
    memset(&p, 0, sizeof p);
    return p;
}

enum moeinf_status moeinf_sim_cache_size(const struct moeinf_sim_params *params, uint32_t n_ids,
                                         int *out, struct moeinf_error *err) {
    if (params->cache_experts > 0) {
        *out = params->cache_experts;
        return MOEINF_OK;
    }
    if (params->cache_experts < 0 || !(params->cache_percent > 0) ||
        !(params->cache_percent <= 100)) {
        return moeinf_fail(err, MOEINF_ERR_ARG,
                           "cache size: give a number of experts > 0 or a percentage in (0, 100]");
    }
    *out = (int)floor(params->cache_percent / 100.0 * n_ids + 0.5);
    return MOEINF_OK;
}

/* The whole demand-access sequence, for an offline policy. */
static enum moeinf_status read_future(const char *path, uint32_t **out, size_t *n_out,
                                      struct moeinf_error *err) {
    struct moeinf_trace_reader *r = NULL;
    uint32_t *ids = NULL;
    size_t n = 0;
    size_t cap = 0;
    enum moeinf_status st = moeinf_trace_open(path, &r, err);
    if (st != MOEINF_OK) return st;
    const struct moeinf_trace_header *h = moeinf_trace_header(r);
    const size_t per_token = (size_t)h->n_layers * (size_t)h->top_k;
    assert(per_token > 0); /* the reader checks the geometry (each count >= 1) */
    for (;;) {
        struct moeinf_trace_token tok;
        bool end = false;
        if ((st = moeinf_trace_read(r, &tok, &end, err)) != MOEINF_OK) goto fail;
        if (end) break;
        if (n + per_token > cap) {
            size_t new_cap = cap ? cap * 2 : per_token * 4096;
            uint32_t *grown = realloc(ids, new_cap * sizeof *grown);
            if (!grown) {
                st = moeinf_fail(err, MOEINF_ERR_NOMEM,
                                 "%s: out of memory for the future of "
                                 "%zu accesses",
                                 path, n);
                goto fail;
            }
            ids = grown;
            cap = new_cap;
        }
        for (int l = 0; l < h->n_layers; l++) {
            for (int j = 0; j < h->top_k; j++) {
                ids[n++] =
                    (uint32_t)l * (uint32_t)h->n_experts + (uint32_t)tok.experts[l * h->top_k + j];
            }
        }
    }
    moeinf_trace_close(r);
    *out = ids;
    *n_out = n;
    return MOEINF_OK;
fail:
    moeinf_trace_close(r);
    free(ids);
    return st;
}

/* Every request's expert counts by phase, for an offline policy that knows them:
 * (*out)[(r * 2 + phase) * n_ids + id] for the r-th request of the trace. */
static enum moeinf_status read_request_counts(const char *path, uint32_t **out, size_t *n_out,
                                              struct moeinf_error *err) {
    struct moeinf_trace_reader *r = NULL;
    uint32_t *counts = NULL;
    size_t n_req = 0;
    size_t cap = 0;
    enum moeinf_status st = moeinf_trace_open(path, &r, err);
    if (st != MOEINF_OK) return st;
    const struct moeinf_trace_header *h = moeinf_trace_header(r);
    const size_t n_ids = (size_t)h->n_layers * (size_t)h->n_experts;
    uint32_t *row = NULL;
    for (;;) {
        struct moeinf_trace_token tok;
        bool end = false;
        if ((st = moeinf_trace_read(r, &tok, &end, err)) != MOEINF_OK) goto fail;
        if (end) break;
        if (tok.request_begins || !row) {
            if (n_req == cap) {
                size_t new_cap = cap ? cap * 2 : 64;
                uint32_t *grown = realloc(counts, new_cap * 2 * n_ids * sizeof *grown);
                if (!grown) {
                    st = moeinf_fail(err, MOEINF_ERR_NOMEM,
                                     "%s: out of memory for the expert counts of %zu requests",
                                     path, new_cap);
                    goto fail;
                }
                counts = grown;
                cap = new_cap;
            }
            row = counts + n_req++ * 2 * n_ids;
            memset(row, 0, 2 * n_ids * sizeof *row);
        }
        uint32_t *phase_row = row + (tok.phase == MOEINF_PHASE_DECODE ? n_ids : 0);
        for (int l = 0; l < h->n_layers; l++) {
            for (int j = 0; j < h->top_k; j++)
                phase_row[(size_t)l * (size_t)h->n_experts +
                          (size_t)tok.experts[l * h->top_k + j]]++;
        }
    }
    moeinf_trace_close(r);
    *out = counts;
    *n_out = n_req;
    return MOEINF_OK;
fail:
    moeinf_trace_close(r);
    free(counts);
    return st;
}

/* Runs the buffered prefill tokens as one micro-batch. */
static enum moeinf_status flush_prefill(struct replay *rp, bool counted, struct moeinf_error *err) {
    if (rp->n_pending == 0) return MOEINF_OK;
    int m = rp->n_pending;
    rp->n_pending = 0;
    // NOLINTNEXTLINE(clang-analyzer-unix.Malloc): as in replay_step
    return moeinf_replay_iteration(rp, rp->pending, m, MOEINF_PHASE_PREFILL, counted, err);
}

static enum moeinf_status replay_tokens(struct replay *rp, struct moeinf_trace_reader *r,
                                        struct moeinf_error *err) {
    const struct moeinf_policy_geometry *g = &rp->policy->geom;
    const size_t row = (size_t)g->n_layers * (size_t)g->top_k;
    struct moeinf_sim_result *res = rp->res;
    uint64_t request = 0;
    bool in_request = false, counted = false;
    enum moeinf_status st;
    for (;;) {
        struct moeinf_trace_token tok;
        bool end = false;
        st = moeinf_trace_read(r, &tok, &end, err);
        if (st != MOEINF_OK) return st;
        /* A prefill micro-batch ends where the engine's would: when it is full, at a decode
         * token, and at the end of the request. */
        bool flush = end || tok.request_begins || tok.phase == MOEINF_PHASE_DECODE;
        if (flush && (st = flush_prefill(rp, counted, err)) != MOEINF_OK) return st;
        if (end) break;
        if (tok.request_begins) {
            if (in_request) {
                moeinf_policy_request_end(rp->policy);
                request++;
            }
            in_request = true;
            counted = request >= (uint64_t)rp->params->warmup_requests;
            res->requests += counted;
            moeinf_policy_request_begin(rp->policy, request);
        }
        if (tok.phase == MOEINF_PHASE_DECODE) {
            st = moeinf_replay_iteration(rp, tok.experts, 1, MOEINF_PHASE_DECODE, counted, err);
            if (st != MOEINF_OK) return st;
            continue;
        }
        memcpy(rp->pending + (size_t)rp->n_pending * row, tok.experts, row * sizeof *rp->pending);
        if (++rp->n_pending == rp->batch && (st = flush_prefill(rp, counted, err)) != MOEINF_OK) {
            return st;
        }
    }
    if (in_request) moeinf_policy_request_end(rp->policy);
    return MOEINF_OK;
}

/* Prefetched experts still waiting for their first demand at the end were wasted too. */
static void count_unused_prefetches(struct replay *rp) {
    for (int s = 0; s < moeinf_cache_capacity(rp->cache); s++) {
        uint32_t id = moeinf_cache_slot_expert(rp->cache, s);
        if (id != MOEINF_EXPERT_NONE && moeinf_cache_is_prefetched(rp->cache, id) &&
            rp->pf_counted[id]) {
            rp->res->wasted_prefetches++;
        }
    }
}

enum moeinf_status moeinf_sim_replay(const struct moeinf_sim_params *params,
                                     const struct moeinf_policy_ops *ops,
                                     struct moeinf_sim_result *out, struct moeinf_error *err) {
    struct moeinf_trace_reader *r = NULL;
    struct replay rp;
    memset(&rp, 0, sizeof rp);
    struct moeinf_sim_result res;
    memset(&res, 0, sizeof res);
    uint32_t *future = NULL;
    enum moeinf_status st = MOEINF_OK;
    if (!params->trace_path) return moeinf_fail(err, MOEINF_ERR_ARG, "no trace file given");
    if (params->prefetch < 0 || params->warmup_requests < 0 || params->batch < 0 ||
        params->parallel < 0) {
        return moeinf_fail(err, MOEINF_ERR_ARG,
                           "prefetch, warmup, batch and parallel must be >= 0");
    }
    if (params->parallel > MOEINF_SEQ_MAX) {
        return moeinf_fail(err, MOEINF_ERR_ARG, "parallel %d: at most %d sequences",
                           params->parallel, MOEINF_SEQ_MAX);
    }
    if ((params->batch > 1 || params->parallel > 1) && ops->set_future) {
        return moeinf_fail(err, MOEINF_ERR_ARG,
                           "policy '%s' is offline and replays per token: batch and parallel "
                           "need an online policy",
                           ops->name);
    }
    if ((st = moeinf_trace_open(params->trace_path, &r, err)) != MOEINF_OK) return st;
    const struct moeinf_trace_header *h = moeinf_trace_header(r);
    struct moeinf_policy_geometry g = {h->n_layers, h->n_experts, h->top_k, 0, {0}};
    /* the EAMC's model: the trace's model_id, else its model line (experts/eam.h) */
    moeinf_model_id_for_trace(h->model, h->has_model_id, h->model_id, &g.model);
    uint32_t n_ids = (uint32_t)g.n_layers * (uint32_t)g.n_experts;
    if ((st = moeinf_sim_cache_size(params, n_ids, &g.capacity, err)) != MOEINF_OK) goto done;
    if (params->decode_misses) {
        if (params->n_decode_misses != n_ids) {
            st = moeinf_fail(err, MOEINF_ERR_ARG,
                             "%s: per-expert misses for %zu experts asked, the trace has %u",
                             params->trace_path, params->n_decode_misses, n_ids);
            goto done;
        }
        memset(params->decode_misses, 0, n_ids * sizeof *params->decode_misses);
    }
    if (g.capacity < g.top_k) {
        st = moeinf_fail(err, MOEINF_ERR_ARG,
                         "%s: a cache of %d experts is smaller than top_k %d: one layer's "
                         "experts must fit at once",
                         params->trace_path, g.capacity, g.top_k);
        goto done;
    }
    if ((st = moeinf_policy_create_ops(ops, &g, &rp.policy, err)) != MOEINF_OK) goto done;
    if (ops->set_future) {
        size_t n = 0;
        if ((st = read_future(params->trace_path, &future, &n, err)) != MOEINF_OK) goto done;
        st = ops->set_future(rp.policy->state, future, n, err);
        free(future);
        future = NULL;
        if (st != MOEINF_OK) goto done;
    }
    if (ops->set_request_counts) {
        size_t n = 0;
        if ((st = read_request_counts(params->trace_path, &future, &n, err)) != MOEINF_OK) {
            goto done;
        }
        st = ops->set_request_counts(rp.policy->state, future, n, err);
        free(future);
        future = NULL;
        if (st != MOEINF_OK) goto done;
    }
    if (params->eamc_path) {
        bool loaded = false;
        st = moeinf_policy_state_load(rp.policy, params->eamc_path, params->eamc_capacity, &loaded,
                                      err);
        if (st != MOEINF_OK) goto done;
    }
    if ((st = moeinf_cache_init(&g, &rp.cache, err)) != MOEINF_OK) goto done;
    rp.params = params;
    rp.res = &res;
    if ((st = moeinf_step_init(&rp.step, g.n_experts, err)) != MOEINF_OK) goto done;
    rp.batch = params->batch > 1 ? params->batch : 1;
    rp.pf_counted = calloc(n_ids, 1);
    rp.events = malloc((size_t)g.capacity * sizeof *rp.events);
    rp.pending =
        malloc((size_t)rp.batch * (size_t)g.n_layers * (size_t)g.top_k * sizeof *rp.pending);
    rp.sel = malloc((size_t)rp.batch * (size_t)g.top_k * sizeof *rp.sel);
    rp.proposals =
        malloc((size_t)(params->prefetch > 0 ? params->prefetch : 1) * sizeof *rp.proposals);
    if (!rp.pf_counted || !rp.events || !rp.pending || !rp.sel || !rp.proposals) {
        st = moeinf_fail(err, MOEINF_ERR_NOMEM, "simulator: out of memory");
        goto done;
    }
    res.timed = params->expert_bytes > 0 && params->bandwidth_gbps > 0 && params->compute_ms > 0;
    if (res.timed) rp.load_ms = params->expert_bytes / (params->bandwidth_gbps * 1e9) * 1e3;
    st = params->parallel > 1 ? moeinf_replay_parallel(&rp, r, err) : replay_tokens(&rp, r, err);
    if (st != MOEINF_OK) goto done;
    count_unused_prefetches(&rp);
    if (params->eamc_path &&
        (st = moeinf_policy_state_save(rp.policy, params->eamc_path, err)) != MOEINF_OK) {
        goto done;
    }

    snprintf(res.policy, sizeof res.policy, "%s", ops->name);
    res.n_layers = g.n_layers;
    res.n_experts = g.n_experts;
    res.top_k = g.top_k;
    res.cache_experts = g.capacity;
    if (res.timed) {
        res.ms_per_token = res.tokens ? rp.total_ms / (double)res.tokens : 0.0;
        res.decode_ms_per_token =
            res.decode_tokens ? rp.decode_ms / (double)res.decode_tokens : 0.0;
    }
    *out = res;
done:
    free(rp.pf_counted);
    free(rp.events);
    free(rp.pending);
    free(rp.sel);
    free(rp.proposals);
    moeinf_step_free(&rp.step);
    moeinf_cache_free(rp.cache);
    moeinf_policy_free(rp.policy);
    moeinf_trace_close(r);
    return st;
}

enum moeinf_status moeinf_sim_run(const struct moeinf_sim_params *params,
                                  struct moeinf_sim_result *out, struct moeinf_error *err) {
    const char *name = params->policy ? params->policy : MOEINF_POLICY_DEFAULT;
    const struct moeinf_policy_ops *ops = moeinf_sim_policy_find(name);
    if (!ops) return moeinf_fail(err, MOEINF_ERR_ARG, "unknown cache policy '%s'", name);
    return moeinf_sim_replay(params, ops, out, err);
}
