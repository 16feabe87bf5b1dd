/*
 * engine_params.c - the defaults of the model and context parameters, and the rules of the
 * context parameters: each checked here once, by moeinf_context_params_check, which the CLI
 * calls where it parses its options and moeinf_context_init calls again with the model. Below
 * this, the modules trust the values: nothing is clamped or zeroed further down. A message
 * starts with the parameter's name ("expert_prefetch: ..."), so that a front end can say which
 * of its options it came from.
 */
#include "base/status.h"
#include "engine/engine.h"
#include "experts/policy.h"

/* llama.cpp's largest block_count is far below this; the GGUF reader refuses more layers. */
#define MAX_LAYERS  4096
#define MAX_THREADS 1024 /* compute/pool.c */
#define MAX_CTX     (1 << 24)

struct moeinf_model_params moeinf_model_params_default(void) {
    struct moeinf_model_params p = {0};
    return p;
}

struct moeinf_context_params moeinf_context_params_default(void) {
    struct moeinf_context_params p = {
        .n_ctx = 4096,
        .n_batch = 512,
        .n_seq = 1,
        .n_threads = 0,
        .kv_type = MOEINF_KV_F16,
        .expert_io_threads = MOEINF_EXPERT_IO_THREADS_DEFAULT,
        .expert_prefetch = MOEINF_EXPERT_PREFETCH_DEFAULT,
        .expert_lookahead = MOEINF_EXPERT_LOOKAHEAD_DEFAULT,
    };
    return p;
}

static enum moeinf_status in_range(const char *name, long v, long lo, long hi,
                                   struct moeinf_error *err) {
    if (v >= lo && v <= hi) return MOEINF_OK;
    return moeinf_fail(err, MOEINF_ERR_ARG, "%s: %ld is not in [%ld, %ld]", name, v, lo, hi);
}

static enum moeinf_status check_cache_size(const struct moeinf_expert_cache_size *s,
                                           struct moeinf_error *err) {
    switch (s->kind) {
    case MOEINF_EXPERT_CACHE_NONE:
    case MOEINF_EXPERT_CACHE_AUTO:
        return MOEINF_OK;
    case MOEINF_EXPERT_CACHE_BYTES:
        if (s->bytes > 0) return MOEINF_OK;
        return moeinf_fail(err, MOEINF_ERR_ARG, "expert_cache: a size of 0 bytes");
    case MOEINF_EXPERT_CACHE_PERCENT:
        if (s->percent > 0.0 && s->percent <= 100.0) return MOEINF_OK;
        return moeinf_fail(err, MOEINF_ERR_ARG, "expert_cache: %g%% is not in (0, 100]",
                           s->percent);
    }
    return moeinf_fail(err, MOEINF_ERR_ARG, "expert_cache: unknown kind %d", (int)s->kind);
}

/* The expert cache's reading ahead: prefetch and lookahead read on I/O threads, and apply only
 * with an expert cache. */
static enum moeinf_status check_reading_ahead(const struct moeinf_context_params *p, int n_layer,
                                              struct moeinf_error *err) {
    enum moeinf_status st;
    const bool cache = p->expert_cache.kind != MOEINF_EXPERT_CACHE_NONE;
    if ((st = in_range("expert_io_threads", p->expert_io_threads, 0, MOEINF_EXPERT_IO_THREADS_MAX,
                       err)) ||
        (st =
             in_range("expert_prefetch", p->expert_prefetch, 0, MOEINF_EXPERT_PREFETCH_MAX, err)) ||
        (st = in_range("expert_lookahead", p->expert_lookahead, 0, n_layer - 1, err))) {
        return st;
    }
    const char *ahead = p->expert_prefetch > 0    ? "expert_prefetch"
                        : p->expert_lookahead > 0 ? "expert_lookahead"
                                                  : NULL;
    if (ahead && !cache) {
        return moeinf_fail(err, MOEINF_ERR_ARG, "%s: reading ahead needs an expert cache", ahead);
    }
    if (ahead && p->expert_io_threads == 0) {
        return moeinf_fail(err, MOEINF_ERR_ARG,
                           "%s: reading ahead runs on I/O threads: it needs expert_io_threads of "
                           "at least 1",
                           ahead);
    }
    return MOEINF_OK;
}

