/*
 * svg.h - the SVG files the programs write: the heatmap of one request's expert activation
 * matrix (`moeinf trace heatmap`, trace_svg.c), the plot of a simulator sweep (`moeinf sim
 * --sweep --plot`, sim_plot.c), and the escaper of the text both take from files and options
 * (xml.c). In src/app: libmoeinf.so does not export them.
 */
#ifndef MOEINF_APP_SVG_H
#define MOEINF_APP_SVG_H

#include <stdint.h>
#include <stdio.h>

#include "moeinf.h"
#include "moeinf_sim.h"

/*
 * Writes an SVG heatmap of the request's EAM: rows = layers (0 at the top), columns = experts,
 * one <rect> per cell in <g class="cells">, coloured by count on one log scale shared by the
 * panels: 0 white, 1 = #c6dbef ... max = #08306b (ColorBrewer "Blues"), with a colour bar.
 * Phase ALL draws a prefill and a decode panel side by side. `label` (e.g. the trace's file
 * name, or NULL) starts the title. Written atomically.
 */
enum moeinf_status moeinf_trace_eam_svg(const struct moeinf_trace_eam *m, enum moeinf_phase phase,
                                        const char *label, const char *path,
                                        struct moeinf_error *err);

/* The colour of `count` on the heatmap scale whose darkest value is `max`: "#rrggbb\0". */
void moeinf_trace_color(uint32_t count, uint32_t max, char out[8]);

/* A simulator sweep as a line chart: one line per policy of hit ratio against cache size. */
struct moeinf_sim_plot {
    const char *title;    /* starts the title (the trace's file name) */
    const char *accesses; /* which accesses the ratios count: "all" or "decode" */
    int n_ids;            /* layers x experts: x is cache_experts / n_ids, in % */
    int n_sizes, n_policies;
    const char *const *policies; /* [n_policies] legend names */
    const int *cache_experts;    /* [n_sizes][n_policies] */
    const double *ratio;         /* [n_sizes][n_policies] hit ratios; NaN: no point */
};

/* Writes the plot to path: x = cache size in % of all experts (0 to the largest size, on a
 * round step), y = hit ratio (0 to 1); one polyline with dots per policy, legend on the right.
 * MOEINF_ERR_IO naming the path when it cannot be written. */
enum moeinf_status moeinf_sim_plot_svg(const struct moeinf_sim_plot *p, const char *path,
                                       struct moeinf_error *err);

/* Writes s to out as XML text (element content or a quoted attribute value): the five
 * characters XML reserves, & < > " ', as entities, every other byte as it is. */
void moeinf_xml_text(FILE *out, const char *s);

#endif
