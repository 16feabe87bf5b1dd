/*
 * engine_experts.c - the expert-cache half of moeinf.h: sizing a context's cache (bytes, a
 * percentage of all experts, or what memory allows) from the budget its model's contexts share,
 * making its tier, and its counters.
 */
#include <ctype.h>
#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "base/memlimit.h"
#include "base/status.h"
#include "engine/engine.h"

/* A decimal number at *p: digits, optionally '.' and digits, read here rather than by strtod,
 * which would also take signs, exponents, hex and "inf", and whose decimal point is the
 * locale's. *whole gets the digits before any '.', *frac the fraction's value (0 without one),
 * *has_fraction whether there was a '.'; *p moves past the number. False without a leading
 * digit, with a '.' and no digit after it, or with a whole part above UINT64_MAX. */
static bool read_decimal(const char **p, uint64_t *whole, double *frac, bool *has_fraction) {
    const char *s = *p;
    uint64_t v = 0;
    bool overflow = false;
    for (; isdigit((unsigned char)*s); s++) {
        const uint64_t digit = (uint64_t)(*s - '0');
        overflow = overflow || v > (UINT64_MAX - digit) / 10;
        v = v * 10 + digit;
    }
    if (s == *p || overflow) return false;
    *has_fraction = *s == '.';
    uint64_t f = 0;     /* the fraction's first 18 digits ... */
    double f_scale = 1; /* ... over 10 to the number of them */
    if (*has_fraction) {
        const char *digits = ++s;
        for (; isdigit((unsigned char)*s); s++) {
            if (s - digits >= 18) continue; /* below 1e-18 of the value */
            f = f * 10 + (uint64_t)(*s - '0');
            f_scale *= 10;
        }
        if (s == digits) return false;
    }
    *whole = v;
    *frac = (double)f / f_scale;
    *p = s;
    return true;
}

/* Bytes: a decimal number with a K/M/G/T suffix (powers of 1024), or whole digits alone; a
 * memory limit is often given with a fraction ("1.5G"), but a fraction of a byte has no
 * meaning, so a fraction needs the suffix. Rounded to the nearest byte; false for 0 or too
 * large. */
static bool parse_bytes(const char *text, uint64_t *bytes) {
    const char *p = text;
    uint64_t v;
    double frac;
    bool fraction;
    if (!read_decimal(&p, &v, &frac, &fraction)) return false;
    unsigned shift = 0;
    if (*p) {
        const char *units = "KMGT";
        const char *u = strchr(units, toupper((unsigned char)*p));
        if (!u || p[1] != '\0') return false;
        shift = 10u * (unsigned)(u - units + 1);
    } else if (fraction) {
        return false;
    }
    if (fraction) {
        const double x = ldexp((double)v + frac, (int)shift);
        if (!(x >= 0.5) || !(x < 0x1p63)) return false;
        *bytes = (uint64_t)llround(x);
        return true;
    }
    if (v == 0 || v > (UINT64_MAX >> shift)) return false;
    *bytes = v << shift;
    return true;
}

enum moeinf_status moeinf_expert_cache_parse(const char *text, struct moeinf_expert_cache_size *out,
                                             struct moeinf_error *err) {
    memset(out, 0, sizeof *out);
    if (!text) return moeinf_fail(err, MOEINF_ERR_ARG, "empty expert cache size");
    /* Spaces around the size (a quoting slip: '50% ', ' 50%') are dropped. */
    const char *const given = text;
    char trimmed[64];
    while (isspace((unsigned char)*text))
        text++;
    size_t n_text = strlen(text);
    while (n_text > 0 && isspace((unsigned char)text[n_text - 1]))
        n_text--;
    if (n_text >= sizeof trimmed) {
        return moeinf_fail(err, MOEINF_ERR_ARG, "invalid expert cache size '%.64s...'", given);
    }
    memcpy(trimmed, text, n_text);
    trimmed[n_text] = '\0';
    text = trimmed;
    if (!*text) return moeinf_fail(err, MOEINF_ERR_ARG, "empty expert cache size");
    if (!strcmp(text, "auto")) {
        out->kind = MOEINF_EXPERT_CACHE_AUTO;
        return MOEINF_OK;
    }
    const size_t len = strlen(text);
    if (text[len - 1] == '%') {
        const char *p = text;
        uint64_t whole;
        double frac;
        bool fraction;
        const bool number = read_decimal(&p, &whole, &frac, &fraction) && p == text + len - 1;
        const double percent = number ? (double)whole + frac : 0;
        if (!(percent > 0.0) || percent > 100.0) {
            return moeinf_fail(err, MOEINF_ERR_ARG,
                               "invalid expert cache size '%s': a percentage must be in (0, 100]",
                               given);
        }
        out->kind = MOEINF_EXPERT_CACHE_PERCENT;
        out->percent = percent;
        return MOEINF_OK;
    }
    if (!parse_bytes(text, &out->bytes)) {
        return moeinf_fail(err, MOEINF_ERR_ARG,
                           "invalid expert cache size '%s': bytes with an optional K/M/G/T "
                           "suffix (powers of 1024; with a suffix a fraction too, 1.5G), P%%, "
                           "or auto",
                           given);
    }
    out->kind = MOEINF_EXPERT_CACHE_BYTES;
    return MOEINF_OK;
}

