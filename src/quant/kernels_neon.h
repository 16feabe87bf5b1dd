/*
 * kernels_neon.h - what the arm64 NEON kernel files share: the 8-lane accumulator of quant.h's
 * block order, held in two 4-lane vectors, and the exact integer dots they are built from.
 * Included by kernels_neon.c and kernels_neon_kquant.c only (both compiled for aarch64 alone).
 *
 * DESIGN: the results must equal the scalar twins (quant_ref.c) bit for bit, as the x86
 * tables' do (kernels_x86.h): A[b % 8] lives in lane b % 4 of lo (b % 8 < 4) or hi, and every
 * block adds fma(d_w * d_x, (float)isum_b, A[b % 8]) in block order; vfmaq_f32 is that fused
 * multiply-add. The block's integer sums are exact whatever order they are added in.
 */
#ifndef MOEINF_QUANT_KERNELS_NEON_H
#define MOEINF_QUANT_KERNELS_NEON_H

#include <arm_neon.h>
#include <stdint.h>
#include <string.h>

#include "quant/quant.h"

#define NEON_INLINE static inline __attribute__((always_inline))

/* The IEEE half at p (no alignment needed), converted exactly (FCVT). */
NEON_INLINE float neon_half(const uint8_t *p) {
    __fp16 h;
    memcpy(&h, p, sizeof h);
    return (float)h;
}

/* quant.h's A[8]: lane l of lo is A[l], lane l of hi is A[4 + l]. */
struct neon_acc8 {
    float32x4_t lo, hi;
};

NEON_INLINE struct neon_acc8 neon_acc8_zero(void) {
    struct neon_acc8 a = {vdupq_n_f32(0.0f), vdupq_n_f32(0.0f)};
    return a;
}

/* A[l] = fma(d[l], (float)isum[l], A[l]) for l < 8. Lanes a short group leaves empty hold
 * d = 0 and isum = 0, which leave A[l] as it is (A is never -0: it starts at +0, and an exact
 * zero sum rounds to +0). */
NEON_INLINE void neon_acc8_fma(struct neon_acc8 *a, const float d[8], const int32_t isum[8]) {
    a->lo = vfmaq_f32(a->lo, vld1q_f32(d), vcvtq_f32_s32(vld1q_s32(isum)));
    a->hi = vfmaq_f32(a->hi, vld1q_f32(d + 4), vcvtq_f32_s32(vld1q_s32(isum + 4)));
}

/* hsum8 of quant.h: ((A0 + A4) + (A2 + A6)) + ((A1 + A5) + (A3 + A7)). */
NEON_INLINE float neon_acc8_sum(struct neon_acc8 a) {
    float32x4_t t = vaddq_f32(a.lo, a.hi);                       /* t_l = A_l + A_{l+4} */
    float32x2_t u = vadd_f32(vget_low_f32(t), vget_high_f32(t)); /* t0 + t2, t1 + t3 */
    return vget_lane_f32(u, 0) + vget_lane_f32(u, 1);
}

/* The four 32-bit lanes of the products of 16 int8 pairs, each lane the sum of four products
 * (|sum| <= 4 * 128 * 128: exact). vmull/vmlal pair two products in 16 bits: exact for any w
 * and x in [-127, 127] (2 * 128 * 127 < 32767); quant.h allows an unspecified result for an
 * activation quant of -128. */
NEON_INLINE int32x4_t neon_dot16(int8x16_t w, int8x16_t x) {
    int16x8_t p = vmull_s8(vget_low_s8(w), vget_low_s8(x));
    p = vmlal_s8(p, vget_high_s8(w), vget_high_s8(x));
    return vpaddlq_s16(p);
}

/* The exact integer dot of 32 int8 pairs, as four lanes (add them for the sum). */
NEON_INLINE int32x4_t neon_dot32(int8x16_t w0, int8x16_t w1, const int8_t *x) {
    return vaddq_s32(neon_dot16(w0, vld1q_s8(x)), neon_dot16(w1, vld1q_s8(x + 16)));
}

/* The raw NEON table (kernels_neon.c) and its K-quant kernels (kernels_neon_kquant.c). */
const struct moeinf_kernels *moeinf_kernels_neon_table(void);
void moeinf_neon_vec_dot_q4_k(int64_t n, float *s, const void *w, const void *x);
void moeinf_neon_vec_dot_q6_k(int64_t n, float *s, const void *w, const void *x);

#endif
