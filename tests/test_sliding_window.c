/*
 * test_sliding_window.c - gpt-oss's sliding-window layers across evals. A sliding layer keeps
 * a ring of its last n_swa - 1 + n_batch positions (model/fwd_state.h), so a context that
 * goes back (moeinf_context_truncate, moeinf_context_reset) by at most n_batch tokens stays in
 * place, and one that goes further restores a checkpoint of the windows (model/recurrent.c)
 * or starts again. Either way it must compute, from there on, exactly what a fresh context
 * computes for the same tokens: the expectation is a fresh context's logits of the whole
 * prompt in one call, equal bit for bit (each token's row has the same arithmetic whatever
 * the micro-batch). The prompt is several windows long, so the ring wraps many times. And the
 * ring's size does not grow with the context: only the full-attention layers' cache does.
 */
#include <stdlib.h>
#include <string.h>

#include "engine/engine.h"
#include "moeinf.h"
#include "decode_check.h"
#include "test.h"

#define N_IDS 48
#define MODEL "tests/data/models/tiny-gptoss-MXFP4.gguf"

static int32_t ids[N_IDS];

static struct moeinf_model *load(bool offload) {
    char path[1024];
    test_src_path(MODEL, path, sizeof path);
    struct moeinf_model *model = NULL;
    struct moeinf_error err = {0};
    struct moeinf_model_params mp = moeinf_model_params_default();
    mp.offload_experts = offload;
    CHECK_MSG(moeinf_model_load(path, &mp, &model, &err) == MOEINF_OK, "%s: %s", MODEL, err.msg);
    for (int i = 0; i < N_IDS; i++)
        ids[i] = 3 + (i * 37) % 200;
    return model;
}

/* cache_percent 0: resident experts */
static struct moeinf_context *context(struct moeinf_model *model, int n_ctx, int n_batch,
                                      double cache_percent) {
    struct moeinf_context_params cp = moeinf_context_params_default();
    cp.n_ctx = n_ctx;
    cp.n_batch = n_batch;
    cp.n_threads = 2;
    cp.kv_type = MOEINF_KV_F32;
    if (cache_percent > 0) {
        cp.expert_cache.kind = MOEINF_EXPERT_CACHE_PERCENT;
        cp.expert_cache.percent = cache_percent;
    }
    struct moeinf_error err = {0};
    struct moeinf_context *ctx = NULL;
    CHECK_MSG(moeinf_context_init(model, &cp, &ctx, &err) == MOEINF_OK, "%s", err.msg);
    return ctx;
}

/* Goes back to n_keep, checks where the context landed, and decodes to `to` again. */
static void back_to(struct moeinf_context *ctx, int n_keep, int expect_past, int to,
                    const float *ref, int n_vocab, const char *what) {
    struct moeinf_error err = {0};
    CHECK_MSG(moeinf_context_truncate(ctx, n_keep, &err) == MOEINF_OK, "%s", err.msg);
    CHECK_MSG(moeinf_context_n_past(ctx) == expect_past, "%s: n_past %d, expected %d", what,
              moeinf_context_n_past(ctx), expect_past);
    decode_check(ctx, ids, moeinf_context_n_past(ctx), to, ref, n_vocab, what);
}

