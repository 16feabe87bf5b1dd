/*
 * test_trace.c - moe-trace v1: every malformed case gives its named defect with the right line
 * number in the message; valid variants read back exactly; writer -> reader round trips.
 */
#include <stdint.h>

#include "base/rng.h"
#include "trace/trace.h"
#include "test.h"

/* n_layers = 2, n_experts = 4, top_k = 2; token lines are lines 12..16. */
static const char *const good_header = "# moe-trace v1\n"
                                       "# model: test model\n"
                                       "# n_layers: 2\n"
                                       "# n_experts: 4\n"
                                       "# top_k: 2\n"
                                       "# n_requests: 2\n"
                                       "# n_tokens: 5\n"
                                       "# n_prefill_tokens: 3\n"
                                       "# n_decode_tokens: 2\n"
                                       "# req 3 a/1 prefill=2 decode=1\n"
                                       "# req 7 b/2 prefill=1 decode=1\n";

static const char *const good_tokens = "3 P 0 0,1|2,3\n"
                                       "3 P 1 1,2|0,3\n"
                                       "3 D 2 3,0|1,2\n"
                                       "7 P 0 0,2|1,3\n"
                                       "7 D 1 2,1|3,0\n";

/* A header without totals or req lines, for the ordering cases (token lines from line 5). */
static const char *const bare_header = "# moe-trace v1\n"
                                       "# n_layers: 2\n"
                                       "# n_experts: 4\n"
                                       "# top_k: 2\n";

static const char *write_bytes(const char *name, const char *data, size_t n, char *buf,
                               size_t size) {
    test_tmp_path(name, buf, size);
    FILE *f = fopen(buf, "wb");
    if (!f) return NULL;
    fwrite(data, 1, n, f);
    fclose(f);
    return buf;
}

static const char *write_text(const char *name, const char *a, const char *b, char *buf,
                              size_t size) {
    size_t na = strlen(a);
    size_t nb = b ? strlen(b) : 0;
    char *all = malloc(na + nb + 1);
    memcpy(all, a, na + 1);
    if (nb) memcpy(all + na, b, nb + 1);
    const char *p = write_bytes(name, all, na + nb, buf, size);
    free(all);
    return p;
}

/* Reads the whole file; returns the status of the first failure (or OK) and its defect. */
static enum moeinf_status read_all(const char *path, enum moeinf_trace_defect *defect,
                                   struct moeinf_error *err, int *n_tokens) {
    struct moeinf_trace_reader *r = NULL;
    *defect = MOEINF_TRACE_OK;
    *n_tokens = 0;
    enum moeinf_status st = moeinf_trace_open(path, &r, err);
    if (st != MOEINF_OK) {
        /* open failed: the reader is gone; recover the defect from the message's name */
        return st;
    }
    for (;;) {
        struct moeinf_trace_token tok;
        bool end = false;
        st = moeinf_trace_read(r, &tok, &end, err);
        if (st != MOEINF_OK) {
            *defect = moeinf_trace_defect(r);
            /* sticky: a second read repeats the failure */
            struct moeinf_error again;
            bool end2 = false;
            CHECK_EQ_INT(moeinf_trace_read(r, &tok, &end2, &again), st);
            CHECK(strcmp(again.msg, err->msg) == 0);
            break;
        }
        if (end) break;
        (*n_tokens)++;
    }
    moeinf_trace_close(r);
    return st;
}

/* Checks that `text` fails with `defect` and that the message names line `line`. */
static void expect_defect_n(const char *what, const char *data, size_t n,
                            enum moeinf_trace_defect defect, int line) {
    char path[512];
    write_bytes("bad_trace.txt", data, n, path, sizeof path);
    struct moeinf_error err;
    memset(&err, 0, sizeof err);
    enum moeinf_trace_defect got = MOEINF_TRACE_OK;
    int n_tokens = 0;
    enum moeinf_status st = read_all(path, &got, &err, &n_tokens);
    CHECK_MSG(st == MOEINF_ERR_FORMAT, "%s: status %d (%s)", what, (int)st, err.msg);
    char where[600];
    snprintf(where, sizeof where, "%s:%d: %s: ", path, line, moeinf_trace_defect_name(defect));
    CHECK_MSG(strstr(err.msg, where) == err.msg, "%s: message '%s', expected it to start '%s'",
              what, err.msg, where);
    if (got != MOEINF_TRACE_OK) CHECK_MSG(got == defect, "%s: defect %d", what, (int)got);
}

