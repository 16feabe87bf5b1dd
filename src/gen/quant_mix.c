/*
 * quant_mix.c - gen-model's tensor types and llama-quantize's Q4_K_M mix (quant_mix.h).
 *
 * The Q4_K_M rules are facts from llama.cpp's llama_tensor_get_type (src/llama-quant.cpp)
 * at the commit of ../shared/testdata/README.md, restricted to what a Mixtral-family model
 * without an imatrix meets; the tiny-mixtral and tiny-qwen2moe Q4_K_M files (testdata README
 * 1.5) show the same choices, fallbacks included.
 */
#include "gen/quant_mix.h"

#include <string.h>

#include "base/tensor_type.h"

/* gen-model's --type names; the mix has a pseudo id outside ggml's (moeinf.h). */
static const struct {
    const char *name;
    int type;
    uint32_t file_type; /* llama_ftype */
} gen_types[] = {
    {"f32", MOEINF_TYPE_F32, 0},
    {"f16", MOEINF_TYPE_F16, 1},
    {"q4_0", MOEINF_TYPE_Q4_0, 2},
    {"q4_1", MOEINF_TYPE_Q4_1, 3},
    {"q8_0", MOEINF_TYPE_Q8_0, 7},
    {"q5_0", MOEINF_TYPE_Q5_0, 8},
    {"q5_1", MOEINF_TYPE_Q5_1, 9},
    {"q2_k", MOEINF_TYPE_Q2_K, 10},         /* MOSTLY_Q2_K */
    {"q3_k", MOEINF_TYPE_Q3_K, 11},         /* MOSTLY_Q3_K_S */
    {"q4_k", MOEINF_TYPE_Q4_K, 14},         /* MOSTLY_Q4_K_S */
    {"q5_k", MOEINF_TYPE_Q5_K, 16},         /* MOSTLY_Q5_K_S */
    {"q6_k", MOEINF_TYPE_Q6_K, 18},         /* MOSTLY_Q6_K */
    {"iq4_nl", MOEINF_TYPE_IQ4_NL, 25},     /* MOSTLY_IQ4_NL */
    {"iq4_xs", MOEINF_TYPE_IQ4_XS, 30},     /* MOSTLY_IQ4_XS */
    {"mxfp4", MOEINF_TYPE_MXFP4, 38},       /* MOSTLY_MXFP4_MOE */
    {"q4_k_m", MOEINF_GEN_TYPE_Q4_K_M, 15},       /* MOSTLY_Q4_K_M */
    {"mxfp4_moe", MOEINF_GEN_TYPE_MXFP4_MOE, 38}, /* MOSTLY_MXFP4_MOE */
};

#define N_GEN_TYPES (sizeof gen_types / sizeof gen_types[0])

int moeinf_gen_type_by_name(const char *name) {
    for (size_t i = 0; i < N_GEN_TYPES; i++)
        if (strcmp(name, gen_types[i].name) == 0) return gen_types[i].type;
    return -1;
}

const char *moeinf_gen_type_name(int type) {
    for (size_t i = 0; i < N_GEN_TYPES; i++)
        if (gen_types[i].type == type) return gen_types[i].name;
    return "unknown";
}

const char *moeinf_gen_type_names(void) {
    return "f32, f16, q8_0, q4_0, q4_1, q5_0, q5_1, q2_k, q3_k, q4_k, q5_k, q6_k, iq4_nl, "
           "iq4_xs, mxfp4, q4_k_m, mxfp4_moe";
}

bool moeinf_gen_type_is_plain(int type) {
    for (size_t i = 0; i < N_GEN_TYPES; i++)
        if (gen_types[i].type == type) return !moeinf_gen_type_is_mix(type);
    return false;
}

bool moeinf_gen_type_is_mix(int type) {
    return type == MOEINF_GEN_TYPE_Q4_K_M || type == MOEINF_GEN_TYPE_MXFP4_MOE;
}

int moeinf_mxfp4_moe_type(int64_t ne2) {
    return ne2 > 1 ? MOEINF_TYPE_MXFP4 : MOEINF_TYPE_Q8_0;
}

uint32_t moeinf_gen_file_type(int type) {
    for (size_t i = 0; i < N_GEN_TYPES; i++)
        if (gen_types[i].type == type) return gen_types[i].file_type;
    return 0;
}

static bool use_more_bits(int i, int n) {
    return i < n / 8 || i >= 7 * n / 8 || (i - n / 8) % 3 == 2;
}

static bool ends_with(const char *s, const char *tail) {
    size_t a = strlen(s);
    size_t b = strlen(tail);
    return a >= b && strcmp(s + a - b, tail) == 0;
}

int moeinf_q4_k_m_type(const char *name, int layer, int n_layer, int n_expert, int64_t ne0,
                       bool is_lm_head) {
    const bool whole = ne0 % 256 == 0;
    if (is_lm_head) return whole ? MOEINF_TYPE_Q6_K : MOEINF_TYPE_Q8_0;
    int t = MOEINF_TYPE_Q4_K;
    if (ends_with(name, "attn_v") || ends_with(name, "attn_qkv")) {
        if (n_expert == 8)
            t = MOEINF_TYPE_Q8_0;
        else if (use_more_bits(layer, n_layer))
            t = MOEINF_TYPE_Q6_K;
    } else if (ends_with(name, "attn_k")) {
        if (n_expert == 8) t = MOEINF_TYPE_Q8_0;
    } else if (ends_with(name, "attn_output")) {
        if (n_expert == 8) t = MOEINF_TYPE_Q5_K;
    } else if (strstr(name, "ffn_down")) {
        if (use_more_bits(layer, n_layer)) t = MOEINF_TYPE_Q6_K;
    }
    if (!whole) {
        if (t == MOEINF_TYPE_Q4_K) t = MOEINF_TYPE_Q5_0;
        if (t == MOEINF_TYPE_Q5_K) t = MOEINF_TYPE_Q5_1;
        if (t == MOEINF_TYPE_Q6_K) t = MOEINF_TYPE_Q8_0;
    }
    return t;
}
