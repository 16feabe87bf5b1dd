/*
 * quant_ref.h - the scalar reference kernels (quant_ref.c): the entries of the scalar table
 * and the twins every SIMD kernel is tested against. Internal to src/quant and tests.
 * Semantics and summation order are spelled out in quant.h.
 */
#ifndef MOEINF_QUANT_REF_H
#define MOEINF_QUANT_REF_H

#include "quant/quant.h"

/* Activation conversion (from_float): the partner types of quant.h. */
void moeinf_ref_from_float_f32(const float *x, void *y, int64_t n);
void moeinf_ref_from_float_f16(const float *x, void *y, int64_t n);
void moeinf_ref_from_float_bf16(const float *x, void *y, int64_t n);
void moeinf_ref_from_float_q8_0(const float *x, void *y, int64_t n); /* llama.cpp x86 rounding */

/* Weight quantizers (llama.cpp's quantize_row_q8_0_ref / quantize_row_q4_0_ref). */
void moeinf_ref_quantize_q8_0(const float *x, void *y, int64_t n);
void moeinf_ref_quantize_q4_0(const float *x, void *y, int64_t n);

void moeinf_ref_to_float_f32(const void *x, float *y, int64_t n);
void moeinf_ref_to_float_f16(const void *x, float *y, int64_t n);
void moeinf_ref_to_float_bf16(const void *x, float *y, int64_t n);
void moeinf_ref_to_float_q8_0(const void *x, float *y, int64_t n);
void moeinf_ref_to_float_q4_0(const void *x, float *y, int64_t n);

void moeinf_ref_vec_dot_f32(int64_t n, float *s, const void *w, const void *x);
void moeinf_ref_vec_dot_f16(int64_t n, float *s, const void *w, const void *x);
void moeinf_ref_vec_dot_bf16(int64_t n, float *s, const void *w, const void *x);
void moeinf_ref_vec_dot_q8_0(int64_t n, float *s, const void *w, const void *x);
void moeinf_ref_vec_dot_q4_0(int64_t n, float *s, const void *w, const void *x);

void moeinf_ref_vec_dot_m_f32(int64_t n, int m, float *s, const void *w, const void *x,
                              size_t x_stride);
void moeinf_ref_vec_dot_m_f16(int64_t n, int m, float *s, const void *w, const void *x,
                              size_t x_stride);
void moeinf_ref_vec_dot_m_bf16(int64_t n, int m, float *s, const void *w, const void *x,
                               size_t x_stride);
void moeinf_ref_vec_dot_m_q8_0(int64_t n, int m, float *s, const void *w, const void *x,
                               size_t x_stride);
void moeinf_ref_vec_dot_m_q4_0(int64_t n, int m, float *s, const void *w, const void *x,
                               size_t x_stride);

/* nr calls of vec_dot (quant.h, moeinf_vec_dot_rows_fn). */
void moeinf_ref_vec_dot_rows_f32(int64_t n, int64_t nr, float *s, const void *w, size_t w_stride,
                                 const void *x);
void moeinf_ref_vec_dot_rows_f16(int64_t n, int64_t nr, float *s, const void *w, size_t w_stride,
                                 const void *x);
void moeinf_ref_vec_dot_rows_bf16(int64_t n, int64_t nr, float *s, const void *w, size_t w_stride,
                                  const void *x);
void moeinf_ref_vec_dot_rows_q8_0(int64_t n, int64_t nr, float *s, const void *w, size_t w_stride,
                                  const void *x);
void moeinf_ref_vec_dot_rows_q4_0(int64_t n, int64_t nr, float *s, const void *w, size_t w_stride,
                                  const void *x);

/* Q4_1, Q5_0, Q5_1 and the Q8_1 activation (quant_ref.c); the K-quants and the Q8_K
 * activation (quant_ref_k.c). Same contracts as above. */
