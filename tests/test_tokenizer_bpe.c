/*
 * test_tokenizer_bpe.c - the byte-level BPE tokenizer against llama.cpp: its test vectors for
 * every BPE vocabulary in ../shared/testdata/tokenizer and for qwen35 and qwen2
 * (tests/data/tokenizer, with more strings llama.cpp tokenized), the prompt tokens and pieces of
 * the tiny-qwen2moe goldens; the pre-tokenizers without vectors in ../shared (qwen2, qwen35,
 * llama3, olmo, deepseek-v3, gpt-4o) against splits Python's `regex` module made with the
 * published patterns (gpt-4o: llama.cpp's spelling of it) (tests/data/pretok,
 * tools/tokenizer/pretok_cases.py); hand-made vocabularies for merge order, the fallbacks, special
 * tokens, detokenizing; hostile metadata and input.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/status.h"
#include "gguf/gguf.h"
#include "gguf_bytes.h"
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

static void expect_ids(const struct moeinf_vocab *v, const char *s, bool parse_special,
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

/* The pieces of ids concatenated (special tokens rendered iff special); malloc'ed. */
static char *concat_pieces_sp(const struct moeinf_vocab *v, const int32_t *ids, size_t n,
                              bool special, size_t *len) {
    size_t total = 0;
    for (size_t i = 0; i < n; i++) {
        size_t k;
        moeinf_vocab_piece(v, ids[i], special, &k);
        total += k;
    }
    char *s = malloc(total + 1);
    if (!s) return NULL;
    size_t pos = 0;
    for (size_t i = 0; i < n; i++) {
        size_t k;
        const char *p = moeinf_vocab_piece(v, ids[i], special, &k);
        memcpy(s + pos, p, k);
        pos += k;
    }
    s[pos] = '\0';
    *len = pos;
    return s;
}

static char *concat_pieces(const struct moeinf_vocab *v, const int32_t *ids, size_t n,
                           size_t *len) {
    return concat_pieces_sp(v, ids, n, false, len);
}

/* ---- llama.cpp test vectors ------------------------------------------------------------- */

#define SEP "\n__ggml_vocab_test__\n"

/* Tokenizes each string of the .inp file (vectors_path + ".inp") with v, special tokens parsed
 * iff special, and compares the ids with the .out file's line; frees v. */
static void run_vectors_sp(struct moeinf_vocab *v, const char *name, const char *vectors_path,
                           bool special) {
    char path[1024];
    snprintf(path, sizeof path, "%s.inp", vectors_path);
    size_t n_inp = 0;
    size_t n_out = 0;
    char *inp = golden_read_file(path, &n_inp);
    snprintf(path, sizeof path, "%s.out", vectors_path);
    char *outp = golden_read_file(path, &n_out);
    CHECK_MSG(inp && outp, "cannot read %s.inp and .out", vectors_path);
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
        int32_t *ids = tok(v, s, len, false, special, &n);
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
        char *text = concat_pieces_sp(v, ids, n, special, &n_text);
        if (text && n_text == len && memcmp(text, s, len) == 0)
            n_round++;
        else
            fprintf(stderr, "%s string %d: round trip differs\n", name, n_strings);
        free(text);
        free(ids);
    }
    fprintf(stderr, "  %s: %d/%d strings match llama.cpp, %d round-trip\n", name, n_ok, n_strings,
            n_round);
    CHECK(n_strings >= 40);
    CHECK_EQ_INT(n_ok, n_strings);
    CHECK_EQ_INT(n_round, n_strings);
    CHECK(line && *line == '\0');
    free(inp);
    free(outp);
    moeinf_vocab_free(v);
}

static void run_vectors_on(struct moeinf_vocab *v, const char *name, const char *vectors_path) {
    run_vectors_sp(v, name, vectors_path, false);
}

