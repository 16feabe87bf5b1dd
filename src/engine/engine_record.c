/* engine_record.c - recording the engine's own expert routing as a moe-trace v1 file, so
 * that `moeinf sim` can replay what a real run did. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/status.h"
#include "engine/engine.h"
#include "trace/trace.h"

/* Frees the row and tag buffers of an open (or half-opened) record. */
static void record_buffers_free(struct moeinf_context *ctx) {
    free(ctx->record_row);
    free(ctx->record_tag);
    ctx->record_row = NULL;
    ctx->record_tag = NULL;
}

enum moeinf_status moeinf_context_record_open(struct moeinf_context *ctx, const char *path,
                                              const char *tag, struct moeinf_error *err) {
    const struct moeinf_hparams *hp = &ctx->model->llm->hp;
    if (moeinf_n_moe_layers(hp) <= 0) { /* the loader requires one MoE layer in a MoE model */
        return moeinf_fail(err, MOEINF_ERR_ARG, "%s: a dense model has no routing to record", path);
    }
    if (ctx->record)
        return moeinf_fail(err, MOEINF_ERR_ARG, "%s: a routing record is already open", path);
    if (tag && (!*tag || strpbrk(tag, " \t\r\n"))) {
        return moeinf_fail(err, MOEINF_ERR_ARG, "record tag '%s' must be one word", tag);
    }
    char desc[256];
    moeinf_model_desc(ctx->model, desc, sizeof desc);
    struct moeinf_trace_meta meta = {
        .n_layers = moeinf_n_moe_layers(hp), /* dense layers are left out, as in moe-trace */
        .n_experts = hp->n_expert,
        .top_k = hp->n_expert_used,
        .model = desc,
    };
    ctx->record_row =
        malloc((size_t)moeinf_n_moe_layers(hp) * (size_t)hp->n_expert_used * sizeof(int32_t));
    ctx->record_tag = tag ? strdup(tag) : NULL;
    if (!ctx->record_row || (tag && !ctx->record_tag)) {
        record_buffers_free(ctx);
        return moeinf_fail(err, MOEINF_ERR_NOMEM, "%s: out of memory", path);
    }
    enum moeinf_status st = moeinf_trace_writer_open(path, &meta, &ctx->record, err);
    if (st == MOEINF_OK) {
        /* the model's identity, which `moeinf sim --eamc` gives the EAMC it builds from this
         * trace, so that this model reads that file as its own (experts/eam.h) */
        char id[24];
        snprintf(id, sizeof id, "%016llx", (unsigned long long)ctx->model->id.hash);
        st = moeinf_trace_writer_header(ctx->record, "model_id", id, err);
        if (st != MOEINF_OK) moeinf_trace_writer_abort(ctx->record);
    }
    if (st != MOEINF_OK) {
        ctx->record = NULL;
        record_buffers_free(ctx);
        return st;
    }
    ctx->record_requests = 0;
    return MOEINF_OK;
}

enum moeinf_status moeinf_context_record_close(struct moeinf_context *ctx,
                                               struct moeinf_error *err) {
    if (!ctx->record) return MOEINF_OK;
    enum moeinf_status st = moeinf_trace_writer_close(ctx->record, err);
    ctx->record = NULL;
    record_buffers_free(ctx);
    return st;
}

void moeinf_context_record_discard(struct moeinf_context *ctx) {
    if (!ctx || !ctx->record) return;
    moeinf_trace_writer_abort(ctx->record);
    ctx->record = NULL;
    record_buffers_free(ctx);
}

/* Appends the routing of the m tokens the last eval ran; n_past is where they started. */
enum moeinf_status moeinf_record_eval(struct moeinf_context *ctx, int m, int n_past, bool prefill,
                                      struct moeinf_error *err) {
    const struct moeinf_hparams *hp = &ctx->model->llm->hp;
    const int n_used = hp->n_expert_used;
    enum moeinf_status st = MOEINF_OK;
    if (n_past == 0) {
        st = moeinf_trace_writer_request(ctx->record, ctx->record_requests++, ctx->record_tag, err);
    }
    for (int j = 0; j < m && st == MOEINF_OK; j++) {
        for (int ml = 0; ml < moeinf_n_moe_layers(hp); ml++) {
            const int il = hp->n_layer_dense_lead + ml;
            memcpy(ctx->record_row + (size_t)ml * n_used, moeinf_fwd_routing(ctx->fwd, il, j),
                   (size_t)n_used * sizeof(int32_t));
        }
        st = moeinf_trace_writer_token(ctx->record,
                                       prefill ? MOEINF_PHASE_PREFILL : MOEINF_PHASE_DECODE,
                                       ctx->record_row, err);
    }
    return st;
}
