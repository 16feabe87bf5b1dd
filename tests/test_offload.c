// ctest-labels: threads
/*
 * test_offload.c - routed experts read from the file through the expert cache give the same
 * logits, to the bit, as the fully resident run: for every online policy, cache sizes from
 * the minimum (top_k slots, which forces a prefill micro-batch into many waves) up to every
 * expert, micro-batches of 512 and 3 tokens, 1 to 3 threads, two requests in one context
 * (the cache outlives moeinf_context_reset); Mixtral-style models, qwen2moe (whose
 * shared expert stays resident), the hybrid qwen35moe and qwen3next (whose Gated DeltaNet
 * layers keep a recurrent state) and gpt-oss (sinks, biases, sliding-window rings). Also: the bytes read are exactly the misses'
 * experts (plus their 4 KiB windows under O_DIRECT), computed here from the GGUF tensor
 * table; the simulator replaying the engine's recorded routing with --batch at the same
 * capacity and policy counts exactly the engine's hits and misses; bad sizes and a file
 * truncated under a running context are clear errors.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "engine/engine.h"
#include "experts/policy.h"
#include "gguf/gguf.h"
#include "moeinf.h"
#include "moeinf_sim.h"
#include "quant/quant.h"
#include "test.h"

#define N_GEN_A 6
#define N_GEN_B 4

static const int32_t prompt_a[20] = {1,   822, 788, 29898, 29874, 29892, 289,  1125,  13,   1678,
                                     736, 263, 718, 289,   13,    450,   4996, 17354, 1701, 29916};
static const int32_t prompt_b[12] = {1,   450,   4996, 17354, 1701,  29916,
                                     432, 17204, 975,  278,   17366, 11203};

struct cfg {
    const char *path;
    int threads;
    int n_batch;
    struct moeinf_expert_cache_size cache;
    const char *policy;
    const char *record; /* routing record path, or NULL */
    enum moeinf_expert_io io;
    int ahead; /* reading ahead: 0 none (exact, as the simulator without prefetch), 1 the
                  policy's prefetch and gate lookahead, 2 more of both (lookahead up to the
                  last layer) on one I/O thread */
};

struct out {
    float *logits; /* every logit the run produced, in order */
    size_t n_logits;
    int32_t tokens[N_GEN_A + N_GEN_B];
    struct moeinf_expert_stats stats;
    int slots;
    bool direct;
    bool ok;
    /* distinct (layer, expert) used, from the routing (resident runs) */
    uint8_t used[64][64];
};

static int argmax(const float *v, int n) {
    int best = 0;
    for (int i = 1; i < n; i++)
        if (v[i] > v[best]) best = i;
    return best;
}

static void note_routing(struct moeinf_context *ctx, int m, struct out *o) {
    const struct moeinf_hparams *hp = &ctx->model->llm->hp;
    /* by MoE layer, as the cache counts them (model.h, moeinf_n_moe_layers) */
    for (int ml = 0; ml < moeinf_n_moe_layers(hp) && ml < 64; ml++) {
        for (int j = 0; j < m; j++) {
            const int32_t *sel = moeinf_fwd_routing(ctx->fwd, hp->n_layer_dense_lead + ml, j);
            for (int r = 0; r < hp->n_expert_used; r++)
                o->used[ml][sel[r]] = 1;
        }
    }
}

/* One request: the prompt (all logits), then n_gen greedy steps (their logits). */
static bool request(struct moeinf_context *ctx, const int32_t *ids, int n, int n_gen, int n_vocab,
                    struct out *o, int32_t *tokens, bool note) {
    struct moeinf_error err = {0};
    float *dst = o->logits + o->n_logits;
    int32_t in[32];
    for (int i = 0; i < n; i++)
        in[i] = ids[i] % n_vocab;
    enum moeinf_status st = moeinf_decode(ctx, in, n, dst, true, &err);
    CHECK_MSG(st == MOEINF_OK, "%s", err.msg);
    if (st != MOEINF_OK) return false;
    if (note && ctx->params.n_batch >= n) note_routing(ctx, n, o);
    o->n_logits += (size_t)n * n_vocab;
    for (int g = 0; g < n_gen; g++) {
        int32_t id = argmax(o->logits + o->n_logits - n_vocab, n_vocab);
        tokens[g] = id;
        st = moeinf_decode(ctx, &id, 1, o->logits + o->n_logits, false, &err);
        CHECK_MSG(st == MOEINF_OK, "%s", err.msg);
        if (st != MOEINF_OK) return false;
        if (note) note_routing(ctx, 1, o);
        o->n_logits += (size_t)n_vocab;
    }
    return true;
}

/* The model of a config: loaded once per file and mode (offloaded or resident), shared by
 * the contexts of every config (a context owns its expert cache, the model only the
 * resident copies). */
static struct moeinf_model *loaded[2];
static char loaded_path[2][512];

