/*
 * softmax.h - attention's softmax (quant.h's moeinf_softmax_fn), internal to src/quant: the
 * exponential and the lane sum that the scalar table (softmax_ref.c) and the x86 tables
 * (softmax_avx2.c) share, so that both give the same bits.
 *
 * The exponential is computed here, not by libm's expf (one call per score, and scalar: with
 * the serial sum beside it, about a quarter of a Qwen3-shaped 2048-token attention on the Intel
 * Xeon of docs/PERFORMANCE.md), as a fixed
 * sequence of float operations, each correctly rounded (an FMA rounds once, as C's fmaf does), so
 * a vector lane computes what the scalar loop computes:
 *   n = x log2(e) rounded to an integer (adding 1.5 x 2^23 rounds it in the FMA),
 *   r = x - n ln2 (ln2 in two parts),
 *   e^r by its Taylor polynomial of degree 7 (|r| <= ln2 / 2: the terms left out are below
 *   2^-27 of the result),
 *   times 2^n made from n's bits.
 * It serves x <= 0 (a score less the row's largest); x < EXP_MIN gives 0 (exp(-87) is 2^-125.5,
 * where 2^n leaves the normal floats), NaN gives NaN. tests/test_attn_kernels.c bounds its
 * error against float64 exp (0.86 ulp at most, sampled).
 */
#ifndef MOEINF_QUANT_SOFTMAX_H
#define MOEINF_QUANT_SOFTMAX_H

#include <math.h>
#include <stdint.h>
#include <string.h>

#define EXP_LOG2E      0x1.715476p+0f
#define EXP_SHIFT      0x1.8p23f /* its float's unit in the last place is 1 */
#define EXP_SHIFT_BITS 0x4b400000u
#define EXP_LN2_HI     0x1.62e43p-1f
#define EXP_LN2_LO     (-0x1.05c61p-29f)
#define EXP_C2         0x1p-1f
#define EXP_C3         0x1.555556p-3f
#define EXP_C4         0x1.555556p-5f
#define EXP_C5         0x1.111112p-7f
#define EXP_C6         0x1.6c16c2p-10f
#define EXP_C7         0x1.a01a02p-13f
#define EXP_MIN        (-87.0f)

/* The sum of a row's exponentials is kept in this many double lanes, lane l holding the
 * positions t with t % SOFTMAX_LANES == l in order (two vectors of 8 floats a step), then added
 * by softmax_lanes_total. */
#define SOFTMAX_LANES 16

static inline float softmax_exp(float x) {
    const float t = fmaf(x, EXP_LOG2E, EXP_SHIFT);
    const float n = t - EXP_SHIFT;
    float r = fmaf(n, -EXP_LN2_HI, x);
    r = fmaf(n, -EXP_LN2_LO, r);
    float p = fmaf(EXP_C7, r, EXP_C6);
    p = fmaf(p, r, EXP_C5);
    p = fmaf(p, r, EXP_C4);
    p = fmaf(p, r, EXP_C3);
    p = fmaf(p, r, EXP_C2);
    p = fmaf(p, r, 1.0f);
    p = fmaf(p, r, 1.0f);
    uint32_t bits;
    memcpy(&bits, &t, sizeof bits);
    bits = (bits - EXP_SHIFT_BITS + 127u) << 23; /* 2^n (unsigned: wraps, no overflow) */
    float scale;
    memcpy(&scale, &bits, sizeof scale);
    return x < EXP_MIN ? 0.0f : p * scale;
}

/* The lanes added pairwise, halves first: lane[i] += lane[i + w] for w = 8, 4, 2, 1. */
static inline double softmax_lanes_total(double lane[SOFTMAX_LANES]) {
    for (int w = SOFTMAX_LANES / 2; w > 0; w /= 2)
        for (int i = 0; i < w; i++)
            lane[i] += lane[i + w];
    return lane[0];
}

/* The row's sum with the sink's share, and its scale: the last steps of both versions. */
static inline float softmax_inverse(double lanes_total, float max, const float *sink) {
    double sum = lanes_total;
    if (sink) sum += (double)softmax_exp(*sink - max);
    return (float)(1.0 / sum);
}

void moeinf_ref_softmax_f32(float *s, int64_t n, const float *sink);
#if defined(__x86_64__)
void moeinf_softmax_f32_avx2(float *s, int64_t n, const float *sink);
#endif

#endif