static void rewinds(double cache) {
    struct moeinf_model *model = load(cache > 0);
    if (!model) return;
    const int n_vocab = moeinf_model_n_vocab(model);
    float *ref = malloc((size_t)N_IDS * (size_t)n_vocab * sizeof(float));
    CHECK(ref != NULL);
    struct moeinf_context *ctx = context(model, 64, 64, cache);
    struct moeinf_error err = {0};
    CHECK(ref && ctx && moeinf_decode(ctx, ids, N_IDS, ref, true, &err) == MOEINF_OK);
    moeinf_context_free(ctx);
    if (!ref || !ctx) {
        free(ref);
        moeinf_model_free(model);
        return;
    }
    /* micro-batches of 4: checkpoints after 4, 8, .. 28, 30, the newest 4 kept (20, 24, 28,
     * 30); then two single tokens, which take none */
    ctx = context(model, 64, 4, cache);
    if (!ctx) return;
    decode_check(ctx, ids, 0, 30, ref, n_vocab, "prefill");
    decode_check(ctx, ids, 30, 31, ref, n_vocab, "decode");
    decode_check(ctx, ids, 31, 32, ref, n_vocab, "decode");
    /* back 3 (at most n_batch): in place; the decode to 40 checkpoints 33, 37, 40 (28 stays) */
    back_to(ctx, 29, 29, 40, ref, n_vocab, "back 3 to 29");
    /* back 5 (more than n_batch): the checkpoint at 33; the decode to 44 checkpoints 37, 41
     * and 44, which evicts 28 */
    back_to(ctx, 35, 33, 44, ref, n_vocab, "back 5 to 35");
    /* back 8 to 36: the checkpoint at 33 again */
    back_to(ctx, 36, 33, N_IDS, ref, n_vocab, "back 8 to 36");
    /* keeping 3: no checkpoint at or before it, everything again */
    back_to(ctx, 3, 0, N_IDS, ref, n_vocab, "back to 3");
    moeinf_context_reset(ctx);
    CHECK_EQ_INT(moeinf_context_n_past(ctx), 0);
    decode_check(ctx, ids, 0, N_IDS, ref, n_vocab, "after reset");
    moeinf_context_free(ctx);
    /* one token at a time: the ring is n_swa rows, going back 1 is in place */
    ctx = context(model, 64, 1, cache);
    for (int i = 0; i < 20; i++)
        decode_check(ctx, ids, i, i + 1, ref, n_vocab, "token by token");
    /* decoding 19..24 in one call checkpoints after each micro-batch (20 .. 24; 21 .. 24 kept) */
    back_to(ctx, 19, 19, 24, ref, n_vocab, "back 1, one by one");
    back_to(ctx, 21, 21, 24, ref, n_vocab, "back 3, one by one: the checkpoint at 21");
    back_to(ctx, 20, 0, 24, ref, n_vocab, "back 4, one by one: no checkpoint left");
    moeinf_context_free(ctx);
    free(ref);
    moeinf_model_free(model);
}

static void test_rewinds_resident(void) {
    rewinds(0);
}

static void test_rewinds_offloaded(void) {
    rewinds(50);
}

/* The context's memory (KV cache and scratch, as the expert cache reports it) grows with
 * n_ctx by the full-attention layers' K and V rows and the attention scratch only: the sliding
 * layers' rings do not grow. */
static void test_ring_size(void) {
    struct moeinf_model *model = load(true);
    if (!model) return;
    struct moeinf_error err = {0};
    struct moeinf_expert_cache_info small = {0};
    struct moeinf_expert_cache_info large = {0};
    struct moeinf_context *a = context(model, 256, 8, 50);
    struct moeinf_context *b = context(model, 512, 8, 50);
    const bool ok = a && b && moeinf_context_expert_cache(a, &small, &err) == MOEINF_OK &&
                    moeinf_context_expert_cache(b, &large, &err) == MOEINF_OK;
    CHECK_MSG(ok, "%s", err.msg);
    if (ok) {
        const struct moeinf_hparams *hp = &model->llm->hp;
        int n_full = 0;
        for (int il = 0; il < hp->n_layer; il++)
            n_full += !model->llm->layers[il].swa;
        CHECK(n_full > 0 && n_full < hp->n_layer);
        const uint64_t grow = 256;
        const uint64_t kv = (uint64_t)n_full * grow * (uint64_t)hp->n_head_kv *
                            (uint64_t)hp->head_dim * sizeof(float) * 2;
        const uint64_t scratch =
            2 /* threads */ * grow * (uint64_t)(hp->n_head / hp->n_head_kv) * sizeof(float);
        CHECK_MSG(large.context_bytes - small.context_bytes == kv + scratch,
                  "context grew by %llu bytes from 256 to 512 tokens, expected %llu",
                  (unsigned long long)(large.context_bytes - small.context_bytes),
                  (unsigned long long)(kv + scratch));
    }
    moeinf_context_free(a);
    moeinf_context_free(b);
    moeinf_model_free(model);
}

int main(void) {
    RUN(test_rewinds_resident);
    RUN(test_rewinds_offloaded);
    RUN(test_ring_size);
    return test_report();
}
