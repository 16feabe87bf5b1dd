/*
 * route_replay.h - routing replay for `moeinf bench --route-trace`: the requests of a
 * moe-trace v1 file, held in memory with their recorded experts, handed to a context one
 * decode call at a time in place of the router's choice. It wraps the engine's hooks
 * (engine/engine_replay.h), which moeinf.h leaves out: routing replay is a benchmark tool,
 * not public API. A trace here is opaque; its requests are read through the functions below.
 */
#ifndef MOEINF_APP_ROUTE_REPLAY_H
#define MOEINF_APP_ROUTE_REPLAY_H

#include <stdbool.h>
#include <stdint.h>

#include "moeinf.h"

struct cli_route_trace;

/* One selected request of the trace. */
struct cli_route_request {
    int64_t id;       /* the trace's request id */
    int64_t position; /* position in the file, from 0 */
    int n_prefill;    /* P tokens, then */
    int n_decode;     /* D tokens */
};

/* Reads the whole trace at path and keeps the requests at positions first..last in file
 * order (last < 0: to the end). MOEINF_ERR_FORMAT for a malformed trace, MOEINF_ERR_ARG when
 * the range selects no request or goes past the file's last request, or a request is too long
 * (moeinf_route_trace_load). */
enum moeinf_status cli_route_trace_load(const char *path, int64_t first, int64_t last,
                                        struct cli_route_trace **out, struct moeinf_error *err);
void cli_route_trace_free(struct cli_route_trace *t);

int cli_route_trace_n_requests(const struct cli_route_trace *t);
/* Requests in the whole file. */
int64_t cli_route_trace_n_file_requests(const struct cli_route_trace *t);
/* The i-th selected request, 0 <= i < cli_route_trace_n_requests(t). */
struct cli_route_request cli_route_trace_request(const struct cli_route_trace *t, int i);

/* MOEINF_OK when the trace's geometry is the model's; else MOEINF_ERR_ARG naming the first
 * that differs. */
enum moeinf_status cli_route_trace_fits(const struct moeinf_context *ctx,
                                        const struct cli_route_trace *t, struct moeinf_error *err);

/* The next moeinf_decode call, of exactly m tokens, uses the recorded experts of tokens
 * [i, i + m) of the request-th selected request, and counts as a prefill (prefill true) or a
 * decode pass. Errors as moeinf_context_route_replay. */
enum moeinf_status cli_route_trace_replay(struct moeinf_context *ctx,
                                          const struct cli_route_trace *t, int request, int i,
                                          int m, bool prefill, struct moeinf_error *err);

#endif
