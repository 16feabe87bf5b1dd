/*
 * pretok.c - the pre-tokenizer table (name -> split patterns and flags, from llama.cpp's
 * llama-vocab.cpp) and the split itself, with PCRE2. See pretok.h.
 */
#define PCRE2_CODE_UNIT_WIDTH 8
#include "tokenizer/pretok.h"

#include <pcre2.h>
#include <stdlib.h>
#include <string.h>

#include "base/escape.h"
#include "base/status.h"

#define MAX_PATTERNS 6

/* The GPT-2 split (contractions, letters, digits, other symbols, whitespace runs). */
#define GPT2 "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)"

/* llama3's split; llama.cpp writes the case-insensitive contractions out as [sS] etc. */
#define LLAMA3                                                                                     \
    "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|"     \
    "\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"

/* qwen2's: llama3's with single digits. */
#define QWEN2                                                                                      \
    "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|"     \
    "\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"

/* Han, Hangul and U+0800..U+4E00 (deepseek-llm and -coder: U+4E00..U+9FA5, U+0800..U+4E00,
 * U+AC00..U+D7FF). llama.cpp matches the patterns without Unicode properties on text whose
 * non-ASCII whitespace it has replaced by \v, so whitespace never falls inside their ranges
 * there; U+0800..U+4E00 holds U+1680, U+2000..U+200A, U+2028, U+2029, U+202F, U+205F and
 * U+3000, so the range is written in pieces around them. (A lookahead per character would do
 * the same but makes PCRE2 keep a frame per repeat: long runs then exhaust its stack.) */
static const char deepseek_cjk[] =
    "[\\x{4e00}-\\x{9fa5}\\x{800}-\\x{167f}\\x{1681}-\\x{1fff}\\x{200b}-\\x{2027}"
    "\\x{202a}-\\x{202e}\\x{2030}-\\x{205e}\\x{2060}-\\x{2fff}\\x{3001}-\\x{4e00}"
    "\\x{ac00}-\\x{d7ff}]+";

/* deepseek-llm's letter class: the cased letters (Lu, Ll, Lt) of its tokenizer.json. */
#define DEEPSEEK_LLM_LETTERS                                                                       \
    "A-Za-z\\x{b5}\\x{c0}-\\x{d6}\\x{d8}-\\x{f6}\\x{f8}-\\x{1ba}\\x{1bc}-\\x{1bf}"                 \
    "\\x{1c4}-\\x{293}\\x{295}-\\x{2af}\\x{370}-\\x{373}\\x{376}\\x{377}"                          \
    "\\x{37b}-\\x{37d}\\x{37f}\\x{386}\\x{388}-\\x{38a}\\x{38c}\\x{38e}-\\x{3a1}"                  \
    "\\x{3a3}-\\x{3f5}\\x{3f7}-\\x{481}\\x{48a}-\\x{52f}\\x{531}-\\x{556}"                         \
    "\\x{10a0}-\\x{10c5}\\x{13a0}-\\x{13f5}\\x{13f8}-\\x{13fd}\\x{1c90}-\\x{1cba}"                 \
    "\\x{1cbd}-\\x{1cbf}\\x{1d00}-\\x{1d2b}\\x{1d6b}-\\x{1d77}\\x{1d79}-\\x{1d9a}"                 \
    "\\x{1e00}-\\x{1f15}\\x{1f18}-\\x{1f1d}\\x{1f20}-\\x{1f45}\\x{1f48}-\\x{1f4d}"                 \
    "\\x{1f50}-\\x{1f57}\\x{1f59}\\x{1f5b}\\x{1f5d}\\x{1f5f}-\\x{1f7d}"                            \
    "\\x{1f80}-\\x{1fb4}\\x{1fb6}-\\x{1fbc}\\x{1fbe}\\x{1fc2}-\\x{1fc4}"                           \
    "\\x{1fc6}-\\x{1fcc}\\x{1fd0}-\\x{1fd3}\\x{1fd6}-\\x{1fdb}\\x{1fe0}-\\x{1fec}"                 \
    "\\x{1ff2}-\\x{1ff4}\\x{1ff6}-\\x{1ffc}\\x{2102}\\x{2107}\\x{210a}-\\x{2113}"                  \
    "\\x{2115}\\x{2119}-\\x{211d}\\x{2124}\\x{2126}\\x{2128}\\x{212a}-\\x{212d}"                   \
    "\\x{212f}-\\x{2134}\\x{2139}\\x{213c}-\\x{213f}\\x{2145}-\\x{2149}\\x{214e}"                  \
    "\\x{2183}\\x{2184}\\x{2c00}-\\x{2c7b}\\x{2c7e}-\\x{2ce4}\\x{2ceb}-\\x{2cee}"                  \
    "\\x{2cf2}\\x{2cf3}\\x{a640}-\\x{a66d}\\x{a680}-\\x{a69b}\\x{a722}-\\x{a76f}"                  \
    "\\x{a771}-\\x{a787}\\x{a78b}-\\x{a78e}\\x{ab70}-\\x{abbf}\\x{fb00}-\\x{fb06}"                 \
    "\\x{fb13}-\\x{fb17}\\x{ff21}-\\x{ff3a}\\x{ff41}-\\x{ff5a}\\x{10400}-\\x{1044f}"               \
    "\\x{104b0}-\\x{104d3}\\x{104d8}-\\x{104fb}\\x{10c80}-\\x{10cb2}"                              \
    "\\x{10cc0}-\\x{10cf2}\\x{118a0}-\\x{118df}\\x{1e900}-\\x{1e943}"