static void expect_defect(const char *what, const char *a, const char *b,
                          enum moeinf_trace_defect defect, int line) {
    size_t na = strlen(a);
    size_t nb = b ? strlen(b) : 0;
    char *all = malloc(na + nb + 1);
    memcpy(all, a, na + 1);
    if (nb) memcpy(all + na, b, nb + 1);
    expect_defect_n(what, all, na + nb, defect, line);
    free(all);
}

/* The good header with line `n` (1-based) replaced by `repl` ("" drops it). */
static char *header_with(int n, const char *repl) {
    static char out[8192];
    out[0] = '\0';
    const char *p = good_header;
    for (int i = 1; *p; i++) {
        const char *nl = strchr(p, '\n');
        if (i == n)
            strncat(out, repl, sizeof out - strlen(out) - 1);
        else
            strncat(out, p, (size_t)(nl - p + 1));
        p = nl + 1;
    }
    return out;
}

static void test_good_trace_reads_back(void) {
    char path[512];
    write_text("good.txt", good_header, good_tokens, path, sizeof path);
    struct moeinf_error err;
    struct moeinf_trace_reader *r = NULL;
    CHECK_EQ_INT(moeinf_trace_open(path, &r, &err), MOEINF_OK);
    if (!r) return;
    const struct moeinf_trace_header *h = moeinf_trace_header(r);
    CHECK_EQ_INT(h->n_layers, 2);
    CHECK_EQ_INT(h->n_experts, 4);
    CHECK_EQ_INT(h->top_k, 2);
    CHECK(strcmp(h->model, "test model") == 0);
    CHECK_EQ_INT(h->n_req_lines, 2);
    static const int expect[5][4] = {
        {0, 1, 2, 3}, {1, 2, 0, 3}, {3, 0, 1, 2}, {0, 2, 1, 3}, {2, 1, 3, 0}};
    static const int ids[5] = {3, 3, 3, 7, 7};
    static const int idx[5] = {0, 1, 2, 0, 1};
    static const char phase[5] = "PPDPD";
    for (int t = 0; t < 5; t++) {
        struct moeinf_trace_token tok;
        bool end = true;
        CHECK_EQ_INT(moeinf_trace_read(r, &tok, &end, &err), MOEINF_OK);
        CHECK(!end);
        CHECK_EQ_INT(tok.request_id, ids[t]);
        CHECK_EQ_INT(tok.token_index, idx[t]);
        CHECK_EQ_INT(tok.phase, phase[t] == 'P' ? MOEINF_PHASE_PREFILL : MOEINF_PHASE_DECODE);
        CHECK_EQ_INT(tok.request_begins, idx[t] == 0);
        CHECK_EQ_INT(tok.line, 12 + t);
        CHECK(tok.request_tag && strcmp(tok.request_tag, ids[t] == 3 ? "a/1" : "b/2") == 0);
        for (int i = 0; i < 4; i++)
            CHECK_EQ_INT(tok.experts[i], expect[t][i]);
    }
    struct moeinf_trace_token tok;
    bool end = false;
    CHECK_EQ_INT(moeinf_trace_read(r, &tok, &end, &err), MOEINF_OK);
    CHECK(end);
    CHECK_EQ_INT(moeinf_trace_read(r, &tok, &end, &err), MOEINF_OK); /* stays at the end */
    CHECK(end);
    moeinf_trace_close(r);
}

