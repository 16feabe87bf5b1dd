/*
 * bench_kernels.c - memory bandwidth of the vec_dot kernels (decode is a matrix-vector
 * product that streams every weight byte from RAM once per token).
 *
 * CMake builds it with every preset (build/release/bench_kernels):
 *   bench_kernels [MiB [type [n]]]   (weight matrix size, default 256: larger than the
 *                                     caches; 0.5 fits in L2 and shows the compute cost;
 *                                     type: only that one, e.g. q4_0; "stream": only the
 *                                     stream line; n: row length, default 4096, a
 *                                     multiple of 256, or with a type named of its block:
 *                                     bench_kernels 1024 mxfp4 2880 for gpt-oss's experts)
 *
 * For each type and each kernel table this CPU runs, it times vec_dot over every row of a
 * weight matrix (one activation row that stays in L1) and vec_dot_rows over all rows at once
 * (decode), and prints the weight bytes read per second; vec_dot_m with m = 4 and 8
 * activation rows is timed too (its GB/s counts each weight byte once). For comparison it
 * prints a plain streaming read: a float sum over 1 GiB with AVX2 (or scalar C), 8
 * independent accumulators. Single thread; best of 5 passes (25 for matrices under 16 MiB),
 * timed by thread CPU time. The last column, tsc/blk, is vec_dot_rows' time per weight block
 * in time-stamp-counter ticks (x86; the best pass by rdtsc): with a matrix that fits in L2
 * (0.5 MiB) it is the kernel's compute cost per block, which decode must keep below the
 * memory time of a block (the TSC ticks at a fixed rate, not at the core's clock).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "lib/clock.h"
#include "quant/quant.h"

#if defined(__x86_64__)
#    include <immintrin.h>
#    include <x86intrin.h>
#endif

static uint64_t rng = 88172645463325252ull;

static uint64_t next_u64(void) {
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

static float next_float(void) {
    return (float)((double)(next_u64() >> 11) * 0x1p-53 - 0.5);
}

/* A weight matrix of `type` with sane values (no NaN or denormals to slow anything down). */
static void fill_weights(enum moeinf_type type, uint8_t *w, size_t n_rows, int64_t n) {
    size_t rb = moeinf_row_bytes(type, n);
    float *tmp = malloc((size_t)n * sizeof(float));
    uint8_t *row = malloc(rb);
    for (int64_t i = 0; i < n; i++)
        tmp[i] = next_float();
    moeinf_quantize_row_ref(type, tmp, row, n);
    for (size_t r = 0; r < n_rows; r++) {
        memcpy(w + r * rb, row, rb);
        /* Vary the bytes a little per row so that nothing is trivially predictable. */
        w[r * rb + rb / 2] ^= (uint8_t)(r & 1);
    }
    free(tmp);
    free(row);
}

#if defined(__x86_64__)
__attribute__((target("avx2"))) static float stream_sum_avx2(const float *p, size_t n) {
    __m256 a[8];
    for (int j = 0; j < 8; j++)
        a[j] = _mm256_setzero_ps();
    for (size_t i = 0; i + 64 <= n; i += 64)
        for (int j = 0; j < 8; j++)
            a[j] = _mm256_add_ps(a[j], _mm256_loadu_ps(p + i + (size_t)(8 * j)));
    for (int j = 1; j < 8; j++)
        a[0] = _mm256_add_ps(a[0], a[j]);
    float t[8];
    _mm256_storeu_ps(t, a[0]);
    return t[0] + t[1] + t[2] + t[3] + t[4] + t[5] + t[6] + t[7];
}
#endif

#if defined(__x86_64__)
/* For comparison: the structure of llama.cpp's plain (not repacked) AVX2 block dots, written
 * here from its description: per block, the product of the two F16 scales is broadcast and
 * one fma adds the 8 int32 partial sums into a single accumulator. */
#    define LL_TARGET __attribute__((target("avx2,fma,f16c")))

