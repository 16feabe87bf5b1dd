/*
 * test_reasoning.c - the reasoning splitter of moeinf.h against hand-worked splits (the
 * Qwen3.5 case is llama.cpp's own test-chat.cpp case): each text fed whole, cut in two at every
 * byte, and byte by byte, which must all give the same thinking and answer, the thinking
 * wholly before the answer; what is held back while a marker may be forming; the prompt's
 * opening and closing; the families' markers; the errors. harmony (gpt-oss) channels against
 * hand-worked splits of llama.cpp's gpt-oss output form, with and without <|end|> shown, fed
 * the same ways.
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

/* Splits `text` fed in pieces that end at the offsets cuts[0, n_cuts) (then the rest), in
 * syntax syn (NULL: no thinking). */
static bool split(const struct moeinf_reasoning_syntax *syn, const char *prompt, bool extract,
                  const char *text, const size_t *cuts, size_t n_cuts, struct acc *a) {
    memset(a, 0, sizeof *a);
    struct moeinf_reasoning *r = NULL;
    struct moeinf_error err = {0};
    struct moeinf_reasoning_text t;
    if (moeinf_reasoning_init_syntax(syn, prompt, prompt ? strlen(prompt) : 0, extract, &r, &err) !=
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
static void check_split_syntax(const struct moeinf_reasoning_syntax *syn, const char *prompt,
                               bool extract, const char *text, const char *thinking,
                               const char *answer) {
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
        if (!split(syn, prompt, extract, text, cuts, n_cuts, &a)) break;
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

static void check_split_with(const char *start, const char *end, const char *prompt, bool extract,
                             const char *text, const char *thinking, const char *answer) {
    struct moeinf_reasoning_syntax syn = {start, {end, NULL}, {NULL}, NULL, NULL, false};
    check_split_syntax(start ? &syn : NULL, prompt, extract, text, thinking, answer);
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
    const struct moeinf_reasoning_syntax *syn = moeinf_chat_reasoning_syntax("chatml"); /* Qwen3 */
    CHECK(syn && syn->start && !strcmp(syn->start, "<think>") &&
          !strcmp(syn->ends[0], "</think>") && !syn->ends[1] && !syn->head_end);
    syn = moeinf_chat_reasoning_syntax("deepseek3"); /* DeepSeek-R1 */
    CHECK(syn && syn->start && !strcmp(syn->start, "<think>"));
    syn = moeinf_chat_reasoning_syntax("a-template-added-later");
    CHECK(syn && syn->start && !strcmp(syn->start, "<think>"));
    syn = moeinf_chat_reasoning_syntax("harmony");
    CHECK(syn && !syn->start && syn->head_end &&
          !strcmp(syn->think_channel, "<|channel|>analysis"));
    static const char *const none[] = {"mistral", "llama3", "deepseek2", "olmoe"};
    for (int i = 0; i < 4; i++)
        CHECK_MSG(!moeinf_chat_reasoning_syntax(none[i]), "%s has markers", none[i]);
    /* syntaxes that cannot work */
    static const struct moeinf_reasoning_syntax bad[] = {
        {"<think>", {NULL}, {NULL}, NULL, NULL, false},                 /* no end */
        {"<think>", {"</think>", ""}, {NULL}, NULL, NULL, false},       /* an empty end */
        {NULL, {"</think>"}, {NULL}, NULL, NULL, false},                /* neither */
        {"<t>", {"<|end|>"}, {"<|start|>"}, "<|message|>", "a", false}, /* both */
        {NULL, {"<|end|>"}, {NULL}, "<|message|>", "a", false},         /* no heads */
        {NULL, {"<|end|>"}, {"<|start|>"}, "<|message|>", "", false},   /* an empty channel */
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        struct moeinf_reasoning *r = (struct moeinf_reasoning *)&bad; /* must stay untouched */
        struct moeinf_error err = {0};
        CHECK_MSG(moeinf_reasoning_init_syntax(&bad[i], NULL, 0, true, &r, &err) == MOEINF_ERR_ARG,
                  "bad syntax %zu accepted", i);
        CHECK_STR_CONTAINS(err.msg, "syn");
        CHECK(r == (struct moeinf_reasoning *)&bad);
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

/* The thinking families of GLM, DeepSeek-R1 and Kimi-K2: the prompt each template writes
 * (moeinf_chat_apply) and its syntax, with the model's output fed every way; hand-worked. */
static void check_chat(const char *tmpl, unsigned flags, const char *text, const char *thinking,
                       const char *answer) {
    const struct moeinf_chat_message msgs[] = {{"system", "Be brief."}, {"user", "2+2?"}};
    char *prompt = NULL;
    struct moeinf_error err = {0};
    CHECK_EQ_INT(moeinf_chat_apply(tmpl, msgs, 2, flags, &prompt, NULL, &err), MOEINF_OK);
    if (!prompt) return;
    check_split_syntax(moeinf_chat_reasoning_syntax(tmpl), prompt, true, text, thinking, answer);
    free(prompt);
}

static void test_glm_r1_kimi(void) {
    const unsigned add = MOEINF_CHAT_ADD_ASSISTANT;
    const unsigned off = MOEINF_CHAT_ADD_ASSISTANT | MOEINF_CHAT_NO_THINKING;
    /* GLM-4.5/4.6: the prompt ends "<|assistant|>"; the model writes "\n<think>" (the template
     * writes past answers so), whitespace that may come before the block */
    check_chat("glm45", add, "\n<think>Add them.</think>\n4", "Add them.", "4");
    check_chat("glm45", add, "<think>\nAdd them.\n</think>4", "Add them.", "4");
    check_chat("glm45", add, " \n", "", "");
    check_chat("glm45", add, "\nFour.", "", "Four.");                         /* no block */
    check_chat("glm45", add, "4 <think>x</think>", "", "4 <think>x</think>"); /* not at start */
    /* enable_thinking false: the prompt ends "\n<think></think>" (and the user text
     * "/nothink"); the model writes "\n4" */
    check_chat("glm45", off, "\n4", "", "4");
    check_chat("glm45", off, "\n<think>x</think>4", "", "<think>x</think>4");
    /* GLM-4.7-Flash: the prompt opens the block ("<|assistant|><think>") or closes it */
    check_chat("glm47", add, "Add them.</think>4", "Add them.", "4");
    check_chat("glm47", add, "Still thinking", "Still thinking", ""); /* max_tokens */
    check_chat("glm47", off, "4", "", "4");
    check_chat("glm47", off, "4</think>5", "", "4</think>5");
    /* DeepSeek-R1: "<｜Assistant｜><think>\n" opens it; with thinking off
     * "<think>\n</think>" closes it */
    check_chat("deepseek-r1", add, "Okay, 2+2.\n</think>\n\nIt is 4.", "Okay, 2+2.", "It is 4.");
    check_chat("deepseek-r1", off, "It is 4.", "", "It is 4.");
    /* the older deepseek3 prompt leaves the opening to the model */
    check_chat("deepseek3", add, "<think>\nOkay.\n</think>\n\n4", "Okay.", "4");
    /* Kimi-K2-Thinking: the model opens the block after "<|im_middle|>"; Kimi-K2 (Instruct)
     * does not think */
    check_chat("kimi-k2-thinking", add, "<think>Let me see.</think>4", "Let me see.", "4");
    check_chat("kimi-k2-thinking", add, "4", "", "4");
    check_chat("kimi-k2", add, "<think>x</think>4", "", "<think>x</think>4");
    const struct moeinf_reasoning_syntax *syn = moeinf_chat_reasoning_syntax("glm45");
    CHECK(syn && syn->lead_space && !strcmp(syn->start, "<think>"));
    syn = moeinf_chat_reasoning_syntax("glm47");
    CHECK(syn && !syn->lead_space && !strcmp(syn->ends[0], "</think>"));
    CHECK(moeinf_chat_reasoning_syntax("kimi-k2") == NULL);
    /* the composed form, as the server and `moeinf chat` use it */
    const struct moeinf_chat_message msgs[] = {{"user", "2+2?"}};
    struct moeinf_reasoning *r = NULL;
    struct moeinf_reasoning_text t;
    struct moeinf_error err = {0};
    CHECK_EQ_INT(moeinf_chat_reasoning_init("glm47", msgs, 1, add, true, &r, &err), MOEINF_OK);
    if (!r) return;
    struct acc a = {0};
    CHECK(moeinf_reasoning_push(r, "sum</think>4", 12, &t, &err) == MOEINF_OK);
    acc_add(&a, &t);
    CHECK(moeinf_reasoning_flush(r, &t, &err) == MOEINF_OK);
    acc_add(&a, &t);
    CHECK(!strcmp(a.thinking, "sum") && !strcmp(a.answer, "4"));
    moeinf_reasoning_free(r);
}

#define HARMONY_PROMPT "<|start|>user<|message|>Hi<|end|><|start|>assistant"
#define H_ANALYSIS     "<|channel|>analysis<|message|>"
#define H_FINAL        "<|start|>assistant<|channel|>final<|message|>"

static void check_harmony(const char *text, const char *thinking, const char *answer) {
    check_split_syntax(moeinf_chat_reasoning_syntax("harmony"), HARMONY_PROMPT, true, text,
                       thinking, answer);
}

/* gpt-oss writes "<|channel|>analysis<|message|>thinking<|end|><|start|>assistant<|channel|>
 * final<|message|>answer" after "<|start|>assistant" and ends with <|return|> (llama.cpp's
 * parser in common/parsers/gpt-oss.cpp reads the same form). */
static void test_harmony(void) {
    /* <|end|> shown, and not shown (the tokenizer may render it or not) */
    check_harmony(H_ANALYSIS "I think.<|end|>" H_FINAL "Hello, world!", "I think.",
                  "Hello, world!");
    check_harmony(H_ANALYSIS "I think." H_FINAL "Hello, world!", "I think.", "Hello, world!");
    /* the answer alone; plain text without channels is answer */
    check_harmony("<|channel|>final<|message|>Hi", "", "Hi");
    check_harmony("Hello <|channel|>", "", "Hello <|channel|>");
    check_harmony("", "", "");
    /* <|return|> shown at the end */
    check_harmony(H_ANALYSIS "t<|end|>" H_FINAL "a<|return|>", "t", "a");
    /* never closed (max_tokens): all thinking; a header cut short is dropped */
    check_harmony(H_ANALYSIS "still thinking \n", "still thinking", "");
    check_harmony(H_ANALYSIS "t<|end|><|start|>assistant<|chan", "t", "");
    check_harmony(H_ANALYSIS "t<|end|><|start|>assistant<|channel|>final<|mess", "t", "");
    /* whitespace: the thinking trimmed, the answer's leading whitespace dropped */
    check_harmony(H_ANALYSIS " \n a  b \n<|end|>" H_FINAL " \n c \n", "a  b", "c \n");
    /* two analysis messages, a commentary preamble (answer, as llama.cpp's content), a stray
     * commentary before the analysis, a constrained final */
    check_harmony(H_ANALYSIS "A<|end|><|start|>assistant" H_ANALYSIS "B<|end|>" H_FINAL "C", "A\nB",
                  "C");
    check_harmony("<|channel|>commentary<|message|>P<|end|>" H_FINAL "C", "", "P\nC");
    check_harmony("<|channel|>commentary<|channel|>analysis<|message|>T<|end|>" H_FINAL "C", "T",
                  "C");
    check_harmony("<|channel|>final <|constrain|>json<|message|>{\"a\": 1}", "", "{\"a\": 1}");
    /* marker-like text in the thinking and the answer */
    check_harmony(H_ANALYSIS "a <|en b <|sta <|channel|> c<|end|>" H_FINAL "x <|st y",
                  "a <|en b <|sta <|channel|> c", "x <|st y");
    check_harmony(H_ANALYSIS "\xc3\xa9t\xc3\xa9" H_FINAL "\xe2\x82\xac", "\xc3\xa9t\xc3\xa9",
                  "\xe2\x82\xac");
    /* --reasoning-format none: the text as generated */
    check_split_syntax(moeinf_chat_reasoning_syntax("harmony"), HARMONY_PROMPT, false,
                       H_ANALYSIS "t<|end|>" H_FINAL "a", "", H_ANALYSIS "t<|end|>" H_FINAL "a");
}

/* One token at a time, as the server streams gpt-oss: the thinking shows as it comes, a marker
 * is held until it is known, the answer follows. */
static void test_harmony_held_back(void) {
    struct moeinf_reasoning *r = NULL;
    struct moeinf_reasoning_text t;
    CHECK(moeinf_chat_reasoning_init("harmony", &(struct moeinf_chat_message){"user", "Hi"}, 1,
                                     MOEINF_CHAT_ADD_ASSISTANT, true, &r, NULL) == MOEINF_OK);
    if (!r) return;

    static const struct {
        const char *piece, *thinking, *answer;
    } steps[] = {
        {"<|channel|>", "", ""}, {"analysis", "", ""},    {"<|message|>", "", ""},
        {"Let", "Let", ""},      {" me", " me", ""},      {" see <|", " see", ""},
        {"x", " <|x", ""},       {"<|end|>", "", ""},     {"<|start|>", "", ""},
        {"assistant", "", ""},   {"<|channel|>", "", ""}, {"final", "", ""},
        {"<|message|>", "", ""}, {"Hi", "", "Hi"},        {" there", "", " there"},
    };

    for (size_t i = 0; i < sizeof steps / sizeof steps[0]; i++) {
        CHECK(moeinf_reasoning_push(r, steps[i].piece, strlen(steps[i].piece), &t, NULL) ==
              MOEINF_OK);
        bool ok = t.thinking_len == strlen(steps[i].thinking) &&
                  !memcmp(t.thinking, steps[i].thinking, t.thinking_len) &&
                  t.answer_len == strlen(steps[i].answer) &&
                  !memcmp(t.answer, steps[i].answer, t.answer_len);
        CHECK_MSG(ok, "step %zu \"%s\": thinking \"%.*s\", answer \"%.*s\"", i, steps[i].piece,
                  (int)t.thinking_len, t.thinking, (int)t.answer_len, t.answer);
    }
    CHECK(moeinf_reasoning_flush(r, &t, NULL) == MOEINF_OK);
    CHECK(t.thinking_len == 0 && t.answer_len == 0);
    moeinf_reasoning_free(r);
}

int main(void) {
    RUN(test_generated_block);
    RUN(test_prompt_opened);
    RUN(test_prompt_closed);
    RUN(test_not_extracted);
    RUN(test_held_back);
    RUN(test_markers_and_errors);
    RUN(test_chat_prompt);
    RUN(test_glm_r1_kimi);
    RUN(test_harmony);
    RUN(test_harmony_held_back);
    return test_report();
}
