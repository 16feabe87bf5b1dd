// ctest-labels: threads
/*
 * test_threads.c - results are bit-identical for any thread count and any prefill
 * micro-batch size: every output element is computed by one kernel call whatever the split
 * (compute/matmul.h), so logits at -t 1, 2, 3 and 7 and at micro-batches 1, 5 and 512 must
 * match to the bit. The tiny Mixtral shapes (64-wide rows, 8 experts, 15 tokens) do not
 * divide evenly by 3 or 7.
 */
#include "golden.h"
#include "moeinf.h"
#include "test.h"

static float *run_logits(const char *path, int n_threads, int n_batch, const int32_t *ids, int n,
                         int *n_vocab) {
    struct moeinf_error err = {0};
    struct moeinf_model *model = NULL;
    struct moeinf_context *ctx = NULL;
    struct moeinf_model_params mp = moeinf_model_params_default();
    float *logits = NULL;
    CHECK_MSG(moeinf_model_load(path, &mp, &model, &err) == MOEINF_OK, "%s", err.msg);
    if (!model) return NULL;
    struct moeinf_context_params cp = moeinf_context_params_default();
    cp.n_ctx = 32;
    cp.n_threads = n_threads;
    cp.n_batch = n_batch;
    CHECK(moeinf_context_init(model, &cp, &ctx, &err) == MOEINF_OK);
    *n_vocab = moeinf_model_n_vocab(model);
    logits = malloc((size_t)(n + 4) * *n_vocab * sizeof(float));
    if (ctx && logits) {
        CHECK(moeinf_decode(ctx, ids, n, logits, true, &err) == MOEINF_OK);
        /* and four single-token decode steps after the prompt */
        for (int i = 0; i < 4; i++) {
            CHECK(moeinf_decode(ctx, &ids[i], 1, logits + (size_t)(n + i) * *n_vocab, false,
                                &err) == MOEINF_OK);
        }
    }
    moeinf_context_free(ctx);
    moeinf_model_free(model);
    return logits;
}

static void check_model(const char *rel) {
    char path[1024];
    if (!test_shared_path(rel, path, sizeof path)) return;
    const int32_t ids[15] = {1, 822, 788, 29898, 29874, 29892, 289, 1125, 13, 1678, 736, 263, 718, 289, 13};
    const int n = 15;
    int n_vocab = 0;
    float *ref = run_logits(path, 1, 512, ids, n, &n_vocab);
    if (!ref) return;
    const int threads[] = {2, 3, 7, 1, 3};
    const int batches[] = {512, 512, 512, 5, 1};
    for (int c = 0; c < 5; c++) {
        int nv = 0;
        float *got = run_logits(path, threads[c], batches[c], ids, n, &nv);
        if (!got) continue;
        size_t count = (size_t)(n + 4) * n_vocab;
        CHECK_MSG(memcmp(ref, got, count * sizeof(float)) == 0, "%s: -t %d -b %d differs", rel,
                  threads[c], batches[c]);
        free(got);
    }
    free(ref);
}

static void test_bit_identical_f32(void) {
    check_model("testdata/models/tiny-mixtral-F32.gguf");
}

static void test_bit_identical_q4_0(void) {
    check_model("testdata/models/tiny-mixtral-Q4_0.gguf");
}

int main(void) {
    RUN(test_bit_identical_f32);
    RUN(test_bit_identical_q4_0);
    return test_report();
}
