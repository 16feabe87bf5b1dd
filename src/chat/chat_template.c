/*
 * chat_template.c - the chat templates of moeinf.h: detecting which family a model's Jinja
 * template is written for, and writing a conversation in that family's format. Each writer
 * produces what llama.cpp's template code produces for the family (olmoe and qwen35: what the
 * model's Jinja template renders with jinja2; harmony: gpt-oss's, as the renderings in
 * tests/data/chat_templates hold them); tests/test_serve_chat_template.c checks both against
 * those references.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/grow.h"
#include "base/status.h"
#include "engine/engine.h"
#include "tokenizer/vocab.h"

static const char *const template_names[] = {
    "mistral", "chatml",  "llama3", "deepseek2", "deepseek3", "deepseek-r1",      "olmoe",
    "qwen35",  "harmony", "glm45",  "glm47",     "kimi-k2",   "kimi-k2-thinking", NULL};
#define KNOWN_NAMES                                                                                \
    "mistral, chatml, llama3, deepseek2, deepseek3, deepseek-r1, olmoe, qwen35, harmony, glm45, "  \
    "glm47, kimi-k2, kimi-k2-thinking"

const char *const *moeinf_chat_template_names(void) {
    return template_names;
}

static bool contains(const char *hay, const char *needle) {
    return strstr(hay, needle) != NULL;
}

const char *moeinf_chat_template_detect(const char *jinja) {
    if (!jinja) return NULL;
    /* Most specific markers first: several families share words such as "Assistant". */
    if (contains(jinja, "<|start|>assistant") && contains(jinja, "<|channel|>") &&
        contains(jinja, "<|message|>")) {
        return "harmony"; /* gpt-oss: OpenAI's harmony format */
    }
    if (contains(jinja, "<|im_start|>")) {
        /* Qwen3.5/3.6: the answer opens with '<think>\n' as a string of its own (Qwen3's
         * template has only '<think>\n\n</think>\n\n' there, QwQ's
         * '<|im_start|>assistant\n<think>\n'), and past thinking is written back as below
         * (Qwen3 strips its newlines; MiniCPM5 and Bielik also open with '<think>\n'). The
         * Jinja text holds each \n as a backslash and an n. */
        if (contains(jinja, "'<think>\\n'") &&
            contains(jinja, "'\\n<think>\\n' + reasoning_content + '\\n</think>\\n\\n'")) {
            return "qwen35";
        }
        return "chatml";
    }
    if (contains(jinja, "[gMASK]<sop>")) {
        /* GLM-4.5/4.6 switch thinking off with /nothink after each user text; GLM-4.7-Flash
         * opens the answer with '<think>' (older GLM-4 templates have neither) */
        if (contains(jinja, "/nothink")) return "glm45";
        if (contains(jinja, "else '<think>'")) return "glm47";
        return NULL;
    }
    if (contains(jinja, "<|im_assistant|>") && contains(jinja, "<|im_middle|>")) {
        /* Kimi-K2-Thinking writes an empty thinking block before each past answer */
        return contains(jinja, "<think></think>") ? "kimi-k2-thinking" : "kimi-k2";
    }
    if (contains(jinja, "<|start_header_id|>") && contains(jinja, "<|end_header_id|>")) {
        return "llama3";
    }
    if (contains(jinja, "<\xef\xbd\x9c"
                        "Assistant\xef\xbd\x9c>") &&
        contains(jinja, "<\xef\xbd\x9c"
                        "User\xef\xbd\x9c>")) {
        /* <｜Assistant｜>, <｜User｜> with full-width bars; DeepSeek-R1's template opens the
         * answer's thinking itself ('<｜Assistant｜><think>\n', a backslash and an n in the
         * Jinja text; V3.1's '<think>' without the newline is not R1's) */
        if (contains(jinja, "<\xef\xbd\x9c"
                            "Assistant\xef\xbd\x9c><think>\\n'")) {
            return "deepseek-r1";
        }
        return "deepseek3";
    }
    if (contains(jinja, "'Assistant: '") && contains(jinja, "'User: '")) return "deepseek2";
    if (contains(jinja, "<|user|>") && contains(jinja, "<|assistant|>") &&
        !contains(jinja, "<|end|>")) {
        return "olmoe"; /* Tulu style; <|end|> would be Phi-3 */
    }
    if (contains(jinja, "[INST]")) return "mistral";
    return NULL;
}

enum moeinf_status moeinf_model_chat_template(const struct moeinf_model *model, char **out,
                                              struct moeinf_error *err) {
    struct moeinf_gguf_str s = {0};
    enum moeinf_status st =
        moeinf_gguf_get_str_opt(model->gguf, "tokenizer.chat_template", &s, err);
    if (st != MOEINF_OK) return st;
    if (!s.data) {
        *out = NULL;
        return MOEINF_OK;
    }
    char *copy = malloc(s.len + 1);
    if (!copy) return moeinf_fail(err, MOEINF_ERR_NOMEM, "out of memory (chat template)");
    memcpy(copy, s.data, s.len);
    copy[s.len] = '\0';
    *out = copy;
    return MOEINF_OK;
}

