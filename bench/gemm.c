/*
 * gemm.c - compute cost of the prefill tiles (the kernel tables' gemm): weight rows times a
 * few activation rows, as an expert's matrix meets the prompt tokens routed to it.
 *
 * CMake builds it with every preset (build/release/bench_gemm):
 *   bench_gemm [type [n [rows [m ...]]]]
 *     type  only this weight type (default, or "all": every type a table has a gemm for)
 *     n     row length (default 2048, a multiple of 256, or of the named type's block)
 *     rows  weight rows (default 1024: 2 MiB of Q8_0, which repeated passes read from L3;
 *           prefill reads an expert's rows from RAM, once per prompt)
 *     m     activation rows, one or more (default 5 8 16 64; an expert of OLMoE sees about
 *           8 of a 64-token prompt, one of Mixtral about 16)
 *
 * For each type, kernel table and m it times one gemm call over all rows (best of 15, one
 * thread) and prints the time per block pair (one weight block against one activation
 * block: 32 elements, 256 for the K-quants) in time-stamp-counter ticks and in nanoseconds of
 * thread CPU time, and whether every output equals the scalar table's vec_dot bit for bit (the
 * kernels' contract; the tests check it too). Compare two builds on the same machine in one
 * sitting: the TSC ticks at a fixed rate, not at the core's clock.
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/clock.h"
#include "quant/quant.h"

static uint32_t float_bits(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

static uint64_t rng = 0x9e3779b97f4a7c15ull;

static float next_float(void) {
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (float)((double)(rng >> 11) * 0x1p-53 - 0.5);
}

/* n_rows rows of n random floats quantized to `type` (weights by the reference quantizer,
 * activations as the engine quantizes them). */
static uint8_t *random_rows(enum moeinf_type type, bool weights, int64_t n, int64_t n_rows,
                            float *tmp) {
    const size_t rb = moeinf_row_bytes(type, n);
    uint8_t *p = malloc((size_t)n_rows * rb);
    if (!p) return NULL;
    for (int64_t r = 0; r < n_rows; r++) {
        for (int64_t i = 0; i < n; i++)
            tmp[i] = next_float();
        if (weights)
            moeinf_quantize_row_ref(type, tmp, p + (size_t)r * rb, n);
        else
            moeinf_kernels_scalar()->from_float[type](tmp, p + (size_t)r * rb, n);
    }
    return p;
}

struct problem {
    enum moeinf_type type;
    int64_t n;
    int64_t rows;
    int m;
    const uint8_t *w;
    const uint8_t *x;
};

/* Prints one line: the table's gemm on the problem. */
static void time_gemm(const struct moeinf_kernels *k, const struct problem *p, float *y) {
    const enum moeinf_type vt = moeinf_type_cpu_get((int)p->type)->vec_dot_type;
    const size_t rb = moeinf_row_bytes(p->type, p->n);
    const size_t xb = moeinf_row_bytes(vt, p->n);
    uint64_t best_ticks = UINT64_MAX;
    double best_s = 1e30;
    for (int pass = 0; pass < 15; pass++) {
        const double s0 = bench_cpu_s();
        const uint64_t t0 = bench_ticks();
        k->gemm[p->type](p->n, p->rows, p->m, y, (size_t)p->rows, p->w, rb, p->x, xb);
        const uint64_t dt = bench_ticks() - t0;
        const double ds = bench_cpu_s() - s0;
        if (dt < best_ticks) best_ticks = dt;
        if (ds < best_s) best_s = ds;
    }
    int64_t differ = 0;
    for (int64_t r = 0; r < p->rows; r++) {
        for (int j = 0; j < p->m; j++) {
            float want;
            moeinf_kernels_scalar()->vec_dot[p->type](p->n, &want, p->w + (size_t)r * rb,
                                                      p->x + (size_t)j * xb);
            differ += float_bits(want) != float_bits(y[(size_t)j * (size_t)p->rows + (size_t)r]);
        }
    }
    const int64_t block = moeinf_type_traits_get((int)p->type)->block_size;
    const double pairs = (double)p->rows * p->m * (double)p->n / (double)block;
    printf("%-8s %-8s %6d %12.3f %12.3f   %s\n", moeinf_type_traits_get((int)p->type)->name,
           k->name, p->m, (double)best_ticks / pairs, best_s / pairs * 1e9,
           differ ? "DIFFERS from vec_dot" : "= vec_dot");
    if (differ) fprintf(stderr, "bench_gemm: %lld outputs differ\n", (long long)differ);
}

