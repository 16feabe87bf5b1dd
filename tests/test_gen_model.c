// ctest-labels: threads
/*
 * test_gen_model.c - moeinf_gen_model: tiny models written to scratch files and read back
 * with the GGUF reader. Checks the metadata and tensor layout llama.cpp expects for arch
 * "llama" (and for qwen2moe, qwen3moe and olmoe, which the engine then runs; qwen35moe,
 * qwen3next and gpt-oss key by key and tensor by tensor, gpt-oss also loaded by llama.cpp
 * through llama-cpp-python, and its presets), the weight statistics
 * of README 1.6 (moments and normal tail masses computed here in float64, weights decoded from
 * F32/F16/Q8_0/Q4_0 by this file's own decoders), determinism (seed, thread count), the vocabulary,
 * and that failures leave no file.
 */
#include <dirent.h>
#include <math.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>

#include "gen/quant_mix.h"
#include "gguf/gguf.h"
#include "moeinf.h"
#include "quant/quant.h"
#include "test.h"

/* A small MoE: 2 layers, 8 experts top-2, n_embd 64, n_ff 256, 4 heads, 2 KV heads. */
static struct moeinf_gen_params tiny(int type) {
    struct moeinf_gen_params p = moeinf_gen_params_default();
    p.n_layer = 2;
    p.n_expert = 8;
    p.n_expert_used = 2;
    p.n_embd = 64;
    p.n_ff = 256;
    p.n_head = 4;
    p.n_head_kv = 2;
    p.n_ctx_train = 512;
    p.type = type;
    p.seed = 1234;
    p.n_threads = 2;
    return p;
}

/* A tiny hybrid model: 4 layers (three Gated DeltaNet, then full attention at layer 3 with
 * the default interval 4), n_embd 64, 4 experts top-2 of width 32 plus a shared one, 4 heads
 * of 64 (2 KV), 64 rotary dims, linear attention 2 key / 4 value heads of 16. */
static struct moeinf_gen_params tiny_hybrid(const char *arch, int type) {
    struct moeinf_gen_params p = tiny(type);
    p.arch = arch;
    p.n_layer = 4;
    p.n_expert = 4;
    p.n_ff = 32;
    p.n_expert_shared = 1;
    p.n_embd_head = 64;
    p.n_rot = 64;
    p.ssm_d_state = 16;
    p.ssm_n_group = 2;
    p.ssm_dt_rank = 4;
    return p;
}

static struct moeinf_gguf *gen_open(const struct moeinf_gen_params *p, const char *name, char *path,
                                    size_t size) {
    test_tmp_path(name, path, size);
    struct moeinf_error err = {0};
    enum moeinf_status st = moeinf_gen_model(p, path, &err);
    CHECK_MSG(st == MOEINF_OK, "%s", err.msg);
    if (st) return NULL;
    struct moeinf_gguf *g = NULL;
    st = moeinf_gguf_open(path, &g, &err);
    CHECK_MSG(st == MOEINF_OK, "%s", err.msg);
    return g;
}

static uint32_t u32_of(const struct moeinf_gguf *g, const char *key) {
    uint32_t v = 0xffffffffu;
    struct moeinf_error err;
    CHECK_MSG(moeinf_gguf_get_u32(g, key, &v, &err) == MOEINF_OK, "%s", err.msg);
    return v;
}

static void check_tensor(const struct moeinf_gguf *g, const char *name, int type, int n_dims,
                         int64_t ne0, int64_t ne1, int64_t ne2) {
    const struct moeinf_gguf_tensor *t = moeinf_gguf_find_tensor(g, name);
    CHECK_MSG(t != NULL, "missing tensor %s", name);
    if (!t) return;
    CHECK_MSG(t->type == type && t->n_dims == n_dims && t->ne[0] == ne0 && t->ne[1] == ne1 &&
                  t->ne[2] == ne2,
              "%s: type %d dims %d [%lld, %lld, %lld]", name, t->type, t->n_dims,
              (long long)t->ne[0], (long long)t->ne[1], (long long)t->ne[2]);
}

/* ---- this test's own decoders --------------------------------------------------------- */

static double half_to_double(uint16_t h) {
    int exp = (h >> 10) & 0x1f;
    int mant = h & 0x3ff;
    double v = exp == 0 ? ldexp(mant, -24) : ldexp(mant + 1024, exp - 25);
    if (exp == 31) v = mant ? NAN : INFINITY;
    return (h & 0x8000) ? -v : v;
}

static uint16_t ld16(const uint8_t *p) {
    return (uint16_t)(p[0] | p[1] << 8);
}

/* Element i of a tensor as a double (F32, F16, Q8_0, Q4_0). */
static double weight(const struct moeinf_gguf_tensor *t, int64_t i) {
    const uint8_t *d = t->data;
    switch (t->type) {
    case 0: {
        float f;
        memcpy(&f, d + 4 * i, 4);
        return f;
    }
    case 1:
        return half_to_double(ld16(d + 2 * i));
    case 8: {
        const uint8_t *b = d + (i / 32) * 34;
        return half_to_double(ld16(b)) * (int8_t)b[2 + i % 32];
    }
    case 2: {
        const uint8_t *b = d + (i / 32) * 18;
        int j = (int)(i % 32);
        int q = j < 16 ? (b[2 + j] & 15) : (b[2 + j - 16] >> 4);
        return half_to_double(ld16(b)) * (q - 8);
    }
    default:
        return NAN;
    }
}

struct stats {
    int64_t n;
    double mean, std, within1, beyond2, beyond3, kurt;
};

static struct stats stats_of(const struct moeinf_gguf_tensor *t, double center) {
    struct stats s = {0};
    s.n = t->ne[0] * t->ne[1] * t->ne[2] * t->ne[3];
    double sum = 0;
    double sum2 = 0;
    for (int64_t i = 0; i < s.n; i++) {
        double v = weight(t, i);
        sum += v;
        sum2 += (v - center) * (v - center);
    }
    s.mean = sum / (double)s.n;
    s.std = sqrt(sum2 / (double)s.n);
    double m4 = 0;
    for (int64_t i = 0; i < s.n; i++) {
        double z = (weight(t, i) - center) / s.std;
        s.within1 += fabs(z) < 1;
        s.beyond2 += fabs(z) > 2;
        s.beyond3 += fabs(z) > 3;
        m4 += z * z * z * z;
    }
    s.within1 /= (double)s.n;
    s.beyond2 /= (double)s.n;
    s.beyond3 /= (double)s.n;
    s.kurt = m4 / (double)s.n;
    return s;
}

/* ---- tests ---------------------------------------------------------------------------- */

static void test_layout(void) {
    char path[512];
    struct moeinf_gen_params p = tiny(0);
    struct moeinf_gguf *g = gen_open(&p, "gen-layout.gguf", path, sizeof path);
    if (!g) return;
    struct moeinf_error err;
    struct moeinf_gguf_str s;
    CHECK_EQ_INT(moeinf_gguf_get_str(g, "general.architecture", &s, &err), MOEINF_OK);
    CHECK(moeinf_gguf_str_eq(s, "llama"));
    CHECK_EQ_INT(g->version, 3);
    CHECK_EQ_INT(g->alignment, 32);
    CHECK_EQ_INT(u32_of(g, "general.alignment"), 32);
    CHECK_EQ_INT(u32_of(g, "general.file_type"), 0);
    CHECK_EQ_INT(u32_of(g, "llama.block_count"), 2);
    CHECK_EQ_INT(u32_of(g, "llama.embedding_length"), 64);
    CHECK_EQ_INT(u32_of(g, "llama.feed_forward_length"), 256);
    CHECK_EQ_INT(u32_of(g, "llama.attention.head_count"), 4);
    CHECK_EQ_INT(u32_of(g, "llama.attention.head_count_kv"), 2);
    CHECK_EQ_INT(u32_of(g, "llama.attention.key_length"), 16);
    CHECK_EQ_INT(u32_of(g, "llama.attention.value_length"), 16);
    CHECK_EQ_INT(u32_of(g, "llama.rope.dimension_count"), 16);
    CHECK_EQ_INT(u32_of(g, "llama.expert_count"), 8);
    CHECK_EQ_INT(u32_of(g, "llama.expert_used_count"), 2);
    CHECK_EQ_INT(u32_of(g, "llama.context_length"), 512);
    float f = 0;
    CHECK_EQ_INT(moeinf_gguf_get_f32(g, "llama.rope.freq_base", &f, &err), MOEINF_OK);
    CHECK(f == 1e6f);
    CHECK_EQ_INT(moeinf_gguf_get_f32(g, "llama.attention.layer_norm_rms_epsilon", &f, &err),
                 MOEINF_OK);
    CHECK(f == 1e-5f);

    /* The vocabulary: specials, bytes, pieces, consistent counts. */
    CHECK_EQ_INT(moeinf_gguf_get_str(g, "tokenizer.ggml.model", &s, &err), MOEINF_OK);
    CHECK(moeinf_gguf_str_eq(s, "llama"));
    const struct moeinf_gguf_kv *tok = NULL;
    const struct moeinf_gguf_kv *sc = NULL;
    const struct moeinf_gguf_kv *ty = NULL;
    CHECK_EQ_INT(
        moeinf_gguf_get_arr(g, "tokenizer.ggml.tokens", MOEINF_GGUF_TYPE_STRING, &tok, &err), 0);
    CHECK_EQ_INT(
        moeinf_gguf_get_arr(g, "tokenizer.ggml.scores", MOEINF_GGUF_TYPE_FLOAT32, &sc, &err), 0);
    CHECK_EQ_INT(
        moeinf_gguf_get_arr(g, "tokenizer.ggml.token_type", MOEINF_GGUF_TYPE_INT32, &ty, &err), 0);
    uint32_t n_vocab = u32_of(g, "llama.vocab_size");
    if (tok && sc && ty) {
        CHECK_EQ_INT(tok->n_elem, n_vocab);
        CHECK_EQ_INT(sc->n_elem, n_vocab);
        CHECK_EQ_INT(ty->n_elem, n_vocab);
        CHECK(n_vocab > 259 + 300 && n_vocab < 4000);
        CHECK(moeinf_gguf_str_eq(moeinf_gguf_arr_str(tok, 0), "<unk>"));
        CHECK(moeinf_gguf_str_eq(moeinf_gguf_arr_str(tok, 1), "<s>"));
        CHECK(moeinf_gguf_str_eq(moeinf_gguf_arr_str(tok, 2), "</s>"));
        CHECK_EQ_INT(moeinf_gguf_arr_i32(ty, 0), 2);
        CHECK_EQ_INT(moeinf_gguf_arr_i32(ty, 1), 3);
        CHECK_EQ_INT(moeinf_gguf_arr_i32(ty, 2), 3);
        for (int b = 0; b < 256; b++) {
            char want[8];
            snprintf(want, sizeof want, "<0x%02X>", b);
            CHECK(moeinf_gguf_str_eq(moeinf_gguf_arr_str(tok, 3 + (uint64_t)b), want));
            CHECK_EQ_INT(moeinf_gguf_arr_i32(ty, 3 + (uint64_t)b), 6);
        }
        int n_space = 0;
        int n_dup = 0;
        for (uint64_t i = 259; i < tok->n_elem; i++) {
            struct moeinf_gguf_str t = moeinf_gguf_arr_str(tok, i);
            CHECK(t.len > 0);
            CHECK_EQ_INT(moeinf_gguf_arr_i32(ty, i), 1);
            n_space += t.len >= 3 && !memcmp(t.data, "\xe2\x96\x81", 3);
            if (i > 259) CHECK(moeinf_gguf_arr_f32(sc, i) < moeinf_gguf_arr_f32(sc, i - 1));
            if (i % 7 == 0) { /* spot check: no piece appears twice */
                for (uint64_t k = 0; k < i; k++) {
                    struct moeinf_gguf_str o = moeinf_gguf_arr_str(tok, k);
                    n_dup += o.len == t.len && !memcmp(o.data, t.data, t.len);
                }
            }
        }
        CHECK(n_space > 100);
        CHECK_EQ_INT(n_dup, 0);
    }
    CHECK_EQ_INT(u32_of(g, "tokenizer.ggml.bos_token_id"), 1);
    CHECK_EQ_INT(u32_of(g, "tokenizer.ggml.eos_token_id"), 2);
    bool add_bos = false;
    CHECK_EQ_INT(moeinf_gguf_get_bool_opt(g, "tokenizer.ggml.add_bos_token", &add_bos, &err), 0);
    CHECK(add_bos);

    /* Tensors as llama.cpp names and shapes them. */
    CHECK_EQ_INT(g->n_tensors, 3 + 2 * 10);
    check_tensor(g, "token_embd.weight", 0, 2, 64, n_vocab, 1);
    check_tensor(g, "output_norm.weight", 0, 1, 64, 1, 1);
    check_tensor(g, "output.weight", 0, 2, 64, n_vocab, 1);
    for (int l = 0; l < 2; l++) {
        char n[64];
#define T(suffix, type, nd, a, b, c)                                                               \
    snprintf(n, sizeof n, "blk.%d." suffix ".weight", l);                                          \
    check_tensor(g, n, type, nd, a, b, c)
        T("attn_norm", 0, 1, 64, 1, 1);
        T("attn_q", 0, 2, 64, 64, 1);
        T("attn_k", 0, 2, 64, 32, 1);
        T("attn_v", 0, 2, 64, 32, 1);
        T("attn_output", 0, 2, 64, 64, 1);
        T("ffn_norm", 0, 1, 64, 1, 1);
        T("ffn_gate_inp", 0, 2, 64, 8, 1);
        T("ffn_gate_exps", 0, 3, 64, 256, 8);
        T("ffn_up_exps", 0, 3, 64, 256, 8);
        T("ffn_down_exps", 0, 3, 256, 64, 8);
#undef T
    }
    moeinf_gguf_free(g);
    remove(path);
}

