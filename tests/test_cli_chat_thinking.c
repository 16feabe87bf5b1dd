/*
 * test_cli_chat_thinking.c - `moeinf chat` with a model that thinks (the in-tree
 * thinking-qwen3moe-F32.gguf, which writes "<think> hmm, ok</think>  Hello" after any prompt),
 * on piped input: by default only the answer shows, turn after turn; --show-thinking shows the
 * thinking first, between [Start thinking] and [End thinking]; --reasoning-format none shows
 * the text as generated; -n inside the thinking leaves an empty answer; with the qwen35
 * template, whose prompt opens the block, all before </think> is thinking, and with --reasoning
 * off, whose prompt closes it, all is answer; unknown names are refused. With the harmony
 * template (gpt-oss), --reasoning-effort and --reasoning off reach the prompt (the token count
 * that a too-small context reports equals moeinf_chat_tokenize's with that effort).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "moeinf.h"
#include "test.h"

#define MODEL "tests/data/models/thinking-qwen3moe-F32.gguf"

/* `printf 'INPUT' | moeinf chat -m MODEL --chat-template chatml OPTS`: the exit code. */
static int chat(const char *input, const char *opts, char *out, size_t out_size, char *err,
                size_t err_size) {
    char path[1024];
    char cmd[4096];
    test_src_path(MODEL, path, sizeof path);
    snprintf(cmd, sizeof cmd, "printf '%s' | '%s' chat -m '%s' --chat-template chatml -c 256 %s",
             input, test_moeinf_bin(), path, opts);
    return test_run_shell("cli-chat-thinking", cmd, out, out_size, err, err_size);
}

static void check_chat(const char *input, const char *opts, const char *want) {
    char out[4096];
    char err[4096];
    int rc = chat(input, opts, out, sizeof out, err, sizeof err);
    CHECK_MSG(rc == 0 && !strcmp(out, want), "chat %s: exit %d, stdout \"%s\" (want \"%s\"): %s",
              opts, rc, out, want, err);
}

static void test_answer_only(void) {
    check_chat("Hi\\nAgain\\n", "", "Hello\nHello\n");
    check_chat("Hi\\n", "--reasoning-format auto --temp 1", "Hello\n");
    check_chat("Hi\\n", "--reasoning-format deepseek", "Hello\n");
}

static void test_show_thinking(void) {
    check_chat("Hi\\nAgain\\n", "--show-thinking",
               "[Start thinking]\nhmm, ok\n[End thinking]\n\nHello\n"
               "[Start thinking]\nhmm, ok\n[End thinking]\n\nHello\n");
    /* stopped inside the thinking (-n 3: "<think>", " hmm,", " ok") */
    check_chat("Hi\\n", "--show-thinking -n 3", "[Start thinking]\nhmm, ok\n[End thinking]\n\n\n");
    check_chat("Hi\\n", "-n 3", "\n");
}

/* qwen35's prompt opens the block: all before "</think>" is thinking */
static void test_prompt_opened(void) {
    char path[1024];
    char cmd[4096];
    char out[4096];
    char err[4096];
    test_src_path(MODEL, path, sizeof path);
    snprintf(cmd, sizeof cmd,
             "printf 'Hi\\n' | '%s' chat -m '%s' --chat-template qwen35 -c 256 --show-thinking",
             test_moeinf_bin(), path);
    int rc = test_run_shell("cli-chat-thinking", cmd, out, sizeof out, err, sizeof err);
    CHECK_MSG(rc == 0 &&
                  !strcmp(out, "[Start thinking]\n<think> hmm, ok\n[End thinking]\n\nHello\n"),
              "qwen35: %d \"%s\": %s", rc, out, err);
}

/* --reasoning off: qwen35's prompt closes an empty block (enable_thinking false), so what the
 * model writes is all answer, even with --show-thinking */
static void test_reasoning_off(void) {
    char path[1024];
    char cmd[4096];
    char out[4096];
    char err[4096];
    test_src_path(MODEL, path, sizeof path);
    snprintf(cmd, sizeof cmd,
             "printf 'Hi\\n' | '%s' chat -m '%s' --chat-template qwen35 -c 256 --show-thinking "
             "--reasoning off",
             test_moeinf_bin(), path);
    int rc = test_run_shell("cli-chat-thinking", cmd, out, sizeof out, err, sizeof err);
    CHECK_MSG(rc == 0 && !strcmp(out, "<think> hmm, ok</think>  Hello\n"), "off: %d \"%s\": %s", rc,
              out, err);
    CHECK_EQ_INT(chat("Hi\\n", "--reasoning maybe", out, sizeof out, err, sizeof err), 2);
    CHECK_STR_CONTAINS(err, "--reasoning 'maybe' is not on, off or auto");
}

