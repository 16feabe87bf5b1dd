/*
 * test_record.c - the engine records its own expert routing as a moe-trace v1 file that the
 * trace reader accepts, and what it records is llama.cpp's routing: for the tiny Mixtral
 * "code" prompt (F32 KV) and its 15 greedy decode steps, every (token, layer) whose router
 * decision is not a near-tie (k-th minus (k+1)-th probability > 1e-3) lists llama.cpp's
 * experts in llama.cpp's order (golden routing.prompt and routing.greedy_steps).
 */
#include "golden.h"
#include "moeinf.h"
#include "trace/trace.h"
#include "test.h"

#define K 2
#define X 8
#define LAYERS 2
#define MAX_ROWS 40

/* Golden rows of one section ("prompt" or "greedy_steps"): topk[row][K], probs[row][X]. */
static int golden_rows(const char *json, const char *section, int layer, double *topk,
                       double *probs) {
    char key[8];
    snprintf(key, sizeof key, "%d", layer);
    const char *sec = golden_find(golden_find(json, "routing"), section);
    const char *l = golden_find(sec, key);
    int nt = golden_numbers(golden_find(l, "topk"), topk, MAX_ROWS * K);
    int np = golden_numbers(golden_find(l, "probs"), probs, MAX_ROWS * X);
    CHECK(nt > 0 && np == nt / K * X);
    return nt / K;
}

static bool clear_decision(const double *p) {
    double first = -1;
    double second = -1;
    double third = -1; /* the K-th and (K+1)-th largest, K = 2 */
    for (int e = 0; e < X; e++) {
        if (p[e] > first) {
            third = second;
            second = first;
            first = p[e];
        } else if (p[e] > second) {
            third = second;
            second = p[e];
        } else if (p[e] > third) {
            third = p[e];
        }
    }
    return second - third > 1e-3;
}

static void test_record_matches_llamacpp(void) {
    char model_path[1024];
    char json_path[1024];
    char trace_path[512];
    if (!test_shared_path("testdata/models/tiny-mixtral-F32.gguf", model_path, sizeof model_path)) {
        return;
    }
    test_shared_path("testdata/golden/tiny-mixtral-F32/code-kvf32-nofa.json", json_path,
                     sizeof json_path);
    test_tmp_path("record.trace", trace_path, sizeof trace_path);
    char *json = golden_read_file(json_path, NULL);
    CHECK(json != NULL);
    if (!json) return;
    double tokens[64];
    double greedy[64];
    int n_prompt = golden_numbers(golden_find(json, "tokens"), tokens, 64);
    int n_greedy = golden_numbers(golden_find(golden_find(json, "greedy"), "tokens"), greedy, 64);
    struct moeinf_error err = {0};
    struct moeinf_model *model = NULL;
    struct moeinf_context *ctx = NULL;
    struct moeinf_model_params mp = moeinf_model_params_default();
    struct moeinf_context_params cp = moeinf_context_params_default();
    cp.n_ctx = 64;
    cp.kv_type = MOEINF_KV_F32;
    CHECK(moeinf_model_load(model_path, &mp, &model, &err) == MOEINF_OK);
    CHECK(model && moeinf_context_init(model, &cp, &ctx, &err) == MOEINF_OK);
    if (!ctx) goto done;
    CHECK_MSG(moeinf_context_record_open(ctx, trace_path, "golden/code", &err) == MOEINF_OK, "%s",
              err.msg);
    CHECK_EQ_INT(moeinf_context_record_open(ctx, trace_path, NULL, &err), MOEINF_ERR_ARG);
    int32_t ids[64];
    for (int i = 0; i < n_prompt; i++) ids[i] = (int32_t)tokens[i];
    CHECK(moeinf_decode(ctx, ids, n_prompt, NULL, false, &err) == MOEINF_OK);
    /* teacher-forced: llama.cpp recorded the decode of greedy tokens 0..14 */
    for (int s = 0; s + 1 < n_greedy; s++) {
        int32_t id = (int32_t)greedy[s];
        CHECK(moeinf_decode(ctx, &id, 1, NULL, false, &err) == MOEINF_OK);
    }
    CHECK_MSG(moeinf_context_record_close(ctx, &err) == MOEINF_OK, "%s", err.msg);

    struct moeinf_trace_reader *r = NULL;
    CHECK_MSG(moeinf_trace_open(trace_path, &r, &err) == MOEINF_OK, "%s", err.msg);
    if (!r) goto done;
    const struct moeinf_trace_header *h = moeinf_trace_header(r);
    CHECK(h->n_layers == LAYERS && h->n_experts == X && h->top_k == K);
    double topk[LAYERS][2][MAX_ROWS * K];
    double probs[LAYERS][2][MAX_ROWS * X];
    int rows[2] = {0, 0};
    for (int il = 0; il < LAYERS; il++) {
        rows[0] = golden_rows(json, "prompt", il, topk[il][0], probs[il][0]);
        rows[1] = golden_rows(json, "greedy_steps", il, topk[il][1], probs[il][1]);
    }
    CHECK_EQ_INT(rows[0], n_prompt);
    CHECK_EQ_INT(rows[1], n_greedy - 1);
    int n_tok = 0;
    int compared = 0;
    for (;;) {
        struct moeinf_trace_token tok;
        bool end = false;
        CHECK(moeinf_trace_read(r, &tok, &end, &err) == MOEINF_OK);
        if (end) break;
        int sec = n_tok < n_prompt ? 0 : 1;
        int row = sec ? n_tok - n_prompt : n_tok;
        CHECK_EQ_INT(tok.phase, sec ? MOEINF_PHASE_DECODE : MOEINF_PHASE_PREFILL);
        CHECK_EQ_INT(tok.request_id, 0);
        if (tok.request_begins) CHECK(tok.request_tag && !strcmp(tok.request_tag, "golden/code"));
        for (int il = 0; il < LAYERS && row < rows[sec]; il++) {
            if (!clear_decision(&probs[il][sec][(size_t)row * X])) continue;
            for (int j = 0; j < K; j++) {
                CHECK_MSG(tok.experts[il * K + j] == (int32_t)topk[il][sec][row * K + j],
                          "token %d layer %d rank %d", n_tok, il, j);
            }
            compared++;
        }
        n_tok++;
    }
    CHECK_EQ_INT(n_tok, n_prompt + n_greedy - 1);
    CHECK(compared > (n_tok * LAYERS) * 3 / 4);
    moeinf_trace_close(r);
done:
    moeinf_context_free(ctx);
    moeinf_model_free(model);
    free(json);
}

int main(void) {
    RUN(test_record_matches_llamacpp);
    return test_report();
}