static void test_weight_statistics(void) {
    char path[512];
    struct moeinf_gen_params p = tiny(0);
    struct moeinf_gguf *g = gen_open(&p, "gen-stats.gguf", path, sizeof path);
    if (!g) return;
    /* [64, 256, 8]: 131072 draws of N(0, 1/8). Tolerances are ~4 standard errors. */
    const struct moeinf_gguf_tensor *t = moeinf_gguf_find_tensor(g, "blk.0.ffn_gate_exps.weight");
    if (t) {
        struct stats s = stats_of(t, 0.0);
        double n = (double)s.n;
        double sigma = 1.0 / 8.0;
        CHECK_NEAR(s.mean, 0.0, 4 * sigma / sqrt(n));
        CHECK_NEAR(s.std, sigma, 4 * sigma / sqrt(2 * n));
        CHECK_NEAR(s.within1, 0.682689, 4 * sqrt(0.683 * 0.317 / n));
        CHECK_NEAR(s.beyond2, 0.045500, 4 * sqrt(0.0455 * 0.9545 / n));
        CHECK_NEAR(s.beyond3, 0.002700, 4 * sqrt(0.0027 / n));
        CHECK_NEAR(s.kurt, 3.0, 4 * sqrt(96.0 / n));
    }
    /* down: fan_in 256. */
    t = moeinf_gguf_find_tensor(g, "blk.1.ffn_down_exps.weight");
    if (t) {
        struct stats s = stats_of(t, 0.0);
        CHECK_NEAR(s.std, 1.0 / 16.0, 4 * (1.0 / 16.0) / sqrt(2.0 * (double)s.n));
    }
    /* Router x2: [64, 8] = 512 draws of N(0, 2/8). */
    t = moeinf_gguf_find_tensor(g, "blk.0.ffn_gate_inp.weight");
    if (t) {
        struct stats s = stats_of(t, 0.0);
        CHECK_NEAR(s.std, 0.25, 4 * 0.25 / sqrt(2.0 * 512));
    }
    /* Norms: 1 + 0.1 N over 64 values. */
    t = moeinf_gguf_find_tensor(g, "blk.1.ffn_norm.weight");
    if (t) {
        struct stats s = stats_of(t, 1.0);
        CHECK_NEAR(s.mean, 1.0, 4 * 0.1 / 8);
        CHECK_NEAR(s.std, 0.1, 4 * 0.1 / sqrt(128.0));
    }
    t = moeinf_gguf_find_tensor(g, "token_embd.weight");
    if (t) {
        struct stats s = stats_of(t, 0.0);
        CHECK_NEAR(s.std, 0.1, 4 * 0.1 / sqrt(2.0 * (double)s.n));
    }
    t = moeinf_gguf_find_tensor(g, "output.weight");
    if (t) {
        struct stats s = stats_of(t, 0.0);
        CHECK_NEAR(s.std, 1.0, 4 / sqrt(2.0 * (double)s.n)); /* 8 / sqrt(64) */
    }
    /* Tensors are independent draws: gate and up of the same layer are uncorrelated. */
    const struct moeinf_gguf_tensor *a = moeinf_gguf_find_tensor(g, "blk.0.ffn_gate_exps.weight");
    const struct moeinf_gguf_tensor *b = moeinf_gguf_find_tensor(g, "blk.0.ffn_up_exps.weight");
    if (a && b) {
        int64_t n = a->ne[0] * a->ne[1] * a->ne[2];
        double sab = 0;
        double saa = 0;
        double sbb = 0;
        for (int64_t i = 0; i < n; i++) {
            double x = weight(a, i);
            double y = weight(b, i);
            sab += x * y;
            saa += x * x;
            sbb += y * y;
        }
        CHECK_NEAR(sab / sqrt(saa * sbb), 0.0, 4 / sqrt((double)n));
    }
    moeinf_gguf_free(g);
    remove(path);
}

static void test_types(void) {
    static const int types[3] = {1, 8, 2};
    static const double tol[3] = {0.01, 0.02, 0.04}; /* relative, rounding noise included */
    for (int k = 0; k < 3; k++) {
        char path[512];
        char name[64];
        snprintf(name, sizeof name, "gen-type%d.gguf", types[k]);
        struct moeinf_gen_params p = tiny(types[k]);
        struct moeinf_gguf *g = gen_open(&p, name, path, sizeof path);
        if (!g) continue;
        uint32_t ftype = types[k] == 1 ? 1 : types[k] == 8 ? 7 : 2;
        CHECK_EQ_INT(u32_of(g, "general.file_type"), ftype);
        for (uint64_t i = 0; i < g->n_tensors; i++) {
            const struct moeinf_gguf_tensor *t = &g->tensors[i];
            bool small = t->n_dims == 1 || strstr(t->name, "ffn_gate_inp");
            CHECK_MSG(t->type == (small ? 0 : types[k]), "%s has type %d", t->name, t->type);
        }
        const struct moeinf_gguf_tensor *t = moeinf_gguf_find_tensor(g, "blk.1.ffn_up_exps.weight");
        if (t) {
            struct stats s = stats_of(t, 0.0);
            CHECK_NEAR(s.mean, 0.0, 0.005);
            CHECK_NEAR(s.std, 1.0 / 8.0, tol[k] / 8.0);
        }
        /* Q8_0 scales come from the block maximum: some |q| reaches 127 in every block. */
        if (types[k] == 8 && t) {
            int64_t n_blocks = (int64_t)(t->n_bytes / 34);
            int64_t n_full = 0;
            for (int64_t bi = 0; bi < n_blocks; bi++) {
                int m = 0;
                for (int j = 0; j < 32; j++) {
                    int q = abs((int8_t)t->data[bi * 34 + 2 + j]);
                    if (q > m) m = q;
                }
                n_full += m == 127;
            }
            CHECK_EQ_INT(n_full, n_blocks);
        }
        moeinf_gguf_free(g);
        remove(path);
    }
}

/* --type q4_k_m: the types llama-quantize chose for tiny-mixtral-Q4_K_M (same names, shapes
 * and expert count; its rows of 64 make most K-quants fall back), tensor by tensor; and at
 * widths of whole super-blocks, the rules themselves (quant_mix.h) by hand: 8 layers give
 * use_more_bits layers 0, 3, 6 and 7. */
static void test_q4_k_m(void) {
    char ref_path[512];
    if (test_shared_path("testdata/models/tiny-mixtral-Q4_K_M.gguf", ref_path, sizeof ref_path)) {
        struct moeinf_gguf *ref = NULL;
        struct moeinf_error err;
        CHECK(moeinf_gguf_open(ref_path, &ref, &err) == MOEINF_OK);
        struct moeinf_gen_params p = tiny(MOEINF_GEN_TYPE_Q4_K_M);
        p.tied_output = true; /* as tiny-mixtral: tied lm_head, head dim 64 */
        p.n_embd_head = 64;
        char path[512];
        struct moeinf_gguf *g = gen_open(&p, "gen-q4km-tiny.gguf", path, sizeof path);
        int n_same = 0;
        for (uint64_t i = 0; g && ref && i < ref->n_tensors; i++) {
            const struct moeinf_gguf_tensor *r = &ref->tensors[i];
            const struct moeinf_gguf_tensor *t = moeinf_gguf_find_tensor(g, r->name);
            CHECK_MSG(t != NULL, "no %s", r->name);
            if (!t) continue;
            CHECK_MSG(t->type == r->type, "%s: %s, llama-quantize wrote %s", r->name,
                      moeinf_type_name(t->type), moeinf_type_name(r->type));
            n_same += t->type == r->type;
        }
        CHECK(n_same >= 20);
        if (g) CHECK_EQ_INT(u32_of(g, "general.file_type"), 15);
        moeinf_gguf_free(g);
        moeinf_gguf_free(ref);
        remove(path);
    }
    for (int with8 = 0; with8 < 2; with8++) {
        struct moeinf_gen_params p = tiny(MOEINF_GEN_TYPE_Q4_K_M);
        p.n_layer = 8;
        p.n_embd = 256;
        p.n_expert = with8 ? 8 : 4;
        char path[512];
        struct moeinf_gguf *g = gen_open(&p, "gen-q4km.gguf", path, sizeof path);
        if (!g) continue;
        for (int l = 0; l < 8; l++) {
            bool more = l == 0 || l == 3 || l == 6 || l == 7;
            char name[64];

            struct {
                const char *t;
                int want;
            } expect[] = {{"attn_q", MOEINF_TYPE_Q4_K},
                          {"attn_k", with8 ? MOEINF_TYPE_Q8_0 : MOEINF_TYPE_Q4_K},
                          {"attn_v", with8  ? MOEINF_TYPE_Q8_0
                                     : more ? MOEINF_TYPE_Q6_K
                                            : MOEINF_TYPE_Q4_K},
                          {"attn_output", with8 ? MOEINF_TYPE_Q5_K : MOEINF_TYPE_Q4_K},
                          {"ffn_gate_exps", MOEINF_TYPE_Q4_K},
                          {"ffn_up_exps", MOEINF_TYPE_Q4_K},
                          {"ffn_down_exps", more ? MOEINF_TYPE_Q6_K : MOEINF_TYPE_Q4_K},
                          {"ffn_gate_inp", MOEINF_TYPE_F32}};

            for (size_t k = 0; k < sizeof expect / sizeof expect[0]; k++) {
                snprintf(name, sizeof name, "blk.%d.%s.weight", l, expect[k].t);
                const struct moeinf_gguf_tensor *t = moeinf_gguf_find_tensor(g, name);
                CHECK_MSG(t && t->type == expect[k].want, "%d experts: %s is %s, not %s",
                          p.n_expert, name, t ? moeinf_type_name(t->type) : "absent",
                          moeinf_type_name(expect[k].want));
            }
        }
        const struct moeinf_gguf_tensor *t = moeinf_gguf_find_tensor(g, "output.weight");
        CHECK(t && t->type == MOEINF_TYPE_Q6_K);
        t = moeinf_gguf_find_tensor(g, "token_embd.weight");
        CHECK(t && t->type == MOEINF_TYPE_Q4_K);
        moeinf_gguf_free(g);
        remove(path);
    }
}