/* The vectors of ../shared's ggml-vocab-NAME.gguf. */
static void run_vectors(const char *name) {
    char rel[256];
    char path[1024];
    snprintf(rel, sizeof rel, "testdata/tokenizer/ggml-vocab-%s.gguf", name);
    struct moeinf_vocab *v = load_vocab(rel);
    if (!v) return;
    test_shared_path(rel, path, sizeof path);
    run_vectors_on(v, name, path);
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

/* ---- qwen35 and qwen2: tests/data/tokenizer (not in ../shared: over its 4 MiB) ------------ */

/* llama.cpp's ggml-vocab-qwen35.gguf is its ggml-vocab-qwen2.gguf (Qwen1.5's 151936 tokens)
 * with tokenizer.ggml.pre "qwen35": the patterns differ, the vocabulary does not. */
static char *read_qwen35_gguf(size_t *size) {
    char path[1024];
    test_src_path("tests/data/tokenizer/ggml-vocab-qwen35.gguf", path, sizeof path);
    char *b = golden_read_file(path, size);
    CHECK_MSG(b != NULL, "cannot read %s", path);
    return b;
}

static struct moeinf_vocab *open_vocab_buffer(const char *b, size_t size, const char *what) {
    struct moeinf_gguf *g = NULL;
    struct moeinf_vocab *v = NULL;
    struct moeinf_error err;
    enum moeinf_status st = moeinf_gguf_open_buffer(b, size, what, &g, &err);
    CHECK_MSG(st == MOEINF_OK, "%s", err.msg);
    if (st == MOEINF_OK) st = moeinf_vocab_init_from_gguf(g, &v, &err);
    CHECK_MSG(st == MOEINF_OK, "%s", err.msg);
    moeinf_gguf_free(g);
    return v;
}

static void test_vectors_qwen35(void) {
    size_t size = 0;
    char *b = read_qwen35_gguf(&size);
    if (!b) return;
    struct moeinf_vocab *v = open_vocab_buffer(b, size, "ggml-vocab-qwen35.gguf");
    if (!v) {
        free(b);
        return;
    }
    CHECK_EQ_INT(moeinf_vocab_n_tokens(v), 151936);
    CHECK(!moeinf_vocab_add_bos(v));
    char path[1024];
    run_vectors_on(v, "qwen35",
                   test_src_path("tests/data/tokenizer/ggml-vocab-qwen35.gguf", path, sizeof path));
    /* llama.cpp's vectors give the same ids with the qwen2 split; these (made by llama.cpp,
     * tools/tokenizer/qwen_vectors.py) hold texts with combining marks on which they differ */
    v = open_vocab_buffer(b, size, "ggml-vocab-qwen35.gguf");
    if (v) {
        run_vectors_on(v, "qwen35 (more)",
                       test_src_path("tests/data/tokenizer/qwen35-more.gguf", path, sizeof path));
    }
    free(b);
}

/* Qwen3-Next files name "qwen2" (their tokenizer is Qwen3's): llama.cpp's qwen2 vectors, on the
 * same file with its tokenizer.ggml.pre rewritten to "qwen2", which gives back llama.cpp's
 * ggml-vocab-qwen2.gguf byte for byte. */
static void test_vectors_qwen2(void) {
    size_t size = 0;
    char *b = read_qwen35_gguf(&size);
    if (!b) return;
    static const char key[] = "tokenizer.ggml.pre";
    char *at = NULL;
    for (size_t i = 0; i + sizeof key + 18 < size && !at; i++)
        if (memcmp(b + i, key, sizeof key - 1) == 0) at = b + i + sizeof key - 1;
    /* at: type (4 bytes), length (8), "qwen35" */
    CHECK(at && memcmp(at + 12, "qwen35", 6) == 0);
    if (!at || memcmp(at + 12, "qwen35", 6) != 0) {
        free(b);
        return;
    }
    at[4] = 5;
    memcpy(at + 12, "qwen2", 5);
    memmove(at + 17, at + 18, size - (size_t)(at + 18 - b));
    char path[1024];
    struct moeinf_vocab *v = open_vocab_buffer(b, size - 1, "ggml-vocab-qwen2.gguf");
    if (v) {
        run_vectors_on(
            v, "qwen2",
            test_src_path("tests/data/tokenizer/ggml-vocab-qwen2.gguf", path, sizeof path));
    }
    v = open_vocab_buffer(b, size - 1, "ggml-vocab-qwen2.gguf");
    if (v) {
        run_vectors_on(v, "qwen2 (more)",
                       test_src_path("tests/data/tokenizer/qwen2-more.gguf", path, sizeof path));
    }
    free(b);
}

/* ---- goldens: tiny-qwen2moe's prompts with BOS (deepseek-coder's vocabulary) ------------- */

static int hexval(char c) {
    return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

/* Decodes hex digits at p (up to a non-hex character) into out; returns the byte count. */
static size_t unhex(const char *p, char *out, size_t cap) {
    size_t n = 0;
    while (hexval(p[0]) >= 0 && hexval(p[1]) >= 0 && n < cap) {
        out[n++] = (char)(hexval(p[0]) * 16 + hexval(p[1]));
        p += 2;
    }
    return n;
}

/* Reads up to cap ids of the JSON array that starts at p (just past '['). */
static size_t read_ids(const char *p, int32_t *ids, size_t cap) {
    size_t n = 0;
    while (*p && *p != ']' && n < cap) {
        char *end;
        ids[n++] = (int32_t)strtol(p, &end, 10);
        if (end == p) break;
        p = end;
        while (*p == ',' || *p == ' ' || *p == '\n')
            p++;
    }
    return n;
}

/* Each id's piece (special = true) against the hex strings of the array at p. */
static void check_pieces(const struct moeinf_vocab *v, const int32_t *ids, size_t n, const char *p,
                         const char *what) {
    for (size_t i = 0; i < n && p; i++) {
        p = strchr(p, '"');
        if (!p) break;
        char piece[256];
        size_t k = unhex(p + 1, piece, sizeof piece);
        size_t got_len;
        const char *got = moeinf_vocab_piece(v, ids[i], true, &got_len);
        CHECK_MSG(got_len == k && memcmp(got, piece, k) == 0, "%s piece %zu (id %d)", what, i,
                  ids[i]);
        p = strchr(p + 1, '"');
        if (p) p++;
    }
}

/* The prompt's ids (add_special, as llama.cpp made them) and pieces; the pieces of the 16
 * greedy tokens, which are arbitrary tokens of the vocabulary. */
static void check_golden(const struct moeinf_vocab *v, const char *model, const char *id) {
    char rel[256];
    char path[1024];
    snprintf(rel, sizeof rel, "testdata/golden/%s/%s.json", model, id);
    if (!test_shared_path(rel, path, sizeof path)) return;
    char *json = golden_read_file(path, NULL);
    CHECK(json != NULL);
    if (!json) return;
    const char *ph = strstr(json, "\"prompt_utf8_hex\": \"");
    const char *tk = strstr(json, "\"tokens\": [");
    const char *pc = strstr(json, "\"token_pieces_hex\": [");
    const char *gr = strstr(json, "\"greedy\": {");
    const char *gt = gr ? strstr(gr, "\"tokens\": [") : NULL;
    const char *gp = gr ? strstr(gr, "\"pieces_hex\": [") : NULL;
    CHECK(ph && tk && pc && gt && gp);
    if (!ph || !tk || !pc || !gt || !gp) {
        free(json);
        return;
    }
    char prompt[1024];
    size_t n_prompt = unhex(ph + strlen("\"prompt_utf8_hex\": \""), prompt, sizeof prompt);
    int32_t want[256];
    size_t n_want = read_ids(tk + strlen("\"tokens\": ["), want, 256);
    size_t n = 0;
    int32_t *ids = tok(v, prompt, n_prompt, true, false, &n);
    if (ids) {
        CHECK_MSG(n == n_want && memcmp(ids, want, n * sizeof *ids) == 0, "golden %s/%s tokens",
                  model, id);
        check_pieces(v, want, n_want, pc + strlen("\"token_pieces_hex\": ["), id);
    }
    int32_t greedy[64];
    size_t n_greedy = read_ids(gt + strlen("\"tokens\": ["), greedy, 64);
    CHECK_EQ_INT(n_greedy, 16);
    check_pieces(v, greedy, n_greedy, gp + strlen("\"pieces_hex\": ["), id);
    free(ids);
    free(json);
}

static void test_golden_prompts(void) {
    static const char *const models[] = {"tiny-qwen2moe-F32", "tiny-qwen2moe-Q4_K_M"};
    static const char *const prompts[] = {"hello", "code", "unicode-kvf32-nofa", "hello-kvf32-nofa",
                                          "code-kvf32-nofa"};
    int n_goldens = 0;
    for (int m = 0; m < 2; m++) {
        char rel[256];
        snprintf(rel, sizeof rel, "testdata/models/%s.gguf", models[m]);
        struct moeinf_vocab *v = load_vocab(rel);
        if (!v) return;
        CHECK_EQ_INT(moeinf_vocab_bos(v), 32013);
        CHECK(moeinf_vocab_add_bos(v) && !moeinf_vocab_add_eos(v) &&
              !moeinf_vocab_add_space_prefix(v));
        for (int i = 0; i < 5; i++) {
            char p[256];
            snprintf(p, sizeof p, "testdata/golden/%s/%s.json", models[m], prompts[i]);
            char path[1024];
            if (test_shared_path(p, path, sizeof path) && access(path, R_OK) == 0) {
                check_golden(v, models[m], prompts[i]); /* not every model has every prompt */
                n_goldens++;
            }
        }
        moeinf_vocab_free(v);
    }
    CHECK_EQ_INT(n_goldens, 5 + 2); /* ../shared/testdata/golden: all five, and two for Q4_K_M */
    /* The OLMoE file carries the same vocabulary (no goldens for it): same ids. */
    struct moeinf_vocab *a = load_vocab("testdata/models/tiny-olmoe-F32.gguf");
    struct moeinf_vocab *b = load_vocab("testdata/tokenizer/ggml-vocab-deepseek-coder.gguf");
    if (a && b) {
        const char *text = "Caf\xc3\xa9 na\xc3\xafve \xe6\x97\xa5\xe6\x9c\xac\xe8\xaa\x9e "
                           "\xf0\x9f\x9a\x80\xf0\x9f\x94\xa5!";
        size_t na = 0;
        size_t nb = 0;
        int32_t *ia = tok(a, text, strlen(text), true, false, &na);
        int32_t *ib = tok(b, text, strlen(text), true, false, &nb);
        CHECK(ia && ib && na == nb && na > 5 && memcmp(ia, ib, na * sizeof *ia) == 0);
        free(ia);
        free(ib);
    }
    moeinf_vocab_free(a);
    moeinf_vocab_free(b);
}

/* ---- gpt-oss's o200k_harmony: a synthetic vocabulary (tests/data/tokenizer) -------------- */

/* o200k-synthetic.gguf (tools/tokenizer/o200k_synthetic.py): pre-tokenizer gpt-4o, 256 byte
 * tokens and 800 merges of a tiny BPE, then harmony's 16 special tokens (all control in the
 * file), BOS <|startoftext|>, EOS <|return|>. Its .inp/.out (special tokens as text, and
 * -special: parsed) and .special (per special token: attributes, end of generation, pieces)
 * were made by llama.cpp from the same file. */
#define O200K               "tests/data/tokenizer/o200k-synthetic.gguf"
#define O200K_FIRST_SPECIAL 1056
#define O200K_N_SPECIAL     16

static struct moeinf_vocab *open_vocab(const char *rel) {
    char path[1024];
    test_src_path(rel, path, sizeof path);
    struct moeinf_gguf *g = NULL;
    struct moeinf_vocab *v = NULL;
    struct moeinf_error err;
    enum moeinf_status st = moeinf_gguf_open(path, &g, &err);
    CHECK_MSG(st == MOEINF_OK, "%s", err.msg);
    if (st == MOEINF_OK) st = moeinf_vocab_init_from_gguf(g, &v, &err);
    CHECK_MSG(st == MOEINF_OK, "%s", err.msg);
    moeinf_gguf_free(g);
    return v;
}

static struct moeinf_vocab *open_o200k(void) {
    return open_vocab(O200K);
}

static int32_t find_text(const struct moeinf_vocab *v, const char *s) {
    return moeinf_vocab_find(v, s, strlen(s));
}

static void test_vectors_o200k(void) {
    struct moeinf_vocab *v = open_o200k();
    if (!v) return;
    CHECK_EQ_INT(moeinf_vocab_n_tokens(v), O200K_FIRST_SPECIAL + O200K_N_SPECIAL);
    CHECK_EQ_INT(moeinf_vocab_bos(v), find_text(v, "<|startoftext|>"));
    CHECK_EQ_INT(moeinf_vocab_eos(v), find_text(v, "<|return|>"));
    CHECK(!moeinf_vocab_add_bos(v) && !moeinf_vocab_add_eos(v));
    char path[1024];
    run_vectors_sp(v, "o200k", test_src_path(O200K, path, sizeof path), false);
    v = open_o200k();
    if (v)
        run_vectors_sp(
            v, "o200k (special)",
            test_src_path("tests/data/tokenizer/o200k-synthetic-special.gguf", path, sizeof path),
            true);
}

/* The pieces of ids as one string, as a generation streams them (special = false). */
static bool pieces_are(const struct moeinf_vocab *v, const int32_t *ids, size_t n,
                       const char *want) {
    size_t k = 0;
    char *got = concat_pieces(v, ids, n, &k);
    bool same = got && k == strlen(want) && memcmp(got, want, k) == 0;
    if (!same) fprintf(stderr, "pieces: got \"%s\", want \"%s\"\n", got ? got : "", want);
    free(got);
    return same;
}

/* Holds v's special tokens to the .special file llama.cpp wrote beside the GGUF at `rel`
 * (tools/tokenizer/o200k_synthetic.py, glm_kimi_synthetic.py): per line "id text attr eog
 * piece piece" (pieces in hex, special off and on). Returns the lines read; *n_eog_out: how
 * many of them end generation. */
static int check_special_file(const struct moeinf_vocab *v, const char *rel, int *n_eog_out) {
    char gguf_path[1024];
    char path[1100];
    snprintf(path, sizeof path, "%s.special", test_src_path(rel, gguf_path, sizeof gguf_path));
    char *data = golden_read_file(path, NULL);
    CHECK_MSG(data != NULL, "cannot read %s", path);
    int n_lines = 0;
    int n_eog = 0;
    char *save = NULL;
    for (char *line = data ? strtok_r(data, "\n", &save) : NULL; line;
         line = strtok_r(NULL, "\n", &save)) {
        if (line[0] == '#') continue;
        /* id text attr eog piece piece: six fields separated by single spaces */
        char *f[6] = {NULL};
        char *fsave = NULL;
        int n_f = 0;
        for (char *x = strtok_r(line, " ", &fsave); x && n_f < 6; x = strtok_r(NULL, " ", &fsave))
            f[n_f++] = x;
        CHECK_EQ_INT(n_f, 6);
        if (n_f != 6) break;
        const int32_t id = (int32_t)strtol(f[0], NULL, 10);
        const char *text = f[1];
        const unsigned attr = (unsigned)strtoul(f[2], NULL, 10);
        const int eog = f[3][0] == '1';
        const char *hex[2] = {f[4], f[5]};
        n_lines++;
        n_eog += eog;
        size_t n_text = 0;
        const char *t = moeinf_vocab_text(v, id, &n_text);
        CHECK_MSG(t && n_text == strlen(text) && memcmp(t, text, n_text) == 0, "id %d", id);
        CHECK_MSG(moeinf_vocab_attr(v, id) == attr, "%s: attributes %u, llama.cpp %u", text,
                  moeinf_vocab_attr(v, id), attr);
        CHECK_MSG(moeinf_vocab_is_eog(v, id) == (eog != 0),
                  "%s: end of generation %d, llama.cpp %d", text, moeinf_vocab_is_eog(v, id), eog);
        for (int special = 0; special < 2; special++) {
            char want[64];
            size_t n_want = hex[special][0] == '-' ? 0 : unhex(hex[special], want, sizeof want);
            size_t n = 0;
            const char *p = moeinf_vocab_piece(v, id, special != 0, &n);
            CHECK_MSG(n == n_want && memcmp(p, want, n) == 0, "%s: piece (special %d)", text,
                      special);
        }
    }
    free(data);
    *n_eog_out = n_eog;
    return n_lines;
}

/* llama.cpp's rules for o200k_harmony, by token text: <|return|> and <|call|> end generation
 * and take <|end|> out of that set; <|channel|>, <|message|>, <|start|>, <|constrain|> and
 * <|end|> become user-defined, so they are split out of any text and always rendered. */
static void test_o200k_harmony_rules(void) {
    struct moeinf_vocab *v = open_o200k();
    if (!v) return;
    int n_eog = 0;
    int n_lines = check_special_file(v, O200K, &n_eog);
    CHECK_EQ_INT(n_lines, O200K_N_SPECIAL);
    CHECK_EQ_INT(n_eog, 3); /* <|endoftext|>, <|return|>, <|call|> */
    /* no other token ends generation */
    for (int32_t id = 0; id < O200K_FIRST_SPECIAL; id++)
        if (moeinf_vocab_is_eog(v, id)) CHECK_MSG(false, "token %d ends generation", id);

    /* Without parse_special the markup is still split out; control tokens stay text. */
    const int32_t channel = find_text(v, "<|channel|>");
    const int32_t message = find_text(v, "<|message|>");
    const int32_t ret = find_text(v, "<|return|>");
    expect_ids(v, "<|channel|><|message|>", false, (int32_t[]){channel, message}, 2);
    size_t n = 0;
    int32_t *ids = tok(v, "<|return|>", 10, false, false, &n);
    CHECK(ids && n > 1 && ids[0] != ret);
    free(ids);
    expect_ids(v, "<|return|>", true, (int32_t[]){ret}, 1);

    /* A harmony answer as the model writes it: generation stops at <|return|> (the first token
     * that ends it: <|end|> does not), and the text streamed before it shows the analysis
     * channel, <|end|>, the next header and the final channel. */
    static const char answer[] = "<|channel|>analysis<|message|>We need to answer.<|end|>"
                                 "<|start|>assistant<|channel|>final<|message|>Hello!<|return|>";
    ids = tok(v, answer, sizeof answer - 1, false, true, &n);
    size_t stop = 0;
    while (ids && stop < n && !moeinf_vocab_is_eog(v, ids[stop]))
        stop++;
    CHECK(ids && n > 0 && stop == n - 1 && ids[stop] == ret);
    if (ids)
        CHECK(pieces_are(v, ids, stop,
                         "<|channel|>analysis<|message|>We need to answer.<|end|>"
                         "<|start|>assistant<|channel|>final<|message|>Hello!"));
    char *out = NULL;
    size_t n_out = 0;
    struct moeinf_error err;
    if (ids) {
        CHECK_EQ_INT(moeinf_vocab_detokenize(v, ids, n, true, false, &out, &n_out, &err),
                     MOEINF_OK);
        CHECK(out && strcmp(out, "<|channel|>analysis<|message|>We need to answer.<|end|>"
                                 "<|start|>assistant<|channel|>final<|message|>Hello!") == 0);
        free(out);
    }
    free(ids);
    /* A tool call ends at <|call|>; <|constrain|> is shown. */
    static const char call[] = "<|channel|>commentary to=functions.f <|constrain|>json<|message|>"
                               "{}<|call|>";
    ids = tok(v, call, sizeof call - 1, false, true, &n);
    CHECK(ids && n > 1 && moeinf_vocab_is_eog(v, ids[n - 1]));
    if (ids)
        CHECK(pieces_are(v, ids, n - 1,
                         "<|channel|>commentary to=functions.f <|constrain|>json<|message|>{}"));
    free(ids);
    moeinf_vocab_free(v);
}

/* Long words for the gpt-4o split, whose upper- and lower-case runs overlap on non-ASCII
 * letters (a run of them is matched by backing off one letter) and on nothing else: 256 KiB of
 * one letter, of an ASCII upper-case run and of alternating case, each one word or many, give
 * back their text (a quadratic backtrack would not finish). */
static void test_o200k_long_words(void) {
    struct moeinf_vocab *v = open_o200k();
    if (!v) return;
    static const char *const units[] = {"\xc3\xa9", "A", "aA", "Ab", "e\xcc\x81"};
    const size_t len = (size_t)1 << 18;
    char *text = malloc(len);
    for (size_t u = 0; text && u < sizeof units / sizeof units[0]; u++) {
        size_t k = strlen(units[u]);
        size_t n_text = len / k * k;
        for (size_t i = 0; i < n_text; i += k)
            memcpy(text + i, units[u], k);
        size_t n = 0;
        int32_t *ids = tok(v, text, n_text, false, false, &n);
        size_t n_back = 0;
        char *back = ids ? concat_pieces(v, ids, n, &n_back) : NULL;
        CHECK_MSG(back && n_back == n_text && memcmp(back, text, n_text) == 0, "unit %zu", u);
        free(back);
        free(ids);
    }
    free(text);
    moeinf_vocab_free(v);
}

/* ---- pre-tokenizers without vectors: splits made by Python's regex module ----------------- */

static void test_pretok_cases(void) {
    char path[1024];
    const char *src = getenv("MOEINF_SRC"); // NOLINT(concurrency-mt-unsafe): no setenv
    snprintf(path, sizeof path, "%s/tests/data/pretok/cases.tsv", src ? src : ".");
    char *data = golden_read_file(path, NULL);
    CHECK_MSG(data != NULL, "cannot read %s", path);
    if (!data) return;
    int n_cases = 0;
    int n_ok = 0;
    char *save = NULL;
    for (char *line = strtok_r(data, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        char *tab1 = strchr(line, '\t');
        char *tab2 = tab1 ? strchr(tab1 + 1, '\t') : NULL;
        CHECK(tab1 && tab2);
        if (!tab1 || !tab2) break;
        *tab1 = '\0';
        char text[512];
        size_t n_text = unhex(tab1 + 1, text, sizeof text);
        struct moeinf_pretok *p = NULL;
        struct moeinf_error err;
        CHECK_EQ_INT(moeinf_pretok_create(line, &p, &err), MOEINF_OK);
        if (!p) break;
        struct moeinf_span *words = NULL;
        size_t n_words = 0;
        CHECK_EQ_INT(moeinf_pretok_split(p, text, n_text, &words, &n_words, &err), MOEINF_OK);
        /* Expected words, one hex string each. */
        bool same = words != NULL;
        size_t k = 0;
        for (const char *w = tab2 + 1; same && *w;) {
            char word[512];
            size_t n_word = unhex(w, word, sizeof word);
            same = k < n_words && words[k].len == n_word &&
                   memcmp(text + words[k].off, word, n_word) == 0;
            k++;
            w += 2 * n_word;
            if (*w == ',') w++;
        }
        same = same && k == n_words;
        n_cases++;
        if (same) {
            n_ok++;
        } else {
            fprintf(stderr, "%s \"%.*s\": got", line, (int)n_text, text);
            for (size_t i = 0; words && i < n_words; i++)
                fprintf(stderr, " [%.*s]", (int)words[i].len, text + words[i].off);
            fputc('\n', stderr);
        }
        free(words);
        moeinf_pretok_free(p);
    }
    fprintf(stderr, "  pre-tokenizer cases: %d/%d match Python regex\n", n_ok, n_cases);
    CHECK(n_cases >= 200);
    CHECK_EQ_INT(n_ok, n_cases);
    free(data);
}

static void test_pretok_names(void) {
    struct moeinf_pretok *p = NULL;
    struct moeinf_error err;
    /* Aliases reach their entry; llama3's flags are llama.cpp's. */
    CHECK_EQ_INT(moeinf_pretok_create("llama-bpe", &p, &err), MOEINF_OK);
    if (p) {
        CHECK(strcmp(moeinf_pretok_name(p), "llama3") == 0);
        struct moeinf_pretok_flags f = moeinf_pretok_flags(p);
        CHECK(f.ignore_merges && f.add_bos && f.clean_spaces);
    }
    moeinf_pretok_free(p);
    p = NULL;
    CHECK_EQ_INT(moeinf_pretok_create(NULL, &p, &err), MOEINF_OK);
    if (p) CHECK(strcmp(moeinf_pretok_name(p), "default") == 0);
    moeinf_pretok_free(p);
    p = NULL;
    CHECK_EQ_INT(moeinf_pretok_create("qwen3-imaginary", &p, &err), MOEINF_ERR_UNSUPPORTED);
    CHECK_STR_CONTAINS(err.msg, "unknown pre-tokenizer 'qwen3-imaginary'");
    CHECK_STR_CONTAINS(err.msg, "qwen2");
    CHECK_STR_CONTAINS(err.msg, "qwen35");
    CHECK(p == NULL);
    /* qwen35 keeps spaces before punctuation when detokenizing (llama.cpp: clean_spaces off) */
    CHECK_EQ_INT(moeinf_pretok_create("qwen35", &p, &err), MOEINF_OK);
    if (p) {
        struct moeinf_pretok_flags f = moeinf_pretok_flags(p);
        CHECK(!f.ignore_merges && !f.add_bos && !f.clean_spaces);
    }
    moeinf_pretok_free(p);
    p = NULL;
    /* gpt-4o and the names llama.cpp gives the same split: no space cleaning, no BOS, merges
     * always run (llama.cpp's flags for them) */
    static const char *const o200k_names[] = {"gpt-4o", "llama4", "kanana2", "talkie"};
    for (int i = 0; i < 4; i++) {
        CHECK_EQ_INT(moeinf_pretok_create(o200k_names[i], &p, &err), MOEINF_OK);
        if (!p) continue;
        CHECK(strcmp(moeinf_pretok_name(p), "gpt-4o") == 0);
        struct moeinf_pretok_flags f = moeinf_pretok_flags(p);
        CHECK(!f.ignore_merges && !f.add_bos && !f.clean_spaces);
        moeinf_pretok_free(p);
        p = NULL;
    }

    /* GLM's and Kimi-K2's names, with llama.cpp's flags for them (llama-vocab.cpp): glm4
     * and glm5 take a word that is a token whole and clean spaces, chatglm-bpe (GLM-4) only
     * cleans spaces, kimi-k2 does neither; none adds BOS */
    static const struct {
        const char *name, *entry;
        bool ignore_merges, clean_spaces;
    } glm_kimi[] = {{"glm4", "glm4", true, true},
                    {"glm5", "glm4", true, true},
                    {"chatglm-bpe", "chatglm-bpe", false, true},
                    {"kimi-k2", "kimi-k2", false, false}};

    for (size_t i = 0; i < sizeof glm_kimi / sizeof glm_kimi[0]; i++) {
        CHECK_EQ_INT(moeinf_pretok_create(glm_kimi[i].name, &p, &err), MOEINF_OK);
        if (!p) continue;
        CHECK(strcmp(moeinf_pretok_name(p), glm_kimi[i].entry) == 0);
        struct moeinf_pretok_flags f = moeinf_pretok_flags(p);
        CHECK_MSG(f.ignore_merges == glm_kimi[i].ignore_merges &&
                      f.clean_spaces == glm_kimi[i].clean_spaces && !f.add_bos,
                  "%s: flags %d %d %d", glm_kimi[i].name, f.ignore_merges, f.clean_spaces,
                  f.add_bos);
        moeinf_pretok_free(p);
        p = NULL;
    }
    /* Empty text: no words, a real (freeable) array. */
    CHECK_EQ_INT(moeinf_pretok_create("qwen2", &p, &err), MOEINF_OK);
    if (p) {
        struct moeinf_span *w = NULL;
        size_t n = 7;
        CHECK_EQ_INT(moeinf_pretok_split(p, "", 0, &w, &n, &err), MOEINF_OK);
        CHECK(w != NULL && n == 0);
        free(w);
    }
    moeinf_pretok_free(p);
}

/* ---- GLM-4.5 and Kimi-K2: synthetic vocabularies (tests/data/tokenizer) ------------------- */

/* glm4-synthetic.gguf and kimi-k2-synthetic.gguf (tools/tokenizer/glm_kimi_synthetic.py): 256
 * byte tokens and the merges of a tiny BPE trained on splits of the family's pattern, then the
 * family's special tokens with the types llama.cpp's converter gives them (GLM: <think>, the
 * tool tags and /nothink user-defined, the rest control; Kimi: all control), no BOS key in the
 * GLM file. Their ids with special tokens as text and parsed, each special token's attributes,
 * end of generation and pieces, and BOS and EOS, are llama.cpp's for the same files. */
static void test_vectors_glm_kimi(void) {
    static const struct {
        const char *name;
        int n_special, n_eog; /* eog: GLM <|endoftext|>, <|user|>, <|observation|>; Kimi
                                 [EOS], <|im_end|>, [EOT] */
    } fams[] = {{"glm4", 23, 3}, {"kimi-k2", 17, 3}};

    for (size_t f = 0; f < sizeof fams / sizeof fams[0]; f++) {
        char rel[128];
        char path[1024];
        char label[64];
        snprintf(rel, sizeof rel, "tests/data/tokenizer/%s-synthetic.gguf", fams[f].name);
        struct moeinf_vocab *v = open_vocab(rel);
        if (!v) continue;
        /* "# bos B eos E" heads the .special file */
        char spath[1100];
        snprintf(spath, sizeof spath, "%s.special", test_src_path(rel, path, sizeof path));
        char *data = golden_read_file(spath, NULL);
        long bos = -2;
        long eos = -2;
        const char *at = data && !strncmp(data, "# bos ", 6) ? data + 6 : NULL;
        char *end = NULL;
        if (at) bos = strtol(at, &end, 10);
        CHECK(end && !strncmp(end, " eos ", 5));
        if (end && !strncmp(end, " eos ", 5)) eos = strtol(end + 5, NULL, 10);
        free(data);
        CHECK_MSG(moeinf_vocab_bos(v) == bos && moeinf_vocab_eos(v) == eos,
                  "%s: bos %d eos %d, llama.cpp %ld %ld", fams[f].name, moeinf_vocab_bos(v),
                  moeinf_vocab_eos(v), bos, eos);
        CHECK(!moeinf_vocab_add_bos(v) && !moeinf_vocab_add_eos(v));
        int n_eog = 0;
        CHECK_EQ_INT(check_special_file(v, rel, &n_eog), fams[f].n_special);
        CHECK_EQ_INT(n_eog, fams[f].n_eog);
        int32_t first_special = moeinf_vocab_n_tokens(v) - fams[f].n_special;
        for (int32_t id = 0; id < first_special; id++)
            if (moeinf_vocab_is_eog(v, id)) CHECK_MSG(false, "token %d ends generation", id);
        snprintf(label, sizeof label, "%s synthetic", fams[f].name);
        run_vectors_sp(v, label, test_src_path(rel, path, sizeof path), false);
        v = open_vocab(rel);
        if (!v) continue;
        snprintf(rel, sizeof rel, "tests/data/tokenizer/%s-synthetic-special.gguf", fams[f].name);
        snprintf(label, sizeof label, "%s synthetic (special)", fams[f].name);
        run_vectors_sp(v, label, test_src_path(rel, path, sizeof path), true);
    }
}

/* ---- hand-made vocabularies -------------------------------------------------------------- */

/* GPT-2 characters: 'Ġ' is the space byte (U+0120). */
#define G "\304\240" /* octal: a hex escape would swallow a following letter */

enum {
    H_A,
    H_B,
    H_C,
    H_SP,
    H_AB,
    H_BC,
    H_ABC,
    H_SPA,
    H_EOT,
    H_USR,
    H_FFFD0,
    H_FFFD1,
    H_FFFD2,
    N_H
};

static const char *const h_texts[N_H] = {
    "a",   "b",        "c",        G,          "ab", "bc", "abc", "\304\240a", "<|endoftext|>",
    "<u>", "\xc3\xaf", "\xc2\xbf", "\xc2\xbd", /* U+FFFD's bytes EF BF BD as GPT-2 characters */
};
static const int32_t h_types[N_H] = {1, 1, 1, 1, 1, 1, 1, 1, 3, 4, 1, 1, 1};

static struct moeinf_vocab *hand_bpe(const char *const *merges, size_t n_merges, const char *pre,
                                     struct moeinf_error *err, enum moeinf_status *st) {
    struct moeinf_vocab_desc d = moeinf_vocab_desc_default();
    d.model = "gpt2";
    d.pre = pre;
    d.n_tokens = N_H;
    d.texts = h_texts;
    d.types = h_types;
    d.n_types = N_H;
    d.merges = merges;
    d.n_merges = n_merges;
    d.eos_id = H_EOT;
    d.bos_id = H_EOT;
    struct moeinf_vocab *v = NULL;
    *st = moeinf_vocab_init(&d, &v, err);
    return v;
}

static void test_merge_order(void) {
    enum moeinf_status st;
    struct moeinf_error err;
    /* Rank decides, not position: "b c" (rank 0) beats "a b" (rank 1) in "abc". */
    const char *const m1[] = {"b c", "a b", "\304\240 a"};
    struct moeinf_vocab *v = hand_bpe(m1, 3, "gpt-2", &err, &st);
    CHECK_MSG(st == MOEINF_OK, "%s", err.msg);
    if (!v) return;
    expect_ids(v, "abc", false, (int32_t[]){H_A, H_BC}, 2);
    expect_ids(v, "ab", false, (int32_t[]){H_AB}, 1);
    /* " a" is one word ( ?\p{L}+) and merges to "Ġa". */
    expect_ids(v, "b a", false, (int32_t[]){H_B, H_SPA}, 2);
    moeinf_vocab_free(v);
    /* With "a b" first and then "ab c", the whole word merges; equal ranks cannot happen, but
     * the same pair twice in a word merges leftmost first. */
    const char *const m2[] = {"a b", "ab c", "b c"};
    v = hand_bpe(m2, 3, "gpt-2", &err, &st);
    if (!v) return;
    expect_ids(v, "abc", false, (int32_t[]){H_ABC}, 1);
    expect_ids(v, "ababab", false, (int32_t[]){H_AB, H_AB, H_AB}, 3);
    expect_ids(v, "abcbc", false, (int32_t[]){H_ABC, H_BC}, 2);
    moeinf_vocab_free(v);
}

static void test_hostile_merges(void) {
    enum moeinf_status st;
    struct moeinf_error err;
    /* Merges naming texts that are no tokens, a merge without a space, an empty one, a
     * duplicate (the first rank counts): defined, no error. "c a" makes "ca", which is not a
     * token: the tokens of its single bytes stand for it (llama.cpp). */
    const char *const m[] = {"zz yy", "nospace", "", "c a", "a b", "c a", " x"};
    struct moeinf_vocab *v = hand_bpe(m, 7, "gpt-2", &err, &st);
    CHECK_MSG(st == MOEINF_OK, "%s", err.msg);
    if (!v) return;
    expect_ids(v, "cab", false, (int32_t[]){H_C, H_A, H_B}, 3);
    expect_ids(v, "ab", false, (int32_t[]){H_AB}, 1);
    /* A character without a token is dropped, as llama.cpp drops a piece none of whose
     * bytes is a token: no error, no unknown token. */
    expect_ids(v, "az", false, (int32_t[]){H_A}, 1);
    expect_ids(v, "z", false, NULL, 0);
    moeinf_vocab_free(v);
}

/* Falcon's vocabulary has no character for 14 control bytes. llama.cpp drops them (a piece
 * that is not a token leaves only those of its bytes that are tokens), so one stray \v does
 * not fail the text: "Hello<byte> world" is "Hello world" (9856 1079 in llama.cpp's falcon
 * vectors), and every other ASCII byte is a token of its own. */
static void test_falcon_bytes_without_tokens(void) {
    struct moeinf_vocab *v = load_vocab("testdata/tokenizer/ggml-vocab-falcon.gguf");
    if (!v) return;
    static const unsigned char missing[] = {0x03, 0x04, 0x05, 0x0B, 0x11, 0x13, 0x14,
                                            0x15, 0x16, 0x17, 0x19, 0x1C, 0x1D, 0x1E};
    for (unsigned b = 0; b < 0x80; b++) {
        bool gone = memchr(missing, (int)b, sizeof missing) != NULL;
        char text[] = "Hello? world";
        text[5] = (char)b;
        size_t n = 0;
        int32_t *ids = NULL;
        struct moeinf_error err;
        enum moeinf_status st =
            moeinf_vocab_tokenize(v, text, sizeof text - 1, false, false, &ids, &n, &err);
        CHECK_MSG(st == MOEINF_OK, "byte 0x%02X: %s", b, err.msg);
        if (st == MOEINF_OK && gone)
            CHECK_MSG(n == 2 && ids[0] == 9856 && ids[1] == 1079, "byte 0x%02X: %zu ids", b, n);
        free(ids);
        char one = (char)b;
        ids = NULL;
        n = 0;
        st = moeinf_vocab_tokenize(v, &one, 1, false, false, &ids, &n, &err);
        CHECK_MSG(st == MOEINF_OK, "byte 0x%02X alone: %s", b, err.msg);
        CHECK_MSG(gone ? n == 0 : n == 1, "byte 0x%02X alone: %zu ids", b, n);
        if (n == 1) {
            size_t k = 0;
            const char *p = moeinf_vocab_piece(v, ids[0], false, &k);
            CHECK_MSG(k == 1 && p[0] == one, "byte 0x%02X: piece of %zu bytes", b, k);
        }
        free(ids);
    }
    moeinf_vocab_free(v);
}

static void test_invalid_utf8_and_specials(void) {
    enum moeinf_status st;
    struct moeinf_error err;
    const char *const m[] = {"a b", "\304\240 a"};
    struct moeinf_vocab *v = hand_bpe(m, 2, "gpt-2", &err, &st);
    if (!v) return;
    /* Invalid bytes (a stray continuation, a cut-short sequence, a surrogate) become U+FFFD
     * (EF BF BD), as llama.cpp does; they never crash or vanish. */
    expect_ids(v, "a\x80", false, (int32_t[]){H_A, H_FFFD0, H_FFFD1, H_FFFD2}, 4);
    expect_ids(v, "\xe6\x97", false,
               (int32_t[]){H_FFFD0, H_FFFD1, H_FFFD2, H_FFFD0, H_FFFD1, H_FFFD2}, 6);
    expect_ids(v, "\xed\xa0\x80", false, (int32_t[]){H_FFFD0, H_FFFD1, H_FFFD2}, 3);
    /* Control tokens only with parse_special; user-defined ones always. */
    expect_ids(v, "ab<|endoftext|> a", true, (int32_t[]){H_AB, H_EOT, H_SPA}, 3);
    expect_ids(v, "a<u>b", false, (int32_t[]){H_A, H_USR, H_B}, 3);
    /* No BOS by default for BPE (gpt-2), EOS never. */
    size_t n = 0;
    int32_t *ids = tok(v, "a", 1, true, false, &n);
    CHECK(ids && n == 1 && ids[0] == H_A);
    free(ids);
    /* Pieces: GPT-2 characters back to bytes. */
    size_t k = 0;
    const char *p = moeinf_vocab_piece(v, H_SPA, false, &k);
    CHECK(k == 2 && memcmp(p, " a", 2) == 0);
    p = moeinf_vocab_piece(v, H_FFFD0, false, &k);
    CHECK(k == 1 && (unsigned char)p[0] == 0xEF);
    moeinf_vocab_piece(v, H_EOT, false, &k);
    CHECK(k == 0);
    moeinf_vocab_free(v);
}

static void test_llama3_ignore_merges_and_bos(void) {
    enum moeinf_status st;
    struct moeinf_error err;
    /* No merge makes "abc", but llama3 takes a word that is a token as a whole. */
    const char *const m[] = {"b c"};
    struct moeinf_vocab *v = hand_bpe(m, 1, "llama3", &err, &st);
    CHECK_MSG(st == MOEINF_OK, "%s", err.msg);
    if (!v) return;
    expect_ids(v, "abc", false, (int32_t[]){H_ABC}, 1);
    CHECK(moeinf_vocab_add_bos(v));
    size_t n = 0;
    int32_t *ids = tok(v, "abc", 3, true, false, &n);
    CHECK(ids && n == 2 && ids[0] == H_EOT && ids[1] == H_ABC);
    free(ids);
    moeinf_vocab_free(v);
    /* gpt-2 merges: no "a b" merge, so "abc" is a + bc. */
    v = hand_bpe(m, 1, "gpt-2", &err, &st);
    if (!v) return;
    expect_ids(v, "abc", false, (int32_t[]){H_A, H_BC}, 2);
    moeinf_vocab_free(v);
}

static void test_detokenize_clean_spaces(void) {
    /* gpt-2 cleans spaces like llama.cpp's detokenize; deepseek-coder does not. */
    struct moeinf_vocab *v = load_vocab("testdata/tokenizer/ggml-vocab-gpt-2.gguf");
    struct moeinf_vocab *d = load_vocab("testdata/tokenizer/ggml-vocab-deepseek-coder.gguf");
    if (!v || !d) {
        moeinf_vocab_free(v);
        moeinf_vocab_free(d);
        return;
    }
    const char *text = "Hello , world ! I 'm here ' ok ' and I 've been 't";
    const char *want = "Hello, world! I'm here'ok'and I've been 't"; /* by hand, pass by pass */
    size_t n = 0;
    int32_t *ids = tok(v, text, strlen(text), false, false, &n);
    char *out = NULL;
    size_t n_out = 0;
    struct moeinf_error err;
    if (ids) {
        CHECK_EQ_INT(moeinf_vocab_detokenize(v, ids, n, false, false, &out, &n_out, &err),
                     MOEINF_OK);
        CHECK_MSG(out && strcmp(out, want) == 0, "got \"%s\"", out ? out : "");
        free(out);
    }
    free(ids);
    /* Quotes between spaces one after another: each pass as llama.cpp runs it (worked by hand:
     * the space after a removed quote no longer counts as a space for the next one). */
    static const char *const quotes[][2] = {{"a ' ' b", "a'' b"}, {"x ' ' ' y", "x'''y"}};
    for (int q = 0; q < 2; q++) {
        ids = tok(v, quotes[q][0], strlen(quotes[q][0]), false, false, &n);
        if (!ids) continue;
        CHECK_EQ_INT(moeinf_vocab_detokenize(v, ids, n, false, false, &out, &n_out, &err),
                     MOEINF_OK);
        CHECK_MSG(out && strcmp(out, quotes[q][1]) == 0, "got \"%s\"", out ? out : "");
        free(out);
        free(ids);
    }
    ids = tok(d, text, strlen(text), false, false, &n);
    if (ids) {
        CHECK_EQ_INT(moeinf_vocab_detokenize(d, ids, n, false, false, &out, &n_out, &err),
                     MOEINF_OK);
        CHECK(out && strcmp(out, text) == 0);
        free(out);
    }
    free(ids);
    moeinf_vocab_free(v);
    moeinf_vocab_free(d);
}

static void test_missing_pre_is_default(void) {
    /* gpt-neox has no tokenizer.ggml.pre: 'default' (llama.cpp's), with a note on stderr. The
     * default splits digit runs in threes and punctuation runs apart: "12345" -> 123|45. */
    struct moeinf_vocab *v = load_vocab("testdata/tokenizer/ggml-vocab-gpt-neox.gguf");
    if (!v) return;
    size_t n = 0;
    int32_t *ids = tok(v, "12345", 5, false, false, &n);
    size_t k = 0;
    char *back = ids ? concat_pieces(v, ids, n, &k) : NULL;
    CHECK(back && strcmp(back, "12345") == 0);
    CHECK(ids && n >= 2);
    if (ids && n >= 2) {
        size_t k0 = 0;
        moeinf_vocab_piece(v, ids[0], false, &k0);
        CHECK_EQ_INT(k0, 3);
    }
    free(back);
    free(ids);
    moeinf_vocab_free(v);
}

static void test_long_input(void) {
    /* 1 MB in one word and in many: linear work (the benchmark measures it), same result as
     * tokenizing the parts where a word boundary allows. */
    struct moeinf_vocab *v = load_vocab("testdata/tokenizer/ggml-vocab-gpt-2.gguf");
    if (!v) return;
    size_t len = 1 << 20;
    char *text = malloc(len);
    if (!text) return;
    for (size_t i = 0; i < len; i++)
        text[i] = "the cat sat. "[i % 13];
    size_t n = 0;
    int32_t *ids = tok(v, text, len, false, false, &n);
    CHECK(ids && n > len / 13);
    size_t k = 0;
    char *back = ids ? concat_pieces(v, ids, n, &k) : NULL;
    CHECK(back && k == len && memcmp(back, text, len) == 0);
    free(back);
    free(ids);
    memset(text, 'a', len); /* one 1 MB word */
    ids = tok(v, text, len, false, false, &n);
    back = ids ? concat_pieces(v, ids, n, &k) : NULL;
    CHECK(back && k == len && memcmp(back, text, len) == 0);
    free(back);
    free(ids);
    free(text);
    moeinf_vocab_free(v);
}

/* ---- hostile GGUF metadata --------------------------------------------------------------- */

struct gen {
    const char *pre;           /* NULL: no key */
    uint32_t pre_type;         /* type of the pre key */
    uint32_t merges_elem;      /* element type of tokenizer.ggml.merges; 0: no key */
    const char *const *merges; /* when strings */
    uint32_t n_merges;
    size_t big_token; /* > 0: one more token of this many bytes */
};

static enum moeinf_status open_bpe(const struct gen *o, struct moeinf_vocab **out,
                                   struct moeinf_error *err) {
    static const char *const texts[] = {"a", "b", "ab", G, "\304\240a"};
    struct gguf_bytes b = {0};
    uint32_t n_tokens = 5 + (o->big_token > 0);
    gguf_bytes_header(&b, 3, 0, 2 + (o->pre != NULL) + (o->merges_elem != 0));
    gguf_bytes_kv_head(&b, "tokenizer.ggml.model", MOEINF_GGUF_TYPE_STRING);
    gguf_bytes_str(&b, "gpt2");
    gguf_bytes_kv_head(&b, "tokenizer.ggml.tokens", MOEINF_GGUF_TYPE_ARRAY);
    gguf_bytes_le(&b, MOEINF_GGUF_TYPE_STRING, 4);
    gguf_bytes_le(&b, n_tokens, 8);
    for (uint32_t i = 0; i < 5; i++)
        gguf_bytes_str(&b, texts[i]);
    if (o->big_token) {
        char *big = malloc(o->big_token + 1);
        if (big) {
            memset(big, 'b', o->big_token);
            big[o->big_token] = '\0';
            gguf_bytes_str(&b, big);
            free(big);
        }
    }
    if (o->pre) {
        gguf_bytes_kv_head(&b, "tokenizer.ggml.pre", o->pre_type);
        if (o->pre_type == MOEINF_GGUF_TYPE_STRING)
            gguf_bytes_str(&b, o->pre);
        else
            gguf_bytes_le(&b, 7, 4);
    }
    if (o->merges_elem) {
        gguf_bytes_kv_head(&b, "tokenizer.ggml.merges", MOEINF_GGUF_TYPE_ARRAY);
        gguf_bytes_le(&b, o->merges_elem, 4);
        gguf_bytes_le(&b, o->n_merges, 8);
        for (uint32_t i = 0; i < o->n_merges; i++) {
            if (o->merges_elem == MOEINF_GGUF_TYPE_STRING)
                gguf_bytes_str(&b, o->merges[i]);
            else
                gguf_bytes_le(&b, i, 4);
        }
    }
    struct moeinf_gguf *g = NULL;
    *out = NULL;
    moeinf_error_clear(err);
    enum moeinf_status st = moeinf_gguf_open_buffer(b.p, b.n, "gen.gguf", &g, err);
    CHECK_MSG(st == MOEINF_OK, "%s", err->msg);
    if (st == MOEINF_OK) st = moeinf_vocab_init_from_gguf(g, out, err);
    moeinf_gguf_free(g);
    gguf_bytes_reset(&b);
    return st;
}

static void test_hostile_gguf(void) {
    static const char *const merges[] = {"a b", "\304\240 a", "q r", "x", ""};
    const struct gen ok = {"gpt-2", MOEINF_GGUF_TYPE_STRING, MOEINF_GGUF_TYPE_STRING, merges, 5, 0};
    struct gen o;
    struct moeinf_vocab *v = NULL;
    struct moeinf_error err;
    /* Merges naming non-tokens ("q r"), without a space ("x") or empty: loaded, inert. */
    CHECK_EQ_INT(open_bpe(&ok, &v, &err), MOEINF_OK);
    if (v) expect_ids(v, "ab a", false, (int32_t[]){2, 4}, 2);
    moeinf_vocab_free(v);
    o = ok, o.merges_elem = 0; /* llama.cpp: "cannot find tokenizer merges" */
    CHECK_EQ_INT(open_bpe(&o, &v, &err), MOEINF_ERR_FORMAT);
    CHECK_STR_CONTAINS(err.msg, "tokenizer.ggml.merges");
    o = ok, o.merges_elem = MOEINF_GGUF_TYPE_INT32;
    CHECK_EQ_INT(open_bpe(&o, &v, &err), MOEINF_ERR_FORMAT);
    CHECK_STR_CONTAINS(err.msg, "tokenizer.ggml.merges");
    o = ok, o.pre = "gpt-5-turbo";
    CHECK_EQ_INT(open_bpe(&o, &v, &err), MOEINF_ERR_UNSUPPORTED);
    CHECK_STR_CONTAINS(err.msg, "unknown pre-tokenizer 'gpt-5-turbo'");
    CHECK_STR_CONTAINS(err.msg, "gen.gguf");
    o = ok, o.pre = "an-absurdly-long-pre-tokenizer-name-that-no-table-has-and-never-will-have";
    CHECK_EQ_INT(open_bpe(&o, &v, &err), MOEINF_ERR_UNSUPPORTED);
    CHECK_STR_CONTAINS(err.msg, "unknown pre-tokenizer 'an-absurdly-long");
    o = ok, o.pre_type = MOEINF_GGUF_TYPE_UINT32;
    CHECK_EQ_INT(open_bpe(&o, &v, &err), MOEINF_ERR_FORMAT);
    CHECK_STR_CONTAINS(err.msg, "tokenizer.ggml.pre");
    o = ok, o.pre = NULL; /* absent: default (a note on stderr) */
    CHECK_EQ_INT(open_bpe(&o, &v, &err), MOEINF_OK);
    moeinf_vocab_free(v);
    /* A 1 MB token: loads; a text equal to it tokenizes (merges cannot build it: "b" x 1M
     * gives one "b" token per byte) without quadratic work. */
    o = ok, o.big_token = 1 << 20;
    CHECK_EQ_INT(open_bpe(&o, &v, &err), MOEINF_OK);
    if (v) {
        char *text = malloc((size_t)1 << 20);
        if (text) {
            memset(text, 'b', (size_t)1 << 20);
            size_t n = 0;
            int32_t *ids = tok(v, text, (size_t)1 << 20, false, false, &n);
            CHECK(ids && n == (size_t)1 << 20 && ids[0] == 1);
            free(ids);
            free(text);
        }
    }
    moeinf_vocab_free(v);
}

int main(void) {
    RUN(test_vectors_gpt2);
    RUN(test_vectors_deepseek_llm);
    RUN(test_vectors_deepseek_coder);
    RUN(test_vectors_falcon);
    RUN(test_vectors_mpt);
    RUN(test_vectors_starcoder);
    RUN(test_vectors_refact);
    RUN(test_vectors_qwen35);
    RUN(test_vectors_qwen2);
    RUN(test_vectors_o200k);
    RUN(test_o200k_harmony_rules);
    RUN(test_vectors_glm_kimi);
    RUN(test_o200k_long_words);
    RUN(test_golden_prompts);
    RUN(test_pretok_cases);
    RUN(test_pretok_names);
    RUN(test_merge_order);
    RUN(test_hostile_merges);
    RUN(test_falcon_bytes_without_tokens);
    RUN(test_invalid_utf8_and_specials);
    RUN(test_llama3_ignore_merges_and_bos);
    RUN(test_detokenize_clean_spaces);
    RUN(test_missing_pre_is_default);
    RUN(test_long_input);
    RUN(test_hostile_gguf);
    return test_report();
}
