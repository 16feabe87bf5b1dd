/*
 * test_model.c - the model loader refuses what it cannot run with a named one-line error:
 * missing architecture keys, an unsupported architecture, a missing tensor, an unsupported
 * tensor type, a wrong shape, impossible expert or head counts. Each case is a copy of the
 * real tiny Mixtral file with a few bytes patched in place (same-length renames and
 * same-size values, so the file stays a valid GGUF and only the model check can fail).
 */
#include <math.h>
#include <stdint.h>
#include <unistd.h>

#include "base/tensor_type.h"
#include "engine/engine.h"
#include "gguf/gguf.h"
#include "gguf/gguf_writer.h"
#include "gguf_bytes.h"
#include "golden.h"
#include "model/arch.h"
#include "moeinf.h"
#include "test.h"

static char *model_bytes(size_t *size) {
    char path[1024];
    if (!test_shared_path("testdata/models/tiny-mixtral-F32.gguf", path, sizeof path)) return NULL;
    char *b = golden_read_file(path, size);
    CHECK(b != NULL);
    return b;
}

/* Offset just past the first occurrence of a GGUF string (u64 length + bytes), or 0. */
static size_t find_gguf_str(const char *b, size_t size, const char *s) {
    size_t n = strlen(s);
    for (size_t i = 8; i + n <= size; i++) {
        uint64_t len;
        memcpy(&len, b + i - 8, 8);
        if (len == n && memcmp(b + i, s, n) == 0) return i + n;
    }
    return 0;
}

static void expect_load_error(const char *b, size_t size, const char *name, enum moeinf_status want,
                              const char *phrase) {
    char path[512];
    test_tmp_path(name, path, sizeof path);
    FILE *fp = fopen(path, "wb");
    CHECK(fp && fwrite(b, 1, size, fp) == size);
    if (fp) fclose(fp);
    struct moeinf_model *model = NULL;
    struct moeinf_error err = {0};
    struct moeinf_model_params mp = moeinf_model_params_default();
    enum moeinf_status st = moeinf_model_load(path, &mp, &model, &err);
    CHECK_MSG(st == want, "%s: status %d, want %d (%s)", name, st, want, err.msg);
    CHECK(model == NULL);
    CHECK_STR_CONTAINS(err.msg, phrase);
    CHECK_STR_CONTAINS(err.msg, path);
    CHECK(strchr(err.msg, '\n') == NULL);
    moeinf_model_free(model);
}

/* Renames a key or tensor (same length) and expects the loader's message. */
static void rename_case(const char *from, const char *to, const char *name, enum moeinf_status want,
                        const char *phrase) {
    size_t size;
    char *b = model_bytes(&size);
    if (!b) return;
    size_t at = find_gguf_str(b, size, from);
    CHECK_MSG(at != 0 && strlen(from) == strlen(to), "%s", from);
    /* NOLINTNEXTLINE(bugprone-not-null-terminated-result): bytes in a file image */
    if (at) memcpy(b + at - strlen(from), to, strlen(to));
    expect_load_error(b, size, name, want, phrase);
    free(b);
}

/* Sets the u32 value of a metadata key. */
static void u32_case(const char *key, uint32_t value, const char *name, const char *phrase) {
    size_t size;
    char *b = model_bytes(&size);
    if (!b) return;
    size_t at = find_gguf_str(b, size, key);
    CHECK_MSG(at != 0, "%s", key);
    uint32_t type = 0;
    if (at) memcpy(&type, b + at, 4);
    CHECK_EQ_INT(type, 4); /* GGUF uint32 */
    if (at) memcpy(b + at + 4, &value, 4);
    expect_load_error(b, size, name, MOEINF_ERR_FORMAT, phrase);
    free(b);
}

/* Patches a tensor info: its type, or one dimension. */
static void tensor_case(const char *tensor, int dim, int64_t ne, int type, const char *name,
                        enum moeinf_status want, const char *phrase) {
    size_t size;
    char *b = model_bytes(&size);
    if (!b) return;
    size_t at = find_gguf_str(b, size, tensor);
    CHECK_MSG(at != 0, "%s", tensor);
    if (!at) {
        free(b);
        return;
    }
    uint32_t n_dims;
    memcpy(&n_dims, b + at, 4);
    if (dim >= 0) memcpy(b + at + 4 + 8 * (size_t)dim, &ne, 8);
    if (type >= 0) {
        uint32_t t = (uint32_t)type;
        memcpy(b + at + 4 + 8 * (size_t)n_dims, &t, 4);
    }
    expect_load_error(b, size, name, want, phrase);
    free(b);
}

static void test_missing_keys(void) {
    rename_case("llama.block_count", "llama.block_cOunt", "m_block.gguf", MOEINF_ERR_FORMAT,
                "missing required key 'llama.block_count' for arch 'llama'");
    rename_case("llama.attention.layer_norm_rms_epsilon", "llama.attention.layer_norm_rms_epsilOn",
                "m_eps.gguf", MOEINF_ERR_FORMAT, "llama.attention.layer_norm_rms_epsilon");
    rename_case("llama.expert_used_count", "llama.expert_used_cOunt", "m_used.gguf",
                MOEINF_ERR_FORMAT, "llama.expert_used_count");
}

