/*
 * quant_types.c - the CPU traits of the types moeinf computes with (their activation partner
 * types and reference quantizers; the block sizes of every type are base/tensor_type.c), and
 * the scalar F16 / BF16 conversions.
 *
 * The F16 conversions are bit-exact twins of the x86 F16C instructions (vcvtps2ph with
 * round-to-nearest-even, vcvtph2ps), so that the scalar table and the SIMD tables agree on
 * every input, NaNs included. The BF16 conversion is ggml's: round to nearest even, NaN made
 * quiet, subnormals kept.
 */
#include "quant/quant.h"

#include <assert.h>
#include <string.h>

#include "quant/quant_ref.h"

/* The weight types moeinf computes with: one entry each (partner type, reference quantizer);
 * every other slot is empty (not supported). The float types' quantizers round as their
 * activation conversions do. */
static const struct moeinf_type_cpu cpu_table[MOEINF_TYPE_COUNT] = {
    [MOEINF_TYPE_F32] = {MOEINF_TYPE_F32, moeinf_ref_from_float_f32},
    [MOEINF_TYPE_F16] = {MOEINF_TYPE_F16, moeinf_ref_from_float_f16},
    [MOEINF_TYPE_BF16] = {MOEINF_TYPE_BF16, moeinf_ref_from_float_bf16},
    [MOEINF_TYPE_Q8_0] = {MOEINF_TYPE_Q8_0, moeinf_ref_quantize_q8_0},
    [MOEINF_TYPE_Q4_0] = {MOEINF_TYPE_Q8_0, moeinf_ref_quantize_q4_0},
    [MOEINF_TYPE_Q4_1] = {MOEINF_TYPE_Q8_1, moeinf_ref_quantize_q4_1},
    [MOEINF_TYPE_Q5_0] = {MOEINF_TYPE_Q8_0, moeinf_ref_quantize_q5_0},
    [MOEINF_TYPE_Q5_1] = {MOEINF_TYPE_Q8_1, moeinf_ref_quantize_q5_1},
    [MOEINF_TYPE_Q2_K] = {MOEINF_TYPE_Q8_K, moeinf_ref_quantize_q2_k},
    [MOEINF_TYPE_Q3_K] = {MOEINF_TYPE_Q8_K, moeinf_ref_quantize_q3_k},
    [MOEINF_TYPE_Q4_K] = {MOEINF_TYPE_Q8_K, moeinf_ref_quantize_q4_k},
    [MOEINF_TYPE_Q5_K] = {MOEINF_TYPE_Q8_K, moeinf_ref_quantize_q5_k},
    [MOEINF_TYPE_Q6_K] = {MOEINF_TYPE_Q8_K, moeinf_ref_quantize_q6_k},
    [MOEINF_TYPE_IQ4_NL] = {MOEINF_TYPE_Q8_0, moeinf_ref_quantize_iq4_nl},
    [MOEINF_TYPE_IQ4_XS] = {MOEINF_TYPE_Q8_K, moeinf_ref_quantize_iq4_xs},
    [MOEINF_TYPE_MXFP4] = {MOEINF_TYPE_Q8_0, moeinf_ref_quantize_mxfp4},
};

const struct moeinf_type_cpu *moeinf_type_cpu_get(int type) {
    if (type < 0 || type >= MOEINF_TYPE_COUNT || !cpu_table[type].quantize) return NULL;
    return &cpu_table[type];
}

void moeinf_quantize_row_ref(enum moeinf_type type, const float *x, void *y, int64_t n) {
    const struct moeinf_type_cpu *c = moeinf_type_cpu_get((int)type);
    assert(c && "moeinf_quantize_row_ref: unsupported type");
    if (c) c->quantize(x, y, n);
}

static uint32_t float_bits(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

static float bits_float(uint32_t u) {
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

uint16_t moeinf_fp32_to_fp16(float f) {
    uint32_t u = float_bits(f);
    uint16_t sign = (uint16_t)((u >> 16) & 0x8000u);
    uint32_t a = u & 0x7fffffffu;
    if (a > 0x7f800000u) /* NaN: quiet, keeping the top 9 payload bits (as vcvtps2ph) */
        return (uint16_t)(sign | 0x7e00u | ((a >> 13) & 0x3ffu));
    if (a >= 0x477ff000u) return (uint16_t)(sign | 0x7c00u); /* >= 65520 rounds to inf */
    if (a >= 0x38800000u) {                                  /* normal half: >= 2^-14 */
        a += 0xfffu + ((a >> 13) & 1u);                      /* round to nearest even */
        return (uint16_t)(sign | ((a - 0x38000000u) >> 13)); /* rebias 127 -> 15 */
    }
    if (a < 0x33000000u) return sign; /* <= 2^-25 (a tie with 0) rounds to zero */
    /* Subnormal half: value = m * 2^(e-150) = (m >> s) units of 2^-24 with s = 126 - e. */
    uint32_t e = a >> 23;
    uint32_t m = (a & 0x7fffffu) | 0x800000u;
    uint32_t s = 126u - e; /* 14..24 */
    uint32_t q = m >> s;
    uint32_t rem = m & ((1u << s) - 1u);
    uint32_t half = 1u << (s - 1u);
    if (rem > half || (rem == half && (q & 1u))) q++;
    return (uint16_t)(sign | q);
}

float moeinf_fp16_to_fp32(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t e = (h >> 10) & 0x1fu;
    uint32_t m = h & 0x3ffu;
    if (e == 0x1f) /* inf, or NaN made quiet as vcvtph2ps does */
        return bits_float(sign | 0x7f800000u | (m << 13) | (m ? 0x400000u : 0u));
    if (e == 0) { /* zero or subnormal: m * 2^-24, exact in float */
        float v = (float)m * 0x1p-24f;
        return sign ? -v : v;
    }
    return bits_float(sign | ((e + 112u) << 23) | (m << 13));
}

uint16_t moeinf_fp32_to_bf16(float f) {
    uint32_t u = float_bits(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 64u); /* quiet NaN */
    return (uint16_t)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

float moeinf_bf16_to_fp32(uint16_t h) {
    return bits_float((uint32_t)h << 16);
}
