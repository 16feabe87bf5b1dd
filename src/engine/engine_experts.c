/*
 * engine_experts.c - the expert-cache half of moeinf.h: sizing a context's cache (bytes, a
 * percentage of all experts, or what memory allows), making its tier, and its counters.
 */
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/memlimit.h"
#include "base/status.h"
#include "engine/engine.h"

enum moeinf_status moeinf_expert_cache_parse(const char *text, struct moeinf_expert_cache_size *out,
                                             struct moeinf_error *err) {
    memset(out, 0, sizeof *out);
    if (!text || !*text) return moeinf_fail(err, MOEINF_ERR_ARG, "empty expert cache size");
    if (!strcmp(text, "auto")) {
        out->kind = MOEINF_EXPERT_CACHE_AUTO;
        return MOEINF_OK;
    }
    size_t len = strlen(text);
    char *end;
    errno = 0;
    if (text[len - 1] == '%') {
        double p = strtod(text, &end);
        if (end != text + len - 1 || end == text || errno || !(p > 0.0) || p > 100.0) {
            return moeinf_fail(err, MOEINF_ERR_ARG,
                               "invalid expert cache size '%s': a percentage must be in (0, 100]",
                               text);
        }
        out->kind = MOEINF_EXPERT_CACHE_PERCENT;
        out->percent = p;
        return MOEINF_OK;
    }
    if (!isdigit((unsigned char)text[0])) goto bad;
    unsigned long long v = strtoull(text, &end, 10);
    if (errno || end == text) goto bad;
    unsigned shift = 0;
    if (*end) {
        const char *units = "KMGT";
        const char *u = strchr(units, toupper((unsigned char)*end));
        if (!u || end[1] != '\0') goto bad;
        shift = 10u * (unsigned)(u - units + 1);
    }
    if (v == 0 || v > (UINT64_MAX >> shift)) goto bad;
    out->kind = MOEINF_EXPERT_CACHE_BYTES;
    out->bytes = (uint64_t)v << shift;
    return MOEINF_OK;
bad:
    return moeinf_fail(err, MOEINF_ERR_ARG,
                       "invalid expert cache size '%s': bytes with an optional K/M/G/T suffix "
                       "(powers of 1024), P%%, or auto",
                       text);
}

/* Slots for the size asked, before the top_k check. */
static enum moeinf_status slots_for(struct moeinf_context *ctx, uint64_t slot_bytes, int total,
                                    int64_t *slots, struct moeinf_error *err) {
    const struct moeinf_expert_cache_size *size = &ctx->params.expert_cache;
    switch (size->kind) {
    case MOEINF_EXPERT_CACHE_BYTES:
        *slots = (int64_t)(size->bytes / slot_bytes);
        return MOEINF_OK;
    case MOEINF_EXPERT_CACHE_PERCENT:
        *slots = (int64_t)llround(size->percent / 100.0 * (double)total);
        return MOEINF_OK;
    case MOEINF_EXPERT_CACHE_AUTO: {
        uint64_t limit;
        bool cgroup;
        char source[300];
        enum moeinf_status st = moeinf_memory_limit(&limit, &cgroup, source, sizeof source, err);
        if (st != MOEINF_OK) return st;
        /* A cgroup limit counts the resident weights already read; MemAvailable already
         * lacks them. The KV cache and scratch are allocated but not yet touched. */
        uint64_t used = moeinf_fwd_bytes(ctx->fwd) + MOEINF_EXPERT_CACHE_MARGIN;
        if (cgroup) used += ctx->model->resident->bytes;
        *slots = limit > used ? (int64_t)((limit - used) / slot_bytes) : 0;
        if (*slots < 1) {
            return moeinf_fail(
                err, MOEINF_ERR_NOMEM,
                "--expert-cache auto: %llu MiB may be used (%s) but resident "
                "weights, KV cache, scratch and a %llu MiB margin take %llu MiB",
                (unsigned long long)(limit >> 20), source,
                (unsigned long long)(MOEINF_EXPERT_CACHE_MARGIN >> 20),
                (unsigned long long)((used + (cgroup ? 0 : ctx->model->resident->bytes)) >> 20));
        }
        return MOEINF_OK;
    }
    case MOEINF_EXPERT_CACHE_NONE:
        break;
    }
    *slots = 0;
    return MOEINF_OK;
}

