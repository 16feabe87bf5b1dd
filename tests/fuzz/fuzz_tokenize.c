/*
 * fuzz_tokenize.c - the SentencePiece tokenizer on arbitrary bytes, with the vocabulary of the
 * committed default model (MOEINF_FUZZ_SPM_VOCAB, set by CMake: models/trained-moe-Q8_0.gguf,
 * 2048 trained pieces with scores, byte fallback, <s>, </s> and the <|im_start|>/<|im_end|>
 * control tokens), or the one $MOEINF_FUZZ_VOCAB names (fuzz.h; ctest's fuzz_tokenize:shared
 * uses the 32000-token llama-spm of ../shared/testdata/tokenizer). Loaded once. For every input:
 *   - tokenizing with parse_special off and on (add_special on and off) succeeds and every
 *     id is inside the vocabulary; with add_special the first id is BOS;
 *   - for valid UTF-8 without U+2581 (which the tokenizer cannot tell from an escaped space)
 *     and parse_special off, detokenizing gives the input back (every byte has a <0xXX>
 *     token in this vocabulary, so nothing is lost);
 *   - the streaming detokenizer gives valid UTF-8: exactly the concatenated pieces where
 *     they are valid UTF-8, and otherwise what a whole-text decoder that replaces each
 *     maximal invalid subpart by U+FFFD gives (written here from the definition, and
 *     independent of the streaming code); it holds back at most MOEINF_DETOK_HOLD - 1 bytes.
 */
#include <string.h>

#include "fuzz.h"
#include "gguf/gguf.h"
#include "tokenizer/vocab.h"

static struct moeinf_vocab *load_vocab(void) {
    const char *path = fuzz_vocab_path();
    if (!path) path = MOEINF_FUZZ_SPM_VOCAB;
    struct moeinf_error err = {0};
    struct moeinf_gguf *g = NULL;
    struct moeinf_vocab *v = NULL;
    if (moeinf_gguf_open(path, &g, &err) != MOEINF_OK ||
        moeinf_vocab_init_from_gguf(g, &v, &err) != MOEINF_OK) {
        fprintf(stderr, "fuzz_tokenize: %s\n", err.msg);
        abort();
    }
    moeinf_gguf_free(g);
    /* The round trip below needs a byte token for every byte (no unknown token in the way). */
    for (int b = 0; b < 256; b++) {
        char text[8];
        snprintf(text, sizeof text, "<0x%02X>", b);
        FUZZ_REQUIRE(moeinf_vocab_find(v, text, strlen(text)) >= 0);
    }
    return v;
}

/* Strict UTF-8 (no overlongs, surrogates or code points past U+10FFFF). */
static bool valid_utf8(const uint8_t *s, size_t n) {
    for (size_t i = 0; i < n;) {
        uint8_t c = s[i];
        size_t len;
        uint32_t cp;
        if (c < 0x80) {
            i++;
            continue;
        }
        if (c >= 0xC2 && c <= 0xDF) {
            len = 2, cp = c & 0x1F;
        } else if (c >= 0xE0 && c <= 0xEF) {
            len = 3, cp = c & 0x0F;
        } else if (c >= 0xF0 && c <= 0xF4) {
            len = 4, cp = c & 0x07;
        } else {
            return false;
        }
        if (len > n - i) return false;
        for (size_t k = 1; k < len; k++) {
            if ((s[i + k] & 0xC0) != 0x80) return false;
            cp = cp << 6 | (s[i + k] & 0x3F);
        }
        if ((len == 3 && cp < 0x800) || (len == 4 && (cp < 0x10000 || cp > 0x10FFFF)) ||
            (cp >= 0xD800 && cp <= 0xDFFF))
            return false;
        i += len;
    }
    return true;
}

static int32_t *tokenize(const struct moeinf_vocab *v, const uint8_t *data, size_t size,
                         bool add_special, bool parse_special, size_t *n) {
    int32_t *ids = NULL;
    struct moeinf_error err = {0};
    enum moeinf_status st = moeinf_vocab_tokenize(v, (const char *)data, size, add_special,
                                                  parse_special, &ids, n, &err);
    if (st != MOEINF_OK) fprintf(stderr, "tokenize: %s\n", err.msg);
    FUZZ_REQUIRE(st == MOEINF_OK && ids != NULL);
    int32_t n_vocab = moeinf_vocab_n_tokens(v);
    for (size_t i = 0; i < *n; i++)
        FUZZ_REQUIRE(ids[i] >= 0 && ids[i] < n_vocab);
    if (add_special && moeinf_vocab_add_bos(v))
        FUZZ_REQUIRE(*n >= 1 && ids[0] == moeinf_vocab_bos(v));
    return ids;
}

/* Length of the longest prefix of s[0..n) that begins a well-formed UTF-8 sequence (Unicode
 * table 3-7), and in *complete whether it is the whole sequence. 0 if s[0] starts none. */
