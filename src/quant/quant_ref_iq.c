/*
 * quant_ref_iq.c - scalar reference of the codebook types IQ4_NL, IQ4_XS and MXFP4: their
 * weight quantizers (simple ones, below), dequantization with llama.cpp's float expressions
 * (the same products in the same order, so the floats are bit for bit its), and the dot
 * products in the summation order of quant.h (IQ4_NL and MXFP4 against Q8_0 activations,
 * IQ4_XS against Q8_K).
 *
 * The quantizers are not llama.cpp's (whose IQ4 quantizers search over scales, weighted by an
 * importance matrix when one is given): they pick, per element, the nearest codebook value
 * for a scale fixed by the block's largest element. MXFP4's is the reference quantizer of
 * ggml and of the gguf Python package (test_quant_dequant checks it against the latter).
 * Blocks are copied into local structs (memcpy), so rows need no alignment.
 */
#include <math.h>
#include <string.h>

#include "quant/quant_ref.h"

const int8_t moeinf_kvalues_iq4nl[16] = {-127, -104, -83, -65, -49, -35, -22, -10,
                                         1,    13,   25,  38,  53,  69,  89,  113};
const int8_t moeinf_kvalues_mxfp4[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};

float moeinf_e8m0_to_fp32_half(uint8_t e) {
    /* 2^(e-128): the subnormal floats 2^-128 and 2^-127 for e < 2, else exponent field e - 1. */
    uint32_t bits = e < 2 ? 0x00200000u << e : (uint32_t)(e - 1) << 23;
    float f;
    memcpy(&f, &bits, sizeof f);
    return f;
}

static float f16(uint16_t h) {
    return moeinf_fp16_to_fp32(h);
}

/* Scale j < 8 of an IQ4_XS block, 0..63 (the stored value; the factor is this minus 32). */
static int iq4_xs_scale(const struct moeinf_block_iq4_xs *b, int j) {
    int lo = (b->scales_l[j / 2] >> (4 * (j % 2))) & 15;
    int hi = (b->scales_h >> (2 * j)) & 3;
    return lo | (hi << 4);
}

/* The 32 codebook values of 16 bytes of 4-bit indices: low nibbles first, then high ones. */
static void lookup32(const int8_t table[16], const uint8_t qs[16], int8_t v[32]) {
    for (int j = 0; j < 16; j++) {
        v[j] = table[qs[j] & 15];
        v[j + 16] = table[qs[j] >> 4];
    }
}

/* ---- dequantization (llama.cpp's dequantize_row_*: the same products, the same order) ---- */

void moeinf_ref_to_float_iq4_nl(const void *x, float *y, int64_t n) {
    for (int64_t i = 0; i < n / MOEINF_QK4_NL; i++, y += MOEINF_QK4_NL) {
        struct moeinf_block_iq4_nl b;
        memcpy(&b, (const uint8_t *)x + i * (int64_t)sizeof b, sizeof b);
        int8_t v[32];
        lookup32(moeinf_kvalues_iq4nl, b.qs, v);
        const float d = f16(b.d);
        for (int j = 0; j < 32; j++)
            y[j] = d * (float)v[j];
    }
}

void moeinf_ref_to_float_iq4_xs(const void *x, float *y, int64_t n) {
    for (int64_t i = 0; i < n / MOEINF_QK_K; i++) {
        struct moeinf_block_iq4_xs b;
        memcpy(&b, (const uint8_t *)x + i * (int64_t)sizeof b, sizeof b);
        const float d = f16(b.d);
        for (int j = 0; j < 8; j++, y += 32) {
            const float dl = d * (float)(iq4_xs_scale(&b, j) - 32);
            int8_t v[32];
            lookup32(moeinf_kvalues_iq4nl, b.qs + 16 * (size_t)j, v);
            for (int k = 0; k < 32; k++)
                y[k] = dl * (float)v[k];
        }
    }
}

void moeinf_ref_to_float_mxfp4(const void *x, float *y, int64_t n) {
    for (int64_t i = 0; i < n / MOEINF_QK_MXFP4; i++, y += MOEINF_QK_MXFP4) {
        struct moeinf_block_mxfp4 b;
        memcpy(&b, (const uint8_t *)x + i * (int64_t)sizeof b, sizeof b);
        int8_t v[32];
        lookup32(moeinf_kvalues_mxfp4, b.qs, v);
        const float d = moeinf_e8m0_to_fp32_half(b.e);
        for (int j = 0; j < 32; j++)
            y[j] = (float)v[j] * d;
    }
}