void moeinf_ref_from_float_q8_1(const float *x, void *y, int64_t n); /* llama.cpp x86 rounding */
void moeinf_ref_from_float_q8_k(const float *x, void *y, int64_t n); /* quantize_row_q8_K_ref */
void moeinf_ref_quantize_q4_1(const float *x, void *y, int64_t n);
void moeinf_ref_quantize_q5_0(const float *x, void *y, int64_t n);
void moeinf_ref_quantize_q5_1(const float *x, void *y, int64_t n);
void moeinf_ref_quantize_q2_k(const float *x, void *y, int64_t n);
void moeinf_ref_quantize_q3_k(const float *x, void *y, int64_t n);
void moeinf_ref_quantize_q4_k(const float *x, void *y, int64_t n);
void moeinf_ref_quantize_q5_k(const float *x, void *y, int64_t n);
void moeinf_ref_quantize_q6_k(const float *x, void *y, int64_t n);
/* The codebook types (quant_ref_iq.c): nearest-codebook quantizers, see there. */
void moeinf_ref_quantize_iq4_nl(const float *x, void *y, int64_t n);
void moeinf_ref_quantize_iq4_xs(const float *x, void *y, int64_t n);
void moeinf_ref_quantize_mxfp4(const float *x, void *y, int64_t n);

#define MOEINF_REF_DECLARE_BLOCK_TYPE(t)                                                           \
    void moeinf_ref_to_float_##t(const void *x, float *y, int64_t n);                              \
    void moeinf_ref_vec_dot_##t(int64_t n, float *s, const void *w, const void *x);                \
    void moeinf_ref_vec_dot_m_##t(int64_t n, int m, float *s, const void *w, const void *x,        \
                                  size_t x_stride);                                                \
    void moeinf_ref_vec_dot_rows_##t(int64_t n, int64_t nr, float *s, const void *w,               \
                                     size_t w_stride, const void *x);

/* The fixed reduction of quant.h's 8 partial sums (separate additions: no reassociation). */
static inline float moeinf_ref_hsum8(const float v[8]) {
    float a = v[0] + v[4];
    float b = v[2] + v[6];
    float c = v[1] + v[5];
    float d = v[3] + v[7];
    return (a + b) + (c + d);
}

/* Defines a block type's reference vec_dot_m and vec_dot_rows as one vec_dot per row (in the
 * file that defines its vec_dot). */
#define MOEINF_REF_DEFINE_ROW_LOOPS(t)                                                             \
    void moeinf_ref_vec_dot_m_##t(int64_t n, int m, float *s, const void *w, const void *x,        \
                                  size_t x_stride) {                                               \
        for (int j = 0; j < m; j++)                                                                \
            moeinf_ref_vec_dot_##t(n, s + j, w, (const uint8_t *)x + (size_t)j * x_stride);        \
    }                                                                                              \
    void moeinf_ref_vec_dot_rows_##t(int64_t n, int64_t nr, float *s, const void *w,               \
                                     size_t w_stride, const void *x) {                             \
        for (int64_t r = 0; r < nr; r++)                                                           \
            moeinf_ref_vec_dot_##t(n, s + r, (const uint8_t *)w + (size_t)r * w_stride, x);        \
    }

MOEINF_REF_DECLARE_BLOCK_TYPE(q4_1)
MOEINF_REF_DECLARE_BLOCK_TYPE(q5_0)
MOEINF_REF_DECLARE_BLOCK_TYPE(q5_1)
MOEINF_REF_DECLARE_BLOCK_TYPE(q2_k)
MOEINF_REF_DECLARE_BLOCK_TYPE(q3_k)
MOEINF_REF_DECLARE_BLOCK_TYPE(q4_k)
MOEINF_REF_DECLARE_BLOCK_TYPE(q5_k)
MOEINF_REF_DECLARE_BLOCK_TYPE(q6_k)
MOEINF_REF_DECLARE_BLOCK_TYPE(iq4_nl)
MOEINF_REF_DECLARE_BLOCK_TYPE(iq4_xs)
MOEINF_REF_DECLARE_BLOCK_TYPE(mxfp4)
void moeinf_ref_to_float_q8_1(const void *x, float *y, int64_t n);
void moeinf_ref_to_float_q8_k(const void *x, float *y, int64_t n);

/* The plain C loop of moeinf_axpy_fn. */
void moeinf_ref_axpy_f32(int64_t n, float a, const float *x, float *y);
void moeinf_ref_qk_f32(int64_t d, int64_t n, int rows, float *s, size_t s_stride, const float *q,
                       size_t q_stride, const void *k, size_t k_stride, bool k_f16, float scale);
void moeinf_ref_wsum_f32(int64_t d, int64_t n, int rows, float *const *out, const float *const *p,
                         const void *v, size_t v_stride, bool v_f16);
void moeinf_ref_delta_rule_f32(float *s, int n, const float *q, const float *k, const float *v,
                               float decay, float beta, float scale, float *out);

#endif
