/*
 * fuzz_tokenize_bpe.c - the byte-level BPE tokenizer and every pre-tokenizer on arbitrary
 * bytes. The vocabulary (built once) is made here: the 256 GPT-2 byte characters, the tokens
 * of the merges below (English, code, runs of spaces, multi-byte UTF-8 characters, ranks that
 * compete), control and user-defined special tokens, and the deepseek-llm pre-tokenizer (the
 * most patterns); or the GGUF that $MOEINF_FUZZ_VOCAB names (fuzz.h; ctest's
 * fuzz_tokenize_bpe:shared loads the 102400-token deepseek-llm of ../shared). For every input:
 *   - tokenizing with parse_special off and on, add_special off and on, succeeds and every id
 *     is inside the vocabulary;
 *   - for valid UTF-8 the pieces (special = true) give the input back exactly: byte-level BPE
 *     loses nothing (invalid bytes become U+FFFD, so only valid input can round-trip);
 *   - every pre-tokenizer of the table splits the input's valid UTF-8 prefix into non-empty
 *     words that cover it in order without gaps.
 */
#include <string.h>

#include "fuzz.h"
#include "gguf/gguf.h"
#include "tokenizer/pretok.h"
#include "tokenizer/vocab.h"

/* The merges, each "left right" in raw bytes (turned into GPT-2 characters below); a merge's
 * result is the next token. Earlier is higher rank. */
static const char *const merge_bytes[][2] = {
    {" ", "t"},       {"h", "e"},           {" t", "he"},
    {"i", "n"},       {" ", "a"},           {"e", "r"},
    {"o", "n"},       {"r", "e"},           {" ", "s"},
    {"a", "t"},       {"e", "n"},           {"o", "r"},
    {" ", "w"},       {"in", "g"},          {"l", "l"},
    {"H", "e"},       {"He", "ll"},         {"Hell", "o"},
    {" w", "or"},     {" wor", "l"},        {" worl", "d"},
    {" ", " "},       {"  ", "  "},         {"    ", "    "},
    {"(", ")"},       {"re", "t"},          {"u", "r"},
    {"ur", "n"},      {"ret", "urn"},       {"e", "f"},
    {"d", "ef"},      {"\n", "\n"},         {"1", "2"},
    {"12", "3"},      {":", "\n"},          {"t", "he"},
    {"\xc3", "\xa9"}, {"\xe6", "\x97"},     {"\xe6\x97", "\xa5"},
    {" ", "the"},     {"\xe6", "\x9c"},     {"\xe6\x9c", "\xac"},
    {"\xf0", "\x9f"}, {"\xf0\x9f", "\x9a"}, {"\xf0\x9f\x9a", "\x80"},
};
#define N_MERGES (sizeof merge_bytes / sizeof merge_bytes[0])

/* Control tokens (BOS, EOS, two more) and user-defined ones, after the merged tokens. The
 * first two are deepseek's, with U+FF5C and U+2581 in them. */
#define FW_BAR "\xef\xbd\x9c"
#define LOW8   "\xe2\x96\x81"
static const char *const control_texts[] = {"<" FW_BAR "begin" LOW8 "of" LOW8 "sentence" FW_BAR ">",
                                            "<" FW_BAR "end" LOW8 "of" LOW8 "sentence" FW_BAR ">",
                                            "<|EOT|>", "<s>"};
static const char *const user_texts[] = {"[INST]", "</s>"};
#define N_CONTROL (sizeof control_texts / sizeof control_texts[0])
#define N_USER    (sizeof user_texts / sizeof user_texts[0])
#define N_TOKENS  (256 + N_MERGES + N_CONTROL + N_USER)

/* GPT-2's byte-to-character map, written from its definition: the printable bytes '!'..'~',
 * 0xA1..0xAC and 0xAE..0xFF stand for themselves, the others in order for U+0100 onwards.
 * The character's UTF-8 goes to out (2 bytes at most); returns its length. */