/* Times every table's gemm of type t at each m; 0, or an exit status. */
static int bench_type(int t, int64_t n, int64_t rows, const int *ms, int n_ms, int max_m,
                      float *tmp, float *y) {
    const struct moeinf_kernels *tables[3] = {moeinf_kernels_avx2(), moeinf_kernels_avx512(),
                                              moeinf_kernels_amx()};
    const struct moeinf_type_traits *tr = moeinf_type_traits_get(t);
    if (n % tr->block_size != 0 || n % 32 != 0) {
        fprintf(stderr, "bench_gemm: n = %lld is not a multiple of %s's block\n", (long long)n,
                tr->name);
        return 2;
    }
    const enum moeinf_type vt = moeinf_type_cpu_get(t)->vec_dot_type;
    uint8_t *w = random_rows((enum moeinf_type)t, true, n, rows, tmp);
    uint8_t *x = random_rows(vt, false, n, max_m, tmp);
    if (w && x) {
        for (int ti = 0; ti < 3; ti++) {
            if (!tables[ti] || !tables[ti]->gemm[t]) continue;
            for (int i = 0; i < n_ms; i++) {
                const struct problem p = {(enum moeinf_type)t, n, rows, ms[i], w, x};
                time_gemm(tables[ti], &p, y);
            }
        }
    } else {
        fprintf(stderr, "bench_gemm: out of memory\n");
    }
    const int status = w && x ? 0 : 1;
    free(w);
    free(x);
    return status;
}

int main(int argc, char **argv) {
    const char *only = argc > 1 && strcmp(argv[1], "all") != 0 ? argv[1] : NULL;
    const int64_t n = argc > 2 ? (int64_t)strtoll(argv[2], NULL, 10) : 2048;
    const int64_t rows = argc > 3 ? (int64_t)strtoll(argv[3], NULL, 10) : 1024;
    int ms[16] = {5, 8, 16, 64};
    int n_ms = 4;
    if (argc > 4) {
        n_ms = 0;
        for (int a = 4; a < argc && n_ms < 16; a++)
            ms[n_ms++] = (int)strtol(argv[a], NULL, 10);
    }
    int max_m = 0;
    for (int i = 0; i < n_ms; i++) {
        if (ms[i] < 1 || ms[i] > 4096) {
            fprintf(stderr, "bench_gemm: m must be 1 .. 4096\n");
            return 2;
        }
        if (ms[i] > max_m) max_m = ms[i];
    }
    if (rows < 1 || rows > 65536 || n < 32 || n > 1 << 20) {
        fprintf(stderr, "usage: bench_gemm [type [n [rows (1 .. 65536) [m ...]]]]\n");
        return 2;
    }
    const struct moeinf_kernels *tables[3] = {moeinf_kernels_avx2(), moeinf_kernels_avx512(),
                                              moeinf_kernels_amx()};
    float *tmp = malloc((size_t)n * sizeof(float));
    float *y = malloc((size_t)rows * (size_t)max_m * sizeof(float));
    int status = tmp && y ? 0 : 1;
    if (status)
        fprintf(stderr, "bench_gemm: out of memory\n");
    else {
        printf("n = %lld, %lld weight rows, 1 thread, best of 15\n", (long long)n, (long long)rows);
        printf("%-8s %-8s %6s %12s %12s\n", "type", "table", "m", "tsc/pair", "ns/pair");
    }
    int ran = 0;
    for (int t = 0; !status && t < MOEINF_TYPE_COUNT; t++) {
        const struct moeinf_type_traits *tr = moeinf_type_traits_get(t);
        if (!tr || !moeinf_type_cpu_get(t)) continue;
        if (only && strcmp(only, tr->name) != 0) continue;
        bool has_gemm = false;
        for (int ti = 0; ti < 3; ti++)
            has_gemm |= tables[ti] && tables[ti]->gemm[t];
        if (!has_gemm) continue;
        status = bench_type(t, n, rows, ms, n_ms, max_m, tmp, y);
        ran++;
    }
    if (!status && !ran) {
        fprintf(stderr, "bench_gemm: no table here has a gemm%s%s\n", only ? " for " : "",
                only ? only : "");
        status = 2;
    }
    free(tmp);
    free(y);
    return status;
}
