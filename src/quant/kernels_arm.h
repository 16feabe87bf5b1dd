/*
 * kernels_arm.h - the arm64 kernel bodies, included by kernels_neon.c and kernels_dotprod.c,
 * each compiled with its own flags (none: Advanced SIMD is arm64's baseline; and
 * -march=armv8.2-a+dotprod). Everything here is static; each including file builds its table
 * with ARM_TABLE and exports only its getter. Where the compiler has the dot product extension
 * (__ARM_FEATURE_DOTPROD), the int8 block dots are SDOT instructions (neon_dot16, neon_dot32);
 * nothing else differs between the two tables.
 *
 * What the tables cover: the float dots (F32, F16, BF16), the 32-element block dots of Q8_0,
 * Q4_0, IQ4_NL and MXFP4, and the K-quants of Q4_K_M files, Q4_K and Q6_K
 * (kernels_arm_kquant.h): the types of the models people run. The other types' dots, every
 * from_float and to_float, and the float helpers of attention are the scalar twins'
 * (quant_ref.c), as is prefill's tile (gemm NULL: vec_dot_m row by row). vec_dot_m and
 * vec_dot_rows call the table's vec_dot once per row, so they equal it bit for bit by
 * construction; sharing the activation's preparation across rows, as the x86 tables do, is not
 * done here.
 *
 * DESIGN: the results must equal the scalar twins (quant_ref.c) bit for bit, as the x86
 * tables' do (kernels_x86.h): A[b % 8] lives in lane b % 4 of lo (b % 8 < 4) or hi, and every
 * block adds fma(d_w * d_x, (float)isum_b, A[b % 8]) in block order; vfmaq_f32 is that fused
 * multiply-add. A block's integer sums are exact whatever order they are added in.
 * test_quant checks every entry against its twin on an arm64 machine or under qemu-user
 * (tools/arm64_kernels_check.sh, in CI). Speed on arm64 hardware has not been measured.
 */
#ifndef MOEINF_QUANT_KERNELS_ARM_H
#define MOEINF_QUANT_KERNELS_ARM_H

#include <arm_neon.h>
#include <stdint.h>
#include <string.h>

#include "quant/kernels.h"
#include "quant/quant_ref.h"
#include "quant/softmax.h"

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
 * (|sum| <= 4 * 128 * 128: exact). With the dot product extension one SDOT; without it
 * vmull/vmlal pair two products in 16 bits, exact for any w and x in [-127, 127]
 * (2 * 128 * 127 < 32767); quant.h allows an unspecified result for an activation quant of
 * -128, and the kernels whose weights are small unsigned quants are exact for any. */
NEON_INLINE int32x4_t neon_dot16(int8x16_t w, int8x16_t x) {
#if defined(__ARM_FEATURE_DOTPROD)
    return vdotq_s32(vdupq_n_s32(0), w, x);
#else
    int16x8_t p = vmull_s8(vget_low_s8(w), vget_low_s8(x));
    p = vmlal_s8(p, vget_high_s8(w), vget_high_s8(x));
    return vpaddlq_s16(p);
#endif
}

/* The exact integer dot of 32 int8 pairs, as four lanes (add them for the sum). */
NEON_INLINE int32x4_t neon_dot32(int8x16_t w0, int8x16_t w1, const int8_t *x) {
#if defined(__ARM_FEATURE_DOTPROD)
    return vdotq_s32(vdotq_s32(vdupq_n_s32(0), w0, vld1q_s8(x)), w1, vld1q_s8(x + 16));
#else
    return vaddq_s32(neon_dot16(w0, vld1q_s8(x)), neon_dot16(w1, vld1q_s8(x + 16)));
#endif
}

/* One block's terms in quant.h's order: its exact integer sum and scale product, and for the
 * types with mins (Q4_K) the second pair, A[b % 8] = fma(dmin, (float)imin, A[b % 8]). */
struct arm_block_terms {
    int32_t isum, imin;
    float d, dmin;
};

typedef struct arm_block_terms (*arm_block_terms_fn)(const uint8_t *w, const uint8_t *x, int64_t b);

/* s = hsum8(A) over nb blocks in order, eight to a step: A[b % 8] = fma(d_b, (float)isum_b,
 * A[b % 8]), then, with mins, fma(dmin_b, (float)imin_b, A[b % 8]). `terms` is a constant at
 * every call, so the compiler inlines it (no indirect call is left in the loop). */
