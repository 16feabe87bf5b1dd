/* prefetch_auto.c - per layer and source, whether reading ahead pays (see prefetch_auto.h). */
#include "offload/prefetch_auto.h"

#include <stdlib.h>

#include "base/status.h"

struct source {
    double reads, used; /* decayed sums */
    bool on;
};

struct layer {
    struct source src[MOEINF_PREFETCH_AUTO_SOURCES];
    double spare_ns; /* decayed sum */
    int steps;       /* since the last decision */
};

struct moeinf_prefetch_auto {
    int n_layers;
    struct layer *layers;
};

bool moeinf_prefetch_auto_decide(bool on, double reads, double used, double spare_ns,
                                 double read_ns) {
    if (reads < MOEINF_PREFETCH_AUTO_MIN_READS) return on;
    const double wasted = reads - used;
    if (wasted <= 0.0) return used > 0.0 ? true : on;
    double f = 0.0;
    if (read_ns > 0.0) {
        f = spare_ns / (wasted * read_ns);
        if (f > 1.0) f = 1.0;
    }
    const double cost = MOEINF_PREFETCH_AUTO_COST_MIN + (1.0 - MOEINF_PREFETCH_AUTO_COST_MIN) * (1.0 - f);
    if (used > cost * wasted * (1.0 + MOEINF_PREFETCH_AUTO_H)) return true;
    if (used < cost * wasted * (1.0 - MOEINF_PREFETCH_AUTO_H)) return false;
    return on;
}

enum moeinf_status moeinf_prefetch_auto_init(int n_layers, struct moeinf_prefetch_auto **out,
                                             struct moeinf_error *err) {
    struct moeinf_prefetch_auto *a = calloc(1, sizeof *a);
    if (a) a->layers = calloc((size_t)n_layers, sizeof *a->layers);
    if (!a || !a->layers) {
        free(a);
        return moeinf_fail(err, MOEINF_ERR_NOMEM, "out of memory for the prefetch controller");
    }
    a->n_layers = n_layers;
    *out = a;
    return MOEINF_OK;
}

void moeinf_prefetch_auto_free(struct moeinf_prefetch_auto *a) {
    if (!a) return;
    free(a->layers);
    free(a);
}

bool moeinf_prefetch_auto_step(struct moeinf_prefetch_auto *a, int layer,
                               const struct moeinf_prefetch_auto_obs *obs, uint64_t read_ns) {
    struct layer *l = &a->layers[layer];
    l->spare_ns += (double)obs->spare_ns;
    for (int s = 0; s < MOEINF_PREFETCH_AUTO_SOURCES; s++) {
        l->src[s].reads += obs->reads[s];
        l->src[s].used += obs->used[s];
    }
    if (++l->steps < MOEINF_PREFETCH_AUTO_WINDOW) return false;
    bool changed = false;
    for (int s = 0; s < MOEINF_PREFETCH_AUTO_SOURCES; s++) {
        struct source *src = &l->src[s];
        /* With the source on, its own reads took part of the spare time: added back, it is
         * what the layer would have had with it off. */
        double spare = l->spare_ns + (src->on ? src->reads * (double)read_ns : 0.0);
        bool on = moeinf_prefetch_auto_decide(src->on, src->reads, src->used, spare,
                                              (double)read_ns);
        changed |= on != src->on;
        src->on = on;
        src->reads *= 0.5;
        src->used *= 0.5;
    }
    l->spare_ns *= 0.5;
    l->steps = 0;
    return changed;
}

bool moeinf_prefetch_auto_on(const struct moeinf_prefetch_auto *a, int layer, int source) {
    return a->layers[layer].src[source].on;
}

int moeinf_prefetch_auto_layers_on(const struct moeinf_prefetch_auto *a, int source) {
    int n = 0;
    for (int il = 0; il < a->n_layers; il++)
        n += a->layers[il].src[source].on;
    return n;
}
