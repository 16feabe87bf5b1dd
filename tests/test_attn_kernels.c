// ctest-labels: kernels;every-table
/*
 * test_attn_kernels.c - attention's float kernels: the scores (quant.h's moeinf_qk_fn), the
 * softmax (moeinf_softmax_fn, src/quant/softmax.h) and the weighted sum of value rows
 * (moeinf_wsum_fn).
 *
 * Independent expectations: float64 exp, softmax and weighted sums computed here; every table
 * this CPU runs compared bit for bit with the scalar one.
 */
#include <float.h>
#include <stdint.h>

#include "base/rng.h"
#include "quant/quant.h"
#include "quant/quant_ref.h"
#include "quant/softmax.h"
#include "test.h"

static uint64_t rng_state = 0x2545f4914f6cdd1dull;

static double uniform(void) { /* [0, 1) */
    return moeinf_splitmix64_unit(&rng_state);
}

/* Units in the last place of the float nearest to w (w a positive normal float64). */
static double ulps_off(float got, double w) {
    const float near = (float)w;
    return fabs((double)got - w) / ((double)nextafterf(near, INFINITY) - (double)near);
}

/* softmax_exp against float64 exp over [EXP_MIN, 0]: one float in 1021 of the range (stepping
 * through the bit patterns of the negative floats), and the edges of the range reduction
 * (x = -(k + 1/2) ln 2, where |r| is largest). */
static void test_exp_within_an_ulp(void) {
    double worst = 0;
    float worst_x = 0;
    long n = 0;
    uint32_t end;
    const float min = EXP_MIN;
    memcpy(&end, &min, sizeof end);
    for (uint32_t bits = 0x80000000u; bits <= end; bits += 1021, n++) {
        float x;
        memcpy(&x, &bits, sizeof x);
        const double off = ulps_off(softmax_exp(x), exp((double)x));
        if (off > worst) {
            worst = off;
            worst_x = x;
        }
    }
    for (int k = 0; k < 125; k++) {
        const float x = (float)(-(k + 0.5) * 0.6931471805599453);
        for (int d = -2; d <= 2; d++) {
            float y = x;
            for (int i = 0; i < (d < 0 ? -d : d); i++)
                y = nextafterf(y, d < 0 ? -INFINITY : INFINITY);
            worst = fmax(worst, ulps_off(softmax_exp(y), exp((double)y)));
        }
    }
    fprintf(stderr, "exp: worst %.3f ulp at %a over %ld points\n", worst, (double)worst_x, n);
    /* measured: 0.86 ulp here (0.92, at x = -71.04, sampling one float in 16) */
    CHECK_MSG(worst <= 1.25, "%.3f ulp at %a (%ld points)", worst, (double)worst_x, n);
    CHECK(n > 1000000);
    CHECK(softmax_exp(0.0f) == 1.0f && softmax_exp(-0.0f) == 1.0f);
    CHECK(softmax_exp(-INFINITY) == 0.0f && softmax_exp(-88.0f) == 0.0f);
    CHECK(softmax_exp(-FLT_MAX) == 0.0f);
    CHECK(isnan(softmax_exp(NAN)));
}

/* Whether a and b hold the same floats bit for bit. */
static bool same_bits(const float *a, const float *b, size_t n) {
    for (size_t i = 0; i < n; i++) {
        uint32_t x;
        uint32_t y;
        memcpy(&x, a + i, sizeof x);
        memcpy(&y, b + i, sizeof y);
        if (x != y) return false;
    }
    return true;
}

static const struct moeinf_kernels *tables[4];
static int n_tables;

