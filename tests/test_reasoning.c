/*
 * test_reasoning.c - the reasoning splitter of moeinf.h against hand-worked splits (the
 * Qwen3.5 case is llama.cpp's own test-chat.cpp case): each text fed whole, cut in two at every
 * byte, and byte by byte, which must all give the same thinking and answer, the thinking
 * wholly before the answer; what is held back while a marker may be forming; the prompt's
 * opening and closing; the families' markers; the errors.
 */
#include <stdlib.h>
#include <string.h>

#include "chat/reasoning.h"
#include "moeinf.h"
#include "test.h"

#define PROMPT_PLAIN  "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n"
#define PROMPT_OPEN   PROMPT_PLAIN "<think>\n"
#define PROMPT_CLOSED PROMPT_PLAIN "<think>\n\n</think>\n\n"

struct acc {
    char thinking[1024], answer[1024];
    size_t nt, na;
    bool thinking_after_answer; /* thinking text came after answer text */
};

static void acc_add(struct acc *a, const struct moeinf_reasoning_text *t) {
    if (t->thinking_len && a->na) a->thinking_after_answer = true;
    if (a->nt + t->thinking_len < sizeof a->thinking) {
        memcpy(a->thinking + a->nt, t->thinking, t->thinking_len);
        a->nt += t->thinking_len;
    }
    if (a->na + t->answer_len < sizeof a->answer) {
        memcpy(a->answer + a->na, t->answer, t->answer_len);
        a->na += t->answer_len;
    }
    a->thinking[a->nt] = '\0';
    a->answer[a->na] = '\0';
}

/* Splits `text` fed in pieces that end at the offsets cuts[0, n_cuts) (then the rest). */
static bool split(const char *start, const char *end, const char *prompt, bool extract,
                  const char *text, const size_t *cuts, size_t n_cuts, struct acc *a) {
    memset(a, 0, sizeof *a);
    struct moeinf_reasoning *r = NULL;
    struct moeinf_error err = {0};
    struct moeinf_reasoning_text t;
    if (moeinf_reasoning_init(start, end, prompt, prompt ? strlen(prompt) : 0, extract, &r, &err) !=
        MOEINF_OK) {
        CHECK_MSG(false, "init: %s", err.msg);
        return false;
    }
    size_t at = 0;
    bool ok = true;
    for (size_t i = 0; i <= n_cuts && ok; i++) {
        size_t to = i < n_cuts ? cuts[i] : strlen(text);
        ok = moeinf_reasoning_push(r, text + at, to - at, &t, &err) == MOEINF_OK;
        if (ok) acc_add(a, &t);
        at = to;
    }
    ok = ok && moeinf_reasoning_flush(r, &t, &err) == MOEINF_OK;
    if (ok) acc_add(a, &t);
    CHECK_MSG(ok, "push/flush: %s", err.msg);
    moeinf_reasoning_free(r);
    return ok;
}

/* Every way of cutting `text` gives `thinking` and `answer`. */
static void check_split_with(const char *start, const char *end, const char *prompt, bool extract,
                             const char *text, const char *thinking, const char *answer) {
    size_t n = strlen(text);
    size_t *cuts = malloc((n + 1) * sizeof *cuts);
    if (!cuts) abort();
    struct acc a;
    /* whole, then every cut in two, then byte by byte (n_cuts = n + 1 marks it) */
    for (size_t c = 0; c <= n + 1; c++) {
        size_t n_cuts = 0;
        if (c == n + 1) {
            for (size_t i = 0; i < n; i++)
                cuts[n_cuts++] = i;
        } else if (c > 0) {
            cuts[n_cuts++] = c - 1;
        }
        if (!split(start, end, prompt, extract, text, cuts, n_cuts, &a)) break;
        bool same =
            !strcmp(a.thinking, thinking) && !strcmp(a.answer, answer) && !a.thinking_after_answer;
        CHECK_MSG(same,
                  "text \"%s\" (%s): thinking \"%s\" (want \"%s\"), answer \"%s\" (want \"%s\")%s",
                  text,
                  c == 0       ? "whole"
                  : c == n + 1 ? "byte by byte"
                               : "cut in two",
                  a.thinking, thinking, a.answer, answer,
                  a.thinking_after_answer ? ", thinking after answer" : "");
        if (!same) break;
    }
    free(cuts);
}