static const char *known_name(const char *name) {
    for (size_t i = 0; template_names[i]; i++) {
        if (!strcmp(name, template_names[i])) return template_names[i];
    }
    return NULL;
}

enum moeinf_status moeinf_chat_template_resolve(const struct moeinf_model *model, const char *name,
                                                const char **out, struct moeinf_error *err) {
    if (name) {
        const char *k = known_name(name);
        if (!k) {
            return moeinf_fail(err, MOEINF_ERR_ARG,
                               "unknown chat template '%s' (known: " KNOWN_NAMES ")", name);
        }
        *out = k;
        return MOEINF_OK;
    }
    char *jinja = NULL;
    enum moeinf_status st = moeinf_model_chat_template(model, &jinja, err);
    if (st != MOEINF_OK) return st;
    if (!jinja) {
        /* gpt-oss speaks harmony whatever its file says (llama.cpp writes the template into
         * its conversions, but a file may lack it) */
        struct moeinf_gguf_str arch = {0};
        st = moeinf_gguf_get_str_opt(model->gguf, "general.architecture", &arch, err);
        if (st != MOEINF_OK) return st;
        if (arch.data && arch.len == 7 && !memcmp(arch.data, "gpt-oss", 7)) {
            *out = "harmony";
            return MOEINF_OK;
        }
        return moeinf_fail(err, MOEINF_ERR_UNSUPPORTED,
                           "the model has no chat template (tokenizer.chat_template)");
    }
    const char *k = moeinf_chat_template_detect(jinja);
    free(jinja);
    if (!k) {
        return moeinf_fail(
            err, MOEINF_ERR_UNSUPPORTED,
            "the model's chat template (tokenizer.chat_template) is none of " KNOWN_NAMES);
    }
    *out = k;
    return MOEINF_OK;
}

/* ---- writing ------------------------------------------------------------------------------ */

struct text {
    char *buf;
    size_t len, cap;
    bool failed;             /* out of memory */
    size_t *span;            /* the messages' texts: [span[2i], span[2i + 1]) */
    size_t n_span, span_cap; /* spans, and room for span_cap offsets (two per span) */
};

static void put_n(struct text *t, const char *s, size_t n) {
    if (t->failed) return;
    if (!moeinf_text_append(&t->buf, &t->len, &t->cap, s, n)) t->failed = true;
}

static void put(struct text *t, const char *s) {
    put_n(t, s, strlen(s));
}

static bool is_space(char c) {
    return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
}

/* A message's text (content): put, and its range noted, so that moeinf_chat_tokenize
 * tokenizes it as text. */
static void put_content_n(struct text *t, const char *s, size_t n) {
    size_t start = t->len;
    put_n(t, s, n);
    if (t->failed || n == 0) return;
    size_t *p = moeinf_grow(t->span, &t->span_cap, 2 * (t->n_span + 1), sizeof *p);
    if (!p) {
        t->failed = true;
        return;
    }
    t->span = p;
    t->span[2 * t->n_span] = start;
    t->span[2 * t->n_span + 1] = t->len;
    t->n_span++;
}

static void put_content(struct text *t, const char *s) {
    put_content_n(t, s ? s : "", s ? strlen(s) : 0);
}

/* The content without leading and trailing whitespace (llama3 trims every message). */
static void put_trimmed(struct text *t, const char *s) {
    size_t n = strlen(s);
    while (n && is_space(*s)) {
        s++;
        n--;
    }
    while (n && is_space(s[n - 1]))
        n--;
    put_content_n(t, s, n);
}

enum role {
    ROLE_SYSTEM,
    ROLE_USER,
    ROLE_ASSISTANT,
    ROLE_DEVELOPER /* harmony only */
};

#define DS_EOS                                                                                     \
    "<\xef\xbd\x9c"                                                                                \
    "end\xe2\x96\x81of\xe2\x96\x81sentence\xef\xbd\x9c>"

static void write_mistral(struct text *t, const enum role *roles,
                          const struct moeinf_chat_message *m, size_t n) {
    /* One [INST] turn holds any system text and the user's message; an answer closes it. */
    bool in_turn = true;
    put(t, "[INST] ");
    for (size_t i = 0; i < n; i++) {
        const char *c = m[i].content ? m[i].content : "";
        if (!in_turn) {
            put(t, "[INST] ");
            in_turn = true;
        }
        put_content(t, c);
        if (roles[i] == ROLE_ASSISTANT) {
            put(t, "</s>");
            in_turn = false;
        } else {
            put(t, roles[i] == ROLE_SYSTEM ? "\n" : " [/INST]");
        }
    }
}