/* float64 softmax of s[0..n) with an optional sink. */
static void softmax_f64(const float *s, int n, const float *sink, double *out) {
    double max = sink ? *sink : -INFINITY;
    for (int t = 0; t < n; t++)
        max = fmax(max, s[t]);
    /* the difference rounded to float, as the kernel's argument (a score of 20 is 2^-20 off) */
    double sum = sink ? exp((double)(*sink - (float)max)) : 0;
    for (int t = 0; t < n; t++) {
        out[t] = exp((double)(s[t] - (float)max));
        sum += out[t];
    }
    for (int t = 0; t < n; t++)
        out[t] /= sum;
}

/* Rows of many lengths (tails of the 8- and 16-lane steps), with no sink, a sink below the
 * scores and one above them; every table gives the scalar table's bits, and every output is
 * within a few units in the last place of float64's softmax. */
static void test_softmax_rows(void) {
    static const int lens[] = {1, 2, 7, 8, 9, 15, 16, 17, 31, 33, 100, 1000, 4099};

    enum {
        MAX_N = 4099
    };

    static float row[MAX_N];
    static float got[MAX_N];
    static float first[MAX_N];
    static double want[MAX_N];
    double worst = 0;
    for (size_t li = 0; li < sizeof lens / sizeof lens[0]; li++) {
        const int n = lens[li];
        for (int kind = 0; kind < 4; kind++) {
            for (int t = 0; t < n; t++)
                row[t] = (float)((uniform() - 0.5) * 24.0);
            if (kind == 3) { /* equal scores, and ones far below the largest */
                for (int t = 0; t < n; t++)
                    row[t] = t % 3 == 0 ? 2.5f : (t % 3 == 1 ? -INFINITY : -1e30f);
                row[0] = 2.5f;
            }
            const float sink_low = -30.0f;
            const float sink_high = 40.0f;
            const float *sink = kind == 1 ? &sink_low : (kind == 2 ? &sink_high : NULL);
            softmax_f64(row, n, sink, want);
            for (int ti = 0; ti < n_tables; ti++) {
                memcpy(got, row, (size_t)n * sizeof(float));
                tables[ti]->softmax_f32(got, n, sink);
                if (ti == 0) memcpy(first, got, (size_t)n * sizeof(float));
                CHECK_MSG(same_bits(got, first, (size_t)n),
                          "%s: n=%d kind %d: not the scalar table's bits", tables[ti]->name, n,
                          kind);
                for (int t = 0; t < n; t++) {
                    /* outputs under 2^-100 may be flushed (exp below EXP_MIN is 0) */
                    const double off = want[t] < 0x1p-100
                                           ? (fabs(got[t] - want[t]) < 0x1p-100 ? 0 : 99)
                                           : ulps_off(got[t], want[t]);
                    worst = fmax(worst, off);
                }
            }
        }
    }
    /* measured: 1.79 ulp; the exponential, 1 / sum and the product round once each */
    CHECK_MSG(worst <= 3.0, "worst %.3f ulp", worst);
    fprintf(stderr, "softmax: worst %.3f ulp from float64 over %d tables\n", worst, n_tables);
}

/* One case of a kernel's shapes: d values a row, n rows of K or V, `rows` rows of q or output,
 * F16 or F32 cache rows. */
struct shape {
    int d, n, rows, f16;
};

#define LEN(a) (int)(sizeof(a) / sizeof((a)[0]))

/* The i-th combination of the lists ds x ns x row_counts x {F32, F16}; false past the last. */
static bool shape_at(int i, const int *ds, int nd, const int *ns, int nn, const int *row_counts,
                     int nr, struct shape *sh) {
    if (i >= nd * nn * nr * 2) return false;
    sh->f16 = i % 2;
    sh->rows = row_counts[i / 2 % nr];
    sh->n = ns[i / 2 / nr % nn];
    sh->d = ds[i / 2 / nr / nn];
    return true;
}

/* out[r] += sum_t p[r][t] v_t over shapes with tails of the 16- and 64-column steps and of the
 * 4-row passes, F32 and F16 rows with a stride wider than d: every table gives the scalar
 * table's bits, within float rounding of float64's sum; a case whose products round differently
 * unfused shows the fused multiply-add. */