static struct moeinf_model *model_for(const char *path, bool offload) {
    int k = offload;
    if (loaded[k] && !strcmp(loaded_path[k], path)) return loaded[k];
    moeinf_model_free(loaded[k]);
    loaded[k] = NULL;
    struct moeinf_error err = {0};
    struct moeinf_model_params mp = moeinf_model_params_default();
    mp.offload_experts = offload;
    enum moeinf_status st = moeinf_model_load(path, &mp, &loaded[k], &err);
    CHECK_MSG(st == MOEINF_OK, "%s", err.msg);
    snprintf(loaded_path[k], sizeof loaded_path[k], "%s", path);
    return loaded[k];
}

static void models_free(void) {
    for (int k = 0; k < 2; k++) {
        moeinf_model_free(loaded[k]);
        loaded[k] = NULL;
    }
}

static bool run(const struct cfg *c, struct out *o) {
    memset(o, 0, sizeof *o);
    struct moeinf_error err = {0};
    struct moeinf_context *ctx = NULL;
    struct moeinf_model *model = model_for(c->path, c->cache.kind != MOEINF_EXPERT_CACHE_NONE);
    if (!model) return false;
    struct moeinf_context_params cp = moeinf_context_params_default();
    cp.n_ctx = 64;
    cp.n_threads = c->threads;
    cp.n_batch = c->n_batch;
    cp.expert_cache = c->cache;
    cp.expert_policy = c->policy;
    cp.expert_io = c->io;
    cp.expert_prefetch = c->ahead == 0 ? 0 : c->ahead == 1 ? 2 : 6;
    /* as far ahead as asked, within the model's layers (a lookahead past the last layer is
     * refused) */
    const int n_layer = model->llm->hp.n_layer;
    cp.expert_lookahead = c->ahead < n_layer ? c->ahead : n_layer - 1;
    cp.expert_io_threads = c->ahead == 2 ? 1 : 2;
    enum moeinf_status st = moeinf_context_init(model, &cp, &ctx, &err);
    CHECK_MSG(st == MOEINF_OK, "%s", err.msg);
    int n_vocab = moeinf_model_n_vocab(model);
    o->logits = malloc((size_t)(20 + N_GEN_A + 12 + N_GEN_B) * n_vocab * sizeof(float));
    bool note = c->cache.kind == MOEINF_EXPERT_CACHE_NONE;
    if (st == MOEINF_OK && o->logits &&
        (!c->record || moeinf_context_record_open(ctx, c->record, "t", &err) == MOEINF_OK) &&
        request(ctx, prompt_a, 20, N_GEN_A, n_vocab, o, o->tokens, note)) {
        moeinf_context_reset(ctx);
        o->ok = request(ctx, prompt_b, 12, N_GEN_B, n_vocab, o, o->tokens + N_GEN_A, note);
    }
    if (c->record) CHECK(moeinf_context_record_close(ctx, &err) == MOEINF_OK);
    struct moeinf_expert_cache_info info;
    if (ctx && !note && moeinf_context_expert_cache(ctx, &info, &err) == MOEINF_OK) {
        o->slots = info.slots;
        o->direct = info.direct_io;
        CHECK(moeinf_context_expert_stats(ctx, -1, &o->stats, &err) == MOEINF_OK);
        /* per layer: the cache's (MoE) layers, whose counters add up to the total */
        const int n_moe = moeinf_n_moe_layers(&model->llm->hp);
        uint64_t accesses = 0;
        for (int ml = 0; ml < n_moe; ml++) {
            struct moeinf_expert_stats ls;
            CHECK(moeinf_context_expert_stats(ctx, ml, &ls, &err) == MOEINF_OK);
            accesses += ls.accesses;
        }
        CHECK_EQ_INT((long long)accesses, (long long)o->stats.accesses);
        struct moeinf_expert_stats past;
        CHECK(moeinf_context_expert_stats(ctx, n_moe, &past, &err) == MOEINF_ERR_ARG);
    }
    moeinf_context_free(ctx);
    return o->ok;
}

struct geometry {
    int n_layer, n_expert, top_k;
};

static struct geometry geometry_of(const char *path) {
    struct geometry g = {0, 0, 0};
    struct moeinf_model *model = model_for(path, false);
    if (!model) return g;
    g.n_layer = moeinf_n_moe_layers(&model->llm->hp); /* the cache counts MoE layers */
    g.n_expert = model->llm->hp.n_expert;
    g.top_k = model->llm->hp.n_expert_used;
    return g;
}

static struct moeinf_expert_cache_size slots(int n, const struct geometry *g) {
    struct moeinf_expert_cache_size s = {MOEINF_EXPERT_CACHE_PERCENT, 0, 0.0};
    s.percent = 100.0 * n / (g->n_layer * g->n_expert);
    return s;
}

static void compare(const char *what, const struct out *ref, const struct out *got) {
    CHECK_MSG(got->ok, "%s: run failed", what);
    if (!got->ok) return;
    CHECK_MSG(got->n_logits == ref->n_logits &&
                  memcmp(got->logits, ref->logits, ref->n_logits * sizeof(float)) == 0,
              "%s: logits differ from the resident run", what);
    CHECK_MSG(memcmp(got->tokens, ref->tokens, sizeof ref->tokens) == 0, "%s: greedy tokens differ",
              what);
}