/* ---- dot products (quant.h's order: one fma per block into A[b % 8]) --------------------- */

/* The exact dot of 32 codebook values with 32 activation quants. */
static int32_t dot32(const int8_t v[32], const int8_t *q) {
    int32_t s = 0;
    for (int j = 0; j < 32; j++)
        s += v[j] * q[j];
    return s;
}

void moeinf_ref_vec_dot_iq4_nl(int64_t n, float *s, const void *w, const void *x) {
    float acc[8] = {0};
    for (int64_t i = 0; i < n / 32; i++) {
        struct moeinf_block_iq4_nl b;
        struct moeinf_block_q8_0 a;
        memcpy(&b, (const uint8_t *)w + i * (int64_t)sizeof b, sizeof b);
        memcpy(&a, (const uint8_t *)x + i * (int64_t)sizeof a, sizeof a);
        int8_t v[32];
        lookup32(moeinf_kvalues_iq4nl, b.qs, v);
        acc[i & 7] = fmaf(f16(b.d) * f16(a.d), (float)dot32(v, a.qs), acc[i & 7]);
    }
    *s = moeinf_ref_hsum8(acc);
}

void moeinf_ref_vec_dot_mxfp4(int64_t n, float *s, const void *w, const void *x) {
    float acc[8] = {0};
    for (int64_t i = 0; i < n / 32; i++) {
        struct moeinf_block_mxfp4 b;
        struct moeinf_block_q8_0 a;
        memcpy(&b, (const uint8_t *)w + i * (int64_t)sizeof b, sizeof b);
        memcpy(&a, (const uint8_t *)x + i * (int64_t)sizeof a, sizeof a);
        int8_t v[32];
        lookup32(moeinf_kvalues_mxfp4, b.qs, v);
        const float d = moeinf_e8m0_to_fp32_half(b.e) * f16(a.d);
        acc[i & 7] = fmaf(d, (float)dot32(v, a.qs), acc[i & 7]);
    }
    *s = moeinf_ref_hsum8(acc);
}

void moeinf_ref_vec_dot_iq4_xs(int64_t n, float *s, const void *w, const void *x) {
    float acc[8] = {0};
    for (int64_t i = 0; i < n / MOEINF_QK_K; i++) {
        struct moeinf_block_iq4_xs b;
        struct moeinf_block_q8_k a;
        memcpy(&b, (const uint8_t *)w + i * (int64_t)sizeof b, sizeof b);
        memcpy(&a, (const uint8_t *)x + i * (int64_t)sizeof a, sizeof a);
        int32_t isum = 0; /* |isum| <= 8 * 32 * 32 * 127 * 128 < 2^31 */
        for (int j = 0; j < 8; j++) {
            int8_t v[32];
            lookup32(moeinf_kvalues_iq4nl, b.qs + 16 * (size_t)j, v);
            isum += (iq4_xs_scale(&b, j) - 32) * dot32(v, a.qs + 32 * (size_t)j);
        }
        acc[i & 7] = fmaf(f16(b.d) * a.d, (float)isum, acc[i & 7]);
    }
    *s = moeinf_ref_hsum8(acc);
}

MOEINF_REF_DEFINE_ROW_LOOPS(iq4_nl)
MOEINF_REF_DEFINE_ROW_LOOPS(iq4_xs)
MOEINF_REF_DEFINE_ROW_LOOPS(mxfp4)

/* ---- weight quantizers --------------------------------------------------------------------- */

/* The index of the codebook value nearest v (the first of two at the same distance; NaN: 0). */
static int nearest_index(const int8_t table[16], float v) {
    int best = 0;
    float best_err = fabsf((float)table[0] - v);
    for (int k = 1; k < 16; k++) {
        float err = fabsf((float)table[k] - v);
        if (err < best_err) {
            best = k;
            best_err = err;
        }
    }
    return best;
}

/* The signed element of largest magnitude among n (the first such; 0 for all zeros). */
static float signed_max(const float *x, int n) {
    float amax = 0.0f;
    float max = 0.0f;
    for (int j = 0; j < n; j++) {
        if (fabsf(x[j]) > amax) {
            amax = fabsf(x[j]);
            max = x[j];
        }
    }
    return max;
}

/* 32 elements as indices into IQ4_NL's codebook for the scale d (the float dequantization
 * multiplies by): nearest codebook value of x / d, packed as IQ4_NL orders them. */