enum moeinf_status moeinf_engine_expert_cache_init(struct moeinf_context *ctx,
                                                   struct moeinf_error *err) {
    const struct moeinf_model *model = ctx->model;
    const struct moeinf_hparams *hp = &model->llm->hp;
    bool want = ctx->params.expert_cache.kind != MOEINF_EXPERT_CACHE_NONE;
    if (!want && !model->resident) return MOEINF_OK;
    if (want && hp->n_expert == 0) {
        return moeinf_fail(err, MOEINF_ERR_ARG,
                           "%s: a dense model has no routed experts: drop --expert-cache",
                           model->gguf->path);
    }
    if (!model->resident) {
        return moeinf_fail(err, MOEINF_ERR_ARG,
                           "an expert cache needs the model loaded with offload_experts");
    }
    if (!want) {
        return moeinf_fail(err, MOEINF_ERR_ARG,
                           "the model's experts are offloaded: the context needs an expert "
                           "cache size");
    }
    const struct moeinf_store_layer *layers = model->resident->experts;
    uint64_t slot_bytes = moeinf_store_slot_bytes_for(layers, hp->n_layer, hp->n_expert);
    int total = hp->n_layer * hp->n_expert;
    int64_t slots;
    enum moeinf_status st = slots_for(ctx, slot_bytes, total, &slots, err);
    if (st != MOEINF_OK) return st;
    if (slots < hp->n_expert_used) {
        return moeinf_fail(err, MOEINF_ERR_ARG,
                           "an expert cache of %lld slots is too small: one token uses %d "
                           "experts per layer, so at least %d slots (%.1f MiB) are needed",
                           (long long)slots, hp->n_expert_used, hp->n_expert_used,
                           (double)slot_bytes * hp->n_expert_used / (1024.0 * 1024.0));
    }
    if (slots > total) slots = total;
    struct moeinf_tier_config cfg = {
        .policy = ctx->params.expert_policy,
        .page_cache = ctx->params.expert_io == MOEINF_EXPERT_IO_CACHED,
        .io_threads = ctx->params.expert_io_threads,
        .prefetch = ctx->params.expert_prefetch,
        .lookahead = ctx->params.expert_lookahead,
    };
    st = moeinf_tier_init(model->gguf->path, layers, hp->n_layer, hp->n_expert, hp->n_expert_used,
                          (int)slots, &cfg, &ctx->tier, err);
    if (st != MOEINF_OK) return st;
    moeinf_fwd_set_tier(ctx->fwd, ctx->tier);
    moeinf_fwd_set_lookahead(ctx->fwd, -1, cfg.io_threads > 0 ? cfg.lookahead : 0);
    return MOEINF_OK;
}

enum moeinf_status moeinf_context_expert_cache(const struct moeinf_context *ctx,
                                               struct moeinf_expert_cache_info *out,
                                               struct moeinf_error *err) {
    if (!ctx->tier) return moeinf_fail(err, MOEINF_ERR_ARG, "the context has no expert cache");
    const struct moeinf_tier *t = ctx->tier;
    memset(out, 0, sizeof *out);
    out->slots = moeinf_store_n_slots(t->store);
    out->n_experts_total = t->n_layers * t->n_experts;
    out->slot_bytes = moeinf_store_slot_bytes(t->store);
    out->resident_bytes = ctx->model->resident->bytes;
    out->context_bytes = moeinf_fwd_bytes(ctx->fwd);
    out->policy = t->policy->ops->name;
    out->direct_io = moeinf_store_direct(t->store);
    out->io_note = moeinf_store_note(t->store);
    return MOEINF_OK;
}

static void add(struct moeinf_expert_stats *o, const struct moeinf_tier_counters *c) {
    o->accesses += c->accesses;
    o->hits += c->hits;
    o->misses += c->misses;
    o->prefetches += c->prefetches;
    o->prefetch_hits += c->prefetch_hits;
    o->late_prefetches += c->late_prefetches;
    o->wasted_prefetches += c->wasted_prefetches;
    o->dropped_prefetches += c->dropped_prefetches;
    o->bytes_read += c->io.bytes;
    o->expert_bytes += c->io.part_bytes;
    o->read_seconds += (double)c->io.read_ns * 1e-9;
    o->stall_seconds += (double)c->stall_ns * 1e-9;
}

enum moeinf_status moeinf_context_expert_stats(const struct moeinf_context *ctx, int layer,
                                               struct moeinf_expert_stats *out,
                                               struct moeinf_error *err) {
    if (!ctx->tier) return moeinf_fail(err, MOEINF_ERR_ARG, "the context has no expert cache");
    const struct moeinf_tier *t = ctx->tier;
    if (layer < -1 || layer >= t->n_layers) {
        return moeinf_fail(err, MOEINF_ERR_ARG, "layer %d is out of range [0, %d)", layer,
                           t->n_layers);
    }
    memset(out, 0, sizeof *out);
    for (int il = 0; il < t->n_layers; il++) {
        if (layer == -1 || layer == il) add(out, &t->layer[il]);
    }
    out->tokens = t->tokens;
    out->decode_tokens = t->decode_tokens;
    if (layer == -1) {
        const struct moeinf_tier_prediction *pp = &t->prediction[MOEINF_SOURCE_POLICY];
        const struct moeinf_tier_prediction *pl = &t->prediction[MOEINF_SOURCE_LOOKAHEAD];
        out->policy_predicted = pp->predicted;
        out->policy_correct = pp->correct;
        out->policy_actual = pp->actual;
        out->lookahead_predicted = pl->predicted;
        out->lookahead_correct = pl->correct;
        out->lookahead_actual = pl->actual;
    }
    return MOEINF_OK;
}

void moeinf_context_expert_stats_reset(struct moeinf_context *ctx) {
    struct moeinf_tier *t = ctx->tier;
    if (!t) return;
    moeinf_tier_quiesce(t); /* reads in flight would count after the reset */
    memset(t->layer, 0, (size_t)t->n_layers * sizeof *t->layer);
    memset(t->prediction, 0, sizeof t->prediction);
    t->tokens = t->decode_tokens = 0;
}
