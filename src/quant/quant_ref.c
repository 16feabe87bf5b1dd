/*
 * quant_ref.c - scalar reference kernels: weight quantizers (llama.cpp's _ref functions),
 * activation quantizers (llama.cpp's x86 rounding), dequantization and dot products in the
 * summation order fixed by quant.h. These are the scalar table and the twins that every SIMD
 * kernel must match bit for bit; clarity over speed (the SIMD tables are the fast path).
 *
 * Blocks are read byte-wise (the F16 scale through memcpy), so block rows need no alignment;
 * F32/F16/BF16 rows are read as arrays of their element type. Little-endian host assumed, as
 * GGUF files are little-endian.
 */
#include "quant/quant_ref.h"

#include <assert.h>
#include <float.h>
#include <math.h>
#include <string.h>

static float load_half(const uint8_t *p) {
    uint16_t h;
    memcpy(&h, p, sizeof h);
    return moeinf_fp16_to_fp32(h);
}

static void store_half(uint8_t *p, float f) {
    uint16_t h = moeinf_fp32_to_fp16(f);
    memcpy(p, &h, sizeof h);
}

/* The fixed 32-way reduction of quant.h; written as separate additions so that no compiler
 * may reassociate or contract them. */
static float reduce32(const float p[32]) {
    float q[8];
    for (int l = 0; l < 8; l++) {
        float a = p[l] + p[l + 8];
        float b = p[l + 16] + p[l + 24];
        q[l] = a + b;
    }
    return moeinf_ref_hsum8(q);
}

/* cvtps2dq (round half to even) followed by the saturating packs to int8, as llama.cpp's
 * x86 activation quantizer does; NaN and values outside int32 become INT32_MIN -> -128. */
static int8_t round_sat_i8(float v) {
    if (!(v > -2147483648.0f && v < 2147483648.0f)) return -128;
    long r = lrintf(v);
    if (r > 127) return 127;
    if (r < -128) return -128;
    return (int8_t)r;
}

/* ---- activation conversions ------------------------------------------------------------ */

void moeinf_ref_from_float_f32(const float *x, void *y, int64_t n) {
    memcpy(y, x, (size_t)n * sizeof(float));
}

void moeinf_ref_from_float_f16(const float *x, void *y, int64_t n) {
    uint16_t *h = y;
    for (int64_t i = 0; i < n; i++)
        h[i] = moeinf_fp32_to_fp16(x[i]);
}

void moeinf_ref_from_float_bf16(const float *x, void *y, int64_t n) {
    uint16_t *h = y;
    for (int64_t i = 0; i < n; i++)
        h[i] = moeinf_fp32_to_bf16(x[i]);
}

void moeinf_ref_from_float_q8_0(const float *x, void *y, int64_t n) {
    assert(n % MOEINF_QK8_0 == 0);
    uint8_t *out = y;
    for (int64_t b = 0; b < n / MOEINF_QK8_0; b++, x += MOEINF_QK8_0) {
        uint8_t *blk = out + b * (int64_t)sizeof(struct moeinf_block_q8_0);
        float amax = 0.0f;
        for (int j = 0; j < MOEINF_QK8_0; j++) {
            float a = fabsf(x[j]);
            if (a > amax) amax = a;
        }
        /* llama.cpp stores d = amax/127 but scales by 127/amax, not by 1/d. */
        store_half(blk, amax / 127.0f);
        float id = amax != 0.0f ? 127.0f / amax : 0.0f;
        int8_t *qs = (int8_t *)(blk + 2);
        for (int j = 0; j < MOEINF_QK8_0; j++)
            qs[j] = round_sat_i8(x[j] * id);
    }
}

/* llama.cpp's x86 quantize_row_q8_1: Q8_0's rounding, plus s = d * sum(q) with the unrounded
 * d = amax / 127, stored as F16. */