/* Under ThreadSanitizer (ten times slower, and only the threaded parts need it) the grid is
 * the threaded part: one policy, two sizes, the small micro-batch, 2 and 3 threads. */
#if defined(__SANITIZE_THREAD__)
#    define TSAN_GRID 1
#elif defined(__has_feature)
#    if __has_feature(thread_sanitizer)
#        define TSAN_GRID 1
#    endif
#endif
#ifndef TSAN_GRID
#    define TSAN_GRID 0
#endif

/* Every online policy (or, where `policy` is given, that one) x sizes x micro-batches at 1
 * thread; 2 and 3 threads for reuse; the three reading-ahead modes spread over the grid. */
static void check_model_policy(const char *path, const char *only) {
    struct geometry g = geometry_of(path);
    CHECK(g.n_expert > 0);
    if (g.n_expert == 0) return;
    struct out ref;
    struct cfg rc = {
        path, 1, 512, {MOEINF_EXPERT_CACHE_NONE, 0, 0}, NULL, NULL, MOEINF_EXPERT_IO_DIRECT, 0};
    if (!run(&rc, &ref)) { /* a failed run may still hold its buffer */
        free(ref.logits);
        return;
    }
    const int total = g.n_layer * g.n_expert;
    const int sizes[] = {g.top_k, g.top_k + 1, total / 4, total / 2, total};
    const int batches[] = {512, 3};
    for (size_t pi = 0;; pi++) {
        const char *policy = moeinf_sim_policy_name(pi);
        if (!policy) break;
        if (!moeinf_policy_find(policy)) continue; /* offline: the engine refuses it */
        if (only && strcmp(policy, only) != 0) continue;
        for (size_t si = 0; si < sizeof sizes / sizeof sizes[0]; si++) {
            for (size_t bi = 0; bi < 2; bi++) {
                int max_threads = !strcmp(policy, "reuse") ? 3 : 1;
                if (TSAN_GRID && (strcmp(policy, "reuse") != 0 || bi == 0 || si % 2)) continue;
                for (int t = TSAN_GRID ? 2 : 1; t <= max_threads; t++) {
                    /* reads through the page cache keep this grid fast; the O_DIRECT path
                     * runs below and in the byte-count test */
                    int ahead = (int)((pi + si + bi + (size_t)t) % 3);
                    struct cfg c = {path,
                                    t,
                                    batches[bi],
                                    slots(sizes[si], &g),
                                    policy,
                                    NULL,
                                    MOEINF_EXPERT_IO_CACHED,
                                    ahead};
                    struct out got;
                    run(&c, &got);
                    char what[512];
                    snprintf(what, sizeof what, "%s: %s, %d slots, -b %d, -t %d, ahead %d", path,
                             policy, sizes[si], batches[bi], t, ahead);
                    CHECK_MSG(got.slots == sizes[si], "%s: %d slots", what, got.slots);
                    compare(what, &ref, &got);
                    /* hits + late prefetches + misses = accesses; every read queued is
                     * finished, in flight or cancelled (no read fails here); a full cache
                     * misses each used expert once */
                    CHECK_EQ_INT(
                        (long long)(got.stats.hits + got.stats.late_prefetches + got.stats.misses),
                        (long long)got.stats.accesses);
                    CHECK_EQ_INT((long long)(got.stats.misses + got.stats.prefetches),
                                 (long long)(got.stats.reads + got.stats.reads_in_flight +
                                             got.stats.dropped_prefetches));
                    CHECK(got.stats.dropped_prefetches <= got.stats.wasted_prefetches);
                    CHECK(got.stats.prefetch_hits + got.stats.late_prefetches +
                              got.stats.wasted_prefetches <=
                          got.stats.prefetches);
                    if (sizes[si] == total) {
                        int distinct = 0;
                        for (int il = 0; il < g.n_layer; il++)
                            for (int e = 0; e < g.n_expert; e++)
                                distinct += ref.used[il][e];
                        if (batches[bi] == 512 && ahead == 0) {
                            CHECK_EQ_INT((long long)got.stats.misses, distinct);
                        }
                        /* reading ahead can only turn demand reads into prefetched ones */
                        CHECK_MSG(got.stats.misses <= (uint64_t)distinct, "%s: %llu misses", what,
                                  (unsigned long long)got.stats.misses);
                    }
                    free(got.logits);
                }
            }
        }
    }
    for (int ahead = 0; ahead < 3; ahead++) {
        struct cfg d = {path, 2, 3, slots(g.top_k + 1, &g), NULL, NULL, MOEINF_EXPERT_IO_DIRECT,
                        ahead};
        struct out got;
        run(&d, &got);
        compare("O_DIRECT reads", &ref, &got);
        free(got.logits);
    }
    free(ref.logits);
}

static void check_model(const char *path) {
    check_model_policy(path, NULL);
}

