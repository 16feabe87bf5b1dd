/*
 * test_golden.c - moeinf against llama.cpp's outputs for the tiny Mixtral models
 * (../shared/testdata/golden): prompt token ids identical; logits of every position within
 * the testdata README's tolerances (section 2.4); the experts chosen identical wherever
 * the router's decision is not a near-tie; greedy continuations identical up to the first
 * step whose golden margin is within our error bound.
 *
 * Tolerances (max |logit difference| at any position):
 *   F32 weights, F32 KV, no flash attention ("-kvf32-nofa")   1e-2 (plain F32 math)
 *   F32 weights, default context (F16 KV + flash attention)    0.25
 *   Q8_0 / Q4_0, "-kvf32-nofa" (exact Q8_0 activation quantization)   0.5, argmax equal
 *                                                                wherever margin > 1
 *   quantized, default context: smoke test: argmax equal wherever margin > 1
 * The greedy bound: a step is compared while llama.cpp's margin between its top two logits
 * exceeds twice the logit tolerance (0.05 for quantized weights with F32 KV, whose exact
 * activation-quantization emulation measures ~1e-5; 1.0 for quantized default contexts);
 * past the first step below it the texts may diverge for good, so comparison stops there.
 */
#include <dirent.h>

#include "engine.h"
#include "golden.h"
#include "test.h"

#define MAX_TOK 64

struct golden {
    char name[160];
    char *json;
    int n_tokens;
    double tokens[MAX_TOK];
    int n_greedy;
    double greedy[MAX_TOK];
    double margin[MAX_TOK];
    bool kv_f32;
    float *logits; /* n_tokens x n_vocab */
};

static bool load_golden(const char *dir, const char *json_name, int n_vocab, struct golden *g) {
    char path[1024];
    memset(g, 0, sizeof *g);
    snprintf(g->name, sizeof g->name, "%s", json_name);
    snprintf(path, sizeof path, "%s/%s", dir, json_name);
    g->json = golden_read_file(path, NULL);
    CHECK_MSG(g->json != NULL, "%s", path);
    if (!g->json) return false;
    g->n_tokens = golden_numbers(golden_find(g->json, "tokens"), g->tokens, MAX_TOK);
    const char *greedy = golden_find(g->json, "greedy");
    g->n_greedy = golden_numbers(golden_find(greedy, "tokens"), g->greedy, MAX_TOK);
    golden_numbers(golden_find(greedy, "margin_to_second"), g->margin, MAX_TOK);
    const char *tk = golden_find(g->json, "type_k");
    g->kv_f32 = tk && !strncmp(tk, "\"f32\"", 5);
    CHECK(g->n_tokens > 0 && g->n_greedy == 16);
    snprintf(path, sizeof path, "%s/%.*s.logits.f32", dir, (int)(strlen(json_name) - 5), json_name);
    size_t size = 0;
    g->logits = (float *)golden_read_file(path, &size);
    CHECK_MSG(g->logits && size == (size_t)g->n_tokens * n_vocab * sizeof(float), "%s", path);
    return g->logits && g->n_tokens > 0;
}

static void free_golden(struct golden *g) {
    free(g->json);
    free(g->logits);
}

static int argmax(const float *x, int n) {
    int best = 0;
    for (int i = 1; i < n; i++) {
        if (x[i] > x[best]) best = i;
    }
    return best;
}

/* Experts chosen at prompt position j in layer il must equal llama.cpp's where the gap
 * between the k-th and (k+1)-th router probability exceeds 1e-3. */
