/*
 * trace_svg.c - the heatmap of `moeinf trace heatmap` (svg.h): the colour scale and the SVG of
 * one request's EAM, read by the trace tools (src/trace: trace_eam.c). In src/app, not the
 * library: only the programs draw.
 */
#include "app/svg.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "base/file.h"
#include "base/status.h"
#include "trace/trace_tools.h"

/* The text of errno, thread-safe (GNU strerror_r: _GNU_SOURCE is set for every file). */
static const char *errno_text(char *buf, size_t size) {
    return strerror_r(errno, buf, size);
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

/* ---- heatmap ------------------------------------------------------------------------------ */

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
                  enum moeinf_phase phase, uint32_t max) {
    const int y0 = g->top;
    const int64_t tokens = moeinf_trace_eam_tokens(m, phase);
    const char *name = phase == MOEINF_PHASE_PREFILL  ? "prefill"
                       : phase == MOEINF_PHASE_DECODE ? "decode"
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
                                        enum moeinf_phase phase, const char *label,
                                        const char *path, struct moeinf_error *err) {
    const int panels = phase == MOEINF_PHASE_ALL ? 2 : 1;

    const enum moeinf_phase shown[2] = {panels == 2 ? MOEINF_PHASE_PREFILL : phase,
                                              MOEINF_PHASE_DECODE};

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
        moeinf_xml_text(f, label);
        fputs(": ", f);
    }
    fprintf(f, "request %lld (", (long long)m->request_id);
    moeinf_xml_text(f, m->tag);
    fprintf(f, "), expert activation matrix</text>\n");
    char model[256];
    short_model(m->model, model, sizeof model);
    fprintf(f, "<text x=\"%d\" y=\"50\" fill=\"#444\">", g.left);
    if (model[0]) {
        moeinf_xml_text(f, model);
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
