/* prefetch_auto.c - per layer and source, whether reading ahead pays (see prefetch_auto.h). */
#include "offload/prefetch_auto.h"

#include <stdlib.h>

#include "base/status.h"

struct source {
    double reads, used; /* decayed sums */
    bool on;            /* wanted by the precision rule */
};

struct layer {
    struct source src[MOEINF_PREFETCH_AUTO_SOURCES];
    double spare_ns; /* decayed sum */
    int steps;       /* since the last decision */
};

_Static_assert(MOEINF_PREFETCH_AUTO_ARM >= 2, "an arm counts all its steps but the first");
#define ARMS    4
#define SAMPLES (2 * (MOEINF_PREFETCH_AUTO_ARM - 1)) /* counted times per kind of arm */

/* The wall-time check's state of one source. */
struct verdict {
    bool keep;   /* the last check's verdict: the source's wanted reads issued */
    int backoff; /* checks' time to wait after it (doubles while it repeats, capped); 0: never
                  * checked */
    int wait;    /* decode iterations before the source's next check */
};

struct moeinf_prefetch_auto {
    int n_layers;
    struct layer *layers;
    /* the wall-time check: the source under check (-1: none), its arm and the arm's steps so
     * far, the times counted with the source on [0] and off [1]; the source whose turn is next */
    int trial, arm, arm_steps, n_samples[2], next;
    uint64_t samples[2][SAMPLES];
    struct verdict v[MOEINF_PREFETCH_AUTO_SOURCES];
    uint64_t checks, kept;
};

/* Arms on, off, off, on. */
static bool arm_on(int arm) {
    return arm == 0 || arm == ARMS - 1;
}

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
    a->trial = -1;
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

/* Whether the precision rule wants `source` in any layer. */
static bool wanted_anywhere(const struct moeinf_prefetch_auto *a, int source) {
    for (int il = 0; il < a->n_layers; il++) {
        if (a->layers[il].src[source].on) return true;
    }
    return false;
}

static int cmp_u64(const void *x, const void *y) {
    uint64_t a = *(const uint64_t *)x;
    uint64_t b = *(const uint64_t *)y;
    return (a > b) - (a < b);
}

/* The median of n >= 1 values (sorts them). */
static double median(uint64_t *v, int n) {
    qsort(v, (size_t)n, sizeof *v, cmp_u64);
    const int mid = n / 2;
    const double hi = (double)v[mid];
    return n % 2 ? hi : ((double)v[mid - 1] + hi) / 2.0;
}

static void trial_end(struct moeinf_prefetch_auto *a, int source) {
    a->trial = -1;
    a->next = (source + 1) % MOEINF_PREFETCH_AUTO_SOURCES;
}

void moeinf_prefetch_auto_iteration(struct moeinf_prefetch_auto *a, uint64_t time_ns) {
    for (int s = 0; s < MOEINF_PREFETCH_AUTO_SOURCES; s++) {
        if (s != a->trial && a->v[s].wait > 0) a->v[s].wait--;
    }
    if (a->trial < 0) {
        /* the first source from `next` on, in turn, that is wanted and waits no more */
        for (int i = 0; i < MOEINF_PREFETCH_AUTO_SOURCES; i++) {
            int s = (a->next + i) % MOEINF_PREFETCH_AUTO_SOURCES;
            if (!wanted_anywhere(a, s) || a->v[s].wait > 0) continue;
            a->trial = s;
            a->arm = a->arm_steps = 0;
            a->n_samples[0] = a->n_samples[1] = 0;
            break;
        }
        return; /* this time was measured before the check */
    }
    const int source = a->trial;
    if (!wanted_anywhere(a, source)) {
        trial_end(a, source); /* nothing left to try; the verdict stays */
        return;
    }
    if (a->arm_steps++ > 0) { /* the first step of an arm is not counted */
        int k = arm_on(a->arm) ? 0 : 1;
        a->samples[k][a->n_samples[k]++] = time_ns;
    }
    if (a->arm_steps < MOEINF_PREFETCH_AUTO_ARM) return;
    a->arm_steps = 0;
    if (++a->arm < ARMS) return;
    bool keep = median(a->samples[0], a->n_samples[0]) < median(a->samples[1], a->n_samples[1]);
    struct verdict *v = &a->v[source];
    /* the same verdict again waits twice as long (1, 2, 4 ... checks' time; half of a check
     * runs the worse arm); a changed one waits one check's time */
    v->backoff = v->backoff > 0 && keep == v->keep ? v->backoff * 2 : 1;
    if (v->backoff > MOEINF_PREFETCH_AUTO_BACKOFF) v->backoff = MOEINF_PREFETCH_AUTO_BACKOFF;
    v->wait = v->backoff * ARMS * MOEINF_PREFETCH_AUTO_ARM;
    v->keep = keep;
    a->checks++;
    a->kept += keep;
    trial_end(a, source);
}

bool moeinf_prefetch_auto_wanted(const struct moeinf_prefetch_auto *a, int layer, int source) {
    return a->layers[layer].src[source].on;
}

bool moeinf_prefetch_auto_on(const struct moeinf_prefetch_auto *a, int layer, int source) {
    if (!a->layers[layer].src[source].on) return false;
    return a->trial == source ? arm_on(a->arm) : a->v[source].keep;
}

void moeinf_prefetch_auto_checks(const struct moeinf_prefetch_auto *a, uint64_t *checks,
                                 uint64_t *kept) {
    *checks = a->checks;
    *kept = a->kept;
}

int moeinf_prefetch_auto_layers_on(const struct moeinf_prefetch_auto *a, int source) {
    int n = 0;
    for (int il = 0; il < a->n_layers; il++)
        n += moeinf_prefetch_auto_on(a, il, source);
    return n;
}