/* A plain K-quant (or codebook type) applies to every big matrix; the weights keep their
 * distribution through the quantizer (mean 0, std 1/sqrt(n_embd) = 1/16 within the type's
 * rounding noise; MXFP4 clips a block's largest weights, which lowers the std). */
static void test_k_types(void) {
    const int types[] = {MOEINF_TYPE_Q4_K,   MOEINF_TYPE_Q6_K,   MOEINF_TYPE_Q2_K, MOEINF_TYPE_Q5_1,
                         MOEINF_TYPE_IQ4_NL, MOEINF_TYPE_IQ4_XS, MOEINF_TYPE_MXFP4};
    const uint32_t ftypes[] = {14, 18, 10, 9, 25, 30, 38}; /* llama_ftype MOSTLY_* */
    /* iq4_nl, iq4_xs, mxfp4 measured std * 16: 0.9979, 0.9978, 0.9849 (seed 1234) */
    const double tol[] = {0.05, 0.02, 0.3, 0.05, 0.01, 0.01, 0.03};
    for (int k = 0; k < 7; k++) {
        struct moeinf_gen_params p = tiny(types[k]);
        p.n_embd = 256;
        char path[512];
        struct moeinf_gguf *g = gen_open(&p, "gen-k.gguf", path, sizeof path);
        if (!g) continue;
        CHECK_EQ_INT(u32_of(g, "general.file_type"), ftypes[k]);
        for (uint64_t i = 0; i < g->n_tensors; i++) {
            const struct moeinf_gguf_tensor *t = &g->tensors[i];
            bool small = t->n_dims == 1 || strstr(t->name, "ffn_gate_inp");
            CHECK_MSG(t->type == (small ? 0 : types[k]), "%s has type %d", t->name, t->type);
        }
        const struct moeinf_gguf_tensor *t = moeinf_gguf_find_tensor(g, "blk.1.ffn_up_exps.weight");
        if (t) {
            int64_t n = t->ne[0] * t->ne[1] * t->ne[2];
            float *y = malloc((size_t)n * sizeof(float));
            moeinf_dequantize_row((enum moeinf_type)t->type, t->data, y, n);
            double sum = 0;
            double sq = 0;
            for (int64_t i = 0; i < n; i++) {
                sum += y[i];
                sq += (double)y[i] * y[i];
            }
            double mean = sum / (double)n;
            double sd = sqrt(sq / (double)n - mean * mean);
            CHECK_MSG(fabs(mean) < 0.005 && fabs(sd * 16 - 1) < tol[k], "%s: mean %g std %g",
                      moeinf_type_name(types[k]), mean, sd);
            free(y);
        }
        moeinf_gguf_free(g);
        remove(path);
    }
}

static void test_variants(void) {
    char path[512];
    /* Tied lm_head: no output.weight, output_norm scaled by 80 / sqrt(n_embd) = 10. */
    struct moeinf_gen_params p = tiny(0);
    p.tied_output = true;
    struct moeinf_gguf *g = gen_open(&p, "gen-tied.gguf", path, sizeof path);
    if (g) {
        CHECK(moeinf_gguf_find_tensor(g, "output.weight") == NULL);
        CHECK_EQ_INT(g->n_tensors, 2 + 2 * 10);
        const struct moeinf_gguf_tensor *t = moeinf_gguf_find_tensor(g, "output_norm.weight");
        if (t) {
            struct stats s = stats_of(t, 10.0);
            CHECK_NEAR(s.mean, 10.0, 4 * 1.0 / 8);
        }
        moeinf_gguf_free(g);
        remove(path);
    }
    /* Dense Llama. */
    p = tiny(0);
    p.n_expert = 0;
    p.n_expert_used = 0;
    g = gen_open(&p, "gen-dense.gguf", path, sizeof path);
    if (g) {
        CHECK_EQ_INT(moeinf_gguf_find_key(g, "llama.expert_count"), -1);
        CHECK_EQ_INT(g->n_tensors, 3 + 2 * 9);
        check_tensor(g, "blk.1.ffn_gate.weight", 0, 2, 64, 256, 1);
        check_tensor(g, "blk.1.ffn_up.weight", 0, 2, 64, 256, 1);
        check_tensor(g, "blk.1.ffn_down.weight", 0, 2, 256, 64, 1);
        CHECK(moeinf_gguf_find_tensor(g, "blk.0.ffn_gate_inp.weight") == NULL);
        moeinf_gguf_free(g);
        remove(path);
    }
    /* An explicit head dim (as Qwen3: heads x head_dim != n_embd). */
    p = tiny(8);
    p.n_embd_head = 32;
    g = gen_open(&p, "gen-hd.gguf", path, sizeof path);
    if (g) {
        CHECK_EQ_INT(u32_of(g, "llama.attention.key_length"), 32);
        CHECK_EQ_INT(u32_of(g, "llama.rope.dimension_count"), 32);
        check_tensor(g, "blk.0.attn_q.weight", 8, 2, 64, 128, 1);
        check_tensor(g, "blk.0.attn_k.weight", 8, 2, 64, 64, 1);
        check_tensor(g, "blk.0.attn_output.weight", 8, 2, 128, 64, 1);
        moeinf_gguf_free(g);
        remove(path);
    }
}

static void test_vocab_from(void) {
    char src_path[1024];
    char path[512];
    if (!test_shared_path("testdata/tokenizer/ggml-vocab-llama-spm.gguf", src_path,
                          sizeof src_path)) {
        return;
    }
    struct moeinf_gen_params p = tiny(8);
    p.vocab_from = src_path;
    struct moeinf_gguf *g = gen_open(&p, "gen-spm.gguf", path, sizeof path);
    struct moeinf_gguf *src = NULL;
    struct moeinf_error err;
    CHECK_EQ_INT(moeinf_gguf_open(src_path, &src, &err), MOEINF_OK);
    if (g && src) {
        CHECK_EQ_INT(u32_of(g, "llama.vocab_size"), 32000);
        check_tensor(g, "token_embd.weight", 8, 2, 64, 32000, 1);
        int n_copied = 0;
        for (uint64_t i = 0; i < src->n_kv; i++) {
            const struct moeinf_gguf_kv *a = &src->kv[i];
            char key[256];
            snprintf(key, sizeof key, "%.*s", (int)a->key.len, a->key.data);
            int64_t k = moeinf_gguf_find_key(g, key);
            if (strncmp(key, "tokenizer.", 10) != 0) continue;
            n_copied++;
            CHECK_MSG(k >= 0, "%s not copied", key);
            if (k < 0) continue;
            const struct moeinf_gguf_kv *b = &g->kv[k];
            CHECK(a->type == b->type && a->n_elem == b->n_elem && a->n_bytes == b->n_bytes &&
                  !memcmp(a->data, b->data, (size_t)a->n_bytes));
        }
        CHECK(n_copied >= 8);
    }
    moeinf_gguf_free(src);
    moeinf_gguf_free(g);
    remove(path);
}

static bool same_file(const char *a, const char *b) {
    FILE *fa = fopen(a, "rb");
    FILE *fb = fopen(b, "rb");
    bool same = fa && fb;
    while (same) {
        int ca = fgetc(fa);
        int cb = fgetc(fb);
        if (ca != cb) same = false;
        if (ca == EOF) break;
    }
    if (fa) fclose(fa);
    if (fb) fclose(fb);
    return same;
}

static void test_determinism(void) {
    char a[512];
    char b[512];
    char c[512];
    char d[512];
    struct moeinf_error err;
    struct moeinf_gen_params p = tiny(2);
    test_tmp_path("gen-det-a.gguf", a, sizeof a);
    test_tmp_path("gen-det-b.gguf", b, sizeof b);
    test_tmp_path("gen-det-c.gguf", c, sizeof c);
    test_tmp_path("gen-det-d.gguf", d, sizeof d);
    CHECK_EQ_INT(moeinf_gen_model(&p, a, &err), MOEINF_OK);
    p.n_threads = 3; /* chunks are keyed by position, not by thread */
    CHECK_EQ_INT(moeinf_gen_model(&p, b, &err), MOEINF_OK);
    p.n_threads = 1;
    p.seed = 1235;
    CHECK_EQ_INT(moeinf_gen_model(&p, c, &err), MOEINF_OK);
    CHECK(same_file(a, b));
    CHECK(!same_file(a, c));
    struct stat sa;
    struct stat sc;
    CHECK(stat(a, &sa) == 0 && stat(c, &sc) == 0 && sa.st_size == sc.st_size);
    /* Rows longer than half a chunk (ffn_down: n_ff = 2^17 + 32) go one row per chunk; that
     * too is thread-count independent. */
    p = tiny(2);
    p.n_embd = 32;
    p.n_ff = (1 << 17) + 32;
    p.n_head = 2;
    p.n_head_kv = 1;
    p.n_layer = 1;
    p.n_expert = 1;
    p.n_expert_used = 1;
    p.n_threads = 1;
    CHECK_EQ_INT(moeinf_gen_model(&p, a, &err), MOEINF_OK);
    p.n_threads = 4;
    CHECK_EQ_INT(moeinf_gen_model(&p, d, &err), MOEINF_OK);
    CHECK(same_file(a, d));
    remove(a);
    remove(b);
    remove(c);
    remove(d);
}

static void test_bad_params(void) {
    char path[512];
    test_tmp_path("gen-bad.gguf", path, sizeof path);
    remove(path);
    struct moeinf_error err;
    struct moeinf_gen_params p;
#define BAD(stmt, phrase)                                                                          \
    do {                                                                                           \
        p = tiny(8);                                                                               \
        stmt;                                                                                      \
        CHECK_EQ_INT(moeinf_gen_params_check(&p, &err), MOEINF_ERR_ARG);                           \
        CHECK_STR_CONTAINS(err.msg, phrase);                                                       \
        CHECK_EQ_INT(moeinf_gen_model(&p, path, &err), MOEINF_ERR_ARG);                            \
        CHECK(!test_file_exists(path));                                                            \
    } while (0)
    BAD(p.n_head = 3, "3 heads do not divide n_embd 64");
    BAD(p.n_head_kv = 3, "3 kv heads do not divide 4 heads");
    BAD(p.n_expert_used = 9, "top-k 9 not in [1, experts = 8]");
    BAD(p.n_expert_used = 0, "top-k 0");
    BAD((p.n_expert = 0, p.n_expert_used = 2), "dense model");
    BAD(p.n_embd = 48, "n_embd = 48 is not a multiple of 32");
    BAD(p.n_ff = 100, "n_ff = 100 is not a multiple of 32");
    BAD(p.n_expert_shared = 1, "no shared experts");
    BAD(p.arch = "mistral4", "arch 'mistral4' is not supported");
    BAD(p.arch = "qwen2moe", "arch 'qwen2moe' needs 1 to 64 shared experts (got 0)");
    BAD((p.arch = "olmoe", p.n_expert_shared = 2), "arch 'olmoe' has no shared experts");
    BAD((p.arch = "qwen3moe", p.n_expert = 0, p.n_expert_used = 0), "needs routed experts");
    BAD(p.type = 12, "n_embd = 64 is not a multiple of 256 (needed by q4_K)");
    BAD(p.type = 15, "type 15"); /* Q8_K: an activation type */
    BAD(p.type = 40, "type 40"); /* NVFP4: no kernels */
    BAD(p.type = 23, "n_embd = 64 is not a multiple of 256 (needed by iq4_xs)");
    BAD(p.n_layer = 0, "layers 0");
    BAD(p.n_embd_head = 7, "odd");
    BAD(p.n_ctx_train = 0, "context length");
    BAD(p.rms_eps = 0, "rms epsilon");
#undef BAD
    /* Any width works for F32/F16. */
    p = tiny(0);
    p.n_embd = 48;
    p.n_ff = 100;
    p.n_head = 3;
    p.n_head_kv = 1;
    CHECK_EQ_INT(moeinf_gen_params_check(&p, &err), MOEINF_OK);
    p = moeinf_gen_params_default();
    CHECK_EQ_INT(moeinf_gen_params_check(&p, &err), MOEINF_OK);
}