void moeinf_ref_from_float_q8_1(const float *x, void *y, int64_t n) {
    uint8_t *out = y;
    for (int64_t b = 0; b < n / 32; b++, x += 32) {
        struct moeinf_block_q8_1 blk;
        float amax = 0.0f;
        for (int j = 0; j < 32; j++) {
            float a = fabsf(x[j]);
            if (a > amax) amax = a;
        }
        const float d = amax / 127.0f;
        blk.d = moeinf_fp32_to_fp16(d);
        float id = amax != 0.0f ? 127.0f / amax : 0.0f;
        int32_t sum = 0; /* of the int8 quants: llama.cpp's int32 sum for finite input */
        for (int j = 0; j < 32; j++) {
            blk.qs[j] = round_sat_i8(x[j] * id);
            sum += blk.qs[j];
        }
        blk.s = moeinf_fp32_to_fp16(d * (float)sum);
        memcpy(out + b * (int64_t)sizeof blk, &blk, sizeof blk);
    }
}

/* ---- weight quantizers ------------------------------------------------------------------- */

void moeinf_ref_quantize_q8_0(const float *x, void *y, int64_t n) {
    assert(n % MOEINF_QK8_0 == 0);
    uint8_t *out = y;
    for (int64_t b = 0; b < n / MOEINF_QK8_0; b++, x += MOEINF_QK8_0) {
        uint8_t *blk = out + b * (int64_t)sizeof(struct moeinf_block_q8_0);
        float amax = 0.0f;
        for (int j = 0; j < MOEINF_QK8_0; j++) {
            float a = fabsf(x[j]);
            amax = amax > a ? amax : a;
        }
        float d = amax / 127.0f;
        float id = d != 0.0f ? 1.0f / d : 0.0f;
        store_half(blk, d);
        int8_t *qs = (int8_t *)(blk + 2);
        for (int j = 0; j < MOEINF_QK8_0; j++) {
            float r = roundf(x[j] * id); /* half away from zero, as ggml's ref */
            /* Finite inputs give |r| <= 127; the guard only keeps NaN/inf defined. */
            qs[j] = (int8_t)(r >= -128.0f && r <= 127.0f ? r : 0.0f);
        }
    }
}

void moeinf_ref_quantize_q4_0(const float *x, void *y, int64_t n) {
    assert(n % MOEINF_QK4_0 == 0);
    uint8_t *out = y;
    for (int64_t b = 0; b < n / MOEINF_QK4_0; b++, x += MOEINF_QK4_0) {
        uint8_t *blk = out + b * (int64_t)sizeof(struct moeinf_block_q4_0);
        float amax = 0.0f;
        float max = 0.0f; /* max: the signed element of largest magnitude */
        for (int j = 0; j < MOEINF_QK4_0; j++) {
            if (amax < fabsf(x[j])) {
                amax = fabsf(x[j]);
                max = x[j];
            }
        }
        float d = max / -8.0f;
        float id = d != 0.0f ? 1.0f / d : 0.0f;
        store_half(blk, d);
        uint8_t *qs = blk + 2;
        for (int j = 0; j < MOEINF_QK4_0 / 2; j++) {
            /* ggml: MIN(15, (int8_t)(x*id + 8.5f)), truncating; x*id lies in [-8, 8]. */
            float x0 = x[j] * id; /* separate statements: never contracted to an fma */
            float x1 = x[j + MOEINF_QK4_0 / 2] * id;
            float v0 = x0 + 8.5f;
            float v1 = x1 + 8.5f;
            int q0 = v0 >= 0.0f ? (v0 < 15.0f ? (int)v0 : 15) : 0;
            int q1 = v1 >= 0.0f ? (v1 < 15.0f ? (int)v1 : 15) : 0;
            qs[j] = (uint8_t)(q0 | (q1 << 4));
        }
    }
}

/* Q4_1 / Q5_1: d = (max - min) / (2^bits - 1), m = min, q = (int)((x - min) / d + 0.5)
 * (truncating; Q4_1 also caps at 15 as ggml does). */