static void test_unsupported_arch(void) {
    size_t size;
    char *b = model_bytes(&size);
    if (!b) return;
    size_t at = find_gguf_str(b, size, "general.architecture");
    CHECK(at != 0);
    /* the value: type u32 (8 = string), then the string "llama" -> "gemma" */
    /* NOLINTNEXTLINE(bugprone-not-null-terminated-result): bytes in a file image */
    if (at) memcpy(b + at + 4 + 8, "gemma", 5);
    expect_load_error(b, size, "m_arch.gguf", MOEINF_ERR_UNSUPPORTED,
                      "'gemma' is not supported yet (llama, qwen2moe, qwen3moe, qwen3vlmoe, olmoe, "
                      "qwen35moe, qwen3next, gpt-oss, deepseek2, glm4moe, minimax-m2 are)");
    free(b);
}

/* The table of architectures (model/arch.c): each registered name is found exactly, and
 * nothing else is (no prefix, no extension, no case folding). */
static void test_arch_table(void) {
    char names[160];
    moeinf_arch_names(names, sizeof names);
    CHECK(!strcmp(names, "llama, qwen2moe, qwen3moe, qwen3vlmoe, olmoe, qwen35moe, qwen3next, "
                         "gpt-oss, deepseek2, glm4moe, minimax-m2"));
    static const char *const known[] = {"llama", "qwen2moe",  "qwen3moe",  "qwen3vlmoe",
                                        "olmoe", "qwen35moe", "qwen3next", "gpt-oss"};
    for (size_t i = 0; i < sizeof known / sizeof known[0]; i++) {
        const struct moeinf_arch *a = moeinf_arch_find(known[i], strlen(known[i]));
        CHECK_MSG(a && !strcmp(a->name, known[i]), "%s not found", known[i]);
        CHECK(a && a->read_hparams && a->bind_layer);
    }
    static const char *const unknown[] = {"llam", "llama2", "LLAMA", "", "qwen3moe "};
    for (size_t i = 0; i < sizeof unknown / sizeof unknown[0]; i++)
        CHECK_MSG(!moeinf_arch_find(unknown[i], strlen(unknown[i])), "'%s' found", unknown[i]);
    char small[9];
    moeinf_arch_names(small, sizeof small); /* truncated, still terminated */
    CHECK(!strcmp(small, "llama, q"));
}

/* deepseek2 (MLA attention, grouped sigmoid routing) is planned, not supported: a real file of
 * that architecture is refused by name, before anything else is read. */
static struct moeinf_model *load_or_fail(const char *path) {
    struct moeinf_model *model = NULL;
    struct moeinf_error err = {0};
    struct moeinf_model_params mp = moeinf_model_params_default();
    CHECK_MSG(moeinf_model_load(path, &mp, &model, &err) == MOEINF_OK, "%s", err.msg);
    return model;
}

/* deepseek2's hyper-parameters as its README gives them (../shared's MLA file: q_lora 32,
 * kv_lora 32, heads of 48 = 32 nope + 16 rope, values of 16; one dense layer 128 wide, then 16
 * experts 32 wide, top 4 by sigmoid + exp_probs_b, renormalised, x2.5, 2 shared experts). */
static void test_deepseek2_hparams(void) {
    char path[1024];
    if (!test_shared_path("testdata/models/tiny-deepseek2-F32.gguf", path, sizeof path)) return;
    struct moeinf_model *model = load_or_fail(path);
    if (!model) return;
    const struct moeinf_hparams *hp = &model->llm->hp;
    CHECK_EQ_INT(hp->n_layer, 3);
    CHECK_EQ_INT(hp->mla_q, 32);
    CHECK_EQ_INT(hp->mla_kv, 32);
    CHECK_EQ_INT(hp->head_dim, 48);
    CHECK_EQ_INT(hp->n_rot, 16);
    CHECK_EQ_INT(hp->mla_v, 16);
    CHECK_EQ_INT(hp->n_head_kv, 1);
    CHECK_EQ_INT(hp->n_layer_dense_lead, 1);
    CHECK_EQ_INT(hp->n_ff_dense, 128);
    CHECK_EQ_INT(hp->n_ff, 32);
    CHECK_EQ_INT(hp->n_ff_shexp, 64);
    CHECK_EQ_INT(hp->router, MOEINF_ROUTER_SIGMOID);
    CHECK(hp->expert_weights_norm);
    CHECK(fabs(hp->expert_weights_scale - 2.5) < 1e-6);
    CHECK(fabs(hp->attn_scale - 1.0 / sqrt(48.0)) < 1e-7); /* no YaRN: 1 / sqrt(head) */
    CHECK_EQ_INT(model->llm->layers[0].ffn, MOEINF_FFN_DENSE);
    CHECK_EQ_INT(model->llm->layers[1].ffn, MOEINF_FFN_MOE);
    CHECK_EQ_INT(model->llm->layers[2].attn, MOEINF_ATTN_MLA);
    CHECK(model->llm->layers[1].exp_probs_b != NULL && model->llm->layers[1].wk_b.data != NULL);
    CHECK_EQ_INT(moeinf_n_moe_layers(hp), 2);
    char desc[320];
    moeinf_model_desc(model, desc, sizeof desc);
    CHECK_STR_CONTAINS(desc, "latent attention (kv rank 32, q rank 32), 1 dense layer first");
    moeinf_model_free(model);
}

/* The older layout of tests/data/models/tiny-deepseek2lite-F32 (tests/data/README.md): YaRN
 * factor 4 with yarn_log_multiplier 0.0707 (mscale_all_dim 0.707): the RoPE's attention factor
 * 1 / (1 + 0.1 ln 4) and the scores scaled by (1 + 0.1 * 0.707 ln 4)^2 / sqrt(64), by hand;
 * softmax routing in 4 groups of which 2 are kept; a missing attn_kv_b is named. */
