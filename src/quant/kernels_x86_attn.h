/*
 * kernels_x86_attn.h - attention's float kernels for the x86 tables: the scores of q rows against
 * a run of K rows (quant.h's moeinf_qk_fn) and the weighted sum of V rows (moeinf_wsum_fn);
 * included by kernels_x86.h, everything static.
 *
 * qk_f32 is vec_dot_m's float dot (fdot_rows: FROWS q rows per K row, the summation order of
 * quant.h) with the K row read as it lies in the cache, F16 converted in the register, over all
 * the run's positions in one call. Before, each position and head took a call that converted
 * the row into a buffer and another for its dot: decode after a 2048-token prompt ran 1.05-1.60x
 * faster without them (docs/PERFORMANCE.md).
 *
 * wsum_f32: a pass holds WSUM_ROWS output rows x one chunk of columns in registers (AVX-512: 4
 * vectors of 16, AVX2: 2 of 8) and runs down all n value rows: each value vector is loaded
 * (F16 converted in the register) once for the pass's rows, and each output is loaded and
 * stored once a call, where one axpy per row and value row (moeinf_axpy_fn) loads and stores
 * it every time and adds a separate product. Per element the steps are those of the scalar
 * twin (moeinf_ref_wsum_f32): fma over t in order, so the bits are equal.
 */
#ifndef MOEINF_QUANT_KERNELS_X86_ATTN_H
#define MOEINF_QUANT_KERNELS_X86_ATTN_H

/* s[r * s_stride + t] = dot(k_t, q_r) * scale for t < n, r < rows (k_t of kind kk). */
INLINE void qk_rows(enum fkind kk, int64_t d, int64_t n, int rows, float *s, size_t s_stride,
                    const float *q, size_t q_stride, const uint8_t *k, size_t row_bytes,
                    float scale) {
    const uint8_t *qb = (const uint8_t *)q;
    const size_t q_bytes = q_stride * sizeof(float);
    for (int64_t t = 0; t < n; t++) {
        const uint8_t *kt = k + (size_t)t * row_bytes;
        float dot[FROWS];
        int r = 0;
        for (; r + FROWS <= rows; r += FROWS) {
            fdot_rows2(kk, FK_F32, FROWS, d, dot, kt, qb + (size_t)r * q_bytes, q_bytes);
            for (int i = 0; i < FROWS; i++)
                s[(size_t)(r + i) * s_stride + (size_t)t] = dot[i] * scale;
        }
        for (; r < rows; r++) {
            fdot_rows2(kk, FK_F32, 1, d, dot, kt, qb + (size_t)r * q_bytes, q_bytes);
            s[(size_t)r * s_stride + (size_t)t] = dot[0] * scale;
        }
    }
}

static void qk_f32(int64_t d, int64_t n, int rows, float *s, size_t s_stride, const float *q,
                   size_t q_stride, const void *k, size_t k_stride, bool k_f16, float scale) {
    if (k_f16)
        qk_rows(FK_F16, d, n, rows, s, s_stride, q, q_stride, k, k_stride * 2, scale);
    else
        qk_rows(FK_F32, d, n, rows, s, s_stride, q, q_stride, k, k_stride * 4, scale);
}

#define WSUM_ROWS 4

#if defined(X86_AVX512)
#    define WSUM_VECS 4 /* of 16 columns */

/* 16 values from v (F32 or F16), the lanes outside m zero (not read). */
INLINE __m512 wsum_load(const uint8_t *v, bool f16, __mmask16 m) {
    if (f16) return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, v));
    return _mm512_maskz_loadu_ps(m, v);
}

/* Rows out[0..nr_pass) over columns c .. c + 63, the lanes outside m[j] left alone. */
INLINE void wsum_pass(int nr_pass, int64_t c, const __mmask16 m[WSUM_VECS], int64_t n,
                      float *const *out, const float *const *p, const uint8_t *v, size_t row_bytes,
                      bool f16) {
    const size_t es = f16 ? 2 : 4;
    __m512 acc[WSUM_ROWS][WSUM_VECS];
#    pragma GCC unroll 4
    for (int r = 0; r < nr_pass; r++)
#    pragma GCC unroll 4
        for (int j = 0; j < WSUM_VECS; j++)
            acc[r][j] = _mm512_maskz_loadu_ps(m[j], out[r] + c + (int64_t)16 * j);
    const uint8_t *vc = v + (size_t)c * es;
    for (int64_t t = 0; t < n; t++) {
        const uint8_t *vt = vc + (size_t)t * row_bytes;
        __m512 x[WSUM_VECS];
#    pragma GCC unroll 4
        for (int j = 0; j < WSUM_VECS; j++)
            x[j] = wsum_load(vt + (size_t)(16 * j) * es, f16, m[j]);
#    pragma GCC unroll 4
        for (int r = 0; r < nr_pass; r++) {
            const __m512 pr = _mm512_set1_ps(p[r][t]);
#    pragma GCC unroll 4
            for (int j = 0; j < WSUM_VECS; j++)
                acc[r][j] = _mm512_fmadd_ps(pr, x[j], acc[r][j]);
        }
    }
#    pragma GCC unroll 4
    for (int r = 0; r < nr_pass; r++)
#    pragma GCC unroll 4
        for (int j = 0; j < WSUM_VECS; j++)
            _mm512_mask_storeu_ps(out[r] + c + (int64_t)16 * j, m[j], acc[r][j]);
}