NEON_INLINE float blocks8_dot(int64_t nb, const void *w, const void *x, bool mins,
                              arm_block_terms_fn terms) {
    struct neon_acc8 acc = neon_acc8_zero();
    for (int64_t b0 = 0; b0 < nb; b0 += 8) {
        float d[8] = {0};
        float dmin[8] = {0};
        int32_t isum[8] = {0};
        int32_t imin[8] = {0};
        const int64_t g = nb - b0 < 8 ? nb - b0 : 8;
        for (int64_t l = 0; l < g; l++) {
            const struct arm_block_terms t = terms(w, x, b0 + l);
            isum[l] = t.isum;
            d[l] = t.d;
            imin[l] = t.imin;
            dmin[l] = t.dmin;
        }
        neon_acc8_fma(&acc, d, isum);
        if (mins) neon_acc8_fma(&acc, dmin, imin);
    }
    return neon_acc8_sum(acc);
}

#define Q8_0_BYTES 34 /* sizeof(struct moeinf_block_q8_0) */

/* ---- float dots: quant.h's P[k % 32] in eight 4-lane vectors ------------------------------ */

/* Four elements of a row of `kind` (0 F32, 1 F16, 2 BF16) as floats, exactly. */
NEON_INLINE float32x4_t load4(const void *p, int64_t k, int kind) {
    if (kind == 0) return vld1q_f32((const float *)p + k);
    uint16x4_t h = vld1_u16((const uint16_t *)p + k);
    if (kind == 1) return vcvt_f32_f16(vreinterpret_f16_u16(h));
    return vreinterpretq_f32_u32(vshll_n_u16(h, 16));
}

/* P[k % 32] = fma(w[k], x[k], P[k % 32]) over 32 elements: vector i holds P[4i .. 4i + 3]. */
NEON_INLINE void fma32(float32x4_t p[8], const void *w, const void *x, int64_t k, int kind) {
    for (int64_t i = 0; i < 8; i++)
        p[i] = vfmaq_f32(p[i], load4(w, k + 4 * i, kind), load4(x, k + 4 * i, kind));
}

NEON_INLINE float float_dot(int64_t n, const void *w, const void *x, int kind) {
    float32x4_t p[8];
    for (int i = 0; i < 8; i++)
        p[i] = vdupq_n_f32(0.0f);
    int64_t k = 0;
    for (; k + 32 <= n; k += 32)
        fma32(p, w, x, k, kind);
    if (k < n) {
        /* The last partial chunk, zero-padded: fma(0, 0, P) leaves P as it is. */
        const size_t bytes = (size_t)(n - k) * (kind == 0 ? 4 : 2);
        const uint8_t *wk = (const uint8_t *)w + (size_t)k * (kind == 0 ? 4 : 2);
        const uint8_t *xk = (const uint8_t *)x + (size_t)k * (kind == 0 ? 4 : 2);
        if (kind == 0) {
            float wbuf[32] = {0};
            float xbuf[32] = {0};
            memcpy(wbuf, wk, bytes);
            memcpy(xbuf, xk, bytes);
            fma32(p, wbuf, xbuf, 0, kind);
        } else {
            uint16_t wbuf[32] = {0};
            uint16_t xbuf[32] = {0};
            memcpy(wbuf, wk, bytes);
            memcpy(xbuf, xk, bytes);
            fma32(p, wbuf, xbuf, 0, kind);
        }
    }
    /* Q[l] = (P[l] + P[l+8]) + (P[l+16] + P[l+24]): lanes 0-3 from p0, p2, p4, p6, lanes
     * 4-7 from p1, p3, p5, p7. */
    struct neon_acc8 q = {vaddq_f32(vaddq_f32(p[0], p[2]), vaddq_f32(p[4], p[6])),
                          vaddq_f32(vaddq_f32(p[1], p[3]), vaddq_f32(p[5], p[7]))};
    return neon_acc8_sum(q);
}

static void vec_dot_f32(int64_t n, float *s, const void *w, const void *x) {
    *s = float_dot(n, w, x, 0);
}

static void vec_dot_f16(int64_t n, float *s, const void *w, const void *x) {
    *s = float_dot(n, w, x, 1);
}

static void vec_dot_bf16(int64_t n, float *s, const void *w, const void *x) {
    *s = float_dot(n, w, x, 2);
}

/* ---- blocks of 32 against the Q8_0 activation ---------------------------------------------- */

/* The exact integer dot of one weight block (its 32 values as two int8 vectors) with the
 * activation block's quants, by weight type. */