static const char deepseek_llm_letters[] = "\\s?[" DEEPSEEK_LLM_LETTERS "]+";

/* ASCII and fullwidth punctuation, quotes, U+3000..U+3002 less U+3000 (see deepseek_cjk). */
static const char deepseek_llm_punct[] =
    "\\s?[!-/:-~\\x{ff01}-\\x{ff0f}\\x{ff1a}-\\x{ff5e}\\x{2018}-\\x{201f}\\x{3001}-\\x{3002}]+";

static const char deepseek_v3_words[] =
    "[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|[^\\r\\n\\p{L}\\p{P}\\p{S}]?"
    "[\\p{L}\\p{M}]+| ?[\\p{P}\\p{S}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";

/* qwen35's (Qwen3.5, Qwen3.6): qwen2's, with combining marks (\p{M}) inside letter runs and
 * out of the symbol runs, so that a letter and its accents stay one word. */
#define QWEN35                                                                                     \
    "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n\\p{L}\\p{N}]?"             \
    "[\\p{L}\\p{M}]+|\\p{N}| ?[^\\s\\p{L}\\p{M}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"

/* gpt-4o's (o200k: gpt-oss, Llama 4), as llama.cpp runs it: an optional non-letter, a run of
 * "upper" letters and a run of "lower" ones (one of the two runs may be empty), then an
 * optional contraction; digits by up to three; punctuation with the newlines and slashes after
 * it. llama.cpp spells the published classes ([\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}] and
 * [\p{Ll}\p{Lm}\p{Lo}\p{M}]) as "a letter but not a-z" and "a letter but not A-Z"
 * ((?=[\p{L}])[^a-z]): only ASCII letters have a case there, and combining marks are no
 * letters (pretok.h). [^a-z\P{L}] is that class without a lookahead per character. */
#define GPT4O_UPPER       "[^a-z\\P{L}]"
#define GPT4O_LOWER       "[^A-Z\\P{L}]"
#define GPT4O_CONTRACTION "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?"
#define GPT4O                                                                                      \
    "[^\\r\\n\\p{L}\\p{N}]?" GPT4O_UPPER "*" GPT4O_LOWER "+" GPT4O_CONTRACTION                     \
    "|[^\\r\\n\\p{L}\\p{N}]?" GPT4O_UPPER "+" GPT4O_LOWER "*" GPT4O_CONTRACTION                    \
    "|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"

/* Kimi-K2's, as llama.cpp's own code for it splits (unicode_regex_split_custom_kimi_k2): runs of
 * Han (llama.cpp's ranges: CJK Unified Ideographs with Extensions A to F, and the compatibility
 * ideographs), then a run of any other letters with an optional non-letter before it and a
 * contraction after it, then llama3's digits, punctuation and whitespace. The published
 * pattern (tokenization_kimi.py) splits letter runs at case changes as gpt-4o's does and
 * keeps combining marks in them; llama.cpp does neither (pretok.h). */
#define KIMI_HAN                                                                                   \
    "\\x{3400}-\\x{4dbf}\\x{4e00}-\\x{9fff}\\x{f900}-\\x{faff}\\x{20000}-\\x{2a6df}"               \
    "\\x{2a700}-\\x{2ebef}\\x{2f800}-\\x{2fa1f}"
