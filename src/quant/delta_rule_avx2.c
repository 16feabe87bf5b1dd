/*
 * delta_rule_avx2.c - the Gated DeltaNet's delta rule for the x86 tables (compiled with the
 * AVX2 and FMA flags; kernels.h). Only called through a table that kernels.c's probe gave.
 */
#if defined(__x86_64__)
#    include <immintrin.h>
#    include <stddef.h>

#    include "quant/kernels.h"

static float hsum8(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

/* Each row in two passes of 8 lanes (decay and S k; the update and S q), with a scalar tail
 * for n not a multiple of 8. */
void moeinf_delta_rule_f32_avx2(float *s, int n, const float *q, const float *k, const float *v,
                                float decay, float beta, float scale, float *out) {
    const __m256 vdecay = _mm256_set1_ps(decay);
    const int n8 = n & ~7;
    for (int r = 0; r < n; r++) {
        float *row = s + (size_t)r * (size_t)n;
        __m256 acc = _mm256_setzero_ps();
        for (int i = 0; i < n8; i += 8) {
            __m256 x = _mm256_mul_ps(_mm256_loadu_ps(row + i), vdecay);
            _mm256_storeu_ps(row + i, x);
            acc = _mm256_fmadd_ps(x, _mm256_loadu_ps(k + i), acc);
        }
        float sk = hsum8(acc);
        for (int i = n8; i < n; i++) {
            row[i] *= decay;
            sk += row[i] * k[i];
        }
        const float d = (v[r] - sk) * beta;
        const __m256 vd = _mm256_set1_ps(d);
        acc = _mm256_setzero_ps();
        for (int i = 0; i < n8; i += 8) {
            __m256 x = _mm256_fmadd_ps(_mm256_loadu_ps(k + i), vd, _mm256_loadu_ps(row + i));
            _mm256_storeu_ps(row + i, x);
            acc = _mm256_fmadd_ps(x, _mm256_loadu_ps(q + i), acc);
        }
        float sq = hsum8(acc);
        for (int i = n8; i < n; i++) {
            row[i] += k[i] * d;
            sq += row[i] * q[i];
        }
        out[r] = sq * scale;
    }
}
#endif