static enum moeinf_status check_policy(const struct moeinf_context_params *p,
                                       struct moeinf_error *err) {
    if (!p->expert_policy) return MOEINF_OK;
    if (p->expert_cache.kind == MOEINF_EXPERT_CACHE_NONE) {
        return moeinf_fail(err, MOEINF_ERR_ARG, "expert_policy: a policy needs an expert cache");
    }
    if (!moeinf_policy_find(p->expert_policy)) {
        return moeinf_fail(err, MOEINF_ERR_ARG,
                           "expert_policy: unknown cache policy '%s' (the engine runs the online "
                           "policies; belady is offline, simulator only, as is freq-oracle)",
                           p->expert_policy);
    }
    return MOEINF_OK;
}

/* What the model allows: an expert cache needs routed experts offloaded, and offloaded
 * experts need a cache. */
static enum moeinf_status check_for_model(const struct moeinf_context_params *p,
                                          const struct moeinf_model *model,
                                          struct moeinf_error *err) {
    if (!model->llm) {
        return moeinf_fail(err, MOEINF_ERR_ARG, "the model was loaded with vocab_only: no weights");
    }
    const bool cache = p->expert_cache.kind != MOEINF_EXPERT_CACHE_NONE;
    if (cache && model->llm->hp.n_expert == 0) {
        return moeinf_fail(err, MOEINF_ERR_ARG,
                           "expert_cache: %s is a dense model, it has no routed experts",
                           model->gguf->path);
    }
    if (cache && !model->resident) {
        return moeinf_fail(err, MOEINF_ERR_ARG,
                           "expert_cache: an expert cache needs the model loaded with "
                           "offload_experts");
    }
    if (!cache && model->resident) {
        return moeinf_fail(err, MOEINF_ERR_ARG,
                           "expert_cache: the model's experts are offloaded: the context needs "
                           "an expert cache size");
    }
    return MOEINF_OK;
}

enum moeinf_status moeinf_context_params_check(const struct moeinf_context_params *p,
                                               const struct moeinf_model *model,
                                               struct moeinf_error *err) {
    enum moeinf_status st;
    if ((st = in_range("n_ctx", p->n_ctx, 1, MAX_CTX, err)) ||
        (st = in_range("n_batch", p->n_batch, 1, MAX_CTX, err)) ||
        (st = in_range("n_seq", p->n_seq, 1, MOEINF_SEQ_MAX, err)) ||
        (st = in_range("n_threads", p->n_threads, 0, MAX_THREADS, err))) {
        return st;
    }
    if (p->n_ctx < p->n_seq) {
        return moeinf_fail(err, MOEINF_ERR_ARG,
                           "n_seq: %d sequences cannot share a context of %d tokens (each needs "
                           "at least one)",
                           p->n_seq, p->n_ctx);
    }
    if (p->kv_type != MOEINF_KV_F16 && p->kv_type != MOEINF_KV_F32) {
        return moeinf_fail(err, MOEINF_ERR_ARG, "kv_type: unknown type %d", (int)p->kv_type);
    }
    if (p->expert_io != MOEINF_EXPERT_IO_DIRECT && p->expert_io != MOEINF_EXPERT_IO_CACHED &&
        p->expert_io != MOEINF_EXPERT_IO_NOCACHE) {
        return moeinf_fail(err, MOEINF_ERR_ARG, "expert_io: unknown mode %d", (int)p->expert_io);
    }
    const int n_layer = model && model->llm ? model->llm->hp.n_layer : MAX_LAYERS;
    if ((st = check_cache_size(&p->expert_cache, err)) ||
        (st = check_reading_ahead(p, n_layer, err)) || (st = check_policy(p, err))) {
        return st;
    }
    return model ? check_for_model(p, model, err) : MOEINF_OK;
}