/* `auto`: what this process may use less what it holds, given that the model's contexts hold
 * `held` (their slots, KV caches and scratch): the resident weights (under a hard limit;
 * MemAvailable already lacks them), this context's KV cache and scratch (allocated, not yet
 * touched) and the margin. */
static enum moeinf_status auto_budget(const struct moeinf_context *ctx, uint64_t limit, bool cgroup,
                                      const char *source, uint64_t held, uint64_t slot_bytes,
                                      uint64_t *budget, struct moeinf_error *err) {
    const uint64_t resident = ctx->model->resident->bytes;
    uint64_t used = moeinf_fwd_bytes(ctx->fwd) + MOEINF_EXPERT_CACHE_MARGIN + held;
    if (cgroup) used += resident;
    if (limit < used + slot_bytes) {
        return moeinf_fail(err, MOEINF_ERR_NOMEM,
                           "expert_cache auto: %llu MiB may be used (%s) but resident weights, "
                           "KV cache, scratch, the model's other contexts (%llu MiB) and a "
                           "%llu MiB margin take %llu MiB",
                           (unsigned long long)(limit >> 20), source,
                           (unsigned long long)(held >> 20),
                           (unsigned long long)(MOEINF_EXPERT_CACHE_MARGIN >> 20),
                           (unsigned long long)((used + (cgroup ? 0 : resident)) >> 20));
    }
    *budget = limit - used;
    return MOEINF_OK;
}

/*
 * The fast tier's byte budget for the size asked, taken from the model's budget: bytes as
 * given; a percentage of every expert, rounded to whole slots; auto, what is left (above).
 * Each is cut to every expert's slots. The context then holds its budget and its KV cache and
 * scratch (ctx->expert_held), added to model->expert_held by compare-and-swap, so that
 * contexts made at once on several threads never take the same bytes.
 */
static enum moeinf_status budget_for(struct moeinf_context *ctx, uint64_t slot_bytes, int total,
                                     uint64_t *budget, struct moeinf_error *err) {
    const struct moeinf_expert_cache_size *size = &ctx->params.expert_cache;
    uint64_t limit = 0;
    bool cgroup = false;
    char source[300] = "";
    if (size->kind == MOEINF_EXPERT_CACHE_AUTO) {
        enum moeinf_status st = moeinf_memory_limit(&limit, &cgroup, source, sizeof source, err);
        if (st != MOEINF_OK) return st;
    }
    const uint64_t own = moeinf_fwd_bytes(ctx->fwd);
    const uint64_t every = (uint64_t)total * slot_bytes;
    _Atomic uint64_t *held = &ctx->model->expert_held;
    uint64_t before = atomic_load_explicit(held, memory_order_relaxed);
    uint64_t want = 0;
    do {
        switch (size->kind) {
        case MOEINF_EXPERT_CACHE_BYTES:
            want = size->bytes;
            break;
        case MOEINF_EXPERT_CACHE_PERCENT:
            want = (uint64_t)llround(size->percent / 100.0 * (double)total) * slot_bytes;
            break;
        case MOEINF_EXPERT_CACHE_AUTO: {
            enum moeinf_status st =
                auto_budget(ctx, limit, cgroup, source, before, slot_bytes, &want, err);
            if (st != MOEINF_OK) return st;
            break;
        }
        case MOEINF_EXPERT_CACHE_NONE:
            want = 0;
            break;
        }
        if (want > every) want = every;
    } while (!atomic_compare_exchange_weak_explicit(held, &before, before + want + own,
                                                    memory_order_relaxed, memory_order_relaxed));
    ctx->expert_held = want + own;
    *budget = want;
    return MOEINF_OK;
}

