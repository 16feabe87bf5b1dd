/*
 * test_serve_batch.c - continuous batching in `moeinf serve` through real HTTP clients (curl) on
 * a free loopback port, against tiny-mixtral-Q8_0. Requests of different prompt lengths and
 * answer lengths, sent at once (streamed and not) to a server of 4 sequences, each get the text
 * `moeinf run` writes for the same prompt alone: a request's output does not depend on who
 * else is in the batch. The same with more requests than sequences (they wait in the queue and
 * take the sequences as they free up), with an expert cache, and with a client that leaves in
 * the middle while the others go on.
 */
// ctest-labels: threads
#include <stdlib.h>
#include <unistd.h>

#include "serve_proc.h"
#include "serve_text.h"
#include "test.h"

#define MODEL "testdata/models/tiny-mixtral-Q8_0.gguf"
#define N_REQ 6

static char model_path[1024];

static const char *const prompts[N_REQ] = {
    "Once upon a time",
    "Hi",
    "The quick brown fox jumps over the lazy dog, then the dog runs after the fox through the",
    "In the beginning there was",
    "A",
    "Tell me a story about a cat and a mouse who were friends",
};
static int max_tokens[N_REQ] = {12, 20, 9, 16, 24, 7};

/* The text `moeinf run` generates greedily for prompt i (stdout less the prompt and the final
 * newline). */
static bool run_text(int i, char *text, size_t size) {
    char args[2048];
    char out[8192];
    char err[4096];
    snprintf(args, sizeof args, "run -m '%s' -p '%s' --temp 0 -n %d", model_path, prompts[i],
             max_tokens[i]);
    if (test_run_moeinf("serve-batch-run", args, out, sizeof out, err, sizeof err) != 0) {
        return false;
    }
    size_t n = strlen(out);
    size_t np = strlen(prompts[i]);
    if (n < np + 1 || strncmp(out, prompts[i], np) != 0 || out[n - 1] != '\n') return false;
    snprintf(text, size, "%.*s", (int)(n - np - 1), out + np);
    return true;
}

static char expected[N_REQ][4096];

/* Sends requests first .. first + n - 1 at once (even ones streamed); with `leaver`, one more
 * client asks for a long answer and leaves after 0.3 s. Checks each answer against `moeinf
 * run`'s text. */
static void concurrent(const struct server *s, int first, int n, bool leaver) {
    char cmd[16384];
    char paths[N_REQ][512];
    /* one curl opens every connection at once (-Z --parallel-immediate): the requests arrive
     * within a few milliseconds, well inside each other's answers */
    size_t len =
        (size_t)snprintf(cmd, sizeof cmd, "curl -s -Z --parallel-immediate --parallel-max 16");
    for (int k = 0; k < n; k++) {
        const int i = first + k;
        char name[64];
        snprintf(name, sizeof name, "serve-batch-%d-%d", (int)getpid(), i);
        test_tmp_path(name, paths[i], sizeof paths[i]);
        len += (size_t)snprintf(cmd + len, sizeof cmd - len,
                                "%s -N --max-time 120 -o '%s' -d '{\"prompt\": \"%s\", "
                                "\"max_tokens\": %d, "
                                "\"temperature\": 0, \"stream\": %s}' "
                                "http://127.0.0.1:%d/v1/completions",
                                k ? " --next" : "", paths[i], prompts[i], max_tokens[i],
                                i % 2 ? "false" : "true", s->port);
    }
    if (leaver) { /* one more asks for a long answer and leaves after 0.3 s */
        snprintf(cmd + len, sizeof cmd - len,
                 " & curl -s -N -o /dev/null --max-time 0.3 -d '{\"prompt\": \"Go\", "
                 "\"max_tokens\": 4000, \"stream\": true}' http://127.0.0.1:%d/v1/completions; "
                 "wait",
                 s->port);
    }
    char out[256];
    char err[4096];
    test_run_shell("serve-batch", cmd, out, sizeof out, err, sizeof err);
    for (int k = 0; k < n; k++) {
        const int i = first + k;
        static char body[65536];
        char text[4096];
        char finish[16];
        test_read_text(paths[i], body, sizeof body);
        remove(paths[i]);
        CHECK_MSG(response_text(body, false, text, sizeof text, finish, NULL),
                  "request %d: no answer: %.200s", i, body);
        CHECK_MSG(!strcmp(text, expected[i]), "request %d (%s): \"%s\", alone \"%s\"", i,
                  i % 2 ? "json" : "stream", text, expected[i]);
        CHECK_MSG(!strcmp(finish, "length"), "request %d: finish %s", i, finish);
    }
}

