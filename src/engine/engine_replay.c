/* engine_replay.c - routing replay: recorded expert choices that replace the router's in the
 * next decode call (engine_replay.h; used by `moeinf bench --route-trace`). */
#include "engine/engine_replay.h"

#include <limits.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/grow.h"
#include "base/status.h"
#include "engine/engine.h"
#include "trace/trace.h"

/* Adds one token line to the selection: a new request when it begins one. */
static enum moeinf_status keep_token(struct moeinf_route_trace *t,
                                     const struct moeinf_trace_token *tok, int64_t position,
                                     size_t *req_cap, size_t *n_rows, size_t *row_cap,
                                     const char *path, struct moeinf_error *err) {
    const size_t row = (size_t)t->n_layers * (size_t)t->top_k;
    if (tok->request_begins) {
        struct moeinf_route_request *grown =
            moeinf_grow(t->requests, req_cap, (size_t)t->n_requests + 1, sizeof *grown);
        if (!grown) return moeinf_fail(err, MOEINF_ERR_NOMEM, "%s: out of memory", path);
        t->requests = grown;
        struct moeinf_route_request *r = &t->requests[t->n_requests++];
        memset(r, 0, sizeof *r);
        r->id = tok->request_id;
        r->position = position;
        r->first_row = *n_rows; /* experts points into the storage once it stops growing */
    }
    if (t->n_requests == 0) { /* the reader marks the first line of a file as beginning one */
        return moeinf_fail(err, MOEINF_ERR_FORMAT, "%s: a token line outside any request", path);
    }
    struct moeinf_route_request *r = &t->requests[t->n_requests - 1];
    if (r->n_prefill + r->n_decode >= INT_MAX / 2) {
        return moeinf_fail(err, MOEINF_ERR_ARG, "%s: request %lld is too long to replay", path,
                           (long long)r->id);
    }
    if (tok->phase == MOEINF_PHASE_PREFILL) {
        r->n_prefill++;
    } else {
        r->n_decode++;
    }
    int32_t *experts = moeinf_grow(t->experts, row_cap, (*n_rows + 1) * row, sizeof *experts);
    if (!experts) return moeinf_fail(err, MOEINF_ERR_NOMEM, "%s: out of memory", path);
    t->experts = experts;
    memcpy(t->experts + *n_rows * row, tok->experts, row * sizeof *t->experts);
    (*n_rows)++;
    return MOEINF_OK;
}

enum moeinf_status moeinf_route_trace_load(const char *path, int64_t first, int64_t last,
                                           struct moeinf_route_trace *out,
                                           struct moeinf_error *err) {
    struct moeinf_route_trace t;
    memset(&t, 0, sizeof t);
    struct moeinf_trace_reader *r = NULL;
    enum moeinf_status st = moeinf_trace_open(path, &r, err);
    if (st != MOEINF_OK) return st;
    const struct moeinf_trace_header *h = moeinf_trace_header(r);
    t.n_layers = h->n_layers;
    t.n_experts = h->n_experts;
    t.top_k = h->top_k;
    size_t req_cap = 0;
    size_t row_cap = 0;
    size_t n_rows = 0;
    int64_t position = -1;
    for (;;) {
        struct moeinf_trace_token tok;
        bool end = false;
        if ((st = moeinf_trace_read(r, &tok, &end, err)) != MOEINF_OK) goto fail;
        if (end) break;
        position += tok.request_begins;
        if (position < first || (last >= 0 && position > last)) continue;
        st = keep_token(&t, &tok, position, &req_cap, &n_rows, &row_cap, path, err);
        if (st != MOEINF_OK) goto fail;
    }
    t.n_file_requests = position + 1;
    if (t.n_requests == 0) {
        if (last >= 0) {
            st = moeinf_fail(err, MOEINF_ERR_ARG,
                             "%s: the trace has %lld requests (positions 0-%lld): none at "
                             "positions %lld-%lld",
                             path, (long long)t.n_file_requests, (long long)t.n_file_requests - 1,
                             (long long)first, (long long)last);
        } else {
            st = moeinf_fail(err, MOEINF_ERR_ARG,
                             "%s: the trace has %lld requests: none from position %lld on", path,
                             (long long)t.n_file_requests, (long long)first);
        }
        goto fail;
    }
    const size_t row = (size_t)t.n_layers * (size_t)t.top_k;
    for (int i = 0; i < t.n_requests; i++) {
        t.requests[i].experts = t.experts + t.requests[i].first_row * row;
    }
    moeinf_trace_close(r);
    *out = t;
    return MOEINF_OK;
fail:
    moeinf_trace_close(r);
    moeinf_route_trace_free(&t);
    return st;
}

void moeinf_route_trace_free(struct moeinf_route_trace *t) {
    free(t->requests);
    free(t->experts);
    memset(t, 0, sizeof *t);
}

enum moeinf_status moeinf_context_route_fits(const struct moeinf_context *ctx,
                                             const struct moeinf_route_trace *t,
                                             struct moeinf_error *err) {
    const struct moeinf_hparams *hp = &ctx->model->llm->hp;
    const int model_moe_layers = moeinf_n_moe_layers(hp);
    if (t->n_layers != model_moe_layers) {
        return moeinf_fail(err, MOEINF_ERR_ARG, "the trace has %d MoE layers, the model %d",
                           t->n_layers, model_moe_layers);
    }
    if (t->n_experts != hp->n_expert) {
        return moeinf_fail(err, MOEINF_ERR_ARG, "the trace has %d experts per layer, the model %d",
                           t->n_experts, hp->n_expert);
    }
    if (t->top_k != hp->n_expert_used) {
        return moeinf_fail(err, MOEINF_ERR_ARG, "the trace has top-k %d, the model top-k %d",
                           t->top_k, hp->n_expert_used);
    }
    return MOEINF_OK;
}

enum moeinf_status moeinf_context_route_replay(struct moeinf_context *ctx, const int32_t *experts,
                                               int n, bool prefill, struct moeinf_error *err) {
    const struct moeinf_hparams *hp = &ctx->model->llm->hp;
    ctx->route_replay = NULL;
    if (hp->n_expert == 0) {
        return moeinf_fail(err, MOEINF_ERR_ARG, "a dense model has no routing to replay");
    }
    if (n <= 0) return moeinf_fail(err, MOEINF_ERR_ARG, "a routing replay needs a token");
    const int n_used = hp->n_expert_used;
    for (int j = 0; j < n; j++) {
        for (int il = 0; il < moeinf_n_moe_layers(hp); il++) {
            const int32_t *g = experts + ((size_t)j * moeinf_n_moe_layers(hp) + il) * n_used;
            for (int r = 0; r < n_used; r++) {
                if (g[r] < 0 || g[r] >= hp->n_expert) {
                    return moeinf_fail(err, MOEINF_ERR_ARG,
                                       "routing replay: token %d, layer %d: expert %d is outside "
                                       "[0, %d)",
                                       j, il, g[r], hp->n_expert);
                }
                for (int q = 0; q < r; q++) {
                    if (g[q] == g[r]) {
                        return moeinf_fail(err, MOEINF_ERR_ARG,
                                           "routing replay: token %d, layer %d: expert %d "
                                           "twice",
                                           j, il, g[r]);
                    }
                }
            }
        }
    }
    ctx->route_replay = experts;
    ctx->route_replay_n = n;
    ctx->route_replay_prefill = prefill;
    return MOEINF_OK;
}
