/*
 * sim_plot.c - the plot of a simulator sweep (`moeinf sim --sweep --plot`, svg.h): hit ratio
 * against cache size, one line per policy.
 */
#include <math.h>
#include <stdio.h>

#include "app/svg.h"
#include "base/file.h"

static const char *const colors[] = {"#1f77b4", "#d62728", "#2ca02c", "#7f7f7f",
                                     "#9467bd", "#ff7f0e", "#8c564b", "#e377c2"};

/* The hit ratio at size s of policy q, and its cache size. */
static double ratio_at(const struct moeinf_sim_plot *p, int s, int q) {
    return p->ratio[(size_t)s * (size_t)p->n_policies + (size_t)q];
}

static int size_at(const struct moeinf_sim_plot *p, int s, int q) {
    return p->cache_experts[(size_t)s * (size_t)p->n_policies + (size_t)q];
}

enum moeinf_status moeinf_sim_plot_svg(const struct moeinf_sim_plot *pl, const char *path,
                                       struct moeinf_error *err) {
    /* a temp file renamed over path when complete, as every output */
    struct moeinf_atomic_file af = {0};
    enum moeinf_status st = moeinf_atomic_open(path, &af, err);
    if (st != MOEINF_OK) return st;
    FILE *f = af.fp;
    const double w = 720;
    const double h = 440;
    const double left = 70;
    const double right = 150;
    const double top = 50;
    const double bottom = 60;
    const double pw = w - left - right;
    const double ph = h - top - bottom;
    const int n_ids = pl->n_ids;
    double xmax = 0;
    for (int s = 0; s < pl->n_sizes; s++) {
        double x = 100.0 * size_at(pl, s, 0) / n_ids;
        if (x > xmax) xmax = x;
    }
    double step = xmax <= 10 ? 1 : xmax <= 25 ? 5 : xmax <= 60 ? 10 : 20;
    xmax = ceil(xmax / step) * step;
    fprintf(f,
            "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" "
            "viewBox=\"0 0 %.0f %.0f\" font-family=\"Helvetica, Arial, sans-serif\" "
            "font-size=\"13\">\n",
            w, h, w, h);
    fprintf(f, "<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n");
    fprintf(f, "<text x=\"%.0f\" y=\"28\" font-size=\"16\" text-anchor=\"middle\">", left + pw / 2);
    moeinf_xml_text(f, pl->title);
    fprintf(f, ": hit ratio (%s accesses)</text>\n", pl->accesses);
    for (int i = 0; i <= 10; i += 2) { /* y grid every 0.2 */
        double y = top + ph - ph * i / 10.0;
        fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#ddd\"/>\n",
                left, y, left + pw, y);
        fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"end\">%.1f</text>\n", left - 8, y + 4,
                i / 10.0);
    }
    for (int i = 0; i * step <= xmax + 1e-9; i++) {
        double x = i * step;
        double px = left + pw * x / xmax;
        fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#ddd\"/>\n", px,
                top, px, top + ph);
        fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">%g%%</text>\n", px,
                top + ph + 20, x);
    }
    fprintf(f,
            "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"none\" "
            "stroke=\"#333\"/>\n",
            left, top, pw, ph);
    fprintf(f,
            "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">cache size (%% of %d "
            "experts)</text>\n",
            left + pw / 2, h - 15, n_ids);
    fprintf(f,
            "<text transform=\"translate(20 %.1f) rotate(-90)\" text-anchor=\"middle\">hit "
            "ratio</text>\n",
            top + ph / 2);
    for (int p = 0; p < pl->n_policies; p++) {
        const char *color = colors[p % (sizeof colors / sizeof colors[0])];
        fprintf(f, "<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"2\" points=\"", color);
        for (int s = 0; s < pl->n_sizes; s++) {
            double v = ratio_at(pl, s, p);
            if (isnan(v)) continue;
            double x = 100.0 * size_at(pl, s, p) / n_ids;
            fprintf(f, "%.1f,%.1f ", left + pw * x / xmax, top + ph - ph * v);
        }
        fprintf(f, "\"/>\n");
        for (int s = 0; s < pl->n_sizes; s++) {
            double v = ratio_at(pl, s, p);
            if (isnan(v)) continue;
            double x = 100.0 * size_at(pl, s, p) / n_ids;
            fprintf(f, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"3.5\" fill=\"%s\"/>\n",
                    left + pw * x / xmax, top + ph - ph * v, color);
        }
        double ly = top + 10 + 22 * p;
        fprintf(f,
                "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"%s\" "
                "stroke-width=\"2\"/>\n",
                left + pw + 16, ly, left + pw + 40, ly, color);
        fprintf(f, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"3.5\" fill=\"%s\"/>\n", left + pw + 28, ly,
                color);
        fprintf(f, "<text x=\"%.1f\" y=\"%.1f\">", left + pw + 48, ly + 4);
        moeinf_xml_text(f, pl->policies[p]);
        fprintf(f, "</text>\n");
    }
    fprintf(f, "</svg>\n");
    return moeinf_atomic_commit(&af, err);
}