NEON_INLINE int32_t block_isum(enum moeinf_type t, const uint8_t *bw, const int8_t *xq,
                               int8x16_t table) {
    int8x16_t w0;
    int8x16_t w1;
    if (t == MOEINF_TYPE_Q8_0) {
        w0 = vld1q_s8((const int8_t *)bw + 2);
        w1 = vld1q_s8((const int8_t *)bw + 18);
    } else {
        /* 16 bytes of nibbles: elements 0-15 in the low nibbles, 16-31 in the high ones */
        uint8x16_t q = vld1q_u8(bw + (t == MOEINF_TYPE_MXFP4 ? 1 : 2));
        uint8x16_t lo = vandq_u8(q, vdupq_n_u8(15));
        uint8x16_t hi = vshrq_n_u8(q, 4);
        if (t == MOEINF_TYPE_Q4_0) {
            w0 = vsubq_s8(vreinterpretq_s8_u8(lo), vdupq_n_s8(8));
            w1 = vsubq_s8(vreinterpretq_s8_u8(hi), vdupq_n_s8(8));
        } else { /* the codebook types */
            w0 = vqtbl1q_s8(table, lo);
            w1 = vqtbl1q_s8(table, hi);
        }
    }
    return vaddvq_s32(neon_dot32(w0, w1, xq));
}

/* MXFP4's halved E8M0 scale 2^(e-128), as moeinf_e8m0_to_fp32_half (inlined here). */
NEON_INLINE float e8m0_half(uint8_t e) {
    uint32_t bits = e < 2 ? 0x00200000u << e : (uint32_t)(e - 1) << 23;
    float f;
    memcpy(&f, &bits, sizeof f);
    return f;
}

/* One block of 32 against its Q8_0 activation block: the terms of quant.h's order. */
NEON_INLINE struct arm_block_terms block32_terms(enum moeinf_type t, const uint8_t *w,
                                                 const uint8_t *x, int64_t b) {
    const size_t wbytes = t == MOEINF_TYPE_Q8_0    ? Q8_0_BYTES
                          : t == MOEINF_TYPE_MXFP4 ? sizeof(struct moeinf_block_mxfp4)
                                                   : sizeof(struct moeinf_block_q4_0);
    const int8x16_t table =
        vld1q_s8(t == MOEINF_TYPE_MXFP4 ? moeinf_kvalues_mxfp4 : moeinf_kvalues_iq4nl);
    const uint8_t *bw = w + (size_t)b * wbytes;
    const uint8_t *bx = x + (size_t)b * Q8_0_BYTES;
    const float dw = t == MOEINF_TYPE_MXFP4 ? e8m0_half(bw[0]) : neon_half(bw);
    struct arm_block_terms terms = {
        .isum = block_isum(t, bw, (const int8_t *)bx + 2, table),
        .d = dw * neon_half(bx),
    };
    return terms;
}

NEON_INLINE struct arm_block_terms q8_0_terms(const uint8_t *w, const uint8_t *x, int64_t b) {
    return block32_terms(MOEINF_TYPE_Q8_0, w, x, b);
}

NEON_INLINE struct arm_block_terms q4_0_terms(const uint8_t *w, const uint8_t *x, int64_t b) {
    return block32_terms(MOEINF_TYPE_Q4_0, w, x, b);
}

NEON_INLINE struct arm_block_terms iq4_nl_terms(const uint8_t *w, const uint8_t *x, int64_t b) {
    return block32_terms(MOEINF_TYPE_IQ4_NL, w, x, b);
}

NEON_INLINE struct arm_block_terms mxfp4_terms(const uint8_t *w, const uint8_t *x, int64_t b) {
    return block32_terms(MOEINF_TYPE_MXFP4, w, x, b);
}

static void vec_dot_q8_0(int64_t n, float *s, const void *w, const void *x) {
    *s = blocks8_dot(n / 32, w, x, false, q8_0_terms);
}

static void vec_dot_q4_0(int64_t n, float *s, const void *w, const void *x) {
    *s = blocks8_dot(n / 32, w, x, false, q4_0_terms);
}

static void vec_dot_iq4_nl(int64_t n, float *s, const void *w, const void *x) {
    *s = blocks8_dot(n / 32, w, x, false, iq4_nl_terms);
}

static void vec_dot_mxfp4(int64_t n, float *s, const void *w, const void *x) {
    *s = blocks8_dot(n / 32, w, x, false, mxfp4_terms);
}

#include "quant/kernels_arm_kquant.h"

/* ---- many rows: one vec_dot per row ------------------------------------------------------- */

#define NEON_ROW_LOOPS(t, dot)                                                                     \
    static void vec_dot_m_##t(int64_t n, int m, float *s, const void *w, const void *x,            \
                              size_t x_stride) {                                                   \
        for (int j = 0; j < m; j++)                                                                \
            dot(n, s + j, w, (const uint8_t *)x + (size_t)j * x_stride);                           \
    }                                                                                              \
    static void vec_dot_rows_##t(int64_t n, int64_t nr, float *s, const void *w, size_t w_stride,  \
                                 const void *x) {                                                  \
        for (int64_t r = 0; r < nr; r++)                                                           \
            dot(n, s + r, (const uint8_t *)w + (size_t)r * w_stride, x);                           \
    }