static void test_tolerated_variants(void) {
    char path[512];
    struct moeinf_error err;
    enum moeinf_trace_defect d;
    int n = 0;
    /* CRLF line ends, no final newline, unknown provenance keys, no totals, no req lines. */
    const char *crlf = "# moe-trace v1\r\n# n_layers: 2\r\n# n_experts: 4\r\n# top_k: 2\r\n"
                       "# source: somewhere: else\r\n# empty_key:\r\n5 P 0 0,1|2,3\r\n"
                       "5 D 1 3,2|1,0";
    write_text("crlf.txt", crlf, NULL, path, sizeof path);
    CHECK_EQ_INT(read_all(path, &d, &err, &n), MOEINF_OK);
    CHECK_EQ_INT(n, 2);
    /* A header without token lines is an empty trace. */
    write_text("empty_trace.txt", bare_header, NULL, path, sizeof path);
    CHECK_EQ_INT(read_all(path, &d, &err, &n), MOEINF_OK);
    CHECK_EQ_INT(n, 0);
}

static void test_header_defects(void) {
    expect_defect("empty file", "", NULL, MOEINF_TRACE_BAD_MAGIC, 1);
    expect_defect("other version", "# moe-trace v2\n", bare_header + 15, MOEINF_TRACE_BAD_MAGIC, 1);
    expect_defect("no magic", bare_header + 15, "0 P 0 0,1|2,3\n", MOEINF_TRACE_BAD_MAGIC, 1);
    expect_defect("key without colon", header_with(2, "# model test\n"), good_tokens,
                  MOEINF_TRACE_BAD_HEADER, 2);
    expect_defect("no space after #", header_with(2, "#model: x\n"), good_tokens,
                  MOEINF_TRACE_BAD_HEADER, 2);
    expect_defect("bare #", header_with(2, "#\n"), good_tokens, MOEINF_TRACE_BAD_HEADER, 2);
    expect_defect("duplicate key", header_with(2, "# top_k: 2\n"), good_tokens,
                  MOEINF_TRACE_DUPLICATE_KEY, 5);
    expect_defect("missing n_experts", header_with(4, ""), good_tokens, MOEINF_TRACE_MISSING_KEY,
                  11);
    expect_defect("missing top_k, no tokens", header_with(5, ""), NULL, MOEINF_TRACE_MISSING_KEY,
                  11);
    expect_defect("top_k > n_experts", header_with(5, "# top_k: 5\n"), good_tokens,
                  MOEINF_TRACE_BAD_GEOMETRY, 5);
    expect_defect("zero layers", header_with(3, "# n_layers: 0\n"), good_tokens,
                  MOEINF_TRACE_BAD_GEOMETRY, 3);
    expect_defect("layers not a number", header_with(3, "# n_layers: two\n"), good_tokens,
                  MOEINF_TRACE_BAD_GEOMETRY, 3);
    expect_defect("too many ids", header_with(3, "# n_layers: 9000000\n"), good_tokens,
                  MOEINF_TRACE_BAD_GEOMETRY, 4);
    expect_defect("total not a count", header_with(7, "# n_tokens: many\n"), good_tokens,
                  MOEINF_TRACE_BAD_HEADER, 7);
    expect_defect("req line without decode", header_with(10, "# req 3 a/1 prefill=2\n"),
                  good_tokens, MOEINF_TRACE_BAD_REQ_LINE, 10);
    expect_defect("req line bad count", header_with(10, "# req 3 a/1 prefill=x decode=1\n"),
                  good_tokens, MOEINF_TRACE_BAD_REQ_LINE, 10);
    expect_defect("req ids decrease", header_with(11, "# req 2 b/2 prefill=1 decode=1\n"),
                  good_tokens, MOEINF_TRACE_REQUEST_ORDER, 11);
    char long_header[6000];
    memset(long_header, 'x', sizeof long_header);
    memcpy(long_header, "# model: ", 9);
    long_header[sizeof long_header - 2] = '\n';
    long_header[sizeof long_header - 1] = '\0';
    expect_defect("overlong header line", header_with(2, long_header), good_tokens,
                  MOEINF_TRACE_OVERLONG_LINE, 2);
}