static void write_chatml(struct text *t, const struct moeinf_chat_message *m, size_t n,
                         bool add_assistant) {
    for (size_t i = 0; i < n; i++) {
        put(t, "<|im_start|>");
        put(t, m[i].role);
        put(t, "\n");
        put_content(t, m[i].content);
        put(t, "<|im_end|>\n");
    }
    if (add_assistant) put(t, "<|im_start|>assistant\n");
}

static void write_llama3(struct text *t, const struct moeinf_chat_message *m, size_t n,
                         bool add_assistant) {
    for (size_t i = 0; i < n; i++) {
        put(t, "<|start_header_id|>");
        put(t, m[i].role);
        put(t, "<|end_header_id|>\n\n");
        put_trimmed(t, m[i].content ? m[i].content : "");
        put(t, "<|eot_id|>");
    }
    if (add_assistant) put(t, "<|start_header_id|>assistant<|end_header_id|>\n\n");
}

static void write_deepseek(struct text *t, bool v3, const enum role *roles,
                           const struct moeinf_chat_message *m, size_t n, bool add_assistant) {
    const char *user = v3 ? "<\xef\xbd\x9c"
                            "User\xef\xbd\x9c>"
                          : "User: ";
    const char *assistant = v3 ? "<\xef\xbd\x9c"
                                 "Assistant\xef\xbd\x9c>"
                               : "Assistant: ";
    for (size_t i = 0; i < n; i++) {
        const char *c = m[i].content ? m[i].content : "";
        if (roles[i] == ROLE_SYSTEM) {
            put_content(t, c);
            put(t, "\n\n");
        } else if (roles[i] == ROLE_USER) {
            put(t, user);
            put_content(t, c);
            if (!v3) put(t, "\n\n");
        } else {
            put(t, assistant);
            put_content(t, c);
            put(t, DS_EOS);
        }
    }
    if (add_assistant) put(t, v3 ? assistant : "Assistant:");
}

static void write_olmoe(struct text *t, const enum role *roles, const struct moeinf_chat_message *m,
                        size_t n, bool add_assistant) {
    static const char *const heads[] = {"<|system|>\n", "<|user|>\n", "<|assistant|>\n"};
    for (size_t i = 0; i < n; i++) {
        put(t, heads[roles[i]]);
        put_content(t, m[i].content);
        if (roles[i] == ROLE_ASSISTANT) put(t, "<|endoftext|>");
        if (roles[i] != ROLE_ASSISTANT || i + 1 < n) put(t, "\n");
    }
    /* The Jinja template opens the answer inside its loop: never for an empty conversation. */
    if (add_assistant && n > 0) put(t, "<|assistant|>\n");
}

/* ---- qwen35: Qwen3.5 / Qwen3.6 -------------------------------------------------------------
 * What the model's Jinja template renders (jinja2, as transformers' apply_chat_template runs
 * it) for string contents without tools: every text goes through Jinja's trim (Python's
 * str.strip(): Unicode whitespace); an answer's thinking is the text between <think> and the
 * first </think> of its content, its answer what follows the last </think>.
 * Thinking opens with "<think>" and closes with "</think>" (user-defined tokens in Qwen's
 * vocabulary). The prompt of a generation ends "<|im_start|>assistant\n<think>\n": the model
 * writes its thinking, "</think>", then its answer, so its output holds no opening tag. With
 * MOEINF_CHAT_NO_THINKING it ends "<think>\n\n</think>\n\n" and the output is the answer. */

/* A piece of a message's text. */
struct view {
    const char *s;
    size_t n;
};

/* Python's str.isspace for one code point. */
static bool py_space(uint32_t c) {
    return (c >= 0x09 && c <= 0x0d) || (c >= 0x1c && c <= 0x20) || c == 0x85 || c == 0xa0 ||
           c == 0x1680 || (c >= 0x2000 && c <= 0x200a) || c == 0x2028 || c == 0x2029 ||
           c == 0x202f || c == 0x205f || c == 0x3000;
}

/* The code point of the UTF-8 sequence of *len bytes at s (n bytes left); 0xFFFFFFFF (and
 * *len 1) when it is not valid UTF-8 (never a space then). */
static uint32_t utf8_at(const unsigned char *s, size_t n, size_t *len) {
    *len = 1;
    if (s[0] < 0x80) return s[0];
    size_t k = s[0] >= 0xf8 ? 0 : s[0] >= 0xf0 ? 4 : s[0] >= 0xe0 ? 3 : s[0] >= 0xc0 ? 2 : 0;
    if (k == 0 || k > n) return 0xFFFFFFFFu;
    uint32_t c = s[0] & (0x7fu >> k);
    for (size_t i = 1; i < k; i++) {
        if ((s[i] & 0xc0) != 0x80) return 0xFFFFFFFFu;
        c = (c << 6) | (s[i] & 0x3fu);
    }
    static const uint32_t least[5] = {0, 0, 0x80, 0x800, 0x10000}; /* no overlong forms */
    if (c < least[k]) return 0xFFFFFFFFu;
    *len = k;
    return c;
}