static void test_deepseek2_older_layout(void) {
    char path[1024];
    test_src_path("tests/data/models/tiny-deepseek2lite-F32.gguf", path, sizeof path);
    struct moeinf_model *model = load_or_fail(path);
    if (!model) return;
    const struct moeinf_hparams *hp = &model->llm->hp;
    const double m = 1.0 + 0.1 * 0.707 * log(4.0);
    CHECK_MSG(fabs(hp->attn_scale - m * m / 8.0) < 1e-6, "%g", (double)hp->attn_scale);
    CHECK(fabs(hp->yarn_attn_factor - 1.0 / (1.0 + 0.1 * log(4.0))) < 1e-6);
    CHECK_EQ_INT(hp->rope_scaling, MOEINF_ROPE_SCALING_YARN);
    CHECK_EQ_INT(hp->router, MOEINF_ROUTER_SOFTMAX);
    CHECK_EQ_INT(hp->n_expert_groups, 4);
    CHECK_EQ_INT(hp->n_group_used, 2);
    CHECK_EQ_INT(hp->mla_q, 0);
    CHECK(model->llm->layers[1].wkv_b.data != NULL && model->llm->layers[1].wq.data != NULL);
    moeinf_model_free(model);
    size_t size = 0;
    char *b = golden_read_file(path, &size);
    CHECK(b != NULL);
    if (!b) return;
    const char *name = "blk.1.attn_kv_b.weight";
    size_t at = find_gguf_str(b, size, name);
    CHECK(at != 0);
    /* NOLINTNEXTLINE(bugprone-not-null-terminated-result): bytes in a file image */
    if (at) memcpy(b + at - strlen(name), "blk.1.attn_kv_X.weight", strlen(name));
    expect_load_error(b, size, "m_kvb.gguf", MOEINF_ERR_FORMAT,
                      "missing tensor 'blk.1.attn_kv_b.weight'");
    free(b);
}

/* glm4moe: the next-token-prediction block is not a layer; partial RoPE, per-head q/k norm,
 * sigmoid routing with the selection bias (tests/data/models/tiny-glm4moe-F32). */
static void test_glm4moe_hparams(void) {
    char path[1024];
    test_src_path("tests/data/models/tiny-glm4moe-F32.gguf", path, sizeof path);
    struct moeinf_model *model = load_or_fail(path);
    if (!model) return;
    const struct moeinf_hparams *hp = &model->llm->hp;
    CHECK_EQ_INT(hp->n_layer, 3); /* block_count 4, nextn_predict_layers 1 */
    CHECK_EQ_INT(hp->n_rot, 16);
    CHECK_EQ_INT(hp->head_dim, 32);
    CHECK_EQ_INT(hp->qk_norm, MOEINF_QK_NORM_HEAD);
    CHECK_EQ_INT(hp->router, MOEINF_ROUTER_SIGMOID);
    CHECK_EQ_INT(hp->n_ff_shexp, 16);
    CHECK(model->llm->layers[2].exp_probs_b != NULL && model->llm->layers[2].bq != NULL);
    CHECK(model->llm->layers[1].gate_inp_shexp == NULL); /* ungated shared expert */
    moeinf_model_free(model);
}

/* A qwen2moe file without a shared-expert tensor is refused by name (the real tiny qwen2moe
 * file, patched). */
static void test_qwen2moe_errors(void) {
    char path[1024];
    if (!test_shared_path("testdata/models/tiny-qwen2moe-F32.gguf", path, sizeof path)) return;
    size_t size = 0;
    char *b = golden_read_file(path, &size);
    CHECK(b != NULL);
    if (!b) return;
    const char *name = "blk.1.ffn_up_shexp.weight";
    size_t at = find_gguf_str(b, size, name);
    CHECK(at != 0);
    /* NOLINTNEXTLINE(bugprone-not-null-terminated-result): bytes in a file image */
    if (at) memcpy(b + at - strlen(name), "blk.1.ffn_up_shexp.weighT", strlen(name));
    expect_load_error(b, size, "m_shexp.gguf", MOEINF_ERR_FORMAT,
                      "missing tensor 'blk.1.ffn_up_shexp.weight'");
    free(b);
}

/* tiny-qwen3moe-F32 rewritten into path with the routing keys llama.cpp reads for other
 * archs; false when it could not be written. */
static bool qwen3moe_with_keys(const char *path, float scale, bool norm, uint32_t gating) {
    char src[1024];
    test_src_path("tests/data/models/tiny-qwen3moe-F32.gguf", src, sizeof src);
    struct moeinf_error err = {0};
    struct moeinf_gguf *g = NULL;
    struct moeinf_gguf_writer *w = NULL;
    bool ok = moeinf_gguf_open(src, &g, &err) == MOEINF_OK &&
              moeinf_gguf_writer_open(path, 32, &w, &err) == MOEINF_OK;
    for (uint64_t i = 0; ok && i < g->n_kv; i++)
        ok = moeinf_gguf_writer_add_kv(w, &g->kv[i], &err) == MOEINF_OK;
    ok = ok &&
         moeinf_gguf_writer_add_f32(w, "qwen3moe.expert_weights_scale", scale, &err) == MOEINF_OK &&
         moeinf_gguf_writer_add_bool(w, "qwen3moe.expert_weights_norm", norm, &err) == MOEINF_OK &&
         moeinf_gguf_writer_add_u32(w, "qwen3moe.expert_gating_func", gating, &err) == MOEINF_OK;
    for (uint64_t i = 0; ok && i < g->n_tensors; i++) {
        const struct moeinf_gguf_tensor *t = &g->tensors[i];
        ok =
            moeinf_gguf_writer_add_tensor(w, t->name, t->type, t->n_dims, t->ne, &err) == MOEINF_OK;
    }
    for (uint64_t i = 0; ok && i < g->n_tensors; i++) {
        const struct moeinf_gguf_tensor *t = &g->tensors[i];
        ok = moeinf_gguf_writer_write(w, t->data, t->n_bytes, &err) == MOEINF_OK;
    }
    ok = ok && moeinf_gguf_writer_finish(w, &err) == MOEINF_OK;
    CHECK_MSG(ok, "%s", err.msg);
    moeinf_gguf_writer_free(w);
    moeinf_gguf_free(g);
    return ok;
}