static void test_token_defects(void) {
    char buf[1024];

    /* Each case: the good file with token line 12..16 replaced. */
    struct {
        const char *what;
        const char *tokens;
        enum moeinf_trace_defect defect;
        int line;
    } cases[] = {
        {"header after tokens", "3 P 0 0,1|2,3\n# late: 1\n", MOEINF_TRACE_LATE_HEADER, 13},
        {"three fields", "3 P 0 0,1|2,3\n3 P 1\n", MOEINF_TRACE_BAD_FIELDS, 13},
        {"double space", "3 P  0 0,1|2,3\n", MOEINF_TRACE_BAD_FIELDS, 12},
        {"trailing space", "3 P 0 0,1|2,3 \n", MOEINF_TRACE_BAD_FIELDS, 12},
        {"empty line", "3 P 0 0,1|2,3\n\n", MOEINF_TRACE_BAD_FIELDS, 13},
        {"tab separator", "3\tP 0 0,1|2,3\n", MOEINF_TRACE_BAD_FIELDS, 12},
        {"request id not a number", "x P 0 0,1|2,3\n", MOEINF_TRACE_BAD_REQUEST_ID, 12},
        {"negative request id", "-3 P 0 0,1|2,3\n", MOEINF_TRACE_BAD_REQUEST_ID, 12},
        {"phase X", "3 X 0 0,1|2,3\n", MOEINF_TRACE_BAD_PHASE, 12},
        {"phase PD", "3 PD 0 0,1|2,3\n", MOEINF_TRACE_BAD_PHASE, 12},
        {"lower-case phase", "3 p 0 0,1|2,3\n", MOEINF_TRACE_BAD_PHASE, 12},
        {"P after D", "3 P 0 0,1|2,3\n3 D 1 1,2|0,3\n3 P 2 3,0|1,2\n", MOEINF_TRACE_PHASE_ORDER,
         14},
        {"first index 1", "3 P 1 0,1|2,3\n", MOEINF_TRACE_BAD_TOKEN_INDEX, 12},
        {"index gap", "3 P 0 0,1|2,3\n3 P 2 1,2|0,3\n", MOEINF_TRACE_BAD_TOKEN_INDEX, 13},
        {"index not a number", "3 P z 0,1|2,3\n", MOEINF_TRACE_BAD_TOKEN_INDEX, 12},
        {"one layer", "3 P 0 0,1\n", MOEINF_TRACE_LAYER_COUNT, 12},
        {"three layers", "3 P 0 0,1|2,3|0,1\n", MOEINF_TRACE_LAYER_COUNT, 12},
        {"one expert", "3 P 0 0|2,3\n", MOEINF_TRACE_EXPERT_COUNT, 12},
        {"three experts", "3 P 0 0,1,2|2,3\n", MOEINF_TRACE_EXPERT_COUNT, 12},
        {"expert 4 of 4", "3 P 0 0,1|2,4\n", MOEINF_TRACE_EXPERT_RANGE, 12},
        {"huge expert", "3 P 0 0,1|2,99999999999999999999999\n", MOEINF_TRACE_EXPERT_RANGE, 12},
        {"negative expert", "3 P 0 0,-1|2,3\n", MOEINF_TRACE_BAD_EXPERTS, 12},
        {"empty expert", "3 P 0 0,,1|2,3\n", MOEINF_TRACE_BAD_EXPERTS, 12},
        {"letter in experts", "3 P 0 0,1|2,a\n", MOEINF_TRACE_BAD_EXPERTS, 12},
        {"trailing bar", "3 P 0 0,1|2,3|\n", MOEINF_TRACE_LAYER_COUNT, 12},
        {"trailing comma", "3 P 0 0,1|2,3,\n", MOEINF_TRACE_BAD_EXPERTS, 12},
        {"duplicate expert", "3 P 0 1,1|2,3\n", MOEINF_TRACE_DUPLICATE_EXPERT, 12},
        {"five fields", "3 P 0 0,1|2,3 9\n", MOEINF_TRACE_BAD_FIELDS, 12},
    };

    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        snprintf(buf, sizeof buf, "%s", cases[i].tokens);
        expect_defect(cases[i].what, good_header, buf, cases[i].defect, cases[i].line);
    }
}

