// ctest-labels: threads
/*
 * test_expert_budget.c - one memory budget for the contexts of a model (engine_experts.c):
 * under a known limit (MOEINF_MEMORY_LIMIT, base/memlimit.h), `--expert-cache auto` takes
 * what the limit leaves once the resident weights, the margin, this context's KV cache and
 * scratch and what the model's other contexts hold are counted; three `auto` contexts, made
 * one after another or on three threads at once, hold in total at most the limit; a context
 * freed gives its share back; a latent-attention (deepseek2) context goes up to its trained
 * length and its cache gets what that context's latent KV cache leaves.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "moeinf.h"
#include "test.h"

/* 2 layers x 16 experts, top-2: 32 slots of about 100 KiB. */
static char gen_path[512];

static const char *generated_model(void) {
    if (gen_path[0]) return gen_path;
    char name[64];
    snprintf(name, sizeof name, "budget-gen-%d.gguf", (int)getpid());
    test_tmp_path(name, gen_path, sizeof gen_path);
    struct moeinf_gen_params gp = moeinf_gen_params_default();
    gp.n_layer = 2;
    gp.n_expert = 16;
    gp.n_expert_used = 2;
    gp.n_embd = 128;
    gp.n_ff = 256;
    gp.n_head = 4;
    gp.n_head_kv = 2;
    gp.seed = 3;
    gp.n_threads = 1;
    struct moeinf_error err = {0};
    CHECK_MSG(moeinf_gen_model(&gp, gen_path, &err) == MOEINF_OK, "%s", err.msg);
    return gen_path;
}

static enum moeinf_status open_ctx(struct moeinf_model *m, enum moeinf_expert_cache_kind kind,
                                   uint64_t bytes, struct moeinf_context **out,
                                   struct moeinf_error *err) {
    struct moeinf_context_params cp = moeinf_context_params_default();
    cp.n_ctx = 32;
    cp.n_threads = 1;
    cp.expert_cache.kind = kind;
    cp.expert_cache.bytes = bytes;
    cp.expert_cache.percent = 100.0;
    cp.expert_io = MOEINF_EXPERT_IO_CACHED;
    cp.expert_io_threads = 0;
    cp.expert_prefetch = 0;
    cp.expert_lookahead = 0;
    *out = NULL;
    return moeinf_context_init(m, &cp, out, err);
}

static struct moeinf_expert_cache_info info_of(const struct moeinf_context *ctx) {
    struct moeinf_expert_cache_info info;
    memset(&info, 0, sizeof info);
    struct moeinf_error err;
    CHECK_EQ_INT(moeinf_context_expert_cache(ctx, &info, &err), MOEINF_OK);
    return info;
}

/* What a context holds of the budget: its slots, its KV cache and scratch. */
static uint64_t held_by(const struct moeinf_context *ctx) {
    struct moeinf_expert_cache_info info = info_of(ctx);
    return (uint64_t)info.slots * info.slot_bytes + info.context_bytes;
}

static void set_limit(uint64_t bytes) {
    char v[32];
    snprintf(v, sizeof v, "%llu", (unsigned long long)bytes);
    setenv("MOEINF_MEMORY_LIMIT", v, 1); /* NOLINT(concurrency-mt-unsafe): no thread runs */
}

/* The figures of one context, from a probe: slot bytes, resident bytes, KV cache + scratch. */
static bool probe(struct moeinf_model *m, uint64_t *slot, uint64_t *resident, uint64_t *ctxb) {
    struct moeinf_context *ctx = NULL;
    struct moeinf_error err;
    CHECK_EQ_INT(open_ctx(m, MOEINF_EXPERT_CACHE_PERCENT, 0, &ctx, &err), MOEINF_OK);
    if (!ctx) return false;
    struct moeinf_expert_cache_info info = info_of(ctx);
    moeinf_context_free(ctx);
    *slot = info.slot_bytes;
    *resident = info.resident_bytes;
    *ctxb = info.context_bytes;
    CHECK_EQ_INT(info.n_experts_total, 32);
    /* the limits below need room for 8 slots and more than 8 left to cut */
    CHECK_MSG(*ctxb < 16 * *slot, "KV cache and scratch %llu, slot %llu", (unsigned long long)*ctxb,
              (unsigned long long)*slot);
    return *slot > 0 && *ctxb < 16 * *slot;
}

