/*
 * fuzz_reasoning.c - the reasoning splitter of moeinf.h on arbitrary text. The first input
 * byte picks the prompt (its tail plain, opening <think>, or closing it with </think>), whether
 * the thinking is extracted, and a piece size; the rest is the generated text. For every input:
 *   - fed whole, byte by byte, and in pieces of the chosen size, the splitter gives the same
 *     thinking and answer, and no thinking after answer text;
 *   - they equal what this target computes from the definition on the whole text at once
 *     (written here, independent of the streaming code): the block opens at the start of the
 *     text or in the prompt, ends at the first </think>, the thinking trimmed of whitespace at
 *     both ends and the answer of its leading whitespace after the marker; with extraction off,
 *     the answer is the text, after the prompt's "<think>\n" when the prompt opened it.
 * With the first byte's top bit set, harmony's channels instead (reasoning.h): the same three
 * feedings agree, and equal the channel definition written here on the whole text. With the
 * first byte in 96..127, the block syntax with lead_space (glm45): whitespace before the block,
 * and at the start of the answer after a prompt that closed the block, is dropped.
 */
#include <string.h>

#include "chat/reasoning.h"
#include "fuzz.h"
#include "moeinf.h"

#define START "<think>"
#define END   "</think>"

struct out {
    char *thinking, *answer;
    size_t nt, na;
    bool thinking_after_answer;
};

static void add(char **p, size_t *n, const char *s, size_t k) {
    if (k == 0) return;
    char *q = realloc(*p, *n + k);
    FUZZ_REQUIRE(q != NULL);
    memcpy(q + *n, s, k);
    *p = q;
    *n += k;
}

static void take(struct out *o, const struct moeinf_reasoning_text *t) {
    if (t->thinking_len && o->na) o->thinking_after_answer = true;
    add(&o->thinking, &o->nt, t->thinking, t->thinking_len);
    add(&o->answer, &o->na, t->answer, t->answer_len);
}

/* The splitter over text[0, n) fed in pieces of `piece` bytes (0: whole); harmony's syntax or
 * START ... END (with lead_space when `lead`). */
static struct out run(bool harmony, bool lead, const char *prompt, bool extract, const char *text,
                      size_t n, size_t piece) {
    struct out o = {0};
    struct moeinf_reasoning *r = NULL;
    struct moeinf_reasoning_text t;
    if (lead) {
        const struct moeinf_reasoning_syntax syn = {START, {END, NULL}, {NULL}, NULL, NULL, true};
        FUZZ_REQUIRE(moeinf_reasoning_init_syntax(&syn, prompt, strlen(prompt), extract, &r,
                                                  NULL) == MOEINF_OK);
    } else if (harmony) {
        FUZZ_REQUIRE(moeinf_reasoning_init_syntax(moeinf_chat_reasoning_syntax("harmony"), prompt,
                                                  strlen(prompt), extract, &r, NULL) == MOEINF_OK);
    } else {
        FUZZ_REQUIRE(moeinf_reasoning_init(START, END, prompt, strlen(prompt), extract, &r, NULL) ==
                     MOEINF_OK);
    }
    for (size_t at = 0; at < n;) {
        size_t k = piece == 0 || n - at < piece ? n - at : piece;
        FUZZ_REQUIRE(moeinf_reasoning_push(r, text + at, k, &t, NULL) == MOEINF_OK);
        take(&o, &t);
        at += k;
    }
    FUZZ_REQUIRE(moeinf_reasoning_flush(r, &t, NULL) == MOEINF_OK);
    take(&o, &t);
    moeinf_reasoning_free(r);
    return o;
}

static bool space(char c) {
    return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f';
}

static const char *find(const char *s, size_t n, const char *needle) {
    size_t k = strlen(needle);
    for (size_t i = 0; i + k <= n; i++) {
        if (!memcmp(s + i, needle, k)) return s + i;
    }
    return NULL;
}

