/*
 * trace_eam.c - one request's expert activation matrix (moeinf.h, "trace tools"): read from a
 * trace, counts by phase, and its skew per layer next to uniformly random routing.
 *
 * The trace is streamed with the reader of trace.h up to the end of the request; memory is
 * the L x E counts of each phase.
 */
#include <assert.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/status.h"
#include "trace/trace.h"
#include "trace/trace_tools.h"

#define UNIFORM_DRAWS 1024

void moeinf_trace_eam_free(struct moeinf_trace_eam *m) {
    if (!m) return;
    free(m->counts[0]);
    free(m->counts[1]);
    free(m);
}

enum moeinf_status moeinf_trace_eam_load(const char *path, int64_t request_id, int64_t index,
                                         struct moeinf_trace_eam **out, struct moeinf_error *err) {
    struct moeinf_trace_reader *r = NULL;
    struct moeinf_trace_eam *m = NULL;
    enum moeinf_status st = moeinf_trace_open(path, &r, err);
    if (st != MOEINF_OK) return st;
    const struct moeinf_trace_header *h = moeinf_trace_header(r);
    const int n_layers = h->n_layers;
    const int n_experts = h->n_experts;
    const int k = h->top_k;
    const size_t cells = (size_t)n_layers * (size_t)n_experts;
    m = calloc(1, sizeof *m);
    if (!m || !(m->counts[0] = calloc(cells, sizeof(uint32_t))) ||
        !(m->counts[1] = calloc(cells, sizeof(uint32_t)))) {
        st = moeinf_fail(err, MOEINF_ERR_NOMEM, "%s: out of memory", path);
        goto fail;
    }
    m->n_layers = n_layers;
    m->n_experts = n_experts;
    m->top_k = k;
    snprintf(m->model, sizeof m->model, "%s", h->model);
    int64_t pos = -1;
    bool inside = false;
    bool found = false;
    for (;;) {
        struct moeinf_trace_token tok;
        bool end = false;
        if ((st = moeinf_trace_read(r, &tok, &end, err)) != MOEINF_OK) goto fail;
        if (end) break;
        if (tok.request_begins) {
            if (inside) break; /* the request is complete */
            pos++;
            if (request_id >= 0 ? tok.request_id == request_id : pos == index) {
                inside = found = true;
                m->request_id = tok.request_id;
                m->index = pos;
                snprintf(m->tag, sizeof m->tag, "%s", tok.request_tag ? tok.request_tag : "-");
            } else if (request_id >= 0 && tok.request_id > request_id) {
                break; /* ids increase: it is not in the file */
            }
        }
        if (!inside) continue;
        int p = moeinf_trace_phase_index(tok.phase);
        m->n_tokens[p]++;
        for (int l = 0; l < n_layers; l++) {
            for (int j = 0; j < k; j++) {
                m->counts[p][(size_t)l * (size_t)n_experts + (size_t)tok.experts[l * k + j]]++;
            }
        }
    }
    if (!found) {
        if (pos < 0) {
            st = moeinf_fail(err, MOEINF_ERR_FORMAT, "%s: the trace has no requests", path);
        } else if (request_id >= 0) {
            st = moeinf_fail(err, MOEINF_ERR_ARG, "%s: no request with id %lld", path,
                             (long long)request_id);
        } else {
            st = moeinf_fail(err, MOEINF_ERR_ARG,
                             "%s: no request at index %lld: the trace has %lld requests", path,
                             (long long)index, (long long)pos + 1);
        }
        goto fail;
    }
    moeinf_trace_close(r);
    *out = m;
    return MOEINF_OK;
fail:
    moeinf_trace_close(r);
    moeinf_trace_eam_free(m);
    return st;
}

uint32_t moeinf_trace_eam_count(const struct moeinf_trace_eam *m, enum moeinf_phase phase,
                                int layer, int expert) {
    assert(layer >= 0 && layer < m->n_layers && expert >= 0 && expert < m->n_experts);
    size_t i = (size_t)layer * (size_t)m->n_experts + (size_t)expert;
    switch (phase) {
    case MOEINF_PHASE_PREFILL:
        return m->counts[0][i];
    case MOEINF_PHASE_DECODE:
        return m->counts[1][i];
    default:
        return m->counts[0][i] + m->counts[1][i];
    }
}

int64_t moeinf_trace_eam_tokens(const struct moeinf_trace_eam *m, enum moeinf_phase phase) {
    if (phase == MOEINF_PHASE_ALL) return m->n_tokens[0] + m->n_tokens[1];
    return m->n_tokens[phase];
}

enum moeinf_status moeinf_trace_eam_skew(const struct moeinf_trace_eam *m,
                                         enum moeinf_phase phase, int layer,
                                         struct moeinf_trace_skew *out, struct moeinf_error *err) {
    if (layer < -1 || layer >= m->n_layers) {
        return moeinf_fail(err, MOEINF_ERR_ARG, "layer %d: the trace has %d layers", layer,
                           m->n_layers);
    }
    struct moeinf_trace_skew s;
    memset(&s, 0, sizeof s);
    s.tokens = moeinf_trace_eam_tokens(m, phase);
    if (s.tokens == 0) {
        *out = s;
        return MOEINF_OK;
    }
    s.accesses = s.tokens * m->top_k;
    const int n_experts = m->n_experts;
    uint64_t *row = malloc((size_t)n_experts * sizeof *row);
    if (!row) return moeinf_fail(err, MOEINF_ERR_NOMEM, "skew: out of memory");
    int lo = layer < 0 ? 0 : layer;
    int hi = layer < 0 ? m->n_layers : layer + 1;
    s.top1_min = s.distinct_min = INFINITY;
    s.top1_max = s.distinct_max = -INFINITY;
    for (int l = lo; l < hi; l++) {
        int distinct = 0;
        for (int e = 0; e < n_experts; e++) {
            row[e] = moeinf_trace_eam_count(m, phase, l, e);
            distinct += row[e] > 0;
        }
        uint64_t top4 = moeinf_trace_top_sum(row, n_experts, 4);
        double top1 = (double)row[0] / (double)s.accesses;
        s.top1_share += top1;
        s.top4_share += (double)top4 / (double)s.accesses;
        s.distinct += distinct;
        s.top1_min = fmin(s.top1_min, top1);
        s.top1_max = fmax(s.top1_max, top1);
        s.distinct_min = fmin(s.distinct_min, distinct);
        s.distinct_max = fmax(s.distinct_max, distinct);
    }
    free(row);
    const double n = hi - lo;
    s.top1_share /= n;
    s.top4_share /= n;
    s.distinct /= n;
    enum moeinf_status st =
        moeinf_trace_uniform_skew(n_experts, m->top_k, s.tokens, UNIFORM_DRAWS, &s, err);
    if (st != MOEINF_OK) return st;
    *out = s;
    return MOEINF_OK;
}
