/*
 * test_recurrent.c - the recurrent state of Gated DeltaNet models (qwen35moe, qwen3next) across
 * evals: a context that goes back (moeinf_context_truncate, moeinf_context_reset) to an
 * earlier point computes, from there on, exactly what a fresh context computes for the same
 * tokens. The expectation is a fresh context's logits of the whole prompt in one call; the
 * forward pass evaluates each token's row with the same arithmetic whatever the micro-batch,
 * so the rows must be equal bit for bit. A KV-only model (qwen3moe) still keeps exactly the
 * tokens asked for. And attention.recurrent_layers decides which layers are recurrent.
 */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gguf/gguf.h"
#include "gguf/gguf_writer.h"
#include "moeinf.h"
#include "decode_check.h"
#include "test.h"

#define N_IDS 16

static const int32_t ids[N_IDS] = {1,   300, 301, 302, 303, 304, 310, 320,
                                   330, 340, 350, 360, 370, 380, 390, 400};

static struct moeinf_model *load(const char *rel) {
    char path[1024];
    test_src_path(rel, path, sizeof path);
    struct moeinf_model *model = NULL;
    struct moeinf_error err = {0};
    struct moeinf_model_params mp = moeinf_model_params_default();
    CHECK_MSG(moeinf_model_load(path, &mp, &model, &err) == MOEINF_OK, "%s: %s", rel, err.msg);
    return model;
}

static struct moeinf_context *context(struct moeinf_model *model, int n_batch) {
    struct moeinf_context_params cp = moeinf_context_params_default();
    cp.n_ctx = 64;
    cp.n_batch = n_batch;
    cp.n_threads = 2;
    cp.kv_type = MOEINF_KV_F32;
    struct moeinf_context *ctx = NULL;
    struct moeinf_error err = {0};
    CHECK_MSG(moeinf_context_init(model, &cp, &ctx, &err) == MOEINF_OK, "%s", err.msg);
    return ctx;
}

static void rewinds(const char *rel, bool recurrent) {
    struct moeinf_model *model = load(rel);
    if (!model) return;
    const int n_vocab = moeinf_model_n_vocab(model);
    float *ref = malloc((size_t)N_IDS * (size_t)n_vocab * sizeof(float));
    CHECK(ref != NULL);
    if (!ref) {
        moeinf_model_free(model);
        return;
    }
    struct moeinf_error err = {0};
    struct moeinf_context *fresh = context(model, 64);
    CHECK(moeinf_decode(fresh, ids, N_IDS, ref, true, &err) == MOEINF_OK);
    moeinf_context_free(fresh);

    /* micro-batches of 4: state checkpoints after 4, 8 and 10 tokens, then two single tokens,
     * which take none */
    struct moeinf_context *ctx = context(model, 4);
    decode_check(ctx, ids, 0, 10, ref, n_vocab, "prefill");
    decode_check(ctx, ids, 10, 11, ref, n_vocab, "decode");
    decode_check(ctx, ids, 11, 12, ref, n_vocab, "decode");
    CHECK(moeinf_context_truncate(ctx, 9, &err) == MOEINF_OK);
    /* the recurrent state goes back to its checkpoint at 8; the KV cache keeps 9 */
    CHECK_EQ_INT(moeinf_context_n_past(ctx), recurrent ? 8 : 9);
    decode_check(ctx, ids, moeinf_context_n_past(ctx), N_IDS, ref, n_vocab, "after truncate(9)");
    /* that decode took checkpoints at 12 and 16 (and forgot 10); keeping 11 restores 8 */
    CHECK(moeinf_context_truncate(ctx, 11, &err) == MOEINF_OK);
    CHECK_EQ_INT(moeinf_context_n_past(ctx), recurrent ? 8 : 11);
    decode_check(ctx, ids, moeinf_context_n_past(ctx), N_IDS, ref, n_vocab, "after truncate(11)");
    /* keeping 3: no checkpoint at or before it, so everything is evaluated again */
    CHECK(moeinf_context_truncate(ctx, 3, &err) == MOEINF_OK);
    CHECK_EQ_INT(moeinf_context_n_past(ctx), recurrent ? 0 : 3);
    decode_check(ctx, ids, moeinf_context_n_past(ctx), N_IDS, ref, n_vocab, "after truncate(3)");
    /* micro-batches of 2 take 6 checkpoints (2 .. 12); only the newest 4 stay (6 .. 12), so
     * keeping 5 finds none and keeping 7 goes back to 6 */
    moeinf_context_free(ctx);
    ctx = context(model, 2);
    decode_check(ctx, ids, 0, 12, ref, n_vocab, "prefill by 2");
    CHECK(moeinf_context_truncate(ctx, 7, &err) == MOEINF_OK);
    CHECK_EQ_INT(moeinf_context_n_past(ctx), recurrent ? 6 : 7);
    decode_check(ctx, ids, moeinf_context_n_past(ctx), 12, ref, n_vocab, "after truncate(7)");
    CHECK(moeinf_context_truncate(ctx, 5, &err) == MOEINF_OK);
    CHECK_EQ_INT(moeinf_context_n_past(ctx), recurrent ? 0 : 5);
    decode_check(ctx, ids, moeinf_context_n_past(ctx), N_IDS, ref, n_vocab, "after truncate(5)");
    /* keeping all: nothing to restore */
    CHECK(moeinf_context_truncate(ctx, N_IDS, &err) == MOEINF_OK);
    CHECK_EQ_INT(moeinf_context_n_past(ctx), N_IDS);
    moeinf_context_reset(ctx);
    CHECK_EQ_INT(moeinf_context_n_past(ctx), 0);
    decode_check(ctx, ids, 0, N_IDS, ref, n_vocab, "after reset");
    moeinf_context_free(ctx);
    free(ref);
    moeinf_model_free(model);
}