static size_t wellformed_prefix(const uint8_t *s, size_t n, bool *complete) {
    static const struct {
        uint8_t lead_lo, lead_hi, lo, hi;
        size_t len;
    } rows[] = {
        {0x00, 0x7F, 0, 0, 1},       {0xC2, 0xDF, 0x80, 0xBF, 2}, {0xE0, 0xE0, 0xA0, 0xBF, 3},
        {0xE1, 0xEC, 0x80, 0xBF, 3}, {0xED, 0xED, 0x80, 0x9F, 3}, {0xEE, 0xEF, 0x80, 0xBF, 3},
        {0xF0, 0xF0, 0x90, 0xBF, 4}, {0xF1, 0xF3, 0x80, 0xBF, 4}, {0xF4, 0xF4, 0x80, 0x8F, 4}};
    *complete = false;
    for (size_t r = 0; r < sizeof rows / sizeof rows[0]; r++) {
        if (s[0] < rows[r].lead_lo || s[0] > rows[r].lead_hi) continue;
        size_t k = 1;
        while (k < rows[r].len && k < n) {
            uint8_t lo = k == 1 ? rows[r].lo : 0x80;
            uint8_t hi = k == 1 ? rows[r].hi : 0xBF;
            if (s[k] < lo || s[k] > hi) break;
            k++;
        }
        *complete = k == rows[r].len;
        return k;
    }
    return 0;
}

/* The whole text with every maximal invalid subpart replaced by U+FFFD; out holds 3n. */
static size_t replace_invalid(const uint8_t *s, size_t n, char *out) {
    static const char fffd[3] = {(char)0xEF, (char)0xBF, (char)0xBD}; /* U+FFFD in UTF-8 */
    size_t o = 0;
    for (size_t i = 0; i < n;) {
        bool complete;
        size_t k = wellformed_prefix(s + i, n - i, &complete);
        if (complete) {
            memcpy(out + o, s + i, k);
            o += k;
        } else {
            memcpy(out + o, fffd, sizeof fffd);
            o += sizeof fffd;
        }
        i += k ? k : 1;
    }
    return o;
}

/* The streaming detokenizer gives the concatenated pieces with invalid UTF-8 replaced. */
static void check_stream(const struct moeinf_vocab *v, const int32_t *ids, size_t n) {
    size_t total = 0;
    for (size_t i = 0; i < n; i++) {
        size_t len;
        moeinf_vocab_piece(v, ids[i], false, &len);
        total += len;
    }
    char *pieces = malloc(total + 1);
    char *want = malloc(3 * total + 1);
    char *got = malloc(3 * total + MOEINF_DETOK_OUT_MAX(0) + 1);
    FUZZ_REQUIRE(pieces && want && got);
    struct moeinf_detok d;
    moeinf_detok_init(&d);
    size_t w = 0;
    size_t g = 0;
    for (size_t i = 0; i < n; i++) {
        size_t len;
        const char *p = moeinf_vocab_piece(v, ids[i], false, &len);
        memcpy(pieces + w, p, len);
        w += len;
        size_t before = g;
        g += moeinf_detok_push(&d, p, len, got + g);
        FUZZ_REQUIRE(g - before <= MOEINF_DETOK_OUT_MAX(len));
        FUZZ_REQUIRE(d.n_held < MOEINF_DETOK_HOLD);
    }
    g += moeinf_detok_flush(&d, got + g);
    size_t n_want = replace_invalid((const uint8_t *)pieces, w, want);
    FUZZ_REQUIRE(g == n_want && memcmp(got, want, g) == 0);
    FUZZ_REQUIRE(valid_utf8((const uint8_t *)got, g));
    if (valid_utf8((const uint8_t *)pieces, w)) FUZZ_REQUIRE(g == w && memcmp(got, pieces, w) == 0);
    free(pieces);
    free(want);
    free(got);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static struct moeinf_vocab *v;
    if (!v) v = load_vocab();
    struct moeinf_error err = {0};

    size_t n;
    int32_t *ids = tokenize(v, data, size, false, false, &n);
    static const uint8_t lower_one_eighth_block[3] = {0xE2, 0x96, 0x81}; /* U+2581 */
    if (valid_utf8(data, size) &&
        !memmem(data, size, lower_one_eighth_block, sizeof lower_one_eighth_block)) {
        char *text = NULL;
        size_t n_text = 0;
        FUZZ_REQUIRE(moeinf_vocab_detokenize(v, ids, n, false, false, &text, &n_text, &err) ==
                     MOEINF_OK);
        FUZZ_REQUIRE(n_text == size && memcmp(text, data, size) == 0 && text[n_text] == '\0');
        free(text);
    }
    check_stream(v, ids, n);
    free(ids);

    for (int mode = 0; mode < 3; mode++) {
        bool add_special = mode != 1, parse_special = mode != 2;
        ids = tokenize(v, data, size, add_special, parse_special, &n);
        char *text = NULL;
        size_t n_text = 0;
        FUZZ_REQUIRE(moeinf_vocab_detokenize(v, ids, n, true, parse_special, &text, &n_text,
                                             &err) == MOEINF_OK);
        FUZZ_REQUIRE(strlen(text) <= n_text);
        free(text);
        check_stream(v, ids, n);
        free(ids);
    }
    return 0;
}