static void check_split(const char *prompt, const char *text, const char *thinking,
                        const char *answer) {
    check_split_with("<think>", "</think>", prompt, true, text, thinking, answer);
}

static void test_generated_block(void) {
    /* the model opens the block itself (Qwen3's template, DeepSeek-R1) */
    check_split(PROMPT_PLAIN, "<think>\nI'm\nthinking\n</think>\n\nHello, world!\nWhat's up?",
                "I'm\nthinking", "Hello, world!\nWhat's up?");
    /* no block: all answer, whitespace kept */
    check_split(PROMPT_PLAIN, " Hello\n world \n", "", " Hello\n world \n");
    /* an empty block: no thinking, and the answer's leading whitespace goes */
    check_split(PROMPT_PLAIN, "<think>\n\n</think>\n\nAnswer.", "", "Answer.");
    /* the block counts only at the very start: after a space it is answer text */
    check_split(PROMPT_PLAIN, " <think>x</think>y", "", " <think>x</think>y");
    check_split(PROMPT_PLAIN, "a<think>x</think>y", "", "a<think>x</think>y");
    /* an end marker without an opening is answer text */
    check_split(PROMPT_PLAIN, "a</think>b", "", "a</think>b");
    /* a text that stops inside the start marker is answer text */
    check_split(PROMPT_PLAIN, "<thi", "", "<thi");
    /* a second block, inside the answer, stays there */
    check_split(PROMPT_PLAIN, "<think>a</think>b<think>c</think>", "a", "b<think>c</think>");
}

static void test_prompt_opened(void) {
    /* llama.cpp's Qwen3.5 case: the generation prompt ends with "<think>\n" */
    check_split(PROMPT_OPEN, "I'm\nthinking\n</think>\n\nHello, world!\nWhat's up?",
                "I'm\nthinking", "Hello, world!\nWhat's up?");
    /* the prompt's opening with other whitespace after it */
    check_split(PROMPT_PLAIN "<think>", "\n a \n</think>b", "a", "b");
    check_split(PROMPT_PLAIN "<think>\n\n  ", "a</think>b", "a", "b");
    /* whitespace inside the thinking and at the answer's end is kept */
    check_split(PROMPT_OPEN, "a  \n b\t</think> \n c \n", "a  \n b", "c \n");
    /* marker-like text inside the thinking */
    check_split(PROMPT_OPEN, "a<</think>b", "a<", "b");
    check_split(PROMPT_OPEN, "a</</think>b", "a</", "b");
    check_split(PROMPT_OPEN, "x </thinking> y</think>z", "x </thinking> y", "z");
    /* multi-byte UTF-8 around the marker */
    check_split(PROMPT_OPEN, "\xc3\xa9t\xc3\xa9</think>\xe2\x82\xac", "\xc3\xa9t\xc3\xa9",
                "\xe2\x82\xac");
    /* never closed (max_tokens): all thinking, a partial marker included, trimmed */
    check_split(PROMPT_OPEN, "I'm thinking about </thi", "I'm thinking about </thi", "");
    check_split(PROMPT_OPEN, "still thinking \n\n", "still thinking", "");
    /* a start marker inside the opened block is thinking text */
    check_split(PROMPT_OPEN, "<think>a</think>b", "<think>a", "b");
    /* nothing generated */
    check_split(PROMPT_OPEN, "", "", "");
}

static void test_prompt_closed(void) {
    /* thinking switched off in the prompt (Qwen3.5's enable_thinking false): all answer */
    check_split(PROMPT_CLOSED, "Hello", "", "Hello");
    check_split(PROMPT_CLOSED, "<think>x</think>y", "", "<think>x</think>y");
    /* a prompt that mentions the marker earlier does not open anything */
    check_split("<|im_start|>user\nsay <think><|im_end|>\n<|im_start|>assistant\n", "a</think>b",
                "", "a</think>b");
}