static void test_order_and_count_defects(void) {
    /* No req lines: ordering alone. */
    expect_defect("request ids decrease", bare_header, "7 P 0 0,1|2,3\n3 P 0 0,1|2,3\n",
                  MOEINF_TRACE_REQUEST_ORDER, 6);
    expect_defect("request split", bare_header, "3 P 0 0,1|2,3\n7 P 0 0,1|2,3\n3 P 1 0,1|2,3\n",
                  MOEINF_TRACE_REQUEST_ORDER, 7);
    /* req lines: counts and ids must agree; the mismatch is reported where the request ends. */
    expect_defect("prefill count", header_with(10, "# req 3 a/1 prefill=1 decode=2\n"), good_tokens,
                  MOEINF_TRACE_REQUEST_MISMATCH, 15);
    expect_defect("last request's count", header_with(11, "# req 7 b/2 prefill=1 decode=2\n"),
                  good_tokens, MOEINF_TRACE_REQUEST_MISMATCH, 16);
    expect_defect("request id differs", header_with(11, "# req 8 b/2 prefill=1 decode=1\n"),
                  good_tokens, MOEINF_TRACE_REQUEST_MISMATCH, 15);
    expect_defect("request without req line", header_with(11, ""), good_tokens,
                  MOEINF_TRACE_REQUEST_MISMATCH, 14);
    /* totals at the end */
    expect_defect("n_tokens", header_with(7, "# n_tokens: 6\n"), good_tokens,
                  MOEINF_TRACE_COUNT_MISMATCH, 16);
    expect_defect("n_requests", header_with(6, "# n_requests: 3\n"), good_tokens,
                  MOEINF_TRACE_COUNT_MISMATCH, 16);
    expect_defect("n_decode_tokens", header_with(9, "# n_decode_tokens: 1\n"), good_tokens,
                  MOEINF_TRACE_COUNT_MISMATCH, 16);
    /* a request missing at the end: its req line is left over */
    expect_defect("fewer requests than req lines", header_with(6, "# note: 1\n"),
                  "3 P 0 0,1|2,3\n3 P 1 1,2|0,3\n3 D 2 3,0|1,2\n", MOEINF_TRACE_REQUEST_MISMATCH,
                  14);
}

static void test_overlong_and_nul(void) {
    /* The token limit for n_layers=2, top_k=2, n_experts=4 is 256 + 2*2*2 = 264 bytes. */
    char line[400];
    snprintf(line, sizeof line, "3 P 0 0,1|2,3");
    size_t n = strlen(line);
    memset(line + n, '0', sizeof line - n - 2); /* "3000...": rejected for length first */
    line[sizeof line - 2] = '\n';
    line[sizeof line - 1] = '\0';
    expect_defect("overlong token line", bare_header, line, MOEINF_TRACE_OVERLONG_LINE, 5);
    /* A 3 MB line without newline: rejected without reading it whole. */
    size_t big = 3u << 20;
    char *huge = malloc(strlen(bare_header) + big + 1);
    memcpy(huge, bare_header, strlen(bare_header) + 1);
    memset(huge + strlen(bare_header), '1', big);
    expect_defect_n("3 MB line", huge, strlen(bare_header) + big, MOEINF_TRACE_OVERLONG_LINE, 5);
    free(huge);
    static const char nul[] = "# moe-trace v1\n# n_layers: 2\n# n_experts: 4\n# top_k: 2\n"
                              "3 P 0 0,1|2\0003\n";
    expect_defect_n("NUL byte", nul, sizeof nul - 1, MOEINF_TRACE_BAD_FIELDS, 5);
}

/* ---- writer ------------------------------------------------------------------------------- */