/* Layer 0's routing weights of the 6 tokens below (layer 0's router input does not depend on
 * the weights, so both files choose the same experts). */
static bool layer0_weights(const char *path, float *w, int32_t *sel, int *n_used) {
    struct moeinf_model *model = NULL;
    struct moeinf_context *ctx = NULL;
    struct moeinf_error err = {0};
    struct moeinf_model_params mp = moeinf_model_params_default();
    struct moeinf_context_params cp = moeinf_context_params_default();
    cp.n_ctx = 16;
    cp.n_threads = 1;
    const int32_t ids[6] = {1, 300, 301, 350, 400, 17};
    bool ok = moeinf_model_load(path, &mp, &model, &err) == MOEINF_OK &&
              moeinf_context_init(model, &cp, &ctx, &err) == MOEINF_OK &&
              moeinf_decode(ctx, ids, 6, NULL, false, &err) == MOEINF_OK;
    CHECK_MSG(ok, "%s: %s", path, err.msg);
    if (ok) {
        *n_used = model->llm->hp.n_expert_used;
        for (int j = 0; j < 6; j++) {
            memcpy(w + (size_t)j * *n_used, moeinf_fwd_routing_weights(ctx->fwd, 0, j),
                   (size_t)*n_used * sizeof *w);
            memcpy(sel + (size_t)j * *n_used, moeinf_fwd_routing(ctx->fwd, 0, j),
                   (size_t)*n_used * sizeof *sel);
        }
    }
    moeinf_context_free(ctx);
    moeinf_model_free(model);
    return ok;
}

/* qwen3moe with expert_weights_norm = false and expert_weights_scale = 2 in its metadata: the
 * weights are 2 p instead of p / sum(p), so each weight over the renormalised one is 2 sum(p)
 * = the sum of the new weights, at every rank. expert_gating_func 2 (sigmoid) is refused. */
static void test_routing_keys(void) {
    char src[1024];
    char path[512];
    test_src_path("tests/data/models/tiny-qwen3moe-F32.gguf", src, sizeof src);
    test_tmp_path("m_routing_keys.gguf", path, sizeof path);
    if (!qwen3moe_with_keys(path, 2.0f, false, 1)) return;
    float w0[6 * 64];
    float w1[6 * 64];
    int32_t s0[6 * 64];
    int32_t s1[6 * 64];
    int n_used = 0;
    if (layer0_weights(src, w0, s0, &n_used) && layer0_weights(path, w1, s1, &n_used)) {
        CHECK(n_used == 4 && memcmp(s0, s1, sizeof(int32_t) * 6 * (size_t)n_used) == 0);
        for (int j = 0; j < 6; j++) {
            double sum = 0;
            for (int r = 0; r < n_used; r++)
                sum += w1[j * n_used + r];
            CHECK_MSG(sum < 2.0 && sum > 0.0, "token %d: weights sum to %g", j, sum);
            for (int r = 0; r < n_used; r++) {
                double ratio = (double)w1[j * n_used + r] / w0[j * n_used + r];
                CHECK_MSG(fabs(ratio - sum) < 1e-5, "token %d rank %d: %g vs %g", j, r, ratio, sum);
            }
        }
    }
    remove(path);
    if (!qwen3moe_with_keys(path, 0.0f, true, 2)) return;
    struct moeinf_model *model = NULL;
    struct moeinf_error err = {0};
    struct moeinf_model_params mp = moeinf_model_params_default();
    CHECK_EQ_INT(moeinf_model_load(path, &mp, &model, &err), MOEINF_ERR_UNSUPPORTED);
    CHECK_STR_CONTAINS(err.msg, "expert_gating_func 2 is not supported yet for arch 'qwen3moe'");
    moeinf_model_free(model);
    remove(path);
}

static void test_bad_tensors(void) {
    rename_case("blk.1.attn_q.weight", "blk.1.attn_X.weight", "m_tensor.gguf", MOEINF_ERR_FORMAT,
                "missing tensor 'blk.1.attn_q.weight'");
    /* nvfp4 (id 40) is a ggml type the reader accepts but moeinf cannot compute with yet */
    tensor_case("blk.0.attn_q.weight", -1, 0, 40, "m_type.gguf", MOEINF_ERR_UNSUPPORTED,
                "has type nvfp4, which moeinf does not support yet");
    /* q8_K (id 15) is an activation type: no weight tensor may have it */
    tensor_case("blk.0.attn_q.weight", -1, 0, 15, "m_q8k.gguf", MOEINF_ERR_FORMAT,
                "ne[0] = 64 is not a multiple of the block size 256 of q8_K");
    /* A K-quant needs rows of whole 256-element super-blocks; these rows have 64 */
    tensor_case("blk.0.attn_q.weight", -1, 0, 12, "m_q4k.gguf", MOEINF_ERR_FORMAT,
                "tensor 'blk.0.attn_q.weight': ne[0] = 64 is not a multiple of the block size "
                "256 of q4_K");
    tensor_case("blk.0.attn_q.weight", 1, 128, -1, "m_shape.gguf", MOEINF_ERR_FORMAT,
                "tensor 'blk.0.attn_q.weight' has shape [64, 128");
}

