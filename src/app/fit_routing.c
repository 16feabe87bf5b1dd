/*
 * fit_routing.c - the expert cache's hit ratio for `moeinf fit` (fit.h), from the simulator
 * (moeinf_sim_run, the engine's own cache and policy code): on a recorded routing, or on a
 * synthetic one of the model's geometry.
 *
 * The synthetic routing: in each layer the experts have a fixed popularity, weight
 * (rank + 1)^-skew over a random order of the experts; each token picks its top_k distinct
 * experts of the layer one at a time, each pick with probability `reuse` one of the previous
 * token's experts of that layer (uniformly), else one drawn by popularity. Requests of 64
 * prefill and 128 decode tokens; the decode tokens' hit ratio is the one reported, after the
 * request's prefill filled the cache, as in a run.
 *
 * The two parameters were fitted to the shared traces (../shared/traces, see its README):
 * for each trace the (skew, reuse) whose synthetic routing of the trace's geometry gives the
 * default policy's hit ratio closest to the trace's own (squared error summed over caches of
 * 10, 25 and 50 % of the experts); bench/fit_calibrate.sh does it and prints both. A model
 * with top_k 1 takes the Llama-4 row, the others the DeepSeek row.
 */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "app/fit.h"
#include "base/rng.h"
#include "base/status.h"
#include "moeinf_sim.h"
#include "trace/trace.h"

struct calib {
    const char *trace; /* the shared trace it was fitted to */
    int top_k_max;     /* used for models with top_k <= this */
    double skew;
    double reuse;
};

/* bench/fit_calibrate.sh, 2026-12-04 (grid: skew 0 .. 1.5 by .3, reuse 0 .. .75 by .15):
 *   Llama-4:  trace .779 .897 .968 at 10/25/50 %, fit .820 .904 .943 (on the grid's edge)
 *   DeepSeek: trace .288 .504 .743, fit .295 .530 .728 */
static const struct calib calib_rows[] = {
    {"llama4_maverick_mmlu (24 x 128, top-1)", 1, 1.50, 0.00},
    {"deepseek_v2_lite_puffin_prefill (26 x 64, top-6)", 1 << 30, 0.60, 0.15},
};

#define PREFILL  64
#define DECODE   128
#define REQUESTS 12

enum moeinf_status cli_fit_synthetic_trace(const char *path, int n_layers, int n_experts,
                                           int top_k, double skew, double reuse, int n_requests,
                                           int n_tokens, uint64_t seed, struct moeinf_error *err) {
    if (n_layers < 1 || n_experts < 1 || top_k < 1 || top_k > n_experts || n_requests < 1 ||
        n_tokens < 1) {
        return moeinf_fail(err, MOEINF_ERR_ARG,
                           "synthetic routing: bad geometry %d layers x %d experts, top %d",
                           n_layers, n_experts, top_k);
    }
    const size_t le = (size_t)n_layers * (size_t)n_experts;
    double *cdf = malloc(le * sizeof *cdf);
    int *prev = malloc((size_t)n_layers * (size_t)top_k * sizeof *prev);
    int *cur = malloc((size_t)top_k * sizeof *cur);
    int *order = malloc((size_t)n_experts * sizeof *order);
    FILE *f = fopen(path, "w");
    if (!cdf || !prev || !cur || !order || !f) {
        free(cdf);
        free(prev);
        free(cur);
        free(order);
        if (f) fclose(f);
        return moeinf_fail(err, f ? MOEINF_ERR_NOMEM : MOEINF_ERR_IO, "%s: cannot write", path);
    }
    uint64_t s = seed;
    for (int l = 0; l < n_layers; l++) {
        for (int e = 0; e < n_experts; e++)
            order[e] = e;
        for (int e = n_experts - 1; e > 0; e--) { /* a random order of the layer's experts */
            int j = (int)(moeinf_splitmix64(&s) % (uint64_t)(e + 1));
            int t = order[e];
            order[e] = order[j];
            order[j] = t;
        }
        double *c = cdf + (size_t)l * (size_t)n_experts;
        for (int r = 0; r < n_experts; r++)
            c[order[r]] = pow(r + 1.0, -skew);
        for (int e = 1; e < n_experts; e++)
            c[e] += c[e - 1];
    }
    const int n_prefill = n_tokens < PREFILL + DECODE ? n_tokens / 3 : PREFILL;
    fprintf(f, "# moe-trace v1\n# model: moeinf fit synthetic routing, skew %.3f reuse %.3f\n"
               "# n_layers: %d\n# n_experts: %d\n# top_k: %d\n",
            skew, reuse, n_layers, n_experts, top_k);
    for (int q = 0; q < n_requests; q++)
        fprintf(f, "# req %d synthetic/%d prefill=%d decode=%d\n", q, q, n_prefill,
                n_tokens - n_prefill);
    for (int q = 0; q < n_requests; q++) {
        for (int t = 0; t < n_tokens; t++) {
            fprintf(f, "%d %c %d ", q, t < n_prefill ? 'P' : 'D', t);
            for (int l = 0; l < n_layers; l++) {
                const double *c = cdf + (size_t)l * (size_t)n_experts;
                int *pv = prev + (size_t)l * (size_t)top_k;
                for (int k = 0; k < top_k; k++) {
                    int e;
                    bool dup;
                    int tries = 0;
                    do {
                        if (t > 0 && tries < 8 && moeinf_splitmix64_unit(&s) < reuse) {
                            e = pv[moeinf_splitmix64(&s) % (uint64_t)top_k];
                        } else {
                            double u = moeinf_splitmix64_unit(&s) * c[n_experts - 1];
                            int lo = 0;
                            int hi = n_experts - 1;
                            while (lo < hi) {
                                int mid = (lo + hi) / 2;
                                if (c[mid] < u) {
                                    lo = mid + 1;
                                } else {
                                    hi = mid;
                                }
                            }
                            e = lo;
                        }
                        dup = false;
                        for (int j = 0; j < k; j++)
                            dup |= cur[j] == e;
                        tries++;
                    } while (dup);
                    cur[k] = e;
                    fprintf(f, "%s%d", k ? "," : "", e);
                }
                memcpy(pv, cur, (size_t)top_k * sizeof *cur);
                fputc(l + 1 < n_layers ? '|' : '\n', f);
            }
        }
    }
    bool ok = !ferror(f);
    ok &= fclose(f) == 0;
    free(cdf);
    free(prev);
    free(cur);
    free(order);
    if (!ok) return moeinf_fail(err, MOEINF_ERR_IO, "%s: writing the routing failed", path);
    return MOEINF_OK;
}