static void test_three_auto_contexts(void) {
    struct moeinf_error err = {0};
    struct moeinf_model_params mp = moeinf_model_params_default();
    mp.offload_experts = true;
    struct moeinf_model *m = NULL;
    CHECK_EQ_INT(moeinf_model_load(generated_model(), &mp, &m, &err), MOEINF_OK);
    uint64_t slot = 0;
    uint64_t resident = 0;
    uint64_t ctxb = 0;
    if (!m || !probe(m, &slot, &resident, &ctxb)) goto done;
    /* room for two contexts' KV caches and scratch and 8.5 slots */
    const uint64_t budget = 2 * ctxb + 8 * slot + slot / 2;
    set_limit(MOEINF_EXPERT_CACHE_MARGIN + resident + budget);

    /* three auto contexts: the first takes what is left, the others find no room */
    struct moeinf_context *c[3] = {NULL, NULL, NULL};
    enum moeinf_status st[3];
    uint64_t total = 0;
    for (int i = 0; i < 3; i++) {
        st[i] = open_ctx(m, MOEINF_EXPERT_CACHE_AUTO, 0, &c[i], &err);
        if (c[i]) total += held_by(c[i]);
    }
    CHECK_MSG(total <= budget, "three auto contexts hold %llu bytes, the budget is %llu",
              (unsigned long long)total, (unsigned long long)budget);
    CHECK_EQ_INT(st[0], MOEINF_OK);
    if (c[0]) CHECK_EQ_INT(info_of(c[0]).slots, (int)((budget - ctxb) / slot));
    CHECK_EQ_INT(st[1], MOEINF_ERR_NOMEM);
    CHECK_EQ_INT(st[2], MOEINF_ERR_NOMEM);
    CHECK_STR_CONTAINS(err.msg, "expert_cache auto");
    CHECK_STR_CONTAINS(err.msg, "MOEINF_MEMORY_LIMIT");
    CHECK_STR_CONTAINS(err.msg, "the model's other contexts");
    for (int i = 0; i < 3; i++)
        moeinf_context_free(c[i]);

    /* what is already held counts: 2 slots given as bytes, then auto takes the rest,
     * (budget - 2 slots - two KV caches and scratch) / slot = 6 slots */
    struct moeinf_context *fixed = NULL;
    struct moeinf_context *rest = NULL;
    CHECK_EQ_INT(open_ctx(m, MOEINF_EXPERT_CACHE_BYTES, 2 * slot, &fixed, &err), MOEINF_OK);
    CHECK_EQ_INT(open_ctx(m, MOEINF_EXPERT_CACHE_AUTO, 0, &rest, &err), MOEINF_OK);
    if (fixed) CHECK_EQ_INT(info_of(fixed).slots, 2);
    if (rest) CHECK_EQ_INT(info_of(rest).slots, 6);
    /* a freed context gives its share back */
    moeinf_context_free(rest);
    rest = NULL;
    CHECK_EQ_INT(open_ctx(m, MOEINF_EXPERT_CACHE_AUTO, 0, &rest, &err), MOEINF_OK);
    if (rest) CHECK_EQ_INT(info_of(rest).slots, 6);
    moeinf_context_free(rest);
    moeinf_context_free(fixed);
    /* a failed init holds nothing: the first auto context takes what it took at first */
    set_limit(MOEINF_EXPERT_CACHE_MARGIN + resident + ctxb + slot / 2);
    CHECK_EQ_INT(open_ctx(m, MOEINF_EXPERT_CACHE_AUTO, 0, &rest, &err), MOEINF_ERR_NOMEM);
    set_limit(MOEINF_EXPERT_CACHE_MARGIN + resident + budget);
    CHECK_EQ_INT(open_ctx(m, MOEINF_EXPERT_CACHE_AUTO, 0, &rest, &err), MOEINF_OK);
    if (rest) CHECK_EQ_INT(info_of(rest).slots, (int)((budget - ctxb) / slot));
    moeinf_context_free(rest);
done:
    moeinf_model_free(m);
    unsetenv("MOEINF_MEMORY_LIMIT"); /* NOLINT(concurrency-mt-unsafe): no thread runs */
}

struct racer {
    struct moeinf_model *model;
    pthread_barrier_t *start;
    struct moeinf_context *ctx;
    enum moeinf_status st;
};