static void test_impossible_counts(void) {
    u32_case("llama.expert_used_count", 9, "m_topk.gguf", "expert_used_count 9 is invalid for 8");
    u32_case("llama.attention.head_count_kv", 3, "m_kv.gguf", "invalid geometry");
    u32_case("llama.rope.dimension_count", 65, "m_rot.gguf", "rope.dimension_count");
}

/* A copy of the tiny Mixtral with RoPE scaling metadata added (through the GGUF writer). */
/* src copied to dst with, where given, a string key and a float key added, and tensor `dup`
 * written once more under the name `dup_as` (its data and shape). */
struct extra {
    const char *str_key, *str_val;
    const char *f32_key;
    float f32_val;
    const char *dup, *dup_as;
};

static bool write_with(const char *src, const char *dst, const struct extra *x) {
    struct moeinf_error err = {0};
    struct moeinf_gguf *g = NULL;
    struct moeinf_gguf_writer *w = NULL;
    bool ok = moeinf_gguf_open(src, &g, &err) == MOEINF_OK &&
              moeinf_gguf_writer_open(dst, (uint32_t)g->alignment, &w, &err) == MOEINF_OK;
    for (uint64_t i = 0; ok && i < g->n_kv; i++)
        ok = !moeinf_gguf_writer_add_kv(w, &g->kv[i], &err);
    if (ok && x->str_key) ok = !moeinf_gguf_writer_add_str(w, x->str_key, x->str_val, &err);
    if (ok && x->f32_key) ok = !moeinf_gguf_writer_add_f32(w, x->f32_key, x->f32_val, &err);
    const struct moeinf_gguf_tensor *dup = x->dup && ok ? moeinf_gguf_find_tensor(g, x->dup) : NULL;
    CHECK(!x->dup || dup);
    for (uint64_t i = 0; ok && i < g->n_tensors; i++) {
        const struct moeinf_gguf_tensor *t = &g->tensors[i];
        ok = !moeinf_gguf_writer_add_tensor(w, t->name, t->type, t->n_dims, t->ne, &err);
    }
    if (ok && dup)
        ok = !moeinf_gguf_writer_add_tensor(w, x->dup_as, dup->type, dup->n_dims, dup->ne, &err);
    for (uint64_t i = 0; ok && i < g->n_tensors; i++) {
        ok = !moeinf_gguf_writer_write(w, g->tensors[i].data, (size_t)g->tensors[i].n_bytes, &err);
    }
    if (ok && dup) ok = !moeinf_gguf_writer_write(w, dup->data, (size_t)dup->n_bytes, &err);
    ok = ok && !moeinf_gguf_writer_finish(w, &err);
    CHECK_MSG(ok, "%s", err.msg);
    moeinf_gguf_writer_free(w);
    moeinf_gguf_free(g);
    return ok;
}

static bool write_with_rope_scaling(const char *src, const char *dst, const char *kind,
                                    float factor) {
    const struct extra x = {"llama.rope.scaling.type", kind, "llama.rope.scaling.factor", factor,
                            NULL, NULL};
    return write_with(src, dst, &x);
}

/* What deepseek2 and glm4moe files may carry that moeinf does not compute is refused by name:
 * DeepSeek's YaRN log multiplier on another architecture and the attention temperature scaling
 * of Mistral Large 3. Gate and up experts fused in one tensor are read (test_fused_gate_up.c);
 * one of the wrong shape (here the gate tensor renamed, half the rows) is a format error that
 * names it and both shapes. */
static void test_refused_by_name(void) {
    char src[1024];
    char dst[512];
    struct moeinf_model *model = NULL;
    struct moeinf_error err = {0};
    struct moeinf_model_params mp = moeinf_model_params_default();
    test_tmp_path("m_refused.gguf", dst, sizeof dst);
    if (test_shared_path("testdata/models/tiny-mixtral-F32.gguf", src, sizeof src)) {
        const struct extra x = {"llama.rope.scaling.type", "yarn",
                                "llama.rope.scaling.yarn_log_multiplier", 0.0707f, NULL, NULL};
        if (write_with(src, dst, &x)) {
            CHECK_EQ_INT(moeinf_model_load(dst, &mp, &model, &err), MOEINF_ERR_UNSUPPORTED);
            CHECK_STR_CONTAINS(err.msg, "rope.scaling.yarn_log_multiplier is not supported for "
                                        "arch 'llama'");
        }
    }
    test_src_path("tests/data/models/tiny-deepseek2lite-F32.gguf", src, sizeof src);
    const struct extra t = {NULL, NULL, "deepseek2.attention.temperature_scale", 0.1f, NULL, NULL};
    if (write_with(src, dst, &t)) {
        CHECK_EQ_INT(moeinf_model_load(dst, &mp, &model, &err), MOEINF_ERR_UNSUPPORTED);
        CHECK_STR_CONTAINS(err.msg, "attention.temperature_scale");
    }
    test_src_path("tests/data/models/tiny-glm4moe-F32.gguf", src, sizeof src);
    const struct extra f = {NULL, NULL, NULL, 0.0f, "blk.1.ffn_gate_exps.weight",
                            "blk.1.ffn_gate_up_exps.weight"};
    if (write_with(src, dst, &f)) {
        CHECK_EQ_INT(moeinf_model_load(dst, &mp, &model, &err), MOEINF_ERR_FORMAT);
        CHECK_STR_CONTAINS(err.msg, "tensor 'blk.1.ffn_gate_up_exps.weight' has shape [256, 16, "
                                    "16, 1], expected [256, 32, 16]");
    }
    CHECK(model == NULL);
    remove(dst);
}

