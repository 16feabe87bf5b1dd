/*
 * reasoning.c - the thinking of a model that thinks, split from its answer as the text streams
 * (moeinf.h, "reasoning"). The splitter keeps the bytes it cannot place yet (the start of a
 * marker, or whitespace that may still end the thinking) and places them when more text comes
 * or the text ends. tests/test_reasoning.c feeds it every cut of a stream.
 */
#include <stdlib.h>
#include <string.h>

#include "base/status.h"
#include "chat/reasoning.h"

enum phase {
    PHASE_EXPECT, /* at the start of the text: a start marker may open the thinking */
    PHASE_THINK,
    PHASE_ANSWER
};

struct text_buf {
    char *p;
    size_t n, cap;
};

struct moeinf_reasoning {
    char *start, *end; /* copies; NULL when the model does not think */
    size_t n_start, n_end;
    enum phase phase;
    bool lead;    /* whitespace at the start of this part is dropped */
    bool flushed; /* the text ended */
    char *open;   /* extract off: the prompt's opening, given before the text (NULL: given) */
    size_t n_open;
    struct text_buf hold;             /* bytes not yet placed */
    struct text_buf thinking, answer; /* this call's output */
};

/* The families whose templates have no thinking block (moeinf_chat_template_names). */
static const char *const no_thinking[] = {"mistral", "llama3", "deepseek2", "olmoe", NULL};

void moeinf_chat_reasoning_markers(const char *name, const char **start, const char **end) {
    for (size_t i = 0; name && no_thinking[i]; i++) {
        if (!strcmp(name, no_thinking[i])) {
            *start = NULL;
            *end = NULL;
            return;
        }
    }
    *start = "<think>";
    *end = "</think>";
}

/* The whitespace llama.cpp trims (isspace in the C locale). */
static bool is_space(char c) {
    return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f';
}

static bool buf_add(struct text_buf *b, const char *s, size_t n) {
    if (n == 0) return true;
    if (b->n + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 64;
        while (cap < b->n + n + 1)
            cap *= 2;
        char *p = realloc(b->p, cap);
        if (!p) return false;
        b->p = p;
        b->cap = cap;
    }
    memcpy(b->p + b->n, s, n);
    b->n += n;
    b->p[b->n] = '\0';
    return true;
}

static char *dup_bytes(const char *s, size_t n) {
    char *d = malloc(n + 1);
    if (d) {
        memcpy(d, s, n);
        d[n] = '\0';
    }
    return d;
}

static bool ends_with(const char *s, size_t n, const char *tail, size_t n_tail) {
    return n >= n_tail && !memcmp(s + n - n_tail, tail, n_tail);
}

enum moeinf_status moeinf_reasoning_init(const char *start, const char *end, const char *prompt,
                                         size_t prompt_len, bool extract,
                                         struct moeinf_reasoning **out, struct moeinf_error *err) {
    if (!start != !end) {
        return moeinf_fail(err, MOEINF_ERR_ARG, "start, end: give both markers or neither");
    }
    if (start && (!start[0] || !end[0])) {
        return moeinf_fail(err, MOEINF_ERR_ARG, "start, end: a marker is empty");
    }
    if (prompt_len > 0 && !prompt) {
        return moeinf_fail(err, MOEINF_ERR_ARG, "prompt: NULL with prompt_len %zu", prompt_len);
    }
    struct moeinf_reasoning *r = calloc(1, sizeof *r);
    if (!r) return moeinf_fail(err, MOEINF_ERR_NOMEM, "out of memory (reasoning splitter)");
    r->phase = PHASE_ANSWER;
    r->hold.p = malloc(64); /* never NULL: place() reads it as bytes */
    if (!r->hold.p) goto nomem;
    r->hold.cap = 64;
    if (start) {
        r->n_start = strlen(start);
        r->n_end = strlen(end);
        r->start = dup_bytes(start, r->n_start);
        r->end = dup_bytes(end, r->n_end);
        if (!r->start || !r->end) goto nomem;
        size_t p = prompt_len; /* the prompt less its trailing whitespace */
        while (p > 0 && is_space(prompt[p - 1]))
            p--;
        /* the end first: with markers where one ends the other, the later one counts */
        bool closed = ends_with(prompt, p, end, r->n_end);
        bool opened = !closed && ends_with(prompt, p, start, r->n_start);
        r->phase = opened ? PHASE_THINK : closed ? PHASE_ANSWER : PHASE_EXPECT;
        r->lead = opened;
        if (opened && !extract) {
            r->n_open = prompt_len - (p - r->n_start);
            r->open = dup_bytes(prompt + p - r->n_start, r->n_open);
            if (!r->open) goto nomem;
        }
    }
    if (!extract) {
        r->phase = PHASE_ANSWER;
        r->lead = false;
    }
    *out = r;
    return MOEINF_OK;
nomem:
    moeinf_reasoning_free(r);
    return moeinf_fail(err, MOEINF_ERR_NOMEM, "out of memory (reasoning splitter)");
}