/* Jinja's trim: Python's whitespace off both ends. */
static struct view py_strip(struct view v) {
    size_t k = 0;
    while (v.n && py_space(utf8_at((const unsigned char *)v.s, v.n, &k))) {
        v.s += k;
        v.n -= k;
    }
    while (v.n) {
        size_t start = v.n - 1; /* the first byte of the last character */
        while (start > 0 && v.n - start < 4 && ((unsigned char)v.s[start] & 0xc0) == 0x80)
            start--;
        uint32_t c = utf8_at((const unsigned char *)v.s + start, v.n - start, &k);
        if (start + k != v.n || !py_space(c)) break;
        v.n = start;
    }
    return v;
}

/* str.lstrip('\n') and str.rstrip('\n'). */
static struct view strip_nl_left(struct view v) {
    while (v.n && v.s[0] == '\n') {
        v.s++;
        v.n--;
    }
    return v;
}

static struct view strip_nl_right(struct view v) {
    while (v.n && v.s[v.n - 1] == '\n')
        v.n--;
    return v;
}

/* Where needle first (last = false) or last occurs in v, or NULL. */
static const char *find(struct view v, const char *needle, bool last) {
    size_t k = strlen(needle);
    const char *hit = NULL;
    for (size_t i = 0; i + k <= v.n; i++) {
        if (!memcmp(v.s + i, needle, k)) {
            hit = v.s + i;
            if (!last) break;
        }
    }
    return hit;
}

static struct view trimmed(const char *s) {
    struct view v = {s ? s : "", s ? strlen(s) : 0};
    return py_strip(v);
}

/* Which message is the user's last query (one that is not '<tool_response>...</tool_response>'
 * once trimmed), or MOEINF_ERR_ARG for what the template refuses. */
static enum moeinf_status qwen35_check(const enum role *roles, const struct moeinf_chat_message *m,
                                       size_t n, size_t *last_query, struct moeinf_error *err) {
    static const char open[] = "<tool_response>";
    static const char close[] = "</tool_response>";
    if (n == 0) return moeinf_fail(err, MOEINF_ERR_ARG, "the qwen35 template needs a message");
    for (size_t i = 1; i < n; i++) {
        if (roles[i] == ROLE_SYSTEM) {
            return moeinf_fail(err, MOEINF_ERR_ARG,
                               "message %zu is a system message; the qwen35 template takes one "
                               "only as the first message",
                               i);
        }
    }
    for (size_t i = n; i-- > 0;) {
        if (roles[i] != ROLE_USER) continue;
        struct view c = trimmed(m[i].content);
        bool tool = c.n >= sizeof open - 1 && !memcmp(c.s, open, sizeof open - 1) &&
                    c.n >= sizeof close - 1 &&
                    !memcmp(c.s + c.n - (sizeof close - 1), close, sizeof close - 1);
        if (!tool) {
            *last_query = i;
            return MOEINF_OK;
        }
    }
    return moeinf_fail(err, MOEINF_ERR_ARG,
                       "the qwen35 template needs a user message (other than a "
                       "<tool_response>)");
}

static void write_qwen35(struct text *t, const enum role *roles,
                         const struct moeinf_chat_message *m, size_t n, size_t last_query,
                         unsigned flags) {
    for (size_t i = 0; i < n; i++) {
        struct view c = trimmed(m[i].content);
        put(t, "<|im_start|>");
        put(t, m[i].role);
        put(t, "\n");
        if (roles[i] == ROLE_ASSISTANT) {
            struct view thought = {"", 0};
            const char *end = find(c, "</think>", false);
            const char *last = find(c, "</think>", true);
            if (end && last) {
                struct view before = strip_nl_right((struct view){c.s, (size_t)(end - c.s)});
                const char *open = find(before, "<think>", true);
                if (open) {
                    size_t skip = (size_t)(open - before.s) + strlen("<think>");
                    before = (struct view){open + strlen("<think>"), before.n - skip};
                }
                thought = py_strip(strip_nl_left(before));
                last += strlen("</think>");
                c = strip_nl_left((struct view){last, c.n - (size_t)(last - c.s)});
            }
            if (i > last_query) { /* answers after the last question keep their thinking */
                put(t, "<think>\n");
                put_content_n(t, thought.s, thought.n);
                put(t, "\n</think>\n\n");
            }
        }
        put_content_n(t, c.s, c.n);
        put(t, "<|im_end|>\n");
    }
    if (flags & MOEINF_CHAT_ADD_ASSISTANT) {
        put(t, "<|im_start|>assistant\n");
        put(t, flags & MOEINF_CHAT_NO_THINKING ? "<think>\n\n</think>\n\n" : "<think>\n");
    }
}

