/*
 * test_escape.c - a file's strings in error messages: the escaper (base/escape.h) byte by
 * byte as `moeinf inspect` writes string values, and crafted GGUFs whose architecture,
 * tokenizer model, pre-tokenizer, key, tensor name and token text hold terminal escapes and
 * newlines: each refusal is one line without a control byte, naming the string escaped.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/escape.h"
#include "base/status.h"
#include "gguf/gguf.h"
#include "gguf_bytes.h"
#include "moeinf.h"
#include "test.h"
#include "tokenizer/vocab.h"

/* A title-setting OSC sequence, a colour, a newline: what a crafted file would print. */
#define EVIL "ev\x1b]0;owned\x07il\x1b[31m\nX"
#define EVIL_SHOWN "ev\\x1b]0;owned\\x07il\\x1b[31m\\nX"

/* True when msg holds no byte below 0x20 and no DEL. */
static bool no_control(const char *msg) {
    for (const unsigned char *p = (const unsigned char *)msg; *p; p++) {
        if (*p < 0x20 || *p == 0x7f) return false;
    }
    return true;
}

static void expect_clean(const struct moeinf_error *err, const char *shown) {
    CHECK_MSG(no_control(err->msg), "control byte in: %s", err->msg);
    CHECK_STR_CONTAINS(err->msg, shown);
}

static void test_escape_bytes(void) {
    char buf[300];
    CHECK(!strcmp(moeinf_escape("a\"b\\c\td\ne\x01\x7f", 11, buf, sizeof buf),
                  "a\\\"b\\\\c\\td\\ne\\x01\\x7f"));
    /* UTF-8 and the other bytes above 0x7f stand for themselves. */
    CHECK(!strcmp(moeinf_escape("\xc3\xa9t\xc3\xa9", 5, buf, sizeof buf), "\xc3\xa9t\xc3\xa9"));
    CHECK(!strcmp(moeinf_escape(EVIL, strlen(EVIL), buf, sizeof buf), EVIL_SHOWN));
    /* Long: 64 bytes shown, then "..."; a cut never splits a character or an escape. */
    char longs[100];
    memset(longs, 'a', sizeof longs);
    moeinf_escape(longs, sizeof longs, buf, sizeof buf);
    CHECK_EQ_INT(strlen(buf), MOEINF_ESC_SHOWN + 3);
    CHECK(!strcmp(buf + MOEINF_ESC_SHOWN, "..."));
    longs[63] = (char)0xc3; /* U+00E9 across the 64-byte cut */
    longs[64] = (char)0xa9;
    moeinf_escape(longs, sizeof longs, buf, sizeof buf);
    CHECK(!strcmp(buf + 63, "..."));
    char small[10];
    moeinf_escape("ab\x1b\x1b", 4, small, sizeof small); /* "ab\x1b" fits, then "..." */
    CHECK(!strcmp(small, "ab\\x1b..."));
    CHECK(!strcmp(moeinf_esc_str(NULL).s, "(null)"));
    CHECK(!strcmp(moeinf_esc("\x1b", 1).s, "\\x1b"));
}

/* The last line of defence: a caller that did not escape still gets one clean line. */
static void test_fail_escapes_controls(void) {
    struct moeinf_error err;
    moeinf_fail(&err, MOEINF_ERR_FORMAT, "name '%s'", EVIL);
    CHECK(!strcmp(err.msg, "name '" EVIL_SHOWN "'"));
    /* Cut before an escape that would not fit: never half of one. */
    char long_name[300];
    memset(long_name, 'a', sizeof long_name - 1);
    long_name[sizeof long_name - 1] = '\0';
    long_name[253] = '\x1b';
    moeinf_fail(&err, MOEINF_ERR_IO, "%s", long_name);
    CHECK_EQ_INT(strlen(err.msg), 253);
    CHECK(no_control(err.msg));
}

static void kv_str(struct gguf_bytes *b, const char *key, const char *val) {
    gguf_bytes_kv_head(b, key, MOEINF_GGUF_TYPE_STRING);
    gguf_bytes_str(b, val);
}

static void kv_strs(struct gguf_bytes *b, const char *key, const char *const *vals, uint64_t n) {
    gguf_bytes_kv_head(b, key, MOEINF_GGUF_TYPE_ARRAY);
    gguf_bytes_u32(b, MOEINF_GGUF_TYPE_STRING);
    gguf_bytes_u64(b, n);
    for (uint64_t i = 0; i < n; i++)
        gguf_bytes_str(b, vals[i]);
}

/* Opens b as a GGUF (a view: b is reset after the GGUF is freed); expect_fail: the open must
 * fail (the message in *err). */
static struct moeinf_gguf *open_bytes(struct gguf_bytes *b, bool expect_fail,
                                      struct moeinf_error *err) {
    struct moeinf_gguf *g = NULL;
    enum moeinf_status st = moeinf_gguf_open_buffer(b->p, b->n, "crafted.gguf", &g, err);
    if (expect_fail) {
        CHECK_EQ_INT(st, MOEINF_ERR_FORMAT);
        return NULL;
    }
    CHECK_MSG(st == MOEINF_OK, "%s", err->msg);
    return g;
}