static void test_rope_scaling(void) {
    char src[1024];
    char dst[512];
    if (!test_shared_path("testdata/models/tiny-mixtral-F32.gguf", src, sizeof src)) return;
    test_tmp_path("m_rope.gguf", dst, sizeof dst);
    if (!write_with_rope_scaling(src, dst, "longrope", 4.0f)) return;
    struct moeinf_model *model = NULL;
    struct moeinf_error err = {0};
    struct moeinf_model_params mp = moeinf_model_params_default();
    CHECK_EQ_INT(moeinf_model_load(dst, &mp, &model, &err), MOEINF_ERR_UNSUPPORTED);
    CHECK_STR_CONTAINS(err.msg, "RoPE scaling 'longrope' is not supported yet");
    /* the file's string is escaped in the message (no terminal escape, one line) */
    if (!write_with_rope_scaling(src, dst, "ya\x1b[2Jrn\n", 4.0f)) return;
    CHECK_EQ_INT(moeinf_model_load(dst, &mp, &model, &err), MOEINF_ERR_UNSUPPORTED);
    CHECK_STR_CONTAINS(err.msg, "RoPE scaling 'ya\\x1b[2Jrn\\n' is not supported yet");
    /* linear and YaRN scaling are supported (freq_scale = 1 / factor in model/model.c) */
    if (!write_with_rope_scaling(src, dst, "linear", 2.0f)) return;
    CHECK_MSG(moeinf_model_load(dst, &mp, &model, &err) == MOEINF_OK, "%s", err.msg);
    moeinf_model_free(model);
    if (!write_with_rope_scaling(src, dst, "yarn", 4.0f)) return;
    CHECK_MSG(moeinf_model_load(dst, &mp, &model, &err) == MOEINF_OK, "%s", err.msg);
    moeinf_model_free(model);
}

static void test_valid_file_loads(void) {
    size_t size;
    char *b = model_bytes(&size);
    if (!b) return;
    free(b);
    char path[1024];
    test_shared_path("testdata/models/tiny-mixtral-F32.gguf", path, sizeof path);
    struct moeinf_model *model = NULL;
    struct moeinf_error err = {0};
    struct moeinf_model_params mp = moeinf_model_params_default();
    CHECK_MSG(moeinf_model_load(path, &mp, &model, &err) == MOEINF_OK, "%s", err.msg);
    if (!model) return;
    CHECK_EQ_INT(moeinf_model_n_vocab(model), 32000);
    CHECK_EQ_INT(moeinf_model_n_ctx_train(model), 2048);
    char desc[256];
    moeinf_model_desc(model, desc, sizeof desc);
    CHECK_STR_CONTAINS(desc, "8 experts (top 2)");
    /* decode bytes: hand-computed from the README's shapes (F32 weights, F16 embeddings):
     * per layer q 64x256, k 64x128, v 64x128, o 256x64, router 64x8, 2 experts x 3 x 64x256,
     * all F32; one F16 embedding row of 64; the tied F16 lm_head 64 x 32000 */
    uint64_t per_layer = 4ull * (64 * 256 + 64 * 128 * 2 + 256 * 64 + 64 * 8 + 2 * 3 * 64 * 256);
    CHECK_EQ_INT(moeinf_model_decode_bytes(model), 2 * per_layer + 2ull * 64 + 2ull * 64 * 32000);
    /* the context window: a prompt past -c is refused without touching the cache */
    struct moeinf_context_params cp = moeinf_context_params_default();
    cp.n_ctx = 4;
    struct moeinf_context *ctx = NULL;
    CHECK(moeinf_context_init(model, &cp, &ctx, &err) == MOEINF_OK);
    int32_t ids[5] = {1, 2, 3, 4, 5};
    CHECK_EQ_INT(moeinf_decode(ctx, ids, 5, NULL, false, &err), MOEINF_ERR_CONTEXT);
    CHECK_EQ_INT(moeinf_context_n_past(ctx), 0);
    CHECK_EQ_INT(moeinf_decode(ctx, ids, 4, NULL, false, &err), MOEINF_OK);
    CHECK_EQ_INT(moeinf_decode(ctx, ids, 1, NULL, false, &err), MOEINF_ERR_CONTEXT);
    moeinf_context_reset(ctx);
    ids[0] = 32000;
    CHECK_EQ_INT(moeinf_decode(ctx, ids, 1, NULL, false, &err), MOEINF_ERR_ARG);
    CHECK_STR_CONTAINS(err.msg, "32000");
    moeinf_context_free(ctx);
    moeinf_model_free(model);
}

/* ---- a hostile geometry, written by hand ------------------------------------------------ */

/* An F32 tensor at data offset 0: every tensor of the file shares the same bytes. */
static void tensor_f32(struct gguf_bytes *b, const char *name, int64_t ne0, int64_t ne1) {
    const int64_t ne[2] = {ne0, ne1};
    gguf_bytes_tensor(b, name, ne1 > 1 ? 2 : 1, ne, MOEINF_TYPE_F32, 0);
}

/*
 * 1024 layers whose K/V rows are 2^28 values (4096 KV heads of dimension 65536; the weights
 * are one sparse GiB that every tensor shares): with -c 2^24 and an F32 cache, the KV cache
 * would be 1024 * 2^24 * 2^28 * 4 = 2^64 bytes, which wrapped to an allocation of 1 byte that
 * the first decode wrote past. The context must be refused instead.
 */