static void test_not_extracted(void) {
    /* --reasoning-format none: everything is answer, with the prompt's opening first (as
     * llama.cpp's content is "<think>\nI'm\nthinking\n</think>..." for Qwen3.5) */
    check_split_with("<think>", "</think>", PROMPT_OPEN, false, "I'm\nthinking\n</think>\n\nHi", "",
                     "<think>\nI'm\nthinking\n</think>\n\nHi");
    check_split_with("<think>", "</think>", PROMPT_PLAIN, false, "<think> a </think> b", "",
                     "<think> a </think> b");
    check_split_with("<think>", "</think>", PROMPT_CLOSED, false, "x", "", "x");
    /* a model that does not think: no markers, everything is answer */
    check_split_with(NULL, NULL, PROMPT_OPEN, true, "<think>a</think>b", "", "<think>a</think>b");
    /* other markers */
    check_split_with("[THINK]", "[/THINK]", "x", true, "[THINK]raisonnement[/THINK]R\xc3\xa9ponse",
                     "raisonnement", "R\xc3\xa9ponse");
}

/* What one push shows: nothing that a marker may still take, no whitespace that may end the
 * thinking. */
static void test_held_back(void) {
    struct moeinf_reasoning *r = NULL;
    struct moeinf_reasoning_text t;
    CHECK(moeinf_reasoning_init("<think>", "</think>", PROMPT_OPEN, strlen(PROMPT_OPEN), true, &r,
                                NULL) == MOEINF_OK);
    if (!r) return;
    CHECK(moeinf_reasoning_push(r, "I'm thinking  </th", 18, &t, NULL) == MOEINF_OK);
    CHECK(t.thinking_len == 12 && !memcmp(t.thinking, "I'm thinking", 12));
    CHECK_EQ_INT(t.answer_len, 0);
    CHECK(moeinf_reasoning_push(r, "ought", 5, &t, NULL) == MOEINF_OK); /* "</thought" */
    CHECK(t.thinking_len == 11 && !memcmp(t.thinking, "  </thought", 11));
    CHECK(moeinf_reasoning_push(r, " more</think>\n", 14, &t, NULL) == MOEINF_OK);
    CHECK(t.thinking_len == 5 && !memcmp(t.thinking, " more", 5));
    CHECK_EQ_INT(t.answer_len, 0); /* the newline after the marker is dropped */
    CHECK(moeinf_reasoning_push(r, "\nOK ", 4, &t, NULL) == MOEINF_OK);
    CHECK(t.answer_len == 3 && !memcmp(t.answer, "OK ", 3));
    CHECK(moeinf_reasoning_flush(r, &t, NULL) == MOEINF_OK);
    CHECK(t.thinking_len == 0 && t.answer_len == 0);
    /* the text ended: another push is an error */
    struct moeinf_error err = {0};
    CHECK(moeinf_reasoning_push(r, "x", 1, &t, &err) == MOEINF_ERR_ARG);
    CHECK_STR_CONTAINS(err.msg, "flushed");
    moeinf_reasoning_free(r);
    /* at the start, a possible start marker is held; text that cannot be one is shown */
    CHECK(moeinf_reasoning_init("<think>", "</think>", NULL, 0, true, &r, NULL) == MOEINF_OK);
    if (!r) return;
    CHECK(moeinf_reasoning_push(r, "<th", 3, &t, NULL) == MOEINF_OK);
    CHECK(t.thinking_len == 0 && t.answer_len == 0);
    CHECK(moeinf_reasoning_push(r, "e", 1, &t, NULL) == MOEINF_OK);
    CHECK(t.answer_len == 4 && !memcmp(t.answer, "<the", 4));
    moeinf_reasoning_free(r);
}