/* The definition, on the whole text. */
static struct out reference(int prompt_kind, bool lead, bool extract, const char *text, size_t n) {
    struct out o = {0};
    if (!extract) {
        if (prompt_kind == 1) add(&o.answer, &o.na, START "\n", strlen(START) + 1);
        add(&o.answer, &o.na, text, n);
        return o;
    }
    if (lead && prompt_kind != 1) { /* whitespace first is dropped, block or not */
        while (n > 0 && space(*text)) {
            text++;
            n--;
        }
    }
    const char *b = text;
    const char *e = text + n;
    bool thinking = prompt_kind == 1;
    if (prompt_kind == 0 && n >= strlen(START) && !memcmp(text, START, strlen(START))) {
        thinking = true;
        b += strlen(START);
    }
    if (!thinking || prompt_kind == 2) {
        add(&o.answer, &o.na, text, n);
        return o;
    }
    const char *m = find(b, (size_t)(e - b), END);
    const char *te = m ? m : e;
    while (b < te && space(*b))
        b++;
    while (te > b && space(te[-1]))
        te--;
    add(&o.thinking, &o.nt, b, (size_t)(te - b));
    if (m) {
        const char *a = m + strlen(END);
        while (a < e && space(*a))
            a++;
        add(&o.answer, &o.na, a, (size_t)(e - a));
    }
    return o;
}

static bool starts(const char *s, size_t n, const char *m) {
    size_t k = strlen(m);
    return n >= k && !memcmp(s, m, k);
}

/* harmony's channels, on the whole text: a header starts with <|start|> or <|channel|> and
 * ends at <|message|> (a text that ends inside one drops it); the body runs to the first
 * <|end|>, <|start|>, <|return|> or <|call|> (a <|start|> stays for the next header); an
 * analysis body (its header holds <|channel|>analysis) is thinking, trimmed both sides, any
 * other is answer, less its leading whitespace; text where no header starts is answer, less
 * its leading whitespace except at the very start; a part's bodies are joined by a newline. */
static struct out reference_harmony(bool extract, const char *text, size_t n) {
    static const char *const ends[] = {"<|end|>", "<|start|>", "<|return|>", "<|call|>"};
    struct out o = {0};
    if (!extract) {
        add(&o.answer, &o.na, text, n);
        return o;
    }
    size_t at = 0;
    bool first = true;
    while (at < n || first) {
        bool think = false;
        bool head =
            starts(text + at, n - at, "<|start|>") || starts(text + at, n - at, "<|channel|>");
        if (head) {
            const char *h = find(text + at, n - at, "<|message|>");
            if (!h) break;
            think = find(text + at, (size_t)(h - (text + at)), "<|channel|>analysis") != NULL;
            at = (size_t)(h - text) + strlen("<|message|>");
        }
        size_t e = n; /* the body: [at, e) */
        size_t which = 0;
        for (size_t k = 0; k < 4; k++) {
            const char *m = find(text + at, n - at, ends[k]);
            if (m && (size_t)(m - text) < e) {
                e = (size_t)(m - text);
                which = k;
            }
        }
        size_t b = at;
        size_t te = e;
        if (head || !first) {
            while (b < te && space(text[b]))
                b++;
        }
        if (think) {
            while (te > b && space(text[te - 1]))
                te--;
        }
        char **part = think ? &o.thinking : &o.answer;
        size_t *np = think ? &o.nt : &o.na;
        if (te > b && *np) add(part, np, "\n", 1);
        add(part, np, text + b, te - b);
        first = false;
        if (e == n) break;
        at = e + (which == 1 ? 0 : strlen(ends[which]));
    }
    return o;
}

static bool same(const struct out *x, const struct out *y) {
    return x->nt == y->nt && x->na == y->na &&
           (x->nt == 0 || !memcmp(x->thinking, y->thinking, x->nt)) &&
           (x->na == 0 || !memcmp(x->answer, y->answer, x->na));
}

static void release(struct out *o) {
    free(o->thinking);
    free(o->answer);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size == 0) return 0;
    static const char *const prompts[] = {"<|im_start|>assistant\n",
                                          "<|im_start|>assistant\n" START "\n",
                                          "<|im_start|>assistant\n" START "\n\n" END "\n\n"};
    int kind = data[0] % 3;
    bool extract = (data[0] / 3) % 2 == 0;
    size_t piece = 2 + (size_t)(data[0] / 6) % 16;
    bool harmony = data[0] & 0x80;
    bool lead = !harmony && data[0] >= 96;
    const char *text = (const char *)data + 1;
    size_t n = size - 1;
    struct out want =
        harmony ? reference_harmony(extract, text, n) : reference(kind, lead, extract, text, n);
    const size_t pieces[] = {0, 1, piece};
    for (int i = 0; i < 3; i++) {
        struct out got = run(harmony, lead, harmony ? "<|start|>assistant" : prompts[kind], extract,
                             text, n, pieces[i]);
        FUZZ_REQUIRE(harmony || !got.thinking_after_answer);
        FUZZ_REQUIRE(same(&got, &want));
        release(&got);
    }
    release(&want);
    return 0;
}