static void test_kv_cache_size_overflow(void) {
    const int n_layer = 1024;
    const uint64_t n_kv = 1ull << 28;
    char path[512];
    test_tmp_path("m_kv_overflow.gguf", path, sizeof path);
    struct gguf_bytes b = {0};
    gguf_bytes_header(&b, 3, 2 + 9 * (uint64_t)n_layer, 14); /* tensors, metadata entries */
    gguf_bytes_kv_head(&b, "general.architecture", MOEINF_GGUF_TYPE_STRING);
    gguf_bytes_str(&b, "llama");
    gguf_bytes_kv_u32(&b, "llama.embedding_length", 1);
    gguf_bytes_kv_u32(&b, "llama.block_count", n_layer);
    gguf_bytes_kv_u32(&b, "llama.attention.head_count", 4096);
    gguf_bytes_kv_u32(&b, "llama.attention.head_count_kv", 4096);
    gguf_bytes_kv_u32(&b, "llama.attention.key_length", 65536);
    gguf_bytes_kv_u32(&b, "llama.feed_forward_length", 1);
    gguf_bytes_kv_u32(&b, "llama.context_length", 1 << 24);
    gguf_bytes_kv_head(&b, "llama.attention.layer_norm_rms_epsilon", MOEINF_GGUF_TYPE_FLOAT32);
    gguf_bytes_f32(&b, 1e-5f);
    gguf_bytes_kv_head(&b, "tokenizer.ggml.model", MOEINF_GGUF_TYPE_STRING);
    gguf_bytes_str(&b, "llama");
    gguf_bytes_kv_head(&b, "tokenizer.ggml.tokens", MOEINF_GGUF_TYPE_ARRAY);
    gguf_bytes_u32(&b, MOEINF_GGUF_TYPE_STRING);
    gguf_bytes_u64(&b, 1);
    gguf_bytes_str(&b, "a");
    gguf_bytes_kv_head(&b, "tokenizer.ggml.add_bos_token", MOEINF_GGUF_TYPE_BOOL);
    gguf_bytes_u8(&b, 0);
    gguf_bytes_kv_u32(&b, "general.alignment", 32);
    gguf_bytes_kv_u32(&b, "general.file_type", 0);
    tensor_f32(&b, "token_embd.weight", 1, 1);
    tensor_f32(&b, "output_norm.weight", 1, 1);
    for (int il = 0; il < n_layer; il++) {
        static const char *const names[9] = {"attn_norm", "attn_q",      "attn_k",
                                             "attn_v",    "attn_output", "ffn_norm",
                                             "ffn_gate",  "ffn_up",      "ffn_down"};
        for (int t = 0; t < 9; t++) {
            char name[64];
            snprintf(name, sizeof name, "blk.%d.%s.weight", il, names[t]);
            int64_t ne0 = t == 4 ? (int64_t)n_kv : 1;
            int64_t ne1 = (t >= 1 && t <= 3) ? (int64_t)n_kv : 1;
            tensor_f32(&b, name, ne0, ne1);
        }
    }
    gguf_bytes_pad(&b, 32);
    const long data = (long)b.n;
    bool written = gguf_bytes_write(&b, path);
    gguf_bytes_reset(&b);
    CHECK(written);
    if (!written) return;
    /* The data section: one GiB of zeros, sparse (nothing is written or read). */
    CHECK(truncate(path, data + (long)(n_kv * 4)) == 0);

    struct moeinf_model *model = NULL;
    struct moeinf_error err = {0};
    struct moeinf_model_params mp = moeinf_model_params_default();
    CHECK_MSG(moeinf_model_load(path, &mp, &model, &err) == MOEINF_OK, "%s", err.msg);
    if (model) {
        struct moeinf_context_params cp = moeinf_context_params_default();
        cp.n_ctx = 1 << 24;
        cp.n_batch = 1;
        cp.n_threads = 1;
        cp.kv_type = MOEINF_KV_F32;
        struct moeinf_context *ctx = NULL;
        enum moeinf_status st = moeinf_context_init(model, &cp, &ctx, &err);
        CHECK_EQ_INT(st, MOEINF_ERR_NOMEM);
        CHECK(ctx == NULL);
        CHECK_STR_CONTAINS(err.msg, "KV cache");
        if (ctx) {
            int32_t id = 0;
            moeinf_decode(ctx, &id, 1, NULL, false, &err);
        }
        moeinf_context_free(ctx);
    }
    moeinf_model_free(model);
    remove(path);
}

/* Reading the file into memory (--no-mmap) gives the same logits, bit for bit, as mapping it
 * (--mmap); the default (AUTO) reads a file this small, and says so. */