/* The gguf reader: a duplicate key and a bad tensor, both named with escapes. */
static void test_gguf_names(void) {
    struct gguf_bytes b = {0};
    struct moeinf_error err;
    gguf_bytes_header(&b, 3, 0, 2);
    gguf_bytes_kv_u32(&b, EVIL, 1);
    gguf_bytes_kv_u32(&b, EVIL, 2);
    open_bytes(&b, true, &err);
    gguf_bytes_reset(&b);
    expect_clean(&err, "duplicate key '" EVIL_SHOWN "'");

    int64_t ne[1] = {0};
    gguf_bytes_header(&b, 3, 1, 0);
    gguf_bytes_tensor(&b, EVIL, 1, ne, 0, 0);
    open_bytes(&b, true, &err);
    gguf_bytes_reset(&b);
    expect_clean(&err, "tensor '" EVIL_SHOWN "'");
}

/* general.architecture: the model loader's refusal. */
static void test_architecture(void) {
    struct gguf_bytes b = {0};
    gguf_bytes_header(&b, 3, 0, 1);
    kv_str(&b, "general.architecture", EVIL);
    char path[512];
    test_tmp_path("esc-arch.gguf", path, sizeof path);
    CHECK(gguf_bytes_write(&b, path));
    gguf_bytes_reset(&b);
    struct moeinf_model *model = NULL;
    struct moeinf_error err = {0};
    struct moeinf_model_params mp = moeinf_model_params_default();
    CHECK_EQ_INT(moeinf_model_load(path, &mp, &model, &err), MOEINF_ERR_UNSUPPORTED);
    expect_clean(&err, "architecture '" EVIL_SHOWN "' is not supported");
    remove(path);
}

/* The vocabulary's strings: tokenizer.ggml.model, tokenizer.ggml.pre (short and too long),
 * a duplicate token text. */
static void test_vocab_strings(void) {
    static const char *const tokens[] = {"a", "b"};
    static const char *const dup_tokens[] = {EVIL, EVIL};
    struct gguf_bytes b = {0};
    struct moeinf_error err;
    struct moeinf_vocab *v = NULL;

    gguf_bytes_header(&b, 3, 0, 2);
    kv_str(&b, "tokenizer.ggml.model", EVIL);
    kv_strs(&b, "tokenizer.ggml.tokens", tokens, 2);
    struct moeinf_gguf *g = open_bytes(&b, false, &err);
    if (g) {
        CHECK_EQ_INT(moeinf_vocab_init_from_gguf(g, &v, &err), MOEINF_ERR_UNSUPPORTED);
        expect_clean(&err, EVIL_SHOWN " vocabularies are not supported");
        moeinf_gguf_free(g);
    }
    gguf_bytes_reset(&b);

    const char *pres[] = {EVIL, EVIL EVIL EVIL EVIL};
    for (int i = 0; i < 2; i++) {
        gguf_bytes_header(&b, 3, 0, 4);
        kv_str(&b, "tokenizer.ggml.model", "gpt2");
        kv_str(&b, "tokenizer.ggml.pre", pres[i]);
        kv_strs(&b, "tokenizer.ggml.tokens", tokens, 2);
        kv_strs(&b, "tokenizer.ggml.merges", tokens, 0);
        g = open_bytes(&b, false, &err);
        if (g) {
            CHECK_EQ_INT(moeinf_vocab_init_from_gguf(g, &v, &err), MOEINF_ERR_UNSUPPORTED);
            expect_clean(&err, "unknown pre-tokenizer '" EVIL_SHOWN);
            moeinf_gguf_free(g);
        }
        gguf_bytes_reset(&b);
    }

    gguf_bytes_header(&b, 3, 0, 2);
    kv_str(&b, "tokenizer.ggml.model", "llama");
    kv_strs(&b, "tokenizer.ggml.tokens", dup_tokens, 2);
    g = open_bytes(&b, false, &err);
    if (g) {
        CHECK_EQ_INT(moeinf_vocab_init_from_gguf(g, &v, &err), MOEINF_ERR_FORMAT);
        expect_clean(&err, "duplicate token in vocabulary: '" EVIL_SHOWN "'");
        moeinf_gguf_free(g);
    }
    gguf_bytes_reset(&b);
}

/* What a user sees: `moeinf run` on a file with a crafted architecture prints one line. */
static void test_cli_one_line(void) {
    if (!getenv("MOEINF_BIN")) { /* NOLINT(concurrency-mt-unsafe): main thread */
        test_skip("MOEINF_BIN unset (run through ctest)");
        return;
    }
    struct gguf_bytes b = {0};
    gguf_bytes_header(&b, 3, 0, 1);
    kv_str(&b, "general.architecture", EVIL);
    char path[512];
    test_tmp_path("esc-cli.gguf", path, sizeof path);
    CHECK(gguf_bytes_write(&b, path));
    gguf_bytes_reset(&b);
    char args[1024];
    char out[4096];
    char err[4096];
    snprintf(args, sizeof args, "run -m '%s' -p hi -n 1", path);
    CHECK_EQ_INT(test_run_moeinf("esc-cli", args, out, sizeof out, err, sizeof err), 1);
    size_t n = strlen(err);
    CHECK_MSG(n > 0 && err[n - 1] == '\n', "stderr: %s", err);
    if (n > 0) err[n - 1] = '\0';
    CHECK_MSG(no_control(err), "control byte in stderr: %s", err);
    CHECK_STR_CONTAINS(err, EVIL_SHOWN);
    remove(path);
}

int main(void) {
    RUN(test_escape_bytes);
    RUN(test_fail_escapes_controls);
    RUN(test_gguf_names);
    RUN(test_architecture);
    RUN(test_vocab_strings);
    RUN(test_cli_one_line);
    return test_report();
}