static size_t gpt2_char(uint8_t b, char *out) {
    uint32_t cp = b;
    if (!((b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE)) {
        cp = 256;
        for (int k = 0; k < b; k++)
            cp += !((k >= '!' && k <= '~') || (k >= 0xA1 && k <= 0xAC) || k >= 0xAE);
    }
    if (cp < 0x80) {
        out[0] = (char)cp;
        return 1;
    }
    out[0] = (char)(0xC0 | cp >> 6);
    out[1] = (char)(0x80 | (cp & 0x3F));
    return 2;
}

/* Raw bytes as GPT-2 characters, NUL-terminated, into out (room for 2 * strlen + 1). */
static void gpt2_text(const char *raw, char *out) {
    size_t o = 0;
    for (const char *p = raw; *p; p++)
        o += gpt2_char((uint8_t)*p, out + o);
    out[o] = '\0';
}

static struct moeinf_vocab *made_vocab(void) {
    static char texts_buf[N_TOKENS][64];
    static char merges_buf[N_MERGES][96];
    static const char *texts[N_TOKENS];
    static const char *merges[N_MERGES];
    static int32_t types[N_TOKENS];
    size_t n = 0;
    for (int b = 0; b < 256; b++) {
        size_t len = gpt2_char((uint8_t)b, texts_buf[n]);
        texts_buf[n][len] = '\0';
        types[n++] = MOEINF_TOKEN_TYPE_NORMAL;
    }
    for (size_t m = 0; m < N_MERGES; m++) {
        char left[32];
        char right[32];
        char both[64];
        gpt2_text(merge_bytes[m][0], left);
        gpt2_text(merge_bytes[m][1], right);
        snprintf(merges_buf[m], sizeof merges_buf[m], "%s %s", left, right);
        merges[m] = merges_buf[m];
        snprintf(both, sizeof both, "%s%s", merge_bytes[m][0], merge_bytes[m][1]);
        gpt2_text(both, texts_buf[n]);
        bool seen = false; /* two merges may make the same token */
        for (size_t i = 256; i < n && !seen; i++)
            seen = strcmp(texts_buf[i], texts_buf[n]) == 0;
        if (!seen) types[n++] = MOEINF_TOKEN_TYPE_NORMAL;
    }
    size_t first_control = n;
    for (size_t i = 0; i < N_CONTROL; i++) {
        snprintf(texts_buf[n], sizeof texts_buf[n], "%s", control_texts[i]);
        types[n++] = MOEINF_TOKEN_TYPE_CONTROL;
    }
    for (size_t i = 0; i < N_USER; i++) {
        snprintf(texts_buf[n], sizeof texts_buf[n], "%s", user_texts[i]);
        types[n++] = MOEINF_TOKEN_TYPE_USER_DEFINED;
    }
    for (size_t i = 0; i < n; i++)
        texts[i] = texts_buf[i];
    struct moeinf_vocab_desc d = moeinf_vocab_desc_default();
    d.source = "fuzz_tokenize_bpe's vocabulary";
    d.model = "gpt2";
    d.pre = "deepseek-llm";
    d.n_tokens = (uint32_t)n;
    d.texts = texts;
    d.types = types;
    d.n_types = n;
    d.merges = merges;
    d.n_merges = N_MERGES;
    d.bos_id = (int64_t)first_control;
    d.eos_id = (int64_t)first_control + 1;
    d.add_bos = 1;
    d.add_eos = 0;
    struct moeinf_error err = {0};
    struct moeinf_vocab *v = NULL;
    if (moeinf_vocab_init(&d, &v, &err) != MOEINF_OK) {
        fprintf(stderr, "fuzz_tokenize_bpe: %s\n", err.msg);
        abort();
    }
    /* The merges take effect: whole words come out as one token each. */
    static const char *const words[] = {"Hello", " world", "123", "\xe6\x97\xa5", "\xe6\x9c\xac"};
    int32_t want[5];
    for (int i = 0; i < 5; i++) {
        char text[32];
        gpt2_text(words[i], text);
        want[i] = moeinf_vocab_find(v, text, strlen(text));
    }
    int32_t *ids = NULL;
    size_t n_ids = 0;
    const char *text = "Hello world123\xe6\x97\xa5\xe6\x9c\xac";
    FUZZ_REQUIRE(moeinf_vocab_tokenize(v, text, strlen(text), false, false, &ids, &n_ids, &err) ==
                 MOEINF_OK);
    FUZZ_REQUIRE(n_ids == 5 && memcmp(ids, want, sizeof want) == 0);
    free(ids);
    return v;
}

static struct moeinf_vocab *load_vocab(void) {
    const char *path = fuzz_vocab_path();
    if (!path) return made_vocab();
    struct moeinf_error err = {0};
    struct moeinf_gguf *g = NULL;
    struct moeinf_vocab *v = NULL;
    if (moeinf_gguf_open(path, &g, &err) != MOEINF_OK ||
        moeinf_vocab_init_from_gguf(g, &v, &err) != MOEINF_OK) {
        fprintf(stderr, "fuzz_tokenize_bpe: %s\n", err.msg);
        abort();
    }
    moeinf_gguf_free(g);
    return v;
}

/* Length of the longest strictly valid UTF-8 prefix. */
static size_t valid_prefix(const uint8_t *s, size_t n) {
    size_t i = 0;
    while (i < n) {
        uint8_t c = s[i];
        size_t len = c < 0x80                 ? 1
                     : c >= 0xC2 && c <= 0xDF ? 2
                     : c >= 0xE0 && c <= 0xEF ? 3
                     : c >= 0xF0 && c <= 0xF4 ? 4
                                              : 0;
        if (len == 0 || len > n - i) return i;
        uint32_t cp = len == 1 ? c : c & (0x7Fu >> len);
        for (size_t k = 1; k < len; k++) {
            if ((s[i + k] & 0xC0) != 0x80) return i;
            cp = cp << 6 | (s[i + k] & 0x3Fu);
        }
        if ((len == 3 && cp < 0x800) || (len == 4 && (cp < 0x10000 || cp > 0x10FFFF)) ||
            (cp >= 0xD800 && cp <= 0xDFFF))
            return i;
        i += len;
    }
    return i;
}

static const char *const names[] = {
    "default",      "gpt-2",          "mpt",         "olmo",   "starcoder", "refact",
    "falcon",       "llama3",         "dbrx",        "qwen2",  "qwen35",    "stablelm2",
    "deepseek-llm", "deepseek-coder", "deepseek-v3", "gpt-4o", "kimi-k2"};
#define N_NAMES (sizeof names / sizeof names[0])

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static struct moeinf_vocab *v;
    static struct moeinf_pretok *pre[N_NAMES];
    struct moeinf_error err = {0};
    if (!v) {
        v = load_vocab();
        for (size_t i = 0; i < N_NAMES; i++)
            FUZZ_REQUIRE(moeinf_pretok_create(names[i], &pre[i], &err) == MOEINF_OK);
    }
    size_t n_valid = valid_prefix(data, size);
    for (int mode = 0; mode < 4; mode++) {
        bool add_special = mode & 1, parse_special = mode & 2;
        int32_t *ids = NULL;
        size_t n = 0;
        enum moeinf_status st = moeinf_vocab_tokenize(v, (const char *)data, size, add_special,
                                                      parse_special, &ids, &n, &err);
        if (st != MOEINF_OK) fprintf(stderr, "tokenize: %s\n", err.msg);
        FUZZ_REQUIRE(st == MOEINF_OK && ids != NULL);
        for (size_t i = 0; i < n; i++)
            FUZZ_REQUIRE(ids[i] >= 0 && ids[i] < moeinf_vocab_n_tokens(v));
        if (n_valid == size && !add_special) {
            size_t total = 0;
            for (size_t i = 0; i < n; i++) {
                size_t k;
                moeinf_vocab_piece(v, ids[i], true, &k);
                total += k;
            }
            FUZZ_REQUIRE(total == size);
            size_t pos = 0;
            for (size_t i = 0; i < n; i++) {
                size_t k;
                const char *p = moeinf_vocab_piece(v, ids[i], true, &k);
                FUZZ_REQUIRE(memcmp(p, data + pos, k) == 0);
                pos += k;
            }
        }
        free(ids);
    }
    for (size_t i = 0; i < N_NAMES; i++) {
        struct moeinf_span *w = NULL;
        size_t n = 0;
        FUZZ_REQUIRE(moeinf_pretok_split(pre[i], (const char *)data, n_valid, &w, &n, &err) ==
                     MOEINF_OK);
        size_t pos = 0;
        for (size_t k = 0; k < n; k++) {
            FUZZ_REQUIRE(w[k].off == pos && w[k].len > 0);
            pos += w[k].len;
        }
        FUZZ_REQUIRE(pos == n_valid);
        free(w);
    }
    return 0;
}