static void test_wsum_rows(void) {
    static const int ds[] = {1, 7, 16, 17, 31, 64, 100, 128, 576};
    static const int ns[] = {1, 3, 50};
    static const int row_counts[] = {1, 3, 4, 5, 9};

    enum {
        MAX_D = 576,
        MAX_N = 50,
        MAX_R = 9,
        STRIDE = MAX_D + 13
    };

    static float vf[MAX_N * STRIDE];
    static uint16_t vh[MAX_N * STRIDE];
    static float pv[MAX_R][MAX_N];
    static float out0[MAX_R][MAX_D];
    static float got[MAX_R][MAX_D];
    static float first[MAX_R][MAX_D];
    double worst = 0;
    for (int i = 0; i < MAX_N * STRIDE; i++) {
        vh[i] = moeinf_fp32_to_fp16((float)(uniform() * 4.0 - 2.0));
        vf[i] = (float)(uniform() * 4.0 - 2.0);
    }
    for (int r = 0; r < MAX_R; r++) {
        for (int t = 0; t < MAX_N; t++)
            pv[r][t] = (float)uniform();
        for (int i = 0; i < MAX_D; i++)
            out0[r][i] = (float)(uniform() - 0.5);
    }
    struct shape sh;
    for (int si = 0; shape_at(si, ds, LEN(ds), ns, LEN(ns), row_counts, LEN(row_counts), &sh);
         si++) {
        const int d = sh.d;
        const int n = sh.n;
        const int rows = sh.rows;
        const int f16 = sh.f16;
        float *outs[MAX_R];
        const float *ps[MAX_R];
        for (int r = 0; r < rows; r++) {
            outs[r] = got[r];
            ps[r] = pv[r];
        }
        for (int ti = 0; ti < n_tables; ti++) {
            memcpy(got, out0, sizeof got);
            tables[ti]->wsum_f32(d, n, rows, outs, ps, f16 ? (const void *)vh : (const void *)vf,
                                 STRIDE, f16);
            if (ti == 0) memcpy(first, got, sizeof got);
            bool same = true;
            for (int r = 0; r < MAX_R; r++)
                same = same && same_bits(got[r], first[r], MAX_D);
            CHECK_MSG(same, "%s: d=%d n=%d rows=%d f16=%d: not the scalar table's bits",
                      tables[ti]->name, d, n, rows, f16);
        }
        for (int r = 0; r < MAX_R; r++)
            for (int i = 0; i < MAX_D; i++) {
                double want = out0[r][i];
                if (r < rows && i < d)
                    for (int t = 0; t < n; t++) {
                        const size_t at = (size_t)t * STRIDE + (size_t)i;
                        want +=
                            (double)pv[r][t] * (f16 ? (double)moeinf_fp16_to_fp32(vh[at]) : vf[at]);
                    }
                /* |terms| < 2: each of the n steps rounds by at most 2^-24 of
                 * a sum below 2n + 1 */
                worst = fmax(worst, fabs(got[r][i] - want) / (2.0 * n + 1));
            }
    }
    /* measured: 0.78 x 2^-24 (the bound of n roundings would be 50 x) */
    CHECK_MSG(worst <= 0x1p-24 * 4, "worst %g", worst);
    fprintf(stderr, "wsum: worst %.3g (x (2n + 1)) from float64\n", worst);
    /* fused: 1 + 2^-12 squared is 1 + 2^-11 + 2^-24, which rounds to 1 + 2^-11 unfused; less
     * 1 + 2^-11, fma keeps the 2^-24 */
    float o = -(1.0f + 0x1p-11f);
    float *one_out[1] = {&o};
    const float pone = 1.0f + 0x1p-12f;
    const float *one_p[1] = {&pone};
    for (int ti = 0; ti < n_tables; ti++) {
        o = -(1.0f + 0x1p-11f);
        tables[ti]->wsum_f32(1, 1, 1, one_out, one_p, &pone, 1, false);
        CHECK_MSG(o == 0x1p-24f, "%s: %a", tables[ti]->name, (double)o);
    }
}

