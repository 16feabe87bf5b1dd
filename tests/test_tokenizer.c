/*
 * test_tokenizer.c - the SentencePiece tokenizer against llama.cpp: its test vectors for the
 * llama-spm and phi-3 vocabularies and the prompt tokens and pieces of the tiny-mixtral
 * goldens; hand-made vocabularies for merging by score, byte fallback, the unknown token,
 * special tokens, pieces and end-of-generation; the streaming detokenizer; hostile metadata.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/status.h"
#include "gguf/gguf.h"
#include "gguf_bytes.h"
#include "golden.h"
#include "test.h"
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
    moeinf_gguf_free(g); /* the vocabulary keeps its own copies */
    return st == MOEINF_OK ? v : NULL;
}

static int32_t *tok(const struct moeinf_vocab *v, const char *s, size_t len, bool add_special,
                    bool parse_special, size_t *n) {
    int32_t *ids = NULL;
    struct moeinf_error err;
    enum moeinf_status st =
        moeinf_vocab_tokenize(v, s, len, add_special, parse_special, &ids, n, &err);
    CHECK_MSG(st == MOEINF_OK, "%s", err.msg);
    if (st == MOEINF_OK) CHECK(ids != NULL);
    return st == MOEINF_OK ? ids : NULL;
}

/* Tokenizes a C string and compares with the expected ids. */
static void expect_ids(const struct moeinf_vocab *v, const char *s, bool add_special,
                       bool parse_special, const int32_t *want, size_t n_want) {
    size_t n = 0;
    int32_t *ids = tok(v, s, strlen(s), add_special, parse_special, &n);
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

/* The pieces of ids concatenated (special as given). */
static char *concat_pieces(const struct moeinf_vocab *v, const int32_t *ids, size_t n, bool special,
                           size_t *len) {
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

/* ---- llama.cpp test vectors ------------------------------------------------------------- */

#define SEP "\n__ggml_vocab_test__\n"

static void run_vectors(const char *vocab_rel) {
    char rel[256];
    char path[1024];
    struct moeinf_vocab *v = load_vocab(vocab_rel);
    if (!v) return;
    snprintf(rel, sizeof rel, "%s.inp", vocab_rel);
    size_t n_inp = 0;
    size_t n_out = 0;
    char *inp = test_shared_path(rel, path, sizeof path) ? golden_read_file(path, &n_inp) : NULL;
    snprintf(rel, sizeof rel, "%s.out", vocab_rel);
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

        /* Expected ids: one line of " id id id". */
        const char *eol = strchr(line, '\n');
        CHECK(eol != NULL);
        if (!eol) break;
        int32_t want[512];
        size_t n_want = 0;
        for (const char *p = line; p < eol && n_want < 512;) {
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
            fprintf(stderr, "%s string %d (\"%.*s\"): got %zu ids, want %zu\n", vocab_rel,
                    n_strings, (int)len, s, n, n_want);
        }
        /* Round trip: the pieces give back the text with the SentencePiece space in front;
         * detokenize (llama.cpp's rules) removes it again. */
        size_t n_text = 0;
        size_t n_detok = 0;
        char *text = concat_pieces(v, ids, n, false, &n_text);
        char *detok = NULL;
        struct moeinf_error err;
        CHECK(moeinf_vocab_detokenize(v, ids, n, false, false, &detok, &n_detok, &err) ==
              MOEINF_OK);
        bool round = text && detok && n_detok == len && memcmp(detok, s, len) == 0 &&
                     ((len == 0 && n_text == 0) ||
                      (n_text == len + 1 && text[0] == ' ' && memcmp(text + 1, s, len) == 0));
        if (round)
            n_round++;
        else
            fprintf(stderr, "%s string %d: round trip differs\n", vocab_rel, n_strings);
        free(text);
        free(detok);
        free(ids);
    }
    fprintf(stderr, "  %s: %d/%d strings match llama.cpp, %d round-trip\n", vocab_rel, n_ok,
            n_strings, n_round);
    CHECK(n_strings >= 40);
    CHECK_EQ_INT(n_ok, n_strings);
    CHECK_EQ_INT(n_round, n_strings);
    CHECK(line && *line == '\0'); /* as many result lines as strings */
    free(inp);
    free(outp);
    moeinf_vocab_free(v);
}

static void test_vectors_llama_spm(void) {
    run_vectors("testdata/tokenizer/ggml-vocab-llama-spm.gguf");
}

static void test_vectors_phi3(void) {
    run_vectors("testdata/tokenizer/ggml-vocab-phi-3.gguf");
}

/* ---- goldens: prompt tokens with BOS, and their pieces ---------------------------------- */

static int hexval(char c) {
    return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

/* Decodes the hex string that starts at p (after the opening quote) into out. */
static size_t unhex(const char *p, char *out, size_t cap) {
    size_t n = 0;
    while (p[0] != '"' && hexval(p[0]) >= 0 && hexval(p[1]) >= 0 && n < cap) {
        out[n++] = (char)(hexval(p[0]) * 16 + hexval(p[1]));
        p += 2;
    }
    return n;
}

static void check_golden(const struct moeinf_vocab *v, const char *id) {
    char rel[256];
    char path[1024];
    snprintf(rel, sizeof rel, "testdata/golden/tiny-mixtral-F32/%s.json", id);
    if (!test_shared_path(rel, path, sizeof path)) return;
    size_t n_json;
    char *json = golden_read_file(path, &n_json);
    CHECK(json != NULL);
    if (!json) return;
    const char *ph = strstr(json, "\"prompt_utf8_hex\": \"");
    const char *tk = strstr(json, "\"tokens\": ["); /* the first one is the prompt's */
    const char *pc = strstr(json, "\"token_pieces_hex\": [");
    CHECK(ph && tk && pc);
    if (!ph || !tk || !pc) {
        free(json);
        return;
    }
    char prompt[1024];
    size_t n_prompt = unhex(ph + strlen("\"prompt_utf8_hex\": \""), prompt, sizeof prompt);
    int32_t want[256];
    size_t n_want = 0;
    for (const char *p = tk + strlen("\"tokens\": ["); *p != ']' && n_want < 256;) {
        char *end;
        want[n_want++] = (int32_t)strtol(p, &end, 10);
        p = end;
        while (*p == ',' || *p == ' ')
            p++;
    }
    size_t n = 0;
    int32_t *ids = tok(v, prompt, n_prompt, true, false, &n);
    if (ids) {
        CHECK_EQ_INT(n, n_want);
        CHECK_MSG(n == n_want && memcmp(ids, want, n * sizeof *ids) == 0, "golden %s tokens", id);
        /* Pieces with special = true, as llama_token_to_piece printed them. */
        const char *p = pc + strlen("\"token_pieces_hex\": [");
        for (size_t i = 0; i < n_want; i++) {
            p = strchr(p, '"');
            if (!p) break;
            char piece[64];
            size_t k = unhex(p + 1, piece, sizeof piece);
            size_t got_len;
            const char *got = moeinf_vocab_piece(v, want[i], true, &got_len);
            CHECK_MSG(got_len == k && memcmp(got, piece, k) == 0, "golden %s piece %zu", id, i);
            p = strchr(p + 1, '"') + 1;
        }
    }
    free(ids);
    free(json);
}

static void test_golden_prompts(void) {
    struct moeinf_vocab *v = load_vocab("testdata/models/tiny-mixtral-F32.gguf");
    if (!v) return;
    CHECK_EQ_INT(moeinf_vocab_n_tokens(v), 32000);
    CHECK_EQ_INT(moeinf_vocab_bos(v), 1);
    CHECK_EQ_INT(moeinf_vocab_eos(v), 2);
    CHECK(moeinf_vocab_add_bos(v) && !moeinf_vocab_add_eos(v));
    CHECK(moeinf_vocab_is_eog(v, 2) && !moeinf_vocab_is_eog(v, 1) && !moeinf_vocab_is_eog(v, 0));
    check_golden(v, "hello");
    check_golden(v, "code");
    check_golden(v, "unicode-kvf32-nofa");
    moeinf_vocab_free(v);
}

static void test_phi3_special_tokens(void) {
    struct moeinf_vocab *v = load_vocab("testdata/tokenizer/ggml-vocab-phi-3.gguf");
    if (!v) return;
    /* EOS 32000 <|endoftext|>; <|end|> 32007 ends turns; </s> (user-defined there) too. */
    CHECK(moeinf_vocab_is_eog(v, 32000) && moeinf_vocab_is_eog(v, 32007));
    CHECK(moeinf_vocab_is_eog(v, 2));
    CHECK(!moeinf_vocab_is_eog(v, 32010));    /* <|user|> */
    CHECK_EQ_INT(moeinf_vocab_eot(v), 32000); /* lowest id among EOT texts */
    /* parse_special: control tokens are recognized; rstrip (Phi-3) eats the newline after
     * <|user|> but not around <s>. */
    size_t n;
    size_t n_hi;
    const char *chat = "<|user|>\nHi<|end|>";
    int32_t *a = tok(v, chat, strlen(chat), false, true, &n);
    int32_t *b = tok(v, "Hi", 2, false, false, &n_hi); /* "\xe2\x96\x81Hi" */
    if (a && b) {
        CHECK_EQ_INT(n, n_hi + 2);
        CHECK_EQ_INT(a[0], 32010);
        CHECK(n == n_hi + 2 && memcmp(a + 1, b, n_hi * sizeof *b) == 0);
        CHECK_EQ_INT(a[n - 1], 32007);
    }
    free(a);
    free(b);
    /* Without parse_special the same text is literal: no special id appears. */
    a = tok(v, "<|user|>", 8, false, false, &n);
    if (a) {
        CHECK(n > 1);
        for (size_t i = 0; i < n; i++)
            CHECK(a[i] < 32000);
    }
    free(a);
    moeinf_vocab_free(v);
}

static void test_random_text_round_trip(void) {
    /* Random strings of characters survive tokenize -> pieces (byte fallback covers what the
     * vocabulary lacks), with the SentencePiece space in front. Not for arbitrary bytes: a
     * lead byte swallows the next bytes as one "character" even when they are an escaped
     * space, whose bytes then come back as U+2581 (llama.cpp does the same). A stray
     * continuation byte is a one-byte character and is fine. */
    struct moeinf_vocab *v = load_vocab("testdata/tokenizer/ggml-vocab-llama-spm.gguf");
    if (!v) return;
    static const char *const units[] = {" ",
                                        "  ",
                                        "\t",
                                        "\n",
                                        "a",
                                        "e",
                                        "The",
                                        "\xc3\xa9",
                                        "\xe6\x97\xa5",
                                        "\xf0\x9f\x9a\x80",
                                        "\x80",
                                        "<s>",
                                        "</s>",
                                        "0",
                                        "!",
                                        "\xd0\xbd"};
    const size_t n_units = sizeof units / sizeof units[0];
    uint32_t x = 12345;
    int n_bad = 0;
    for (int r = 0; r < 300; r++) {
        char text[128];
        size_t len = 0;
        x = x * 1664525u + 1013904223u;
        int n_pick = (int)((x >> 16) % 24);
        for (int i = 0; i < n_pick; i++) {
            x = x * 1664525u + 1013904223u;
            const char *u = units[(x >> 16) % n_units];
            memcpy(text + len, u, strlen(u));
            len += strlen(u);
        }
        size_t n;
        size_t n_text = 0;
        int32_t *ids = tok(v, text, len, false, false, &n);
        char *back = ids ? concat_pieces(v, ids, n, false, &n_text) : NULL;
        bool ok = back && ((len == 0 && n_text == 0) || (n_text == len + 1 && back[0] == ' ' &&
                                                         memcmp(back + 1, text, len) == 0));
        if (!ok) n_bad++;
        free(back);
        free(ids);
    }
    CHECK_EQ_INT(n_bad, 0);
    moeinf_vocab_free(v);
}

static void test_baichuan_loads(void) {
    /* A third SentencePiece vocabulary (no test vectors): it loads and round-trips. */
    struct moeinf_vocab *v = load_vocab("testdata/tokenizer/ggml-vocab-baichuan.gguf");
    if (!v) return;
    CHECK_EQ_INT(moeinf_vocab_n_tokens(v), 64000);
    const char *text = "Hello world, \xe4\xbd\xa0\xe5\xa5\xbd \xf0\x9f\xa6\x99!";
    size_t n;
    size_t n_out;
    int32_t *ids = tok(v, text, strlen(text), true, false, &n);
    char *s = NULL;
    struct moeinf_error err;
    if (ids) {
        CHECK(n >= 3 && ids[0] == moeinf_vocab_bos(v));
        CHECK_EQ_INT(moeinf_vocab_detokenize(v, ids, n, true, false, &s, &n_out, &err), MOEINF_OK);
        CHECK(s && s[0] == ' ' && strcmp(s + 1, text) == 0);
    }
    free(s);
    free(ids);
    moeinf_vocab_free(v);
}

/* ---- hand-made vocabularies -------------------------------------------------------------- */

enum {
    T_UNK,
    T_BOS,
    T_EOS,
    T_SP,
    T_A,
    T_B,
    T_C,
    T_AB,
    T_BC,
    T_ABC,
    T_SPA,
    T_X,
    T_IM_END,
    T_C3,
    T_A9,
    T_UNUSED,
    N_HAND
};

static const char *const hand_texts[N_HAND] = {"<unk>",
                                               "<s>",
                                               "</s>",
                                               "\xe2\x96\x81",
                                               "a",
                                               "b",
                                               "c",
                                               "ab",
                                               "bc",
                                               "abc",
                                               ("\xe2\x96\x81"
                                                "a"), /* U+2581 a */
                                               "<x>",
                                               "<|im_end|>",
                                               "<0xC3>",
                                               "<0xA9>",
                                               "[unused]"};
static const int32_t hand_types[N_HAND] = {2, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 4, 1, 6, 6, 5};

static struct moeinf_vocab *hand_vocab(float s_ab, float s_bc, float s_abc, int space_prefix) {
    float scores[N_HAND] = {0};
    scores[T_AB] = s_ab;
    scores[T_BC] = s_bc;
    scores[T_ABC] = s_abc;
    scores[T_SPA] = -1.0f;
    struct moeinf_vocab_desc d = moeinf_vocab_desc_default();
    d.n_tokens = N_HAND;
    d.texts = hand_texts;
    d.scores = scores;
    d.n_scores = N_HAND;
    d.types = hand_types;
    d.n_types = N_HAND;
    d.add_space_prefix = space_prefix;
    struct moeinf_vocab *v = NULL;
    struct moeinf_error err;
    CHECK_MSG(moeinf_vocab_init(&d, &v, &err) == MOEINF_OK, "%s", err.msg);
    return v;
}

static void test_merges_by_score(void) {
    /* No space prefix here. Merging goes on while a pair is a token: a+b or b+c, then the
     * rest into "abc". */
    struct moeinf_vocab *v = hand_vocab(-1.0f, -0.5f, -100.0f, 0);
    if (!v) return;
    expect_ids(v, "abc", false, false, (int32_t[]){T_ABC}, 1);
    expect_ids(v, "bc", false, false, (int32_t[]){T_BC}, 1);
    expect_ids(v, "cab", false, false, (int32_t[]){T_C, T_AB}, 2);
    expect_ids(v, "bcab", false, false, (int32_t[]){T_BC, T_AB}, 2);
    expect_ids(v, "cc", false, false, (int32_t[]){T_C, T_C}, 2);
    moeinf_vocab_free(v);

    /* Without an "abc" token the order shows: "abc" has the overlapping pairs ab and bc; the
     * higher score merges first whatever its position, and equal scores take the leftmost. */
    const char *texts[5] = {"a", "b", "c", "ab", "bc"};
    const float eq[5] = {0, 0, 0, -1, -1};
    const float right[5] = {0, 0, 0, -1, -0.5f};
    struct moeinf_vocab_desc d = moeinf_vocab_desc_default();
    d.n_tokens = 5;
    d.texts = texts;
    d.scores = eq;
    d.n_scores = 5;
    d.add_bos = 0;
    d.add_space_prefix = 0;
    struct moeinf_error err;
    CHECK_EQ_INT(moeinf_vocab_init(&d, &v, &err), MOEINF_OK);
    if (!v) return;
    expect_ids(v, "abc", false, false, (int32_t[]){3, 2}, 2);
    expect_ids(v, "abcabc", false, false, (int32_t[]){3, 2, 3, 2}, 4);
    moeinf_vocab_free(v);
    d.scores = right;
    CHECK_EQ_INT(moeinf_vocab_init(&d, &v, &err), MOEINF_OK);
    if (!v) return;
    expect_ids(v, "abc", false, false, (int32_t[]){0, 4}, 2);
    moeinf_vocab_free(v);
}

static void test_space_prefix_and_specials(void) {
    struct moeinf_vocab *v = hand_vocab(-1.0f, -0.5f, -100.0f, -1); /* default: on */
    if (!v) return;
    CHECK(moeinf_vocab_add_space_prefix(v));
    expect_ids(v, "a a", false, false, (int32_t[]){T_SPA, T_SPA}, 2);
    expect_ids(v, "a", true, false, (int32_t[]){T_BOS, T_SPA}, 2);
    expect_ids(v, "", true, false, (int32_t[]){T_BOS}, 1);
    expect_ids(v, "", false, false, NULL, 0);
    size_t n = 9;
    int32_t *ids = tok(v, NULL, 0, true, true, &n); /* no text at all */
    CHECK(ids && n == 1 && ids[0] == T_BOS);
    free(ids);
    /* parse_special: </s> is split out and the text after it gets a space prefix again. */
    expect_ids(v, "a</s>b", false, true, (int32_t[]){T_SPA, T_EOS, T_SP, T_B}, 4);
    /* Literal text: "<", "/", "s", ">" are no tokens and there are no byte tokens for them. */
    expect_ids(v, "a</s>b", false, false, (int32_t[]){T_SPA, T_UNK, T_UNK, T_UNK, T_UNK, T_B}, 6);
    /* A user-defined token is split out even without parse_special. */
    expect_ids(v, "a<x>b", false, false, (int32_t[]){T_SPA, T_X, T_SP, T_B}, 4);
    /* <unk> is a special text only with parse_special. */
    expect_ids(v, "<unk>", false, true, (int32_t[]){T_UNK}, 1);
    moeinf_vocab_free(v);
}

static void test_byte_fallback_and_unknown(void) {
    struct moeinf_vocab *v = hand_vocab(-1.0f, -0.5f, -100.0f, 0);
    if (!v) return;
    /* é = C3 A9: not a token, both bytes have <0xXX> tokens. */
    expect_ids(v, "a\xc3\xa9", false, false, (int32_t[]){T_A, T_C3, T_A9}, 3);
    /* ü = C3 BC: <0xBC> is missing, so that byte becomes <unk>. */
    expect_ids(v,
               "\xc3\xbc"
               "b",
               false, false, (int32_t[]){T_C3, T_UNK, T_B}, 3);
    /* A stray continuation byte is its own one-byte character. */
    expect_ids(v,
               "\xa9"
               "a",
               false, false, (int32_t[]){T_A9, T_A}, 2);
    /* A truncated sequence at the end: C3 alone. */
    expect_ids(v, "a\xc3", false, false, (int32_t[]){T_A, T_C3}, 2);
    moeinf_vocab_free(v);
}

static void test_unknown_token_default(void) {
    /* No unknown_token_id: llama.cpp's default id 0 stands for bytes without a token. */
    const char *texts[3] = {"x", "a", "b"};
    struct moeinf_vocab_desc d = moeinf_vocab_desc_default();
    d.n_tokens = 3;
    d.texts = texts;
    d.add_bos = 0;
    d.add_space_prefix = 0;
    struct moeinf_vocab *v = NULL;
    struct moeinf_error err;
    CHECK_EQ_INT(moeinf_vocab_init(&d, &v, &err), MOEINF_OK);
    if (!v) return;
    CHECK_EQ_INT(moeinf_vocab_unk(v), 0);
    CHECK_EQ_INT(moeinf_vocab_bos(v), 1); /* defaults 1 and 2, in range here */
    CHECK_EQ_INT(moeinf_vocab_eos(v), 2);
    expect_ids(v,
               "a\xe6\x97\xa5"
               "b",
               false, false, (int32_t[]){1, 0, 0, 0, 2}, 5);
    moeinf_vocab_free(v);

    /* An explicit unknown token elsewhere. */
    const char *texts2[2] = {"a", "<unk>"};
    const int32_t types2[2] = {1, 2};
    d.n_tokens = 2;
    d.texts = texts2;
    d.types = types2;
    d.n_types = 2;
    d.unk_id = 1;
    d.eos_id = 0;
    CHECK_EQ_INT(moeinf_vocab_init(&d, &v, &err), MOEINF_OK);
    if (!v) return;
    expect_ids(v, "az", false, false, (int32_t[]){0, 1}, 2);
    moeinf_vocab_free(v);
}

static void test_pieces_and_eog(void) {
    struct moeinf_vocab *v = hand_vocab(-1.0f, -0.5f, -100.0f, -1);
    if (!v) return;
    size_t n;
    const char *p = moeinf_vocab_piece(v, T_SPA, false, &n);
    CHECK(n == 2 && memcmp(p, " a", 2) == 0);
    p = moeinf_vocab_piece(v, T_SP, false, &n);
    CHECK(n == 1 && p[0] == ' ');
    p = moeinf_vocab_piece(v, T_C3, false, &n);
    CHECK(n == 1 && (unsigned char)p[0] == 0xC3);
    p = moeinf_vocab_piece(v, T_EOS, false, &n);
    CHECK(n == 0 && p != NULL);
    p = moeinf_vocab_piece(v, T_EOS, true, &n);
    CHECK(n == 4 && memcmp(p, "</s>", 4) == 0);
    p = moeinf_vocab_piece(v, T_UNK, false, &n);
    CHECK(n == 0 && p != NULL);
    p = moeinf_vocab_piece(v, T_X, false, &n); /* user-defined: always its text */
    CHECK(n == 3 && memcmp(p, "<x>", 3) == 0);
    p = moeinf_vocab_piece(v, T_UNUSED, true, &n);
    CHECK(n == 0 && p != NULL);
    p = moeinf_vocab_piece(v, -1, true, &n);
    CHECK(n == 0 && p != NULL);
    p = moeinf_vocab_piece(v, N_HAND, true, &n);
    CHECK(n == 0 && p != NULL);

    /* EOS, and <|im_end|> by its text (made a control token, found as EOT). */
    CHECK(moeinf_vocab_is_eog(v, T_EOS));
    CHECK(moeinf_vocab_is_eog(v, T_IM_END));
    CHECK_EQ_INT(moeinf_vocab_eot(v), T_IM_END);
    CHECK(moeinf_vocab_attr(v, T_IM_END) & MOEINF_TOKEN_ATTR_CONTROL);
    CHECK(!moeinf_vocab_is_eog(v, T_BOS) && !moeinf_vocab_is_eog(v, T_A));
    CHECK(!moeinf_vocab_is_eog(v, -5) && !moeinf_vocab_is_eog(v, 1000));
    p = moeinf_vocab_piece(v, T_IM_END, false, &n);
    CHECK(n == 0 && p != NULL);
    CHECK_EQ_INT(moeinf_vocab_find(v, "ab", 2), T_AB);
    CHECK_EQ_INT(moeinf_vocab_find(v, "zz", 2), -1);

    /* detokenize: llama.cpp's rules. */
    const int32_t ids[] = {T_BOS, T_SPA, T_SP, T_B, T_EOS};
    char *s = NULL;
    struct moeinf_error err;
    CHECK_EQ_INT(moeinf_vocab_detokenize(v, ids, 5, true, false, &s, &n, &err), MOEINF_OK);
    CHECK(s && strcmp(s, " a b") == 0); /* BOS dropped: its space stays; EOS hidden */
    free(s);
    CHECK_EQ_INT(moeinf_vocab_detokenize(v, ids + 1, 3, false, false, &s, &n, &err), MOEINF_OK);
    CHECK(s && strcmp(s, "a b") == 0); /* no BOS: the prefix space goes */
    free(s);
    CHECK_EQ_INT(moeinf_vocab_detokenize(v, ids, 5, false, true, &s, &n, &err), MOEINF_OK);
    CHECK(s && strcmp(s, "<s> a b</s>") == 0);
    free(s);
    const int32_t bad[] = {T_A, 99};
    CHECK_EQ_INT(moeinf_vocab_detokenize(v, bad, 2, false, false, &s, &n, &err), MOEINF_ERR_ARG);
    moeinf_vocab_free(v);
}

/* ---- streaming detokenizer --------------------------------------------------------------- */

/* True if s[0..n) is a sequence of complete, valid UTF-8 characters. */
static bool utf8_complete(const char *s, size_t n) {
    size_t i = 0;
    while (i < n) {
        unsigned char c = (unsigned char)s[i];
        size_t k = c < 0x80                 ? 1
                   : c >= 0xC2 && c <= 0xDF ? 2
                   : c >= 0xE0 && c <= 0xEF ? 3
                   : c >= 0xF0 && c <= 0xF4 ? 4
                                            : 0;
        if (k == 0 || i + k > n) return false;
        for (size_t j = 1; j < k; j++)
            if (((unsigned char)s[i + j] & 0xC0) != 0x80) return false;
        i += k;
    }
    return true;
}

static void stream_check(const struct moeinf_vocab *v, const char *text) {
    size_t n = 0;
    int32_t *ids = tok(v, text, strlen(text), true, false, &n);
    if (!ids) return;
    struct moeinf_detok d;
    moeinf_detok_init(&d);
    char all[512];
    size_t n_all = 0;
    int n_held_steps = 0;
    for (size_t i = 0; i < n; i++) {
        size_t len;
        const char *p = moeinf_vocab_piece(v, ids[i], false, &len);
        char out[MOEINF_DETOK_OUT_MAX(64)];
        CHECK(len <= 64);
        size_t k = moeinf_detok_push(&d, p, len, out);
        CHECK_MSG(utf8_complete(out, k), "token %zu emitted a partial character", i);
        if (k < len) n_held_steps++;
        memcpy(all + n_all, out, k);
        n_all += k;
    }
    char out[MOEINF_DETOK_HOLD];
    size_t k = moeinf_detok_flush(&d, out);
    CHECK_EQ_INT(k, 0); /* valid text leaves nothing behind */
    memcpy(all + n_all, out, k);
    n_all += k;
    /* BOS renders empty; the first piece carries the SentencePiece space. */
    CHECK(n_all == strlen(text) + 1 && all[0] == ' ' && memcmp(all + 1, text, n_all - 1) == 0);
    CHECK(n_held_steps > 0); /* the emoji bytes really were split across tokens */
    free(ids);
}

static void test_streaming_detok(void) {
    struct moeinf_vocab *v = load_vocab("testdata/models/tiny-mixtral-F32.gguf");
    if (!v) return;
    stream_check(v, "Caf\xc3\xa9 na\xc3\xafve \xe6\x97\xa5\xe6\x9c\xac\xe8\xaa\x9e "
                    "\xf0\x9f\x9a\x80\xf0\x9f\x94\xa5!");
    moeinf_vocab_free(v);
}

#define FFFD "\xef\xbf\xbd" /* U+FFFD REPLACEMENT CHARACTER */

/* Feeds the bytes of `in` one push at a time (each a piece of `step` bytes), then flushes;
 * compares the whole output with `want`. */
static void detok_expect(const char *in, size_t n_in, size_t step, const char *want) {
    struct moeinf_detok d;
    moeinf_detok_init(&d);
    char out[256];
    size_t n = 0;
    for (size_t i = 0; i < n_in; i += step) {
        size_t len = n_in - i < step ? n_in - i : step;
        CHECK(n + MOEINF_DETOK_OUT_MAX(len) <= sizeof out);
        n += moeinf_detok_push(&d, in + i, len, out + n);
    }
    n += moeinf_detok_flush(&d, out + n);
    CHECK_MSG(n == strlen(want) && memcmp(out, want, n) == 0, "input of %zu bytes, step %zu", n_in,
              step);
    CHECK(utf8_complete(out, n));
}

static void test_detok_edge_cases(void) {
    struct moeinf_detok d;
    char out[MOEINF_DETOK_OUT_MAX(4)];
    moeinf_detok_init(&d);
    /* A 4-byte character fed one byte at a time comes out whole at the last byte. */
    const char rocket[4] = {'\xf0', '\x9f', '\x9a', '\x80'};
    for (int i = 0; i < 3; i++)
        CHECK_EQ_INT(moeinf_detok_push(&d, rocket + i, 1, out), 0);
    CHECK_EQ_INT(moeinf_detok_push(&d, rocket + 3, 1, out), 4);
    CHECK(memcmp(out, rocket, 4) == 0);
    /* A lead byte followed by ASCII: the lead alone is one U+FFFD, the ASCII follows. */
    CHECK_EQ_INT(moeinf_detok_push(&d, "\xe6", 1, out), 0);
    CHECK_EQ_INT(moeinf_detok_push(&d, "a", 1, out), 4);
    CHECK(memcmp(out, FFFD "a", 4) == 0);
    /* Stray continuation bytes and bytes that start nothing: one U+FFFD each, at once. */
    CHECK_EQ_INT(moeinf_detok_push(&d, "\x80", 1, out), 3);
    CHECK_EQ_INT(moeinf_detok_push(&d, "\xff", 1, out), 3);
    CHECK(memcmp(out, FFFD, 3) == 0);
    /* A character cut short by the end of the text: one U+FFFD at the flush. */
    CHECK_EQ_INT(moeinf_detok_push(&d, "ok\xe6\x97", 4, out), 2);
    CHECK_EQ_INT(moeinf_detok_flush(&d, out), 3);
    CHECK(memcmp(out, FFFD, 3) == 0);
    CHECK_EQ_INT(moeinf_detok_flush(&d, out), 0);

    /* Unicode's table of well-formed sequences, one U+FFFD per maximal invalid subpart
     * (its examples, section 3.9), fed whole and a byte at a time. */
    static const struct {
        const char *in, *want;
    } cases[] = {
        {"\xc0\xaf", FFFD FFFD},                   /* overlong '/': C0 never starts one */
        {"\xe0\x80\xaf", FFFD FFFD FFFD},          /* overlong: E0 needs A0..BF next */
        {"\xed\xa0\x80", FFFD FFFD FFFD},          /* a surrogate: ED needs 80..9F next */
        {"\xf4\x90\x80\x80", FFFD FFFD FFFD FFFD}, /* past U+10FFFF */
        {"\xf0\x9f\x9a", FFFD},                    /* cut short at the end: one subpart */
        {"\xf0\x9f\x9ax", FFFD "x"},               /* cut short by ASCII */
        {"\xe6\x97\xf0\x9f\x9a\x80", FFFD "\xf0\x9f\x9a\x80"}, /* by another character */
        {"a\xc3\xa9\xe6\x97\xa5", "a\xc3\xa9\xe6\x97\xa5"},    /* valid text unchanged */
        {"\x61\xf1\x80\x80\xe1\x80\xc2\x62\x80\x63\x80\xbf\x64",
         "a" FFFD FFFD FFFD "b" FFFD "c" FFFD FFFD "d"}, /* Unicode's table 3-8 example */
    };

    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        detok_expect(cases[c].in, strlen(cases[c].in), 1, cases[c].want);
        detok_expect(cases[c].in, strlen(cases[c].in), 64, cases[c].want);
    }
}

/* The id of the byte-fallback token <0xXX> of byte b: the one token whose piece is that
 * single byte (for b >= 0x80 no other piece can be). */
static int32_t byte_token(const struct moeinf_vocab *v, unsigned char b) {
    for (int32_t id = 0; id < moeinf_vocab_n_tokens(v); id++) {
        size_t len = 0;
        const char *p = moeinf_vocab_piece(v, id, false, &len);
        if (len == 1 && (unsigned char)p[0] == b) return id;
    }
    return -1;
}

/* Byte-fallback tokens in an order that forms no character, as a model with random or broken
 * weights generates them, stream as U+FFFD through the public text stream. */
static void test_stream_invalid_bytes(void) {
    char path[1024];
    if (!test_shared_path("testdata/models/tiny-mixtral-F32.gguf", path, sizeof path)) return;
    struct moeinf_error err = {0};
    struct moeinf_model *model = NULL;
    struct moeinf_model_params mp = moeinf_model_params_default();
    CHECK_MSG(moeinf_model_load(path, &mp, &model, &err) == MOEINF_OK, "%s", err.msg);
    if (!model) return;
    struct moeinf_vocab *v = load_vocab("testdata/models/tiny-mixtral-F32.gguf");
    struct moeinf_text_stream *s = NULL;
    CHECK(moeinf_text_stream_init(model, &s, &err) == MOEINF_OK);
    if (v && s) {
        /* E6 97 | ED A0 80 | 80 | F0 9F 9A then the end */
        const unsigned char bytes[] = {0xe6, 0x97, 0xed, 0xa0, 0x80, 0x80, 0xf0, 0x9f, 0x9a};
        char got[256];
        size_t n = 0;
        for (size_t i = 0; i < sizeof bytes; i++) {
            int32_t id = byte_token(v, bytes[i]);
            CHECK_MSG(id >= 0, "no byte token for 0x%02x", bytes[i]);
            if (id < 0) break;
            size_t len = 0;
            const char *p = moeinf_text_stream_push(s, id, &len);
            CHECK(utf8_complete(p, len)); /* every push is valid UTF-8 on its own */
            CHECK(n + len <= sizeof got);
            memcpy(got + n, p, len);
            n += len;
        }
        size_t len = 0;
        const char *p = moeinf_text_stream_flush(s, &len);
        memcpy(got + n, p, len);
        n += len;
        const char *want = FFFD FFFD FFFD FFFD FFFD FFFD;
        CHECK_MSG(n == strlen(want) && memcmp(got, want, n) == 0, "%zu bytes", n);
    }
    moeinf_text_stream_free(s);
    moeinf_vocab_free(v);
    moeinf_model_free(model);
}

/* ---- hostile metadata -------------------------------------------------------------------- */

static void expect_init_fail(const struct moeinf_vocab_desc *d, enum moeinf_status want,
                             const char *phrase) {
    struct moeinf_vocab *v = NULL;
    struct moeinf_error err;
    moeinf_error_clear(&err);
    CHECK_EQ_INT(moeinf_vocab_init(d, &v, &err), want);
    CHECK(v == NULL);
    CHECK_STR_CONTAINS(err.msg, phrase);
    moeinf_vocab_free(v);
}

static void test_hostile_desc(void) {
    const char *texts[4] = {"<unk>", "<s>", "</s>", "a"};
    const float scores[4] = {0, 0, 0, -1};
    const int32_t types[4] = {2, 3, 3, 1};
    struct moeinf_vocab_desc base = moeinf_vocab_desc_default();
    base.source = "hostile.gguf";
    base.n_tokens = 4;
    base.texts = texts;
    base.scores = scores;
    base.n_scores = 4;
    base.types = types;
    base.n_types = 4;
    struct moeinf_vocab_desc d;

    d = base, d.n_scores = 3;
    expect_init_fail(&d, MOEINF_ERR_FORMAT, "scores has 3 entries for 4 tokens");
    d = base, d.n_types = 2;
    expect_init_fail(&d, MOEINF_ERR_FORMAT, "token_type has 2 entries");
    d = base, d.bos_id = 4;
    expect_init_fail(&d, MOEINF_ERR_FORMAT, "bos_token_id 4 is out of range");
    d = base, d.eos_id = 4000000000LL;
    expect_init_fail(&d, MOEINF_ERR_FORMAT, "eos_token_id");
    d = base, d.pad_id = 7;
    expect_init_fail(&d, MOEINF_ERR_FORMAT, "padding_token_id");
    d = base, d.n_tokens = 0;
    expect_init_fail(&d, MOEINF_ERR_FORMAT, "no tokens");
    d = base, d.model = "gpt2", d.pre = "no-such-pre";
    expect_init_fail(&d, MOEINF_ERR_UNSUPPORTED, "unknown pre-tokenizer 'no-such-pre'");
    d = base, d.model = "bert";
    expect_init_fail(&d, MOEINF_ERR_UNSUPPORTED, "bert (WordPiece) vocabularies are not");
    d = base, d.model = "t5";
    expect_init_fail(&d, MOEINF_ERR_UNSUPPORTED, "t5");

    const char *dup[4] = {"<unk>", "<s>", "a", "a"};
    d = base, d.texts = dup;
    expect_init_fail(&d, MOEINF_ERR_FORMAT, "duplicate token");
    const float nan_scores[4] = {0, 0, 0, NAN};
    d = base, d.scores = nan_scores;
    expect_init_fail(&d, MOEINF_ERR_FORMAT, "scores[3] is NaN");
    const int32_t byte_types[4] = {2, 3, 3, 6}; /* "a" typed as a byte */
    d = base, d.types = byte_types;
    expect_init_fail(&d, MOEINF_ERR_FORMAT, "type byte");

    /* Two tokens: the default EOS (2) is out of range, so add_eos has nothing to add. */
    const char *two[2] = {"<unk>", "<s>"};
    d = base, d.n_tokens = 2, d.texts = two, d.add_eos = 1;
    expect_init_fail(&d, MOEINF_ERR_FORMAT, "add_eos_token is true");
    const char *one[1] = {"<unk>"};
    d = base, d.n_tokens = 1, d.texts = one;
    expect_init_fail(&d, MOEINF_ERR_FORMAT, "add_bos_token is true");

    /* Empty texts are renamed, not rejected (llama.cpp). */
    const char *empty[4] = {"<unk>", "<s>", "", "a"};
    struct moeinf_vocab *v = NULL;
    struct moeinf_error err;
    d = base, d.texts = empty;
    CHECK_EQ_INT(moeinf_vocab_init(&d, &v, &err), MOEINF_OK);
    size_t n;
    const char *t = v ? moeinf_vocab_text(v, 2, &n) : NULL;
    CHECK(t && strcmp(t, "[EMPTY_2]") == 0);
    moeinf_vocab_free(v);
    moeinf_vocab_free(NULL);
}

/* Options for one generated vocabulary file. */
struct gen {
    const char *model;
    uint32_t n_tokens, n_scores, n_types;
    uint32_t scores_type, types_type, tokens_elem;
    int64_t bos_id;
};

static enum moeinf_status open_generated(const struct gen *o, struct moeinf_error *err) {
    static const char *const texts[] = {"<unk>", "<s>", "</s>", "a", "b", "ab"};
    struct gguf_bytes b = {0};
    uint64_t n_kv = 4 + (o->bos_id >= 0);
    gguf_bytes_header(&b, 3, 0, n_kv);
    gguf_bytes_kv_head(&b, "tokenizer.ggml.model", MOEINF_GGUF_TYPE_STRING);
    gguf_bytes_str(&b, o->model);
    gguf_bytes_kv_head(&b, "tokenizer.ggml.tokens", MOEINF_GGUF_TYPE_ARRAY);
    gguf_bytes_le(&b, o->tokens_elem, 4);
    gguf_bytes_le(&b, o->n_tokens, 8);
    for (uint32_t i = 0; i < o->n_tokens; i++) {
        if (o->tokens_elem == MOEINF_GGUF_TYPE_STRING)
            gguf_bytes_str(&b, texts[i % 6]);
        else
            gguf_bytes_le(&b, i, 4);
    }
    gguf_bytes_kv_head(&b, "tokenizer.ggml.scores", MOEINF_GGUF_TYPE_ARRAY);
    gguf_bytes_le(&b, o->scores_type, 4);
    gguf_bytes_le(&b, o->n_scores, 8);
    for (uint32_t i = 0; i < o->n_scores; i++) {
        float f = -(float)i;
        uint32_t u;
        memcpy(&u, &f, 4);
        gguf_bytes_le(&b, o->scores_type == MOEINF_GGUF_TYPE_FLOAT32 ? u : i,
                      o->scores_type == MOEINF_GGUF_TYPE_UINT8 ? 1 : 4);
    }
    gguf_bytes_kv_head(&b, "tokenizer.ggml.token_type", MOEINF_GGUF_TYPE_ARRAY);
    gguf_bytes_le(&b, o->types_type, 4);
    gguf_bytes_le(&b, o->n_types, 8);
    for (uint32_t i = 0; i < o->n_types; i++)
        gguf_bytes_le(&b, i < 3 ? 3 : 1, 4);
    if (o->bos_id >= 0) {
        gguf_bytes_kv_head(&b, "tokenizer.ggml.bos_token_id", MOEINF_GGUF_TYPE_UINT32);
        gguf_bytes_le(&b, (uint64_t)o->bos_id, 4);
    }
    struct moeinf_gguf *g = NULL;
    struct moeinf_vocab *v = NULL;
    moeinf_error_clear(err);
    enum moeinf_status st = moeinf_gguf_open_buffer(b.p, b.n, "gen.gguf", &g, err);
    CHECK_MSG(st == MOEINF_OK, "%s", err->msg);
    if (st == MOEINF_OK) {
        st = moeinf_vocab_init_from_gguf(g, &v, err);
        if (st == MOEINF_OK) {
            /* A sanity tokenization: "ab" -> " ab" -> no "▁" token: bytes fall to unk. */
            size_t n;
            int32_t *ids = tok(v, "ab", 2, false, false, &n);
            if (ids) CHECK(n >= 1 && ids[n - 1] == 5);
            free(ids);
        }
    }
    moeinf_vocab_free(v);
    moeinf_gguf_free(g);
    gguf_bytes_reset(&b);
    return st;
}

static void test_hostile_gguf(void) {
    const struct gen ok = {
        "llama", 6, 6, 6, MOEINF_GGUF_TYPE_FLOAT32, MOEINF_GGUF_TYPE_INT32, MOEINF_GGUF_TYPE_STRING,
        -1};
    struct gen o;
    struct moeinf_error err;
    CHECK_EQ_INT(open_generated(&ok, &err), MOEINF_OK);
    o = ok, o.scores_type = MOEINF_GGUF_TYPE_INT32; /* integer scores are allowed */
    CHECK_EQ_INT(open_generated(&o, &err), MOEINF_OK);

    o = ok, o.n_scores = 5;
    CHECK_EQ_INT(open_generated(&o, &err), MOEINF_ERR_FORMAT);
    CHECK_STR_CONTAINS(err.msg, "gen.gguf: tokenizer.ggml.scores has 5 entries for 6 tokens");
    o = ok, o.n_types = 4;
    CHECK_EQ_INT(open_generated(&o, &err), MOEINF_ERR_FORMAT);
    CHECK_STR_CONTAINS(err.msg, "token_type has 4 entries");
    o = ok, o.bos_id = 6;
    CHECK_EQ_INT(open_generated(&o, &err), MOEINF_ERR_FORMAT);
    CHECK_STR_CONTAINS(err.msg, "bos_token_id 6 is out of range");
    o = ok, o.scores_type = MOEINF_GGUF_TYPE_UINT8;
    CHECK_EQ_INT(open_generated(&o, &err), MOEINF_ERR_FORMAT);
    CHECK_STR_CONTAINS(err.msg, "tokenizer.ggml.scores");
    o = ok, o.types_type = MOEINF_GGUF_TYPE_FLOAT32;
    CHECK_EQ_INT(open_generated(&o, &err), MOEINF_ERR_FORMAT);
    CHECK_STR_CONTAINS(err.msg, "tokenizer.ggml.token_type");
    o = ok, o.tokens_elem = MOEINF_GGUF_TYPE_INT32;
    CHECK_EQ_INT(open_generated(&o, &err), MOEINF_ERR_FORMAT);
    CHECK_STR_CONTAINS(err.msg, "tokenizer.ggml.tokens");
    o = ok, o.n_tokens = 6, o.model = "gpt2"; /* no tokenizer.ggml.merges */
    CHECK_EQ_INT(open_generated(&o, &err), MOEINF_ERR_FORMAT);
    CHECK_STR_CONTAINS(err.msg, "tokenizer.ggml.merges");
}

static void test_shared_wpm_vocab_unsupported(void) {
    /* bert-bge is WordPiece, which moeinf does not implement. */
    char path[1024];
    if (!test_shared_path("testdata/tokenizer/ggml-vocab-bert-bge.gguf", path, sizeof path)) return;
    struct moeinf_gguf *g = NULL;
    struct moeinf_vocab *v = NULL;
    struct moeinf_error err;
    CHECK_EQ_INT(moeinf_gguf_open(path, &g, &err), MOEINF_OK);
    if (!g) return;
    CHECK_EQ_INT(moeinf_vocab_init_from_gguf(g, &v, &err), MOEINF_ERR_UNSUPPORTED);
    CHECK_STR_CONTAINS(err.msg, "bert (WordPiece) vocabularies are not supported yet");
    CHECK_STR_CONTAINS(err.msg, "ggml-vocab-bert-bge.gguf");
    CHECK(v == NULL);
    moeinf_gguf_free(g);
}

int main(void) {
    RUN(test_vectors_llama_spm);
    RUN(test_vectors_phi3);
    RUN(test_golden_prompts);
    RUN(test_phi3_special_tokens);
    RUN(test_baichuan_loads);
    RUN(test_random_text_round_trip);
    RUN(test_merges_by_score);
    RUN(test_space_prefix_and_specials);
    RUN(test_byte_fallback_and_unknown);
    RUN(test_unknown_token_default);
    RUN(test_pieces_and_eog);
    RUN(test_streaming_detok);
    RUN(test_detok_edge_cases);
    RUN(test_stream_invalid_bytes);
    RUN(test_hostile_desc);
    RUN(test_hostile_gguf);
    RUN(test_shared_wpm_vocab_unsupported);
    return test_report();
}
