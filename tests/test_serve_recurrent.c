// ctest-labels: threads
/*
 * test_serve_recurrent.c - the server's prefix reuse on a model with a recurrent state (the
 * tiny qwen35moe: Gated DeltaNet layers) and on one with sliding windows (the tiny gpt-oss:
 * window 16, the prompts longer). A request that shares a prefix with the one before goes
 * back to the latest state checkpoint within that prefix (one after each prefill
 * micro-batch, -b 4 here; the 6 tokens generated since put the prefix more than a
 * micro-batch back, beyond where a window goes back in place) and evaluates the rest; its
 * greedy answer and logprobs must be those of a server that never saw the first request,
 * and the cached tokens must be the checkpoint's position.
 */
#include <cjson/cJSON.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include "moeinf.h"
#include "serve_proc.h"
#include "test.h"

#define ARGS  "-c 256 -b 4 -t 1"
#define FIRST "The quick brown fox jumps over the lazy dog"
#define NEXT  FIRST " and the cat sleeps on the mat"

/* A greedy completion with logprobs: its JSON into out. */
static bool complete(struct server *s, const char *prompt, char *out, size_t out_size) {
    char body[512];
    snprintf(body, sizeof body,
             "{\"prompt\": \"%s\", \"max_tokens\": 6, \"temperature\": 0, \"logprobs\": 3}",
             prompt);
    int st = serve_http(s, "POST", "/v1/completions", body, NULL, out, out_size);
    CHECK_MSG(st == 200, "%s: status %d: %s", prompt, st, out);
    return st == 200;
}

/* The choice (text and logprobs) as one string, and usage.prompt_tokens_details.cached_tokens. */
static char *choice_of(const char *json, int *cached) {
    cJSON *root = cJSON_Parse(json);
    cJSON *choice = cJSON_GetArrayItem(cJSON_GetObjectItem(root, "choices"), 0);
    cJSON *details =
        cJSON_GetObjectItem(cJSON_GetObjectItem(root, "usage"), "prompt_tokens_details");
    cJSON *c = cJSON_GetObjectItem(details, "cached_tokens");
    *cached = cJSON_IsNumber(c) ? (int)c->valuedouble : -1;
    char *s = NULL;
    if (choice) {
        cJSON_DeleteItemFromObject(choice, "index");
        s = cJSON_PrintUnformatted(choice);
    }
    cJSON_Delete(root);
    return s;
}

static void prefix_reuse_matches_fresh(const char *rel, size_t min_common) {
    char model_path[1024];
    test_src_path(rel, model_path, sizeof model_path);
    struct moeinf_model *model = NULL;
    struct moeinf_error err = {0};
    CHECK_EQ_INT(moeinf_model_load(model_path, NULL, &model, &err), MOEINF_OK);
    if (!model) return;
    int32_t *first = NULL;
    int32_t *next = NULL;
    size_t n_first = 0;
    size_t n_next = 0;
    CHECK(moeinf_tokenize(model, FIRST, strlen(FIRST), true, false, &first, &n_first, &err) == 0);
    CHECK(moeinf_tokenize(model, NEXT, strlen(NEXT), true, false, &next, &n_next, &err) == 0);
    size_t common = 0;
    while (common < n_first && common < n_next && first[common] == next[common])
        common++;
    CHECK_MSG(common >= min_common && common < n_next, "%s: a common prefix of %zu tokens", rel,
              common);

    struct server warm;
    struct server fresh;
    static char a[1 << 16];
    static char b[1 << 16];
    static char c[1 << 16];
    bool warm_up =
        serve_proc_start(&warm, "serve-rec-warm", NULL, "127.0.0.1", model_path, ARGS, NULL, 0);
    bool fresh_up =
        serve_proc_start(&fresh, "serve-rec-fresh", NULL, "127.0.0.1", model_path, ARGS, NULL, 0);
    CHECK(warm_up && fresh_up);
    if (warm_up && fresh_up && complete(&warm, FIRST, a, sizeof a) &&
        complete(&warm, NEXT, b, sizeof b) && complete(&fresh, NEXT, c, sizeof c)) {
        int cached_b = 0;
        int cached_c = 0;
        char *got = choice_of(b, &cached_b);
        char *want = choice_of(c, &cached_c);
        CHECK(got && want);
        if (got && want) CHECK_MSG(!strcmp(got, want), "reused: %s\nfresh: %s", got, want);
        /* the state came from the checkpoint after the last whole micro-batch of 4 within the
         * common prefix, or after the first prompt itself */
        int want_cached = (int)(common / 4 * 4);
        if (common == n_first && (int)n_first < (int)n_next) want_cached = (int)n_first;
        CHECK_MSG(cached_b == want_cached, "cached %d tokens, want %d (common prefix %zu)",
                  cached_b, want_cached, common);
        CHECK_EQ_INT(cached_c, 0);
        free(got);
        free(want);
    }
    if (warm_up) CHECK_EQ_INT(serve_proc_stop(&warm), 0);
    if (fresh_up) CHECK_EQ_INT(serve_proc_stop(&fresh), 0);
    free(first);
    free(next);
    moeinf_model_free(model);
}

static void test_prefix_reuse_recurrent(void) {
    prefix_reuse_matches_fresh("tests/data/models/tiny-qwen35moe-F32.gguf", 8);
}

/* the common prefix longer than the window (16) */
static void test_prefix_reuse_sliding_window(void) {
    prefix_reuse_matches_fresh("tests/data/models/tiny-gptoss-MXFP4.gguf", 17);
}

int main(void) {
    if (!getenv("MOEINF_BIN")) { // NOLINT(concurrency-mt-unsafe): main thread
        test_skip("MOEINF_BIN unset (run through ctest)");
        return test_report();
    }
    signal(SIGPIPE, SIG_IGN);
    RUN(test_prefix_reuse_recurrent);
    RUN(test_prefix_reuse_sliding_window);
    return test_report();
}
