/*
 * reasoning.c - the thinking of a model that thinks, split from its answer as the text streams
 * (moeinf.h, "reasoning"), for the syntaxes of reasoning.h: a block between markers at the
 * start (<think>...</think>) or channels (harmony). One state machine serves both: it keeps
 * the bytes it cannot place yet (the start of a marker, a header not yet ended, or whitespace
 * that may still end the thinking) and places them when more text comes or the text ends.
 * tests/test_reasoning.c feeds it every cut of a stream.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/grow.h"
#include "base/status.h"
#include "chat/reasoning.h"

enum phase {
    PHASE_EXPECT, /* where a block (or, with channels, a header) may begin */
    PHASE_HEAD,   /* channels: in a header, up to its head_end */
    PHASE_THINK,
    PHASE_ANSWER
};

struct text_buf {
    char *p;
    size_t n, cap;
};

struct mark {
    char *s; /* a copy */
    size_t n;
};

#define MAX_ENDS  4
#define MAX_HEADS 2

struct moeinf_reasoning {
    bool channels;   /* the channel form (else the block form) */
    bool lead_space; /* the syntax's lead_space */
    struct mark start;
    struct mark ends[MAX_ENDS];
    struct mark heads[MAX_HEADS];
    size_t n_ends, n_heads;
    struct mark head_end, think_channel;
    enum phase phase;
    bool lead;                /* whitespace at the start of this part is dropped */
    bool sep;                 /* channels: a newline before this body's first text (the part
                                 already has text from an earlier body) */
    bool raw;                 /* extract off: everything is answer, as generated */
    bool flushed;             /* the text ended */
    size_t n_thought, n_said; /* bytes of thinking and answer given so far */
    char *open; /* extract off: the prompt's opening, given before the text (NULL: given) */
    size_t n_open;
    struct text_buf hold;             /* bytes not yet placed */
    struct text_buf thinking, answer; /* this call's output */
};

/* The families whose templates have no thinking block (moeinf_chat_template_names). */
static const char *const no_thinking[] = {"mistral", "llama3",  "deepseek2",
                                          "olmoe",   "kimi-k2", NULL};

static const struct moeinf_reasoning_syntax think_block = {
    "<think>", {"</think>", NULL}, {NULL}, NULL, NULL, false};

/* GLM-4.5/4.6: the prompt ends "<|assistant|>" and the model writes "\n<think>...</think>\n
 * answer" (or, after "<think></think>", "\nanswer"). */
static const struct moeinf_reasoning_syntax glm45 = {
    "<think>", {"</think>", NULL}, {NULL}, NULL, NULL, true};

/* gpt-oss: "<|channel|>analysis<|message|>" thinking "<|end|>" "<|start|>assistant<|channel|>
 * final<|message|>" answer, ended by <|return|> (or <|call|>). The tokenizer may or may not
 * show <|end|>: "<|start|>" ends a body too, and stays to begin the next header. */
static const struct moeinf_reasoning_syntax harmony = {
    NULL,
    {"<|end|>", "<|start|>", "<|return|>", "<|call|>", NULL},
    {"<|start|>", "<|channel|>", NULL},
    "<|message|>",
    "<|channel|>analysis",
    false};

const struct moeinf_reasoning_syntax *moeinf_chat_reasoning_syntax(const char *name) {
    for (size_t i = 0; name && no_thinking[i]; i++) {
        if (!strcmp(name, no_thinking[i])) return NULL;
    }
    if (name && !strcmp(name, "harmony")) return &harmony;
    if (name && !strcmp(name, "glm45")) return &glm45;
    return &think_block;
}

/* The block form's markers; harmony's markup needs none (the vocabulary makes it user-defined,
 * vocab.c, as llama.cpp does, so it shows anyway). */
const char *const *moeinf_chat_reasoning_markers(const char *name) {
    static const char *const block[] = {"<think>", "</think>", NULL};
    const struct moeinf_reasoning_syntax *syn = moeinf_chat_reasoning_syntax(name);
    return syn && !syn->head_end ? block : NULL;
}

/* The whitespace llama.cpp trims (isspace in the C locale). */
static bool is_space(char c) {
    return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f';
}