static void test_no_mmap_same_logits(void) {
    char path[1024];
    if (!test_shared_path("testdata/models/tiny-mixtral-Q4_0.gguf", path, sizeof path)) return;
    const int32_t ids[4] = {1, 15043, 3186, 29991};
    float *logits[2] = {NULL, NULL};
    for (int mode = 0; mode < 2; mode++) {
        struct moeinf_model_params mp = moeinf_model_params_default();
        mp.load_mode = mode == 1 ? MOEINF_LOAD_READ : MOEINF_LOAD_MAP;
        struct moeinf_model *model = NULL;
        struct moeinf_context *ctx = NULL;
        struct moeinf_error err = {0};
        struct moeinf_context_params cp = moeinf_context_params_default();
        cp.n_ctx = 8;
        CHECK_MSG(moeinf_model_load(path, &mp, &model, &err) == MOEINF_OK, "%s", err.msg);
        CHECK(model && moeinf_context_init(model, &cp, &ctx, &err) == MOEINF_OK);
        CHECK(model && moeinf_model_load_mode(model) == mp.load_mode);
        logits[mode] = malloc(sizeof(float) * 4 * 32000);
        if (ctx && logits[mode]) {
            CHECK(moeinf_decode(ctx, ids, 4, logits[mode], true, &err) == MOEINF_OK);
        }
        moeinf_context_free(ctx);
        moeinf_model_free(model);
    }
    CHECK(logits[0] && logits[1] &&
          test_same_bytes(logits[0], logits[1], sizeof(float) * 4 * 32000));
    /* AUTO: a file of a few MiB fits any machine that runs the tests; vocab_only maps */
    struct moeinf_model_params mp = moeinf_model_params_default();
    CHECK(mp.load_mode == MOEINF_LOAD_AUTO);
    struct moeinf_error err = {0};
    struct moeinf_model *model = NULL;
    CHECK_MSG(moeinf_model_load(path, &mp, &model, &err) == MOEINF_OK, "%s", err.msg);
    CHECK(model && moeinf_model_load_mode(model) == MOEINF_LOAD_READ);
    moeinf_model_free(model);
    model = NULL;
    mp.vocab_only = true;
    CHECK_MSG(moeinf_model_load(path, &mp, &model, &err) == MOEINF_OK, "%s", err.msg);
    CHECK(model && moeinf_model_load_mode(model) == MOEINF_LOAD_MAP);
    moeinf_model_free(model);
    free(logits[0]);
    free(logits[1]);
}

/* The tiny F32 model with the first float of tensor `name` set to v, written to a scratch
 * file; returns the path or NULL. */
static const char *with_weight(const char *name, float v, char *path, size_t size) {
    char src[1024];
    if (!test_shared_path("testdata/models/tiny-mixtral-F32.gguf", src, sizeof src)) return NULL;
    struct moeinf_gguf *g = NULL;
    struct moeinf_error err = {0};
    CHECK_MSG(moeinf_gguf_open(src, &g, &err) == MOEINF_OK, "%s", err.msg);
    if (!g) return NULL;
    const struct moeinf_gguf_tensor *t = moeinf_gguf_find_tensor(g, name);
    CHECK_MSG(t && t->type == 0, "%s", name); /* F32 */
    uint64_t at = t ? t->offset : 0;
    moeinf_gguf_free(g);
    size_t n = 0;
    char *b = golden_read_file(src, &n);
    if (!b || !at) {
        free(b);
        return NULL;
    }
    memcpy(b + at, &v, sizeof v);
    test_tmp_path("nonfinite.gguf", path, size);
    FILE *f = fopen(path, "wb");
    CHECK(f && fwrite(b, 1, n, f) == n);
    if (f) fclose(f);
    free(b);
    return path;
}

/* Decodes "Hello world" on the patched model: expects MOEINF_ERR_FORMAT with `phrase`, and
 * nothing appended to the context. */
static void expect_nonfinite(const char *name, float v, bool want_logits, const char *phrase) {
    char path[512];
    if (!with_weight(name, v, path, sizeof path)) return;
    struct moeinf_model_params mp = moeinf_model_params_default();
    struct moeinf_context_params cp = moeinf_context_params_default();
    cp.n_ctx = 16;
    struct moeinf_model *model = NULL;
    struct moeinf_context *ctx = NULL;
    struct moeinf_error err = {0};
    CHECK_MSG(moeinf_model_load(path, &mp, &model, &err) == MOEINF_OK, "%s", err.msg);
    CHECK(model && moeinf_context_init(model, &cp, &ctx, &err) == MOEINF_OK);
    float *logits = malloc((size_t)3 * 32000 * sizeof(float));
    if (ctx && logits) {
        const int32_t ids[3] = {1, 15043, 3186};
        enum moeinf_status st =
            moeinf_decode(ctx, ids, 3, want_logits ? logits : NULL, false, &err);
        CHECK_MSG(st == MOEINF_ERR_FORMAT, "%s = %g: status %d", name, (double)v, st);
        CHECK_STR_CONTAINS(err.msg, phrase);
        CHECK_EQ_INT(moeinf_context_n_past(ctx), 0);
    }
    free(logits);
    moeinf_context_free(ctx);
    moeinf_model_free(model);
    remove(path);
}

/* Weights that hold NaN or infinity: decode fails naming the first layer whose output is not
 * finite (or the lm_head), where it used to hand NaN logits to the sampler. */
static void test_nonfinite_weights(void) {
    expect_nonfinite("blk.1.attn_norm.weight", NAN, true, "from layer 1 on (layers 0-1)");
    expect_nonfinite("blk.0.ffn_norm.weight", INFINITY, true, "from layer 0 on");
    expect_nonfinite("blk.1.attn_v.weight", NAN, false, "from layer 1 on"); /* no logits */
    expect_nonfinite("output_norm.weight", -INFINITY, true,
                     "NaN or infinity in the logits, though every layer's output is finite");
}

int main(void) {
    RUN(test_missing_keys);
    RUN(test_unsupported_arch);
    RUN(test_arch_table);
    RUN(test_deepseek2_hparams);
    RUN(test_deepseek2_older_layout);
    RUN(test_glm4moe_hparams);
    RUN(test_qwen2moe_errors);
    RUN(test_routing_keys);
    RUN(test_bad_tensors);
    RUN(test_impossible_counts);
    RUN(test_rope_scaling);
    RUN(test_refused_by_name);
    RUN(test_valid_file_loads);
    RUN(test_no_mmap_same_logits);
    RUN(test_kv_cache_size_overflow);
    RUN(test_nonfinite_weights);
    return test_report();
}
