// ctest-labels: golden;kernels
/*
 * test_kernels_logits.c - the whole forward pass computes the same bits with the scalar
 * kernel table as with the table under test: the one MOEINF_KERNELS names, or the best of
 * this CPU when it is unset (tests/kernels_wanted.h; quant.h: every table follows one
 * summation order, and attention uses only table kernels for its float dots). Logits of a
 * prompt (prefill: vec_dot_m) and of single-token steps after it (decode: vec_dot_rows,
 * attention at growing depth) must match to the bit, with F16 and F32 KV caches, on the
 * tiny Mixtral files of ../shared and on generated models wide enough for full groups of 8
 * blocks (rows of 512 and 1024 elements). Under the scalar table (or on a CPU without SIMD
 * tables) both runs use the scalar table and the test checks nothing more than determinism.
 * Also: a MOEINF_KERNELS value that names no table is an error of context init and of the CLI.
 */
#include <unistd.h>

#include "kernels_wanted.h"
#include "moeinf.h"
#include "test.h"

#define N_PROMPT 12
#define N_STEPS  5

/* The table under test: its name, and MOEINF_KERNELS as the test started (NULL if unset). */
static const char *wanted_name;
static char *env_at_start;

/* Sets MOEINF_KERNELS to `value`, or unsets it for NULL (no other thread runs meanwhile). */
static void set_kernels_env(const char *value) {
    if (value)
        setenv("MOEINF_KERNELS", value, 1); /* NOLINT(concurrency-mt-unsafe) */
    else
        unsetenv("MOEINF_KERNELS"); /* NOLINT(concurrency-mt-unsafe) */
}

static float *run_logits(const char *path, bool scalar, enum moeinf_kv_type kv, int *n_vocab) {
    struct moeinf_error err = {0};
    struct moeinf_model *model = NULL;
    struct moeinf_context *ctx = NULL;
    struct moeinf_model_params mp = moeinf_model_params_default();
    float *logits = NULL;
    /* The context picks its kernel table from MOEINF_KERNELS at init. */
    set_kernels_env(scalar ? "scalar" : env_at_start);
    CHECK_MSG(moeinf_model_load(path, &mp, &model, &err) == MOEINF_OK, "%s", err.msg);
    if (!model) goto done;
    struct moeinf_context_params cp = moeinf_context_params_default();
    cp.n_ctx = 64;
    cp.n_threads = 2;
    cp.kv_type = kv;
    CHECK_MSG(moeinf_context_init(model, &cp, &ctx, &err) == MOEINF_OK, "%s", err.msg);
    if (!ctx) goto done;
    const char *want = scalar ? "scalar" : wanted_name;
    CHECK_MSG(strcmp(moeinf_context_kernels(ctx), want) == 0, "context runs %s, not %s",
              moeinf_context_kernels(ctx), want);
    *n_vocab = moeinf_model_n_vocab(model);
    int32_t ids[N_PROMPT + N_STEPS];
    for (int i = 0; i < N_PROMPT + N_STEPS; i++)
        ids[i] = (int32_t)((i * 7919 + 3) % *n_vocab);
    logits = malloc((size_t)(N_PROMPT + N_STEPS) * (size_t)*n_vocab * sizeof(float));
    if (!logits) goto done;
    CHECK(moeinf_decode(ctx, ids, N_PROMPT, logits, true, &err) == MOEINF_OK);
    for (int i = 0; i < N_STEPS; i++)
        CHECK(moeinf_decode(ctx, &ids[N_PROMPT + i], 1,
                            logits + (size_t)(N_PROMPT + i) * (size_t)*n_vocab, false,
                            &err) == MOEINF_OK);
done:
    moeinf_context_free(ctx);
    moeinf_model_free(model);
    set_kernels_env(env_at_start);
    return logits;
}

static void check_model(const char *path) {
    const enum moeinf_kv_type kvs[] = {MOEINF_KV_F16, MOEINF_KV_F32};

    for (int k = 0; k < 2; k++) {
        int nv_ref = 0;
        int nv = 0;
        float *ref = run_logits(path, true, kvs[k], &nv_ref);
        float *got = run_logits(path, false, kvs[k], &nv);
        if (ref && got && nv == nv_ref) {
            size_t count = (size_t)(N_PROMPT + N_STEPS) * (size_t)nv;
            size_t n_diff = 0;
            size_t first = count;
            for (size_t i = 0; i < count; i++) {
                uint32_t a;
                uint32_t b;
                memcpy(&a, &ref[i], 4);
                memcpy(&b, &got[i], 4);
                if (a != b && n_diff++ == 0) first = i;
            }
            CHECK_MSG(n_diff == 0,
                      "%s kv %s: %zu logits of the %s table differ from the scalar "
                      "table's, first at token %zu",
                      path, k ? "f32" : "f16", n_diff, wanted_name, first / (size_t)nv);
        } else {
            CHECK(ref && got && nv == nv_ref);
        }
        free(ref);
        free(got);
    }
}

