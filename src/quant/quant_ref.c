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

/* The fixed reductions of quant.h; written as separate additions so that no compiler may
 * reassociate or contract them. */
static float hsum8(const float v[8]) {
    float a = v[0] + v[4];
    float b = v[2] + v[6];
    float c = v[1] + v[5];
    float d = v[3] + v[7];
    return (a + b) + (c + d);
}

static float reduce32(const float p[32]) {
    float q[8];
    for (int l = 0; l < 8; l++) {
        float a = p[l] + p[l + 8];
        float b = p[l + 16] + p[l + 24];
        q[l] = a + b;
    }
    return hsum8(q);
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

/* Weight quantizers by type; the float types round as their activation conversions do. */
static const moeinf_from_float_fn quantize_ref[MOEINF_TYPE_COUNT] = {
    [MOEINF_TYPE_F32] = moeinf_ref_from_float_f32,   [MOEINF_TYPE_F16] = moeinf_ref_from_float_f16,
    [MOEINF_TYPE_BF16] = moeinf_ref_from_float_bf16, [MOEINF_TYPE_Q8_0] = moeinf_ref_quantize_q8_0,
    [MOEINF_TYPE_Q4_0] = moeinf_ref_quantize_q4_0,
};

void moeinf_quantize_row_ref(enum moeinf_type type, const float *x, void *y, int64_t n) {
    moeinf_from_float_fn quantize = (unsigned)type < MOEINF_TYPE_COUNT ? quantize_ref[type] : NULL;
    assert(quantize && "moeinf_quantize_row_ref: unsupported type");
    if (quantize) quantize(x, y, n);
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
    *s = hsum8(acc);
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
    *s = hsum8(acc);
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

void moeinf_ref_axpy_f32(int64_t n, float a, const float *x, float *y) {
    for (int64_t i = 0; i < n; i++) {
        float p = a * x[i]; /* separate statements: never contracted to an fma */
        y[i] = y[i] + p;
    }
}