static void check_routing(struct moeinf_context *ctx, const struct golden *g) {
    const struct moeinf_hparams *hp = &ctx->model->llm->hp;
    const int n_expert = hp->n_expert;
    const int top_k = hp->n_expert_used;
    const char *routing = golden_find(g->json, "routing");
    const char *prompt = golden_find(routing, "prompt");
    int checked = 0;
    CHECK(n_expert <= 16 && top_k <= 8); /* the buffers below */
    if (n_expert > 16 || top_k > 8) return;
    for (int il = 0; il < hp->n_layer; il++) {
        char key[8];
        snprintf(key, sizeof key, "%d", il);
        const char *layer = golden_find(prompt, key);
        double topk[MAX_TOK * 8];
        double probs[MAX_TOK * 16];
        int nt = golden_numbers(golden_find(layer, "topk"), topk, MAX_TOK * 8);
        int np = golden_numbers(golden_find(layer, "probs"), probs, MAX_TOK * 16);
        CHECK(nt == g->n_tokens * top_k && np == g->n_tokens * n_expert);
        if (nt != g->n_tokens * top_k || np != g->n_tokens * n_expert) return;
        for (int j = 0; j < g->n_tokens; j++) {
            double sorted[64];
            for (int e = 0; e < n_expert; e++)
                sorted[e] = probs[j * n_expert + e];
            for (int a = 0; a < n_expert; a++) {
                for (int b = a + 1; b < n_expert; b++) {
                    if (sorted[b] > sorted[a]) {
                        double t = sorted[a];
                        sorted[a] = sorted[b];
                        sorted[b] = t;
                    }
                }
            }
            if (top_k < n_expert && sorted[top_k - 1] - sorted[top_k] < 1e-3)
                continue; /* near tie */
            const int32_t *sel = moeinf_fwd_routing(ctx->fwd, il, j);
            for (int r = 0; r < top_k; r++) {
                CHECK_MSG(sel[r] == (int32_t)topk[j * top_k + r],
                          "%s layer %d pos %d rank %d: %d vs %d", g->name, il, j, r, sel[r],
                          (int)topk[j * top_k + r]);
            }
            checked++;
        }
    }
    CHECK(checked > 0);
}