static void with_server(const char *tag, const char *args, bool leaver) {
    struct server s;
    if (!serve_proc_start(&s, tag, NULL, "127.0.0.1", model_path, args, NULL, 0)) {
        CHECK_MSG(false, "%s: the server did not start", tag);
        return;
    }
    concurrent(&s, 0, 4, false);      /* as many requests as sequences */
    concurrent(&s, 0, N_REQ, leaver); /* more: the rest wait for a free sequence */
    /* one alone afterwards: still the same text (a sequence that kept a prefix reuses it) */
    concurrent(&s, 2, 1, false);
    /* every request had a first token; nothing runs now */
    static char m[1 << 16];
    CHECK_EQ_INT(serve_http(&s, "GET", "/metrics", NULL, NULL, m, sizeof m), 200);
    CHECK(serve_metric(m, "moeinf_time_to_first_token_seconds_count") >= 4 + N_REQ + 1);
    CHECK(serve_metric(m, "moeinf_active_sequences") == 0);
    CHECK(serve_metric(m, "moeinf_decode_tokens_per_second") > 0);
    CHECK_EQ_INT(serve_proc_stop(&s), 0);
}

static void test_batched_text_is_alone_text(void) {
    with_server("serve-batch-a", "--parallel 4 -c 1024 -t 2", false);
}

static void test_batched_expert_cache_and_leaver(void) {
    with_server("serve-batch-b",
                "--parallel 3 -c 768 -t 2 --expert-cache 50% --expert-io cached --queue 16", true);
}

/* Long answers (160 tokens each) sent at once to 4 sequences overlap whatever the machine's
 * load: one request after another would take a forward pass per token fed back (159 each, 636
 * in all) and more for the prompts; together they took fewer than half as many (318). (Fails with
 * --parallel 1: every token is then a pass of its own.) */
static void test_requests_share_iterations(void) {
    for (int i = 0; i < 4; i++) {
        max_tokens[i] = 160;
        CHECK(run_text(i, expected[i], sizeof expected[i]));
    }
    struct server s;
    if (!serve_proc_start(&s, "serve-batch-c", NULL, "127.0.0.1", model_path,
                          "--parallel 4 -c 2048 -t 2", NULL, 0)) {
        CHECK_MSG(false, "the server did not start");
        return;
    }
    concurrent(&s, 0, 4, false);
    static char m[1 << 16];
    CHECK_EQ_INT(serve_http(&s, "GET", "/metrics", NULL, NULL, m, sizeof m), 200);
    const double passes = serve_metric(m, "moeinf_batch_tokens_count");
    CHECK_MSG(passes > 0 && passes < 318, "%g forward passes for 636 tokens fed back", passes);
    CHECK_EQ_INT(serve_proc_stop(&s), 0);
}

int main(void) {
    if (!test_shared_path(MODEL, model_path, sizeof model_path)) return test_report();
    if (!getenv("MOEINF_BIN")) { // NOLINT(concurrency-mt-unsafe): main thread
        test_skip("MOEINF_BIN unset (run through ctest)");
        return test_report();
    }
    bool ok = true;
    for (int i = 0; i < N_REQ && ok; i++) {
        ok = run_text(i, expected[i], sizeof expected[i]);
        CHECK_MSG(ok, "moeinf run failed for prompt %d", i);
    }
    if (ok) {
        RUN(test_batched_text_is_alone_text);
        RUN(test_batched_expert_cache_and_leaver);
        RUN(test_requests_share_iterations);
    }
    return test_report();
}