#define KIMI_K2                                                                                    \
    "[" KIMI_HAN "]+|[^\\r\\n\\p{L}\\p{N}]?[^\\P{L}" KIMI_HAN "]+"                                 \
    "(?:'[sS]|'[tT]|'[mM]|'[dD]|'[rR][eE]|'[vV][eE]|'[lL][lL])?"                                   \
    "|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"

static const char llama3[] = LLAMA3;
static const char kimi_k2[] = KIMI_K2;
static const char qwen2[] = QWEN2;
static const char qwen35[] = QWEN35;
static const char gpt4o[] = GPT4O;

struct spec {
    const char *name;
    const char *aliases[4];
    const char *patterns[MAX_PATTERNS];
    struct moeinf_pretok_flags flags;
};

/* {ignore_merges, clean_spaces, add_bos, no_bos}, as llama.cpp sets them per name. */
static const struct spec specs[] = {
    {"default",
     {NULL},
     {"[\\p{P}\\$\\+<=>\\^~\\|]+", GPT2, "\\p{N}+", "[0-9][0-9][0-9]"},
     {false, true, false, false}},
    {"gpt-2", {"phi-2", NULL}, {GPT2}, {false, true, false, false}},
    {"mpt", {NULL}, {GPT2}, {false, true, false, false}},
    {"olmo", {NULL}, {GPT2}, {false, true, false, false}},
    {"starcoder", {NULL}, {"\\p{N}", GPT2}, {false, true, false, false}},
    {"refact", {NULL}, {"\\p{N}", GPT2}, {false, true, false, false}},
    {"falcon",
     {NULL},
     {"[\\p{P}\\$\\+<=>\\^~\\|`]+", GPT2, "[0-9][0-9][0-9]"},
     {false, true, false, false}},
    {"llama3", {"llama-v3", "llama-bpe", "falcon3", NULL}, {llama3}, {true, true, true, false}},
    {"dbrx", {"smaug-bpe", NULL}, {llama3}, {false, true, false, false}},
    /* GLM-4.5 to 4.7 and GLM-5 (chatglm-bpe: GLM-4, without ignore_merges) */
    {"glm4", {"glm5", NULL}, {llama3}, {true, true, false, true}},
    {"chatglm-bpe", {NULL}, {llama3}, {false, true, false, true}},
    {"kimi-k2", {NULL}, {kimi_k2}, {false, false, false, false}},
    {"qwen2", {"deepseek-r1-qwen", NULL}, {qwen2}, {false, false, false, false}},
    {"qwen35", {NULL}, {qwen35}, {false, false, false, false}},
    {"gpt-4o", {"llama4", "kanana2", "talkie", NULL}, {gpt4o}, {false, false, false, false}},
    {"stablelm2", {"megrez", NULL}, {qwen2}, {false, true, false, false}},
    {"deepseek-llm",
     {NULL},
     {"[\\r\\n]", deepseek_llm_letters, deepseek_llm_punct, "\\s+$", deepseek_cjk, "\\p{N}+"},
     {false, false, false, false}},
    {"deepseek-coder",
     {NULL},
     {"[\\r\\n]", "\\s?\\p{L}+", "\\s?\\p{P}+", deepseek_cjk, "\\p{N}"},
     {false, false, false, false}},
    {"deepseek-v3",
     {NULL},
     {"\\p{N}{1,3}", "[\\x{4e00}-\\x{9fa5}\\x{3040}-\\x{309f}\\x{30a0}-\\x{30ff}]+",
      deepseek_v3_words},
     {false, false, false, false}},
};

#define N_SPECS (sizeof specs / sizeof specs[0])

struct moeinf_pretok {
    const struct spec *spec;
    int n;
    pcre2_code *code[MAX_PATTERNS];
    bool jit[MAX_PATTERNS];
};

const char *moeinf_pretok_known_names(void) {
    return "default, gpt-2, phi-2, mpt, olmo, starcoder, refact, falcon, llama3, llama-v3, "
           "llama-bpe, falcon3, dbrx, smaug-bpe, glm4, glm5, chatglm-bpe, kimi-k2, qwen2, "
           "deepseek-r1-qwen, qwen35, gpt-4o, llama4, "
           "kanana2, talkie, stablelm2, "
           "megrez, deepseek-llm, deepseek-coder, deepseek-v3";
}