static void quantize_affine(const float *x, int bits, uint16_t *d_out, uint16_t *m_out,
                            uint8_t q[32]) {
    float min = FLT_MAX;
    float max = -FLT_MAX;
    for (int j = 0; j < 32; j++) {
        if (x[j] < min) min = x[j];
        if (x[j] > max) max = x[j];
    }
    const float d = (max - min) / (float)((1 << bits) - 1);
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    *d_out = moeinf_fp32_to_fp16(d);
    *m_out = moeinf_fp32_to_fp16(min);
    for (int j = 0; j < 32; j++) {
        float v = (x[j] - min) * id; /* separate statements: never contracted to an fma */
        float r = v + 0.5f;
        int qi = r >= 0.0f && r < 256.0f ? (int)r : 0;
        if (bits == 4 && qi > 15) qi = 15;
        q[j] = (uint8_t)(qi & ((1 << bits) - 1));
    }
}

void moeinf_ref_quantize_q4_1(const float *x, void *y, int64_t n) {
    uint8_t *out = y;
    for (int64_t b = 0; b < n / 32; b++, x += 32) {
        struct moeinf_block_q4_1 blk;
        uint8_t q[32];
        quantize_affine(x, 4, &blk.d, &blk.m, q);
        for (int j = 0; j < 16; j++)
            blk.qs[j] = (uint8_t)(q[j] | (q[j + 16] << 4));
        memcpy(out + b * (int64_t)sizeof blk, &blk, sizeof blk);
    }
}

/* The low nibbles and the qh word of 32 five-bit quants. */
static void pack_q5(const uint8_t q[32], uint8_t qs[16], uint8_t qh[4]) {
    uint32_t h = 0;
    for (int j = 0; j < 16; j++) {
        qs[j] = (uint8_t)((q[j] & 15) | ((q[j + 16] & 15) << 4));
        h |= (uint32_t)(q[j] >> 4) << j;
        h |= (uint32_t)(q[j + 16] >> 4) << (j + 16);
    }
    for (int k = 0; k < 4; k++)
        qh[k] = (uint8_t)(h >> (8 * k));
}

void moeinf_ref_quantize_q5_0(const float *x, void *y, int64_t n) {
    uint8_t *out = y;
    for (int64_t b = 0; b < n / 32; b++, x += 32) {
        struct moeinf_block_q5_0 blk;
        float amax = 0.0f;
        float max = 0.0f;
        for (int j = 0; j < 32; j++) {
            if (amax < fabsf(x[j])) {
                amax = fabsf(x[j]);
                max = x[j];
            }
        }
        float d = max / -16.0f;
        float id = d != 0.0f ? 1.0f / d : 0.0f;
        blk.d = moeinf_fp32_to_fp16(d);
        uint8_t q[32];
        for (int j = 0; j < 32; j++) {
            /* ggml: MIN(31, (int8_t)(x*id + 16.5f)); x*id lies in [-16, 16]. */
            float v = x[j] * id;
            float r = v + 16.5f;
            q[j] = (uint8_t)(r >= 0.0f ? (r < 31.0f ? (int)r : 31) : 0);
        }
        pack_q5(q, blk.qs, blk.qh);
        memcpy(out + b * (int64_t)sizeof blk, &blk, sizeof blk);
    }
}

void moeinf_ref_quantize_q5_1(const float *x, void *y, int64_t n) {
    uint8_t *out = y;
    for (int64_t b = 0; b < n / 32; b++, x += 32) {
        struct moeinf_block_q5_1 blk;
        uint8_t q[32];
        quantize_affine(x, 5, &blk.d, &blk.m, q);
        pack_q5(q, blk.qs, blk.qh);
        memcpy(out + b * (int64_t)sizeof blk, &blk, sizeof blk);
    }
}

/* ---- dequantization ------------------------------------------------------------------------ */

void moeinf_ref_to_float_f32(const void *x, float *y, int64_t n) {
    memcpy(y, x, (size_t)n * sizeof(float));
}

