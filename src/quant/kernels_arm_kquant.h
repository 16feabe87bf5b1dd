/*
 * kernels_arm_kquant.h - the arm64 tables' K-quant dots, part of kernels_arm.h (which includes
 * it): Q4_K and Q6_K (the tensors of a Q4_K_M file) against the Q8_K activation. Per
 * super-block the exact integers isum (and imin for Q4_K) of quant.h, then its two fused
 * multiply-adds into A[b % 8], eight super-blocks to a step.
 *
 * The weights' quants are unsigned (Q4_K 0..15, Q6_K 0..63), so every product pair fits 16
 * bits for any activation quant (2 * 63 * 128 < 32767). Q6_K's quants are stored plus 32:
 * sum (q - 32) x = sum q x - 32 * sum x, and the activation's bsums hold each sub-block's sum x.
 */
#ifndef MOEINF_QUANT_KERNELS_ARM_KQUANT_H
#define MOEINF_QUANT_KERNELS_ARM_KQUANT_H

#define Q4_K_BYTES 144 /* sizeof(struct moeinf_block_q4_k) */
#define Q6_K_BYTES 210 /* sizeof(struct moeinf_block_q6_k) */
#define Q8_K_BYTES 292 /* sizeof(struct moeinf_block_q8_k): d (F32), qs[256], bsums[16] */

/* The activation super-block's d, quants and the sums of its 16 sub-blocks of 16. */
struct q8k_view {
    float d;
    const int8_t *qs;
    int16_t bsums[16];
};

NEON_INLINE struct q8k_view q8k_at(const uint8_t *p) {
    struct q8k_view v;
    memcpy(&v.d, p, sizeof v.d);
    v.qs = (const int8_t *)p + 4;
    memcpy(v.bsums, p + 260, sizeof v.bsums);
    return v;
}

/* Q4_K's 6-bit scale and min of sub-block j < 8, packed in 12 bytes (quant_ref_k.c). */
NEON_INLINE void scale_min_k4(int j, const uint8_t *q, int32_t *sc, int32_t *m) {
    if (j < 4) {
        *sc = q[j] & 63;
        *m = q[j + 4] & 63;
    } else {
        *sc = (q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4);
        *m = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
    }
}

/* One Q4_K super-block: isum = sum_j sc_j * (quants of sub-block j . activation),
 * imin = sum_j m_j * (bsums[2j] + bsums[2j + 1]). Sub-blocks 2c and 2c + 1 are the low and
 * high nibbles of bytes 32c .. 32c + 31. */
NEON_INLINE void q4_k_sums(const uint8_t *bw, const struct q8k_view *a, int32_t *isum,
                           int32_t *imin) {
    const uint8_t *qs = bw + 16;
    int32x4_t acc = vdupq_n_s32(0);
    int32_t mins = 0;
    for (size_t c = 0; c < 4; c++) {
        uint8x16_t q0 = vld1q_u8(qs + 32 * c);
        uint8x16_t q1 = vld1q_u8(qs + 32 * c + 16);
        int8x16_t lo0 = vreinterpretq_s8_u8(vandq_u8(q0, vdupq_n_u8(15)));
        int8x16_t lo1 = vreinterpretq_s8_u8(vandq_u8(q1, vdupq_n_u8(15)));
        int8x16_t hi0 = vreinterpretq_s8_u8(vshrq_n_u8(q0, 4));
        int8x16_t hi1 = vreinterpretq_s8_u8(vshrq_n_u8(q1, 4));
        for (size_t h = 0; h < 2; h++) {
            const size_t j = 2 * c + h;
            int32_t sc;
            int32_t m;
            scale_min_k4((int)j, bw + 4, &sc, &m);
            int32x4_t dot = h == 0 ? neon_dot32(lo0, lo1, a->qs + 64 * c)
                                   : neon_dot32(hi0, hi1, a->qs + 64 * c + 32);
            acc = vmlaq_n_s32(acc, dot, sc);
            mins += m * (a->bsums[2 * j] + a->bsums[2 * j + 1]);
        }
    }
    *isum = vaddvq_s32(acc);
    *imin = mins;
}