static void test_failures_leave_nothing(void) {
    struct moeinf_error err;
    struct moeinf_gen_params p = tiny(8);
    CHECK_EQ_INT(moeinf_gen_model(&p, "/nonexistent-dir/m.gguf", &err), MOEINF_ERR_IO);
    CHECK_STR_CONTAINS(err.msg, "/nonexistent-dir/m.gguf");
    CHECK(!test_file_exists("/nonexistent-dir/m.gguf"));

    char path[512];
    char notdir[512];
    test_tmp_path("gen-notdir", notdir, sizeof notdir);
    FILE *f = fopen(notdir, "w");
    if (f) fclose(f);
    snprintf(path, sizeof path, "%s/m.gguf", notdir);
    CHECK_EQ_INT(moeinf_gen_model(&p, path, &err), MOEINF_ERR_IO);
    remove(notdir);

    /* The vocabulary source fails after the temp file was created. */
    test_tmp_path("gen-fail.gguf", path, sizeof path);
    remove(path);
    p.vocab_from = "/nonexistent-dir/vocab.gguf";
    CHECK_EQ_INT(moeinf_gen_model(&p, path, &err), MOEINF_ERR_IO);
    CHECK_STR_CONTAINS(err.msg, "vocab.gguf");
    CHECK(!test_file_exists(path));
    CHECK_EQ_INT(test_temp_leftovers("gen-fail.gguf"), 0);

    /* The disk fills up mid-stream: a file size limit makes write() fail with EFBIG. */
    p = tiny(0);
    struct rlimit old;
    CHECK(getrlimit(RLIMIT_FSIZE, &old) == 0);
    void (*old_handler)(int) = signal(SIGXFSZ, SIG_IGN);
    struct rlimit small = {(rlim_t)256 * 1024, old.rlim_max};
    CHECK(setrlimit(RLIMIT_FSIZE, &small) == 0);
    enum moeinf_status st = moeinf_gen_model(&p, path, &err);
    CHECK(setrlimit(RLIMIT_FSIZE, &old) == 0);
    signal(SIGXFSZ, old_handler);
    CHECK_EQ_INT(st, MOEINF_ERR_IO);
    CHECK_STR_CONTAINS(err.msg, "gen-fail.gguf");
    CHECK(!test_file_exists(path));
    CHECK_EQ_INT(test_temp_leftovers("gen-fail.gguf"), 0);

    /* An existing file is replaced only by a complete new one. */
    f = fopen(path, "w");
    if (f) {
        fputs("old", f);
        fclose(f);
    }
    CHECK(setrlimit(RLIMIT_FSIZE, &small) == 0);
    signal(SIGXFSZ, SIG_IGN);
    st = moeinf_gen_model(&p, path, &err);
    CHECK(setrlimit(RLIMIT_FSIZE, &old) == 0);
    signal(SIGXFSZ, old_handler);
    CHECK_EQ_INT(st, MOEINF_ERR_IO);
    struct stat sb;
    CHECK(stat(path, &sb) == 0 && sb.st_size == 3);
    remove(path);
}

/* The engine loads the file and decodes n tokens (ids 1, then 300, 400, 500, ..., so the
 * window of a sliding layer is passed when n exceeds it) to finite logits, not all zero. */
static void check_engine_runs(const char *path, const char *arch, int n) {
    struct moeinf_error err = {0};
    n = n > 64 ? 64 : n;
    struct moeinf_model *model = NULL;
    struct moeinf_model_params mp = moeinf_model_params_default();
    CHECK_MSG(moeinf_model_load(path, &mp, &model, &err) == MOEINF_OK, "%s", err.msg);
    char desc[256];
    if (model) {
        moeinf_model_desc(model, desc, sizeof desc);
        CHECK_STR_CONTAINS(desc, arch);
        struct moeinf_context_params cp = moeinf_context_params_default();
        cp.n_ctx = 64;
        cp.n_threads = 2;
        struct moeinf_context *ctx = NULL;
        const int n_vocab = moeinf_model_n_vocab(model);
        float *logits = malloc((size_t)n_vocab * n * sizeof(float));
        int32_t ids[64];
        for (int i = 0; i < n && i < 64; i++)
            ids[i] = i ? 200 + 100 * (i % 8) : 1;
        bool ran = logits && moeinf_context_init(model, &cp, &ctx, &err) == MOEINF_OK &&
                   moeinf_decode(ctx, ids, n, logits, true, &err) == MOEINF_OK;
        CHECK_MSG(ran, "%s: %s", arch, err.msg);
        double sum2 = 0;
        for (int i = 0; ran && i < n * n_vocab; i++)
            sum2 += (double)logits[i] * logits[i];
        /* finite, and not all zero (decode already fails on NaN or infinity) */
        CHECK_MSG(sum2 > 0 && isfinite(sum2), "%s: logits sum of squares %g", arch, sum2);
        free(logits);
        moeinf_context_free(ctx);
    }
    moeinf_model_free(model);
}

/* qwen2moe, qwen3moe and olmoe: the tensors and metadata llama.cpp's loader wants for each
 * (shapes in ne order), and the engine loads the file and decodes finite logits. */
static void check_arch_file(const char *arch, int n_shared) {
    struct moeinf_gen_params p = tiny(8);
    p.arch = arch;
    p.n_expert_shared = n_shared;
    p.n_ff = 64;
    p.n_embd_head = 32; /* 4 x 32 = 128 != n_embd 64, as Qwen3 has */
    char name[64];
    char path[512];
    char key[96];
    snprintf(name, sizeof name, "gen-%s.gguf", arch);
    struct moeinf_gguf *g = gen_open(&p, name, path, sizeof path);
    if (!g) return;
    struct moeinf_gguf_str s;
    struct moeinf_error err = {0};
    CHECK_EQ_INT(moeinf_gguf_get_str(g, "general.architecture", &s, &err), MOEINF_OK);
    CHECK(moeinf_gguf_str_eq(s, arch));
#define KEY(suffix) (snprintf(key, sizeof key, "%s.%s", arch, suffix), key)
    CHECK_EQ_INT(u32_of(g, KEY("expert_count")), 8);
    CHECK_EQ_INT(u32_of(g, KEY("expert_used_count")), 2);
    CHECK_EQ_INT(u32_of(g, KEY("attention.key_length")), 32);
    check_tensor(g, "blk.1.attn_q.weight", 8, 2, 64, 128, 1);
    check_tensor(g, "blk.1.attn_k.weight", 8, 2, 64, 64, 1);
    check_tensor(g, "blk.1.ffn_gate_exps.weight", 8, 3, 64, 64, 8);
    if (!strcmp(arch, "qwen2moe")) {
        CHECK_EQ_INT(u32_of(g, KEY("expert_feed_forward_length")), 64);
        CHECK_EQ_INT(u32_of(g, KEY("expert_shared_feed_forward_length")), 64 * n_shared);
        check_tensor(g, "blk.1.attn_q.bias", 0, 1, 128, 1, 1);
        check_tensor(g, "blk.1.attn_v.bias", 0, 1, 64, 1, 1);
        check_tensor(g, "blk.1.ffn_gate_inp_shexp.weight", 0, 1, 64, 1, 1);
        const int64_t fs = (int64_t)64 * n_shared;
        check_tensor(g, "blk.1.ffn_up_shexp.weight", 8, 2, 64, fs, 1);
        check_tensor(g, "blk.1.ffn_down_shexp.weight", 8, 2, fs, 64, 1);
        CHECK(moeinf_gguf_find_tensor(g, "blk.0.attn_q_norm.weight") == NULL);
    } else if (!strcmp(arch, "qwen3moe")) {
        CHECK_EQ_INT(u32_of(g, KEY("expert_feed_forward_length")), 64);
        check_tensor(g, "blk.1.attn_q_norm.weight", 0, 1, 32, 1, 1);
        check_tensor(g, "blk.1.attn_k_norm.weight", 0, 1, 32, 1, 1);
        CHECK(moeinf_gguf_find_tensor(g, "blk.0.ffn_up_shexp.weight") == NULL);
    } else {
        CHECK_EQ_INT(u32_of(g, KEY("feed_forward_length")), 64);
        check_tensor(g, "blk.1.attn_q_norm.weight", 0, 1, 128, 1, 1);
        check_tensor(g, "blk.1.attn_k_norm.weight", 0, 1, 64, 1, 1);
    }
#undef KEY
    moeinf_gguf_free(g);
    check_engine_runs(path, arch, 3);
    remove(path);
}

static void test_archs(void) {
    check_arch_file("qwen2moe", 2);
    check_arch_file("qwen3moe", 0);
    check_arch_file("olmoe", 0);
}

/* The metadata of check_hybrid_file's geometry, key by key. */
static void check_hybrid_keys(const struct moeinf_gguf *g, const char *arch, bool next) {
    char key[96];
    struct moeinf_gguf_str s;
    struct moeinf_error err = {0};
    CHECK_EQ_INT(moeinf_gguf_get_str(g, "general.architecture", &s, &err), MOEINF_OK);
    CHECK(moeinf_gguf_str_eq(s, arch));
#define KEY(suffix) (snprintf(key, sizeof key, "%s.%s", arch, suffix), key)

    static const struct {
        const char *k;
        uint32_t v;
    } keys[] = {{"block_count", 4},
                {"embedding_length", 64},
                {"expert_count", 4},
                {"expert_used_count", 2},
                {"expert_feed_forward_length", 32},
                {"expert_shared_feed_forward_length", 32},
                {"feed_forward_length", 64},
                {"attention.head_count", 4},
                {"attention.head_count_kv", 2},
                {"attention.key_length", 64},
                {"attention.value_length", 64},
                {"rope.dimension_count", 64},
                {"ssm.conv_kernel", 4},
                {"ssm.state_size", 16},
                {"ssm.group_count", 2},
                {"ssm.time_step_rank", 4},
                {"ssm.inner_size", 64},
                {"full_attention_interval", 4}};

    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) {
        CHECK_MSG(u32_of(g, KEY(keys[i].k)) == keys[i].v, "%s", key);
    }
    const struct moeinf_gguf_kv *sec = NULL;
    enum moeinf_status st =
        moeinf_gguf_get_arr(g, KEY("rope.dimension_sections"), MOEINF_GGUF_TYPE_INT32, &sec, &err);
    if (next) {
        CHECK(st != MOEINF_OK); /* plain NEOX RoPE: no sections */
    } else {
        CHECK_MSG(st == MOEINF_OK && sec->n_elem == 4, "%s", err.msg);
        int32_t v[4] = {0};
        if (st == MOEINF_OK) memcpy(v, sec->data, sizeof v);
        /* 64 rotary dims: Qwen3.5's mrope_section [11, 11, 10] (+ 0) */
        CHECK(v[0] == 11 && v[1] == 11 && v[2] == 10 && v[3] == 0);
    }
#undef KEY
}

/* qwen35moe and qwen3next: every metadata key and tensor (name, type, shape in ne order) that
 * llama.cpp's loader reads (src/models/qwen35moe.cpp, qwen3next.cpp), written out here by
 * hand for this geometry; ssm_a is negative; no tensor beyond these. */
