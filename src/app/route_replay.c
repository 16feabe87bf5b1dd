/* route_replay.c - routing replay for the bench (route_replay.h): the engine's internal
 * routing-replay hooks (engine/engine_replay.h) behind an opaque trace. */
#include "app/route_replay.h"

#include <assert.h>
#include <stdlib.h>

#include "base/status.h"
#include "engine/engine_replay.h"

struct cli_route_trace {
    struct moeinf_route_trace t;
};

enum moeinf_status cli_route_trace_load(const char *path, int64_t first, int64_t last,
                                        struct cli_route_trace **out, struct moeinf_error *err) {
    struct cli_route_trace *rt = calloc(1, sizeof *rt);
    if (!rt) return moeinf_fail(err, MOEINF_ERR_NOMEM, "%s: out of memory", path);
    enum moeinf_status st = moeinf_route_trace_load(path, first, last, &rt->t, err);
    if (st != MOEINF_OK) {
        free(rt);
        return st;
    }
    /* a range that runs past the file's end is as wrong as one that starts there: it names
     * requests that do not exist (the selection would be silently shorter than asked) */
    if (last >= rt->t.n_file_requests) {
        const long long n = (long long)rt->t.n_file_requests;
        st = moeinf_fail(err, MOEINF_ERR_ARG,
                         "%s: the trace has %lld requests (positions 0-%lld): none at "
                         "positions %lld-%lld",
                         path, n, n - 1, (long long)rt->t.n_file_requests, (long long)last);
        cli_route_trace_free(rt);
        return st;
    }
    *out = rt;
    return MOEINF_OK;
}

void cli_route_trace_free(struct cli_route_trace *t) {
    if (!t) return;
    moeinf_route_trace_free(&t->t);
    free(t);
}

int cli_route_trace_n_requests(const struct cli_route_trace *t) {
    return t->t.n_requests;
}

int64_t cli_route_trace_n_file_requests(const struct cli_route_trace *t) {
    return t->t.n_file_requests;
}

struct cli_route_request cli_route_trace_request(const struct cli_route_trace *t, int i) {
    assert(i >= 0 && i < t->t.n_requests);
    const struct moeinf_route_request *r = &t->t.requests[i];
    return (struct cli_route_request){r->id, r->position, r->n_prefill, r->n_decode};
}

enum moeinf_status cli_route_trace_fits(const struct moeinf_context *ctx,
                                        const struct cli_route_trace *t, struct moeinf_error *err) {
    return moeinf_context_route_fits(ctx, &t->t, err);
}

enum moeinf_status cli_route_trace_replay(struct moeinf_context *ctx,
                                          const struct cli_route_trace *t, int request, int i,
                                          int m, bool prefill, struct moeinf_error *err) {
    assert(request >= 0 && request < t->t.n_requests);
    const size_t row = (size_t)t->t.n_layers * (size_t)t->t.top_k;
    const struct moeinf_route_request *rq = &t->t.requests[request];
    return moeinf_context_route_replay(ctx, rq->experts + (size_t)i * row, m, prefill, err);
}
