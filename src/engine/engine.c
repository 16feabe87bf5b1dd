/* engine.c - the context half of moeinf.h: making a context (threads, kernels, forward pass,
 * expert cache) and decoding through it in micro-batches. */
#include "engine/engine.h"

#include <stdlib.h>

#include "base/status.h"

enum moeinf_status moeinf_context_init(struct moeinf_model *model,
                                       const struct moeinf_context_params *params,
                                       struct moeinf_context **out, struct moeinf_error *err) {
    enum moeinf_status st = moeinf_context_params_check(params, model, err);
    if (st != MOEINF_OK) return st;
    const struct moeinf_kernels *kern = NULL;
    st = moeinf_kernels_from_env(&kern, err);
    if (st != MOEINF_OK) return st;
    struct moeinf_context *ctx = calloc(1, sizeof *ctx);
    if (!ctx) return moeinf_fail(err, MOEINF_ERR_NOMEM, "out of memory for the context");
    ctx->model = model;
    ctx->params = *params;
    /* a micro-batch never holds more than the window (the documented cut of n_batch) */
    if (ctx->params.n_batch > ctx->params.n_ctx) ctx->params.n_batch = ctx->params.n_ctx;
    ctx->kern = kern;
    int n_threads = params->n_threads > 0 ? params->n_threads : moeinf_cpu_count();
    st = moeinf_pool_init(n_threads, &ctx->pool, err);
    if (st == MOEINF_OK) {
        const size_t n_seq = (size_t)ctx->params.n_seq;
        ctx->seq_past = calloc(n_seq, sizeof *ctx->seq_past);
        ctx->runs = calloc(n_seq, sizeof *ctx->runs);
        ctx->batch_buf =
            calloc(2 * (size_t)ctx->params.n_batch + 3 * n_seq, sizeof *ctx->batch_buf);
        if (!ctx->seq_past || !ctx->runs || !ctx->batch_buf) {
            st = moeinf_fail(err, MOEINF_ERR_NOMEM, "out of memory for the context");
        }
    }
    if (st == MOEINF_OK) {
        struct moeinf_fwd_params fp = {
            .n_ctx = ctx->params.n_ctx,
            .n_seq = ctx->params.n_seq,
            .n_batch = ctx->params.n_batch,
            .kv_f16 = params->kv_type == MOEINF_KV_F16,
            .pool = ctx->pool,
            .kern = ctx->kern,
        };
        st = moeinf_fwd_init(model->llm, &fp, &ctx->fwd, err);
    }
    if (st == MOEINF_OK) st = moeinf_engine_expert_cache_init(ctx, err);
    if (st != MOEINF_OK) {
        moeinf_context_free(ctx);
        return st;
    }
    *out = ctx;
    return MOEINF_OK;
}

void moeinf_context_free(struct moeinf_context *ctx) {
    if (!ctx) return;
    moeinf_context_record_close(ctx, NULL);
    if (ctx->tier) moeinf_tier_request_end(ctx->tier);
    moeinf_tier_free(ctx->tier);
    moeinf_engine_expert_cache_release(ctx);
    moeinf_fwd_free(ctx->fwd);
    moeinf_pool_free(ctx->pool);
    free(ctx->seq_past);
    free(ctx->runs);
    free(ctx->batch_buf);
    free(ctx);
}

void moeinf_context_reset(struct moeinf_context *ctx) {
    for (int q = 0; q < ctx->params.n_seq; q++)
        ctx->seq_past[q] = moeinf_fwd_rewind(ctx->fwd, q, 0);
}

int moeinf_context_n_past(const struct moeinf_context *ctx) {
    return ctx->seq_past[0];
}

int moeinf_context_n_threads(const struct moeinf_context *ctx) {
    return moeinf_pool_size(ctx->pool);
}

const char *moeinf_context_kernels(const struct moeinf_context *ctx) {
    return ctx->kern->name;
}

enum moeinf_status moeinf_decode(struct moeinf_context *ctx, const int32_t *ids, int n,
                                 float *logits, bool all_logits, struct moeinf_error *err) {
    const int n_vocab = ctx->model->llm->hp.n_vocab;
    /* a routing replay set for this call (engine_replay.h) is used by this call only */
    const int32_t *replay = ctx->route_replay;
    bool prefill = replay ? ctx->route_replay_prefill : n > 1;
    ctx->route_replay = NULL;
    if (n <= 0) return moeinf_fail(err, MOEINF_ERR_ARG, "decode needs at least one token");
    int *n_past = &ctx->seq_past[0];
    const int n_ctx = moeinf_fwd_n_ctx_seq(ctx->fwd);
    if (n > n_ctx - *n_past) {
        return moeinf_fail(err, MOEINF_ERR_CONTEXT,
                           "context full: %d tokens in context + %d new exceed -c %d", *n_past, n,
                           n_ctx);
    }
    for (int i = 0; i < n; i++) {
        if (ids[i] < 0 || ids[i] >= n_vocab) {
            return moeinf_fail(err, MOEINF_ERR_ARG, "token id %d is outside the vocabulary [0, %d)",
                               ids[i], n_vocab);
        }
    }
    if (replay && n != ctx->route_replay_n) {
        return moeinf_fail(err, MOEINF_ERR_ARG,
                           "the routing replay holds %d tokens but decode was given %d",
                           ctx->route_replay_n, n);
    }
    const struct moeinf_hparams *hp = &ctx->model->llm->hp;
    const size_t replay_row = (size_t)moeinf_n_moe_layers(hp) * (size_t)hp->n_expert_used;
    int n_batch = ctx->params.n_batch;
    /* A decode that starts at position 0 starts a request (as the routing record counts), and
     * so does the first decode after moeinf_context_request_end. */
    if (ctx->tier && (*n_past == 0 || !moeinf_tier_in_request(ctx->tier))) {
        moeinf_tier_request_begin(ctx->tier);
    }
    for (int i0 = 0; i0 < n; i0 += n_batch) {
        int m = n - i0 < n_batch ? n - i0 : n_batch;
        bool last = i0 + m == n;
        float *out = NULL;
        if (logits && all_logits) out = logits + (size_t)i0 * n_vocab;
        if (logits && !all_logits && last) out = logits;
        if (ctx->tier) {
            moeinf_tier_iteration_begin(ctx->tier,
                                        prefill ? MOEINF_PHASE_PREFILL : MOEINF_PHASE_DECODE, m);
        }
        if (replay) moeinf_fwd_set_route_replay(ctx->fwd, replay + (size_t)i0 * replay_row);
        enum moeinf_status est =
            moeinf_fwd_eval(ctx->fwd, ids + i0, m, *n_past, out, all_logits, err);
        if (replay) moeinf_fwd_set_route_replay(ctx->fwd, NULL);
        if (ctx->tier) moeinf_tier_iteration_end(ctx->tier);
        if (est == MOEINF_OK) est = moeinf_fwd_check_finite(ctx->fwd, out, all_logits ? m : 1, err);
        if (est != MOEINF_OK) {
            /* nothing appended (rather than sample from NaN); a recurrent state that took part
             * of the micro-batch goes back to its last checkpoint */
            *n_past = moeinf_fwd_rewind(ctx->fwd, 0, *n_past);
            return est;
        }
        int pos0 = *n_past;
        *n_past += m; /* the tokens are in the context even if recording them fails */
        if (n > 1) moeinf_fwd_checkpoint(ctx->fwd, 0, *n_past);
        if (ctx->record) {
            enum moeinf_status st = moeinf_record_eval(ctx, m, pos0, prefill, err);
            if (st != MOEINF_OK) return st;
        }
    }
    return MOEINF_OK;
}