/* k distinct experts of n into out, in random order. */
static void pick(uint64_t *rng, int n, int k, int32_t *out) {
    int32_t all[512];
    for (int i = 0; i < n; i++)
        all[i] = i;
    for (int i = 0; i < k; i++) {
        int j = i + (int)(moeinf_splitmix64(rng) % (uint64_t)(n - i));
        int32_t t = all[i];
        all[i] = all[j];
        all[j] = t;
        out[i] = all[i];
    }
}

static void test_round_trip(void) {
    uint64_t rng = 42;
    for (int round = 0; round < 20; round++) {
        int n_layers = 1 + (int)(moeinf_splitmix64(&rng) % 5);
        int n_experts = 1 + (int)(moeinf_splitmix64(&rng) % 300);
        int top_k = 1 + (int)(moeinf_splitmix64(&rng) % (uint64_t)(n_experts < 8 ? n_experts : 8));
        int n_req = (int)(moeinf_splitmix64(&rng) % 6);
        struct moeinf_trace_meta meta = {n_layers, n_experts, top_k, round % 2 ? "model x" : NULL};
        char path[512];
        test_tmp_path("round_trip.txt", path, sizeof path);
        struct moeinf_trace_writer *w = NULL;
        struct moeinf_error err;
        CHECK_EQ_INT(moeinf_trace_writer_open(path, &meta, &w, &err), MOEINF_OK);
        if (!w) return;
        CHECK_EQ_INT(moeinf_trace_writer_header(w, "source", "unit test: round trip", &err),
                     MOEINF_OK);
        /* remember what was written, to compare */
        int32_t written[64][5 * 8];
        int64_t req_of[64];
        int phase_of[64];
        int n_tok = 0;
        int64_t id = (int64_t)(moeinf_splitmix64(&rng) % 3);
        for (int q = 0; q < n_req; q++) {
            id += 1 + (int64_t)(moeinf_splitmix64(&rng) % 4);
            char tag[32];
            snprintf(tag, sizeof tag, "t/%d", q);
            CHECK_EQ_INT(moeinf_trace_writer_request(w, id, tag, &err), MOEINF_OK);
            int n_p = (int)(moeinf_splitmix64(&rng) % 4);
            int n_d = (int)(moeinf_splitmix64(&rng) % 4);
            for (int t = 0; t < n_p + n_d && n_tok < 64; t++, n_tok++) {
                for (int l = 0; l < n_layers; l++)
                    pick(&rng, n_experts, top_k, &written[n_tok][(size_t)l * (size_t)top_k]);
                req_of[n_tok] = id;
                phase_of[n_tok] = t < n_p ? MOEINF_PHASE_PREFILL : MOEINF_PHASE_DECODE;
                CHECK_EQ_INT(moeinf_trace_writer_token(w, (enum moeinf_phase)phase_of[n_tok],
                                                       written[n_tok], &err),
                             MOEINF_OK);
            }
        }
        CHECK_EQ_INT(moeinf_trace_writer_close(w, &err), MOEINF_OK);

        struct moeinf_trace_reader *r = NULL;
        CHECK_EQ_INT(moeinf_trace_open(path, &r, &err), MOEINF_OK);
        if (!r) return;
        const struct moeinf_trace_header *h = moeinf_trace_header(r);
        CHECK_EQ_INT(h->n_layers, n_layers);
        CHECK_EQ_INT(h->n_experts, n_experts);
        CHECK_EQ_INT(h->top_k, top_k);
        CHECK_EQ_INT(h->n_tokens, n_tok);
        CHECK_EQ_INT(h->n_req_lines, h->n_requests);
        CHECK(strcmp(h->model, round % 2 ? "model x" : "") == 0);
        for (int t = 0;; t++) {
            struct moeinf_trace_token tok;
            bool end = false;
            CHECK_EQ_INT(moeinf_trace_read(r, &tok, &end, &err), MOEINF_OK);
            if (end) {
                CHECK_EQ_INT(t, n_tok);
                break;
            }
            if (t >= n_tok) {
                CHECK(t < n_tok);
                break;
            }
            CHECK_EQ_INT(tok.request_id, req_of[t]);
            CHECK_EQ_INT(tok.phase, phase_of[t]);
            for (int i = 0; i < n_layers * top_k; i++)
                CHECK_EQ_INT(tok.experts[i], written[t][i]);
        }
        moeinf_trace_close(r);
    }
}

