/*
 * engine_replay.h - routing replay, for benchmarks on recorded routing (internal: not in
 * moeinf.h; `moeinf bench --route-trace` is its user).
 *
 * A benchmark loads some requests of a moe-trace v1 file (trace/trace.h reads it) and runs
 * each through a context with the trace's prompt and decode lengths; before each decode call
 * it hands the engine the recorded experts of that call's tokens, which replace the router's
 * choice in the forward pass (moeinf_fwd_set_route_replay). The router still runs and mixes
 * the replayed experts with its own probabilities; every layer is computed and every replayed
 * expert read, through the expert cache when the context has one.
 */
#ifndef MOEINF_ENGINE_REPLAY_H
#define MOEINF_ENGINE_REPLAY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "moeinf.h"

/* Requests of a trace, held in memory: their token lines' experts, in file order. */
struct moeinf_route_request {
    int64_t id;       /* the trace's request id */
    int64_t position; /* position in the file, from 0 */
    int n_prefill;    /* P tokens, then */
    int n_decode;     /* D tokens */
    size_t first_row; /* its first token's row in the trace's `experts` storage */
    const int32_t *experts; /* (n_prefill + n_decode) x n_layers x top_k, token-major */
};

struct moeinf_route_trace {
    int n_layers, n_experts, top_k;
    int64_t n_file_requests; /* requests in the whole file */
    int n_requests;          /* selected */
    struct moeinf_route_request *requests;
    int32_t *experts; /* storage of every selected request's experts */
};

/* Reads the whole trace at `path` (so a defect anywhere is reported, as the simulator would)
 * and keeps the requests at positions first..last in file order (last < 0: to the end).
 * MOEINF_ERR_FORMAT for a malformed trace (the reader's message), MOEINF_ERR_ARG when the
 * range selects no request or a request is longer than INT_MAX / 2 tokens. */
enum moeinf_status moeinf_route_trace_load(const char *path, int64_t first, int64_t last,
                                           struct moeinf_route_trace *out,
                                           struct moeinf_error *err);
void moeinf_route_trace_free(struct moeinf_route_trace *t);

/* MOEINF_OK when the trace's geometry is the model's: as many MoE layers, experts per layer
 * and experts per token; else MOEINF_ERR_ARG naming the first that differs. */
enum moeinf_status moeinf_context_route_fits(const struct moeinf_context *ctx,
                                             const struct moeinf_route_trace *t,
                                             struct moeinf_error *err);

/*
 * The next moeinf_decode call, which must be of exactly n tokens, uses `experts` (n x n_layer
 * x n_expert_used ids, token-major, as a trace's token lines) instead of the router's choice,
 * and counts as a prefill (prefill true) or decode pass in the expert cache and the routing
 * record whatever n is, as the trace says. Checks that the model is a MoE and every id is in
 * [0, n_expert) and distinct within its layer (MOEINF_ERR_ARG otherwise). The array is
 * borrowed until that call returns; the call clears the replay, also when it fails.
 */
enum moeinf_status moeinf_context_route_replay(struct moeinf_context *ctx, const int32_t *experts,
                                               int n, bool prefill, struct moeinf_error *err);

#endif