static char gen_path[512];

/* A generated model with more experts than the tiny one: 3 layers x 16 experts, top-4, Q8_0,
 * widths that leave expert slices misaligned to 4 KiB. */
static const char *generated_model(void) {
    if (gen_path[0]) return gen_path;
    char name[64];
    snprintf(name, sizeof name, "offload-gen-%d.gguf", (int)getpid());
    test_tmp_path(name, gen_path, sizeof gen_path);
    struct moeinf_gen_params gp = moeinf_gen_params_default();
    gp.n_layer = 3;
    gp.n_expert = 16;
    gp.n_expert_used = 4;
    gp.n_embd = 96;
    gp.n_ff = 160;
    gp.n_head = 4;
    gp.n_head_kv = 2;
    gp.type = 8; /* Q8_0 */
    gp.seed = 11;
    gp.n_threads = 1;
    struct moeinf_error err = {0};
    enum moeinf_status st = moeinf_gen_model(&gp, gen_path, &err);
    CHECK_MSG(st == MOEINF_OK, "%s", err.msg);
    return gen_path;
}

static void shared_model(const char *rel) {
    char path[1024];
    if (!test_shared_path(rel, path, sizeof path)) return;
    check_model(path);
}

static void test_identical_tiny_f32(void) {
    shared_model("testdata/models/tiny-mixtral-F32.gguf");
}

static void test_identical_tiny_q8_0(void) {
    shared_model("testdata/models/tiny-mixtral-Q8_0.gguf");
}

static void test_identical_tiny_q4_0(void) {
    shared_model("testdata/models/tiny-mixtral-Q4_0.gguf");
}

/* qwen2moe: its shared expert stays resident (model/resident.c) while the routed experts go
 * through the cache. */
static void test_identical_tiny_qwen2moe(void) {
    char path[1024];
    if (!test_shared_path("testdata/models/tiny-qwen2moe-F32.gguf", path, sizeof path)) return;
    const struct moeinf_model *m = model_for(path, true);
    if (!m) return;
    /* every per-layer weight but the routed experts is a resident copy, not a view into the
     * file's mapping; the routed experts have no data at all */
    const uint8_t *lo = m->gguf->map.data;
    const uint8_t *hi = lo + m->gguf->map.size;
    for (int il = 0; il < m->llm->hp.n_layer; il++) {
        const struct moeinf_layer *lw = &m->llm->layers[il];
        const void *ps[] = {lw->gate_shexp.data,
                            lw->up_shexp.data,
                            lw->down_shexp.data,
                            lw->gate_inp_shexp,
                            lw->bq,
                            lw->bk,
                            lw->bv,
                            lw->wq.data,
                            lw->router.data};
        for (size_t i = 0; i < sizeof ps / sizeof ps[0]; i++) {
            const uint8_t *p = ps[i];
            CHECK_MSG(p && !(p >= lo && p < hi), "layer %d weight %zu is not resident", il, i);
        }
        CHECK(lw->gate_exps.data == NULL && lw->down_exps.data == NULL);
    }
    check_model(path);
}

/* qwen35moe and qwen3next (tests/data/models): the Gated DeltaNet layers' weights, the gated
 * attention's and the shared expert stay resident copies while the routed experts go through
 * the cache; the recurrent state is the context's, untouched by the cache. */
/* Every pointer of ps[0..n) (layer il's weights) is set and is a resident copy, outside m's
 * file mapping. */
static void check_resident(const struct moeinf_model *m, const char *rel, int il,
                           const void *const *ps, size_t n) {
    const uint8_t *lo = m->gguf->map.data;
    const uint8_t *hi = lo + m->gguf->map.size;
    for (size_t i = 0; i < n; i++) {
        const uint8_t *p = ps[i];
        CHECK_MSG(p && !(p >= lo && p < hi), "%s layer %d weight %zu is not resident", rel, il, i);
    }
    CHECK(m->llm->layers[il].gate_exps.data == NULL && m->llm->layers[il].down_exps.data == NULL);
}

static void hybrid_model(const char *rel) {
    char path[1024];
    test_src_path(rel, path, sizeof path);
    const struct moeinf_model *m = model_for(path, true);
    CHECK_MSG(m != NULL, "%s", rel);
    if (!m) return;
    int recurrent = 0;
    for (int il = 0; il < m->llm->hp.n_layer; il++) {
        const struct moeinf_layer *lw = &m->llm->layers[il];
        const void *deltanet[] = {lw->ssm_qkv.data, lw->ssm_z.data,      lw->ssm_conv1d.data,
                                  lw->ssm_a,        lw->ssm_dt_bias,     lw->ssm_norm,
                                  lw->ssm_out.data, lw->gate_shexp.data, lw->up_shexp.data,
                                  lw->down_shexp.data, lw->gate_inp_shexp, lw->router.data,
                                  lw->ffn_norm,     lw->attn_norm};
        const void *attn[] = {lw->wq.data,         lw->wk.data,        lw->wv.data,
                              lw->wo.data,         lw->q_norm,         lw->gate_shexp.data,
                              lw->up_shexp.data,   lw->down_shexp.data, lw->gate_inp_shexp,
                              lw->router.data,     lw->ffn_norm,       lw->attn_norm};
        const bool is_rec = lw->attn == MOEINF_ATTN_DELTANET;
        recurrent += is_rec;
        if (is_rec) {
            check_resident(m, rel, il, deltanet, sizeof deltanet / sizeof deltanet[0]);
        } else {
            check_resident(m, rel, il, attn, sizeof attn / sizeof attn[0]);
        }
    }
    CHECK_EQ_INT(recurrent, 3); /* 4 layers, full attention every 4th */
    check_model(path);
}