LL_TARGET static inline float ll_hsum(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

LL_TARGET static inline float ll_half(const uint8_t *p) {
    uint16_t h;
    memcpy(&h, p, 2);
    return _cvtsh_ss(h);
}

LL_TARGET static inline __m256 ll_dot32(__m256i w, __m256i x) {
    __m256i t = _mm256_maddubs_epi16(_mm256_sign_epi8(w, w), _mm256_sign_epi8(x, w));
    return _mm256_cvtepi32_ps(_mm256_madd_epi16(t, _mm256_set1_epi16(1)));
}

LL_TARGET static void ll_vec_dot_q8_0(int64_t n, float *s, const void *w, const void *x) {
    const uint8_t *a = w;
    const uint8_t *b = x;
    __m256 acc = _mm256_setzero_ps();
    for (int64_t i = 0; i < n / 32; i++, a += 34, b += 34) {
        __m256 d = _mm256_set1_ps(ll_half(a) * ll_half(b));
        __m256i qa = _mm256_loadu_si256((const __m256i *)(const void *)(a + 2));
        __m256i qb = _mm256_loadu_si256((const __m256i *)(const void *)(b + 2));
        acc = _mm256_fmadd_ps(d, ll_dot32(qa, qb), acc);
    }
    *s = ll_hsum(acc);
}

LL_TARGET static void ll_vec_dot_q4_0(int64_t n, float *s, const void *w, const void *x) {
    const uint8_t *a = w;
    const uint8_t *b = x;
    __m256 acc = _mm256_setzero_ps();
    for (int64_t i = 0; i < n / 32; i++, a += 18, b += 34) {
        __m256 d = _mm256_set1_ps(ll_half(a) * ll_half(b));
        __m128i raw = _mm_loadu_si128((const __m128i *)(const void *)(a + 2));
        __m256i qa =
            _mm256_insertf128_si256(_mm256_castsi128_si256(raw), _mm_srli_epi16(raw, 4), 1);
        qa = _mm256_sub_epi8(_mm256_and_si256(qa, _mm256_set1_epi8(15)), _mm256_set1_epi8(8));
        __m256i qb = _mm256_loadu_si256((const __m256i *)(const void *)(b + 2));
        acc = _mm256_fmadd_ps(d, ll_dot32(qa, qb), acc);
    }
    *s = ll_hsum(acc);
}
#endif

static float stream_sum_c(const float *p, size_t n) {
    float a[8] = {0};
    for (size_t i = 0; i + 8 <= n; i += 8)
        for (int j = 0; j < 8; j++)
            a[j] += p[i + j];
    return a[0] + a[1] + a[2] + a[3] + a[4] + a[5] + a[6] + a[7];
}

static void bench_stream(void) {
    size_t n = (size_t)1 << 28; /* 1 GiB of floats */
    float *p = malloc(n * sizeof(float));
    if (!p) {
        printf("stream: cannot allocate 1 GiB\n");
        return;
    }
    for (size_t i = 0; i < n; i++)
        p[i] = (float)(i & 1023);
    const char *how = "C";
    float (*fn)(const float *, size_t) = stream_sum_c;
#if defined(__x86_64__)
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx2")) {
        fn = stream_sum_avx2;
        how = "avx2";
    }
#endif
    double best = 1e30;
    volatile float sink = 0;
    for (int pass = 0; pass < 5; pass++) {
        double t0 = bench_cpu_s();
        sink += fn(p, n);
        double t = bench_cpu_s() - t0;
        if (t < best) best = t;
    }
    (void)sink;
    printf("%-8s %-8s %9.2f GB/s   (streaming float sum over 1 GiB)\n", "stream", how,
           (double)(n * sizeof(float)) / best * 1e-9);
    free(p);
}

/* The weight matrix and activation rows of one type. */
struct matrix {
    enum moeinf_type type;
    int64_t n;
    const uint8_t *w;
    size_t rows;
    size_t rb; /* bytes per weight row */
    const uint8_t *x;
    size_t xb; /* bytes per activation row */
};

