/*
 * fuzz_tokenize_bpe.c - the byte-level BPE tokenizer and every pre-tokenizer on arbitrary
 * bytes, with the deepseek-llm vocabulary of ../shared/testdata/tokenizer (loaded once; its
 * pre-tokenizer has the most patterns). For every input:
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

static struct moeinf_vocab *load_vocab(void) {
    char path[4096];
    snprintf(path, sizeof path, "%s/testdata/tokenizer/ggml-vocab-deepseek-llm.gguf",
             fuzz_shared_dir());
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
    "default", "gpt-2", "mpt",   "olmo",      "starcoder",    "refact",         "falcon",
    "llama3",  "dbrx",  "qwen2", "stablelm2", "deepseek-llm", "deepseek-coder", "deepseek-v3"};
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