static void *race(void *arg) {
    struct racer *r = arg;
    struct moeinf_error err;
    pthread_barrier_wait(r->start);
    r->st = open_ctx(r->model, MOEINF_EXPERT_CACHE_AUTO, 0, &r->ctx, &err);
    return NULL;
}

/* Three threads make auto contexts at once: one gets the room, whichever it is. */
static void test_auto_contexts_at_once(void) {
    struct moeinf_error err = {0};
    struct moeinf_model_params mp = moeinf_model_params_default();
    mp.offload_experts = true;
    struct moeinf_model *m = NULL;
    CHECK_EQ_INT(moeinf_model_load(generated_model(), &mp, &m, &err), MOEINF_OK);
    uint64_t slot = 0;
    uint64_t resident = 0;
    uint64_t ctxb = 0;
    if (!m || !probe(m, &slot, &resident, &ctxb)) {
        moeinf_model_free(m);
        return;
    }
    const uint64_t budget = 2 * ctxb + 8 * slot + slot / 2;
    set_limit(MOEINF_EXPERT_CACHE_MARGIN + resident + budget);
    pthread_barrier_t start;
    pthread_barrier_init(&start, NULL, 3);
    struct racer r[3];
    pthread_t th[3];
    for (int i = 0; i < 3; i++) {
        r[i] = (struct racer){m, &start, NULL, MOEINF_OK};
        CHECK_EQ_INT(pthread_create(&th[i], NULL, race, &r[i]), 0);
    }
    int ok = 0;
    uint64_t total = 0;
    for (int i = 0; i < 3; i++) {
        pthread_join(th[i], NULL);
        if (r[i].st == MOEINF_OK)
            ok++;
        else
            CHECK_EQ_INT(r[i].st, MOEINF_ERR_NOMEM);
        if (r[i].ctx) total += held_by(r[i].ctx);
    }
    pthread_barrier_destroy(&start);
    CHECK_EQ_INT(ok, 1);
    CHECK_MSG(total <= budget, "three auto contexts hold %llu bytes, the budget is %llu",
              (unsigned long long)total, (unsigned long long)budget);
    for (int i = 0; i < 3; i++)
        moeinf_context_free(r[i].ctx);
    moeinf_model_free(m);
    unsetenv("MOEINF_MEMORY_LIMIT"); /* NOLINT(concurrency-mt-unsafe): no thread runs */
}

/* A tiny deepseek2 (latent attention) trained to 32768 tokens: 2 MoE layers x 16 experts top-2,
 * n_embd 128, 4 heads of 48 (32 + 16 rotary), a 64-wide latent, value heads of 32. Its KV
 * cache holds latent + rotary key per token and layer: (64 + 16) x 2 bytes x 2 layers = 320
 * bytes a token at F16, where full heads would take 4 x (48 + 32) x 2 x 2 = 1280. */
#define MLA_CTX_TRAIN 32768
#define MLA_KV_TOKEN  320u

static char mla_path[512];

static struct moeinf_context *mla_ctx(struct moeinf_model *m, int n_ctx,
                                      enum moeinf_expert_cache_kind kind, enum moeinf_status *st) {
    struct moeinf_context_params cp = moeinf_context_params_default();
    cp.n_ctx = n_ctx;
    cp.n_batch = 32;
    cp.n_threads = 1;
    cp.expert_cache.kind = kind;
    cp.expert_cache.percent = 100.0;
    cp.expert_io = MOEINF_EXPERT_IO_CACHED;
    cp.expert_io_threads = 0;
    cp.expert_prefetch = 0;
    cp.expert_lookahead = 0;
    struct moeinf_context *ctx = NULL;
    struct moeinf_error err = {0};
    *st = moeinf_context_init(m, &cp, &ctx, &err);
    return ctx;
}

/* `-c` up to the trained length, and `--expert-cache auto` under a fixed limit gives the
 * experts what the latent KV cache of the chosen context leaves: each context's slots are
 * (limit - margin - resident - its KV cache and scratch) / slot, and the KV cache grows by the
 * latent's bytes per token, not by full heads'. */