void moeinf_engine_expert_cache_release(struct moeinf_context *ctx) {
    atomic_fetch_sub_explicit(&ctx->model->expert_held, ctx->expert_held, memory_order_relaxed);
    ctx->expert_held = 0;
}

/* Reading ahead for the tier: an explicit count as it is; auto (MOEINF_EXPERT_AUTO) the
 * controller's (offload/prefetch_auto.h), with top_k policy proposals per step, and nothing
 * without I/O threads. */
static void reading_ahead(const struct moeinf_context_params *p, int top_k,
                          struct moeinf_tier_params *tp) {
    const bool io = p->expert_io_threads > 0;
    tp->prefetch_auto = io && p->expert_prefetch == MOEINF_EXPERT_AUTO;
    tp->lookahead_auto = io && p->expert_lookahead == MOEINF_EXPERT_AUTO;
    tp->prefetch = tp->prefetch_auto ? top_k
                   : p->expert_prefetch == MOEINF_EXPERT_AUTO ? 0
                                                              : p->expert_prefetch;
}

/* The parameters were checked (moeinf_context_params_check): a cache is asked for exactly
 * when the model's experts are offloaded. */
enum moeinf_status moeinf_engine_expert_cache_init(struct moeinf_context *ctx,
                                                   struct moeinf_error *err) {
    const struct moeinf_model *model = ctx->model;
    const struct moeinf_hparams *hp = &model->llm->hp;
    if (!model->resident) return MOEINF_OK;
    /* the cache's layers are the MoE layers (model.h, moeinf_n_moe_layers) */
    const int n_moe = moeinf_n_moe_layers(hp);
    const struct moeinf_store_layer *layers = model->resident->experts + hp->n_layer_dense_lead;
    uint64_t slot_bytes = moeinf_store_slot_bytes_for(layers, n_moe, hp->n_expert);
    struct moeinf_tier_params tp = {
        .path = model->gguf->path,
        .layers = layers,
        .n_layers = n_moe,
        .n_experts = hp->n_expert,
        .top_k = hp->n_expert_used,
        .model = model->id,
        .policy = ctx->params.expert_policy,
        .io = ctx->params.expert_io,
        .io_threads = ctx->params.expert_io_threads,
        .prefetch = ctx->params.expert_prefetch,
    };
    reading_ahead(&ctx->params, hp->n_expert_used, &tp);
    enum moeinf_status st =
        budget_for(ctx, slot_bytes, n_moe * hp->n_expert, &tp.budget_bytes, err);
    if (st != MOEINF_OK) return st;
    st = moeinf_tier_init(&tp, &ctx->tier, err);
    if (st != MOEINF_OK) return st; /* context free gives the budget back */
    /* the tier takes whole slots: the rest of the budget goes back */
    struct moeinf_tier_info info;
    moeinf_tier_info(ctx->tier, &info);
    const uint64_t slots = (uint64_t)info.slots * info.slot_bytes;
    if (slots < tp.budget_bytes) {
        atomic_fetch_sub_explicit(&ctx->model->expert_held, tp.budget_bytes - slots,
                                  memory_order_relaxed);
        ctx->expert_held -= tp.budget_bytes - slots;
    }
    moeinf_fwd_set_tier(ctx->fwd, ctx->tier);
    moeinf_fwd_set_lookahead(ctx->fwd, -1,
                             ctx->params.expert_lookahead == MOEINF_EXPERT_AUTO
                                 ? (tp.lookahead_auto ? 1 : 0)
                                 : ctx->params.expert_lookahead);
    return MOEINF_OK;
}