static void pack_iq4(const float *x, float d, uint8_t qs[16]) {
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    int q[32];
    for (int j = 0; j < 32; j++)
        q[j] = nearest_index(moeinf_kvalues_iq4nl, x[j] * id);
    for (int j = 0; j < 16; j++)
        qs[j] = (uint8_t)(q[j] | (q[j + 16] << 4));
}

/* IQ4_NL: d = max / -127 (the block's largest element lands on the grid's end value -127),
 * stored as F16; each element the nearest grid value of x / d. */
void moeinf_ref_quantize_iq4_nl(const float *x, void *y, int64_t n) {
    for (int64_t i = 0; i < n / 32; i++, x += 32) {
        struct moeinf_block_iq4_nl b;
        b.d = moeinf_fp32_to_fp16(signed_max(x, 32) / -127.0f);
        pack_iq4(x, f16(b.d), b.qs);
        memcpy((uint8_t *)y + i * (int64_t)sizeof b, &b, sizeof b);
    }
}

/* IQ4_XS: per sub-block of 32 the scale s_j = max_j / -127 (as IQ4_NL); the super-block
 * d = m / -32 with m the s_j of largest magnitude, stored as F16; sub-block j's stored scale
 * l_j = clamp(round-half-even(s_j / d), -32, 31) + 32; then each element the nearest grid
 * value of x / (d * (l_j - 32)). */
void moeinf_ref_quantize_iq4_xs(const float *x, void *y, int64_t n) {
    for (int64_t i = 0; i < n / MOEINF_QK_K; i++, x += MOEINF_QK_K) {
        struct moeinf_block_iq4_xs b;
        memset(&b, 0, sizeof b);
        float sub[8];
        for (int j = 0; j < 8; j++)
            sub[j] = signed_max(x + 32 * (size_t)j, 32) / -127.0f;
        b.d = moeinf_fp32_to_fp16(signed_max(sub, 8) / -32.0f);
        const float d = f16(b.d);
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        for (int j = 0; j < 8; j++) {
            float r = rintf(sub[j] * id); /* |sub / d| <= 32 (d rounded: a little more) */
            int l = r < -32.0f ? -32 : r > 31.0f ? 31 : (int)r;
            b.scales_l[j / 2] |= (uint8_t)(((l + 32) & 15) << (4 * (j % 2)));
            b.scales_h |= (uint16_t)(((unsigned)(l + 32) >> 4) << (2 * j));
            pack_iq4(x + 32 * (size_t)j, d * (float)l, b.qs + 16 * (size_t)j);
        }
        memcpy((uint8_t *)y + i * (int64_t)sizeof b, &b, sizeof b);
    }
}

/* MXFP4: e = floor(log2(amax)) - 2 + 127 (log2f, as ggml's reference: amax then lies in
 * [4, 8) times 2^(e-127), so it maps to the codes for 4 and 6, or past 6 to 6), 0 for an
 * all-zero block, clamped to 0..255; each element the code whose value d * table[k] is
 * nearest x (the first of ties), as ggml's and gguf-py's reference quantizers do. */
void moeinf_ref_quantize_mxfp4(const float *x, void *y, int64_t n) {
    for (int64_t i = 0; i < n / 32; i++, x += 32) {
        struct moeinf_block_mxfp4 b;
        float amax = 0.0f;
        for (int j = 0; j < 32; j++)
            amax = fabsf(x[j]) > amax ? fabsf(x[j]) : amax;
        int e = 0;
        if (amax > 0.0f) {
            float l = floorf(log2f(amax)) - 2.0f + 127.0f; /* inf for amax = inf */
            e = l < 0.0f ? 0 : l > 255.0f ? 255 : (int)l;
        }
        b.e = (uint8_t)e;
        const float d = moeinf_e8m0_to_fp32_half(b.e);
        int q[32];
        for (int j = 0; j < 32; j++) {
            int best = 0;
            float best_err = fabsf((float)moeinf_kvalues_mxfp4[0] * d - x[j]);
            for (int k = 1; k < 16; k++) {
                float err = fabsf((float)moeinf_kvalues_mxfp4[k] * d - x[j]);
                if (err < best_err) {
                    best = k;
                    best_err = err;
                }
            }
            q[j] = best;
        }
        for (int j = 0; j < 16; j++)
            b.qs[j] = (uint8_t)(q[j] | (q[j + 16] << 4));
        memcpy((uint8_t *)y + i * (int64_t)sizeof b, &b, sizeof b);
    }
}