/* ---- harmony: gpt-oss ----------------------------------------------------------------------
 * What gpt-oss's Jinja template (llama.cpp's models/templates/openai-gpt-oss-120b.jinja)
 * renders with jinja2 for string contents without tools: a system message of its own (the
 * model identity, the knowledge cutoff, the date, "Reasoning: EFFORT" and the valid channels);
 * a first message with role system or developer becomes the developer message "# Instructions"
 * (none when its text is empty); later system and developer messages are dropped, as the
 * template drops them; user texts as they are; an answer is written to the final channel,
 * ending with <|end|>, or <|return|> when it is the last message and the assistant's turn is
 * not opened. The template drops the thinking (analysis channel) of past answers, except in
 * that last case (a training text); moeinf_chat_message has no thinking to give, so it is
 * written as the template writes a message without one. An answer whose text holds
 * "<|channel|>analysis<|message|>" or "<|channel|>final<|message|>" is refused, as the
 * template raises. The prompt of a generation ends "<|start|>assistant": the
 * model writes "<|channel|>analysis<|message|>thinking<|end|><|start|>assistant<|channel|>
 * final<|message|>answer" and ends with <|return|> (reasoning.c splits it). */

#define HARMONY_IDENTITY "You are ChatGPT, a large language model trained by OpenAI."

/* The template's strftime_now("%Y-%m-%d"): MOEINF_CHAT_DATE when set (YYYY-MM-DD, for
 * reproducible prompts and the tests), else today's local date. */
static enum moeinf_status harmony_date(char out[16], struct moeinf_error *err) {
    const char *env = getenv("MOEINF_CHAT_DATE"); // NOLINT(concurrency-mt-unsafe): read only
    if (env) {
        static const char form[] = "dddd-dd-dd";
        bool ok = strlen(env) == sizeof form - 1;
        for (size_t i = 0; ok && form[i]; i++)
            ok = form[i] == 'd' ? env[i] >= '0' && env[i] <= '9' : env[i] == form[i];
        if (!ok) {
            return moeinf_fail(err, MOEINF_ERR_ARG,
                               "MOEINF_CHAT_DATE '%.32s' is not a date YYYY-MM-DD", env);
        }
        memcpy(out, env, sizeof form);
        return MOEINF_OK;
    }
    time_t now = time(NULL);
    struct tm tm;
    if (now == (time_t)-1 || !localtime_r(&now, &tm) ||
        strftime(out, 16, "%Y-%m-%d", &tm) != sizeof "YYYY-MM-DD" - 1) {
        return moeinf_fail(err, MOEINF_ERR_IO, "the harmony template: no current date");
    }
    return MOEINF_OK;
}

/* MOEINF_ERR_ARG for what the template raises on: no messages, or channel markup in an
 * answer's text. */
static enum moeinf_status harmony_check(const enum role *roles, const struct moeinf_chat_message *m,
                                        size_t n, struct moeinf_error *err) {
    static const char *const markup[] = {"<|channel|>analysis<|message|>",
                                         "<|channel|>final<|message|>"};
    if (n == 0) return moeinf_fail(err, MOEINF_ERR_ARG, "the harmony template needs a message");
    for (size_t i = 0; i < n; i++) {
        if (roles[i] != ROLE_ASSISTANT) continue;
        for (size_t k = 0; k < 2; k++) {
            if (m[i].content && strstr(m[i].content, markup[k])) {
                return moeinf_fail(err, MOEINF_ERR_ARG,
                                   "message %zu: an answer holds %s; the harmony template takes "
                                   "the answer without channel markup",
                                   i, markup[k]);
            }
        }
    }
    return MOEINF_OK;
}

static void write_harmony(struct text *t, const enum role *roles,
                          const struct moeinf_chat_message *m, size_t n, unsigned flags,
                          const char *date) {
    static const char *const efforts[] = {NULL, "low", "medium", "high"};
    const char *effort = efforts[(flags & MOEINF_CHAT_EFFORT_MASK) / MOEINF_CHAT_EFFORT_LOW];
    if (!effort) effort = flags & MOEINF_CHAT_NO_THINKING ? "low" : "medium";
    bool add = flags & MOEINF_CHAT_ADD_ASSISTANT;
    put(t, "<|start|>system<|message|>" HARMONY_IDENTITY "\nKnowledge cutoff: 2024-06\n"
           "Current date: ");
    put(t, date);
    put(t, "\n\nReasoning: ");
    put(t, effort);
    put(t, "\n\n# Valid channels: analysis, commentary, final. Channel must be included for every "
           "message.<|end|>");
    size_t first = 0;
    if (n > 0 && (roles[0] == ROLE_SYSTEM || roles[0] == ROLE_DEVELOPER)) {
        first = 1;
        if (m[0].content && m[0].content[0]) {
            put(t, "<|start|>developer<|message|># Instructions\n\n");
            put_content(t, m[0].content);
            put(t, "\n\n<|end|>");
        }
    }
    for (size_t i = first; i < n; i++) {
        if (roles[i] == ROLE_USER) {
            put(t, "<|start|>user<|message|>");
            put_content(t, m[i].content);
            put(t, "<|end|>");
        } else if (roles[i] == ROLE_ASSISTANT) {
            bool last = i + 1 == n && !add;
            put(t, "<|start|>assistant<|channel|>final<|message|>");
            put_content(t, m[i].content);
            put(t, last ? "<|return|>" : "<|end|>");
        }
    }
    if (add) put(t, "<|start|>assistant");
}