NEON_INLINE struct arm_block_terms q4_k_terms(const uint8_t *w, const uint8_t *x, int64_t b) {
    const uint8_t *bw = w + (size_t)b * Q4_K_BYTES;
    const struct q8k_view a = q8k_at(x + (size_t)b * Q8_K_BYTES);
    struct arm_block_terms t;
    q4_k_sums(bw, &a, &t.isum, &t.imin);
    t.d = neon_half(bw) * a.d;
    t.dmin = -(neon_half(bw + 2) * a.d);
    return t;
}

static void vec_dot_q4_k(int64_t n, float *s, const void *w, const void *x) {
    *s = blocks8_dot(n / MOEINF_QK_K, w, x, true, q4_k_terms);
}

/* One Q6_K super-block's isum = sum_j scale_j * (quants of sub-block j minus 32 . activation).
 * In each half (128 quants), bytes l of ql and qh (l < 32) hold quants l, l + 32, l + 64 and
 * l + 96 (quant_ref_k.c's q6_quants): the low nibbles of ql[l] and ql[l + 32], then their
 * high nibbles, with two bits of qh[l] each on top. */
NEON_INLINE int32_t q6_k_isum(const uint8_t *bw, const struct q8k_view *a) {
    const int8_t *scales = (const int8_t *)bw + 192;
    int32x4_t acc = vdupq_n_s32(0);
    for (size_t half = 0; half < 2; half++) {
        const uint8_t *ql = bw + 64 * half;
        const uint8_t *qh = bw + 128 + 32 * half;
        for (size_t l0 = 0; l0 < 32; l0 += 16) {
            uint8x16_t lo = vld1q_u8(ql + l0);
            uint8x16_t hi = vld1q_u8(ql + 32 + l0);
            uint8x16_t top = vld1q_u8(qh + l0);
            const uint8x16_t mask4 = vdupq_n_u8(15);
            const uint8x16_t mask2 = vdupq_n_u8(3);
            uint8x16_t q[4] = {
                vorrq_u8(vandq_u8(lo, mask4), vshlq_n_u8(vandq_u8(top, mask2), 4)),
                vorrq_u8(vandq_u8(hi, mask4), vshlq_n_u8(vandq_u8(vshrq_n_u8(top, 2), mask2), 4)),
                vorrq_u8(vshrq_n_u8(lo, 4), vshlq_n_u8(vandq_u8(vshrq_n_u8(top, 4), mask2), 4)),
                vorrq_u8(vshrq_n_u8(hi, 4), vshlq_n_u8(vshrq_n_u8(top, 6), 4)),
            };
            for (size_t r = 0; r < 4; r++) {
                const size_t e = 128 * half + 32 * r + l0; /* the first quant of this vector */
                int32x4_t dot = neon_dot16(vreinterpretq_s8_u8(q[r]), vld1q_s8(a->qs + e));
                acc = vmlaq_n_s32(acc, dot, scales[e / 16]);
            }
        }
    }
    int32_t offset = 0;
    for (int j = 0; j < 16; j++)
        offset += scales[j] * a->bsums[j];
    return vaddvq_s32(acc) - 32 * offset;
}

NEON_INLINE struct arm_block_terms q6_k_terms(const uint8_t *w, const uint8_t *x, int64_t b) {
    const uint8_t *bw = w + (size_t)b * Q6_K_BYTES;
    const struct q8k_view a = q8k_at(x + (size_t)b * Q8_K_BYTES);
    struct arm_block_terms t = {.isum = q6_k_isum(bw, &a), .d = neon_half(bw + 208) * a.d};
    return t;
}

static void vec_dot_q6_k(int64_t n, float *s, const void *w, const void *x) {
    *s = blocks8_dot(n / MOEINF_QK_K, w, x, false, q6_k_terms);
}

#endif