static bool buf_add(struct text_buf *b, const char *s, size_t n) {
    if (n == 0) return true;
    return moeinf_text_append(&b->p, &b->n, &b->cap, s, n);
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

/* Copies marker s into m (false when out of memory). */
static bool mark_set(struct mark *m, const char *s) {
    m->n = strlen(s);
    m->s = dup_bytes(s, m->n);
    return m->s != NULL;
}

/* A marker list's length, or SIZE_MAX when a marker is empty or there are more than max. */
static size_t list_len(const char *const *list, size_t max) {
    size_t n = 0;
    for (; n <= max && list[n]; n++) {
        if (!list[n][0]) return SIZE_MAX;
    }
    return n > max ? SIZE_MAX : n;
}

static enum moeinf_status check_syntax(const struct moeinf_reasoning_syntax *syn,
                                       struct moeinf_error *err) {
    size_t n_ends = list_len(syn->ends, MAX_ENDS);
    if (n_ends == 0 || n_ends == SIZE_MAX) {
        return moeinf_fail(err, MOEINF_ERR_ARG, "syn->ends: give 1 to %d end markers, none empty",
                           MAX_ENDS);
    }
    if (!syn->head_end) {
        if (!syn->start || !syn->start[0] || syn->heads[0] || syn->think_channel) {
            return moeinf_fail(err, MOEINF_ERR_ARG,
                               "syn: the block form takes a start marker (not empty) and no "
                               "heads or channel");
        }
        return MOEINF_OK;
    }
    size_t n_heads = list_len(syn->heads, MAX_HEADS);
    if (syn->start || n_heads == 0 || n_heads == SIZE_MAX || !syn->head_end[0] ||
        !syn->think_channel || !syn->think_channel[0]) {
        return moeinf_fail(err, MOEINF_ERR_ARG,
                           "syn: channels take 1 to %d heads, a head end and a thinking channel "
                           "(none empty), and no start marker",
                           MAX_HEADS);
    }
    return MOEINF_OK;
}

enum moeinf_status moeinf_reasoning_init_syntax(const struct moeinf_reasoning_syntax *syn,
                                                const char *prompt, size_t prompt_len, bool extract,
                                                struct moeinf_reasoning **out,
                                                struct moeinf_error *err) {
    if (syn) {
        enum moeinf_status st = check_syntax(syn, err);
        if (st != MOEINF_OK) return st;
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
    if (syn) {
        r->channels = syn->head_end != NULL;
        for (; syn->ends[r->n_ends]; r->n_ends++) {
            if (!mark_set(&r->ends[r->n_ends], syn->ends[r->n_ends])) goto nomem;
        }
        r->phase = PHASE_EXPECT;
    }
    if (syn && r->channels) {
        for (; syn->heads[r->n_heads]; r->n_heads++) {
            if (!mark_set(&r->heads[r->n_heads], syn->heads[r->n_heads])) goto nomem;
        }
        if (!mark_set(&r->head_end, syn->head_end) ||
            !mark_set(&r->think_channel, syn->think_channel)) {
            goto nomem;
        }
    } else if (syn) {
        if (!mark_set(&r->start, syn->start)) goto nomem;
        const struct mark *end = &r->ends[0];
        size_t p = prompt_len; /* the prompt less its trailing whitespace */
        while (p > 0 && is_space(prompt[p - 1]))
            p--;
        /* the end first: with markers where one ends the other, the later one counts */
        bool closed = end->s && ends_with(prompt, p, end->s, end->n);
        bool opened = !closed && ends_with(prompt, p, r->start.s, r->start.n);
        r->phase = opened ? PHASE_THINK : closed ? PHASE_ANSWER : PHASE_EXPECT;
        r->lead_space = syn->lead_space;
        r->lead = opened || (closed && syn->lead_space);
        if (opened && !extract) {
            r->n_open = prompt_len - (p - r->start.n);
            r->open = dup_bytes(prompt + p - r->start.n, r->n_open);
            if (!r->open) goto nomem;
        }
    }
    if (!extract) {
        r->phase = PHASE_ANSWER;
        r->lead = false;
        r->raw = true;
    }
    *out = r;
    return MOEINF_OK;
nomem:
    moeinf_reasoning_free(r);
    return moeinf_fail(err, MOEINF_ERR_NOMEM, "out of memory (reasoning splitter)");
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
    struct moeinf_reasoning_syntax syn = {start, {end, NULL}, {NULL}, NULL, NULL, false};
    return moeinf_reasoning_init_syntax(start ? &syn : NULL, prompt, prompt_len, extract, out, err);
}

enum moeinf_status moeinf_chat_reasoning_init(const char *name,
                                              const struct moeinf_chat_message *msgs, size_t n_msgs,
                                              unsigned flags, bool extract,
                                              struct moeinf_reasoning **out,
                                              struct moeinf_error *err) {
    const struct moeinf_reasoning_syntax *syn = moeinf_chat_reasoning_syntax(name);
    char *prompt = NULL;
    size_t len = 0;
    if (syn) { /* the prompt's text, as the template writes it */
        enum moeinf_status st = moeinf_chat_apply(name, msgs, n_msgs, flags, &prompt, &len, err);
        if (st != MOEINF_OK) return st;
    }
    enum moeinf_status st = moeinf_reasoning_init_syntax(syn, prompt, len, extract, out, err);
    free(prompt);
    return st;
}

void moeinf_reasoning_free(struct moeinf_reasoning *r) {
    if (!r) return;
    free(r->start.s);
    for (size_t i = 0; i < MAX_ENDS; i++)
        free(r->ends[i].s);
    for (size_t i = 0; i < MAX_HEADS; i++)
        free(r->heads[i].s);
    free(r->head_end.s);
    free(r->think_channel.s);
    free(r->open);
    free(r->hold.p);
    free(r->thinking.p);
    free(r->answer.p);
    free(r);
}

/* Where a marker of m[0, k) first occurs in s[0, n), or n; *which: that marker. */
static size_t find_any(const char *s, size_t n, const struct mark *m, size_t k, size_t *which) {
    for (size_t i = 0; i < n; i++) {
        for (size_t j = 0; j < k; j++) {
            if (m[j].n <= n - i && s[i] == m[j].s[0] && !memcmp(s + i, m[j].s, m[j].n)) {
                *which = j;
                return i;
            }
        }
    }
    return n;
}

/* The longest tail of s[0, n) that is a proper prefix of a marker of m[0, k). */
static size_t partial_tail(const char *s, size_t n, const struct mark *m, size_t k) {
    size_t best = 0;
    for (size_t j = 0; j < k; j++) {
        for (size_t t = m[j].n - 1 < n ? m[j].n - 1 : n; t > best; t--) {
            if (!memcmp(s + n - t, m[j].s, t)) {
                best = t;
                break;
            }
        }
    }
    return best;
}

/* Whether end marker e begins a header too (then it stays for the header). */
static bool is_head(const struct moeinf_reasoning *r, const struct mark *e) {
    for (size_t i = 0; i < r->n_heads; i++) {
        if (r->heads[i].n == e->n && !memcmp(r->heads[i].s, e->s, e->n)) return true;
    }
    return false;
}

/* Gives s[0, n) to a part (after the separator a new body owes it); false when out of memory. */
static bool give(struct moeinf_reasoning *r, bool thinking, const char *s, size_t n) {
    struct text_buf *b = thinking ? &r->thinking : &r->answer;
    if (r->sep && !buf_add(b, "\n", 1)) return false;
    r->sep = false;
    r->lead = false;
    *(thinking ? &r->n_thought : &r->n_said) += n;
    return buf_add(b, s, n);
}

/* Places what the held bytes allow (all of them when `final`); false when out of memory. */
static bool place(struct moeinf_reasoning *r, bool final) {
    const char *s = r->hold.p;
    const size_t n = r->hold.n;
    size_t at = 0;
    for (;;) {
        const char *t = s + at;
        size_t m = n - at;
        if (r->phase == PHASE_EXPECT) {
            size_t sp = 0; /* whitespace the syntax lets come before the start marker */
            while (r->lead_space && sp < m && is_space(t[sp]))
                sp++;
            if (sp > 0) {
                at += sp;
                continue;
            }
            /* the block's start marker, or with channels a header's first marker */
            const struct mark *cand = r->channels ? r->heads : &r->start;
            size_t n_cand = r->channels ? r->n_heads : 1;
            bool may = false;
            const struct mark *hit = NULL;
            for (size_t j = 0; j < n_cand && !hit; j++) {
                size_t k = m < cand[j].n ? m : cand[j].n;
                if (memcmp(t, cand[j].s, k) != 0) continue;
                if (m >= cand[j].n) hit = &cand[j];
                may = true;
            }
            if (hit && r->channels) {
                r->phase = PHASE_HEAD; /* the marker is the header's */
            } else if (hit) {
                at += hit->n;
                r->phase = PHASE_THINK;
                r->lead = true;
            } else if (may && !final) {
                break; /* may still become a marker */
            } else {
                r->phase = PHASE_ANSWER; /* text before any marker: answer */
                r->sep = r->n_said > 0;
            }
            continue;
        }
        if (r->phase == PHASE_HEAD) {
            size_t w;
            size_t e = find_any(t, m, &r->head_end, 1, &w);
            if (e == m) {
                if (final) at = n; /* a header the text ended in: markup, dropped */
                break;
            }
            size_t k;
            bool thinking = find_any(t, e, &r->think_channel, 1, &k) < e;
            at += e + r->head_end.n;
            r->phase = thinking ? PHASE_THINK : PHASE_ANSWER;
            r->lead = true;
            r->sep = (thinking ? r->n_thought : r->n_said) > 0;
            continue;
        }
        if (r->phase == PHASE_ANSWER && (!r->channels || r->raw)) {
            size_t a = 0; /* the rest is answer */
            while (r->lead && a < m && is_space(t[a]))
                a++;
            if (a < m && !give(r, false, t + a, m - a)) return false;
            at = n;
            break;
        }
        /* a thinking block, or with channels a body: up to an end marker */
        bool thinking = r->phase == PHASE_THINK;
        size_t which = 0;
        size_t e = find_any(t, m, r->ends, r->n_ends, &which);
        bool closed = e < m;
        /* the text that is known: up to the marker, or up to what may begin one */
        size_t upto = closed || final ? e : m - partial_tail(t, m, r->ends, r->n_ends);
        size_t a = 0;
        while (r->lead && a < upto && is_space(t[a]))
            a++;
        size_t b = upto; /* the thinking's trailing whitespace: dropped at the end, else held */
        while (thinking && b > a && is_space(t[b - 1]))
            b--;
        if (b > a && !give(r, thinking, t + a, b - a)) return false;
        if (closed) {
            const struct mark *end = &r->ends[which];
            at += e + (r->channels && is_head(r, end) ? 0 : end->n);
            r->phase = r->channels ? PHASE_EXPECT : PHASE_ANSWER;
            r->lead = true; /* the answer's leading whitespace goes */
            continue;
        }
        at += final ? m : b;
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