/* gbs: vec_dot, vec_dot_rows, vec_dot_m with m = 4 and 8; ns_row: vec_dot per row; tsc_blk:
 * vec_dot_rows' ticks per block. */
struct timing {
    double gbs[4];
    double ns_row;
    double tsc_blk;
};

static void time_table(const struct moeinf_kernels *kt, const struct matrix *mt, int n_passes,
                       float s[8], float *s_all, struct timing *tm) {
    const int ms[4] = {1, 0, 4, 8}; /* 0: vec_dot_rows */
    const enum moeinf_type type = mt->type;
    const int64_t n = mt->n;
    const int64_t block = moeinf_type_traits_get((int)type)->block_size;
    for (int mi = 0; mi < 4; mi++) {
        int m = ms[mi];
        double best = 1e30;
        uint64_t best_ticks = UINT64_MAX;
        volatile float sink = 0;
        for (int pass = 0; pass < n_passes; pass++) {
            double t0 = bench_cpu_s();
            uint64_t k0 = bench_ticks();
            if (m == 0) {
                kt->vec_dot_rows[type](n, (int64_t)mt->rows, s_all, mt->w, mt->rb, mt->x);
                sink += s_all[0];
            }
            for (size_t r = 0; m != 0 && r < mt->rows; r++) {
                if (m == 1)
                    kt->vec_dot[type](n, s, mt->w + r * mt->rb, mt->x);
                else
                    kt->vec_dot_m[type](n, m, s, mt->w + r * mt->rb, mt->x, mt->xb);
                sink += s[0];
            }
            uint64_t dk = bench_ticks() - k0;
            double t = bench_cpu_s() - t0;
            if (t < best) best = t;
            if (dk < best_ticks) best_ticks = dk;
        }
        (void)sink;
        if (m == 0) tm->tsc_blk = (double)best_ticks / ((double)mt->rows * ((double)n / (double)block));
        tm->gbs[mi] = (double)(mt->rows * mt->rb) / best * 1e-9;
        if (m == 1) tm->ns_row = best / (double)mt->rows * 1e9;
    }
}

