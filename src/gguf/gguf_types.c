/*
 * gguf_types.c - block layouts of the ggml tensor types, by type id.
 *
 * Facts from ggml (ggml.h's enum ggml_type and the type_traits table in ggml.c, at the
 * llama.cpp commit named in ../shared/testdata/README.md). Ids 4 and 5 (old q4_2/q4_3),
 * 31-33 (q4_0_4_4, q4_0_4_8, q4_0_8_8) and 36-38 (iq4_nl_4_4, ...) were removed from
 * ggml and from GGUF files; they are unknown here. q8_1 is 36 bytes (two F16 then 32
 * int8), as ggml's static_assert says; gguf-py's table lists 40 from an older layout.
 */
#include "gguf/gguf_types.h"

static const struct moeinf_gguf_type_info type_table[MOEINF_GGUF_N_TENSOR_TYPES] = {
    [0] = {"f32", 1, 4},         [1] = {"f16", 1, 2},         [2] = {"q4_0", 32, 18},
    [3] = {"q4_1", 32, 20},      [6] = {"q5_0", 32, 22},      [7] = {"q5_1", 32, 24},
    [8] = {"q8_0", 32, 34},      [9] = {"q8_1", 32, 36},      [10] = {"q2_K", 256, 84},
    [11] = {"q3_K", 256, 110},   [12] = {"q4_K", 256, 144},   [13] = {"q5_K", 256, 176},
    [14] = {"q6_K", 256, 210},   [15] = {"q8_K", 256, 292},   [16] = {"iq2_xxs", 256, 66},
    [17] = {"iq2_xs", 256, 74},  [18] = {"iq3_xxs", 256, 98}, [19] = {"iq1_s", 256, 50},
    [20] = {"iq4_nl", 32, 18},   [21] = {"iq3_s", 256, 110},  [22] = {"iq2_s", 256, 82},
    [23] = {"iq4_xs", 256, 136}, [24] = {"i8", 1, 1},         [25] = {"i16", 1, 2},
    [26] = {"i32", 1, 4},        [27] = {"i64", 1, 8},        [28] = {"f64", 1, 8},
    [29] = {"iq1_m", 256, 56},   [30] = {"bf16", 1, 2},       [34] = {"tq1_0", 256, 54},
    [35] = {"tq2_0", 256, 66},   [39] = {"mxfp4", 32, 17},    [40] = {"nvfp4", 64, 36},
    [41] = {"q1_0", 128, 18},
};

const struct moeinf_gguf_type_info *moeinf_gguf_type_info_get(int type) {
    if (type < 0 || type >= MOEINF_GGUF_N_TENSOR_TYPES) return NULL;
    const struct moeinf_gguf_type_info *t = &type_table[type];
    return t->name ? t : NULL;
}

const char *moeinf_gguf_type_name(int type) {
    const struct moeinf_gguf_type_info *t = moeinf_gguf_type_info_get(type);
    return t ? t->name : "unknown";
}
