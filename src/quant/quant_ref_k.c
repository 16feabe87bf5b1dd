/*
 * quant_ref_k.c - scalar reference of the K-quants (Q2_K..Q6_K weights, Q8_K activations):
 * llama.cpp's reference weight quantizers (quantize_row_*_ref, what llama-quantize writes
 * without an imatrix), its Q8_K activation rounding, dequantization with llama.cpp's float
 * expressions (same roundings in the same order, so the floats are bit for bit its), and the
 * dot products in the summation order of quant.h.
 *
 * Every float expression that llama.cpp writes as a*b+c is written here as two statements,
 * so no compiler may fuse it into an fma (llama.cpp's reference code is built without FMA
 * on x86, so it rounds twice too). Blocks are copied into local structs (memcpy), so rows
 * need no alignment.
 */
#include <math.h>
#include <string.h>

#include "quant/quant_ref.h"

#define QK MOEINF_QK_K

/* llama.cpp's nearest_int: round half to even through the float mantissa; exact for
 * |v| < 2^22, which all callers guarantee for finite input. */
static int nearest_int(float v) {
    float t = v + 12582912.0f;
    int32_t i;
    memcpy(&i, &t, sizeof i);
    return (i & 0x007fffff) - 0x00400000;
}

static int imin(int a, int b) {
    return a < b ? a : b;
}

static int imax(int a, int b) {
    return a > b ? a : b;
}

static float f16(uint16_t h) {
    return moeinf_fp16_to_fp32(h);
}

/* Scale and min j < 8 of a Q4_K/Q5_K block: 6 bits each, packed in 12 bytes. */
static void scale_min_k4(int j, const uint8_t *q, int *sc, int *m) {
    if (j < 4) {
        *sc = q[j] & 63;
        *m = q[j + 4] & 63;
    } else {
        *sc = (q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4);
        *m = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
    }
}

/* The 16 signed scales of a Q3_K block (6-bit, minus 32). */
static void q3_scales(const uint8_t s[12], int out[16]) {
    for (int j = 0; j < 16; j++) {
        int lo = j < 8 ? s[j] & 0xF : s[j - 8] >> 4;
        int hi = (s[8 + j % 4] >> (2 * (j / 4))) & 3;
        out[j] = (lo | (hi << 4)) - 32;
    }
}

/* ---- quant decoding (element order of each type) --------------------------------------------- */

/* The 256 unsigned quants of a Q2_K block (0..3) and its sub-block of each element (e / 16). */
static void q2_quants(const struct moeinf_block_q2_k *b, int q[QK]) {
    for (int half = 0; half < 2; half++)
        for (int shift = 0; shift < 4; shift++)
            for (int l = 0; l < 32; l++)
                q[half * 128 + shift * 32 + l] = (b->qs[half * 32 + l] >> (2 * shift)) & 3;
}

/* Q3_K: signed quants -4..3. */
static void q3_quants(const struct moeinf_block_q3_k *b, int q[QK]) {
    for (int half = 0; half < 2; half++)
        for (int shift = 0; shift < 4; shift++)
            for (int l = 0; l < 32; l++) {
                int e = half * 128 + shift * 32 + l;
                int low = (b->qs[half * 32 + l] >> (2 * shift)) & 3;
                int high = (b->hmask[l] >> (half * 4 + shift)) & 1;
                q[e] = low - (high ? 0 : 4);
            }
}

/* Q4_K: 0..15; element 64c + l (l < 32) is the low nibble of qs[32c + l], 64c + 32 + l the
 * high one. */
static void q4_quants(const struct moeinf_block_q4_k *b, int q[QK]) {
    for (int c = 0; c < 4; c++)
        for (int l = 0; l < 32; l++) {
            q[64 * c + l] = b->qs[32 * c + l] & 0xF;
            q[64 * c + 32 + l] = b->qs[32 * c + l] >> 4;
        }
}

/* Q5_K: Q4_K's nibbles plus bit 4 from qh (bit 2c for the low, 2c + 1 for the high half). */
static void q5_quants(const struct moeinf_block_q5_k *b, int q[QK]) {
    for (int c = 0; c < 4; c++)
        for (int l = 0; l < 32; l++) {
            q[64 * c + l] = (b->qs[32 * c + l] & 0xF) | (((b->qh[l] >> (2 * c)) & 1) << 4);
            q[64 * c + 32 + l] = (b->qs[32 * c + l] >> 4) | (((b->qh[l] >> (2 * c + 1)) & 1) << 4);
        }
}