static void check_hybrid_file(const char *arch) {
    const bool next = !strcmp(arch, "qwen3next");
    struct moeinf_gen_params p = tiny_hybrid(arch, 8);
    char name[64];
    char path[512];
    snprintf(name, sizeof name, "gen-%s.gguf", arch);
    struct moeinf_gguf *g = gen_open(&p, name, path, sizeof path);
    if (!g) return;
    check_hybrid_keys(g, arch, next);
    const int f32 = MOEINF_TYPE_F32;
    const int q = MOEINF_TYPE_Q8_0;
    int n_expected = 3;
    check_tensor(g, "token_embd.weight", q, 2, 64, 1010, 1);
    check_tensor(g, "output.weight", q, 2, 64, 1010, 1);
    check_tensor(g, "output_norm.weight", f32, 1, 64, 1, 1);
    for (int l = 0; l < 4; l++) {
        char n[64];
#define T(suffix, type, dims, a, b, c)                                                             \
    (snprintf(n, sizeof n, "blk.%d.%s", l, suffix), check_tensor(g, n, type, dims, a, b, c),       \
     n_expected++)
#define ABSENT(suffix)                                                                             \
    do {                                                                                           \
        snprintf(n, sizeof n, "blk.%d.%s", l, suffix);                                             \
        CHECK_MSG(moeinf_gguf_find_tensor(g, n) == NULL, "unexpected %s", n);                      \
    } while (0)
        T("attn_norm.weight", f32, 1, 64, 1, 1);
        T("post_attention_norm.weight", f32, 1, 64, 1, 1);
        ABSENT("ffn_norm.weight");
        T("ffn_gate_inp.weight", f32, 2, 64, 4, 1);
        T("ffn_gate_exps.weight", q, 3, 64, 32, 4);
        T("ffn_up_exps.weight", q, 3, 64, 32, 4);
        T("ffn_down_exps.weight", q, 3, 32, 64, 4);
        T("ffn_gate_inp_shexp.weight", f32, 1, 64, 1, 1);
        T("ffn_gate_shexp.weight", q, 2, 64, 32, 1);
        T("ffn_up_shexp.weight", q, 2, 64, 32, 1);
        T("ffn_down_shexp.weight", q, 2, 32, 64, 1);
        if (l == 3) { /* full attention: q and its gate, 2 x 4 heads x 64 */
            T("attn_q.weight", q, 2, 64, 512, 1);
            T("attn_k.weight", q, 2, 64, 128, 1);
            T("attn_v.weight", q, 2, 64, 128, 1);
            T("attn_output.weight", q, 2, 256, 64, 1);
            T("attn_q_norm.weight", f32, 1, 64, 1, 1);
            T("attn_k_norm.weight", f32, 1, 64, 1, 1);
            ABSENT("attn_qkv.weight");
            ABSENT("ssm_a");
            continue;
        }
        /* Gated DeltaNet: key_dim 2 x 16, value_dim 4 x 16, conv over q, k, v = 128 */
        T("attn_qkv.weight", q, 2, 64, 128, 1);
        T("attn_gate.weight", q, 2, 64, 64, 1);
        T("ssm_conv1d.weight", f32, 2, 4, 128, 1);
        T("ssm_dt.bias", f32, 1, 4, 1, 1);
        T("ssm_a", f32, 1, 4, 1, 1);
        T("ssm_norm.weight", f32, 1, 16, 1, 1);
        T("ssm_out.weight", q, 2, 64, 64, 1);
        if (next) {
            T("ssm_ba.weight", q, 2, 64, 8, 1);
            ABSENT("ssm_beta.weight");
        } else {
            T("ssm_beta.weight", q, 2, 64, 4, 1);
            T("ssm_alpha.weight", q, 2, 64, 4, 1);
            ABSENT("ssm_ba.weight");
        }
        ABSENT("attn_q.weight");
        snprintf(n, sizeof n, "blk.%d.ssm_a", l);
        const struct moeinf_gguf_tensor *a = moeinf_gguf_find_tensor(g, n);
        for (int h = 0; a && a->type == f32 && h < 4; h++) {
            float v;
            memcpy(&v, a->data + (size_t)4 * h, sizeof v);
            CHECK_MSG(v < 0 && v > -20, "%s[%d] = %g", n, h, v); /* a decay rate: negative */
        }
#undef T
#undef ABSENT
    }
    CHECK_EQ_INT(g->n_tensors, n_expected);
    moeinf_gguf_free(g);
    remove(path);
}

/* A geometry the check refuses, naming the problem; nothing is written. */
static void check_bad_hybrid(const struct moeinf_gen_params *p, const char *phrase) {
    char path[512];
    test_tmp_path("gen-bad-hybrid.gguf", path, sizeof path);
    remove(path);
    struct moeinf_error err;
    CHECK_EQ_INT(moeinf_gen_params_check(p, &err), MOEINF_ERR_ARG);
    CHECK_STR_CONTAINS(err.msg, phrase);
    CHECK_EQ_INT(moeinf_gen_model(p, path, &err), MOEINF_ERR_ARG);
    CHECK(!test_file_exists(path));
}

static void test_bad_hybrid_params(void) {
    struct moeinf_gen_params p = tiny_hybrid("qwen35moe", 0);
    p.n_expert_shared = 0;
    check_bad_hybrid(&p, "arch 'qwen35moe' needs 1 to 64 shared experts (got 0)");
    p = tiny_hybrid("qwen3next", 0);
    p.ssm_dt_rank = 3;
    check_bad_hybrid(&p, "2 linear key heads do not divide 3");
    p = tiny_hybrid("qwen35moe", 0);
    p.rope_sections[0] = 1;
    check_bad_hybrid(&p, "rope sections sum to 1, not rotary dims / 2 = 32");
    p = tiny_hybrid("qwen35moe", 0);
    p.n_rot = 66;
    check_bad_hybrid(&p, "rotary dims 66");
    p = tiny_hybrid("qwen3next", 8);
    p.ssm_d_state = 20;
    check_bad_hybrid(&p, "linear head dim x value heads = 80 is not a multiple of 32");
    p = tiny_hybrid("qwen3next", 0);
    p.full_attn_interval = 0;
    check_bad_hybrid(&p, "full attention interval 0");
    p = tiny_hybrid("qwen3next", 0);
    struct moeinf_error err;
    CHECK_EQ_INT(moeinf_gen_params_check(&p, &err), MOEINF_OK);
}

static void test_hybrid_archs(void) {
    check_hybrid_file("qwen35moe");
    check_hybrid_file("qwen3next");

    /* The vocabulary padded to a real model's size with unused tokens. */
    struct moeinf_gen_params p = tiny_hybrid("qwen35moe", 8);
    p.n_vocab = 2048;
    char path[512];
    struct moeinf_gguf *g = gen_open(&p, "gen-hybrid-vocab.gguf", path, sizeof path);
    if (g) {
        check_tensor(g, "token_embd.weight", 8, 2, 64, 2048, 1);
        CHECK_EQ_INT(u32_of(g, "qwen35moe.vocab_size"), 2048);
        const struct moeinf_gguf_kv *types = NULL;
        struct moeinf_error err;
        CHECK(moeinf_gguf_get_arr(g, "tokenizer.ggml.token_type", MOEINF_GGUF_TYPE_INT32, &types,
                                  &err) == MOEINF_OK);
        if (types) {
            CHECK_EQ_INT(types->n_elem, 2048);
            int32_t first = 0;
            int32_t last = 0;
            memcpy(&first, types->data + (size_t)4 * 1010, 4); /* the first padding token */
            memcpy(&last, types->data + (size_t)4 * 2047, 4);
            CHECK(first == 5 && last == 5); /* llama.cpp's UNUSED */
        }
        moeinf_gguf_free(g);
        remove(path);
    }
    struct moeinf_error err;
    p.n_vocab = 1000; /* below the own vocabulary's 1010 tokens */
    CHECK_EQ_INT(moeinf_gen_model(&p, path, &err), MOEINF_ERR_ARG);
    CHECK_STR_CONTAINS(err.msg, "below the 1010 tokens");
    CHECK(!test_file_exists(path));

    /* Q4_K_M: llama.cpp counts attn_qkv as an attn_v, and conv1d stays F32 (the mix of a
     * whole file is also compared with llama-quantize's by hand: see the report) */
    CHECK_EQ_INT(moeinf_q4_k_m_type("blk.3.attn_qkv", 3, 8, 256, 2048, false), MOEINF_TYPE_Q6_K);
    CHECK_EQ_INT(moeinf_q4_k_m_type("blk.2.attn_qkv", 2, 8, 256, 2048, false), MOEINF_TYPE_Q4_K);
    CHECK_EQ_INT(moeinf_q4_k_m_type("blk.2.ssm_out", 2, 8, 256, 4096, false), MOEINF_TYPE_Q4_K);
    CHECK_EQ_INT(moeinf_q4_k_m_type("blk.0.ffn_down_shexp", 0, 8, 256, 512, false),
                 MOEINF_TYPE_Q6_K);
}

/* ---- gpt-oss -------------------------------------------------------------------------- */

/* A tiny gpt-oss: 2 layers, 4 experts top-2 of width 64, n_embd 64, 4 heads of 16 (2 KV),
 * a sliding window of 8 (so that a short prompt passes it), experts MXFP4, the rest Q8_0. */
static struct moeinf_gen_params tiny_gpt_oss(void) {
    struct moeinf_gen_params p = tiny(MOEINF_GEN_TYPE_MXFP4_MOE);
    p.arch = "gpt-oss";
    p.n_expert = 4;
    p.n_ff = 64;
    p.n_embd_head = 16;
    p.n_swa = 8;
    return p;
}

/* Element i of an MXFP4 tensor, decoded here: E2M1 value of the code times 2^(e - 127). */
static double mxfp4_weight(const struct moeinf_gguf_tensor *t, int64_t i) {
    static const double e2m1[8] = {0, 0.5, 1, 1.5, 2, 3, 4, 6};
    const uint8_t *b = t->data + (i / 32) * 17;
    int j = (int)(i % 32);
    int code = j < 16 ? (b[1 + j] & 15) : (b[1 + j - 16] >> 4);
    double v = e2m1[code & 7] * ldexp(1.0, b[0] - 127);
    return code & 8 ? -v : v;
}

/* Every tensor llama.cpp's gpt-oss loader requires (src/models/openai-moe.cpp:
 * load_arch_tensors), with its shape in ne order and the type of ggml-org's
 * gpt-oss-20b-mxfp4.gguf (experts MXFP4, other matrices Q8_0, router, norms, sinks and
 * biases F32); no other tensor. Returns how many were checked. */