static const struct spec *find_spec(const char *name) {
    for (size_t i = 0; i < N_SPECS; i++) {
        if (strcmp(specs[i].name, name) == 0) return &specs[i];
        for (int a = 0; specs[i].aliases[a]; a++)
            if (strcmp(specs[i].aliases[a], name) == 0) return &specs[i];
    }
    return NULL;
}

/* White_Space, as a class body (llama.cpp's unicode_set_whitespace). */
#define WS                                                                                         \
    "\\t-\\r "                                                                                     \
    "\\x{85}\\x{a0}\\x{1680}\\x{2000}-\\x{200a}\\x{2028}\\x{2029}\\x{202f}\\x{205f}\\x{3000}"

/* The pattern with \s and \S spelled out as WS classes (none of the table's patterns uses \S
 * inside a class). Returns a malloc'ed string or NULL. */
static char *expand_space(const char *pat) {
    size_t n = strlen(pat);
    size_t cap = n * (sizeof WS + 4) + 1;
    char *out = malloc(cap);
    if (!out) return NULL;
    size_t o = 0;
    bool inside = false;
    for (size_t i = 0; i < n; i++) {
        char c = pat[i];
        if (c == '\\' && i + 1 < n) {
            char d = pat[i + 1];
            const char *rep = NULL;
            if (d == 's') rep = inside ? WS : "[" WS "]";
            if (d == 'S' && !inside) rep = "[^" WS "]";
            if (rep) {
                memcpy(out + o, rep, strlen(rep));
                o += strlen(rep);
            } else {
                out[o++] = c;
                out[o++] = d;
            }
            i++;
            continue;
        }
        if (c == '[' && !inside)
            inside = true;
        else if (c == ']' && inside)
            inside = false;
        out[o++] = c;
    }
    out[o] = '\0';
    return out;
}

enum moeinf_status moeinf_pretok_create(const char *name, struct moeinf_pretok **out,
                                        struct moeinf_error *err) {
    const struct spec *s = find_spec(name ? name : "default");
    if (!s)
        return moeinf_fail(err, MOEINF_ERR_UNSUPPORTED,
                           "unknown pre-tokenizer '%s' (tokenizer.ggml.pre); known: %s",
                           moeinf_esc_str(name).s, moeinf_pretok_known_names());
    struct moeinf_pretok *p = calloc(1, sizeof *p);
    if (!p) return moeinf_fail(err, MOEINF_ERR_NOMEM, "out of memory for the pre-tokenizer");
    p->spec = s;
    for (int i = 0; i < MAX_PATTERNS && s->patterns[i]; i++) {
        char *pat = expand_space(s->patterns[i]);
        if (!pat) {
            moeinf_pretok_free(p);
            return moeinf_fail(err, MOEINF_ERR_NOMEM, "out of memory for the pre-tokenizer");
        }
        int code = 0;
        PCRE2_SIZE at = 0;
        p->code[i] = pcre2_compile((PCRE2_SPTR)pat, PCRE2_ZERO_TERMINATED,
                                   PCRE2_UTF | PCRE2_UCP | PCRE2_DOLLAR_ENDONLY, &code, &at, NULL);
        free(pat);
        if (!p->code[i]) {
            PCRE2_UCHAR msg[128];
            pcre2_get_error_message(code, msg, sizeof msg);
            moeinf_pretok_free(p);
            /* A table entry that does not compile is a bug here, not bad input. */
            return moeinf_fail(err, MOEINF_ERR_UNSUPPORTED,
                               "pre-tokenizer '%s': pattern %d does not compile (%s at %zu); "
                               "PCRE2 lacks UTF or Unicode property support?",
                               s->name, i + 1, (const char *)msg, (size_t)at);
        }
        p->n = i + 1;
        /* JIT where the platform has it; the interpreter otherwise. */
        p->jit[i] = pcre2_jit_compile(p->code[i], PCRE2_JIT_COMPLETE) == 0;
    }
    *out = p;
    return MOEINF_OK;
}

void moeinf_pretok_free(struct moeinf_pretok *p) {
    if (!p) return;
    for (int i = 0; i < p->n; i++)
        pcre2_code_free(p->code[i]);
    free(p);
}

const char *moeinf_pretok_name(const struct moeinf_pretok *p) {
    return p->spec->name;
}

struct moeinf_pretok_flags moeinf_pretok_flags(const struct moeinf_pretok *p) {
    return p->spec->flags;
}

struct spans {
    struct moeinf_span *data;
    size_t n, cap;
};