static void test_writer_rejects_bad_input(void) {
    char path[512];
    test_tmp_path("writer_bad.txt", path, sizeof path);
    struct moeinf_trace_meta meta = {2, 4, 2, "m"};
    struct moeinf_trace_writer *w = NULL;
    struct moeinf_error err;
    CHECK_EQ_INT(moeinf_trace_writer_open(path, &meta, &w, &err), MOEINF_OK);
    if (!w) return;
    int32_t ok[4] = {0, 1, 2, 3};
    int32_t dup[4] = {1, 1, 2, 3};
    int32_t range[4] = {0, 4, 2, 3};
    CHECK_EQ_INT(moeinf_trace_writer_token(w, MOEINF_PHASE_PREFILL, ok, &err), MOEINF_ERR_ARG);
    CHECK_EQ_INT(moeinf_trace_writer_header(w, "n_layers", "3", &err), MOEINF_ERR_ARG);
    CHECK_EQ_INT(moeinf_trace_writer_header(w, "Bad Key", "3", &err), MOEINF_ERR_ARG);
    CHECK_EQ_INT(moeinf_trace_writer_header(w, "note", "two\nlines", &err), MOEINF_ERR_ARG);
    CHECK_EQ_INT(moeinf_trace_writer_request(w, 5, "has space", &err), MOEINF_ERR_ARG);
    CHECK_EQ_INT(moeinf_trace_writer_request(w, 5, NULL, &err), MOEINF_OK);
    CHECK_EQ_INT(moeinf_trace_writer_token(w, MOEINF_PHASE_PREFILL, dup, &err), MOEINF_ERR_ARG);
    CHECK_EQ_INT(moeinf_trace_writer_token(w, MOEINF_PHASE_PREFILL, range, &err), MOEINF_ERR_ARG);
    CHECK_EQ_INT(moeinf_trace_writer_token(w, MOEINF_PHASE_DECODE, ok, &err), MOEINF_OK);
    CHECK_EQ_INT(moeinf_trace_writer_token(w, MOEINF_PHASE_PREFILL, ok, &err), MOEINF_ERR_ARG);
    CHECK_EQ_INT(moeinf_trace_writer_request(w, 5, "x", &err), MOEINF_ERR_ARG);
    CHECK_EQ_INT(moeinf_trace_writer_request(w, 6, "x", &err), MOEINF_OK);
    CHECK_EQ_INT(moeinf_trace_writer_close(w, &err), MOEINF_OK);
    /* what was accepted reads back: request 5 with one D token, request 6 empty */
    enum moeinf_trace_defect d;
    int n = 0;
    CHECK_EQ_INT(read_all(path, &d, &err, &n), MOEINF_OK);
    CHECK_EQ_INT(n, 1);
    moeinf_trace_writer_abort(NULL);
    struct moeinf_trace_meta bad = {2, 4, 5, NULL};
    CHECK_EQ_INT(moeinf_trace_writer_open(path, &bad, &w, &err), MOEINF_ERR_ARG);
}

static void test_shared_traces_read(void) {
    char path[1024];
    if (!test_shared_path("traces/llama4_maverick_mmlu.txt", path, sizeof path)) return;
    struct moeinf_error err;
    enum moeinf_trace_defect d;
    int n = 0;
    CHECK_EQ_INT(read_all(path, &d, &err, &n), MOEINF_OK);
    CHECK_EQ_INT(n, 37296); /* README table */
}

int main(void) {
    RUN(test_good_trace_reads_back);
    RUN(test_tolerated_variants);
    RUN(test_header_defects);
    RUN(test_token_defects);
    RUN(test_order_and_count_defects);
    RUN(test_overlong_and_nul);
    RUN(test_round_trip);
    RUN(test_writer_rejects_bad_input);
    RUN(test_shared_traces_read);
    return test_report();
}