int main(int argc, char **argv) {
    double mib = argc > 1 ? strtod(argv[1], NULL) : 256;
    const int64_t n = argc > 3 ? (int64_t)strtoll(argv[3], NULL, 10) : 4096;
    const char *only = argc > 2 ? argv[2] : NULL;
    /* With one type named, n need only be a multiple of its block (gpt-oss: 2880 = 90 x 32). */
    int64_t n_unit = 256;
    for (int t = 0; only && t < MOEINF_TYPE_COUNT; t++) {
        const struct moeinf_type_traits *tr = moeinf_type_traits_get(t);
        if (tr && moeinf_type_cpu_get(t) && strcmp(tr->name, only) == 0) n_unit = tr->block_size;
    }
    if (!(mib >= 0.25 && mib <= 65536) || n < n_unit || n % n_unit != 0) {
        fprintf(stderr, "usage: bench_kernels [MiB >= 0.25 [type [n: a multiple of 256, or of "
                        "the named type's block]]]\n");
        return 2;
    }
    const int n_passes = mib < 16 ? 25 : 5;

    const enum moeinf_type types[] = {
        MOEINF_TYPE_Q4_K, MOEINF_TYPE_Q5_K,  MOEINF_TYPE_Q6_K,   MOEINF_TYPE_Q4_0,
        MOEINF_TYPE_Q8_0, MOEINF_TYPE_Q5_0,  MOEINF_TYPE_Q4_1,   MOEINF_TYPE_Q5_1,
        MOEINF_TYPE_Q2_K, MOEINF_TYPE_Q3_K,  MOEINF_TYPE_BF16,   MOEINF_TYPE_F16,
        MOEINF_TYPE_F32,  MOEINF_TYPE_MXFP4, MOEINF_TYPE_IQ4_NL, MOEINF_TYPE_IQ4_XS};
    const struct moeinf_kernels *tables[3] = {moeinf_kernels_scalar(), moeinf_kernels_avx2(),
                                              moeinf_kernels_avx512()};
    printf("rows of %lld elements, %g MiB weight matrix, 1 thread, best of %d (CPU time)\n",
           (long long)n, mib, n_passes);
    printf("%-8s %-8s %9s %13s %14s %14s %10s %8s\n", "type", "table", "vec_dot", "vec_dot_rows",
           "vec_dot_m m=4", "vec_dot_m m=8", "ns/row", "tsc/blk");
    for (size_t ti = 0; ti < sizeof types / sizeof types[0]; ti++) {
        enum moeinf_type type = types[ti];
        const struct moeinf_type_traits *tr = moeinf_type_traits_get((int)type);
        if (only && strcmp(only, tr->name) != 0) continue;
        enum moeinf_type vt = moeinf_type_cpu_get((int)type)->vec_dot_type;
        size_t rb = moeinf_row_bytes(type, n);
        size_t n_rows = (size_t)(mib * 1048576.0) / rb;
        uint8_t *w = malloc(n_rows * rb);
        size_t xb = moeinf_row_bytes(vt, n);
        uint8_t *x = malloc(8 * xb);
        float *xf = malloc((size_t)n * sizeof(float));
        float s[8];
        float *s_all = malloc(n_rows * sizeof(float));
        if (!w || !x || !xf || !s_all) return 1;
        fill_weights(type, w, n_rows, n);
        for (int r = 0; r < 8; r++) {
            for (int64_t i = 0; i < n; i++)
                xf[i] = next_float();
            moeinf_kernels_scalar()->from_float[vt](xf, x + r * xb, n);
        }
        for (int k = 0; k < 3; k++) {
            const struct moeinf_kernels *kt = tables[k];
            if (!kt) continue;
            /* The scalar twins are slow: time them over a part of the matrix. */
            const struct matrix mat = {type, n, w, kt == tables[0] ? (n_rows + 7) / 8 : n_rows,
                                       rb, x, xb};
            struct timing tm = {{0}, 0, 0};
            time_table(kt, &mat, n_passes, s, s_all, &tm);
            const double *gbs = tm.gbs;
            const double ns_row = tm.ns_row;
            const double tsc_blk = tm.tsc_blk;
            printf("%-8s %-8s %9.2f %13.2f %14.2f %14.2f %10.1f %8.1f\n", tr->name, kt->name,
                   gbs[0], gbs[1], gbs[2], gbs[3], ns_row, tsc_blk);
            fflush(stdout);
        }
#if defined(__x86_64__)
        moeinf_vec_dot_fn ll = type == MOEINF_TYPE_Q8_0   ? ll_vec_dot_q8_0
                               : type == MOEINF_TYPE_Q4_0 ? ll_vec_dot_q4_0
                                                          : NULL;
        if (ll && tables[1]) {
            double best = 1e30;
            volatile float sink = 0;
            for (int pass = 0; pass < n_passes; pass++) {
                double t0 = bench_cpu_s();
                for (size_t r = 0; r < n_rows; r++) {
                    ll(n, s, w + r * rb, x);
                    sink += s[0];
                }
                double t = bench_cpu_s() - t0;
                if (t < best) best = t;
            }
            (void)sink;
            printf("%-8s %-8s %9.2f %13s %14s %14s %10.1f   (llama.cpp-style loop, for "
                   "comparison)\n",
                   tr->name, "ll-avx2", (double)(n_rows * rb) / best * 1e-9, "-", "-", "-",
                   best / (double)n_rows * 1e9);
        }
#endif
        free(w);
        free(x);
        free(xf);
        free(s_all);
    }
    if (!only || strcmp(only, "stream") == 0) bench_stream();
    return 0;
}
