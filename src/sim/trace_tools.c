/*
 * trace_tools.c - the trace tools of moeinf.h ("trace tools"): one request's EAM (load, skew,
 * SVG heatmap), filter and concat of traces through the trace writer, and trace statistics.
 *
 * Every tool streams the trace with the reader of trace.h, so a defect in the input is
 * reported exactly as the simulator reports it. Memory: an EAM is L x E counts; statistics
 * keep one normalised EAM per request and phase for the similarity measures (a few MB for
 * the shared traces), and nothing per token.
 */
#include "sim/trace_tools.h"

#include <assert.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/file.h"
#include "base/rng.h"
#include "base/status.h"
#include "sim/trace.h"

#define UNIFORM_DRAWS  1024
#define DERIVED_MAX    1000 /* the "derived" provenance value is cut to this many bytes */
#define MAX_REQUEST_ID 999999999999999999LL /* request ids have at most 18 digits (trace.h) */

/* The text of errno, thread-safe (GNU strerror_r: _GNU_SOURCE is set for every file). */
static const char *errno_text(char *buf, size_t size) {
    return strerror_r(errno, buf, size);
}

/* ---- measures ----------------------------------------------------------------------------- */

static int cmp_u64(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a;
    uint64_t y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

double moeinf_trace_gini(uint64_t *x, int n) {
    if (n <= 0) return NAN;
    qsort(x, (size_t)n, sizeof *x, cmp_u64);
    double sum = 0;
    double weighted = 0;
    for (int i = 0; i < n; i++) {
        sum += (double)x[i];
        weighted += (double)(i + 1) * (double)x[i];
    }
    if (sum == 0) return NAN;
    /* sorted ascending: sum_ij |x_i - x_j| / (2 n sum) = 2 sum_i i x_(i) / (n sum) - (n+1)/n */
    return 2.0 * weighted / ((double)n * sum) - (double)(n + 1) / (double)n;
}

uint64_t moeinf_trace_top_sum(uint64_t *x, int n, int k) {
    if (k > n) k = n;
    uint64_t total = 0;
    for (int i = 0; i < k; i++) { /* k is small (1, 4, E/10): selection beats a sort */
        int best = i;
        for (int j = i + 1; j < n; j++) {
            if (x[j] > x[best]) best = j;
        }
        uint64_t t = x[i];
        x[i] = x[best];
        x[best] = t;
        total += x[i];
    }
    return total;
}

/* Uniform in [0, n) (multiply-shift; the bias is below n / 2^32, far under Monte Carlo noise) */
static uint32_t below(uint64_t *state, uint32_t n) {
    return (uint32_t)(((moeinf_splitmix64(state) >> 32) * (uint64_t)n) >> 32);
}

enum moeinf_status moeinf_trace_uniform_skew(int n_experts, int top_k, int64_t tokens, int draws,
                                             struct moeinf_trace_skew *out,
                                             struct moeinf_error *err) {
    out->uniform_top1_share = out->uniform_top4_share = out->uniform_distinct = 0;
    if (tokens <= 0 || n_experts <= 0 || top_k <= 0 || top_k > n_experts || draws <= 0) {
        return MOEINF_OK;
    }
    const double e = n_experts;
    out->uniform_distinct = e * (1.0 - pow(1.0 - (double)top_k / e, (double)tokens));
    uint32_t *perm = malloc((size_t)n_experts * sizeof *perm);
    uint64_t *count = malloc((size_t)n_experts * sizeof *count);
    if (!perm || !count) {
        free(perm);
        free(count);
        return moeinf_fail(err, MOEINF_ERR_NOMEM, "uniform skew: out of memory");
    }
    for (int i = 0; i < n_experts; i++)
        perm[i] = (uint32_t)i;
    uint64_t state = 0x5eed5eed5eed5eedull; /* fixed: the same numbers on every run */
    double top1 = 0;
    double top4 = 0;
    for (int d = 0; d < draws; d++) {
        memset(count, 0, (size_t)n_experts * sizeof *count);
        for (int64_t t = 0; t < tokens; t++) {
            /* a partial Fisher-Yates shuffle draws top_k distinct experts uniformly, whatever
             * order perm was left in */
            for (int j = 0; j < top_k; j++) {
                uint32_t r = (uint32_t)j + below(&state, (uint32_t)(n_experts - j));
                uint32_t tmp = perm[j];
                perm[j] = perm[r];
                perm[r] = tmp;
                count[perm[j]]++;
            }
        }
        uint64_t s4 = moeinf_trace_top_sum(count, n_experts, 4);
        top1 += (double)count[0]; /* the selection put the largest first */
        top4 += (double)s4;
    }
    double accesses = (double)tokens * top_k * draws;
    out->uniform_top1_share = top1 / accesses;
    out->uniform_top4_share = top4 / accesses;
    free(perm);
    free(count);
    return MOEINF_OK;
}

/* ColorBrewer "Blues" without its two lightest classes: a count of 1 must stand out from the
 * white of 0 even in a small cell. */
#define N_BLUES 7
static const uint8_t blues[N_BLUES][3] = {
    {0xc6, 0xdb, 0xef}, {0x9e, 0xca, 0xe1}, {0x6b, 0xae, 0xd6}, {0x42, 0x92, 0xc6},
    {0x21, 0x71, 0xb5}, {0x08, 0x51, 0x9c}, {0x08, 0x30, 0x6b},
};

/* t in [0, 1] along the palette, interpolated between neighbouring classes */
static void color_at(double t, char out[8]) {
    if (!(t > 0)) t = 0;
    if (t > 1) t = 1;
    double x = t * (N_BLUES - 1);
    int i = (int)x;
    if (i > N_BLUES - 2) i = N_BLUES - 2;
    double f = x - i;
    int rgb[3];
    for (int c = 0; c < 3; c++) {
        rgb[c] = (int)lround(blues[i][c] + (blues[i + 1][c] - blues[i][c]) * f);
    }
    snprintf(out, 8, "#%02x%02x%02x", rgb[0], rgb[1], rgb[2]);
}

/* Position of a count >= 1 on the log scale whose top is max. */
static double scale_t(uint32_t count, uint32_t max) {
    if (max <= 1) return 1.0;
    if (count > max) count = max;
    return log((double)count) / log((double)max);
}

void moeinf_trace_color(uint32_t count, uint32_t max, char out[8]) {
    if (count == 0 || max == 0) {
        snprintf(out, 8, "#ffffff");
        return;
    }
    color_at(scale_t(count, max), out);
}

/* ---- one request's EAM -------------------------------------------------------------------- */

void moeinf_trace_eam_free(struct moeinf_trace_eam *m) {
    if (!m) return;
    free(m->counts[0]);
    free(m->counts[1]);
    free(m);
}

static int phase_index(enum moeinf_phase p) {
    return p == MOEINF_PHASE_PREFILL ? MOEINF_TRACE_PHASE_PREFILL : MOEINF_TRACE_PHASE_DECODE;
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
        int p = phase_index(tok.phase);
        m->n_tokens[p]++;
        for (int l = 0; l < n_layers; l++) {
            for (int j = 0; j < k; j++) {
                m->counts[p][(size_t)l * (size_t)n_experts + (size_t)tok.experts[l * k + j]]++;
            }
        }
    }
    if (!found) {
        if (request_id >= 0) {
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

uint32_t moeinf_trace_eam_count(const struct moeinf_trace_eam *m, enum moeinf_trace_phase phase,
                                int layer, int expert) {
    assert(layer >= 0 && layer < m->n_layers && expert >= 0 && expert < m->n_experts);
    size_t i = (size_t)layer * (size_t)m->n_experts + (size_t)expert;
    switch (phase) {
    case MOEINF_TRACE_PHASE_PREFILL:
        return m->counts[0][i];
    case MOEINF_TRACE_PHASE_DECODE:
        return m->counts[1][i];
    default:
        return m->counts[0][i] + m->counts[1][i];
    }
}

static int64_t eam_tokens(const struct moeinf_trace_eam *m, enum moeinf_trace_phase phase) {
    if (phase == MOEINF_TRACE_PHASE_ALL) return m->n_tokens[0] + m->n_tokens[1];
    return m->n_tokens[phase];
}

enum moeinf_status moeinf_trace_eam_skew(const struct moeinf_trace_eam *m,
                                         enum moeinf_trace_phase phase, int layer,
                                         struct moeinf_trace_skew *out, struct moeinf_error *err) {
    if (layer < -1 || layer >= m->n_layers) {
        return moeinf_fail(err, MOEINF_ERR_ARG, "layer %d: the trace has %d layers", layer,
                           m->n_layers);
    }
    struct moeinf_trace_skew s;
    memset(&s, 0, sizeof s);
    s.tokens = eam_tokens(m, phase);
    if (s.tokens == 0) {
        *out = s;
        return MOEINF_OK;
    }
    s.accesses = s.tokens * m->top_k;
    const int n_experts = m->n_experts;
    assert(n_experts > 0); /* a trace with tokens has experts (trace.c checks the header) */
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

/* ---- heatmap ------------------------------------------------------------------------------ */

static void xml_text(FILE *f, const char *s) {
    for (; *s; s++) {
        switch (*s) {
        case '&':
            fputs("&amp;", f);
            break;
        case '<':
            fputs("&lt;", f);
            break;
        case '>':
            fputs("&gt;", f);
            break;
        case '"':
            fputs("&quot;", f);
            break;
        default:
            fputc(*s, f);
        }
    }
}

static int clampi(int v, int lo, int hi) {
    return v < lo ? lo : v > hi ? hi : v;
}

/* Smallest power of two whose span covers at least `min_px` pixels of `cell` each. */
static int label_step(int cell, int min_px) {
    int step = 1;
    while (step * cell < min_px)
        step *= 2;
    return step;
}

struct layout {
    int panels;
    int cell_w, cell_h;
    int panel_w, panel_h;
    int left, top, gap;
    int bar_x, bar_h;
    int width, height;
    int xstep, ystep;
};

static struct layout make_layout(int n_layers, int n_experts, int panels) {
    struct layout g;
    g.panels = panels;
    /* wide E gets narrow cells: about 960 (one panel) or 640 (two) pixels of cells */
    g.cell_w = clampi((panels == 1 ? 960 : 640) / n_experts, 3, 32);
    g.cell_h = clampi(432 / n_layers, 4, 32);
    g.panel_w = n_experts * g.cell_w;
    g.panel_h = n_layers * g.cell_h;
    g.left = 72;
    g.top = 92;
    g.gap = 44;
    g.bar_x = g.left + panels * g.panel_w + (panels - 1) * g.gap + 30;
    g.bar_h = g.panel_h > 180 ? g.panel_h - 40 : 140;
    g.width = g.bar_x + 110;
    if (g.width < 760) g.width = 760; /* room for the title */
    int body = g.panel_h + 62;
    if (g.bar_h + 60 > body) body = g.bar_h + 60;
    g.height = g.top + body;
    g.xstep = label_step(g.cell_w, 36);
    g.ystep = label_step(g.cell_h, 13);
    return g;
}

static void panel(FILE *f, const struct moeinf_trace_eam *m, const struct layout *g, int px,
                  enum moeinf_trace_phase phase, uint32_t max) {
    const int y0 = g->top;
    const int64_t tokens = eam_tokens(m, phase);
    const char *name = phase == MOEINF_TRACE_PHASE_PREFILL  ? "prefill"
                       : phase == MOEINF_TRACE_PHASE_DECODE ? "decode"
                                                            : "prefill + decode";
    fprintf(f,
            "<text x=\"%d\" y=\"%d\" font-size=\"14\" font-weight=\"bold\">%s</text>"
            "<text x=\"%d\" y=\"%d\" text-anchor=\"end\" fill=\"#555\">%lld token%s, "
            "%lld routings per layer</text>\n",
            px, y0 - 10, name, px + g->panel_w, y0 - 10, (long long)tokens, tokens == 1 ? "" : "s",
            (long long)tokens * m->top_k);
    fprintf(f, "<g class=\"cells\" shape-rendering=\"crispEdges\">\n");
    for (int l = 0; l < m->n_layers; l++) {
        for (int e = 0; e < m->n_experts; e++) {
            uint32_t c = moeinf_trace_eam_count(m, phase, l, e);
            char color[8];
            moeinf_trace_color(c, max, color);
            fprintf(f, "<rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" fill=\"%s\"",
                    px + e * g->cell_w, y0 + l * g->cell_h, g->cell_w, g->cell_h, color);
            if (c)
                fprintf(f, "><title>layer %d, expert %d: %u</title></rect>\n", l, e, c);
            else
                fprintf(f, "/>\n");
        }
    }
    fprintf(f, "</g>\n");
    /* faint guides every labelled expert group, then the frame */
    fprintf(f, "<g stroke=\"#000\" stroke-opacity=\"0.10\" shape-rendering=\"crispEdges\">");
    for (int e = g->xstep; e < m->n_experts; e += g->xstep) {
        int x = px + e * g->cell_w;
        fprintf(f, "<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\"/>", x, y0, x, y0 + g->panel_h);
    }
    fprintf(f, "</g>\n");
    fprintf(f,
            "<rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" fill=\"none\" stroke=\"#666\" "
            "shape-rendering=\"crispEdges\"/>\n",
            px, y0, g->panel_w, g->panel_h);
    if (tokens == 0) {
        fprintf(f,
                "<text x=\"%d\" y=\"%d\" text-anchor=\"middle\" font-size=\"14\" fill=\"#666\">"
                "no %s tokens in this request</text>\n",
                px + g->panel_w / 2, y0 + g->panel_h / 2, name);
    }
    /* expert axis */
    const int yb = y0 + g->panel_h;
    fprintf(f, "<g text-anchor=\"middle\" font-size=\"11\">");
    for (int e = 0; e < m->n_experts; e += g->xstep) {
        int x = px + e * g->cell_w + g->cell_w / 2;
        fprintf(f, "<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" stroke=\"#666\"/>", x, yb, x,
                yb + 4);
        fprintf(f, "<text x=\"%d\" y=\"%d\">%d</text>", x, yb + 16, e);
    }
    fprintf(f, "</g>\n");
    fprintf(f, "<text x=\"%d\" y=\"%d\" text-anchor=\"middle\">expert</text>\n",
            px + g->panel_w / 2, yb + 36);
    /* layer axis */
    fprintf(f, "<g text-anchor=\"end\" font-size=\"11\">");
    for (int l = 0; l < m->n_layers; l += g->ystep) {
        int y = y0 + l * g->cell_h + g->cell_h / 2;
        fprintf(f, "<text x=\"%d\" y=\"%d\">%d</text>", px - 5, y + 4, l);
    }
    fprintf(f, "</g>\n");
}

static void colour_bar(FILE *f, const struct layout *g, uint32_t max) {
    const int x = g->bar_x;
    const int w = 16;
    const int top = g->top + 16;
    const int h = g->bar_h;
    fprintf(f, "<text x=\"%d\" y=\"%d\" font-size=\"12\">tokens</text>\n", x, top - 8);
    if (max >= 1) {
        fprintf(f, "<g shape-rendering=\"crispEdges\">");
        const int steps = 64;
        for (int i = 0; i < steps; i++) { /* bottom = 1, top = max */
            char color[8];
            color_at((i + 0.5) / steps, color);
            int y1 = top + h - (i + 1) * h / steps;
            int y2 = top + h - i * h / steps;
            fprintf(f, "<rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" fill=\"%s\"/>", x, y1, w,
                    y2 - y1, color);
        }
        fprintf(f,
                "</g>\n<rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" fill=\"none\" "
                "stroke=\"#666\" shape-rendering=\"crispEdges\"/>\n",
                x, top, w, h);
        /* ticks at 1, 2, 5, 10, 20, 50, ... and at max, skipping ones too close to max */
        fprintf(f, "<g font-size=\"11\">");
        double last_y = 1e9;
        for (uint64_t base = 1; base <= max; base *= 10) {
            static const int mult[] = {1, 2, 5};
            for (int i = 0; i < 3; i++) {
                uint64_t v = base * (uint64_t)mult[i];
                if (v > max) break;
                double y = top + h - scale_t((uint32_t)v, max) * h;
                double y_max = top;
                if (v != max && fabs(y - y_max) < 13) continue;
                if (fabs(y - last_y) < 13) continue;
                last_y = y;
                fprintf(f,
                        "<line x1=\"%d\" y1=\"%.1f\" x2=\"%d\" y2=\"%.1f\" stroke=\"#666\"/>"
                        "<text x=\"%d\" y=\"%.1f\">%llu</text>",
                        x + w, y, x + w + 4, y, x + w + 7, y + 4, (unsigned long long)v);
            }
        }
        if (max > 1 && fabs(last_y - top) > 0.5) {
            fprintf(f,
                    "<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" stroke=\"#666\"/>"
                    "<text x=\"%d\" y=\"%d\">%u</text>",
                    x + w, top, x + w + 4, top, x + w + 7, top + 4, max);
        }
        fprintf(f, "</g>\n");
    }
    /* zero: a white box under the bar */
    const int zy = top + h + 12;
    fprintf(f,
            "<rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"12\" fill=\"#ffffff\" stroke=\"#666\" "
            "shape-rendering=\"crispEdges\"/><text x=\"%d\" y=\"%d\" font-size=\"11\">0</text>\n",
            x, zy, w, x + w + 7, zy + 10);
    fprintf(f, "<text x=\"%d\" y=\"%d\" font-size=\"11\" fill=\"#555\">log scale</text>\n", x,
            zy + 30);
}

/* The model name without the parenthesised notes that follow it in the traces. */
static void short_model(const char *model, char *out, size_t size) {
    snprintf(out, size, "%s", model);
    char *paren = strstr(out, " (");
    if (paren) *paren = '\0';
}

enum moeinf_status moeinf_trace_eam_svg(const struct moeinf_trace_eam *m,
                                        enum moeinf_trace_phase phase, const char *label,
                                        const char *path, struct moeinf_error *err) {
    const int panels = phase == MOEINF_TRACE_PHASE_ALL ? 2 : 1;

    const enum moeinf_trace_phase shown[2] = {panels == 2 ? MOEINF_TRACE_PHASE_PREFILL : phase,
                                              MOEINF_TRACE_PHASE_DECODE};

    uint32_t max = 0; /* one scale for both panels, so colours compare across them */
    for (int p = 0; p < panels; p++) {
        for (int l = 0; l < m->n_layers; l++) {
            for (int e = 0; e < m->n_experts; e++) {
                uint32_t c = moeinf_trace_eam_count(m, shown[p], l, e);
                if (c > max) max = c;
            }
        }
    }
    struct layout g = make_layout(m->n_layers, m->n_experts, panels);
    struct moeinf_atomic_file af;
    enum moeinf_status st = moeinf_atomic_open(path, &af, err);
    if (st != MOEINF_OK) return st;
    FILE *f = af.fp;
    fprintf(f,
            "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" "
            "viewBox=\"0 0 %d %d\" font-family=\"Helvetica, Arial, sans-serif\" "
            "font-size=\"13\">\n",
            g.width, g.height, g.width, g.height);
    fprintf(f, "<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n");
    fprintf(f, "<text x=\"%d\" y=\"28\" font-size=\"17\" font-weight=\"bold\">", g.left);
    if (label && *label) {
        xml_text(f, label);
        fputs(": ", f);
    }
    fprintf(f, "request %lld (", (long long)m->request_id);
    xml_text(f, m->tag);
    fprintf(f, "), expert activation matrix</text>\n");
    char model[256];
    short_model(m->model, model, sizeof model);
    fprintf(f, "<text x=\"%d\" y=\"50\" fill=\"#444\">", g.left);
    if (model[0]) {
        xml_text(f, model);
        fputs(": ", f);
    }
    fprintf(f,
            "%d MoE layers x %d experts, top-%d; %lld prefill + %lld decode tokens; cell = "
            "tokens of the request routed to that expert</text>\n",
            m->n_layers, m->n_experts, m->top_k, (long long)m->n_tokens[0],
            (long long)m->n_tokens[1]);
    fprintf(f,
            "<text transform=\"translate(22 %d) rotate(-90)\" text-anchor=\"middle\">MoE "
            "layer</text>\n",
            g.top + g.panel_h / 2);
    for (int p = 0; p < panels; p++) {
        panel(f, m, &g, g.left + p * (g.panel_w + g.gap), shown[p], max);
    }
    colour_bar(f, &g, max);
    fprintf(f, "</svg>\n");
    if (ferror(f)) {
        char ebuf[128];
        st = moeinf_fail(err, MOEINF_ERR_IO, "%s: write failed: %s", path,
                         errno_text(ebuf, sizeof ebuf)); /* before abort can change errno */
        moeinf_atomic_abort(&af);
        return st;
    }
    return moeinf_atomic_commit(&af, err);
}

/* ---- filter and concat -------------------------------------------------------------------- */

/* The header lines a new trace takes from its first input: model and provenance. */
struct header_copy {
    char *model; /* NULL when absent */
    char *lines; /* "key\tvalue\n" for each provenance line, in order */
    size_t len;
    char *derived; /* the input's own "derived" value, NULL when absent */
};

static void header_copy_free(struct header_copy *c) {
    free(c->model);
    free(c->lines);
    free(c->derived);
}

/* Keys the writer writes itself (or derives): not copied. */
static bool written_by_writer(const char *key) {
    static const char *const keys[] = {
        "n_layers",         "n_experts",       "top_k",   "model", "n_requests", "n_tokens",
        "n_prefill_tokens", "n_decode_tokens", "columns", "req",   "derived"};
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) {
        if (!strcmp(key, keys[i])) return true;
    }
    return false;
}

/* Reads the header lines of a trace already checked by moeinf_trace_open. */
static enum moeinf_status read_header_copy(const char *path, struct header_copy *c,
                                           struct moeinf_error *err) {
    memset(c, 0, sizeof *c);
    enum moeinf_status st = MOEINF_OK;
    char ebuf[128];
    char *line = malloc(MOEINF_TRACE_MAX_HEADER_LINE + 3);
    FILE *f = fopen(path, "rb");
    if (!line || !f) {
        st = !line ? moeinf_fail(err, MOEINF_ERR_NOMEM, "%s: out of memory", path)
                   : moeinf_fail(err, MOEINF_ERR_IO, "%s: cannot open: %s", path,
                                 errno_text(ebuf, sizeof ebuf));
        goto done;
    }
    while (fgets(line, MOEINF_TRACE_MAX_HEADER_LINE + 3, f) && line[0] == '#') {
        line[strcspn(line, "\r\n")] = '\0';
        if (strncmp(line, "# ", 2) != 0) continue;
        char *key = line + 2;
        char *colon = strchr(key, ':');
        if (!colon || strspn(key, "abcdefghijklmnopqrstuvwxyz0123456789_") != (size_t)(colon - key))
            continue; /* the magic line and "# req" lines */
        *colon = '\0';
        const char *value = colon[1] == ' ' ? colon + 2 : colon + 1;
        char **slot = !strcmp(key, "model")     ? &c->model
                      : !strcmp(key, "derived") ? &c->derived
                                                : NULL;
        if (slot) {
            free(*slot);
            if (!(*slot = strdup(value))) goto nomem;
            continue;
        }
        if (written_by_writer(key)) continue;
        size_t add = strlen(key) + strlen(value) + 2;
        char *grown = realloc(c->lines, c->len + add + 1);
        if (!grown) goto nomem;
        c->lines = grown;
        c->len += (size_t)snprintf(c->lines + c->len, add + 1, "%s\t%s\n", key, value);
    }
    if (ferror(f))
        st = moeinf_fail(err, MOEINF_ERR_IO, "%s: read: %s", path, errno_text(ebuf, sizeof ebuf));
    goto done;
nomem:
    st = moeinf_fail(err, MOEINF_ERR_NOMEM, "%s: out of memory", path);
done:
    if (f) fclose(f);
    free(line);
    if (st != MOEINF_OK) header_copy_free(c);
    return st;
}

/* Opens the writer of a derived trace: the first input's geometry, model and provenance, and
 * "derived" = the input's own derivation followed by `note`. */
static enum moeinf_status open_derived(const char *out_path, const char *in_path,
                                       const struct moeinf_trace_header *h, const char *note,
                                       struct moeinf_trace_writer **out, struct moeinf_error *err) {
    struct header_copy c;
    enum moeinf_status st = read_header_copy(in_path, &c, err);
    if (st != MOEINF_OK) return st;
    struct moeinf_trace_writer *w = NULL;
    struct moeinf_trace_meta meta = {h->n_layers, h->n_experts, h->top_k, c.model};
    if ((st = moeinf_trace_writer_open(out_path, &meta, &w, err)) != MOEINF_OK) goto done;
    for (char *p = c.lines; p && p < c.lines + c.len;) {
        char *tab = strchr(p, '\t');
        char *nl = strchr(tab, '\n');
        *tab = *nl = '\0';
        if ((st = moeinf_trace_writer_header(w, p, tab + 1, err)) != MOEINF_OK) goto done;
        p = nl + 1;
    }
    if (c.derived || note) {
        char value[DERIVED_MAX + 1];
        snprintf(value, sizeof value, "%s%s%s", c.derived ? c.derived : "",
                 c.derived && note ? "; then " : "", note ? note : "");
        if ((st = moeinf_trace_writer_header(w, "derived", value, err)) != MOEINF_OK) goto done;
    }
done:
    header_copy_free(&c);
    if (st != MOEINF_OK) {
        moeinf_trace_writer_abort(w);
        return st;
    }
    *out = w;
    return MOEINF_OK;
}

struct moeinf_trace_filter_params moeinf_trace_filter_params_default(void) {
    struct moeinf_trace_filter_params p;
    memset(&p, 0, sizeof p);
    p.id_max = INT64_MAX;
    p.index_max = INT64_MAX;
    p.every = 1;
    return p;
}

static bool tag_passes(const struct moeinf_trace_filter_params *p, const char *tag) {
    if (p->n_tag_prefixes == 0) return true;
    if (!tag) tag = "";
    for (int i = 0; i < p->n_tag_prefixes; i++) {
        const char *pre = p->tag_prefixes[i];
        if (!strncmp(tag, pre, strlen(pre))) return true;
    }
    return false;
}

enum moeinf_status moeinf_trace_filter(const char *in_path, const char *out_path,
                                       const struct moeinf_trace_filter_params *params,
                                       struct moeinf_trace_copy_result *out,
                                       struct moeinf_error *err) {
    if (params->every < 1 || params->first < 0 || params->n_tag_prefixes < 0) {
        return moeinf_fail(err, MOEINF_ERR_ARG, "filter: every must be >= 1 and first >= 0");
    }
    struct moeinf_trace_reader *r = NULL;
    struct moeinf_trace_writer *w = NULL;
    struct moeinf_trace_copy_result res;
    memset(&res, 0, sizeof res);
    enum moeinf_status st = moeinf_trace_open(in_path, &r, err);
    if (st != MOEINF_OK) return st;
    st = open_derived(out_path, in_path, moeinf_trace_header(r), params->note, &w, err);
    if (st != MOEINF_OK) goto fail;
    int64_t pos = -1;
    int64_t passed = 0;
    bool keep = false;
    for (;;) {
        struct moeinf_trace_token tok;
        bool end = false;
        if ((st = moeinf_trace_read(r, &tok, &end, err)) != MOEINF_OK) goto fail;
        if (end) break;
        if (tok.request_begins) {
            pos++;
            /* ids and positions only grow: once past a range, nothing later passes */
            if ((params->first > 0 && res.n_requests >= params->first) ||
                tok.request_id > params->id_max || pos > params->index_max) {
                break;
            }
            keep = tag_passes(params, tok.request_tag) && tok.request_id >= params->id_min &&
                   pos >= params->index_min;
            if (keep) keep = passed++ % params->every == 0;
            if (keep) {
                st = moeinf_trace_writer_request(w, tok.request_id, tok.request_tag, err);
                if (st != MOEINF_OK) goto fail;
                res.n_requests++;
            }
        }
        if (!keep) continue;
        if ((st = moeinf_trace_writer_token(w, tok.phase, tok.experts, err)) != MOEINF_OK) {
            goto fail;
        }
        res.n_tokens[phase_index(tok.phase)]++;
    }
    if (res.n_requests == 0) {
        st = moeinf_fail(err, MOEINF_ERR_ARG,
                         "%s: no request passes the filter (%lld requests "
                         "read); nothing written",
                         in_path, (long long)pos + 1);
        goto fail;
    }
    moeinf_trace_close(r);
    st = moeinf_trace_writer_close(w, err);
    if (st == MOEINF_OK && out) *out = res;
    return st;
fail:
    moeinf_trace_close(r);
    moeinf_trace_writer_abort(w);
    return st;
}

enum moeinf_status moeinf_trace_concat(const char *const *in_paths, int n_in, const char *out_path,
                                       const char *note, struct moeinf_trace_copy_result *out,
                                       struct moeinf_error *err) {
    if (n_in < 1) return moeinf_fail(err, MOEINF_ERR_ARG, "concat: no input traces");
    struct moeinf_trace_reader *r = NULL;
    struct moeinf_trace_writer *w = NULL;
    struct moeinf_trace_copy_result res;
    memset(&res, 0, sizeof res);
    struct moeinf_trace_header first;
    memset(&first, 0, sizeof first);
    /* geometry of every input first, so that a mismatch writes nothing */
    enum moeinf_status st = MOEINF_OK;
    for (int i = 0; i < n_in; i++) {
        if ((st = moeinf_trace_open(in_paths[i], &r, err)) != MOEINF_OK) return st;
        const struct moeinf_trace_header *h = moeinf_trace_header(r);
        if (i == 0) {
            first = *h;
        } else if (h->n_layers != first.n_layers || h->n_experts != first.n_experts ||
                   h->top_k != first.top_k) {
            st = moeinf_fail(err, MOEINF_ERR_FORMAT,
                             "%s: geometry mismatch: %d layers x %d experts, top-%d; %s has %d x "
                             "%d, top-%d",
                             in_paths[i], h->n_layers, h->n_experts, h->top_k, in_paths[0],
                             first.n_layers, first.n_experts, first.top_k);
            moeinf_trace_close(r);
            return st;
        }
        moeinf_trace_close(r);
        r = NULL;
    }
    if ((st = open_derived(out_path, in_paths[0], &first, note, &w, err)) != MOEINF_OK) return st;
    bool any = false;
    int64_t last_id = -1;
    for (int i = 0; i < n_in; i++) {
        if ((st = moeinf_trace_open(in_paths[i], &r, err)) != MOEINF_OK) goto fail;
        int64_t shift = 0;
        bool first_request = true;
        for (;;) {
            struct moeinf_trace_token tok;
            bool end = false;
            if ((st = moeinf_trace_read(r, &tok, &end, err)) != MOEINF_OK) goto fail;
            if (end) break;
            if (tok.request_begins) {
                if (first_request && any && tok.request_id <= last_id) {
                    shift = last_id + 1 - tok.request_id;
                    res.n_shifted++;
                }
                first_request = false;
                if (tok.request_id > MAX_REQUEST_ID - shift) {
                    st = moeinf_fail(err, MOEINF_ERR_ARG,
                                     "%s: request id %lld shifted by %lld exceeds the format's "
                                     "18 digits",
                                     in_paths[i], (long long)tok.request_id, (long long)shift);
                    goto fail;
                }
                last_id = tok.request_id + shift;
                st = moeinf_trace_writer_request(w, last_id, tok.request_tag, err);
                if (st != MOEINF_OK) goto fail;
                any = true;
                res.n_requests++;
            }
            st = moeinf_trace_writer_token(w, tok.phase, tok.experts, err);
            if (st != MOEINF_OK) goto fail;
            res.n_tokens[phase_index(tok.phase)]++;
        }
        moeinf_trace_close(r);
        r = NULL;
    }
    st = moeinf_trace_writer_close(w, err);
    if (st == MOEINF_OK && out) *out = res;
    return st;
fail:
    moeinf_trace_close(r);
    moeinf_trace_writer_abort(w);
    return st;
}

/* ---- statistics --------------------------------------------------------------------------- */

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
        double c = p == MOEINF_TRACE_PHASE_ALL ? (double)s->cur[0][i] + (double)s->cur[1][i]
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
    assert(n_experts > 0); /* trace.c checks the header */
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
        const int p = phase_index(tok.phase);
        s.req_tokens[p]++;
        res.n_tokens[p]++;
        for (int l = 0; l < h->n_layers; l++) {
            for (int j = 0; j < k; j++) {
                size_t id = (size_t)l * (size_t)h->n_experts + (size_t)tok.experts[l * k + j];
                s.cur[p][id]++;
                s.freq[p][id]++;
                s.freq[MOEINF_TRACE_PHASE_ALL][id]++;
                /* an expert appears once per (token, layer): no repeats inside a token */
                if (s.seen[MOEINF_TRACE_PHASE_ALL][id] == s.serial) {
                    res.reused[p]++;
                } else {
                    s.seen[MOEINF_TRACE_PHASE_ALL][id] = s.serial;
                    s.req_distinct[MOEINF_TRACE_PHASE_ALL]++;
                }
                if (s.seen[p][id] != s.serial) {
                    s.seen[p][id] = s.serial;
                    s.req_distinct[p]++;
                }
            }
        }
    }
    if (res.n_requests > 0 && (st = end_request(&s, err)) != MOEINF_OK) goto fail;
    res.n_tokens[MOEINF_TRACE_PHASE_ALL] = res.n_tokens[0] + res.n_tokens[1];
    res.reused[MOEINF_TRACE_PHASE_ALL] = res.reused[0] + res.reused[1];
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
