/*
 * fuzz_tokenize.c - the SentencePiece tokenizer on arbitrary bytes, with the llama-spm
 * vocabulary of ../shared/testdata/tokenizer (loaded once). For every input:
 *   - tokenizing with parse_special off and on (add_special on and off) succeeds and every
 *     id is inside the vocabulary; with add_special the first id is BOS;
 *   - for valid UTF-8 without U+2581 (which the tokenizer cannot tell from an escaped space)
 *     and parse_special off, detokenizing gives the input back (every byte has a <0xXX>
 *     token in this vocabulary, so nothing is lost);
 *   - the streaming detokenizer passes on exactly the concatenated pieces, holding back at
 *     most MOEINF_DETOK_HOLD - 1 bytes at a time.
 */
#include <string.h>

#include "fuzz.h"
#include "gguf/gguf.h"
#include "tokenizer/vocab.h"

static struct moeinf_vocab *load_vocab(void) {
    char path[4096];
    snprintf(path, sizeof path, "%s/testdata/tokenizer/ggml-vocab-llama-spm.gguf",
             fuzz_shared_dir());
    struct moeinf_error err = {0};
    struct moeinf_gguf *g = NULL;
    struct moeinf_vocab *v = NULL;
    if (moeinf_gguf_open(path, &g, &err) != MOEINF_OK ||
        moeinf_vocab_init_from_gguf(g, &v, &err) != MOEINF_OK) {
        fprintf(stderr, "fuzz_tokenize: %s\n", err.msg);
        abort();
    }
    moeinf_gguf_free(g);
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

/* The streaming detokenizer gives the concatenated pieces, nothing more or less. */
static void check_stream(const struct moeinf_vocab *v, const int32_t *ids, size_t n) {
    size_t total = 0;
    for (size_t i = 0; i < n; i++) {
        size_t len;
        moeinf_vocab_piece(v, ids[i], false, &len);
        total += len;
    }
    char *want = malloc(total + 1);
    char *got = malloc(total + MOEINF_DETOK_HOLD + 1);
    FUZZ_REQUIRE(want && got);
    struct moeinf_detok d;
    moeinf_detok_init(&d);
    size_t w = 0;
    size_t g = 0;
    for (size_t i = 0; i < n; i++) {
        size_t len;
        const char *p = moeinf_vocab_piece(v, ids[i], false, &len);
        memcpy(want + w, p, len);
        w += len;
        g += moeinf_detok_push(&d, p, len, got + g);
        FUZZ_REQUIRE(g <= w && w - g < MOEINF_DETOK_HOLD);
    }
    g += moeinf_detok_flush(&d, got + g);
    FUZZ_REQUIRE(g == w && memcmp(got, want, w) == 0);
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