void moeinf_ref_to_float_f16(const void *x, float *y, int64_t n) {
    const uint16_t *h = x;
    for (int64_t i = 0; i < n; i++)
        y[i] = moeinf_fp16_to_fp32(h[i]);
}

void moeinf_ref_to_float_bf16(const void *x, float *y, int64_t n) {
    const uint16_t *h = x;
    for (int64_t i = 0; i < n; i++)
        y[i] = moeinf_bf16_to_fp32(h[i]);
}

void moeinf_ref_to_float_q8_0(const void *x, float *y, int64_t n) {
    assert(n % MOEINF_QK8_0 == 0);
    const uint8_t *in = x;
    for (int64_t b = 0; b < n / MOEINF_QK8_0; b++, y += MOEINF_QK8_0) {
        const uint8_t *blk = in + b * (int64_t)sizeof(struct moeinf_block_q8_0);
        float d = load_half(blk);
        const int8_t *qs = (const int8_t *)(blk + 2);
        for (int j = 0; j < MOEINF_QK8_0; j++)
            y[j] = (float)qs[j] * d;
    }
}

void moeinf_ref_to_float_q4_0(const void *x, float *y, int64_t n) {
    assert(n % MOEINF_QK4_0 == 0);
    const uint8_t *in = x;
    for (int64_t b = 0; b < n / MOEINF_QK4_0; b++, y += MOEINF_QK4_0) {
        const uint8_t *blk = in + b * (int64_t)sizeof(struct moeinf_block_q4_0);
        float d = load_half(blk);
        const uint8_t *qs = blk + 2;
        for (int j = 0; j < MOEINF_QK4_0 / 2; j++) {
            y[j] = (float)((qs[j] & 15) - 8) * d;
            y[j + MOEINF_QK4_0 / 2] = (float)((qs[j] >> 4) - 8) * d;
        }
    }
}

/* The 32 quants of a Q4_1/Q5_0/Q5_1 block, unsigned (0..15 or 0..31). */
static void unpack_nibbles(const uint8_t qs[16], const uint8_t *qh, uint8_t q[32]) {
    uint32_t h = 0;
    if (qh)
        h = (uint32_t)qh[0] | (uint32_t)qh[1] << 8 | (uint32_t)qh[2] << 16 | (uint32_t)qh[3] << 24;
    for (int j = 0; j < 16; j++) {
        q[j] = (uint8_t)((qs[j] & 15) | (((h >> j) & 1) << 4));
        q[j + 16] = (uint8_t)((qs[j] >> 4) | (((h >> (j + 16)) & 1) << 4));
    }
}

void moeinf_ref_to_float_q4_1(const void *x, float *y, int64_t n) {
    for (int64_t b = 0; b < n / 32; b++, y += 32) {
        struct moeinf_block_q4_1 blk;
        memcpy(&blk, (const uint8_t *)x + b * (int64_t)sizeof blk, sizeof blk);
        uint8_t q[32];
        unpack_nibbles(blk.qs, NULL, q);
        float d = moeinf_fp16_to_fp32(blk.d);
        float m = moeinf_fp16_to_fp32(blk.m);
        for (int j = 0; j < 32; j++) {
            float p = (float)q[j] * d; /* separate statements: never contracted to an fma */
            y[j] = p + m;
        }
    }
}

void moeinf_ref_to_float_q5_0(const void *x, float *y, int64_t n) {
    for (int64_t b = 0; b < n / 32; b++, y += 32) {
        struct moeinf_block_q5_0 blk;
        memcpy(&blk, (const uint8_t *)x + b * (int64_t)sizeof blk, sizeof blk);
        uint8_t q[32];
        unpack_nibbles(blk.qs, blk.qh, q);
        float d = moeinf_fp16_to_fp32(blk.d);
        for (int j = 0; j < 32; j++)
            y[j] = (float)(q[j] - 16) * d;
    }
}