static void test_shared_models(void) {
    const char *names[] = {"testdata/models/tiny-mixtral-F32.gguf",
                           "testdata/models/tiny-mixtral-Q8_0.gguf",
                           "testdata/models/tiny-mixtral-Q4_0.gguf"};
    for (int i = 0; i < 3; i++) {
        char path[1024];
        if (!test_shared_path(names[i], path, sizeof path)) return;
        check_model(path);
    }
}

static void test_generated_models(void) {
    const int types[] = {2, 8}; /* Q4_0, Q8_0 */
    for (int i = 0; i < 2; i++) {
        char path[1024];
        char name[64];
        /* Named per process: ctest -j may run the per-table entries at once. */
        snprintf(name, sizeof name, "kernels_logits_%s_%d_%d.gguf", wanted_name, types[i],
                 (int)getpid());
        test_tmp_path(name, path, sizeof path);
        struct moeinf_gen_params gp = moeinf_gen_params_default();
        gp.n_layer = 2;
        gp.n_expert = 4;
        gp.n_expert_used = 2;
        gp.n_embd = 512;
        gp.n_ff = 1024;
        gp.n_head = 8;
        gp.n_head_kv = 2;
        gp.type = types[i];
        gp.seed = 11 + (uint64_t)i;
        struct moeinf_error err = {0};
        CHECK_MSG(moeinf_gen_model(&gp, path, &err) == MOEINF_OK, "%s", err.msg);
        check_model(path);
        remove(path);
    }
}

/* An unknown MOEINF_KERNELS value: context init fails with MOEINF_ERR_ARG naming the value
 * and the choices, and the CLI prints that as its one error line and exits 1 (a failed
 * context init, docs/USAGE.md#environment). */
static void test_unknown_table_name(void) {
    char path[1024];
    char name[64];
    snprintf(name, sizeof name, "kernels_unknown_%s_%d.gguf", wanted_name, (int)getpid());
    test_tmp_path(name, path, sizeof path);
    struct moeinf_gen_params gp = moeinf_gen_params_default();
    gp.n_layer = 1;
    gp.n_embd = 64;
    gp.n_ff = 64;
    gp.n_head = 4;
    gp.n_head_kv = 2;
    gp.n_expert = 4;
    gp.n_expert_used = 2;
    struct moeinf_error err = {0};
    CHECK_MSG(moeinf_gen_model(&gp, path, &err) == MOEINF_OK, "%s", err.msg);
    struct moeinf_model *model = NULL;
    struct moeinf_model_params mp = moeinf_model_params_default();
    CHECK_MSG(moeinf_model_load(path, &mp, &model, &err) == MOEINF_OK, "%s", err.msg);
    const char *want_msg =
        "MOEINF_KERNELS=avx9 names no kernel table (scalar, avx2, avx512, amx, neon or dotprod)";
    set_kernels_env("avx9");
    if (model) {
        struct moeinf_context *ctx = NULL;
        struct moeinf_context_params cp = moeinf_context_params_default();
        cp.n_ctx = 16;
        CHECK(moeinf_context_init(model, &cp, &ctx, &err) == MOEINF_ERR_ARG);
        CHECK(ctx == NULL);
        CHECK(strcmp(err.msg, want_msg) == 0);
        moeinf_context_free(ctx);
    }
    moeinf_model_free(model);
    char args[1200];
    char out[4096];
    char errs[4096];
    char want_line[256];
    snprintf(args, sizeof args, "run -m '%s' -p hi -n 2", path);
    snprintf(want_line, sizeof want_line, "moeinf: %s\n", want_msg);
    int rc = test_run_moeinf(name, args, out, sizeof out, errs, sizeof errs);
    set_kernels_env(env_at_start);
    if (rc == -1 && !getenv("MOEINF_BIN")) { /* NOLINT(concurrency-mt-unsafe): main thread */
        test_skip("MOEINF_BIN is unset (run under ctest for the CLI half)");
    } else {
        CHECK_EQ_INT(rc, 1);
        CHECK_MSG(strcmp(errs, want_line) == 0, "stderr: %s", errs);
        CHECK_MSG(out[0] == '\0', "stdout: %s", out);
    }
    remove(path);
}

int main(void) {
    const struct moeinf_kernels *wanted = NULL;
    int rc = test_kernels_wanted(&wanted);
    if (!wanted) return rc;
    wanted_name = wanted->name;
    const char *env = getenv("MOEINF_KERNELS"); /* NOLINT(concurrency-mt-unsafe): main thread */
    env_at_start = env ? strdup(env) : NULL;
    RUN(test_shared_models);
    RUN(test_generated_models);
    RUN(test_unknown_table_name);
    free(env_at_start);
    return test_report();
}