/* Q6_K: signed quants -32..31. */
static void q6_quants(const struct moeinf_block_q6_k *b, int q[QK]) {
    for (int half = 0; half < 2; half++) {
        const uint8_t *ql = b->ql + 64 * (size_t)half;
        const uint8_t *qh = b->qh + 32 * (size_t)half;
        for (int l = 0; l < 32; l++) {
            int e = 128 * half + l;
            q[e] = ((ql[l] & 0xF) | (((qh[l] >> 0) & 3) << 4)) - 32;
            q[e + 32] = ((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32;
            q[e + 64] = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
            q[e + 96] = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
        }
    }
}

/* ---- dequantization (llama.cpp's dequantize_row_*: the same products, the same order) ---- */

void moeinf_ref_to_float_q2_k(const void *x, float *y, int64_t n) {
    const uint8_t *in = x;
    for (int64_t i = 0; i < n / QK; i++, y += QK) {
        struct moeinf_block_q2_k b;
        memcpy(&b, in + i * (int64_t)sizeof b, sizeof b);
        int q[QK];
        q2_quants(&b, q);
        float d = f16(b.d);
        float dmin = f16(b.dmin);
        for (int e = 0; e < QK; e++) {
            float dl = d * (float)(b.scales[e / 16] & 0xF);
            float ml = dmin * (float)(b.scales[e / 16] >> 4);
            float p = dl * (float)q[e];
            y[e] = p - ml;
        }
    }
}

void moeinf_ref_to_float_q3_k(const void *x, float *y, int64_t n) {
    const uint8_t *in = x;
    for (int64_t i = 0; i < n / QK; i++, y += QK) {
        struct moeinf_block_q3_k b;
        memcpy(&b, in + i * (int64_t)sizeof b, sizeof b);
        int q[QK];
        int sc[16];
        q3_quants(&b, q);
        q3_scales(b.scales, sc);
        float d = f16(b.d);
        for (int e = 0; e < QK; e++) {
            float dl = d * (float)sc[e >> 4];
            y[e] = dl * (float)q[e];
        }
    }
}

/* Q4_K and Q5_K: y = (d * sc) * q - dmin * m. */
static void to_float_k4(const uint8_t scales[12], float d, float dmin, const int q[QK], float *y) {
    for (int e = 0; e < QK; e++) {
        int sc;
        int m;
        scale_min_k4(e / 32, scales, &sc, &m);
        float d1 = d * (float)sc;
        float m1 = dmin * (float)m;
        float p = d1 * (float)q[e];
        y[e] = p - m1;
    }
}

void moeinf_ref_to_float_q4_k(const void *x, float *y, int64_t n) {
    const uint8_t *in = x;
    for (int64_t i = 0; i < n / QK; i++, y += QK) {
        struct moeinf_block_q4_k b;
        memcpy(&b, in + i * (int64_t)sizeof b, sizeof b);
        int q[QK];
        q4_quants(&b, q);
        to_float_k4(b.scales, f16(b.d), f16(b.dmin), q, y);
    }
}

void moeinf_ref_to_float_q5_k(const void *x, float *y, int64_t n) {
    const uint8_t *in = x;
    for (int64_t i = 0; i < n / QK; i++, y += QK) {
        struct moeinf_block_q5_k b;
        memcpy(&b, in + i * (int64_t)sizeof b, sizeof b);
        int q[QK];
        q5_quants(&b, q);
        to_float_k4(b.scales, f16(b.d), f16(b.dmin), q, y);
    }
}

void moeinf_ref_to_float_q6_k(const void *x, float *y, int64_t n) {
    const uint8_t *in = x;
    for (int64_t i = 0; i < n / QK; i++, y += QK) {
        struct moeinf_block_q6_k b;
        memcpy(&b, in + i * (int64_t)sizeof b, sizeof b);
        int q[QK];
        q6_quants(&b, q);
        float d = f16(b.d);
        for (int e = 0; e < QK; e++) {
            float ds = d * (float)b.scales[e >> 4];
            y[e] = ds * (float)q[e];
        }
    }
}

void moeinf_ref_to_float_q8_k(const void *x, float *y, int64_t n) {
    const uint8_t *in = x;
    for (int64_t i = 0; i < n / QK; i++, y += QK) {
        struct moeinf_block_q8_k b;
        memcpy(&b, in + i * (int64_t)sizeof b, sizeof b);
        for (int e = 0; e < QK; e++)
            y[e] = b.d * (float)b.qs[e];
    }
}

/* ---- Q8_K activations (llama.cpp's quantize_row_q8_K_ref, also its x86 path) -------------- */

void moeinf_ref_from_float_q8_k(const float *x, void *y, int64_t n) {
    uint8_t *out = y;
    for (int64_t i = 0; i < n / QK; i++, x += QK) {
        struct moeinf_block_q8_k b;
        memset(&b, 0, sizeof b);
        float amax = 0.0f;
        float max = 0.0f; /* the signed element of largest magnitude (first one on ties) */
        for (int j = 0; j < QK; j++) {
            if (fabsf(x[j]) > amax) {
                amax = fabsf(x[j]);
                max = x[j];
            }
        }
        if (amax != 0.0f) {
            const float iscale = -127.0f / max;
            for (int j = 0; j < QK; j++) {
                /* Finite input keeps |v| <= 127; the clamps only keep NaN/inf defined. */
                float v = iscale * x[j];
                int q = v == v && fabsf(v) < 4194304.0f ? nearest_int(v) : -128;
                b.qs[j] = (int8_t)imax(-128, imin(127, q));
            }
            for (int j = 0; j < QK / 16; j++) {
                int sum = 0;
                for (int k = 0; k < 16; k++)
                    sum += b.qs[16 * j + k];
                b.bsums[j] = (int16_t)sum;
            }
            b.d = 1.0f / iscale;
        }
        memcpy(out + i * (int64_t)sizeof b, &b, sizeof b);
    }
}

/* ---- dot products ----------------------------------------------------------------------------
 * Per super-block b: the exact integers isum (sum over sub-blocks of scale * quant dot) and,
 * for the types with mins, imin (sum of min * activation sub-block sum); then
 *   A[b % 8] = fma(d_w * d_x, (float)isum, A[b % 8])
 *   A[b % 8] = fma(-(dmin_w * d_x), (float)imin, A[b % 8])     (Q2_K, Q4_K, Q5_K)
 * and s = moeinf_ref_hsum8(A), as quant.h states. */

static void load_q8_k(const uint8_t *x, int64_t i, struct moeinf_block_q8_k *b) {
    memcpy(b, x + i * (int64_t)sizeof *b, sizeof *b);
}

void moeinf_ref_vec_dot_q2_k(int64_t n, float *s, const void *w, const void *x) {
    float acc[8] = {0};
    for (int64_t i = 0; i < n / QK; i++) {
        struct moeinf_block_q2_k b;
        struct moeinf_block_q8_k a;
        memcpy(&b, (const uint8_t *)w + i * (int64_t)sizeof b, sizeof b);
        load_q8_k(x, i, &a);
        int q[QK];
        q2_quants(&b, q);
        int32_t isum = 0;
        int32_t imn = 0;
        for (int j = 0; j < 16; j++) {
            int32_t dot = 0;
            for (int k = 0; k < 16; k++)
                dot += q[16 * j + k] * a.qs[16 * j + k];
            isum += (b.scales[j] & 0xF) * dot;
            imn += (b.scales[j] >> 4) * a.bsums[j];
        }
        acc[i & 7] = fmaf(f16(b.d) * a.d, (float)isum, acc[i & 7]);
        acc[i & 7] = fmaf(-(f16(b.dmin) * a.d), (float)imn, acc[i & 7]);
    }
    *s = moeinf_ref_hsum8(acc);
}

void moeinf_ref_vec_dot_q3_k(int64_t n, float *s, const void *w, const void *x) {
    float acc[8] = {0};
    for (int64_t i = 0; i < n / QK; i++) {
        struct moeinf_block_q3_k b;
        struct moeinf_block_q8_k a;
        memcpy(&b, (const uint8_t *)w + i * (int64_t)sizeof b, sizeof b);
        load_q8_k(x, i, &a);
        int q[QK];
        int sc[16];
        q3_quants(&b, q);
        q3_scales(b.scales, sc);
        int32_t isum = 0;
        for (int j = 0; j < 16; j++) {
            int32_t dot = 0;
            for (int k = 0; k < 16; k++)
                dot += q[16 * j + k] * a.qs[16 * j + k];
            isum += sc[j] * dot;
        }
        acc[i & 7] = fmaf(f16(b.d) * a.d, (float)isum, acc[i & 7]);
    }
    *s = moeinf_ref_hsum8(acc);
}

/* Q4_K / Q5_K: 8 sub-blocks of 32 with 6-bit scales and mins. */
static void dot_k4(const uint8_t scales[12], const int q[QK], const struct moeinf_block_q8_k *a,
                   int32_t *isum, int32_t *imn) {
    *isum = 0;
    *imn = 0;
    for (int j = 0; j < 8; j++) {
        int sc;
        int m;
        scale_min_k4(j, scales, &sc, &m);
        int32_t dot = 0;
        for (int k = 0; k < 32; k++)
            dot += q[32 * j + k] * a->qs[32 * j + k];
        *isum += sc * dot;
        *imn += m * (a->bsums[2 * (size_t)j] + a->bsums[2 * (size_t)j + 1]);
    }
}

void moeinf_ref_vec_dot_q4_k(int64_t n, float *s, const void *w, const void *x) {
    float acc[8] = {0};
    for (int64_t i = 0; i < n / QK; i++) {
        struct moeinf_block_q4_k b;
        struct moeinf_block_q8_k a;
        memcpy(&b, (const uint8_t *)w + i * (int64_t)sizeof b, sizeof b);
        load_q8_k(x, i, &a);
        int q[QK];
        q4_quants(&b, q);
        int32_t isum;
        int32_t imn;
        dot_k4(b.scales, q, &a, &isum, &imn);
        acc[i & 7] = fmaf(f16(b.d) * a.d, (float)isum, acc[i & 7]);
        acc[i & 7] = fmaf(-(f16(b.dmin) * a.d), (float)imn, acc[i & 7]);
    }
    *s = moeinf_ref_hsum8(acc);
}

void moeinf_ref_vec_dot_q5_k(int64_t n, float *s, const void *w, const void *x) {
    float acc[8] = {0};
    for (int64_t i = 0; i < n / QK; i++) {
        struct moeinf_block_q5_k b;
        struct moeinf_block_q8_k a;
        memcpy(&b, (const uint8_t *)w + i * (int64_t)sizeof b, sizeof b);
        load_q8_k(x, i, &a);
        int q[QK];
        q5_quants(&b, q);
        int32_t isum;
        int32_t imn;
        dot_k4(b.scales, q, &a, &isum, &imn);
        acc[i & 7] = fmaf(f16(b.d) * a.d, (float)isum, acc[i & 7]);
        acc[i & 7] = fmaf(-(f16(b.dmin) * a.d), (float)imn, acc[i & 7]);
    }
    *s = moeinf_ref_hsum8(acc);
}

void moeinf_ref_vec_dot_q6_k(int64_t n, float *s, const void *w, const void *x) {
    float acc[8] = {0};
    for (int64_t i = 0; i < n / QK; i++) {
        struct moeinf_block_q6_k b;
        struct moeinf_block_q8_k a;
        memcpy(&b, (const uint8_t *)w + i * (int64_t)sizeof b, sizeof b);
        load_q8_k(x, i, &a);
        int q[QK];
        q6_quants(&b, q);
        int32_t isum = 0;
        for (int j = 0; j < 16; j++) {
            int32_t dot = 0;
            for (int k = 0; k < 16; k++)
                dot += q[16 * j + k] * a.qs[16 * j + k];
            isum += b.scales[j] * dot;
        }
        acc[i & 7] = fmaf(f16(b.d) * a.d, (float)isum, acc[i & 7]);
    }
    *s = moeinf_ref_hsum8(acc);
}

/* ---- weight quantizers (llama.cpp's quantize_row_*_ref; the search for scales is its) ---- */

/* Symmetric quants in [-nmax, nmax - 1] (stored + nmax) with a weighted least-squares scale
 * search over 19 candidate scales; weights x^2 (llama.cpp's make_qx_quants, rmse_type 1). */
static float make_qx_quants(int n, int nmax, const float *x, int8_t *lv) {
    float max = 0;
    float amax = 0;
    for (int i = 0; i < n; i++) {
        float ax = fabsf(x[i]);
        if (ax > amax) {
            amax = ax;
            max = x[i];
        }
    }
    if (amax < 1e-15f) {
        memset(lv, 0, (size_t)n);
        return 0.0f;
    }
    float iscale = -(float)nmax / max;
    float sumlx = 0;
    float suml2 = 0;
    for (int i = 0; i < n; i++) {
        int l = imax(-nmax, imin(nmax - 1, nearest_int(iscale * x[i])));
        lv[i] = (int8_t)(l + nmax);
        float w = x[i] * x[i];
        float wx = w * x[i];
        float wl = w * (float)l;
        sumlx += wx * (float)l;
        suml2 += wl * (float)l;
    }
    float scale = suml2 != 0.0f ? sumlx / suml2 : 0.0f;
    float best = scale * sumlx;
    for (int is = -9; is <= 9; is++) {
        if (is == 0) continue;
        float t = 0.1f * (float)is;
        iscale = -((float)nmax + t) / max;
        sumlx = 0;
        suml2 = 0;
        for (int i = 0; i < n; i++) {
            int l = imax(-nmax, imin(nmax - 1, nearest_int(iscale * x[i])));
            float w = x[i] * x[i];
            float wx = w * x[i];
            float wl = w * (float)l;
            sumlx += wx * (float)l;
            suml2 += wl * (float)l;
        }
        float lhs = sumlx * sumlx;
        float rhs = best * suml2;
        if (suml2 > 0 && lhs > rhs) {
            for (int i = 0; i < n; i++)
                lv[i] = (int8_t)(nmax + imax(-nmax, imin(nmax - 1, nearest_int(iscale * x[i]))));
            scale = sumlx / suml2;
            best = scale * sumlx;
        }
    }
    return scale;
}

/* Q3_K's sub-block quants: an iterative weighted refinement (llama.cpp's make_q3_quants with
 * do_rmse); returns the scale, lv holds quants + nmax. */
static float make_q3_quants(int n, int nmax, const float *x, int8_t *lv) {
    float max = 0;
    float amax = 0;
    for (int i = 0; i < n; i++) {
        float ax = fabsf(x[i]);
        if (ax > amax) {
            amax = ax;
            max = x[i];
        }
    }
    if (amax < 1e-15f) {
        memset(lv, 0, (size_t)n);
        return 0.0f;
    }
    float iscale = -(float)nmax / max;
    float sumlx = 0;
    float suml2 = 0;
    for (int i = 0; i < n; i++) {
        int l = imax(-nmax, imin(nmax - 1, nearest_int(iscale * x[i])));
        lv[i] = (int8_t)l;
        float w = x[i] * x[i];
        float wx = w * x[i];
        float wl = w * (float)l;
        sumlx += wx * (float)l;
        suml2 += wl * (float)l;
    }
    for (int itry = 0; itry < 5; itry++) {
        int n_changed = 0;
        for (int i = 0; i < n; i++) {
            float w = x[i] * x[i];
            float wx = w * x[i];
            float slx = sumlx - wx * (float)lv[i];
            if (slx > 0) {
                float wl = w * (float)lv[i];
                float sl2 = suml2 - wl * (float)lv[i];
                float r = x[i] * sl2;
                int new_l = imax(-nmax, imin(nmax - 1, nearest_int(r / slx)));
                if (new_l != lv[i]) {
                    slx += wx * (float)new_l;
                    float wn = w * (float)new_l;
                    sl2 += wn * (float)new_l;
                    float a = slx * slx;
                    float lhs = a * suml2;
                    float c = sumlx * sumlx;
                    float rhs = c * sl2;
                    if (sl2 > 0 && lhs > rhs) {
                        lv[i] = (int8_t)new_l;
                        sumlx = slx;
                        suml2 = sl2;
                        n_changed++;
                    }
                }
            }
        }
        if (!n_changed) break;
    }
    for (int i = 0; i < n; i++)
        lv[i] = (int8_t)(lv[i] + nmax);
    return suml2 > 0.0f ? sumlx / suml2 : 0.0f;
}

/* Asymmetric quants in [0, nmax] with a min: weighted least squares over nstep + 1 candidate
 * scales (llama.cpp's make_qkx2_quants). Returns the scale, *the_min = -min (>= 0). */
static float make_qkx2_quants(int n, int nmax, const float *x, const float *weights, uint8_t *lv,
                              float *the_min, uint8_t *lv_aux, float rmin, float rdelta, int nstep,
                              bool use_mad) {
    float min = x[0];
    float max = x[0];
    float sum_w = weights[0];
    float sum_x = sum_w * x[0];
    for (int i = 1; i < n; i++) {
        if (x[i] < min) min = x[i];
        if (x[i] > max) max = x[i];
        float w = weights[i];
        sum_w += w;
        float wx = w * x[i];
        sum_x += wx;
    }
    if (min > 0) min = 0;
    if (max == min) {
        memset(lv, 0, (size_t)n);
        *the_min = -min;
        return 0.0f;
    }
    float iscale = (float)nmax / (max - min);
    float scale = 1 / iscale;
    float best_error = 0;
    for (int i = 0; i < n; i++) {
        int l = nearest_int(iscale * (x[i] - min));
        lv[i] = (uint8_t)imax(0, imin(nmax, l));
        float sl = scale * (float)lv[i];
        float diff = sl + min - x[i];
        diff = use_mad ? fabsf(diff) : diff * diff;
        float wd = weights[i] * diff;
        best_error += wd;
    }
    for (int is = 0; is <= nstep; is++) {
        float step = rdelta * (float)is;
        iscale = (rmin + step + (float)nmax) / (max - min);
        float sum_l = 0;
        float sum_l2 = 0;
        float sum_xl = 0;
        for (int i = 0; i < n; i++) {
            int l = imax(0, imin(nmax, nearest_int(iscale * (x[i] - min))));
            lv_aux[i] = (uint8_t)l;
            float w = weights[i];
            float wl = w * (float)l;
            sum_l += wl;
            float wll = wl * (float)l;
            sum_l2 += wll;
            float wlx = wl * x[i];
            sum_xl += wlx;
        }
        float p1 = sum_w * sum_l2;
        float p2 = sum_l * sum_l;
        float det = p1 - p2;
        if (det > 0) {
            float a1 = sum_w * sum_xl;
            float a2 = sum_x * sum_l;
            float this_scale = (a1 - a2) / det;
            float b1 = sum_l2 * sum_x;
            float b2 = sum_l * sum_xl;
            float this_min = (b1 - b2) / det;
            if (this_min > 0) {
                this_min = 0;
                this_scale = sum_xl / sum_l2;
            }
            float cur_error = 0;
            for (int i = 0; i < n; i++) {
                float sl = this_scale * (float)lv_aux[i];
                float diff = sl + this_min - x[i];
                diff = use_mad ? fabsf(diff) : diff * diff;
                float wd = weights[i] * diff;
                cur_error += wd;
            }
            if (cur_error < best_error) {
                memcpy(lv, lv_aux, (size_t)n);
                best_error = cur_error;
                scale = this_scale;
                min = this_min;
            }
        }
    }
    *the_min = -min;
    return scale;
}

static void pack_2bit(const uint8_t lv[QK], uint8_t qs[64]) {
    for (int j = 0; j < QK; j += 128)
        for (int l = 0; l < 32; l++)
            qs[j / 4 + l] = (uint8_t)(lv[j + l] | (lv[j + l + 32] << 2) | (lv[j + l + 64] << 4) |
                                      (lv[j + l + 96] << 6));
}

void moeinf_ref_quantize_q2_k(const float *x, void *y, int64_t n) {
    uint8_t *out = y;
    for (int64_t i = 0; i < n / QK; i++, x += QK) {
        struct moeinf_block_q2_k b;
        memset(&b, 0, sizeof b);
        uint8_t lv[QK];
        uint8_t lv_aux[16];
        float weights[16];
        float mins[16];
        float scales[16];
        float max_scale = 0;
        float max_min = 0;
        for (int j = 0; j < 16; j++) {
            for (int l = 0; l < 16; l++)
                weights[l] = fabsf(x[16 * j + l]);
            scales[j] = make_qkx2_quants(16, 3, x + 16 * (size_t)j, weights, lv + 16 * (size_t)j,
                                         &mins[j], lv_aux, -0.5f, 0.1f, 15, true);
            if (scales[j] > max_scale) max_scale = scales[j];
            if (mins[j] > max_min) max_min = mins[j];
        }
        if (max_scale > 0) {
            float iscale = 15.0f / max_scale;
            for (int j = 0; j < 16; j++)
                b.scales[j] = (uint8_t)nearest_int(iscale * scales[j]);
            b.d = moeinf_fp32_to_fp16(max_scale / 15.0f);
        }
        if (max_min > 0) {
            float iscale = 15.0f / max_min;
            for (int j = 0; j < 16; j++)
                b.scales[j] |= (uint8_t)(nearest_int(iscale * mins[j]) << 4);
            b.dmin = moeinf_fp32_to_fp16(max_min / 15.0f);
        }
        for (int j = 0; j < 16; j++) {
            const float d = f16(b.d) * (float)(b.scales[j] & 0xF);
            if (d == 0.0f) continue;
            const float dm = f16(b.dmin) * (float)(b.scales[j] >> 4);
            for (int k = 0; k < 16; k++)
                lv[16 * j + k] = (uint8_t)imax(0, imin(3, nearest_int((x[16 * j + k] + dm) / d)));
        }
        pack_2bit(lv, b.qs);
        memcpy(out + i * (int64_t)sizeof b, &b, sizeof b);
    }
}

void moeinf_ref_quantize_q3_k(const float *x, void *y, int64_t n) {
    uint8_t *out = y;
    for (int64_t i = 0; i < n / QK; i++, x += QK) {
        struct moeinf_block_q3_k b;
        memset(&b, 0, sizeof b);
        int8_t lv[QK];
        float scales[16];
        float max_scale = 0;
        float amax = 0;
        for (int j = 0; j < 16; j++) {
            scales[j] = make_q3_quants(16, 4, x + 16 * (size_t)j, lv + 16 * (size_t)j);
            if (fabsf(scales[j]) > amax) {
                amax = fabsf(scales[j]);
                max_scale = scales[j];
            }
        }
        if (max_scale != 0.0f) {
            float iscale = -32.0f / max_scale;
            for (int j = 0; j < 16; j++) {
                int8_t l8 = (int8_t)nearest_int(iscale * scales[j]);
                int l = imax(-32, imin(31, l8)) + 32;
                if (j < 8)
                    b.scales[j] = (uint8_t)(l & 0xF);
                else
                    b.scales[j - 8] |= (uint8_t)((l & 0xF) << 4);
                b.scales[j % 4 + 8] |= (uint8_t)((l >> 4) << (2 * (j / 4)));
            }
            b.d = moeinf_fp32_to_fp16(1 / iscale);
        }
        int sc[16];
        q3_scales(b.scales, sc);
        for (int j = 0; j < 16; j++) {
            float d = f16(b.d) * (float)sc[j];
            if (d == 0.0f) continue;
            for (int k = 0; k < 16; k++)
                lv[16 * j + k] = (int8_t)(imax(-4, imin(3, nearest_int(x[16 * j + k] / d))) + 4);
        }
        uint8_t uq[QK];
        for (int j = 0; j < QK; j++) {
            uq[j] = (uint8_t)lv[j];
            if (uq[j] > 3) {
                b.hmask[j % 32] |= (uint8_t)(1u << (j / 32));
                uq[j] -= 4;
            }
        }
        pack_2bit(uq, b.qs);
        memcpy(out + i * (int64_t)sizeof b, &b, sizeof b);
    }
}

/* Q4_K and Q5_K share the search: 8 sub-blocks of 32, scales and mins as 6-bit integers. */
static void quantize_k4(const float *x, int nmax, float rmin, float rdelta, int nstep,
                        uint16_t *d_out, uint16_t *dmin_out, uint8_t scales_out[12],
                        uint8_t lv[QK]) {
    uint8_t lv_aux[32];
    float weights[32];
    float mins[8];
    float scales[8];
    float max_scale = 0;
    float max_min = 0;
    for (int j = 0; j < 8; j++) {
        float sum_x2 = 0;
        for (int l = 0; l < 32; l++) {
            float sq = x[32 * j + l] * x[32 * j + l];
            sum_x2 += sq;
        }
        float av_x = sqrtf(sum_x2 / 32);
        for (int l = 0; l < 32; l++)
            weights[l] = av_x + fabsf(x[32 * j + l]);
        scales[j] = make_qkx2_quants(32, nmax, x + 32 * (size_t)j, weights, lv + 32 * (size_t)j,
                                     &mins[j], lv_aux, rmin, rdelta, nstep, false);
        if (scales[j] > max_scale) max_scale = scales[j];
        if (mins[j] > max_min) max_min = mins[j];
    }
    float inv_scale = max_scale > 0 ? 63.0f / max_scale : 0.0f;
    float inv_min = max_min > 0 ? 63.0f / max_min : 0.0f;
    memset(scales_out, 0, 12);
    for (int j = 0; j < 8; j++) {
        uint8_t ls = (uint8_t)nearest_int(inv_scale * scales[j]);
        uint8_t lm = (uint8_t)nearest_int(inv_min * mins[j]);
        ls = ls < 63 ? ls : 63;
        lm = lm < 63 ? lm : 63;
        if (j < 4) {
            scales_out[j] = ls;
            scales_out[j + 4] = lm;
        } else {
            scales_out[j + 4] = (uint8_t)((ls & 0xF) | ((lm & 0xF) << 4));
            scales_out[j - 4] |= (uint8_t)((ls >> 4) << 6);
            scales_out[j] |= (uint8_t)((lm >> 4) << 6);
        }
    }
    *d_out = moeinf_fp32_to_fp16(max_scale / 63.0f);
    *dmin_out = moeinf_fp32_to_fp16(max_min / 63.0f);
    for (int j = 0; j < 8; j++) {
        int sc;
        int m;
        scale_min_k4(j, scales_out, &sc, &m);
        const float d = f16(*d_out) * (float)sc;
        if (d == 0.0f) continue;
        const float dm = f16(*dmin_out) * (float)m;
        for (int k = 0; k < 32; k++)
            lv[32 * j + k] = (uint8_t)imax(0, imin(nmax, nearest_int((x[32 * j + k] + dm) / d)));
    }
}

void moeinf_ref_quantize_q4_k(const float *x, void *y, int64_t n) {
    uint8_t *out = y;
    for (int64_t i = 0; i < n / QK; i++, x += QK) {
        struct moeinf_block_q4_k b;
        uint8_t lv[QK];
        quantize_k4(x, 15, -1.0f, 0.1f, 20, &b.d, &b.dmin, b.scales, lv);
        for (int c = 0; c < 4; c++)
            for (int l = 0; l < 32; l++)
                b.qs[32 * c + l] = (uint8_t)(lv[64 * c + l] | (lv[64 * c + 32 + l] << 4));
        memcpy(out + i * (int64_t)sizeof b, &b, sizeof b);
    }
}

void moeinf_ref_quantize_q5_k(const float *x, void *y, int64_t n) {
    uint8_t *out = y;
    for (int64_t i = 0; i < n / QK; i++, x += QK) {
        struct moeinf_block_q5_k b;
        uint8_t lv[QK];
        quantize_k4(x, 31, -0.5f, 0.1f, 15, &b.d, &b.dmin, b.scales, lv);
        memset(b.qh, 0, sizeof b.qh);
        for (int c = 0; c < 4; c++)
            for (int l = 0; l < 32; l++) {
                int l1 = lv[64 * c + l];
                int l2 = lv[64 * c + 32 + l];
                b.qh[l] |= (uint8_t)(((l1 >> 4) << (2 * c)) | ((l2 >> 4) << (2 * c + 1)));
                b.qs[32 * c + l] = (uint8_t)((l1 & 0xF) | ((l2 & 0xF) << 4));
            }
        memcpy(out + i * (int64_t)sizeof b, &b, sizeof b);
    }
}

void moeinf_ref_quantize_q6_k(const float *x, void *y, int64_t n) {
    uint8_t *out = y;
    for (int64_t i = 0; i < n / QK; i++, x += QK) {
        struct moeinf_block_q6_k b;
        memset(&b, 0, sizeof b);
        int8_t lv[QK];
        float scales[16];
        float max_scale = 0;
        float max_abs_scale = 0;
        for (int j = 0; j < 16; j++) {
            scales[j] = make_qx_quants(16, 32, x + 16 * (size_t)j, lv + 16 * (size_t)j);
            if (fabsf(scales[j]) > max_abs_scale) {
                max_abs_scale = fabsf(scales[j]);
                max_scale = scales[j];
            }
        }
        if (max_abs_scale >= 1e-15f) {
            float iscale = -128.0f / max_scale;
            b.d = moeinf_fp32_to_fp16(1 / iscale);
            for (int j = 0; j < 16; j++)
                b.scales[j] = (int8_t)imin(127, nearest_int(iscale * scales[j]));
            for (int j = 0; j < 16; j++) {
                float d = f16(b.d) * (float)b.scales[j];
                if (d == 0.0f) continue;
                for (int k = 0; k < 16; k++)
                    lv[16 * j + k] =
                        (int8_t)(imax(-32, imin(31, nearest_int(x[16 * j + k] / d))) + 32);
            }
            for (int half = 0; half < 2; half++) {
                const int8_t *lvh = lv + 128 * (size_t)half;
                uint8_t *ql = b.ql + 64 * (size_t)half;
                uint8_t *qh = b.qh + 32 * (size_t)half;
                for (int l = 0; l < 32; l++) {
                    ql[l] = (uint8_t)((lvh[l] & 0xF) | ((lvh[l + 64] & 0xF) << 4));
                    ql[l + 32] = (uint8_t)((lvh[l + 32] & 0xF) | ((lvh[l + 96] & 0xF) << 4));
                    qh[l] = (uint8_t)((lvh[l] >> 4) | ((lvh[l + 32] >> 4) << 2) |
                                      ((lvh[l + 64] >> 4) << 4) | ((lvh[l + 96] >> 4) << 6));
                }
            }
        }
        memcpy(out + i * (int64_t)sizeof b, &b, sizeof b);
    }
}

MOEINF_REF_DEFINE_ROW_LOOPS(q2_k)
MOEINF_REF_DEFINE_ROW_LOOPS(q3_k)
MOEINF_REF_DEFINE_ROW_LOOPS(q4_k)
MOEINF_REF_DEFINE_ROW_LOOPS(q5_k)
MOEINF_REF_DEFINE_ROW_LOOPS(q6_k)