static int check_gpt_oss_tensors(const struct moeinf_gguf *g, int n_layer, int64_t e, int64_t f,
                                 int64_t x, int64_t dq, int64_t dkv, int64_t n_head,
                                 int64_t n_vocab) {
    const int f32 = MOEINF_TYPE_F32;
    const int q8 = MOEINF_TYPE_Q8_0;
    const int mx = MOEINF_TYPE_MXFP4;
    int n = 3;
    check_tensor(g, "token_embd.weight", q8, 2, e, n_vocab, 1);
    check_tensor(g, "output.weight", q8, 2, e, n_vocab, 1);
    check_tensor(g, "output_norm.weight", f32, 1, e, 1, 1);
    for (int l = 0; l < n_layer; l++) {
        char nm[64];
#define T(suffix, type, dims, a, b, c)                                                             \
    (snprintf(nm, sizeof nm, "blk.%d.%s", l, suffix), check_tensor(g, nm, type, dims, a, b, c), n++)
        T("attn_norm.weight", f32, 1, e, 1, 1);
        T("post_attention_norm.weight", f32, 1, e, 1, 1);
        T("attn_q.weight", q8, 2, e, dq, 1);
        T("attn_k.weight", q8, 2, e, dkv, 1);
        T("attn_v.weight", q8, 2, e, dkv, 1);
        T("attn_output.weight", q8, 2, dq, e, 1);
        T("attn_q.bias", f32, 1, dq, 1, 1);
        T("attn_k.bias", f32, 1, dkv, 1, 1);
        T("attn_v.bias", f32, 1, dkv, 1, 1);
        T("attn_output.bias", f32, 1, e, 1, 1);
        T("attn_sinks.weight", f32, 1, n_head, 1, 1);
        T("ffn_gate_inp.weight", f32, 2, e, x, 1);
        T("ffn_gate_inp.bias", f32, 1, x, 1, 1);
        T("ffn_gate_exps.weight", mx, 3, e, f, x);
        T("ffn_up_exps.weight", mx, 3, e, f, x);
        T("ffn_down_exps.weight", mx, 3, f, e, x);
        T("ffn_gate_exps.bias", f32, 2, f, x, 1);
        T("ffn_up_exps.bias", f32, 2, f, x, 1);
        T("ffn_down_exps.bias", f32, 2, e, x, 1);
#undef T
    }
    CHECK_EQ_INT(g->n_tensors, n);
    return n;
}

/* gpt-oss: the keys llama.cpp's loader reads (and the published files carry: the sliding
 * window, YaRN's type, factor and original context, no rope.dimension_count), the tensors,
 * the directly drawn MXFP4 experts (a valid E8M0 scale, weights of the standard deviation of
 * the other types), and llama.cpp itself loads the file and decodes finite logits over a
 * prompt four windows long. */
static void test_gpt_oss(void) {
    struct moeinf_gen_params p = tiny_gpt_oss();
    char path[512];
    struct moeinf_gguf *g = gen_open(&p, "gen-gpt-oss.gguf", path, sizeof path);
    if (!g) return;
    struct moeinf_gguf_str s;
    struct moeinf_error err = {0};
    CHECK_EQ_INT(moeinf_gguf_get_str(g, "general.architecture", &s, &err), MOEINF_OK);
    CHECK(moeinf_gguf_str_eq(s, "gpt-oss"));
    CHECK_EQ_INT(u32_of(g, "general.file_type"), 38); /* LLAMA_FTYPE_MOSTLY_MXFP4_MOE */

    static const struct {
        const char *k;
        uint32_t v;
    } keys[] = {{"gpt-oss.block_count", 2},
                {"gpt-oss.context_length", 512},
                {"gpt-oss.embedding_length", 64},
                {"gpt-oss.feed_forward_length", 64},
                {"gpt-oss.expert_feed_forward_length", 64},
                {"gpt-oss.expert_count", 4},
                {"gpt-oss.expert_used_count", 2},
                {"gpt-oss.attention.head_count", 4},
                {"gpt-oss.attention.head_count_kv", 2},
                {"gpt-oss.attention.key_length", 16},
                {"gpt-oss.attention.value_length", 16},
                {"gpt-oss.attention.sliding_window", 8},
                {"gpt-oss.rope.scaling.original_context_length", 4096}};

    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++)
        CHECK_MSG(u32_of(g, keys[i].k) == keys[i].v, "%s", keys[i].k);
    float factor = 0;
    CHECK(moeinf_gguf_get_f32(g, "gpt-oss.rope.scaling.factor", &factor, &err) == MOEINF_OK &&
          factor == 32.0f);
    CHECK(moeinf_gguf_get_str(g, "gpt-oss.rope.scaling.type", &s, &err) == MOEINF_OK &&
          moeinf_gguf_str_eq(s, "yarn"));
    uint32_t v = 0;
    CHECK(moeinf_gguf_get_u32(g, "gpt-oss.rope.dimension_count", &v, &err) != MOEINF_OK);
    check_gpt_oss_tensors(g, 2, 64, 64, 4, 64, 32, 4, 1010);

    /* [64, 64, 4] = 16384 weights of N(0, 1/8) drawn as codes: e = 127 + floor(log2(1/12)) */
    const struct moeinf_gguf_tensor *t = moeinf_gguf_find_tensor(g, "blk.1.ffn_up_exps.weight");
    if (t && t->type == MOEINF_TYPE_MXFP4) {
        int64_t n = t->ne[0] * t->ne[1] * t->ne[2];
        bool scales_ok = true;
        for (int64_t b = 0; b < n / 32; b++)
            scales_ok = scales_ok && t->data[b * 17] == 123;
        CHECK(scales_ok);
        double sum = 0;
        double sum2 = 0;
        int64_t n6 = 0;
        for (int64_t i = 0; i < n; i++) {
            double w = mxfp4_weight(t, i);
            sum += w;
            sum2 += w * w;
            n6 += fabs(w) == 6.0 / 16; /* +-6 E2M1 units: beyond 2.5 sigma */
        }
        const double sigma = 1.0 / 8.0;
        CHECK_NEAR(sum / (double)n, 0.0, 4 * sigma / sqrt((double)n));
        CHECK_NEAR(sqrt(sum2 / (double)n), sigma, 0.05 * sigma);
        CHECK_MSG(n6 > 0 && n6 < n / 50, "%lld of %lld at +-6", (long long)n6, (long long)n);
    }
    moeinf_gguf_free(g);

    check_engine_runs(path, "gpt-oss", 20); /* 20 tokens: past the window of 8 */

    char src[512];
    char cmd[1536];
    char out[4096];
    char errs[4096];
    test_src_path("tests/scripts/llama_load.py", src, sizeof src);
    snprintf(cmd, sizeof cmd, "python3 '%s' '%s' 33", src, path);
    int rc = test_run_shell("gen-gpt-oss-load", cmd, out, sizeof out, errs, sizeof errs);
    if (rc == 77 || rc == 127) {
        test_skip("python3 with llama_cpp and numpy is not available: no loader check");
    } else {
        CHECK_MSG(rc == 0, "llama.cpp: %s", errs);
        CHECK_STR_CONTAINS(out, "loaded 1010 finite");
    }
    remove(path);
}

/* The presets through the command line, cut to 2 layers and narrower matrices: the rest of
 * the real geometry (openai/gpt-oss-20b's and -120b's config.json: 32 / 128 experts top-4,
 * 64 heads of 64, 8 KV heads, window 128, rope theta 150000, YaRN 32 over 4096, context
 * 131072, vocabulary 201088) stays, and every tensor has the published files' type. */
static void test_gpt_oss_presets(void) {
    char path[512];
    char args[1024];
    char out[4096];
    char errs[4096];
    test_tmp_path("gen-gpt-oss-preset.gguf", path, sizeof path);
    for (int big = 0; big < 2; big++) {
        /* the 120b with a small vocabulary: the padded one costs seconds under ASan */
        snprintf(args, sizeof args,
                 "gen-model -o '%s' --preset %s --layers 2 --embd 64 --ff 32 %s --threads 2", path,
                 big ? "gpt-oss-120b" : "gpt-oss-20b", big ? "--vocab-size 2048" : "");
        int rc = test_run_moeinf("gen-gpt-oss-preset", args, out, sizeof out, errs, sizeof errs);
        if (rc < 0) {
            test_skip("MOEINF_BIN unset (run through ctest)");
            return;
        }
        CHECK_MSG(rc == 0, "%s", errs);
        struct moeinf_gguf *g = NULL;
        struct moeinf_error err = {0};
        CHECK_MSG(moeinf_gguf_open(path, &g, &err) == MOEINF_OK, "%s", err.msg);
        if (!g) continue;
        const uint32_t n_expert = big ? 128 : 32;
        CHECK_EQ_INT(u32_of(g, "gpt-oss.block_count"), 2);
        CHECK_EQ_INT(u32_of(g, "gpt-oss.expert_count"), n_expert);
        CHECK_EQ_INT(u32_of(g, "gpt-oss.expert_used_count"), 4);
        CHECK_EQ_INT(u32_of(g, "gpt-oss.attention.head_count"), 64);
        CHECK_EQ_INT(u32_of(g, "gpt-oss.attention.head_count_kv"), 8);
        CHECK_EQ_INT(u32_of(g, "gpt-oss.attention.key_length"), 64);
        CHECK_EQ_INT(u32_of(g, "gpt-oss.attention.sliding_window"), 128);
        CHECK_EQ_INT(u32_of(g, "gpt-oss.context_length"), 131072);
        CHECK_EQ_INT(u32_of(g, "gpt-oss.rope.scaling.original_context_length"), 4096);
        CHECK_EQ_INT(u32_of(g, "gpt-oss.vocab_size"), big ? 2048 : 201088);
        CHECK_EQ_INT(u32_of(g, "general.file_type"), 38);
        float theta = 0;
        float eps = 0;
        CHECK(moeinf_gguf_get_f32(g, "gpt-oss.rope.freq_base", &theta, &err) == MOEINF_OK &&
              theta == 150000.0f);
        CHECK(moeinf_gguf_get_f32(g, "gpt-oss.attention.layer_norm_rms_epsilon", &eps, &err) ==
                  MOEINF_OK &&
              eps == 1e-5f);
        check_gpt_oss_tensors(g, 2, 64, 32, n_expert, 4096, 512, 64, big ? 2048 : 201088);
        moeinf_gguf_free(g);
    }
    remove(path);
}

/* ---- deepseek2 and glm4moe ------------------------------------------------------------ */

/* The geometry a deepseek2 / glm4moe file is checked against (ne order, from llama.cpp's
 * loaders: src/models/deepseek2.cpp and glm4-moe.cpp, load_arch_tensors). */
struct ds_shape {
    bool glm;
    int n_layer, n_nextn, n_dense;
    int64_t e, f, fd, x, shared, n_vocab;
    int64_t heads, heads_kv, k_head, rope, v_head, q_lora, kv_lora; /* k_head: nope + rope */
    bool probs_bias;
};

/* Every tensor of the file, shape and type (all big matrices `q`, F32 for norms, router,
 * biases), and no other. */