/* ---- GLM-4.5/4.6 (glm45) and GLM-4.7-Flash (glm47) -----------------------------------------
 * What the models' Jinja templates (llama.cpp's models/templates/GLM-4.6.jinja and
 * GLM-4.7-Flash.jinja) render with jinja2 for string contents without tools. Both begin
 * "[gMASK]<sop>" (even with no messages); system and user texts as they are; an answer's
 * thinking is the text between the last <think> before its first </think> and that </think>
 * (newlines off its ends), its answer what follows the last </think> (leading newlines off),
 * as in qwen35; an answer after the last user message keeps its thinking (trimmed), earlier
 * ones an empty block; the answer is trimmed, and left out when empty.
 *   glm45  "<|system|>\ntext", "<|user|>\ntext", "<|assistant|>\n<think>thought</think>\nanswer";
 *          the prompt of a generation ends "<|assistant|>" (the model writes "\n<think>");
 *          MOEINF_CHAT_NO_THINKING (enable_thinking false) appends "/nothink" to every user
 *          text that does not end with it and ends the prompt "<|assistant|>\n<think></think>".
 *   glm47  the same without the newlines; an earlier answer has "</think>" alone before it;
 *          the prompt ends "<|assistant|><think>" (thinking opened), or "<|assistant|></think>"
 *          with MOEINF_CHAT_NO_THINKING. */

/* An answer's thinking and answer, as the GLM templates split its text. */
static void glm_split(const char *content, struct view *thought, struct view *answer) {
    struct view c = {content ? content : "", content ? strlen(content) : 0};
    *thought = (struct view){"", 0};
    *answer = c;
    const char *end = find(c, "</think>", false);
    if (!end) return;
    struct view before = strip_nl_right((struct view){c.s, (size_t)(end - c.s)});
    const char *open = find(before, "<think>", true);
    if (open) {
        size_t skip = (size_t)(open - before.s) + strlen("<think>");
        before = (struct view){open + strlen("<think>"), before.n - skip};
    }
    *thought = strip_nl_left(before);
    const char *last = find(c, "</think>", true) + strlen("</think>");
    *answer = strip_nl_left((struct view){last, c.n - (size_t)(last - c.s)});
}

static void write_glm(struct text *t, bool v47, const enum role *roles,
                      const struct moeinf_chat_message *m, size_t n, unsigned flags) {
    const char *nl = v47 ? "" : "\n";
    bool no_think = flags & MOEINF_CHAT_NO_THINKING;
    size_t last_user = SIZE_MAX; /* none */
    for (size_t i = 0; i < n; i++)
        if (roles[i] == ROLE_USER) last_user = i;
    put(t, "[gMASK]<sop>");
    for (size_t i = 0; i < n; i++) {
        const char *c = m[i].content ? m[i].content : "";
        if (roles[i] == ROLE_SYSTEM || roles[i] == ROLE_USER) {
            put(t, roles[i] == ROLE_SYSTEM ? "<|system|>" : "<|user|>");
            put(t, nl);
            put_content(t, c);
            static const char tag[] = "/nothink";
            size_t k = strlen(c);
            if (!v47 && no_think && roles[i] == ROLE_USER &&
                !(k >= sizeof tag - 1 && !strcmp(c + k - (sizeof tag - 1), tag))) {
                put(t, tag);
            }
            continue;
        }
        struct view thought;
        struct view answer;
        glm_split(c, &thought, &answer);
        put(t, "<|assistant|>");
        put(t, nl);
        bool keep = (last_user == SIZE_MAX || i > last_user) && thought.n > 0;
        if (keep) {
            struct view th = py_strip(thought);
            put(t, "<think>");
            put_content_n(t, th.s, th.n);
            put(t, "</think>");
        } else {
            put(t, v47 ? "</think>" : "<think></think>");
        }
        answer = py_strip(answer);
        if (answer.n > 0) {
            put(t, nl);
            put_content_n(t, answer.s, answer.n);
        }
    }
    if (flags & MOEINF_CHAT_ADD_ASSISTANT) {
        put(t, "<|assistant|>");
        if (v47)
            put(t, no_think ? "</think>" : "<think>");
        else if (no_think)
            put(t, "\n<think></think>");
    }
}