/* s[r][t] = dot(k_t, q_r) * scale over shapes with tails of the 16- and 32-value steps and of
 * the 4-row passes, F32 and F16 K rows with a stride wider than d: every table gives the bits of
 * the scalar vec_dot of F32 (tests/test_quant.c checks it against float64) on the row converted
 * first, times scale, which is what attention computed before this kernel. */
static void test_qk_rows(void) {
    static const int ds[] = {1, 7, 32, 33, 64, 128, 576};
    static const int ns[] = {1, 5};
    static const int row_counts[] = {1, 3, 4, 5, 9};

    enum {
        MAX_D = 576,
        MAX_N = 5,
        MAX_R = 9,
        STRIDE = MAX_D + 13,
        S_STRIDE = MAX_N + 3
    };

    static float kf[MAX_N * STRIDE];
    static uint16_t kh[MAX_N * STRIDE];
    static float q[MAX_R * MAX_D];
    static float row[MAX_D];
    const float scale = 0.0883883476f;
    for (int i = 0; i < MAX_N * STRIDE; i++) {
        kh[i] = moeinf_fp32_to_fp16((float)(uniform() * 4.0 - 2.0));
        kf[i] = (float)(uniform() * 4.0 - 2.0);
    }
    for (int i = 0; i < MAX_R * MAX_D; i++)
        q[i] = (float)(uniform() * 2.0 - 1.0);
    int bad = 0;
    int cases = 0;
    struct shape sh;
    for (int si = 0; shape_at(si, ds, LEN(ds), ns, LEN(ns), row_counts, LEN(row_counts), &sh);
         si++) {
        const int d = sh.d;
        const int n = sh.n;
        const int rows = sh.rows;
        const int f16 = sh.f16;
        float want[MAX_R * S_STRIDE] = {0};
        for (int t = 0; t < n; t++) {
            for (int i = 0; i < d; i++)
                row[i] = f16 ? moeinf_fp16_to_fp32(kh[t * STRIDE + i]) : kf[t * STRIDE + i];
            for (int r = 0; r < rows; r++) {
                float dot = 0;
                moeinf_ref_vec_dot_f32(d, &dot, row, q + (size_t)r * MAX_D);
                want[r * S_STRIDE + t] = dot * scale;
            }
        }
        for (int ti = 0; ti < n_tables; ti++) {
            float got[MAX_R * S_STRIDE] = {0};
            tables[ti]->qk_f32(d, n, rows, got, S_STRIDE, q, MAX_D,
                               f16 ? (const void *)kh : (const void *)kf, STRIDE, f16, scale);
            cases++;
            if (!same_bits(got, want, (size_t)MAX_R * S_STRIDE)) {
                bad++;
                fprintf(stderr, "%s: d=%d n=%d rows=%d f16=%d differ\n", tables[ti]->name, d, n,
                        rows, f16);
            }
        }
    }
    CHECK_MSG(bad == 0, "%d of %d cases differ", bad, cases);
    CHECK_EQ_INT(cases, LEN(ds) * LEN(ns) * LEN(row_counts) * 2 * n_tables);
}

int main(void) {
    tables[n_tables++] = moeinf_kernels_scalar();
    if (moeinf_kernels_avx2()) tables[n_tables++] = moeinf_kernels_avx2();
    if (moeinf_kernels_avx512()) tables[n_tables++] = moeinf_kernels_avx512();
    if (moeinf_kernels_amx()) tables[n_tables++] = moeinf_kernels_amx();
    RUN(test_exp_within_an_ulp);
    RUN(test_softmax_rows);
    RUN(test_wsum_rows);
    RUN(test_qk_rows);
    return test_report();
}