static void check_one(const char *model_path, const char *dir, const char *json_name,
                      bool quantized) {
    struct moeinf_error err = {0};
    struct moeinf_model *model = NULL;
    struct moeinf_model_params mp = moeinf_model_params_default();
    CHECK_MSG(moeinf_model_load(model_path, &mp, &model, &err) == MOEINF_OK, "%s", err.msg);
    if (!model) return;
    const int n_vocab = moeinf_model_n_vocab(model);
    struct golden g;
    if (!load_golden(dir, json_name, n_vocab, &g)) {
        free_golden(&g);
        moeinf_model_free(model);
        return;
    }
    /* tokenization */
    char prompt[512];
    int plen = golden_prompt(g.json, prompt, sizeof prompt);
    int32_t *ids = NULL;
    size_t n_ids = 0;
    CHECK(plen >= 0);
    CHECK_MSG(moeinf_tokenize(model, prompt, (size_t)plen, true, false, &ids, &n_ids, &err) ==
                  MOEINF_OK, "%s", err.msg);
    CHECK_EQ_INT(n_ids, g.n_tokens);
    for (size_t i = 0; i < n_ids && (int)i < g.n_tokens; i++) {
        CHECK_MSG(ids[i] == (int32_t)g.tokens[i], "%s token %zu: %d vs %d", g.name, i, ids[i],
                  (int)g.tokens[i]);
    }
    free(ids);
    /* logits of every prompt position, from the golden token ids */
    struct moeinf_context_params cp = moeinf_context_params_default();
    cp.n_ctx = 64;
    cp.n_threads = 2;
    cp.kv_type = g.kv_f32 ? MOEINF_KV_F32 : MOEINF_KV_F16;
    struct moeinf_context *ctx = NULL;
    CHECK_MSG(moeinf_context_init(model, &cp, &ctx, &err) == MOEINF_OK, "%s", err.msg);
    int32_t toks[MAX_TOK];
    for (int i = 0; i < g.n_tokens; i++) toks[i] = (int32_t)g.tokens[i];
    float *logits = malloc((size_t)g.n_tokens * n_vocab * sizeof(float));
    CHECK(ctx && logits);
    if (!ctx || !logits) goto done;
    CHECK(moeinf_decode(ctx, toks, g.n_tokens, logits, true, &err) == MOEINF_OK);
    double tol = quantized ? (g.kv_f32 ? 0.5 : 1e30) : (g.kv_f32 ? 1e-2 : 0.25);
    double max_diff = 0.0;
    for (int j = 0; j < g.n_tokens; j++) {
        const float *ours = logits + (size_t)j * n_vocab;
        const float *ref = g.logits + (size_t)j * n_vocab;
        double d = 0.0;
        for (int v = 0; v < n_vocab; v++) {
            double e = fabs((double)ours[v] - (double)ref[v]);
            d = e > d ? e : d;
        }
        max_diff = d > max_diff ? d : max_diff;
        CHECK_MSG(d <= tol, "%s position %d: max |diff| %.4g > %.3g", g.name, j, d, tol);
        /* argmax equal where llama.cpp's top two are more than 1 apart */
        int ra = argmax(ref, n_vocab);
        float second = -INFINITY;
        for (int v = 0; v < n_vocab; v++) {
            if (v != ra && ref[v] > second) second = ref[v];
        }
        if (ref[ra] - second > (quantized ? 1.0f : 2 * (float)tol)) {
            CHECK_MSG(argmax(ours, n_vocab) == ra, "%s position %d: argmax %d vs %d", g.name, j,
                      argmax(ours, n_vocab), ra);
        }
    }
    fprintf(stderr, "  %s/%s: max |logit diff| %.3g over %d positions\n", strrchr(dir, '/') + 1,
            g.name, max_diff, g.n_tokens);
    if (!quantized && g.kv_f32) check_routing(ctx, &g);
    /* greedy continuation */
    /* quantized with F32 KV emulates llama.cpp's Q8_0 activation rounding exactly (measured
     * |diff| ~1e-5), so its greedy steps are compared down to a 0.05 margin */
    double bound = quantized ? (g.kv_f32 ? 0.05 : 1.0) : 2 * tol;
    float *last = logits + (size_t)(g.n_tokens - 1) * n_vocab;
    int compared = 0;
    for (int s = 0; s < g.n_greedy; s++) {
        if (g.margin[s] <= bound) break;
        int32_t tok = argmax(last, n_vocab);
        CHECK_MSG(tok == (int32_t)g.greedy[s], "%s greedy step %d: %d vs %d", g.name, s, tok,
                  (int)g.greedy[s]);
        if (tok != (int32_t)g.greedy[s]) break;
        compared++;
        if (s + 1 < g.n_greedy) {
            CHECK(moeinf_decode(ctx, &tok, 1, last, false, &err) == MOEINF_OK);
        }
    }
    fprintf(stderr, "  greedy: %d of %d steps compared\n", compared, g.n_greedy);
done:
    free(logits);
    moeinf_context_free(ctx);
    free_golden(&g);
    moeinf_model_free(model);
}

static void check_model(const char *stem, bool quantized) {
    char model_rel[256];
    char dir_rel[256];
    char model_path[1024];
    char dir[1024];
    snprintf(model_rel, sizeof model_rel, "testdata/models/%s.gguf", stem);
    snprintf(dir_rel, sizeof dir_rel, "testdata/golden/%s", stem);
    if (!test_shared_path(model_rel, model_path, sizeof model_path)) return;
    test_shared_path(dir_rel, dir, sizeof dir);
    DIR *d = opendir(dir);
    CHECK_MSG(d != NULL, "%s", dir);
    if (!d) return;
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d))) { /* NOLINT(concurrency-mt-unsafe): main thread */
        size_t len = strlen(e->d_name);
        if (len > 5 && !strcmp(e->d_name + len - 5, ".json")) {
            check_one(model_path, dir, e->d_name, quantized);
            n++;
        }
    }
    closedir(d);
    CHECK(n >= 2);
}

static void test_mixtral_f32(void) {
    check_model("tiny-mixtral-F32", false);
}

static void test_mixtral_q8_0(void) {
    check_model("tiny-mixtral-Q8_0", true);
}

static void test_mixtral_q4_0(void) {
    check_model("tiny-mixtral-Q4_0", true);
}

int main(void) {
    RUN(test_mixtral_f32);
    RUN(test_mixtral_q8_0);
    RUN(test_mixtral_q4_0);
    return test_report();
}