static void test_qwen35moe(void) {
    rewinds("tests/data/models/tiny-qwen35moe-F32.gguf", true);
}

static void test_qwen3next(void) {
    rewinds("tests/data/models/tiny-qwen3next-F32.gguf", true);
}

static void test_kv_only(void) {
    rewinds("tests/data/models/tiny-qwen3moe-F32.gguf", false);
}

/* The tiny qwen35moe file with `qwen35moe.attention.recurrent_layers` added (n bools). */
static bool with_recurrent_layers(const char *dst, const uint8_t *layers, uint64_t n) {
    char src[1024];
    test_src_path("tests/data/models/tiny-qwen35moe-F32.gguf", src, sizeof src);
    struct moeinf_error err = {0};
    struct moeinf_gguf *g = NULL;
    struct moeinf_gguf_writer *w = NULL;
    bool ok = moeinf_gguf_open(src, &g, &err) == MOEINF_OK &&
              moeinf_gguf_writer_open(dst, (uint32_t)g->alignment, &w, &err) == MOEINF_OK;
    for (uint64_t i = 0; ok && i < g->n_kv; i++)
        ok = !moeinf_gguf_writer_add_kv(w, &g->kv[i], &err);
    ok = ok && !moeinf_gguf_writer_add_arr(w, "qwen35moe.attention.recurrent_layers",
                                           MOEINF_GGUF_TYPE_BOOL, layers, n, &err);
    for (uint64_t i = 0; ok && i < g->n_tensors; i++) {
        const struct moeinf_gguf_tensor *t = &g->tensors[i];
        ok = !moeinf_gguf_writer_add_tensor(w, t->name, t->type, t->n_dims, t->ne, &err);
    }
    for (uint64_t i = 0; ok && i < g->n_tensors; i++)
        ok = !moeinf_gguf_writer_write(w, g->tensors[i].data, (size_t)g->tensors[i].n_bytes, &err);
    ok = ok && !moeinf_gguf_writer_finish(w, &err);
    CHECK_MSG(ok, "%s", err.msg);
    moeinf_gguf_writer_free(w);
    moeinf_gguf_free(g);
    return ok;
}

static enum moeinf_status load_path(const char *path, struct moeinf_model **model,
                                    struct moeinf_error *err) {
    struct moeinf_model_params mp = moeinf_model_params_default();
    return moeinf_model_load(path, &mp, model, err);
}

/* attention.recurrent_layers (what llama.cpp's converter writes from layer_types) decides the
 * layers' kinds over full_attention_interval: the same pattern computes the same logits, and
 * another pattern asks for tensors the file lacks; a list of the wrong length is refused. */
static void test_recurrent_layers_key(void) {
    char path[512];
    char name[64];
    snprintf(name, sizeof name, "recurrent-layers-%d.gguf", (int)getpid());
    test_tmp_path(name, path, sizeof path);
    struct moeinf_error err = {0};
    struct moeinf_model *model = NULL;
    struct moeinf_model *base = load("tests/data/models/tiny-qwen35moe-F32.gguf");
    if (!base) return;
    const int n_vocab = moeinf_model_n_vocab(base);
    float *ref = malloc((size_t)N_IDS * (size_t)n_vocab * sizeof(float));
    float *got = malloc((size_t)N_IDS * (size_t)n_vocab * sizeof(float));
    CHECK(ref && got);
    if (!ref || !got) {
        free(ref);
        free(got);
        moeinf_model_free(base);
        return;
    }
    struct moeinf_context *ctx = context(base, 64);
    CHECK(moeinf_decode(ctx, ids, N_IDS, ref, true, &err) == MOEINF_OK);
    moeinf_context_free(ctx);

    static const uint8_t same[4] = {1, 1, 1, 0};
    if (with_recurrent_layers(path, same, 4)) {
        CHECK_MSG(load_path(path, &model, &err) == MOEINF_OK, "%s", err.msg);
        if (model) {
            ctx = context(model, 64);
            CHECK(moeinf_decode(ctx, ids, N_IDS, got, true, &err) == MOEINF_OK);
            CHECK(memcmp(got, ref, (size_t)N_IDS * (size_t)n_vocab * sizeof(float)) == 0);
            moeinf_context_free(ctx);
            moeinf_model_free(model);
            model = NULL;
        }
    }
    static const uint8_t other[4] = {1, 0, 1, 0};
    if (with_recurrent_layers(path, other, 4)) {
        CHECK(load_path(path, &model, &err) == MOEINF_ERR_FORMAT);
        CHECK_STR_CONTAINS(err.msg, "missing tensor 'blk.1.attn_q.weight'");
        moeinf_model_free(model);
        model = NULL;
    }
    if (with_recurrent_layers(path, same, 3)) {
        CHECK(load_path(path, &model, &err) == MOEINF_ERR_FORMAT);
        CHECK_STR_CONTAINS(err.msg, "has 3 values for 4 blocks");
        moeinf_model_free(model);
    }
    unlink(path);
    free(ref);
    free(got);
    moeinf_model_free(base);
}

int main(void) {
    RUN(test_qwen35moe);
    RUN(test_qwen3next);
    RUN(test_kv_only);
    RUN(test_recurrent_layers_key);
    return test_report();
}