static void wsum_f32(int64_t d, int64_t n, int rows, float *const *out, const float *const *p,
                     const void *v, size_t v_stride, bool v_f16) {
    const size_t row_bytes = v_stride * (v_f16 ? 2 : 4);
    for (int r0 = 0; r0 < rows; r0 += WSUM_ROWS) {
        const int nr = rows - r0 < WSUM_ROWS ? rows - r0 : WSUM_ROWS;
        for (int64_t c = 0; c < d; c += (int64_t)16 * WSUM_VECS) {
            __mmask16 m[WSUM_VECS];
            for (int j = 0; j < WSUM_VECS; j++) {
                const int64_t left = d - c - (int64_t)16 * j;
                m[j] = left >= 16 ? (__mmask16)0xffff
                                  : (left <= 0 ? 0 : (__mmask16)((1u << left) - 1));
            }
            switch (nr) {
            case 4:
                wsum_pass(4, c, m, n, out + r0, p + r0, v, row_bytes, v_f16);
                break;
            case 3:
                wsum_pass(3, c, m, n, out + r0, p + r0, v, row_bytes, v_f16);
                break;
            case 2:
                wsum_pass(2, c, m, n, out + r0, p + r0, v, row_bytes, v_f16);
                break;
            default:
                wsum_pass(1, c, m, n, out + r0, p + r0, v, row_bytes, v_f16);
                break;
            }
        }
    }
}
#else
#    define WSUM_VECS 2 /* of 8 columns */

/* Rows out[0..nr_pass) over columns c .. c + 15. */
INLINE void wsum_pass(int nr_pass, int64_t c, int64_t n, float *const *out, const float *const *p,
                      const uint8_t *v, size_t row_bytes, bool f16) {
    const enum fkind k = f16 ? FK_F16 : FK_F32;
    const size_t es = fk_size(k);
    __m256 acc[WSUM_ROWS][WSUM_VECS];
#    pragma GCC unroll 4
    for (int r = 0; r < nr_pass; r++)
#    pragma GCC unroll 2
        for (int j = 0; j < WSUM_VECS; j++)
            acc[r][j] = _mm256_loadu_ps(out[r] + c + (int64_t)8 * j);
    const uint8_t *vc = v + (size_t)c * es;
    for (int64_t t = 0; t < n; t++) {
        const uint8_t *vt = vc + (size_t)t * row_bytes;
        __m256 x[WSUM_VECS];
#    pragma GCC unroll 2
        for (int j = 0; j < WSUM_VECS; j++)
            x[j] = fload8(k, vt + (size_t)(8 * j) * es);
#    pragma GCC unroll 4
        for (int r = 0; r < nr_pass; r++) {
            const __m256 pr = _mm256_set1_ps(p[r][t]);
#    pragma GCC unroll 2
            for (int j = 0; j < WSUM_VECS; j++)
                acc[r][j] = _mm256_fmadd_ps(pr, x[j], acc[r][j]);
        }
    }
#    pragma GCC unroll 4
    for (int r = 0; r < nr_pass; r++)
#    pragma GCC unroll 2
        for (int j = 0; j < WSUM_VECS; j++)
            _mm256_storeu_ps(out[r] + c + (int64_t)8 * j, acc[r][j]);
}

static void wsum_f32(int64_t d, int64_t n, int rows, float *const *out, const float *const *p,
                     const void *v, size_t v_stride, bool v_f16) {
    const size_t row_bytes = v_stride * (v_f16 ? 2 : 4);
    const int64_t full = d / ((int64_t)8 * WSUM_VECS) * ((int64_t)8 * WSUM_VECS);
    for (int r0 = 0; r0 < rows; r0 += WSUM_ROWS) {
        const int nr = rows - r0 < WSUM_ROWS ? rows - r0 : WSUM_ROWS;
        for (int64_t c = 0; c < full; c += (int64_t)8 * WSUM_VECS) {
            switch (nr) {
            case 4:
                wsum_pass(4, c, n, out + r0, p + r0, v, row_bytes, v_f16);
                break;
            case 3:
                wsum_pass(3, c, n, out + r0, p + r0, v, row_bytes, v_f16);
                break;
            case 2:
                wsum_pass(2, c, n, out + r0, p + r0, v, row_bytes, v_f16);
                break;
            default:
                wsum_pass(1, c, n, out + r0, p + r0, v, row_bytes, v_f16);
                break;
            }
        }
    }
    for (int r = 0; r < rows; r++) /* the last d % 16 columns, one at a time */
        for (int64_t t = 0; t < n; t++)
            for (int64_t i = full; i < d; i++) {
                const size_t at = (size_t)t * v_stride + (size_t)i;
                const float x =
                    v_f16 ? moeinf_fp16_to_fp32(((const uint16_t *)v)[at]) : ((const float *)v)[at];
                out[r][i] = fmaf(p[r][t], x, out[r][i]);
            }
}
#endif

#endif