static void test_as_generated(void) {
    check_chat("Hi\\n", "--reasoning-format none", "<think> hmm, ok</think>  Hello\n");
    /* a template family that does not think: no split */
    char path[1024];
    char cmd[4096];
    char out[4096];
    char err[4096];
    test_src_path(MODEL, path, sizeof path);
    snprintf(cmd, sizeof cmd, "printf 'Hi\\n' | '%s' chat -m '%s' --chat-template mistral -c 256",
             test_moeinf_bin(), path);
    int rc = test_run_shell("cli-chat-thinking", cmd, out, sizeof out, err, sizeof err);
    CHECK_MSG(rc == 0 && !strcmp(out, "<think> hmm, ok</think>  Hello\n"), "mistral: %d \"%s\"", rc,
              out);
}

static void test_bad_name(void) {
    char out[4096];
    char err[4096];
    CHECK_EQ_INT(chat("Hi\\n", "--reasoning-format think", out, sizeof out, err, sizeof err), 2);
    CHECK_STR_CONTAINS(err, "--reasoning-format 'think' is not none, auto or deepseek");
}

/* harmony: the effort in the prompt. With -c 16 the message is refused, and the refusal names
 * the prompt's tokens: they must be those of the template with that effort. */
static void test_harmony_effort(void) {
    char path[1024];
    char cmd[4096];
    char out[4096];
    char err[4096];
    test_src_path(MODEL, path, sizeof path);
    struct moeinf_model *model = NULL;
    struct moeinf_error merr = {0};
    CHECK_EQ_INT(moeinf_model_load(path, NULL, &model, &merr), MOEINF_OK);
    if (!model) return;

    static const struct {
        const char *opts;
        unsigned flags;
    } cases[] = {
        {"", 0},
        {"--reasoning-effort low", MOEINF_CHAT_EFFORT_LOW},
        {"--reasoning-effort high", MOEINF_CHAT_EFFORT_HIGH},
        {"--reasoning off", MOEINF_CHAT_NO_THINKING},
        {"--reasoning off --reasoning-effort medium", MOEINF_CHAT_EFFORT_MEDIUM},
    };

    size_t n[5] = {0};
    for (size_t i = 0; i < 5; i++) {
        struct moeinf_chat_message user = {"user", "Hi"};
        int32_t *ids = NULL;
        setenv("MOEINF_CHAT_DATE", "2026-01-15", 1); // NOLINT(concurrency-mt-unsafe): one thread
        CHECK_EQ_INT(moeinf_chat_tokenize(model, "harmony", &user, 1,
                                          MOEINF_CHAT_ADD_ASSISTANT | cases[i].flags, &ids, &n[i],
                                          &merr),
                     MOEINF_OK);
        free(ids);
        snprintf(cmd, sizeof cmd,
                 "printf 'Hi\\n' | MOEINF_CHAT_DATE=2026-01-15 '%s' chat -m '%s' "
                 "--chat-template harmony -c 16 %s",
                 test_moeinf_bin(), path, cases[i].opts);
        int rc = test_run_shell("cli-chat-thinking", cmd, out, sizeof out, err, sizeof err);
        char want[128];
        snprintf(want, sizeof want, "this message takes %zu tokens in the chat template", n[i]);
        CHECK_MSG(rc == 0 && strstr(err, want), "%s: exit %d, stderr \"%s\" (want \"%s\")",
                  cases[i].opts, rc, err, want);
    }
    unsetenv("MOEINF_CHAT_DATE"); // NOLINT(concurrency-mt-unsafe): one thread
    moeinf_model_free(model);
    /* the efforts differ; off is low, unless an effort is given */
    CHECK(n[1] != n[0] && n[2] != n[0] && n[3] == n[1] && n[4] == n[0]);
    /* this model writes no channels: all is answer */
    snprintf(cmd, sizeof cmd,
             "printf 'Hi\\n' | '%s' chat -m '%s' --chat-template harmony -c 1024 --show-thinking",
             test_moeinf_bin(), path);
    int rc = test_run_shell("cli-chat-thinking", cmd, out, sizeof out, err, sizeof err);
    CHECK_MSG(rc == 0 && !strcmp(out, "<think> hmm, ok</think>  Hello\n"), "harmony: %d \"%s\": %s",
              rc, out, err);
    /* --reasoning-format none: the history keeps the final channel (here: all of it), turn
     * after turn */
    snprintf(cmd, sizeof cmd,
             "printf 'Hi\\nAgain\\n' | '%s' chat -m '%s' --chat-template harmony -c 1024 "
             "--reasoning-format none",
             test_moeinf_bin(), path);
    rc = test_run_shell("cli-chat-thinking", cmd, out, sizeof out, err, sizeof err);
    CHECK_MSG(rc == 0 && !strcmp(out, "<think> hmm, ok</think>  Hello\n<think> hmm, ok</think>  "
                                      "Hello\n"),
              "harmony none: %d \"%s\": %s", rc, out, err);
    CHECK_EQ_INT(chat("Hi\\n", "--reasoning-effort max", out, sizeof out, err, sizeof err), 2);
    CHECK_STR_CONTAINS(err, "--reasoning-effort 'max' is not low, medium or high");
}

int main(void) {
    RUN(test_answer_only);
    RUN(test_show_thinking);
    RUN(test_prompt_opened);
    RUN(test_reasoning_off);
    RUN(test_as_generated);
    RUN(test_bad_name);
    RUN(test_harmony_effort);
    return test_report();
}