/* ---- Kimi-K2 (kimi-k2, kimi-k2-thinking) -----------------------------------------------------
 * What Kimi-K2-Instruct.jinja and Kimi-K2-Thinking.jinja (llama.cpp's models/templates)
 * render with jinja2 for string contents without tools: "<|im_system|>system<|im_middle|>",
 * "<|im_user|>user<|im_middle|>" or "<|im_assistant|>assistant<|im_middle|>", the text as it
 * is, then "<|im_end|>"; a conversation whose first message is not a system message begins
 * with Kimi's own ("You are Kimi, an AI assistant created by Moonshot AI.", followed by a
 * newline in kimi-k2 when there is a message); the prompt of a generation ends
 * "<|im_assistant|>assistant<|im_middle|>". kimi-k2-thinking writes "<think></think>" before
 * every answer's text (the template's history; a message's reasoning cannot be given here)
 * and its system text even for an empty conversation. */

#define KIMI_SYSTEM                                                                                \
    "<|im_system|>system<|im_middle|>You are Kimi, an AI assistant created by Moonshot AI."        \
    "<|im_end|>"

static void write_kimi(struct text *t, bool thinking, const enum role *roles,
                       const struct moeinf_chat_message *m, size_t n, bool add_assistant) {
    static const char *const heads[] = {"<|im_system|>system<|im_middle|>",
                                        "<|im_user|>user<|im_middle|>",
                                        "<|im_assistant|>assistant<|im_middle|>"};
    if ((thinking || n > 0) && (n == 0 || roles[0] != ROLE_SYSTEM)) {
        put(t, KIMI_SYSTEM);
        if (!thinking) put(t, "\n");
    }
    for (size_t i = 0; i < n; i++) {
        put(t, heads[roles[i]]);
        if (thinking && roles[i] == ROLE_ASSISTANT) put(t, "<think></think>");
        put_content(t, m[i].content);
        put(t, "<|im_end|>");
    }
    if (add_assistant) put(t, heads[ROLE_ASSISTANT]);
}

/* ---- DeepSeek-R1 (deepseek-r1) ---------------------------------------------------------------
 * What DeepSeek-R1's Jinja template renders with jinja2 (llama.cpp's
 * models/templates/deepseek-ai-DeepSeek-R1-Distill-Qwen-32B.jinja, the R1 template with its
 * enable_thinking switch) for string contents without tools, BOS aside (the tokenizer adds
 * it): the last system message's text first, then "<｜User｜>text" and
 * "<｜Assistant｜>answer<｜end▁of▁sentence｜>", an answer being the text after its last
 * </think>; the prompt of a generation ends "<｜Assistant｜><think>\n" (thinking opened), or
 * "<｜Assistant｜><think>\n</think>" with MOEINF_CHAT_NO_THINKING. */

static void write_deepseek_r1(struct text *t, const enum role *roles,
                              const struct moeinf_chat_message *m, size_t n, unsigned flags) {
    const char *system = NULL;
    for (size_t i = 0; i < n; i++)
        if (roles[i] == ROLE_SYSTEM) system = m[i].content ? m[i].content : "";
    if (system) put_content(t, system);
    for (size_t i = 0; i < n; i++) {
        struct view c = {m[i].content ? m[i].content : "", m[i].content ? strlen(m[i].content) : 0};
        if (roles[i] == ROLE_USER) {
            put(t, "<\xef\xbd\x9c"
                   "User\xef\xbd\x9c>");
            put_content_n(t, c.s, c.n);
        } else if (roles[i] == ROLE_ASSISTANT) {
            const char *last = find(c, "</think>", true);
            if (last) {
                last += strlen("</think>");
                c = (struct view){last, c.n - (size_t)(last - c.s)};
            }
            put(t, "<\xef\xbd\x9c"
                   "Assistant\xef\xbd\x9c>");
            put_content_n(t, c.s, c.n);
            put(t, DS_EOS);
        }
    }
    if (flags & MOEINF_CHAT_ADD_ASSISTANT) {
        put(t, "<\xef\xbd\x9c"
               "Assistant\xef\xbd\x9c><think>\n");
        if (flags & MOEINF_CHAT_NO_THINKING) put(t, "</think>");
    }
}