static void test_markers_and_errors(void) {
    const char *s = "x";
    const char *e = "x";
    moeinf_chat_reasoning_markers("chatml", &s, &e); /* Qwen3 */
    CHECK(s && e && !strcmp(s, "<think>") && !strcmp(e, "</think>"));
    moeinf_chat_reasoning_markers("deepseek3", &s, &e); /* DeepSeek-R1 */
    CHECK(s && !strcmp(s, "<think>"));
    moeinf_chat_reasoning_markers("a-template-added-later", &s, &e);
    CHECK(s && !strcmp(s, "<think>"));
    static const char *const none[] = {"mistral", "llama3", "deepseek2", "olmoe"};
    for (int i = 0; i < 4; i++) {
        s = e = "x";
        moeinf_chat_reasoning_markers(none[i], &s, &e);
        CHECK_MSG(!s && !e, "%s has markers", none[i]);
    }
    struct moeinf_reasoning *r = NULL;
    struct moeinf_error err = {0};
    CHECK(moeinf_reasoning_init("<think>", NULL, NULL, 0, true, &r, &err) == MOEINF_ERR_ARG);
    CHECK_STR_CONTAINS(err.msg, "both markers");
    CHECK(moeinf_reasoning_init("", "</think>", NULL, 0, true, &r, &err) == MOEINF_ERR_ARG);
    CHECK_STR_CONTAINS(err.msg, "empty");
    CHECK(moeinf_reasoning_init("<think>", "</think>", NULL, 3, true, &r, &err) == MOEINF_ERR_ARG);
    CHECK_STR_CONTAINS(err.msg, "prompt");
    CHECK(r == NULL);
    moeinf_reasoning_free(NULL);
}

/* The chat form reads the tail of the prompt its template writes for the messages. */
static void test_chat_prompt(void) {
    const struct moeinf_chat_message msgs[] = {{"system", "Be brief."}, {"user", "Hi"}};

    static const struct {
        const char *tmpl;
        const char *thinking, *answer;
        unsigned flags;
        bool extract;
    } cases[] = {
        /* qwen35 opens the block in the prompt */
        {"qwen35", "a", "b", MOEINF_CHAT_ADD_ASSISTANT, true},
        {"qwen35", "", "<think>\na</think>\nb", MOEINF_CHAT_ADD_ASSISTANT, false},
        /* ... or closes it (enable_thinking false) */
        {"qwen35", "", "a</think>\nb", MOEINF_CHAT_ADD_ASSISTANT | MOEINF_CHAT_NO_THINKING, true},
        /* chatml (Qwen3) leaves it to the model: no opening here */
        {"chatml", "", "a</think>\nb", MOEINF_CHAT_ADD_ASSISTANT, true},
        {"mistral", "", "a</think>\nb", MOEINF_CHAT_ADD_ASSISTANT, true}, /* no markers */
    };

    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        struct moeinf_reasoning *r = NULL;
        struct moeinf_reasoning_text t;
        struct moeinf_error err = {0};
        CHECK_EQ_INT(moeinf_chat_reasoning_init(cases[c].tmpl, msgs, 2, cases[c].flags,
                                                cases[c].extract, &r, &err),
                     MOEINF_OK);
        if (!r) continue;
        struct acc a = {0};
        CHECK(moeinf_reasoning_push(r, "a</think>\nb", 11, &t, &err) == MOEINF_OK);
        acc_add(&a, &t);
        CHECK(moeinf_reasoning_flush(r, &t, &err) == MOEINF_OK);
        acc_add(&a, &t);
        CHECK_MSG(!strcmp(a.thinking, cases[c].thinking) && !strcmp(a.answer, cases[c].answer),
                  "case %zu (%s): thinking \"%s\", answer \"%s\"", c, cases[c].tmpl, a.thinking,
                  a.answer);
        moeinf_reasoning_free(r);
    }
    /* the template's errors come through */
    struct moeinf_reasoning *r = NULL;
    struct moeinf_error err = {0};
    const struct moeinf_chat_message bad = {"robot", "x"};
    CHECK_EQ_INT(
        moeinf_chat_reasoning_init("chatml", &bad, 1, MOEINF_CHAT_ADD_ASSISTANT, true, &r, &err),
        MOEINF_ERR_ARG);
    CHECK(r == NULL);
}

int main(void) {
    RUN(test_generated_block);
    RUN(test_prompt_opened);
    RUN(test_prompt_closed);
    RUN(test_not_extracted);
    RUN(test_held_back);
    RUN(test_markers_and_errors);
    RUN(test_chat_prompt);
    return test_report();
}