NEON_ROW_LOOPS(f32, vec_dot_f32)
NEON_ROW_LOOPS(f16, vec_dot_f16)
NEON_ROW_LOOPS(bf16, vec_dot_bf16)
NEON_ROW_LOOPS(q8_0, vec_dot_q8_0)
NEON_ROW_LOOPS(q4_0, vec_dot_q4_0)
NEON_ROW_LOOPS(iq4_nl, vec_dot_iq4_nl)
NEON_ROW_LOOPS(mxfp4, vec_dot_mxfp4)
NEON_ROW_LOOPS(q4_k, vec_dot_q4_k)
NEON_ROW_LOOPS(q6_k, vec_dot_q6_k)

/* ---- the table ---------------------------------------------------------------------------- */

/* A type whose kernels are all the scalar twins'. */
#define ARM_REF_ENTRY(T, t)                                                                        \
    MOEINF_KERNELS_ENTRY(T, NULL, moeinf_ref_to_float_##t, moeinf_ref_vec_dot_##t,                 \
                         moeinf_ref_vec_dot_m_##t, moeinf_ref_vec_dot_rows_##t)

/* A block type with this file's dots and the scalar dequantization. */
#define ARM_ENTRY(T, t)                                                                            \
    MOEINF_KERNELS_ENTRY(T, NULL, moeinf_ref_to_float_##t, vec_dot_##t, vec_dot_m_##t,             \
                         vec_dot_rows_##t)

/* A table's initializer: this file's dots, the scalar twins for the rest. */
#define ARM_TABLE(table_name)                                                                      \
    {                                                                                              \
        .name = (table_name),                                                                      \
        MOEINF_KERNELS_ENTRY(MOEINF_TYPE_F32, moeinf_ref_from_float_f32, moeinf_ref_to_float_f32,  \
                             vec_dot_f32, vec_dot_m_f32, vec_dot_rows_f32),                        \
        MOEINF_KERNELS_ENTRY(MOEINF_TYPE_F16, moeinf_ref_from_float_f16, moeinf_ref_to_float_f16,  \
                             vec_dot_f16, vec_dot_m_f16, vec_dot_rows_f16),                        \
        MOEINF_KERNELS_ENTRY(MOEINF_TYPE_BF16, moeinf_ref_from_float_bf16,                         \
                             moeinf_ref_to_float_bf16, vec_dot_bf16, vec_dot_m_bf16,               \
                             vec_dot_rows_bf16),                                                   \
        MOEINF_KERNELS_ENTRY(MOEINF_TYPE_Q8_0, moeinf_ref_from_float_q8_0,                         \
                             moeinf_ref_to_float_q8_0, vec_dot_q8_0, vec_dot_m_q8_0,               \
                             vec_dot_rows_q8_0),                                                   \
        MOEINF_KERNELS_ENTRY(MOEINF_TYPE_Q8_1, moeinf_ref_from_float_q8_1,                         \
                             moeinf_ref_to_float_q8_1, NULL, NULL, NULL),                          \
        MOEINF_KERNELS_ENTRY(MOEINF_TYPE_Q8_K, moeinf_ref_from_float_q8_k,                         \
                             moeinf_ref_to_float_q8_k, NULL, NULL, NULL),                          \
        ARM_ENTRY(MOEINF_TYPE_Q4_0, q4_0), ARM_REF_ENTRY(MOEINF_TYPE_Q4_1, q4_1),                  \
        ARM_REF_ENTRY(MOEINF_TYPE_Q5_0, q5_0), ARM_REF_ENTRY(MOEINF_TYPE_Q5_1, q5_1),              \
        ARM_REF_ENTRY(MOEINF_TYPE_Q2_K, q2_k), ARM_REF_ENTRY(MOEINF_TYPE_Q3_K, q3_k),              \
        ARM_ENTRY(MOEINF_TYPE_Q4_K, q4_k), ARM_REF_ENTRY(MOEINF_TYPE_Q5_K, q5_k),                  \
        ARM_ENTRY(MOEINF_TYPE_Q6_K, q6_k), ARM_ENTRY(MOEINF_TYPE_IQ4_NL, iq4_nl),                  \
        ARM_REF_ENTRY(MOEINF_TYPE_IQ4_XS, iq4_xs), ARM_ENTRY(MOEINF_TYPE_MXFP4, mxfp4),            \
        .axpy_f32 = moeinf_ref_axpy_f32, .softmax_f32 = moeinf_ref_softmax_f32,                    \
        .qk_f32 = moeinf_ref_qk_f32, .wsum_f32 = moeinf_ref_wsum_f32,                              \
        .delta_rule_f32 = moeinf_ref_delta_rule_f32,                                               \
    }

#endif