/* MOEINF_ERR_ARG when the trace at path is not of the model's geometry (the simulator would
 * replay it, but its experts would not be the model's). */
static enum moeinf_status check_geometry(const struct cli_fit_model *m, const char *path,
                                         struct moeinf_error *err) {
    struct moeinf_trace_reader *r = NULL;
    enum moeinf_status st = moeinf_trace_open(path, &r, err);
    if (st) return st;
    const struct moeinf_trace_header *h = moeinf_trace_header(r);
    if (h->n_layers != m->n_moe_layers || h->n_experts != m->n_expert ||
        h->top_k != m->n_expert_used) {
        st = moeinf_fail(err, MOEINF_ERR_ARG,
                         "%s: the trace has %d layers x %d experts, top %d; the model %d x %d, "
                         "top %d",
                         path, h->n_layers, h->n_experts, h->top_k, m->n_moe_layers, m->n_expert,
                         m->n_expert_used);
    }
    moeinf_trace_close(r);
    return st;
}

enum moeinf_status cli_fit_hit_ratio(const struct cli_fit_model *m, int slots,
                                     const char *trace_path, uint64_t *misses, double *hit,
                                     double *prefill_hit, char *source, size_t source_size,
                                     struct moeinf_error *err) {
    char tmp[256] = "";
    const char *path = trace_path;
    if (!path) {
        const struct calib *c = &calib_rows[m->n_expert_used <= calib_rows[0].top_k_max ? 0 : 1];
        const char *dir = getenv("TMPDIR"); // NOLINT(concurrency-mt-unsafe): no setenv
        snprintf(tmp, sizeof tmp, "%s/moeinf-fit-XXXXXX", dir && *dir ? dir : "/tmp");
        int fd = mkstemp(tmp);
        if (fd < 0) return moeinf_fail(err, MOEINF_ERR_IO, "%s: cannot create", tmp);
        close(fd);
        enum moeinf_status st = cli_fit_synthetic_trace(
            tmp, m->n_moe_layers, m->n_expert, m->n_expert_used, c->skew, c->reuse, REQUESTS,
            PREFILL + DECODE, 0x5eedu, err);
        if (st) {
            unlink(tmp);
            return st;
        }
        path = tmp;
        snprintf(source, source_size,
                 "synthetic routing (skew %.2f, reuse %.2f: fitted to the shared trace %s)",
                 c->skew, c->reuse, c->trace);
    } else {
        enum moeinf_status st = check_geometry(m, trace_path, err);
        if (st) return st;
        snprintf(source, source_size, "the recorded routing %s", trace_path);
    }
    struct moeinf_sim_params p = moeinf_sim_params_default();
    p.trace_path = path;
    p.cache_experts = slots;
    p.batch = CLI_FIT_BATCH;
    p.decode_misses = misses;
    p.n_decode_misses = misses ? (size_t)m->n_moe_layers * (size_t)m->n_expert : 0;
    struct moeinf_sim_result r;
    enum moeinf_status st = moeinf_sim_run(&p, &r, err);
    if (tmp[0]) unlink(tmp);
    if (st) return st;
    if (r.decode_accesses > 0) {
        *hit = (double)r.decode_hits / (double)r.decode_accesses;
    } else {
        *hit = r.accesses ? (double)r.hits / (double)r.accesses : 0;
    }
    const uint64_t prefill_accesses = r.accesses - r.decode_accesses;
    *prefill_hit =
        prefill_accesses ? (double)(r.hits - r.decode_hits) / (double)prefill_accesses : -1;
    return MOEINF_OK;
}
