/*
 * softmax_avx2.c - the softmax of the x86 tables (compiled with the AVX2 and FMA flags;
 * softmax.h): softmax_exp eight lanes at a time, the same operations in the same order, so the
 * bits are those of softmax_ref.c. Only called through a table that kernels.c's probe gave.
 */
#if defined(__x86_64__)
#    include <immintrin.h>

#    include "quant/softmax.h"

static __m256 exp8(__m256 x) {
    const __m256 shift = _mm256_set1_ps(EXP_SHIFT);
    const __m256 t = _mm256_fmadd_ps(x, _mm256_set1_ps(EXP_LOG2E), shift);
    const __m256 n = _mm256_sub_ps(t, shift);
    __m256 r = _mm256_fmadd_ps(n, _mm256_set1_ps(-EXP_LN2_HI), x);
    r = _mm256_fmadd_ps(n, _mm256_set1_ps(-EXP_LN2_LO), r);
    __m256 p = _mm256_fmadd_ps(_mm256_set1_ps(EXP_C7), r, _mm256_set1_ps(EXP_C6));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(EXP_C5));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(EXP_C4));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(EXP_C3));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(EXP_C2));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
    const __m256i bits =
        _mm256_slli_epi32(_mm256_add_epi32(_mm256_sub_epi32(_mm256_castps_si256(t),
                                                            _mm256_set1_epi32((int)EXP_SHIFT_BITS)),
                                           _mm256_set1_epi32(127)),
                          23);
    const __m256 e = _mm256_mul_ps(p, _mm256_castsi256_ps(bits));
    const __m256 under = _mm256_cmp_ps(x, _mm256_set1_ps(EXP_MIN), _CMP_LT_OQ);
    return _mm256_andnot_ps(under, e);
}

/* The largest of s[0..n) and *sink, NaNs passed over as softmax_ref.c's comparison does. */
static float row_max(const float *s, int64_t n, const float *sink) {
    float max = sink ? *sink : -INFINITY;
    __m256 m = _mm256_set1_ps(max);
    int64_t t = 0;
    for (; t + 8 <= n; t += 8)
        m = _mm256_max_ps(_mm256_loadu_ps(s + t), m); /* a NaN first operand gives m */
    float lanes[8];
    _mm256_storeu_ps(lanes, m);
    for (int i = 0; i < 8; i++)
        max = lanes[i] > max ? lanes[i] : max;
    for (; t < n; t++)
        max = s[t] > max ? s[t] : max;
    return max;
}

/* s[0..8) becomes exp(s - max); the values go into the double lanes of lo (the first 4) and hi. */
static void exp_and_add(float *s, __m256 vmax, __m256d *lo, __m256d *hi) {
    const __m256 e = exp8(_mm256_sub_ps(_mm256_loadu_ps(s), vmax));
    _mm256_storeu_ps(s, e);
    *lo = _mm256_add_pd(*lo, _mm256_cvtps_pd(_mm256_castps256_ps128(e)));
    *hi = _mm256_add_pd(*hi, _mm256_cvtps_pd(_mm256_extractf128_ps(e, 1)));
}

void moeinf_softmax_f32_avx2(float *s, int64_t n, const float *sink) {
    const float max = row_max(s, n, sink);
    const __m256 vmax = _mm256_set1_ps(max);
    __m256d acc[4] = {_mm256_setzero_pd(), _mm256_setzero_pd(), _mm256_setzero_pd(),
                      _mm256_setzero_pd()};
    int64_t t = 0;
    for (; t + SOFTMAX_LANES <= n; t += SOFTMAX_LANES) {
        exp_and_add(s + t, vmax, &acc[0], &acc[1]);
        exp_and_add(s + t + 8, vmax, &acc[2], &acc[3]);
    }
    double lane[SOFTMAX_LANES];
    _mm256_storeu_pd(lane, acc[0]);
    _mm256_storeu_pd(lane + 4, acc[1]);
    _mm256_storeu_pd(lane + 8, acc[2]);
    _mm256_storeu_pd(lane + 12, acc[3]);
    for (int64_t i = 0; t + i < n; i++) { /* the tail: lanes 0 .. n % SOFTMAX_LANES - 1 */
        s[t + i] = softmax_exp(s[t + i] - max);
        lane[i] += (double)s[t + i];
    }
    const __m256 inv = _mm256_set1_ps(softmax_inverse(softmax_lanes_total(lane), max, sink));
    for (t = 0; t + 8 <= n; t += 8)
        _mm256_storeu_ps(s + t, _mm256_mul_ps(_mm256_loadu_ps(s + t), inv));
    for (; t < n; t++)
        s[t] *= _mm256_cvtss_f32(inv);
}
#endif