static void check_ds_tensors(const struct moeinf_gguf *g, const struct ds_shape *d, int q) {
    const int f32 = MOEINF_TYPE_F32;
    const int64_t e = d->e;
    int n = 3;
    check_tensor(g, "token_embd.weight", q, 2, e, d->n_vocab, 1);
    check_tensor(g, "output.weight", q, 2, e, d->n_vocab, 1);
    check_tensor(g, "output_norm.weight", f32, 1, e, 1, 1);
    for (int l = 0; l < d->n_layer + d->n_nextn; l++) {
        char nm[64];
#define T(suffix, type, dims, a, b, c)                                                             \
    (snprintf(nm, sizeof nm, "blk.%d.%s", l, suffix), check_tensor(g, nm, type, dims, a, b, c), n++)
        T("attn_norm.weight", f32, 1, e, 1, 1);
        if (d->glm) {
            const int64_t dq = d->heads * d->k_head;
            const int64_t dkv = d->heads_kv * d->k_head;
            T("attn_q.weight", q, 2, e, dq, 1);
            T("attn_k.weight", q, 2, e, dkv, 1);
            T("attn_v.weight", q, 2, e, dkv, 1);
            T("attn_q.bias", f32, 1, dq, 1, 1);
            T("attn_k.bias", f32, 1, dkv, 1, 1);
            T("attn_v.bias", f32, 1, dkv, 1, 1);
            T("attn_output.weight", q, 2, dq, e, 1);
            T("post_attention_norm.weight", f32, 1, e, 1, 1);
        } else {
            if (d->q_lora > 0) {
                T("attn_q_a.weight", q, 2, e, d->q_lora, 1);
                T("attn_q_a_norm.weight", f32, 1, d->q_lora, 1, 1);
                T("attn_q_b.weight", q, 2, d->q_lora, d->heads * d->k_head, 1);
            } else {
                T("attn_q.weight", q, 2, e, d->heads * d->k_head, 1);
            }
            T("attn_kv_a_mqa.weight", q, 2, e, d->kv_lora + d->rope, 1);
            T("attn_kv_a_norm.weight", f32, 1, d->kv_lora, 1, 1);
            T("attn_k_b.weight", q, 3, d->k_head - d->rope, d->kv_lora, d->heads);
            T("attn_v_b.weight", q, 3, d->kv_lora, d->v_head, d->heads);
            T("attn_output.weight", q, 2, d->heads * d->v_head, e, 1);
            T("ffn_norm.weight", f32, 1, e, 1, 1);
        }
        if (l < d->n_dense) {
            T("ffn_gate.weight", q, 2, e, d->fd, 1);
            T("ffn_up.weight", q, 2, e, d->fd, 1);
            T("ffn_down.weight", q, 2, d->fd, e, 1);
        } else {
            const int64_t fs = d->shared * d->f;
            T("ffn_gate_inp.weight", f32, 2, e, d->x, 1);
            if (d->probs_bias) T("exp_probs_b.bias", f32, 1, d->x, 1, 1);
            T("ffn_gate_exps.weight", q, 3, e, d->f, d->x);
            T("ffn_up_exps.weight", q, 3, e, d->f, d->x);
            T("ffn_down_exps.weight", q, 3, d->f, e, d->x);
            T("ffn_gate_shexp.weight", q, 2, e, fs, 1);
            T("ffn_up_shexp.weight", q, 2, e, fs, 1);
            T("ffn_down_shexp.weight", q, 2, fs, e, 1);
        }
        if (l >= d->n_layer) {
            T("nextn.eh_proj.weight", q, 2, 2 * e, e, 1);
            T("nextn.enorm.weight", f32, 1, e, 1, 1);
            T("nextn.hnorm.weight", f32, 1, e, 1, 1);
            T("nextn.shared_head_norm.weight", f32, 1, e, 1, 1);
        }
#undef T
    }
    CHECK_EQ_INT(g->n_tensors, n);
}

static float f32_of(const struct moeinf_gguf *g, const char *key) {
    float v = NAN;
    struct moeinf_error err;
    CHECK_MSG(moeinf_gguf_get_f32(g, key, &v, &err) == MOEINF_OK, "%s", err.msg);
    return v;
}

static bool bool_of(const struct moeinf_gguf *g, const char *key) {
    bool v = false;
    struct moeinf_error err;
    CHECK_MSG(moeinf_gguf_find_key(g, key) >= 0, "missing key %s", key);
    CHECK_MSG(moeinf_gguf_get_bool_opt(g, key, &v, &err) == MOEINF_OK, "%s", err.msg);
    return v;
}

/* llama.cpp (through llama-cpp-python) loads the file and decodes finite logits: the ground
 * truth for the layout, since its loader refuses any missing tensor or wrong shape. */
static void check_llama_loads(const char *path, int n_vocab) {
    char src[512];
    char cmd[1536];
    char out[4096];
    char errs[4096];
    char want[64];
    test_src_path("tests/scripts/llama_load.py", src, sizeof src);
    snprintf(cmd, sizeof cmd, "python3 '%s' '%s' 12", src, path);
    int rc = test_run_shell("gen-ds-load", cmd, out, sizeof out, errs, sizeof errs);
    if (rc == 77 || rc == 127) {
        test_skip("python3 with llama_cpp and numpy is not available: no loader check");
        return;
    }
    CHECK_MSG(rc == 0, "llama.cpp: %s", errs);
    snprintf(want, sizeof want, "loaded %d finite", n_vocab);
    CHECK_STR_CONTAINS(out, want);
}

/* One preset cut, and the published values the cut keeps. */
struct ds_case {
    const char *name, *cut;
    struct ds_shape d;
    uint32_t ctx, top_k, groups, groups_used, q_lora, gating;
    float theta, eps, scale, yarn, log_mul;
    bool norm;
};

/* clang-format off */
static const struct ds_case ds_cases[] = {
    {"deepseek-v2-lite", "--layers 2",
     {false, 2, 0, 1, 64, 32, 64, 16, 2, 2048, 16, 1, 192, 64, 128, 0, 512, false},
     163840, 6, 1, 1, 0, 1, 10000.0f, 1e-6f, 1.0f, 40.0f, 0.0707f, false},
    {"deepseek-v3", "--layers 4 --heads 4",
     {false, 4, 0, 3, 64, 32, 64, 16, 1, 2048, 4, 1, 192, 64, 128, 1536, 512, true},
     163840, 8, 8, 4, 1536, 2, 10000.0f, 1e-6f, 2.5f, 40.0f, 0.1f, true},
    {"kimi-k2", "--layers 2 --heads 4",
     {false, 2, 0, 1, 64, 32, 64, 16, 1, 2048, 4, 1, 192, 64, 128, 1536, 512, true},
     131072, 8, 1, 1, 1536, 2, 50000.0f, 1e-6f, 2.827f, 32.0f, 0.1f, true},
    {"glm-4.5-air", "--layers 2",
     {true, 2, 1, 1, 64, 32, 64, 16, 1, 2048, 96, 8, 128, 64, 0, 0, 0, true},
     131072, 8, 0, 0, 0, 2, 1e6f, 1e-5f, 1.0f, 0, 0, true},
};

/* clang-format on */

/* The metadata of a preset cut: the cut's dims and the published values. */
static void check_ds_keys(const struct moeinf_gguf *g, const struct ds_case *c) {
    const struct ds_shape *d = &c->d;
    const char *an = d->glm ? "glm4moe" : "deepseek2";
    struct moeinf_gguf_str s;
    struct moeinf_error err = {0};
    CHECK(moeinf_gguf_get_str(g, "general.architecture", &s, &err) == MOEINF_OK &&
          moeinf_gguf_str_eq(s, an));
    char k[128];
#define KEY(suffix) (snprintf(k, sizeof k, "%s.%s", an, suffix), k)
    CHECK_EQ_INT(u32_of(g, KEY("block_count")), d->n_layer + d->n_nextn);
    CHECK_EQ_INT(u32_of(g, KEY("context_length")), c->ctx);
    CHECK_EQ_INT(u32_of(g, KEY("embedding_length")), d->e);
    CHECK_EQ_INT(u32_of(g, KEY("feed_forward_length")), d->fd);
    CHECK_EQ_INT(u32_of(g, KEY("expert_feed_forward_length")), d->f);
    CHECK_EQ_INT(u32_of(g, KEY("expert_count")), d->x);
    CHECK_EQ_INT(u32_of(g, KEY("expert_used_count")), c->top_k);
    CHECK_EQ_INT(u32_of(g, KEY("expert_shared_count")), d->shared);
    CHECK_EQ_INT(u32_of(g, KEY("leading_dense_block_count")), d->n_dense);
    CHECK_EQ_INT(u32_of(g, KEY("expert_gating_func")), c->gating);
    CHECK_EQ_INT(u32_of(g, KEY("attention.head_count")), d->heads);
    CHECK_EQ_INT(u32_of(g, KEY("attention.head_count_kv")), d->heads_kv);
    CHECK_EQ_INT(u32_of(g, KEY("rope.dimension_count")), d->rope);
    CHECK_EQ_INT(u32_of(g, KEY("vocab_size")), d->n_vocab);
    CHECK(f32_of(g, KEY("rope.freq_base")) == c->theta);
    CHECK(f32_of(g, KEY("attention.layer_norm_rms_epsilon")) == c->eps);
    CHECK(f32_of(g, KEY("expert_weights_scale")) == c->scale);
    CHECK(bool_of(g, KEY("expert_weights_norm")) == c->norm);
    uint32_t v = 0;
    if (c->groups > 0) {
        CHECK_EQ_INT(u32_of(g, KEY("expert_group_count")), c->groups);
        CHECK_EQ_INT(u32_of(g, KEY("expert_group_used_count")), c->groups_used);
    } else {
        CHECK(moeinf_gguf_get_u32(g, KEY("expert_group_count"), &v, &err) != MOEINF_OK);
    }
    if (d->glm) {
        CHECK_EQ_INT(u32_of(g, KEY("nextn_predict_layers")), d->n_nextn);
        CHECK_EQ_INT(u32_of(g, KEY("attention.key_length")), d->k_head);
        CHECK_EQ_INT(u32_of(g, KEY("attention.value_length")), d->k_head);
        CHECK(moeinf_gguf_get_str(g, KEY("rope.scaling.type"), &s, &err) != MOEINF_OK);
    } else {
        /* MLA as MQA: one KV head of the latent and the rotary key */
        CHECK_EQ_INT(u32_of(g, KEY("attention.q_lora_rank")), c->q_lora);
        CHECK_EQ_INT(u32_of(g, KEY("attention.kv_lora_rank")), d->kv_lora);
        CHECK_EQ_INT(u32_of(g, KEY("attention.key_length")), d->kv_lora + d->rope);
        CHECK_EQ_INT(u32_of(g, KEY("attention.value_length")), d->kv_lora);
        CHECK_EQ_INT(u32_of(g, KEY("attention.key_length_mla")), d->k_head);
        CHECK_EQ_INT(u32_of(g, KEY("attention.value_length_mla")), d->v_head);
        CHECK(moeinf_gguf_get_str(g, KEY("rope.scaling.type"), &s, &err) == MOEINF_OK &&
              moeinf_gguf_str_eq(s, "yarn"));
        CHECK(f32_of(g, KEY("rope.scaling.factor")) == c->yarn);
        CHECK_EQ_INT(u32_of(g, KEY("rope.scaling.original_context_length")), 4096);
        CHECK(f32_of(g, KEY("rope.scaling.yarn_log_multiplier")) == c->log_mul);
        CHECK(moeinf_gguf_get_u32(g, KEY("nextn_predict_layers"), &v, &err) != MOEINF_OK);
    }
#undef KEY
}

/*
 * The presets through the command line, cut (--layers) and narrowed (--embd, --ff,
 * --dense-ff, --experts, --vocab-size; the heads of deepseek-v3 and kimi-k2, whose 128 / 64
 * heads of a 1536-rank query would weigh tens of MB): the rest of each published config.json
 * stays (deepseek-ai/DeepSeek-V2-Lite, deepseek-ai/DeepSeek-V3, moonshotai/Kimi-K2-Instruct,
 * zai-org/GLM-4.5-Air), key by key and tensor by tensor, and llama.cpp and the engine load
 * each cut and decode finite logits.
 */
static void test_ds_presets(void) {
    char path[512];
    char args[1024];
    char out[4096];
    char errs[4096];
    test_tmp_path("gen-ds-preset.gguf", path, sizeof path);
    for (size_t c = 0; c < sizeof ds_cases / sizeof ds_cases[0]; c++) {
        const struct ds_case *dc = &ds_cases[c];
        snprintf(args, sizeof args,
                 "gen-model -o '%s' --preset %s %s --embd 64 --ff 32 --dense-ff 64 --experts 16 "
                 "--vocab-size 2048 --threads 2",
                 path, dc->name, dc->cut);
        int rc = test_run_moeinf("gen-ds-preset", args, out, sizeof out, errs, sizeof errs);
        if (rc < 0) {
            test_skip("MOEINF_BIN unset (run through ctest)");
            return;
        }
        CHECK_MSG(rc == 0, "%s: %s", dc->name, errs);
        struct moeinf_gguf *g = NULL;
        struct moeinf_error err = {0};
        CHECK_MSG(moeinf_gguf_open(path, &g, &err) == MOEINF_OK, "%s", err.msg);
        if (!g) continue;
        check_ds_keys(g, dc);
        check_ds_tensors(g, &dc->d, MOEINF_TYPE_Q8_0);
        moeinf_gguf_free(g);
        check_llama_loads(path, (int)dc->d.n_vocab);
        check_engine_runs(path, dc->d.glm ? "glm4moe" : "deepseek2", 12);
    }
    remove(path);
}