enum moeinf_status moeinf_context_expert_cache(const struct moeinf_context *ctx,
                                               struct moeinf_expert_cache_info *out,
                                               struct moeinf_error *err) {
    if (!ctx->tier) return moeinf_fail(err, MOEINF_ERR_ARG, "the context has no expert cache");
    const struct moeinf_hparams *hp = &ctx->model->llm->hp;
    struct moeinf_tier_info info;
    moeinf_tier_info(ctx->tier, &info);
    memset(out, 0, sizeof *out);
    out->slots = info.slots;
    out->n_experts_total = moeinf_n_moe_layers(hp) * hp->n_expert;
    out->slot_bytes = info.slot_bytes;
    out->resident_bytes = ctx->model->resident->bytes;
    out->context_bytes = moeinf_fwd_bytes(ctx->fwd);
    out->policy = info.policy;
    out->direct_io = info.direct_io;
    out->io_note = info.io_note;
    return MOEINF_OK;
}

enum moeinf_status moeinf_context_expert_stats(const struct moeinf_context *ctx, int layer,
                                               struct moeinf_expert_stats *out,
                                               struct moeinf_error *err) {
    if (!ctx->tier) return moeinf_fail(err, MOEINF_ERR_ARG, "the context has no expert cache");
    const int n_layer = moeinf_n_moe_layers(&ctx->model->llm->hp); /* the cache's layers */
    if (layer < -1 || layer >= n_layer) {
        return moeinf_fail(err, MOEINF_ERR_ARG, "MoE layer %d is out of range [0, %d)", layer,
                           n_layer);
    }
    struct moeinf_tier_report r;
    moeinf_tier_report(ctx->tier, layer, &r);
    const struct moeinf_tier_counters *c = &r.counters;
    memset(out, 0, sizeof *out);
    out->accesses = c->accesses;
    out->hits = c->hits;
    out->misses = c->misses;
    out->prefetches = c->prefetches;
    out->prefetch_hits = c->prefetch_hits;
    out->late_prefetches = c->late_prefetches;
    out->wasted_prefetches = c->wasted_prefetches;
    out->dropped_prefetches = c->dropped_prefetches;
    out->reads = c->io.loads;
    out->reads_in_flight = c->reads_in_flight;
    out->bytes_read = c->io.bytes;
    out->expert_bytes = c->io.part_bytes;
    out->read_seconds = (double)c->io.read_ns * 1e-9;
    out->stall_seconds = (double)c->stall_ns * 1e-9;
    out->tokens = r.tokens;
    out->decode_tokens = r.decode_tokens;
    if (layer == -1) {
        const struct moeinf_tier_prediction *pp = &r.prediction[MOEINF_SOURCE_POLICY];
        const struct moeinf_tier_prediction *pl = &r.prediction[MOEINF_SOURCE_LOOKAHEAD];
        out->policy_predicted = pp->predicted;
        out->policy_correct = pp->correct;
        out->policy_actual = pp->actual;
        out->lookahead_predicted = pl->predicted;
        out->lookahead_correct = pl->correct;
        out->lookahead_actual = pl->actual;
    }
    out->policy_reads = c->reads[MOEINF_SOURCE_POLICY];
    out->policy_reads_used = c->reads_used[MOEINF_SOURCE_POLICY];
    out->lookahead_reads = c->reads[MOEINF_SOURCE_LOOKAHEAD];
    out->lookahead_reads_used = c->reads_used[MOEINF_SOURCE_LOOKAHEAD];
    out->policy_layers_on = r.layers_on[MOEINF_SOURCE_POLICY];
    out->lookahead_layers_on = r.layers_on[MOEINF_SOURCE_LOOKAHEAD];
    out->policy_layers_read = r.layers_read[MOEINF_SOURCE_POLICY];
    out->lookahead_layers_read = r.layers_read[MOEINF_SOURCE_LOOKAHEAD];
    out->auto_checks = r.auto_checks;
    out->auto_checks_kept = r.auto_checks_kept;
    out->spare_seconds = (double)c->spare_ns * 1e-9;
    return MOEINF_OK;
}

void moeinf_context_expert_stats_reset(struct moeinf_context *ctx) {
    if (ctx->tier) moeinf_tier_report_reset(ctx->tier);
}
