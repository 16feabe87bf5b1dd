/*
 * tensor_type.c - the one table of ggml tensor types (tensor_type.h).
 *
 * Facts from ggml (ggml.h's enum ggml_type and the type_traits table in ggml.c, at the
 * llama.cpp commit named in ../shared/testdata/README.md). Q8_1 is ggml's 36-byte block
 * {half d, half s, int8 qs[32]}, as ggml's static_assert says; gguf-py's table still lists 40
 * from an older layout.
 */
#include "base/tensor_type.h"

#include <assert.h>

static const struct moeinf_type_traits type_table[MOEINF_TYPE_COUNT] = {
    [MOEINF_TYPE_F32] = {"f32", 1, 4},
    [MOEINF_TYPE_F16] = {"f16", 1, 2},
    [MOEINF_TYPE_Q4_0] = {"q4_0", 32, 18},
    [MOEINF_TYPE_Q4_1] = {"q4_1", 32, 20},
    [MOEINF_TYPE_Q5_0] = {"q5_0", 32, 22},
    [MOEINF_TYPE_Q5_1] = {"q5_1", 32, 24},
    [MOEINF_TYPE_Q8_0] = {"q8_0", 32, 34},
    [MOEINF_TYPE_Q8_1] = {"q8_1", 32, 36},
    [MOEINF_TYPE_Q2_K] = {"q2_K", 256, 84},
    [MOEINF_TYPE_Q3_K] = {"q3_K", 256, 110},
    [MOEINF_TYPE_Q4_K] = {"q4_K", 256, 144},
    [MOEINF_TYPE_Q5_K] = {"q5_K", 256, 176},
    [MOEINF_TYPE_Q6_K] = {"q6_K", 256, 210},
    [MOEINF_TYPE_Q8_K] = {"q8_K", 256, 292},
    [MOEINF_TYPE_IQ2_XXS] = {"iq2_xxs", 256, 66},
    [MOEINF_TYPE_IQ2_XS] = {"iq2_xs", 256, 74},
    [MOEINF_TYPE_IQ3_XXS] = {"iq3_xxs", 256, 98},
    [MOEINF_TYPE_IQ1_S] = {"iq1_s", 256, 50},
    [MOEINF_TYPE_IQ4_NL] = {"iq4_nl", 32, 18},
    [MOEINF_TYPE_IQ3_S] = {"iq3_s", 256, 110},
    [MOEINF_TYPE_IQ2_S] = {"iq2_s", 256, 82},
    [MOEINF_TYPE_IQ4_XS] = {"iq4_xs", 256, 136},
    [MOEINF_TYPE_I8] = {"i8", 1, 1},
    [MOEINF_TYPE_I16] = {"i16", 1, 2},
    [MOEINF_TYPE_I32] = {"i32", 1, 4},
    [MOEINF_TYPE_I64] = {"i64", 1, 8},
    [MOEINF_TYPE_F64] = {"f64", 1, 8},
    [MOEINF_TYPE_IQ1_M] = {"iq1_m", 256, 56},
    [MOEINF_TYPE_BF16] = {"bf16", 1, 2},
    /* 31-33 (q4_0_4_4, q4_0_4_8, q4_0_8_8) were removed from ggml and from GGUF files. */
    [MOEINF_TYPE_TQ1_0] = {"tq1_0", 256, 54},
    [MOEINF_TYPE_TQ2_0] = {"tq2_0", 256, 66},
    /* 36-38 (iq4_nl_4_4, iq4_nl_4_8, iq4_nl_8_8) were removed likewise. */
    [MOEINF_TYPE_MXFP4] = {"mxfp4", 32, 17},
    [MOEINF_TYPE_NVFP4] = {"nvfp4", 64, 36},
    [MOEINF_TYPE_Q1_0] = {"q1_0", 128, 18},
};

const struct moeinf_type_traits *moeinf_type_traits_get(int type) {
    if (type < 0 || type >= MOEINF_TYPE_COUNT || !type_table[type].name) return NULL;
    return &type_table[type];
}

const char *moeinf_type_name(int type) {
    const struct moeinf_type_traits *t = moeinf_type_traits_get(type);
    return t ? t->name : "unknown";
}

size_t moeinf_row_bytes(enum moeinf_type type, int64_t n) {
    const struct moeinf_type_traits *t = moeinf_type_traits_get((int)type);
    if (!t || n < 0) return 0;
    assert(n % t->block_size == 0);
    return (size_t)(n / t->block_size) * t->type_size;
}
