/*
 * test_cli_chat.c - `moeinf chat` at the context's edge, through the built binary ($MOEINF_BIN)
 * on piped input with the tiny Mixtral, greedy, the mistral template: a message too long for
 * the context alone is refused with one error line and the session goes on as if it had not
 * been typed; a conversation that outgrows the context drops its oldest turns (a user message
 * and its answer at a time, the system message kept), says so once, and each answer equals
 * the one this test computes through the library from the history it expects to be kept.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "moeinf.h"
#include "test.h"

#define MODEL    "testdata/models/tiny-mixtral-Q8_0.gguf"
#define N_CTX    64
#define N_ANSWER 4

static char model_path[1024];

/* Runs `printf '%s' INPUT | moeinf chat ...` (input without single quotes); the exit code. */
static int chat(const char *input, const char *opts, char *out, size_t out_size, char *err,
                size_t err_size) {
    char cmd[8192];
    snprintf(cmd, sizeof cmd,
             "printf '%s' | '%s' chat -m '%s' --chat-template mistral --temp 0 -n %d -c %d %s",
             input, test_moeinf_bin(), model_path, N_ANSWER, N_CTX, opts);
    return test_run_shell("cli-chat", cmd, out, out_size, err, err_size);
}

/* Appends s to buf (size bytes), cut to fit. */
static void append(char *buf, size_t size, const char *s) {
    size_t n = strlen(buf);
    snprintf(buf + n, size - n, "%s", s);
}

static int count(const char *hay, const char *needle) {
    int n = 0;
    for (const char *p = strstr(hay, needle); p; p = strstr(p + 1, needle))
        n++;
    return n;
}

/* The tokens of a conversation as the chat gives them to the model: the template's text with
 * the assistant's turn opened, BOS added, special tokens parsed. (The chat parses them in the
 * template's markup only, moeinf_chat_tokenize; this test's messages hold no control token's
 * text, so parsing the whole text gives the same tokens by an independent path.) */
static int32_t *conversation(const struct moeinf_model *m, const struct moeinf_chat_message *msgs,
                             size_t n, size_t *n_ids) {
    char *prompt = NULL;
    int32_t *ids = NULL;
    struct moeinf_error err;
    *n_ids = 0;
    if (moeinf_chat_apply("mistral", msgs, n, true, &prompt, NULL, &err) == MOEINF_OK)
        moeinf_tokenize(m, prompt, strlen(prompt), true, true, &ids, n_ids, &err);
    free(prompt);
    CHECK_MSG(ids != NULL, "%s", err.msg);
    return ids;
}

/* The greedy answer (at most N_ANSWER tokens, up to an end token) to a conversation, decoded
 * from an empty context; malloc'ed text. */
static char *greedy_answer(struct moeinf_model *m, struct moeinf_context *ctx,
                           const struct moeinf_chat_message *msgs, size_t n) {
    size_t n_ids = 0;
    int32_t *ids = conversation(m, msgs, n, &n_ids);
    int n_vocab = moeinf_model_n_vocab(m);
    float *logits = malloc((size_t)n_vocab * sizeof *logits);
    char *text = calloc(1, 4096);
    struct moeinf_text_stream *ts = NULL;
    struct moeinf_error err;
    moeinf_context_reset(ctx);
    bool ok = ids && logits && text && moeinf_text_stream_init(m, &ts, &err) == MOEINF_OK &&
              moeinf_decode(ctx, ids, (int)n_ids, logits, false, &err) == MOEINF_OK;
    CHECK_MSG(ok, "%s", err.msg);
    size_t len = 0;
    for (int k = 0; ok && k < N_ANSWER; k++) {
        int32_t best = 0;
        for (int32_t i = 1; i < n_vocab; i++)
            if (logits[i] > logits[best]) best = i;
        if (moeinf_token_is_eog(m, best)) break;
        size_t np = 0;
        const char *piece = moeinf_text_stream_push(ts, best, &np);
        if (len + np < 4000) {
            memcpy(text + len, piece, np);
            len += np;
        }
        ok = k + 1 == N_ANSWER ||
             moeinf_decode(ctx, &best, 1, logits, false, &err) == MOEINF_OK;
        CHECK_MSG(ok, "%s", err.msg);
    }
    if (ts) {
        size_t np = 0;
        const char *tail = moeinf_text_stream_flush(ts, &np);
        if (len + np < 4000) memcpy(text + len, tail, np);
    }
    moeinf_text_stream_free(ts);
    free(logits);
    free(ids);
    return text;
}

/* A message longer than the context by itself: one error line, no answer, and the session
 * goes on exactly as if it had not been typed. */
static void test_message_too_long(void) {
    char longmsg[2048] = "";
    for (int i = 0; i < 100; i++)
        append(longmsg, sizeof longmsg, "word ");
    char input[4096];
    snprintf(input, sizeof input, "%s\\nHi there\\n", longmsg);
    char out[8192];
    char err[4096];
    char out_ref[8192];
    char err_ref[4096];
    CHECK_EQ_INT(chat(input, "", out, sizeof out, err, sizeof err), 0);
    CHECK_EQ_INT(chat("Hi there\\n", "", out_ref, sizeof out_ref, err_ref, sizeof err_ref), 0);
    CHECK_MSG(out_ref[0] != '\0', "no answer: %s", err_ref);
    CHECK_MSG(!strcmp(out, out_ref), "chat printed [%s], want [%s]", out, out_ref);
    CHECK_STR_CONTAINS(err, "moeinf chat: this message takes");
    CHECK_STR_CONTAINS(err, "(-c 64) has no room for it and an answer, so it is not sent");
    CHECK_EQ_INT(count(err, "\n"), 1); /* one line */
    CHECK(err_ref[0] == '\0');
}

