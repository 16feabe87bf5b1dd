/*
 * trace_stats.c - figures of a whole trace (moeinf.h, "trace tools"): per-layer skew of the
 * experts' frequencies, reuse within a request, and the similarity of request EAMs.
 *
 * One pass over the trace with the reader of trace.h. Memory: per-expert counters, and one
 * normalised EAM per request and phase for the similarity measures (a few MB for the shared
 * traces); nothing per token.
 */
#include <assert.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/status.h"
#include "trace/trace.h"
#include "trace/trace_tools.h"

/* Normalised EAMs of past requests, one phase. */
struct eam_list {
    float *v; /* n x cells */
    int64_t n, cap;
};

struct stats_state {
    const struct moeinf_trace_header *h;
    size_t cells;
    uint64_t *freq[3]; /* (cells) accesses over the whole trace */
    uint32_t *cur[2];  /* (cells) the current request's counts */
    uint32_t *seen[3]; /* (cells) serial of the last request that used the expert (by phase) */
    uint32_t serial;   /* the current request's, from 1 */
    int64_t req_tokens[2];
    int64_t req_distinct[3];
    double *vec; /* (cells) scratch */
    struct eam_list past[3];
    double distinct_sum[3];
    double sim_prev_sum[3], sim_random_sum[3], sim_best_sum[3];
    int64_t sim_n[3];
};

static void stats_state_free(struct stats_state *s) {
    for (int p = 0; p < 3; p++) {
        free(s->freq[p]);
        free(s->seen[p]);
        free(s->past[p].v);
    }
    free(s->cur[0]);
    free(s->cur[1]);
    free(s->vec);
}

/* Compares the finished request's EAM of phase p with the earlier ones and keeps it. */
static enum moeinf_status similarity(struct stats_state *s, int p, struct moeinf_error *err) {
    const size_t cells = s->cells;
    double norm = 0;
    for (size_t i = 0; i < cells; i++) {
        double c = p == MOEINF_PHASE_ALL ? (double)s->cur[0][i] + (double)s->cur[1][i]
                                               : (double)s->cur[p][i];
        s->vec[i] = c;
        norm += c * c;
    }
    assert(norm > 0); /* called only for requests with tokens of the phase */
    norm = sqrt(norm);
    struct eam_list *past = &s->past[p];
    if (past->n == past->cap) {
        int64_t cap = past->cap ? past->cap * 2 : 64;
        float *v = realloc(past->v, (size_t)cap * cells * sizeof *v);
        if (!v) return moeinf_fail(err, MOEINF_ERR_NOMEM, "stats: out of memory");
        past->v = v;
        past->cap = cap;
    }
    float *mine = past->v + (size_t)past->n * cells;
    for (size_t i = 0; i < cells; i++)
        mine[i] = (float)(s->vec[i] / norm);
    if (past->n > 0) {
        double sum = 0;
        double best = -1;
        double prev = 0;
        for (int64_t j = 0; j < past->n; j++) {
            const float *other = past->v + (size_t)j * cells;
            double dot = 0;
            for (size_t i = 0; i < cells; i++)
                dot += (double)mine[i] * (double)other[i];
            sum += dot;
            if (dot > best) best = dot;
            if (j == past->n - 1) prev = dot;
        }
        s->sim_prev_sum[p] += prev;
        s->sim_random_sum[p] += sum / (double)past->n;
        s->sim_best_sum[p] += best;
        s->sim_n[p]++;
    }
    past->n++;
    return MOEINF_OK;
}

static enum moeinf_status end_request(struct stats_state *s, struct moeinf_error *err) {
    int64_t tokens[3] = {s->req_tokens[0], s->req_tokens[1], s->req_tokens[0] + s->req_tokens[1]};
    for (int p = 0; p < 3; p++) {
        if (tokens[p] == 0) continue;
        s->distinct_sum[p] += (double)s->req_distinct[p] / (double)s->cells;
        enum moeinf_status st = similarity(s, p, err);
        if (st != MOEINF_OK) return st;
    }
    memset(s->cur[0], 0, s->cells * sizeof *s->cur[0]);
    memset(s->cur[1], 0, s->cells * sizeof *s->cur[1]);
    memset(s->req_tokens, 0, sizeof s->req_tokens);
    memset(s->req_distinct, 0, sizeof s->req_distinct);
    return MOEINF_OK;
}

static struct moeinf_trace_spread spread(const double *v, int n) {
    struct moeinf_trace_spread s = {0, INFINITY, -INFINITY};
    int counted = 0;
    for (int i = 0; i < n; i++) {
        if (isnan(v[i])) continue;
        s.mean += v[i];
        s.min = fmin(s.min, v[i]);
        s.max = fmax(s.max, v[i]);
        counted++;
    }
    if (!counted) return (struct moeinf_trace_spread){NAN, NAN, NAN};
    s.mean /= counted;
    return s;
}