static void test_identical_tiny_qwen35moe(void) {
    hybrid_model("tests/data/models/tiny-qwen35moe-F32.gguf");
    hybrid_model("tests/data/models/tiny-qwen35moe-Q4_K_M.gguf");
}

static void test_identical_tiny_qwen3next(void) {
    hybrid_model("tests/data/models/tiny-qwen3next-F32.gguf");
    hybrid_model("tests/data/models/tiny-qwen3next-Q4_K_M.gguf");
}

/* gpt-oss (tests/data/models): the sinks, every bias (attention, router, experts) and the
 * router stay resident copies while the routed experts' matrices go through the cache; the
 * sliding layers' rings are the context's. */
static void gptoss_model(const char *rel) {
    char path[1024];
    test_src_path(rel, path, sizeof path);
    const struct moeinf_model *m = model_for(path, true);
    CHECK_MSG(m != NULL, "%s", rel);
    if (!m) return;
    int sliding = 0;
    for (int il = 0; il < m->llm->hp.n_layer; il++) {
        const struct moeinf_layer *lw = &m->llm->layers[il];
        const void *ps[] = {lw->attn_sinks, lw->bq,          lw->bk,         lw->bv,
                            lw->bo,         lw->router.data, lw->router_b,   lw->gate_exps_b,
                            lw->up_exps_b,  lw->down_exps_b, lw->ffn_norm,   lw->attn_norm,
                            lw->wq.data,    lw->wo.data};
        check_resident(m, rel, il, ps, sizeof ps / sizeof ps[0]);
        sliding += lw->swa;
    }
    CHECK_EQ_INT(sliding, 2); /* 4 layers, every other one slides */
    check_model(path);
}

/* MXFP4 experts only: the F32 file computes the same way, and its experts would take this
 * test's time under the sanitizers */
static void test_identical_tiny_gptoss(void) {
    gptoss_model("tests/data/models/tiny-gptoss-MXFP4.gguf");
}

/* deepseek2 and glm4moe: the leading dense layer's FFN, the latent attention's weights (the
 * low-rank query, attn_kv_a_mqa, attn_k_b/attn_v_b or attn_kv_b), the selection bias and the
 * ungated shared experts stay resident copies; only the routed experts go through the cache,
 * whose layers are the MoE layers. */
static void deepseek_glm_model(const char *rel, const char *only_policy) {
    char path[1024];
    test_src_path(rel, path, sizeof path);
    const struct moeinf_model *m = model_for(path, true);
    CHECK_MSG(m != NULL, "%s", rel);
    if (!m) return;
    const struct moeinf_hparams *hp = &m->llm->hp;
    CHECK_EQ_INT(hp->n_layer_dense_lead, 1);
    for (int il = 0; il < hp->n_layer; il++) {
        const struct moeinf_layer *lw = &m->llm->layers[il];
        const void *mla[] = {lw->attn_norm, lw->wkv_a.data, lw->kv_a_norm,
                             lw->wq_a.data ? lw->wq_a.data : lw->wq.data,
                             lw->wk_b.data ? lw->wk_b.data : lw->wkv_b.data, lw->wo.data};
        const void *full[] = {lw->attn_norm, lw->wq.data, lw->wk.data, lw->wv.data, lw->wo.data,
                              lw->bq,        lw->q_norm};
        const void *dense[] = {lw->ffn_norm, lw->ffn_gate.data, lw->ffn_up.data, lw->ffn_down.data};
        const void *moe[] = {lw->ffn_norm,        lw->router.data,   lw->gate_shexp.data,
                             lw->up_shexp.data,   lw->down_shexp.data,
                             hp->router == MOEINF_ROUTER_SIGMOID ? lw->exp_probs_b : lw->ffn_norm};
        if (lw->attn == MOEINF_ATTN_MLA) {
            check_resident(m, rel, il, mla, sizeof mla / sizeof mla[0]);
        } else {
            check_resident(m, rel, il, full, sizeof full / sizeof full[0]);
        }
        if (il < hp->n_layer_dense_lead) {
            check_resident(m, rel, il, dense, sizeof dense / sizeof dense[0]);
        } else {
            check_resident(m, rel, il, moe, sizeof moe / sizeof moe[0]);
        }
    }
    check_model_policy(path, only_policy);
}