void moeinf_ref_to_float_q5_1(const void *x, float *y, int64_t n) {
    for (int64_t b = 0; b < n / 32; b++, y += 32) {
        struct moeinf_block_q5_1 blk;
        memcpy(&blk, (const uint8_t *)x + b * (int64_t)sizeof blk, sizeof blk);
        uint8_t q[32];
        unpack_nibbles(blk.qs, blk.qh, q);
        float d = moeinf_fp16_to_fp32(blk.d);
        float m = moeinf_fp16_to_fp32(blk.m);
        for (int j = 0; j < 32; j++) {
            float p = (float)q[j] * d;
            y[j] = p + m;
        }
    }
}

void moeinf_ref_to_float_q8_1(const void *x, float *y, int64_t n) {
    for (int64_t b = 0; b < n / 32; b++, y += 32) {
        struct moeinf_block_q8_1 blk;
        memcpy(&blk, (const uint8_t *)x + b * (int64_t)sizeof blk, sizeof blk);
        float d = moeinf_fp16_to_fp32(blk.d);
        for (int j = 0; j < 32; j++)
            y[j] = (float)blk.qs[j] * d;
    }
}

/* ---- dot products ---------------------------------------------------------------------------- */

void moeinf_ref_vec_dot_f32(int64_t n, float *s, const void *w, const void *x) {
    const float *a = w;
    const float *b = x;
    float p[32] = {0};
    for (int64_t k = 0; k < n; k++)
        p[k & 31] = fmaf(a[k], b[k], p[k & 31]);
    *s = reduce32(p);
}

void moeinf_ref_vec_dot_f16(int64_t n, float *s, const void *w, const void *x) {
    const uint16_t *a = w;
    const uint16_t *b = x;
    float p[32] = {0};
    for (int64_t k = 0; k < n; k++)
        p[k & 31] = fmaf(moeinf_fp16_to_fp32(a[k]), moeinf_fp16_to_fp32(b[k]), p[k & 31]);
    *s = reduce32(p);
}

void moeinf_ref_vec_dot_bf16(int64_t n, float *s, const void *w, const void *x) {
    const uint16_t *a = w;
    const uint16_t *b = x;
    float p[32] = {0};
    for (int64_t k = 0; k < n; k++)
        p[k & 31] = fmaf(moeinf_bf16_to_fp32(a[k]), moeinf_bf16_to_fp32(b[k]), p[k & 31]);
    *s = reduce32(p);
}

void moeinf_ref_vec_dot_q8_0(int64_t n, float *s, const void *w, const void *x) {
    assert(n % MOEINF_QK8_0 == 0);
    const uint8_t *wb = w;
    const uint8_t *xb = x;
    float acc[8] = {0};
    for (int64_t b = 0; b < n / MOEINF_QK8_0; b++) {
        const uint8_t *bw = wb + b * (int64_t)sizeof(struct moeinf_block_q8_0);
        const uint8_t *bx = xb + b * (int64_t)sizeof(struct moeinf_block_q8_0);
        const int8_t *qw = (const int8_t *)(bw + 2);
        const int8_t *qx = (const int8_t *)(bx + 2);
        int32_t isum = 0;
        for (int j = 0; j < MOEINF_QK8_0; j++)
            isum += qw[j] * qx[j];
        float d = load_half(bw) * load_half(bx);
        acc[b & 7] = fmaf(d, (float)isum, acc[b & 7]);
    }
    *s = moeinf_ref_hsum8(acc);
}