enum moeinf_status moeinf_chat_reasoning_init(const char *name,
                                              const struct moeinf_chat_message *msgs, size_t n_msgs,
                                              unsigned flags, bool extract,
                                              struct moeinf_reasoning **out,
                                              struct moeinf_error *err) {
    const char *start;
    const char *end;
    moeinf_chat_reasoning_markers(name, &start, &end);
    char *prompt = NULL;
    size_t len = 0;
    if (start) { /* the prompt's text, as the template writes it */
        enum moeinf_status st = moeinf_chat_apply(name, msgs, n_msgs, flags, &prompt, &len, err);
        if (st != MOEINF_OK) return st;
    }
    enum moeinf_status st = moeinf_reasoning_init(start, end, prompt, len, extract, out, err);
    free(prompt);
    return st;
}

void moeinf_reasoning_free(struct moeinf_reasoning *r) {
    if (!r) return;
    free(r->start);
    free(r->end);
    free(r->open);
    free(r->hold.p);
    free(r->thinking.p);
    free(r->answer.p);
    free(r);
}

/* Where `end` first occurs in s[0, n), or n. */
static size_t find(const char *s, size_t n, const char *end, size_t n_end) {
    for (size_t i = 0; i + n_end <= n; i++) {
        if (s[i] == end[0] && !memcmp(s + i, end, n_end)) return i;
    }
    return n;
}

/* The longest tail of s[0, n) that is a proper prefix of `end`. */
static size_t partial_tail(const char *s, size_t n, const char *end, size_t n_end) {
    for (size_t k = n_end - 1 < n ? n_end - 1 : n; k > 0; k--) {
        if (!memcmp(s + n - k, end, k)) return k;
    }
    return 0;
}

/* Places what the held bytes allow (all of them when `final`); false when out of memory. */
static bool place(struct moeinf_reasoning *r, bool final) {
    const char *s = r->hold.p;
    const size_t n = r->hold.n;
    size_t at = 0;
    for (;;) {
        if (r->phase == PHASE_EXPECT) {
            size_t m = n - at;
            size_t k = m < r->n_start ? m : r->n_start;
            if (memcmp(s + at, r->start, k) != 0 || (m < r->n_start && final)) {
                r->phase = PHASE_ANSWER; /* text before any marker: no thinking block */
                continue;
            }
            if (m < r->n_start) break; /* may still become the start marker */
            at += r->n_start;
            r->phase = PHASE_THINK;
            r->lead = true;
            continue;
        }
        if (r->phase == PHASE_THINK) {
            const char *t = s + at;
            size_t m = n - at;
            size_t e = find(t, m, r->end, r->n_end);
            bool closed = e < m;
            /* the thinking text that is known: up to the marker, or up to what may begin it */
            size_t upto = closed || final ? e : m - partial_tail(t, m, r->end, r->n_end);
            size_t a = 0;
            while (r->lead && a < upto && is_space(t[a]))
                a++;
            size_t b = upto; /* trailing whitespace: dropped at the end, else held */
            while (b > a && is_space(t[b - 1]))
                b--;
            if (b > a) {
                if (!buf_add(&r->thinking, t + a, b - a)) return false;
                r->lead = false;
            }
            if (closed) {
                at += e + r->n_end;
                r->phase = PHASE_ANSWER;
                r->lead = true; /* the answer's leading whitespace goes */
                continue;
            }
            at += final ? m : b;
            break;
        }
        size_t a = at; /* PHASE_ANSWER */
        while (r->lead && a < n && is_space(s[a]))
            a++;
        if (a < n) r->lead = false;
        if (!buf_add(&r->answer, s + a, n - a)) return false;
        at = n;
        break;
    }
    memmove(r->hold.p, r->hold.p + at, n - at);
    r->hold.n = n - at;
    return true;
}

static enum moeinf_status run(struct moeinf_reasoning *r, const char *text, size_t len, bool final,
                              struct moeinf_reasoning_text *out, struct moeinf_error *err) {
    if (r->flushed) {
        return moeinf_fail(err, MOEINF_ERR_ARG, "r: the text already ended (flushed)");
    }
    if (len > 0 && !text) return moeinf_fail(err, MOEINF_ERR_ARG, "text: NULL with len %zu", len);
    r->thinking.n = 0;
    r->answer.n = 0;
    bool ok = true;
    if (r->open) {
        ok = buf_add(&r->answer, r->open, r->n_open);
        free(r->open);
        r->open = NULL;
    }
    ok = ok && buf_add(&r->hold, text, len) && place(r, final);
    if (!ok) return moeinf_fail(err, MOEINF_ERR_NOMEM, "out of memory (reasoning splitter)");
    r->flushed = final;
    out->thinking = r->thinking.n ? r->thinking.p : "";
    out->thinking_len = r->thinking.n;
    out->answer = r->answer.n ? r->answer.p : "";
    out->answer_len = r->answer.n;
    return MOEINF_OK;
}

enum moeinf_status moeinf_reasoning_push(struct moeinf_reasoning *r, const char *text, size_t len,
                                         struct moeinf_reasoning_text *out,
                                         struct moeinf_error *err) {
    return run(r, text, len, false, out, err);
}

enum moeinf_status moeinf_reasoning_flush(struct moeinf_reasoning *r,
                                          struct moeinf_reasoning_text *out,
                                          struct moeinf_error *err) {
    return run(r, NULL, 0, true, out, err);
}