/* The MLA file under every policy; the older layout and glm4moe (whose routing goes through
 * the same code) under the default policy, to keep the sanitizer runs short. */
static void test_identical_tiny_deepseek2_glm4moe(void) {
    deepseek_glm_model("tests/data/models/tiny-deepseek2-Q4_K_M.gguf", NULL);
    deepseek_glm_model("tests/data/models/tiny-deepseek2lite-Q4_K_M.gguf", "moe-infinity");
    deepseek_glm_model("tests/data/models/tiny-glm4moe-Q4_K_M.gguf", "moe-infinity");
}

static void test_identical_generated(void) {
    check_model(generated_model());
}

/* The 4 KiB window around [off, off + n), as O_DIRECT reads it (short at the end of a file
 * of `size` bytes). */
static uint64_t window(uint64_t off, uint64_t n, uint64_t size) {
    uint64_t lo = off & ~(uint64_t)4095;
    uint64_t hi = (off + n + 4095) & ~(uint64_t)4095;
    return (hi < size ? hi : size) - lo;
}

/* Bytes read = the used experts' bytes (and windows), from the tensor table; no other path
 * reads experts (their views have no data when offloaded: a bypass would crash). */
static void test_bytes_read_are_the_misses(void) {
    const char *path = generated_model();
    struct geometry g = geometry_of(path);
    struct out ref;
    struct cfg rc = {
        path, 1, 512, {MOEINF_EXPERT_CACHE_NONE, 0, 0}, NULL, NULL, MOEINF_EXPERT_IO_DIRECT, 0};
    if (!run(&rc, &ref)) { /* a failed run may still hold its buffer */
        free(ref.logits);
        return;
    }
    struct moeinf_gguf *gg = NULL;
    struct moeinf_error err = {0};
    CHECK(moeinf_gguf_open(path, &gg, &err) == MOEINF_OK);
    if (!gg) {
        free(ref.logits);
        return;
    }
    uint64_t exact = 0;
    uint64_t windows = 0;
    uint64_t per_expert[8] = {0};
    int distinct = 0;
    const char *parts[3] = {"ffn_gate_exps", "ffn_up_exps", "ffn_down_exps"};
    for (int il = 0; il < g.n_layer; il++) {
        for (int p = 0; p < 3; p++) {
            char name[64];
            snprintf(name, sizeof name, "blk.%d.%s.weight", il, parts[p]);
            const struct moeinf_gguf_tensor *t = moeinf_gguf_find_tensor(gg, name);
            CHECK(t != NULL);
            if (!t) continue;
            uint64_t mat = t->n_bytes / (uint64_t)t->ne[2];
            per_expert[il] += mat;
            for (int e = 0; e < g.n_expert; e++) {
                if (!ref.used[il][e]) continue;
                exact += mat;
                windows += window(t->offset + (uint64_t)e * mat, mat, gg->map.size);
            }
        }
        for (int e = 0; e < g.n_expert; e++)
            distinct += ref.used[il][e];
    }
    moeinf_gguf_free(gg);
    struct cfg c = {
        path, 2, 512, slots(g.n_layer * g.n_expert, &g), "lru", NULL, MOEINF_EXPERT_IO_DIRECT, 0};
    struct out got;
    run(&c, &got);
    compare("bytes test", &ref, &got);
    CHECK_EQ_INT((long long)got.stats.misses, distinct);
    CHECK_EQ_INT((long long)got.stats.expert_bytes, (long long)exact);
    CHECK_EQ_INT((long long)got.stats.bytes_read, (long long)(got.direct ? windows : exact));
    free(got.logits);
    /* A small cache: every miss reads one whole expert of its layer (all are equal here). */
    c.cache = slots(g.top_k, &g);
    run(&c, &got);
    compare("bytes test, minimum cache", &ref, &got);
    CHECK_EQ_INT((long long)got.stats.expert_bytes, (long long)(got.stats.misses * per_expert[0]));
    CHECK(got.stats.misses > (uint64_t)distinct);
    free(got.logits);
    free(ref.logits);
}

/* The simulator, replaying the engine's recorded routing with --batch = -b at the same
 * capacity and policy, counts the same accesses and hits. */