void moeinf_ref_vec_dot_q4_0(int64_t n, float *s, const void *w, const void *x) {
    assert(n % MOEINF_QK4_0 == 0);
    const uint8_t *wb = w;
    const uint8_t *xb = x;
    float acc[8] = {0};
    for (int64_t b = 0; b < n / MOEINF_QK4_0; b++) {
        const uint8_t *bw = wb + b * (int64_t)sizeof(struct moeinf_block_q4_0);
        const uint8_t *bx = xb + b * (int64_t)sizeof(struct moeinf_block_q8_0);
        const uint8_t *qw = bw + 2;
        const int8_t *qx = (const int8_t *)(bx + 2);
        int32_t isum = 0;
        for (int j = 0; j < MOEINF_QK4_0 / 2; j++) {
            isum += ((qw[j] & 15) - 8) * qx[j];
            isum += ((qw[j] >> 4) - 8) * qx[j + MOEINF_QK4_0 / 2];
        }
        float d = load_half(bw) * load_half(bx);
        acc[b & 7] = fmaf(d, (float)isum, acc[b & 7]);
    }
    *s = moeinf_ref_hsum8(acc);
}

/* Q5_0 x Q8_0: as Q4_0 with 5-bit quants minus 16. */
void moeinf_ref_vec_dot_q5_0(int64_t n, float *s, const void *w, const void *x) {
    float acc[8] = {0};
    for (int64_t b = 0; b < n / 32; b++) {
        struct moeinf_block_q5_0 bw;
        struct moeinf_block_q8_0 bx;
        memcpy(&bw, (const uint8_t *)w + b * (int64_t)sizeof bw, sizeof bw);
        memcpy(&bx, (const uint8_t *)x + b * (int64_t)sizeof bx, sizeof bx);
        uint8_t q[32];
        unpack_nibbles(bw.qs, bw.qh, q);
        int32_t isum = 0;
        for (int j = 0; j < 32; j++)
            isum += (q[j] - 16) * bx.qs[j];
        float d = moeinf_fp16_to_fp32(bw.d) * moeinf_fp16_to_fp32(bx.d);
        acc[b & 7] = fmaf(d, (float)isum, acc[b & 7]);
    }
    *s = moeinf_ref_hsum8(acc);
}

/* Q4_1 / Q5_1 x Q8_1: A[b % 8] = fma(d_w * d_x, isum, A[b % 8]), then fma(m_w, s_x, A[b % 8]). */
static void dot_affine(int64_t n, float *s, const void *w, const void *x, bool five) {
    float acc[8] = {0};
    const size_t wbytes =
        five ? sizeof(struct moeinf_block_q5_1) : sizeof(struct moeinf_block_q4_1);
    for (int64_t b = 0; b < n / 32; b++) {
        const uint8_t *pw = (const uint8_t *)w + (size_t)b * wbytes;
        struct moeinf_block_q8_1 bx;
        memcpy(&bx, (const uint8_t *)x + b * (int64_t)sizeof bx, sizeof bx);
        uint8_t q[32];
        uint16_t dw;
        uint16_t mw;
        if (five) {
            struct moeinf_block_q5_1 bw;
            memcpy(&bw, pw, sizeof bw);
            unpack_nibbles(bw.qs, bw.qh, q);
            dw = bw.d;
            mw = bw.m;
        } else {
            struct moeinf_block_q4_1 bw;
            memcpy(&bw, pw, sizeof bw);
            unpack_nibbles(bw.qs, NULL, q);
            dw = bw.d;
            mw = bw.m;
        }
        int32_t isum = 0;
        for (int j = 0; j < 32; j++)
            isum += q[j] * bx.qs[j];
        float d = moeinf_fp16_to_fp32(dw) * moeinf_fp16_to_fp32(bx.d);
        acc[b & 7] = fmaf(d, (float)isum, acc[b & 7]);
        acc[b & 7] = fmaf(moeinf_fp16_to_fp32(mw), moeinf_fp16_to_fp32(bx.s), acc[b & 7]);
    }
    *s = moeinf_ref_hsum8(acc);
}

void moeinf_ref_vec_dot_q4_1(int64_t n, float *s, const void *w, const void *x) {
    dot_affine(n, s, w, x, false);
}

void moeinf_ref_vec_dot_q5_1(int64_t n, float *s, const void *w, const void *x) {
    dot_affine(n, s, w, x, true);
}