static void test_mla_context_budget(void) {
    snprintf(mla_path, sizeof mla_path, "%s", "");
    char name[64];
    snprintf(name, sizeof name, "budget-mla-%d.gguf", (int)getpid());
    test_tmp_path(name, mla_path, sizeof mla_path);
    struct moeinf_gen_params gp = moeinf_gen_params_default();
    gp.arch = "deepseek2";
    gp.n_layer = 2;
    gp.n_expert = 16;
    gp.n_expert_used = 2;
    gp.n_expert_shared = 1;
    gp.n_embd = 128;
    gp.n_ff = 128;
    gp.n_head = 4;
    gp.n_head_kv = 1;
    gp.n_embd_head = 48;
    gp.n_rot = 16;
    gp.kv_lora_rank = 64;
    gp.v_head_dim = 32;
    gp.expert_gating = 1;
    gp.n_ctx_train = MLA_CTX_TRAIN;
    gp.seed = 5;
    gp.n_threads = 1;
    struct moeinf_error err = {0};
    CHECK_MSG(moeinf_gen_model(&gp, mla_path, &err) == MOEINF_OK, "%s", err.msg);
    struct moeinf_model_params mp = moeinf_model_params_default();
    mp.offload_experts = true;
    struct moeinf_model *m = NULL;
    CHECK_MSG(moeinf_model_load(mla_path, &mp, &m, &err) == MOEINF_OK, "%s", err.msg);
    if (!m) goto done;
    CHECK_EQ_INT(moeinf_model_n_ctx_train(m), MLA_CTX_TRAIN);
    /* probes (every expert cached) at a short context and at the trained length */
    const int n_ctx[2] = {1024, MLA_CTX_TRAIN};
    uint64_t ctxb[2] = {0, 0};
    uint64_t slot = 0;
    uint64_t resident = 0;
    for (int i = 0; i < 2; i++) {
        enum moeinf_status st;
        struct moeinf_context *ctx = mla_ctx(m, n_ctx[i], MOEINF_EXPERT_CACHE_PERCENT, &st);
        CHECK_MSG(st == MOEINF_OK, "n_ctx %d: status %d", n_ctx[i], (int)st);
        if (!ctx) goto done;
        struct moeinf_expert_cache_info info = info_of(ctx);
        ctxb[i] = info.context_bytes;
        slot = info.slot_bytes;
        resident = info.resident_bytes;
        moeinf_context_free(ctx);
    }
    /* the KV cache grows by the latent and rotary key per token (scratch a little more: a
     * score per head and position), far below full heads */
    const double per_token = (double)(ctxb[1] - ctxb[0]) / (MLA_CTX_TRAIN - 1024);
    CHECK_MSG(per_token >= MLA_KV_TOKEN && per_token < MLA_KV_TOKEN + 64,
              "KV cache and scratch grow by %.1f bytes a token (latent KV: %u)", per_token,
              MLA_KV_TOKEN);
    /* a limit that holds the long context's KV cache and 3.5 slots: at 1024 tokens the
     * experts get what the long context's cache would have taken */
    const uint64_t budget = ctxb[1] + 3 * slot + slot / 2;
    set_limit(MOEINF_EXPERT_CACHE_MARGIN + resident + budget);
    for (int i = 0; i < 2; i++) {
        enum moeinf_status st;
        struct moeinf_context *ctx = mla_ctx(m, n_ctx[i], MOEINF_EXPERT_CACHE_AUTO, &st);
        CHECK_MSG(st == MOEINF_OK, "auto at n_ctx %d: status %d", n_ctx[i], (int)st);
        if (!ctx) continue;
        uint64_t want = (budget - ctxb[i]) / slot;
        want = want > 32 ? 32 : want;
        CHECK_EQ_INT(info_of(ctx).slots, (int)want);
        moeinf_context_free(ctx);
    }
    CHECK_MSG((budget - ctxb[0]) / slot >= 3 + 8, "the short context freed %llu slots",
              (unsigned long long)((budget - ctxb[0]) / slot - 3));
done:
    moeinf_model_free(m);
    unsetenv("MOEINF_MEMORY_LIMIT"); /* NOLINT(concurrency-mt-unsafe): no thread runs */
    remove(mla_path);
}

int main(void) {
    RUN(test_three_auto_contexts);
    RUN(test_auto_contexts_at_once);
    RUN(test_mla_context_budget);
    if (gen_path[0]) remove(gen_path);
    return test_report();
}