static void test_sim_replays_engine_counts(void) {
    const char *path = generated_model();
    struct geometry g = geometry_of(path);
    char rec[512];
    char name[64];
    snprintf(name, sizeof name, "offload-rec-%d.txt", (int)getpid());
    test_tmp_path(name, rec, sizeof rec);
    const char *policies[] = {"lru", "reuse", "moe-infinity", "lfu"};
    const int sizes[] = {g.top_k, 10, 24};
    const int batches[] = {512, 3, 8};
    for (size_t pi = 0; pi < (TSAN_GRID ? 1 : 4); pi++) {
        for (size_t si = 0; si < (TSAN_GRID ? 1 : 3); si++) {
            for (size_t bi = 0; bi < 3; bi++) {
                struct cfg c = {path,
                                1,
                                batches[bi],
                                slots(sizes[si], &g),
                                policies[pi],
                                rec,
                                MOEINF_EXPERT_IO_CACHED,
                                0};
                struct out got;
                run(&c, &got);
                free(got.logits);
                struct moeinf_sim_params sp = moeinf_sim_params_default();
                sp.trace_path = rec;
                sp.policy = policies[pi];
                sp.cache_experts = sizes[si];
                sp.batch = batches[bi];
                struct moeinf_sim_result res;
                struct moeinf_error err = {0};
                enum moeinf_status st = moeinf_sim_run(&sp, &res, &err);
                CHECK_MSG(st == MOEINF_OK, "%s", err.msg);
                if (st != MOEINF_OK) continue;
                CHECK_MSG(res.accesses == got.stats.accesses && res.hits == got.stats.hits,
                          "%s, %d slots, -b %d: sim %llu/%llu, engine %llu/%llu hits/accesses",
                          policies[pi], sizes[si], batches[bi], (unsigned long long)res.hits,
                          (unsigned long long)res.accesses, (unsigned long long)got.stats.hits,
                          (unsigned long long)got.stats.accesses);
                CHECK_EQ_INT((long long)res.tokens, (long long)got.stats.tokens);
            }
        }
    }
    remove(rec);
}

static void test_sizes_and_errors(void) {
    struct moeinf_expert_cache_size s;
    struct moeinf_error err = {0};
    CHECK(moeinf_expert_cache_parse("4G", &s, &err) == MOEINF_OK);
    CHECK(s.kind == MOEINF_EXPERT_CACHE_BYTES && s.bytes == 4ull << 30);
    CHECK(moeinf_expert_cache_parse("1536k", &s, &err) == MOEINF_OK && s.bytes == 1536ull << 10);
    CHECK(moeinf_expert_cache_parse("123", &s, &err) == MOEINF_OK && s.bytes == 123);
    /* a fraction with a suffix, rounded to the nearest byte:
     * 3.3265 x 2^30 = 3221225472 + 350576705.536 */
    CHECK(moeinf_expert_cache_parse("1.5G", &s, &err) == MOEINF_OK && s.bytes == 3ull << 29);
    CHECK(moeinf_expert_cache_parse("0.5k", &s, &err) == MOEINF_OK && s.bytes == 512);
    CHECK(moeinf_expert_cache_parse("3.3265G", &s, &err) == MOEINF_OK && s.bytes == 3571802178);
    CHECK(moeinf_expert_cache_parse("0.0007K", &s, &err) == MOEINF_OK && s.bytes == 1);
    CHECK(moeinf_expert_cache_parse("12.5%", &s, &err) == MOEINF_OK);
    CHECK(s.kind == MOEINF_EXPERT_CACHE_PERCENT && s.percent == 12.5);
    CHECK(moeinf_expert_cache_parse("0.25%", &s, &err) == MOEINF_OK && s.percent == 0.25);
    CHECK(moeinf_expert_cache_parse("100.0%", &s, &err) == MOEINF_OK && s.percent == 100.0);
    CHECK(moeinf_expert_cache_parse("007%", &s, &err) == MOEINF_OK && s.percent == 7.0);
    CHECK(moeinf_expert_cache_parse("auto", &s, &err) == MOEINF_OK);
    CHECK(s.kind == MOEINF_EXPERT_CACHE_AUTO);
    const char *bad[] = {"",
                         "0",
                         "-1",
                         "1X",
                         "1GB",
                         "0%",
                         "101%",
                         "x%",
                         "auto2",
                         "1.5",
                         "1.G",
                         ".5G",
                         "1.5.2G",
                         "1e3K",
                         "0.0G",
                         "0.0004K",
                         "+1G",
                         "0x10K",
                         "infK",
                         "99999999999999999999T",
                         "9000000.5T",
                         "1e1%",
                         "+5%",
                         "-5%",
                         ".5%",
                         "5.%",
                         "0x10%",
                         "inf%",
                         "nan%",
                         "5,5%",
                         "100.001%",
                         "0.0%",
                         "%",
                         "5 %",
                         "18446744073709551666%"}; /* 2^64 + 50: wrapped, it would be 50 */
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        CHECK_MSG(moeinf_expert_cache_parse(bad[i], &s, &err) == MOEINF_ERR_ARG, "'%s'", bad[i]);
    }
    CHECK_STR_CONTAINS(err.msg, "invalid expert cache size");

    const char *path = generated_model();
    struct moeinf_model *model = NULL;
    struct moeinf_context *ctx = NULL;
    struct moeinf_model_params mp = moeinf_model_params_default();
    mp.offload_experts = true;
    CHECK(moeinf_model_load(path, &mp, &model, &err) == MOEINF_OK);
    if (!model) return;
    struct moeinf_context_params cp = moeinf_context_params_default();
    cp.n_ctx = 32;
    /* one slot short of top_k (4) */
    cp.expert_cache.kind = MOEINF_EXPERT_CACHE_PERCENT;
    cp.expert_cache.percent = 100.0 * 3 / 48;
    CHECK(moeinf_context_init(model, &cp, &ctx, &err) == MOEINF_ERR_ARG);
    CHECK_STR_CONTAINS(err.msg, "at least 4 slots");
    cp.expert_cache.kind = MOEINF_EXPERT_CACHE_NONE;
    CHECK(moeinf_context_init(model, &cp, &ctx, &err) == MOEINF_ERR_ARG);
    CHECK_STR_CONTAINS(err.msg, "needs an expert cache");
    cp.expert_cache.kind = MOEINF_EXPERT_CACHE_PERCENT;
    cp.expert_cache.percent = 50;
    cp.expert_policy = "belady";
    CHECK(moeinf_context_init(model, &cp, &ctx, &err) == MOEINF_ERR_ARG);
    CHECK_STR_CONTAINS(err.msg, "belady");
    cp.expert_policy = NULL;
    cp.expert_cache.kind = MOEINF_EXPERT_CACHE_AUTO;
    CHECK_MSG(moeinf_context_init(model, &cp, &ctx, &err) == MOEINF_OK, "%s", err.msg);
    moeinf_context_free(ctx);
    ctx = NULL;
    moeinf_model_free(model);
    model = NULL;
    /* a cache asked of a model loaded resident */
    mp.offload_experts = false;
    CHECK(moeinf_model_load(path, &mp, &model, &err) == MOEINF_OK);
    cp.expert_cache.kind = MOEINF_EXPERT_CACHE_PERCENT;
    CHECK(moeinf_context_init(model, &cp, &ctx, &err) == MOEINF_ERR_ARG);
    CHECK_STR_CONTAINS(err.msg, "offload_experts");
    moeinf_model_free(model);
}