#define REF_VEC_DOT_M(type)                                                                        \
    void moeinf_ref_vec_dot_m_##type(int64_t n, int m, float *s, const void *w, const void *x,     \
                                     size_t x_stride) {                                            \
        for (int j = 0; j < m; j++)                                                                \
            moeinf_ref_vec_dot_##type(n, s + j, w, (const uint8_t *)x + (size_t)j * x_stride);     \
    }

REF_VEC_DOT_M(f32)
REF_VEC_DOT_M(f16)
REF_VEC_DOT_M(bf16)
REF_VEC_DOT_M(q8_0)
REF_VEC_DOT_M(q4_0)
REF_VEC_DOT_M(q4_1)
REF_VEC_DOT_M(q5_0)
REF_VEC_DOT_M(q5_1)

#define REF_VEC_DOT_ROWS(type)                                                                     \
    void moeinf_ref_vec_dot_rows_##type(int64_t n, int64_t nr, float *s, const void *w,            \
                                        size_t w_stride, const void *x) {                          \
        for (int64_t r = 0; r < nr; r++)                                                           \
            moeinf_ref_vec_dot_##type(n, s + r, (const uint8_t *)w + (size_t)r * w_stride, x);     \
    }

REF_VEC_DOT_ROWS(f32)
REF_VEC_DOT_ROWS(f16)
REF_VEC_DOT_ROWS(bf16)
REF_VEC_DOT_ROWS(q8_0)
REF_VEC_DOT_ROWS(q4_0)
REF_VEC_DOT_ROWS(q4_1)
REF_VEC_DOT_ROWS(q5_0)
REF_VEC_DOT_ROWS(q5_1)

void moeinf_ref_delta_rule_f32(float *s, int n, const float *q, const float *k, const float *v,
                               float decay, float beta, float scale, float *out) {
    for (int r = 0; r < n; r++) {
        float *row = s + (size_t)r * (size_t)n;
        float sk = 0.0f;
        for (int i = 0; i < n; i++) {
            row[i] *= decay;
            sk += row[i] * k[i];
        }
        const float d = (v[r] - sk) * beta;
        float sq = 0.0f;
        for (int i = 0; i < n; i++) {
            row[i] += k[i] * d;
            sq += row[i] * q[i];
        }
        out[r] = sq * scale;
    }
}

void moeinf_ref_axpy_f32(int64_t n, float a, const float *x, float *y) {
    for (int64_t i = 0; i < n; i++) {
        float p = a * x[i]; /* separate statements: never contracted to an fma */
        y[i] = y[i] + p;
    }
}

void moeinf_ref_qk_f32(int64_t d, int64_t n, int rows, float *s, size_t s_stride, const float *q,
                       size_t q_stride, const void *k, size_t k_stride, bool k_f16, float scale) {
    for (int64_t t = 0; t < n; t++)
        for (int r = 0; r < rows; r++) {
            const float *qr = q + (size_t)r * q_stride;
            float p[32] = {0};
            for (int64_t i = 0; i < d; i++) {
                const size_t at = (size_t)t * k_stride + (size_t)i;
                const float x =
                    k_f16 ? moeinf_fp16_to_fp32(((const uint16_t *)k)[at]) : ((const float *)k)[at];
                p[i & 31] = fmaf(x, qr[i], p[i & 31]);
            }
            s[(size_t)r * s_stride + (size_t)t] = reduce32(p) * scale;
        }
}

void moeinf_ref_wsum_f32(int64_t d, int64_t n, int rows, float *const *out, const float *const *p,
                         const void *v, size_t v_stride, bool v_f16) {
    for (int r = 0; r < rows; r++)
        for (int64_t t = 0; t < n; t++)
            for (int64_t i = 0; i < d; i++) {
                const size_t at = (size_t)t * v_stride + (size_t)i;
                const float x =
                    v_f16 ? moeinf_fp16_to_fp32(((const uint16_t *)v)[at]) : ((const float *)v)[at];
                out[r][i] = fmaf(p[r][t], x, out[r][i]);
            }
}
