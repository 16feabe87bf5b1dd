// ctest-labels: golden
/*
 * test_fused_gate_up.c - files whose experts' gate and up matrices are fused in one
 * ffn_gate_up_exps tensor (convert_hf_to_gguf.py --fuse-gate-up-exps; llama.cpp reads them
 * for deepseek2, qwen35moe, qwen3next and others) compute what the same model with separate
 * ffn_gate_exps and ffn_up_exps computes.
 *
 * Independent expectation: the test writes the fused file itself from a file with separate
 * tensors (each expert's gate rows, then its up rows, as llama.cpp's build_moe_ffn splits the
 * fused product), so the two hold the same weights, and the logits of a prompt and of decode
 * steps must be equal bit for bit: resident, and with the experts offloaded to a small expert
 * cache (which reads the fused tensor's halves as parts). The separate files' logits are held
 * to llama.cpp's by test_golden. The CLI's check of a cache size from the header alone
 * (app/cache_check.c) must read the fused layout too: it refuses a cache of one byte.
 */
#include <string.h>
#include <unistd.h>

#include "app/args.h"
#include "app/expert_args.h"
#include "gguf/gguf.h"
#include "gguf/gguf_writer.h"
#include "moeinf.h"
#include "test.h"

#define N_PROMPT 9
#define N_STEPS  3
#define N_POS    (N_PROMPT + N_STEPS)

static bool ends_with(const char *s, const char *suffix) {
    size_t n = strlen(s);
    size_t k = strlen(suffix);
    return n >= k && strcmp(s + n - k, suffix) == 0;
}

/* The tensor "blk.N.<part>" of the layer that `name` ("blk.N.<...>") belongs to. */
static const struct moeinf_gguf_tensor *sibling(const struct moeinf_gguf *g, const char *name,
                                                const char *part) {
    char key[160];
    const char *dot = strchr(name + 4, '.'); /* after "blk.N" */
    if (strncmp(name, "blk.", 4) != 0 || !dot) return NULL;
    snprintf(key, sizeof key, "%.*s.%s", (int)(dot - name), name, part);
    return moeinf_gguf_find_tensor(g, key);
}

/* src rewritten to dst with every layer's ffn_gate_exps and ffn_up_exps fused into
 * ffn_gate_up_exps [n_embd, 2 n_ff, n_expert]. The number of layers fused in *n_fused. */
static bool write_fused(const char *src, const char *dst, int *n_fused) {
    struct moeinf_error err = {0};
    struct moeinf_gguf *g = NULL;
    struct moeinf_gguf_writer *w = NULL;
    bool ok = moeinf_gguf_open(src, &g, &err) == MOEINF_OK &&
              moeinf_gguf_writer_open(dst, 0, &w, &err) == MOEINF_OK;
    *n_fused = 0;
    for (uint64_t i = 0; ok && i < g->n_kv; i++)
        ok = moeinf_gguf_writer_add_kv(w, &g->kv[i], &err) == MOEINF_OK;
    for (uint64_t i = 0; ok && i < g->n_tensors; i++) {
        const struct moeinf_gguf_tensor *t = &g->tensors[i];
        if (ends_with(t->name, ".ffn_up_exps.weight")) continue; /* in the fused one */
        if (ends_with(t->name, ".ffn_gate_exps.weight")) {
            const struct moeinf_gguf_tensor *up = sibling(g, t->name, "ffn_up_exps.weight");
            ok = up && up->type == t->type && memcmp(up->ne, t->ne, sizeof t->ne) == 0;
            char name[160];
            snprintf(name, sizeof name, "%.*s_up_exps.weight",
                     (int)(strlen(t->name) - strlen("_exps.weight")), t->name);
            int64_t ne[MOEINF_GGUF_MAX_DIMS];
            memcpy(ne, t->ne, sizeof ne);
            ne[1] *= 2;
            ok = ok &&
                 moeinf_gguf_writer_add_tensor(w, name, t->type, t->n_dims, ne, &err) == MOEINF_OK;
            (*n_fused)++;
            continue;
        }
        ok =
            moeinf_gguf_writer_add_tensor(w, t->name, t->type, t->n_dims, t->ne, &err) == MOEINF_OK;
    }
    for (uint64_t i = 0; ok && i < g->n_tensors; i++) {
        const struct moeinf_gguf_tensor *t = &g->tensors[i];
        if (ends_with(t->name, ".ffn_up_exps.weight")) continue;
        if (!ends_with(t->name, ".ffn_gate_exps.weight")) {
            ok = moeinf_gguf_writer_write(w, t->data, t->n_bytes, &err) == MOEINF_OK;
            continue;
        }
        const struct moeinf_gguf_tensor *up = sibling(g, t->name, "ffn_up_exps.weight");
        const uint64_t mat = t->n_bytes / (uint64_t)t->ne[2];
        for (int64_t e = 0; ok && e < t->ne[2]; e++) {
            ok = moeinf_gguf_writer_write(w, t->data + (uint64_t)e * mat, mat, &err) == MOEINF_OK &&
                 moeinf_gguf_writer_write(w, up->data + (uint64_t)e * mat, mat, &err) == MOEINF_OK;
        }
    }
    ok = ok && moeinf_gguf_writer_finish(w, &err) == MOEINF_OK;
    CHECK_MSG(ok, "%s -> %s: %s", src, dst, err.msg);
    moeinf_gguf_writer_free(w);
    moeinf_gguf_free(g);
    return ok;
}

