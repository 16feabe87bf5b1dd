/*
 * trace_measures.c - the measures the trace tools are built from (trace_tools.h): the Gini
 * coefficient, the sum of the k largest counts, and the skew that uniformly random routing
 * would give (exact distinct count, Monte Carlo shares).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/rng.h"
#include "base/status.h"
#include "trace/trace_tools.h"

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