static bool spans_push(struct spans *a, size_t off, size_t len) {
    if (len == 0) return true;
    if (a->n == a->cap) {
        size_t cap = a->cap ? 2 * a->cap : 256;
        struct moeinf_span *d = realloc(a->data, cap * sizeof *d);
        if (!d) return false;
        a->data = d;
        a->cap = cap;
    }
    a->data[a->n++] = (struct moeinf_span){off, len};
    return true;
}

/* Length of the UTF-8 character at s (valid UTF-8). */
static size_t char_len(unsigned char c) {
    return c < 0x80 ? 1 : c < 0xE0 ? 2 : c < 0xF0 ? 3 : 4;
}

/* Splits one piece with pattern i: its matches and the stretches between them, in order. The
 * piece is the whole subject, as llama.cpp searches each piece on its own (a lookahead or $
 * sees the piece's end, not the text's). */
static enum moeinf_status split_piece(const struct moeinf_pretok *p, int i, const char *text,
                                      struct moeinf_span piece, pcre2_match_data *md,
                                      struct spans *out, struct moeinf_error *err) {
    PCRE2_SPTR subj = (PCRE2_SPTR)(text + piece.off);
    size_t pos = 0;
    size_t done = 0; /* bytes of the piece already emitted */
    while (pos < piece.len) {
        int rc = PCRE2_ERROR_JIT_STACKLIMIT;
        if (p->jit[i]) rc = pcre2_jit_match(p->code[i], subj, piece.len, pos, 0, md, NULL);
        /* No JIT, or its stack ran out: the interpreter (its heap limit is PCRE2's default). */
        if (rc == PCRE2_ERROR_JIT_STACKLIMIT)
            rc = pcre2_match(p->code[i], subj, piece.len, pos, PCRE2_NO_UTF_CHECK | PCRE2_NO_JIT,
                             md, NULL);
        if (rc == PCRE2_ERROR_NOMATCH) break;
        if (rc < 0) {
            PCRE2_UCHAR msg[128];
            pcre2_get_error_message(rc, msg, sizeof msg);
            return moeinf_fail(err, MOEINF_ERR_ARG,
                               "pre-tokenizer '%s', pattern %d: PCRE2 gave up on a piece of "
                               "%zu bytes (%s)",
                               p->spec->name, i + 1, piece.len, (const char *)msg);
        }
        const PCRE2_SIZE *ov = pcre2_get_ovector_pointer(md);
        size_t start = ov[0];
        size_t end = ov[1];
        if (end == start) { /* an empty match: step over one character */
            pos = start + char_len(subj[start]);
            continue;
        }
        if (!spans_push(out, piece.off + done, start - done) ||
            !spans_push(out, piece.off + start, end - start))
            return moeinf_fail(err, MOEINF_ERR_NOMEM, "out of memory while pre-tokenizing");
        done = pos = end;
    }
    if (!spans_push(out, piece.off + done, piece.len - done))
        return moeinf_fail(err, MOEINF_ERR_NOMEM, "out of memory while pre-tokenizing");
    return MOEINF_OK;
}

enum moeinf_status moeinf_pretok_split(const struct moeinf_pretok *p, const char *text, size_t len,
                                       struct moeinf_span **words, size_t *n_words,
                                       struct moeinf_error *err) {
    struct spans cur = {0};
    struct spans next = {0};
    enum moeinf_status st = MOEINF_OK;
    pcre2_match_data *md = NULL;
    cur.data = malloc(sizeof *cur.data);
    if (!cur.data) goto nomem;
    cur.cap = 1;
    if (len == 0) { /* no words; *words is still a real allocation */
        *words = cur.data;
        *n_words = 0;
        return MOEINF_OK;
    }
    cur.data[cur.n++] = (struct moeinf_span){0, len};
    md = pcre2_match_data_create(1, NULL);
    if (!md) goto nomem;
    for (int i = 0; i < p->n; i++) {
        next.n = 0;
        for (size_t k = 0; k < cur.n; k++) {
            st = split_piece(p, i, text, cur.data[k], md, &next, err);
            if (st != MOEINF_OK) goto done;
        }
        struct spans tmp = cur;
        cur = next;
        next = tmp;
    }
    pcre2_match_data_free(md);
    free(next.data);
    *words = cur.data;
    *n_words = cur.n;
    return MOEINF_OK;

nomem:
    st = moeinf_fail(err, MOEINF_ERR_NOMEM, "out of memory while pre-tokenizing");
done:
    pcre2_match_data_free(md);
    free(cur.data);
    free(next.data);
    return st;
}