/* Gini and top share of each layer's expert frequencies, phase p. */
static enum moeinf_status frequency_skew(const struct stats_state *s, int p,
                                         struct moeinf_trace_stats *out, struct moeinf_error *err) {
    const int n_layers = s->h->n_layers;
    const int n_experts = s->h->n_experts;
    uint64_t *row = malloc((size_t)n_experts * sizeof *row);
    double *gini = malloc((size_t)n_layers * sizeof *gini);
    double *share = malloc((size_t)n_layers * sizeof *share);
    if (!row || !gini || !share) {
        free(row);
        free(gini);
        free(share);
        return moeinf_fail(err, MOEINF_ERR_NOMEM, "stats: out of memory");
    }
    for (int l = 0; l < n_layers; l++) {
        uint64_t total = 0;
        for (int e = 0; e < n_experts; e++) {
            row[e] = s->freq[p][(size_t)l * (size_t)n_experts + (size_t)e];
            total += row[e];
        }
        uint64_t top = moeinf_trace_top_sum(row, n_experts, out->top_share_experts);
        share[l] = total ? (double)top / (double)total : NAN;
        gini[l] = moeinf_trace_gini(row, n_experts);
    }
    out->gini[p] = spread(gini, n_layers);
    out->top_share[p] = spread(share, n_layers);
    free(row);
    free(gini);
    free(share);
    return MOEINF_OK;
}

enum moeinf_status moeinf_trace_stats(const char *path, struct moeinf_trace_stats *out,
                                      struct moeinf_error *err) {
    struct moeinf_trace_reader *r = NULL;
    struct stats_state s;
    memset(&s, 0, sizeof s);
    struct moeinf_trace_stats res;
    memset(&res, 0, sizeof res);
    enum moeinf_status st = moeinf_trace_open(path, &r, err);
    if (st != MOEINF_OK) return st;
    const struct moeinf_trace_header *h = moeinf_trace_header(r);
    s.h = h;
    s.cells = (size_t)h->n_layers * (size_t)h->n_experts;
    bool ok = (s.vec = malloc(s.cells * sizeof *s.vec)) != NULL;
    for (int p = 0; p < 3 && ok; p++) {
        ok = (s.freq[p] = calloc(s.cells, sizeof *s.freq[p])) &&
             (s.seen[p] = calloc(s.cells, sizeof *s.seen[p])) &&
             (p == 2 || (s.cur[p] = calloc(s.cells, sizeof *s.cur[p])));
    }
    if (!ok) {
        st = moeinf_fail(err, MOEINF_ERR_NOMEM, "%s: out of memory", path);
        goto fail;
    }
    res.n_layers = h->n_layers;
    res.n_experts = h->n_experts;
    res.top_k = h->top_k;
    snprintf(res.model, sizeof res.model, "%s", h->model);
    res.top_share_experts = (h->n_experts + 9) / 10;
    const int k = h->top_k;
    for (;;) {
        struct moeinf_trace_token tok;
        bool end = false;
        if ((st = moeinf_trace_read(r, &tok, &end, err)) != MOEINF_OK) goto fail;
        if (end) break;
        if (tok.request_begins) {
            if (res.n_requests > 0 && (st = end_request(&s, err)) != MOEINF_OK) goto fail;
            res.n_requests++;
            s.serial++; /* requests <= 2^32 - 1: one line each is far past any real trace */
        }
        const int p = moeinf_trace_phase_index(tok.phase);
        s.req_tokens[p]++;
        res.n_tokens[p]++;
        for (int l = 0; l < h->n_layers; l++) {
            for (int j = 0; j < k; j++) {
                size_t id = (size_t)l * (size_t)h->n_experts + (size_t)tok.experts[l * k + j];
                s.cur[p][id]++;
                s.freq[p][id]++;
                s.freq[MOEINF_PHASE_ALL][id]++;
                /* an expert appears once per (token, layer): no repeats inside a token */
                if (s.seen[MOEINF_PHASE_ALL][id] == s.serial) {
                    res.reused[p]++;
                } else {
                    s.seen[MOEINF_PHASE_ALL][id] = s.serial;
                    s.req_distinct[MOEINF_PHASE_ALL]++;
                }
                if (s.seen[p][id] != s.serial) {
                    s.seen[p][id] = s.serial;
                    s.req_distinct[p]++;
                }
            }
        }
    }
    if (res.n_requests > 0 && (st = end_request(&s, err)) != MOEINF_OK) goto fail;
    res.n_tokens[MOEINF_PHASE_ALL] = res.n_tokens[0] + res.n_tokens[1];
    res.reused[MOEINF_PHASE_ALL] = res.reused[0] + res.reused[1];
    for (int p = 0; p < 3; p++) {
        res.accesses[p] = (uint64_t)res.n_tokens[p] * (uint64_t)h->n_layers * (uint64_t)k;
        res.similarity_requests[p] = s.past[p].n;
        res.distinct_share[p] = s.past[p].n ? s.distinct_sum[p] / (double)s.past[p].n : NAN;
        int64_t n = s.sim_n[p];
        res.similarity_prev[p] = n ? s.sim_prev_sum[p] / (double)n : NAN;
        res.similarity_random[p] = n ? s.sim_random_sum[p] / (double)n : NAN;
        res.similarity_best[p] = n ? s.sim_best_sum[p] / (double)n : NAN;
        if ((st = frequency_skew(&s, p, &res, err)) != MOEINF_OK) goto fail;
    }
    moeinf_trace_close(r);
    stats_state_free(&s);
    *out = res;
    return MOEINF_OK;
fail:
    moeinf_trace_close(r);
    stats_state_free(&s);
    return st;
}