/* Five turns through a 64-token context: the oldest turns go, the system message stays, and
 * every answer is the greedy answer to the history that is left. */
static void test_oldest_turns_dropped(void) {
    static const char *const users[] = {
        "Hi there, how are you doing",    "Tell me about the weather today",
        "And what about tomorrow then",   "Which city has the best food",
        "Thanks, that will be all today",
    };
    enum { N_USERS = sizeof users / sizeof users[0] };
    const char *sys = "Answer briefly";
    char input[2048] = "";
    for (int i = 0; i < N_USERS; i++) {
        append(input, sizeof input, users[i]);
        append(input, sizeof input, "\\n");
    }
    char opts[256];
    snprintf(opts, sizeof opts, "--system '%s'", sys);
    char out[16384];
    char err[4096];
    CHECK_EQ_INT(chat(input, opts, out, sizeof out, err, sizeof err), 0);
    CHECK_EQ_INT(count(err, "outgrew the context (-c 64)"), 1);
    CHECK_STR_CONTAINS(err, "the system message kept");

    /* The expected history, turn by turn: drop the oldest pair while the conversation leaves
     * less than N_ANSWER tokens of the context (N_ANSWER is under half of it). */
    struct moeinf_model_params mp = moeinf_model_params_default();
    struct moeinf_context_params cp = moeinf_context_params_default();
    cp.n_ctx = N_CTX;
    struct moeinf_model *m = NULL;
    struct moeinf_context *ctx = NULL;
    struct moeinf_error e;
    if (moeinf_model_load(model_path, &mp, &m, &e) != MOEINF_OK ||
        moeinf_context_init(m, &cp, &ctx, &e) != MOEINF_OK) {
        CHECK_MSG(false, "%s", e.msg);
        moeinf_model_free(m);
        return;
    }
    struct moeinf_chat_message h[2 * N_USERS + 1];
    char *answers[N_USERS] = {0};
    size_t n = 0;
    h[n++] = (struct moeinf_chat_message){"system", sys};
    char expected[16384] = "";
    int turns_with_drops = 0;
    for (int t = 0; t < N_USERS; t++) {
        h[n++] = (struct moeinf_chat_message){"user", users[t]};
        bool dropped = false;
        for (;;) {
            size_t n_ids = 0;
            free(conversation(m, h, n, &n_ids));
            if (n_ids + N_ANSWER <= N_CTX || n < 4) break;
            memmove(h + 1, h + 3, (n - 3) * sizeof *h);
            n -= 2;
            dropped = true;
        }
        turns_with_drops += dropped;
        answers[t] = greedy_answer(m, ctx, h, n);
        if (!answers[t]) break;
        append(expected, sizeof expected, answers[t]);
        append(expected, sizeof expected, "\n");
        h[n++] = (struct moeinf_chat_message){"assistant", answers[t]};
    }
    /* the script is meant to drop at more than one turn (the notice stays single) */
    CHECK_MSG(turns_with_drops >= 2, "turns with drops: %d", turns_with_drops);
    CHECK_MSG(!strcmp(out, expected), "chat printed [%s], want [%s]", out, expected);
    for (int t = 0; t < N_USERS; t++)
        free(answers[t]);
    moeinf_context_free(ctx);
    moeinf_model_free(m);
}

/* The first number after "KEY": in a JSON text, or -1. */
static long json_long(const char *text, const char *key) {
    char pat[64];
    snprintf(pat, sizeof pat, "\"%s\":", key);
    const char *p = strstr(text, pat);
    return p ? strtol(p + strlen(pat), NULL, 10) : -1;
}

/* --stats and --stats-json report the whole session once, when it ends: two answers of
 * N_ANSWER tokens each decode N_ANSWER - 1 tokens (the last one sampled is not fed back;
 * neither answer of the tiny model meets an end token first), and the counters add up. */
static void test_session_stats(void) {
    char json_path[512];
    test_tmp_path("cli-chat-stats.json", json_path, sizeof json_path);
    remove(json_path);
    char opts[1024];
    snprintf(opts, sizeof opts, "--expert-cache 50%% --stats --stats-json '%s'", json_path);
    char out[8192];
    char err[8192];
    CHECK_EQ_INT(chat("Hello there\\nHow are you\\n/exit\\n", opts, out, sizeof out, err,
                      sizeof err),
                 0);
    CHECK_STR_CONTAINS(err, "expert cache (reuse, 8 slots):");
    char json[16384];
    json[0] = '\0';
    test_read_text(json_path, json, sizeof json);
    CHECK_MSG(json[0] != '\0', "no %s written", json_path);
    if (!json[0]) return;
    CHECK_EQ_INT(json_long(json, "decode_tokens"), 2 * (N_ANSWER - 1));
    long accesses = json_long(json, "accesses");
    CHECK(accesses > 0);
    CHECK_EQ_INT(accesses, json_long(json, "hits") + json_long(json, "late_prefetches") +
                               json_long(json, "misses"));
    remove(json_path);
}

int main(void) {
    if (!getenv("MOEINF_BIN")) { /* NOLINT(concurrency-mt-unsafe): main thread */
        test_skip("MOEINF_BIN unset (run through ctest)");
        return test_report();
    }
    if (!test_shared_path(MODEL, model_path, sizeof model_path)) return test_report();
    RUN(test_message_too_long);
    RUN(test_oldest_turns_dropped);
    RUN(test_session_stats);
    return test_report();
}