/* A file truncated under a running context: the next expert read is a named error, not a
 * SIGBUS (experts are read with pread, not through the mapping). */
static void test_truncated_file_is_an_error(void) {
    const char *src = generated_model();
    char path[512];
    char name[64];
    snprintf(name, sizeof name, "offload-trunc-%d.gguf", (int)getpid());
    test_tmp_path(name, path, sizeof path);
    FILE *in = fopen(src, "rb");
    FILE *out = fopen(path, "wb");
    CHECK(in && out);
    if (!in || !out) return;
    char buf[65536];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, in)) > 0)
        fwrite(buf, 1, n, out);
    fclose(in);
    fclose(out);
    struct moeinf_error err = {0};
    struct moeinf_model *model = NULL;
    struct moeinf_context *ctx = NULL;
    struct moeinf_model_params mp = moeinf_model_params_default();
    mp.offload_experts = true;
    CHECK(moeinf_model_load(path, &mp, &model, &err) == MOEINF_OK);
    struct moeinf_context_params cp = moeinf_context_params_default();
    cp.n_ctx = 32;
    cp.expert_cache.kind = MOEINF_EXPERT_CACHE_PERCENT;
    cp.expert_cache.percent = 100;
    CHECK(model && moeinf_context_init(model, &cp, &ctx, &err) == MOEINF_OK);
    if (ctx) {
        /* cut the file in the first layer's experts */
        struct moeinf_gguf *gg = NULL;
        CHECK(moeinf_gguf_open(src, &gg, &err) == MOEINF_OK);
        const struct moeinf_gguf_tensor *t =
            gg ? moeinf_gguf_find_tensor(gg, "blk.0.ffn_gate_exps.weight") : NULL;
        CHECK(t != NULL);
        if (t) CHECK(truncate(path, (off_t)t->offset) == 0);
        moeinf_gguf_free(gg);
        float *logits = malloc((size_t)moeinf_model_n_vocab(model) * sizeof(float));
        int32_t ids[5] = {1, 2, 3, 4, 5};
        enum moeinf_status st = moeinf_decode(ctx, ids, 5, logits, false, &err);
        CHECK(st == MOEINF_ERR_IO);
        CHECK_STR_CONTAINS(err.msg, "short read");
        /* the cache kept nothing half-read: the same call fails the same way */
        st = moeinf_decode(ctx, ids, 5, logits, false, &err);
        CHECK(st == MOEINF_ERR_IO);
        free(logits);
    }
    moeinf_context_free(ctx);
    moeinf_model_free(model);
    remove(path);
}

int main(void) {
    RUN(test_sizes_and_errors);
    RUN(test_identical_tiny_f32);
    RUN(test_identical_tiny_q8_0);
    RUN(test_identical_tiny_q4_0);
    RUN(test_identical_tiny_qwen2moe);
    RUN(test_identical_tiny_qwen35moe);
    RUN(test_identical_tiny_qwen3next);
    RUN(test_identical_tiny_gptoss);
    RUN(test_identical_tiny_deepseek2_glm4moe);
    RUN(test_identical_generated);
    RUN(test_bytes_read_are_the_misses);
    RUN(test_sim_replays_engine_counts);
    RUN(test_truncated_file_is_an_error);
    models_free();
    if (gen_path[0]) remove(gen_path);
    return test_report();
}