/* --type q4_k_m on deepseek2 and glm4moe: llama-quantize's choices (src/llama-quant.cpp,
 * llama_tensor_get_type) where these archs meet rules the others do not: attn_k_b's 128-wide
 * rows fall back from Q4_K to Q5_0, as the dense ffn_down's 320-wide ones (layer 0 of 2 is not
 * one of use_more_bits' layers); attn_k_b, attn_v_b, attn_kv_a_mqa and nextn.eh_proj are none
 * of its categories (Q4_K); use_more_bits counts over all blocks, the prediction block included
 * (block 2 of 3 gets Q6_K for ffn_down and attn_v). 16 experts: 8 would make attn_v Q8_0. */
static void test_ds_q4_k_m(void) {
    struct moeinf_gen_params p = moeinf_gen_params_default();
    p.arch = "deepseek2";
    p.n_layer = 2;
    p.n_dense_lead = 1;
    p.n_ff_dense = 320;
    p.n_expert = 16;
    p.n_expert_used = 2;
    p.n_expert_shared = 1;
    p.n_embd = 256;
    p.n_ff = 256;
    p.n_head = 2;
    p.n_head_kv = 1;
    p.n_embd_head = 192;
    p.n_rot = 64;
    p.kv_lora_rank = 256;
    p.type = MOEINF_GEN_TYPE_Q4_K_M;
    p.n_threads = 2;
    char path[512];
    struct moeinf_gguf *g = gen_open(&p, "gen-ds-q4km.gguf", path, sizeof path);
    if (g) {
        const int q4 = MOEINF_TYPE_Q4_K;
        check_tensor(g, "blk.0.attn_k_b.weight", MOEINF_TYPE_Q5_0, 3, 128, 256, 2);
        check_tensor(g, "blk.0.attn_v_b.weight", q4, 3, 256, 128, 2);
        check_tensor(g, "blk.0.attn_kv_a_mqa.weight", q4, 2, 256, 320, 1);
        check_tensor(g, "blk.0.attn_q.weight", q4, 2, 256, 384, 1);
        check_tensor(g, "blk.0.ffn_down.weight", MOEINF_TYPE_Q5_0, 2, 320, 256, 1);
        check_tensor(g, "blk.1.ffn_down_exps.weight", MOEINF_TYPE_Q6_K, 3, 256, 256, 16);
        check_tensor(g, "blk.1.ffn_down_shexp.weight", MOEINF_TYPE_Q6_K, 2, 256, 256, 1);
        check_tensor(g, "blk.1.ffn_up_exps.weight", q4, 3, 256, 256, 16);
        moeinf_gguf_free(g);
        /* the dense FFN (320) is the widest activation row and no whole Q8_K block: the
         * engine once failed an assertion sizing it */
        check_engine_runs(path, "deepseek2", 3);
    }
    remove(path);
    p.arch = "glm4moe";
    p.n_layer = 2;
    p.n_nextn = 1;
    p.n_head = 4;
    p.n_head_kv = 2;
    p.n_embd_head = 64;
    p.n_rot = 32;
    g = gen_open(&p, "gen-glm-q4km.gguf", path, sizeof path);
    if (g) {
        const int q4 = MOEINF_TYPE_Q4_K;
        const int q6 = MOEINF_TYPE_Q6_K;
        /* use_more_bits(i, 3): i < 0, i >= 2, or (i - 0) % 3 == 2: block 2 only */
        check_tensor(g, "blk.1.attn_v.weight", q4, 2, 256, 128, 1);
        check_tensor(g, "blk.2.attn_v.weight", q6, 2, 256, 128, 1);
        check_tensor(g, "blk.1.ffn_down_exps.weight", q4, 3, 256, 256, 16);
        check_tensor(g, "blk.2.ffn_down_exps.weight", q6, 3, 256, 256, 16);
        check_tensor(g, "blk.2.nextn.eh_proj.weight", q4, 2, 512, 256, 1);
        moeinf_gguf_free(g);
        check_llama_loads(path, 1010);
    }
    remove(path);
}

/* Geometries deepseek2 and glm4moe cannot have, each named in the error. */
static void test_bad_ds_params(void) {
    static const struct {
        const char *arch;
        int what;
        const char *msg;
    } cases[] = {
        {"deepseek2", 0, "shared experts"},    {"deepseek2", 1, "dense layers"},
        {"deepseek2", 2, "prediction blocks"}, {"glm4moe", 3, "rotary dims"},
        {"deepseek2", 4, "expert groups"},     {"deepseek2", 5, "KV rank"},
        {"glm4moe", 6, "expert gating"},       {"deepseek2", 7, "head dim - rotary dims"},
    };

    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        struct moeinf_gen_params p = tiny(MOEINF_TYPE_Q8_0);
        p.arch = cases[i].arch;
        p.n_expert_shared = 1;
        p.n_embd_head = 64;
        p.n_rot = 32;
        switch (cases[i].what) {
        case 0:
            p.n_expert_shared = 0;
            break;
        case 1:
            p.n_dense_lead = 3;
            p.n_ff_dense = 64;
            break;
        case 2:
            p.n_nextn = 1;
            break;
        case 3:
            p.n_rot = 64;
            break;
        case 4:
            p.n_expert_groups = 3;
            p.n_group_used = 1;
            break;
        case 5:
            p.kv_lora_rank = 0;
            break;
        case 6:
            p.expert_gating = 3;
            break;
        case 7:
            p.n_rot = 48;
            break; /* nope 16: not whole Q8_0 blocks */
        default:
            break;
        }
        struct moeinf_error err = {0};
        CHECK_EQ_INT(moeinf_gen_params_check(&p, &err), MOEINF_ERR_ARG);
        CHECK_MSG(strstr(err.msg, cases[i].msg) != NULL, "case %zu: %s", i, err.msg);
        p = tiny(MOEINF_TYPE_Q8_0);
        p.arch = cases[i].arch;
        p.n_expert_shared = 1;
        p.n_embd_head = 64;
        p.n_rot = 32;
        CHECK_MSG(moeinf_gen_params_check(&p, &err) == MOEINF_OK, "%s", err.msg);
    }
}

/* The whole presets through gen-model --list (nothing written: they are 10 GB to 1.4 TB in
 * F32): their parameter counts are the published checkpoints' (the safetensors totals of
 * DeepSeek-V2-Lite, DeepSeek-V3 without its prediction module, and Kimi-K2; GLM-4.5-Air's 46
 * layers are its "106B" plus the prediction block), and tensors of each kind have the shapes
 * of the published config.json. */
static void test_ds_preset_lists(void) {
    static const struct {
        const char *name;
        int n_tensors;
        unsigned long long params;
        const char *lines[5];
    } cases[] = {
        {"deepseek-v2-lite",
         404,
         15706484224ull,
         {"blk.0.ffn_gate.weight f32 2 [2048, 10944, 1]",
          "blk.26.attn_q.weight f32 2 [2048, 3072, 1]",
          "blk.26.attn_k_b.weight f32 3 [128, 512, 16]",
          "blk.26.ffn_down_exps.weight f32 3 [1408, 2048, 64]",
          "blk.26.ffn_up_shexp.weight f32 2 [2048, 2816, 1]"}},
        {"deepseek-v3",
         1086,
         671026419200ull,
         {"blk.2.ffn_gate.weight f32 2 [7168, 18432, 1]",
          "blk.60.attn_q_b.weight f32 2 [1536, 24576, 1]",
          "blk.60.attn_kv_a_mqa.weight f32 2 [7168, 576, 1]",
          "blk.3.ffn_gate_exps.weight f32 3 [7168, 2048, 256]",
          "blk.60.attn_v_b.weight f32 3 [512, 128, 128]"}},
        {"kimi-k2",
         1096,
         1026408232448ull,
         {"blk.0.ffn_down.weight f32 2 [18432, 7168, 1]",
          "blk.1.ffn_gate_exps.weight f32 3 [7168, 2048, 384]",
          "blk.60.attn_output.weight f32 2 [8192, 7168, 1]",
          "blk.60.exp_probs_b.bias f32 1 [384, 1, 1]",
          "token_embd.weight f32 2 [7168, 163840, 1]"}},
        {"glm-4.5-air",
         801,
         109227310848ull,
         {"blk.0.ffn_up.weight f32 2 [4096, 10944, 1]",
          "blk.45.attn_q.weight f32 2 [4096, 12288, 1]", "blk.45.attn_k.bias f32 1 [1024, 1, 1]",
          "blk.46.nextn.eh_proj.weight f32 2 [8192, 4096, 1]",
          "blk.46.ffn_down_exps.weight f32 3 [1408, 4096, 128]"}},
    };

    char args[256];
    static char out[1 << 18];
    char errs[4096];
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        snprintf(args, sizeof args, "gen-model --preset %s --list --type f32", cases[c].name);
        int rc = test_run_moeinf("gen-ds-list", args, out, sizeof out, errs, sizeof errs);
        if (rc < 0) {
            test_skip("MOEINF_BIN unset (run through ctest)");
            return;
        }
        CHECK_MSG(rc == 0, "%s: %s", cases[c].name, errs);
        /* the columns squeezed to single spaces */
        char *w = out;
        for (const char *r = out; *r; r++)
            if (*r != ' ' || (w > out && w[-1] != ' ')) *w++ = *r;
        *w = '\0';
        char total[128];
        snprintf(total, sizeof total, "%d tensors, %llu bytes of weights", cases[c].n_tensors,
                 4 * cases[c].params);
        CHECK_STR_CONTAINS(out, total);
        for (int i = 0; i < 5; i++) {
            CHECK_MSG(strstr(out, cases[c].lines[i]) != NULL, "%s: no '%s'", cases[c].name,
                      cases[c].lines[i]);
        }
    }
}

static void test_default_model(void) {
    struct moeinf_gen_params p = moeinf_gen_params_default();
    CHECK(p.arch && !strcmp(p.arch, "llama"));
    CHECK_EQ_INT(p.n_layer, 4);
    CHECK_EQ_INT(p.n_expert, 8);
    CHECK_EQ_INT(p.n_expert_used, 2);
    CHECK_EQ_INT(p.n_embd, 256);
    CHECK_EQ_INT(p.n_ff, 512);
    CHECK_EQ_INT(p.n_head, 8);
    CHECK_EQ_INT(p.n_head_kv, 4);
    CHECK_EQ_INT(p.type, 8);
    CHECK(p.vocab_from == NULL);
    char path[512];
    struct moeinf_gguf *g = gen_open(&p, "gen-default.gguf", path, sizeof path);
    if (!g) return;
    CHECK(g->map.size > 5u << 20 && g->map.size < 20u << 20);
    check_tensor(g, "blk.3.ffn_down_exps.weight", 8, 3, 512, 256, 8);
    check_tensor(g, "blk.3.ffn_gate_inp.weight", 0, 2, 256, 8, 1);
    moeinf_gguf_free(g);
    remove(path);
}

int main(void) {
    RUN(test_layout);
    RUN(test_weight_statistics);
    RUN(test_types);
    RUN(test_q4_k_m);
    RUN(test_k_types);
    RUN(test_variants);
    RUN(test_vocab_from);
    RUN(test_determinism);
    RUN(test_bad_params);
    RUN(test_failures_leave_nothing);
    RUN(test_archs);
    RUN(test_hybrid_archs);
    RUN(test_bad_hybrid_params);
    RUN(test_gpt_oss);
    RUN(test_gpt_oss_presets);
    RUN(test_ds_presets);
    RUN(test_ds_preset_lists);
    RUN(test_ds_q4_k_m);
    RUN(test_bad_ds_params);
    RUN(test_default_model);
    return test_report();
}