/* The logits of N_POS positions (a prompt, then single decode steps); offloaded: with the
 * experts in a cache of 25 % of them. NULL when the run failed. */
static float *run_logits(const char *path, bool offloaded, int *n_vocab) {
    struct moeinf_error err = {0};
    struct moeinf_model *model = NULL;
    struct moeinf_context *ctx = NULL;
    struct moeinf_model_params mp = moeinf_model_params_default();
    mp.offload_experts = offloaded;
    float *logits = NULL;
    CHECK_MSG(moeinf_model_load(path, &mp, &model, &err) == MOEINF_OK, "%s: %s", path, err.msg);
    if (!model) goto done;
    struct moeinf_context_params cp = moeinf_context_params_default();
    cp.n_ctx = 32;
    cp.n_threads = 2;
    if (offloaded) {
        cp.expert_cache.kind = MOEINF_EXPERT_CACHE_PERCENT;
        cp.expert_cache.percent = 25;
    }
    CHECK_MSG(moeinf_context_init(model, &cp, &ctx, &err) == MOEINF_OK, "%s: %s", path, err.msg);
    if (!ctx) goto done;
    *n_vocab = moeinf_model_n_vocab(model);
    int32_t ids[N_POS];
    for (int i = 0; i < N_POS; i++)
        ids[i] = (int32_t)((i * 7919 + 5) % *n_vocab);
    logits = malloc((size_t)N_POS * (size_t)*n_vocab * sizeof(float));
    bool ran = logits && moeinf_decode(ctx, ids, N_PROMPT, logits, true, &err) == MOEINF_OK;
    for (int i = 0; ran && i < N_STEPS; i++) {
        ran = moeinf_decode(ctx, &ids[N_PROMPT + i], 1,
                            logits + (size_t)(N_PROMPT + i) * (size_t)*n_vocab, false,
                            &err) == MOEINF_OK;
    }
    CHECK_MSG(ran, "%s: %s", path, err.msg);
    if (!ran) {
        free(logits);
        logits = NULL;
    }
done:
    moeinf_context_free(ctx);
    moeinf_model_free(model);
    return logits;
}

static void check_model(const char *src, const char *label) {
    char dst[1024];
    char name[96];
    snprintf(name, sizeof name, "fused_%s_%d.gguf", label, (int)getpid());
    test_tmp_path(name, dst, sizeof dst);
    int n_fused = 0;
    if (!write_fused(src, dst, &n_fused)) return;
    CHECK_MSG(n_fused > 0, "%s: no expert layer to fuse", src);
    {
        /* the fused file has no separate gate and up tensors left */
        struct moeinf_gguf *g = NULL;
        struct moeinf_error err = {0};
        CHECK(moeinf_gguf_open(dst, &g, &err) == MOEINF_OK);
        int separate = 0;
        for (uint64_t i = 0; g && i < g->n_tensors; i++)
            separate += ends_with(g->tensors[i].name, "ffn_gate_exps.weight") ||
                        ends_with(g->tensors[i].name, "ffn_up_exps.weight");
        CHECK_EQ_INT(separate, 0);
        moeinf_gguf_free(g);
    }
    int nv_src = 0;
    int nv_res = 0;
    int nv_off = 0;
    float *want = run_logits(src, false, &nv_src);
    float *resident = run_logits(dst, false, &nv_res);
    float *offloaded = run_logits(dst, true, &nv_off);
    const size_t bytes = (size_t)N_POS * (size_t)nv_src * sizeof(float);
    if (want && resident && offloaded) {
        CHECK_EQ_INT(nv_res, nv_src);
        CHECK_EQ_INT(nv_off, nv_src);
        CHECK_MSG(memcmp(want, resident, bytes) == 0, "%s: fused logits differ (resident)", src);
        CHECK_MSG(memcmp(want, offloaded, bytes) == 0, "%s: fused logits differ (offloaded)", src);
    }
    /* the header-only cache check reads the fused layout: one byte is refused, 1 TiB is not */
    struct moeinf_context_params cp = moeinf_context_params_default();
    cp.expert_cache.kind = MOEINF_EXPERT_CACHE_BYTES;
    cp.expert_cache.bytes = 1;
    CHECK_EQ_INT(expert_args_check_cache("test", dst, &cp), CLI_EXIT_USAGE);
    cp.expert_cache.bytes = 1ull << 40;
    CHECK_EQ_INT(expert_args_check_cache("test", dst, &cp), CLI_EXIT_OK);
    free(want);
    free(resident);
    free(offloaded);
    unlink(dst);
}

static void test_qwen35moe(void) {
    char src[1024];
    check_model(test_src_path("tests/data/models/tiny-qwen35moe-Q4_K_M.gguf", src, sizeof src),
                "qwen35moe");
}

static void test_deepseek2(void) {
    char src[1024];
    if (!test_shared_path("testdata/models/tiny-deepseek2-F32.gguf", src, sizeof src)) return;
    check_model(src, "deepseek2");
}

int main(void) {
    RUN(test_qwen35moe);
    RUN(test_deepseek2);
    return test_report();
}