/* Writes the conversation into t (t->failed: out of memory). */
static enum moeinf_status render(const char *name, const struct moeinf_chat_message *msgs,
                                 size_t n_msgs, unsigned flags, struct text *t,
                                 struct moeinf_error *err) {
    const char *k = name ? known_name(name) : NULL;
    if (!k) {
        return moeinf_fail(err, MOEINF_ERR_ARG, "unknown chat template '%s'",
                           name ? name : "(none)");
    }
    if (flags & ~(MOEINF_CHAT_ADD_ASSISTANT | MOEINF_CHAT_NO_THINKING | MOEINF_CHAT_EFFORT_MASK)) {
        return moeinf_fail(err, MOEINF_ERR_ARG, "flags 0x%x has unknown bits (MOEINF_CHAT_*)",
                           flags);
    }
    bool add_assistant = flags & MOEINF_CHAT_ADD_ASSISTANT;
    bool harmony = !strcmp(k, "harmony");
    enum role *roles = malloc((n_msgs ? n_msgs : 1) * sizeof *roles);
    if (!roles) return moeinf_fail(err, MOEINF_ERR_NOMEM, "out of memory (chat)");
    for (size_t i = 0; i < n_msgs; i++) {
        const char *r = msgs[i].role ? msgs[i].role : "";
        if (!strcmp(r, "system")) {
            roles[i] = ROLE_SYSTEM;
        } else if (!strcmp(r, "user")) {
            roles[i] = ROLE_USER;
        } else if (!strcmp(r, "assistant")) {
            roles[i] = ROLE_ASSISTANT;
        } else if (harmony && !strcmp(r, "developer")) {
            roles[i] = ROLE_DEVELOPER;
        } else {
            free(roles);
            return moeinf_fail(err, MOEINF_ERR_ARG,
                               "message %zu has role '%.64s'; the roles are system, %suser and "
                               "assistant",
                               i, r, harmony ? "developer, " : "");
        }
    }
    put(t, ""); /* an empty conversation is an empty string, not NULL */
    size_t last_query = 0;
    if (!strcmp(k, "qwen35")) {
        enum moeinf_status st = qwen35_check(roles, msgs, n_msgs, &last_query, err);
        if (st != MOEINF_OK) {
            free(roles);
            return st;
        }
        write_qwen35(t, roles, msgs, n_msgs, last_query, flags);
    } else if (harmony) {
        char date[16];
        enum moeinf_status st = harmony_check(roles, msgs, n_msgs, err);
        if (st == MOEINF_OK) st = harmony_date(date, err);
        if (st != MOEINF_OK) {
            free(roles);
            return st;
        }
        write_harmony(t, roles, msgs, n_msgs, flags, date);
    } else if (!strcmp(k, "mistral")) {
        write_mistral(t, roles, msgs, n_msgs);
    } else if (!strcmp(k, "chatml")) {
        write_chatml(t, msgs, n_msgs, add_assistant);
    } else if (!strcmp(k, "llama3")) {
        write_llama3(t, msgs, n_msgs, add_assistant);
    } else if (!strcmp(k, "glm45") || !strcmp(k, "glm47")) {
        write_glm(t, !strcmp(k, "glm47"), roles, msgs, n_msgs, flags);
    } else if (!strcmp(k, "kimi-k2") || !strcmp(k, "kimi-k2-thinking")) {
        write_kimi(t, !strcmp(k, "kimi-k2-thinking"), roles, msgs, n_msgs, add_assistant);
    } else if (!strcmp(k, "deepseek-r1")) {
        write_deepseek_r1(t, roles, msgs, n_msgs, flags);
    } else if (!strcmp(k, "deepseek2") || !strcmp(k, "deepseek3")) {
        write_deepseek(t, !strcmp(k, "deepseek3"), roles, msgs, n_msgs, add_assistant);
    } else {
        write_olmoe(t, roles, msgs, n_msgs, add_assistant);
    }
    free(roles);
    if (t->failed) return moeinf_fail(err, MOEINF_ERR_NOMEM, "out of memory (chat)");
    return MOEINF_OK;
}

enum moeinf_status moeinf_chat_apply(const char *name, const struct moeinf_chat_message *msgs,
                                     size_t n_msgs, unsigned flags, char **out, size_t *out_len,
                                     struct moeinf_error *err) {
    struct text t = {0};
    enum moeinf_status st = render(name, msgs, n_msgs, flags, &t, err);
    free(t.span);
    if (st != MOEINF_OK) {
        free(t.buf);
        return st;
    }
    *out = t.buf;
    if (out_len) *out_len = t.len;
    return MOEINF_OK;
}

enum moeinf_status moeinf_chat_tokenize(const struct moeinf_model *model, const char *name,
                                        const struct moeinf_chat_message *msgs, size_t n_msgs,
                                        unsigned flags, int32_t **out_ids, size_t *n_out,
                                        struct moeinf_error *err) {
    struct text t = {0};
    enum moeinf_status st = render(name, msgs, n_msgs, flags, &t, err);
    if (st == MOEINF_OK) {
        st = moeinf_vocab_tokenize_mixed(model->vocab, t.buf, t.len, true, t.span, t.n_span,
                                         out_ids, n_out, err);
    }
    free(t.span);
    free(t.buf);
    return st;
}
