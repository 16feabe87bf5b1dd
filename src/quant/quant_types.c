/*
 * quant_types.c - per-type traits of every ggml type id, row sizes, and the scalar F16 / BF16
 * conversions.
 *
 * The F16 conversions are bit-exact twins of the x86 F16C instructions (vcvtps2ph with
 * round-to-nearest-even, vcvtph2ps), so that the scalar table and the SIMD tables agree on
 * every input, NaNs included. The BF16 conversion is ggml's: round to nearest even, NaN made
 * quiet, subnormals kept.
 */
#include "quant/quant.h"

#include <assert.h>
#include <string.h>

/* Block sizes and bytes per block as in ggml's type_traits (ggml.c). Q8_1 is ggml's
 * 36-byte block_q8_1 {half d, half s, int8 qs[32]} (gguf-py still lists an older 40). */
static const struct moeinf_type_traits traits[MOEINF_TYPE_COUNT] = {
    [MOEINF_TYPE_F32] = {"f32", 1, 4, true, MOEINF_TYPE_F32},
    [MOEINF_TYPE_F16] = {"f16", 1, 2, true, MOEINF_TYPE_F16},
    [MOEINF_TYPE_Q4_0] = {"q4_0", 32, 18, true, MOEINF_TYPE_Q8_0},
    [MOEINF_TYPE_Q4_1] = {"q4_1", 32, 20, false, MOEINF_TYPE_F32},
    [MOEINF_TYPE_Q5_0] = {"q5_0", 32, 22, false, MOEINF_TYPE_F32},
    [MOEINF_TYPE_Q5_1] = {"q5_1", 32, 24, false, MOEINF_TYPE_F32},
    [MOEINF_TYPE_Q8_0] = {"q8_0", 32, 34, true, MOEINF_TYPE_Q8_0},
    [MOEINF_TYPE_Q8_1] = {"q8_1", 32, 36, false, MOEINF_TYPE_F32},
    [MOEINF_TYPE_Q2_K] = {"q2_K", 256, 84, false, MOEINF_TYPE_F32},
    [MOEINF_TYPE_Q3_K] = {"q3_K", 256, 110, false, MOEINF_TYPE_F32},
    [MOEINF_TYPE_Q4_K] = {"q4_K", 256, 144, false, MOEINF_TYPE_F32},
    [MOEINF_TYPE_Q5_K] = {"q5_K", 256, 176, false, MOEINF_TYPE_F32},
    [MOEINF_TYPE_Q6_K] = {"q6_K", 256, 210, false, MOEINF_TYPE_F32},
    [MOEINF_TYPE_Q8_K] = {"q8_K", 256, 292, false, MOEINF_TYPE_F32},
    [16] = {"iq2_xxs", 256, 66, false, MOEINF_TYPE_F32},
    [17] = {"iq2_xs", 256, 74, false, MOEINF_TYPE_F32},
    [18] = {"iq3_xxs", 256, 98, false, MOEINF_TYPE_F32},
    [19] = {"iq1_s", 256, 50, false, MOEINF_TYPE_F32},
    [20] = {"iq4_nl", 32, 18, false, MOEINF_TYPE_F32},
    [21] = {"iq3_s", 256, 110, false, MOEINF_TYPE_F32},
    [22] = {"iq2_s", 256, 82, false, MOEINF_TYPE_F32},
    [23] = {"iq4_xs", 256, 136, false, MOEINF_TYPE_F32},
    [24] = {"i8", 1, 1, false, MOEINF_TYPE_F32},
    [25] = {"i16", 1, 2, false, MOEINF_TYPE_F32},
    [26] = {"i32", 1, 4, false, MOEINF_TYPE_F32},
    [27] = {"i64", 1, 8, false, MOEINF_TYPE_F32},
    [28] = {"f64", 1, 8, false, MOEINF_TYPE_F32},
    [29] = {"iq1_m", 256, 56, false, MOEINF_TYPE_F32},
    [MOEINF_TYPE_BF16] = {"bf16", 1, 2, true, MOEINF_TYPE_BF16},
    /* 31-33 (q4_0_4_4, q4_0_4_8, q4_0_8_8) were removed from ggml and from GGUF files. */
    [34] = {"tq1_0", 256, 54, false, MOEINF_TYPE_F32},
    [35] = {"tq2_0", 256, 66, false, MOEINF_TYPE_F32},
    /* 36-38 (iq4_nl_4_4, iq4_nl_4_8, iq4_nl_8_8) were removed likewise. */
    [39] = {"mxfp4", 32, 17, false, MOEINF_TYPE_F32},
    [40] = {"nvfp4", 64, 36, false, MOEINF_TYPE_F32},
    [41] = {"q1_0", 128, 18, false, MOEINF_TYPE_F32},
};

const struct moeinf_type_traits *moeinf_type_traits_get(int type) {
    if (type < 0 || type >= MOEINF_TYPE_COUNT || !traits[type].name) return NULL;
    return &traits[type];
}

size_t moeinf_row_bytes(enum moeinf_type type, int64_t n) {
    const struct moeinf_type_traits *t = moeinf_type_traits_get((int)type);
    if (!t || n < 0) return 0;
    assert(n % t->block_size == 0);
    return (size_t)(n / t->block_size) * t->type_size;
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
