/*
 * test_trace_tools.c - the trace tools (moeinf_sim.h "trace tools", `moeinf trace`) on a small
 * hand-made trace whose EAMs, skew, reuse and similarity are worked out by hand below;
 * filter/concat round trips re-read with the trace reader; the CLI's exit codes and output;
 * a smoke run on the shared real traces.
 */
#include <stdbool.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "app/svg.h"
#include "test.h"
#include "trace/trace.h"
#include "trace/trace_tools.h"

#define L 2
#define E 6
#define K 2

/*
 * Three requests (ids 3, 5, 9), L = 2 layers, E = 6 experts, top-2. Token lines t1..t7:
 *   t1 3 P  L0 {0,1}  L1 {2,3}
 *   t2 3 P  L0 {0,2}  L1 {2,4}
 *   t3 3 D  L0 {0,3}  L1 {2,0}
 *   t4 3 D  L0 {0,4}  L1 {2,3}
 *   t5 5 P  L0 {1,2}  L1 {3,0}
 *   t6 9 P  L0 {0,1}  L1 {2,3}
 *   t7 9 D  L0 {0,1}  L1 {3,2}
 */
static const char *const small_trace = "# moe-trace v1\n"
                                       "# model: tiny test (hand-made)\n"
                                       "# n_layers: 2\n"
                                       "# n_experts: 6\n"
                                       "# top_k: 2\n"
                                       "# source_repo: example/repo\n"
                                       "# split: test\n"
                                       "# n_requests: 3\n"
                                       "# req 3 mmlu/a/0 prefill=2 decode=2\n"
                                       "# req 5 mmlu/b/1 prefill=1 decode=0\n"
                                       "# req 9 puffin/2 prefill=1 decode=1\n"
                                       "3 P 0 0,1|2,3\n"
                                       "3 P 1 0,2|2,4\n"
                                       "3 D 2 0,3|2,0\n"
                                       "3 D 3 0,4|2,3\n"
                                       "5 P 0 1,2|3,0\n"
                                       "9 P 0 0,1|2,3\n"
                                       "9 D 1 0,1|3,2\n";

/* The token lines above as arrays: [token][layer][j]. */
static const int32_t small_tokens[7][L][K] = {
    {{0, 1}, {2, 3}}, {{0, 2}, {2, 4}}, {{0, 3}, {2, 0}}, {{0, 4}, {2, 3}},
    {{1, 2}, {3, 0}}, {{0, 1}, {2, 3}}, {{0, 1}, {3, 2}},
};

/* Request 3's EAMs, counted by hand from t1..t4: [layer][expert]. */
static const uint32_t r3_prefill[L][E] = {{2, 1, 1, 0, 0, 0}, {0, 0, 2, 1, 1, 0}};
static const uint32_t r3_decode[L][E] = {{2, 0, 0, 1, 1, 0}, {1, 0, 2, 1, 0, 0}};

static const char *write_file(const char *name, const char *text) {
    static char paths[8][512];
    static int next;
    char *buf = paths[next++ % 8];
    test_tmp_path(name, buf, sizeof paths[0]);
    FILE *f = fopen(buf, "wb");
    if (!f) return buf;
    fputs(text, f);
    fclose(f);
    return buf;
}

static const char *small_path(void) {
    return write_file("tt_small.txt", small_trace);
}

static char *slurp(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *s = malloc((size_t)n + 1);
    size_t got = fread(s, 1, (size_t)n, f);
    s[got] = '\0';
    fclose(f);
    return s;
}

static int count_substr(const char *hay, const char *needle) {
    int n = 0;
    for (const char *p = hay; (p = strstr(p, needle)); p += strlen(needle))
        n++;
    return n;
}

/* ---- measures ----------------------------------------------------------------------------- */

static double gini_by_definition(const double *x, int n) {
    double num = 0;
    double sum = 0;
    for (int i = 0; i < n; i++) {
        sum += x[i];
        for (int j = 0; j < n; j++)
            num += fabs(x[i] - x[j]);
    }
    return num / (2.0 * n * sum);
}

static void test_gini_and_top_sum(void) {
    uint64_t even[4] = {3, 3, 3, 3};
    CHECK_NEAR(moeinf_trace_gini(even, 4), 0.0, 1e-12);
    uint64_t one[4] = {0, 7, 0, 0};
    CHECK_NEAR(moeinf_trace_gini(one, 4), 0.75, 1e-12); /* (n-1)/n */
    uint64_t zero[3] = {0, 0, 0};
    CHECK(isnan(moeinf_trace_gini(zero, 3)));
    uint64_t v[6] = {6, 4, 2, 1, 1, 0};
    const double vd[6] = {6, 4, 2, 1, 1, 0};
    CHECK_NEAR(moeinf_trace_gini(v, 6), gini_by_definition(vd, 6), 1e-12);
    uint64_t w[7] = {5, 1, 9, 3, 9, 0, 2};
    CHECK_EQ_INT(moeinf_trace_top_sum(w, 7, 1), 9);
    uint64_t w2[7] = {5, 1, 9, 3, 9, 0, 2};
    CHECK_EQ_INT(moeinf_trace_top_sum(w2, 7, 3), 23);
    uint64_t w3[3] = {5, 1, 9};
    CHECK_EQ_INT(moeinf_trace_top_sum(w3, 3, 4), 15); /* k > n: all */
}

static void test_uniform_skew(void) {
    struct moeinf_trace_skew s;
    struct moeinf_error err;
    /* one token, top-2: both chosen experts count 1, so top-1 = 1/2 and top-4 = 2/2 exactly */
    CHECK_EQ_INT(moeinf_trace_uniform_skew(6, 2, 1, 1024, &s, &err), MOEINF_OK);
    CHECK_NEAR(s.uniform_top1_share, 0.5, 1e-12);
    CHECK_NEAR(s.uniform_top4_share, 1.0, 1e-12);
    CHECK_NEAR(s.uniform_distinct, 2.0, 1e-12);
    /* two tokens, top-2 of 6: brute force over all 15 x 15 pairs of expert sets */
    int sets[15][2];
    int n = 0;
    for (int a = 0; a < 6; a++)
        for (int b = a + 1; b < 6; b++) {
            sets[n][0] = a;
            sets[n][1] = b;
            n++;
        }
    double top1 = 0;
    double distinct = 0;
    for (int i = 0; i < 15; i++) {
        for (int j = 0; j < 15; j++) {
            int c[6] = {0};
            c[sets[i][0]]++;
            c[sets[i][1]]++;
            c[sets[j][0]]++;
            c[sets[j][1]]++;
            int mx = 0;
            int d = 0;
            for (int e = 0; e < 6; e++) {
                mx = c[e] > mx ? c[e] : mx;
                d += c[e] > 0;
            }
            top1 += mx / 4.0;
            distinct += d;
        }
    }
    CHECK_EQ_INT(moeinf_trace_uniform_skew(6, 2, 2, 1024, &s, &err), MOEINF_OK);
    CHECK_NEAR(s.uniform_top1_share, top1 / 225, 0.02); /* 0.4; Monte Carlo sd ~0.004 */
    CHECK_NEAR(s.uniform_distinct, distinct / 225, 1e-9);
    /* 128 experts, top-1, 128 tokens: E (1 - (1 - 1/E)^T) */
    CHECK_EQ_INT(moeinf_trace_uniform_skew(128, 1, 128, 64, &s, &err), MOEINF_OK);
    CHECK_NEAR(s.uniform_distinct, 128 * (1 - pow(127.0 / 128, 128)), 1e-9);
    CHECK(s.uniform_top1_share > 4.0 / 128 && s.uniform_top1_share < 8.0 / 128);
}

static void test_colors(void) {
    char c[8];
    moeinf_trace_color(0, 5, c);
    CHECK(!strcmp(c, "#ffffff"));
    moeinf_trace_color(5, 5, c);
    CHECK(!strcmp(c, "#08306b"));
    moeinf_trace_color(1, 5, c);
    CHECK(!strcmp(c, "#c6dbef"));
    moeinf_trace_color(1, 1, c); /* a scale of one value: the darkest */
    CHECK(!strcmp(c, "#08306b"));
    /* darker (lower luma) as the count grows */
    double prev = 1e9;
    for (uint32_t v = 1; v <= 100; v++) {
        moeinf_trace_color(v, 100, c);
        char *end = NULL;
        unsigned long rgb = strtoul(c + 1, &end, 16);
        CHECK(c[0] == '#' && end == c + 7 && *end == '\0');
        double r = (double)(rgb >> 16);
        double g = (double)((rgb >> 8) & 0xff);
        double b = (double)(rgb & 0xff);
        double luma = 0.2126 * r + 0.7152 * g + 0.0722 * b;
        CHECK_MSG(luma <= prev, "count %u: %s", v, c);
        prev = luma;
    }
}

/* XML's five reserved characters become entities; other bytes (UTF-8 included) pass. */
static void test_xml_text(void) {
    char *text = NULL;
    size_t size = 0;
    FILE *f = open_memstream(&text, &size);
    CHECK(f != NULL);
    if (!f) return;
    moeinf_xml_text(f, "a&b<c>d\"e'f \xc3\xa9 &amp;");
    moeinf_xml_text(f, "");
    CHECK(fclose(f) == 0);
    CHECK(text && !strcmp(text, "a&amp;b&lt;c&gt;d&quot;e&apos;f \xc3\xa9 &amp;amp;"));
    free(text);
}

/* ---- one request's EAM -------------------------------------------------------------------- */

static void test_eam_load(void) {
    struct moeinf_trace_eam *m = NULL;
    struct moeinf_error err;
    const char *path = small_path();
    CHECK_EQ_INT(moeinf_trace_eam_load(path, 3, -1, &m, &err), MOEINF_OK);
    if (!m) return;
    CHECK_EQ_INT(m->request_id, 3);
    CHECK_EQ_INT(m->index, 0);
    CHECK(!strcmp(m->tag, "mmlu/a/0"));
    CHECK(!strcmp(m->model, "tiny test (hand-made)"));
    CHECK_EQ_INT(m->n_tokens[0], 2);
    CHECK_EQ_INT(m->n_tokens[1], 2);
    for (int l = 0; l < L; l++) {
        for (int e = 0; e < E; e++) {
            CHECK_EQ_INT(moeinf_trace_eam_count(m, MOEINF_PHASE_PREFILL, l, e), r3_prefill[l][e]);
            CHECK_EQ_INT(moeinf_trace_eam_count(m, MOEINF_PHASE_DECODE, l, e), r3_decode[l][e]);
            CHECK_EQ_INT(moeinf_trace_eam_count(m, MOEINF_PHASE_ALL, l, e),
                         r3_prefill[l][e] + r3_decode[l][e]);
        }
    }
    moeinf_trace_eam_free(m);
    m = NULL;
    /* by position: index 2 is request 9 */
    CHECK_EQ_INT(moeinf_trace_eam_load(path, -1, 2, &m, &err), MOEINF_OK);
    if (m) {
        CHECK_EQ_INT(m->request_id, 9);
        CHECK(!strcmp(m->tag, "puffin/2"));
        CHECK_EQ_INT(moeinf_trace_eam_count(m, MOEINF_PHASE_ALL, 0, 0), 2);
        CHECK_EQ_INT(moeinf_trace_eam_count(m, MOEINF_PHASE_DECODE, 1, 3), 1);
    }
    moeinf_trace_eam_free(m);
    m = NULL;
    CHECK_EQ_INT(moeinf_trace_eam_load(path, 4, -1, &m, &err), MOEINF_ERR_ARG);
    CHECK_STR_CONTAINS(err.msg, "no request with id 4");
    CHECK_EQ_INT(moeinf_trace_eam_load(path, 10, -1, &m, &err), MOEINF_ERR_ARG);
    CHECK_EQ_INT(moeinf_trace_eam_load(path, -1, 3, &m, &err), MOEINF_ERR_ARG);
    CHECK_STR_CONTAINS(err.msg, "the trace has 3 requests");
    CHECK(m == NULL);
    /* a defect in the part read is the reader's named error */
    const char *bad = write_file("tt_bad.txt", "# moe-trace v1\n# n_layers: 2\n# n_experts: 6\n"
                                               "# top_k: 2\n0 P 0 0,1|2,9\n");
    CHECK_EQ_INT(moeinf_trace_eam_load(bad, 0, -1, &m, &err), MOEINF_ERR_FORMAT);
    CHECK_STR_CONTAINS(err.msg, "expert id out of range");
    moeinf_trace_eam_free(NULL);
}

static void test_eam_skew(void) {
    struct moeinf_trace_eam *m = NULL;
    struct moeinf_error err;
    CHECK_EQ_INT(moeinf_trace_eam_load(small_path(), 3, -1, &m, &err), MOEINF_OK);
    if (!m) return;
    struct moeinf_trace_skew s;
    /* prefill: L0 {2,1,1}, L1 {2,1,1} of 4 routings each */
    CHECK_EQ_INT(moeinf_trace_eam_skew(m, MOEINF_PHASE_PREFILL, -1, &s, &err), MOEINF_OK);
    CHECK_EQ_INT(s.tokens, 2);
    CHECK_EQ_INT(s.accesses, 4);
    CHECK_NEAR(s.top1_share, 0.5, 1e-12);
    CHECK_NEAR(s.top4_share, 1.0, 1e-12);
    CHECK_NEAR(s.distinct, 3.0, 1e-12);
    CHECK_NEAR(s.uniform_distinct, 6 * (1 - pow(4.0 / 6, 2)), 1e-9);
    /* all: L0 {4,1,1,1,1} -> top-1 4/8, top-4 7/8, 5 distinct; L1 {1,0,4,2,1} -> 4/8, 8/8, 4 */
    CHECK_EQ_INT(moeinf_trace_eam_skew(m, MOEINF_PHASE_ALL, -1, &s, &err), MOEINF_OK);
    CHECK_EQ_INT(s.tokens, 4);
    CHECK_EQ_INT(s.accesses, 8);
    CHECK_NEAR(s.top1_share, 0.5, 1e-12);
    CHECK_NEAR(s.top4_share, (7.0 / 8 + 1.0) / 2, 1e-12);
    CHECK_NEAR(s.distinct, 4.5, 1e-12);
    CHECK_NEAR(s.distinct_min, 4, 1e-12);
    CHECK_NEAR(s.distinct_max, 5, 1e-12);
    CHECK_NEAR(s.uniform_distinct, 6 * (1 - pow(4.0 / 6, 4)), 1e-9);
    CHECK_EQ_INT(moeinf_trace_eam_skew(m, MOEINF_PHASE_ALL, 0, &s, &err), MOEINF_OK);
    CHECK_NEAR(s.top4_share, 7.0 / 8, 1e-12);
    CHECK_NEAR(s.distinct, 5, 1e-12);
    CHECK_EQ_INT(moeinf_trace_eam_skew(m, MOEINF_PHASE_ALL, 2, &s, &err), MOEINF_ERR_ARG);
    moeinf_trace_eam_free(m);
    /* request 5 has no decode token: everything 0 */
    m = NULL;
    CHECK_EQ_INT(moeinf_trace_eam_load(small_path(), 5, -1, &m, &err), MOEINF_OK);
    if (!m) return;
    CHECK_EQ_INT(moeinf_trace_eam_skew(m, MOEINF_PHASE_DECODE, -1, &s, &err), MOEINF_OK);
    CHECK_EQ_INT(s.tokens, 0);
    CHECK_NEAR(s.top1_share, 0, 0);
    moeinf_trace_eam_free(m);
}

/* The <rect>s inside the <g class="cells"> groups of an SVG. */
static int cell_rects(const char *svg, int *white) {
    int n = 0;
    *white = 0;
    for (const char *g = svg; (g = strstr(g, "<g class=\"cells\""));) {
        const char *end = strstr(g, "</g>");
        if (!end) break;
        for (const char *p = g; (p = strstr(p, "<rect ")) && p < end; p++) {
            n++;
            const char *close = strchr(p, '>');
            const char *fill = strstr(p, "fill=\"#ffffff\"");
            if (fill && fill < close) (*white)++;
        }
        g = end;
    }
    return n;
}

static void test_eam_svg(void) {
    struct moeinf_trace_eam *m = NULL;
    struct moeinf_error err;
    CHECK_EQ_INT(moeinf_trace_eam_load(small_path(), 3, -1, &m, &err), MOEINF_OK);
    if (!m) return;
    char path[512];
    test_tmp_path("tt_heatmap.svg", path, sizeof path);
    CHECK_EQ_INT(moeinf_trace_eam_svg(m, MOEINF_PHASE_ALL, "small<&>'\"", path, &err), MOEINF_OK);
    char *svg = slurp(path);
    CHECK(svg != NULL);
    if (svg) {
        int white = 0;
        CHECK_EQ_INT(cell_rects(svg, &white), 2 * L * E); /* two panels */
        int zeros = 0;
        for (int l = 0; l < L; l++) {
            for (int e = 0; e < E; e++) {
                zeros += (r3_prefill[l][e] == 0) + (r3_decode[l][e] == 0);
            }
        }
        CHECK_EQ_INT(white, zeros);
        /* one scale for both panels, max 2: a 2 is the darkest, a 1 the lightest blue */
        for (int l = 0; l < L; l++) {
            for (int e = 0; e < E; e++) {
                const uint32_t *counts[2] = {r3_prefill[l], r3_decode[l]};
                for (int p = 0; p < 2; p++) {
                    uint32_t c = counts[p][e];
                    if (!c) continue;
                    char want[128];
                    snprintf(want, sizeof want, "fill=\"%s\"><title>layer %d, expert %d: %u<",
                             c == 2 ? "#08306b" : "#c6dbef", l, e, c);
                    CHECK_MSG(count_substr(svg, want) >= 1, "missing %s", want);
                }
            }
        }
        CHECK_STR_CONTAINS(svg, "small&lt;&amp;&gt;&apos;&quot;: request 3 (mmlu/a/0)");
        CHECK_STR_CONTAINS(svg, ">prefill</text>");
        CHECK_STR_CONTAINS(svg, ">decode</text>");
        CHECK(strstr(svg, "</svg>\n") != NULL);
        free(svg);
    }
    /* one phase: one panel of L x E cells */
    CHECK_EQ_INT(moeinf_trace_eam_svg(m, MOEINF_PHASE_DECODE, NULL, path, &err), MOEINF_OK);
    svg = slurp(path);
    if (svg) {
        int white = 0;
        CHECK_EQ_INT(cell_rects(svg, &white), L * E);
        CHECK_EQ_INT(white, 6);
        CHECK(strstr(svg, ">prefill</text>") == NULL);
        free(svg);
    }
    CHECK_EQ_INT(moeinf_trace_eam_svg(m, MOEINF_PHASE_ALL, NULL, "/nonexistent/dir/x.svg", &err),
                 MOEINF_ERR_IO);
    moeinf_trace_eam_free(m);
}

/* ---- filter and concat -------------------------------------------------------------------- */

struct read_back {
    int n_requests;
    int64_t ids[16];
    char tags[16][32];
    int n_tokens;
    int32_t experts[32][L * K];
    enum moeinf_phase phases[32];
    struct moeinf_trace_header hdr;
};

/* Reads a whole trace with the reader (which checks the header's totals at the end). */
static enum moeinf_status read_back(const char *path, struct read_back *rb) {
    memset(rb, 0, sizeof *rb);
    struct moeinf_trace_reader *r = NULL;
    struct moeinf_error err;
    enum moeinf_status st = moeinf_trace_open(path, &r, &err);
    if (st != MOEINF_OK) {
        fprintf(stderr, "%s\n", err.msg);
        return st;
    }
    rb->hdr = *moeinf_trace_header(r);
    for (;;) {
        struct moeinf_trace_token tok;
        bool end = false;
        st = moeinf_trace_read(r, &tok, &end, &err);
        if (st != MOEINF_OK) fprintf(stderr, "%s\n", err.msg);
        if (st != MOEINF_OK || end) break;
        if (tok.request_begins && rb->n_requests < 16) {
            rb->ids[rb->n_requests] = tok.request_id;
            snprintf(rb->tags[rb->n_requests], 32, "%s", tok.request_tag ? tok.request_tag : "");
            rb->n_requests++;
        }
        if (rb->n_tokens < 32) {
            memcpy(rb->experts[rb->n_tokens], tok.experts, sizeof rb->experts[0]);
            rb->phases[rb->n_tokens] = tok.phase;
        }
        rb->n_tokens++;
    }
    moeinf_trace_close(r);
    return st;
}

/* The output's token n is the small trace's token `orig` (0-based t1..t7). */
static bool same_token(const struct read_back *rb, int n, int orig) {
    return !memcmp(rb->experts[n], small_tokens[orig], sizeof rb->experts[0]);
}

static void test_filter(void) {
    const char *in = small_path();
    char out[512];
    test_tmp_path("tt_filtered.txt", out, sizeof out);
    struct moeinf_error err;
    struct moeinf_trace_copy_result res;
    struct read_back rb;

    struct moeinf_trace_filter_params p = moeinf_trace_filter_params_default();
    const char *mmlu[] = {"mmlu/"};
    p.tag_prefixes = mmlu;
    p.n_tag_prefixes = 1;
    p.note = "test filter";
    CHECK_EQ_INT(moeinf_trace_filter(in, out, &p, &res, &err), MOEINF_OK);
    CHECK_EQ_INT(res.n_requests, 2);
    CHECK_EQ_INT(res.n_tokens[0], 3);
    CHECK_EQ_INT(res.n_tokens[1], 2);
    CHECK_EQ_INT(read_back(out, &rb), MOEINF_OK);
    CHECK_EQ_INT(rb.n_requests, 2);
    CHECK_EQ_INT(rb.ids[0], 3);
    CHECK_EQ_INT(rb.ids[1], 5);
    CHECK(!strcmp(rb.tags[1], "mmlu/b/1"));
    CHECK_EQ_INT(rb.n_tokens, 5);
    for (int t = 0; t < 5; t++)
        CHECK(same_token(&rb, t, t));
    CHECK_EQ_INT(rb.phases[2], MOEINF_PHASE_DECODE);
    CHECK_EQ_INT(rb.hdr.n_requests, 2);
    CHECK_EQ_INT(rb.hdr.n_tokens, 5);
    CHECK_EQ_INT(rb.hdr.n_prefill_tokens, 3);
    CHECK_EQ_INT(rb.hdr.n_decode_tokens, 2);
    CHECK_EQ_INT(rb.hdr.n_layers, L);
    CHECK_EQ_INT(rb.hdr.n_experts, E);
    CHECK_EQ_INT(rb.hdr.top_k, K);
    char *text = slurp(out);
    CHECK_STR_CONTAINS(text, "# model: tiny test (hand-made)\n");
    CHECK_STR_CONTAINS(text, "# source_repo: example/repo\n# split: test\n");
    CHECK_STR_CONTAINS(text, "# derived: test filter\n");
    CHECK_EQ_INT(count_substr(text, "# n_requests:"), 1);
    free(text);

    /* a filter of the filtered trace chains the derivations */
    char out2[512];
    test_tmp_path("tt_filtered2.txt", out2, sizeof out2);
    struct moeinf_trace_filter_params p2 = moeinf_trace_filter_params_default();
    p2.first = 1;
    p2.note = "second";
    CHECK_EQ_INT(moeinf_trace_filter(out, out2, &p2, &res, &err), MOEINF_OK);
    CHECK_EQ_INT(res.n_requests, 1);
    text = slurp(out2);
    CHECK_STR_CONTAINS(text, "# derived: test filter; then second\n");
    free(text);
    CHECK_EQ_INT(read_back(out2, &rb), MOEINF_OK);
    CHECK_EQ_INT(rb.ids[0], 3);
    CHECK_EQ_INT(rb.n_tokens, 4);

    /* NOLINTNEXTLINE(clang-analyzer-optin.performance.Padding): a small table, read as written */
    static const struct {
        int64_t id_min, id_max, index_min, index_max, every, first;
        int n_prefixes;
        const char *prefixes[2];
        int n_kept;
        int64_t kept[3];
    } cases[] = {
        {5, 9, 0, INT64_MAX, 1, 0, 0, {NULL, NULL}, 2, {5, 9}},
        {0, 4, 0, INT64_MAX, 1, 0, 0, {NULL, NULL}, 1, {3}},
        {0, INT64_MAX, 1, 2, 1, 0, 0, {NULL, NULL}, 2, {5, 9}},
        {0, INT64_MAX, 0, 0, 1, 0, 0, {NULL, NULL}, 1, {3}},
        {0, INT64_MAX, 0, INT64_MAX, 2, 0, 0, {NULL, NULL}, 2, {3, 9}},
        {0, INT64_MAX, 0, INT64_MAX, 1, 2, 0, {NULL, NULL}, 2, {3, 5}},
        {0, INT64_MAX, 0, INT64_MAX, 1, 0, 2, {"puffin/", "mmlu/b"}, 2, {5, 9}},
        /* every applies to the requests that pass the other tests */
        {0, INT64_MAX, 1, INT64_MAX, 2, 0, 0, {NULL, NULL}, 1, {5}},
        {5, INT64_MAX, 0, INT64_MAX, 1, 1, 1, {"puffin/", NULL}, 1, {9}},
    };

    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        struct moeinf_trace_filter_params q = moeinf_trace_filter_params_default();
        q.id_min = cases[c].id_min;
        q.id_max = cases[c].id_max;
        q.index_min = cases[c].index_min;
        q.index_max = cases[c].index_max;
        q.every = cases[c].every;
        q.first = cases[c].first;
        q.tag_prefixes = cases[c].prefixes;
        q.n_tag_prefixes = cases[c].n_prefixes;
        CHECK_MSG(moeinf_trace_filter(in, out, &q, &res, &err) == MOEINF_OK, "case %zu: %s", c,
                  err.msg);
        CHECK_MSG(read_back(out, &rb) == MOEINF_OK, "case %zu", c);
        CHECK_MSG(rb.n_requests == cases[c].n_kept, "case %zu: %d requests", c, rb.n_requests);
        for (int i = 0; i < cases[c].n_kept && i < rb.n_requests; i++) {
            CHECK_MSG(rb.ids[i] == cases[c].kept[i], "case %zu: request %d is %lld", c, i,
                      (long long)rb.ids[i]);
        }
        CHECK_EQ_INT(res.n_requests, rb.n_requests);
    }

    /* nothing kept: an argument error, and no file */
    char none[512];
    test_tmp_path("tt_none.txt", none, sizeof none);
    remove(none);
    const char *nope[] = {"nope/"};
    struct moeinf_trace_filter_params q = moeinf_trace_filter_params_default();
    q.tag_prefixes = nope;
    q.n_tag_prefixes = 1;
    CHECK_EQ_INT(moeinf_trace_filter(in, none, &q, &res, &err), MOEINF_ERR_ARG);
    CHECK_STR_CONTAINS(err.msg, "no request passes the filter");
    CHECK(access(none, F_OK) != 0);
    q = moeinf_trace_filter_params_default();
    q.every = 0;
    CHECK_EQ_INT(moeinf_trace_filter(in, none, &q, &res, &err), MOEINF_ERR_ARG);
    q = moeinf_trace_filter_params_default();
    CHECK_EQ_INT(moeinf_trace_filter("/nonexistent/t.txt", none, &q, &res, &err), MOEINF_ERR_IO);
}

static void test_concat(void) {
    const char *in = small_path();
    char mmlu[512];
    char puffin[512];
    char out[512];
    test_tmp_path("tt_mmlu.txt", mmlu, sizeof mmlu);
    test_tmp_path("tt_puffin.txt", puffin, sizeof puffin);
    test_tmp_path("tt_concat.txt", out, sizeof out);
    struct moeinf_error err;
    struct moeinf_trace_copy_result res;
    struct read_back rb;
    struct moeinf_trace_filter_params p = moeinf_trace_filter_params_default();
    const char *pm[] = {"mmlu/"};
    const char *pp[] = {"puffin/"};
    p.tag_prefixes = pm;
    p.n_tag_prefixes = 1;
    CHECK_EQ_INT(moeinf_trace_filter(in, mmlu, &p, &res, &err), MOEINF_OK);
    p.tag_prefixes = pp;
    CHECK_EQ_INT(moeinf_trace_filter(in, puffin, &p, &res, &err), MOEINF_OK);

    /* already increasing (3, 5 then 9): ids kept, and the round trip gives the original */
    const char *ab[] = {mmlu, puffin};
    CHECK_EQ_INT(moeinf_trace_concat(ab, 2, out, "test concat", &res, &err), MOEINF_OK);
    CHECK_EQ_INT(res.n_shifted, 0);
    CHECK_EQ_INT(res.n_requests, 3);
    CHECK_EQ_INT(read_back(out, &rb), MOEINF_OK);
    CHECK_EQ_INT(rb.n_requests, 3);
    CHECK_EQ_INT(rb.ids[0], 3);
    CHECK_EQ_INT(rb.ids[2], 9);
    CHECK_EQ_INT(rb.n_tokens, 7);
    for (int t = 0; t < 7; t++)
        CHECK(same_token(&rb, t, t));
    CHECK_EQ_INT(rb.hdr.n_prefill_tokens, 4);
    CHECK_EQ_INT(rb.hdr.n_decode_tokens, 3);

    /* puffin (9) then mmlu (3, 5): the second input is shifted to 10, 12 */
    const char *ba[] = {puffin, mmlu};
    CHECK_EQ_INT(moeinf_trace_concat(ba, 2, out, NULL, &res, &err), MOEINF_OK);
    CHECK_EQ_INT(res.n_shifted, 1);
    CHECK_EQ_INT(read_back(out, &rb), MOEINF_OK);
    CHECK_EQ_INT(rb.n_requests, 3);
    CHECK_EQ_INT(rb.ids[0], 9);
    CHECK_EQ_INT(rb.ids[1], 10);
    CHECK_EQ_INT(rb.ids[2], 12);
    CHECK(!strcmp(rb.tags[0], "puffin/2"));
    CHECK(!strcmp(rb.tags[1], "mmlu/a/0"));
    CHECK(same_token(&rb, 0, 5) && same_token(&rb, 1, 6) && same_token(&rb, 2, 0) &&
          same_token(&rb, 6, 4));

    /* the same trace twice: 3 5 9, then 10 12 16 */
    const char *aa[] = {in, in};
    CHECK_EQ_INT(moeinf_trace_concat(aa, 2, out, NULL, &res, &err), MOEINF_OK);
    CHECK_EQ_INT(read_back(out, &rb), MOEINF_OK);
    CHECK_EQ_INT(rb.n_requests, 6);
    CHECK_EQ_INT(rb.ids[3], 10);
    CHECK_EQ_INT(rb.ids[5], 16);
    CHECK_EQ_INT(rb.n_tokens, 14);
    CHECK_EQ_INT(rb.hdr.n_tokens, 14);
    char *text = slurp(out);
    CHECK_STR_CONTAINS(text, "# source_repo: example/repo\n");
    free(text);

    /* geometry mismatch: named error, nothing written */
    const char *other = write_file("tt_other.txt", "# moe-trace v1\n# n_layers: 2\n"
                                                   "# n_experts: 4\n# top_k: 2\n0 P 0 0,1|2,3\n");
    char none[512];
    test_tmp_path("tt_concat_none.txt", none, sizeof none);
    remove(none);
    const char *mix[] = {in, other};
    CHECK_EQ_INT(moeinf_trace_concat(mix, 2, none, NULL, &res, &err), MOEINF_ERR_FORMAT);
    CHECK_STR_CONTAINS(err.msg, "geometry mismatch");
    CHECK_STR_CONTAINS(err.msg, other);
    CHECK(access(none, F_OK) != 0);
    CHECK_EQ_INT(moeinf_trace_concat(mix, 0, none, NULL, &res, &err), MOEINF_ERR_ARG);
    /* shifting past the format's 18-digit ids is refused */
    const char *big = write_file("tt_big.txt", "# moe-trace v1\n# n_layers: 2\n# n_experts: 6\n"
                                               "# top_k: 2\n999999999999999998 P 0 0,1|2,3\n"
                                               "999999999999999999 P 0 0,1|2,3\n");
    const char *bb[] = {big, big};
    CHECK_EQ_INT(moeinf_trace_concat(bb, 2, none, NULL, &res, &err), MOEINF_ERR_ARG);
    CHECK_STR_CONTAINS(err.msg, "18 digits");
    CHECK(access(none, F_OK) != 0);
    CHECK_EQ_INT(moeinf_trace_concat(bb, 1, none, NULL, &res, &err), MOEINF_OK);
    remove(none);
}

/* ---- statistics --------------------------------------------------------------------------- */

static double cosine(const double *a, const double *b, int n) {
    double ab = 0;
    double aa = 0;
    double bb = 0;
    for (int i = 0; i < n; i++) {
        ab += a[i] * b[i];
        aa += a[i] * a[i];
        bb += b[i] * b[i];
    }
    return ab / sqrt(aa * bb);
}

static void check_spread(const struct moeinf_trace_spread *s, double l0, double l1) {
    CHECK_NEAR(s->mean, (l0 + l1) / 2, 1e-9);
    CHECK_NEAR(s->min, fmin(l0, l1), 1e-9);
    CHECK_NEAR(s->max, fmax(l0, l1), 1e-9);
}

static void test_stats(void) {
    struct moeinf_trace_stats s;
    struct moeinf_error err;
    CHECK_EQ_INT(moeinf_trace_stats(small_path(), &s, &err), MOEINF_OK);
    CHECK_EQ_INT(s.n_requests, 3);
    CHECK_EQ_INT(s.n_tokens[0], 4);
    CHECK_EQ_INT(s.n_tokens[1], 3);
    CHECK_EQ_INT(s.n_tokens[2], 7);
    CHECK_EQ_INT(s.accesses[0], 16);
    CHECK_EQ_INT(s.accesses[1], 12);
    CHECK_EQ_INT(s.accesses[2], 28);
    CHECK(!strcmp(s.model, "tiny test (hand-made)"));

    /* expert frequencies over the trace, counted by hand from t1..t7 */
    static const double freq[3][L][E] = {
        {{3, 3, 2, 0, 0, 0}, {1, 0, 3, 3, 1, 0}}, /* prefill: t1 t2 t5 t6 */
        {{3, 1, 0, 1, 1, 0}, {1, 0, 3, 2, 0, 0}}, /* decode: t3 t4 t7 */
        {{6, 4, 2, 1, 1, 0}, {2, 0, 6, 5, 1, 0}}, /* all */
    };
    CHECK_EQ_INT(s.top_share_experts, 1); /* ceil(6 / 10) */
    for (int p = 0; p < 3; p++) {
        check_spread(&s.gini[p], gini_by_definition(freq[p][0], E),
                     gini_by_definition(freq[p][1], E));
    }
    check_spread(&s.top_share[0], 3.0 / 8, 3.0 / 8);
    check_spread(&s.top_share[1], 3.0 / 6, 3.0 / 6);
    check_spread(&s.top_share[2], 6.0 / 14, 6.0 / 14);

    /* reuse: t2 reuses L0 0 and L1 2; t3 reuses 0 and 2; t4 reuses 0, 2 and 3 (from t1);
     * t7 reuses all four of t6's */
    CHECK_EQ_INT(s.reused[0], 2);
    CHECK_EQ_INT(s.reused[1], 2 + 3 + 4);
    CHECK_EQ_INT(s.reused[2], 11);
    /* distinct experts of L x E = 12: request 3 uses 6 / 6 / 9 (prefill / decode / all),
     * request 5 4 / - / 4, request 9 4 / 4 / 4 */
    CHECK_NEAR(s.distinct_share[0], (6.0 + 4 + 4) / 12 / 3, 1e-9);
    CHECK_NEAR(s.distinct_share[1], (6.0 + 4) / 12 / 2, 1e-9);
    CHECK_NEAR(s.distinct_share[2], (9.0 + 4 + 4) / 12 / 3, 1e-9);

    /* similarity of the flattened EAMs (L0 e0..e5, L1 e0..e5) */
    static const double r3[3][12] = {
        {2, 1, 1, 0, 0, 0, 0, 0, 2, 1, 1, 0},
        {2, 0, 0, 1, 1, 0, 1, 0, 2, 1, 0, 0},
        {4, 1, 1, 1, 1, 0, 1, 0, 4, 2, 1, 0},
    };
    static const double r5[12] = {0, 1, 1, 0, 0, 0, 1, 0, 0, 1, 0, 0};
    static const double r9[3][12] = {
        {1, 1, 0, 0, 0, 0, 0, 0, 1, 1, 0, 0},
        {1, 1, 0, 0, 0, 0, 0, 0, 1, 1, 0, 0},
        {2, 2, 0, 0, 0, 0, 0, 0, 2, 2, 0, 0},
    };
    for (int p = 0; p < 3; p += 2) { /* prefill and all: requests 3, 5, 9 */
        double c53 = cosine(r5, r3[p], 12);
        double c93 = cosine(r9[p], r3[p], 12);
        double c95 = cosine(r9[p], r5, 12);
        CHECK_EQ_INT(s.similarity_requests[p], 3);
        CHECK_NEAR(s.similarity_prev[p], (c53 + c95) / 2, 1e-6);
        CHECK_NEAR(s.similarity_random[p], (c53 + (c93 + c95) / 2) / 2, 1e-6);
        CHECK_NEAR(s.similarity_best[p], (c53 + fmax(c93, c95)) / 2, 1e-6);
    }
    double d93 = cosine(r9[1], r3[1], 12); /* decode: requests 3 and 9 only */
    CHECK_EQ_INT(s.similarity_requests[1], 2);
    CHECK_NEAR(s.similarity_prev[1], d93, 1e-6);
    CHECK_NEAR(s.similarity_random[1], d93, 1e-6);
    CHECK_NEAR(s.similarity_best[1], d93, 1e-6);

    /* a prefill-only trace: decode figures are NaN; one request: no similarity */
    const char *one = write_file("tt_one.txt", "# moe-trace v1\n# n_layers: 2\n# n_experts: 6\n"
                                               "# top_k: 2\n0 P 0 0,1|2,3\n0 P 1 0,1|2,4\n");
    CHECK_EQ_INT(moeinf_trace_stats(one, &s, &err), MOEINF_OK);
    CHECK(isnan(s.gini[1].mean) && isnan(s.top_share[1].max) && isnan(s.distinct_share[1]));
    CHECK(isnan(s.similarity_prev[0]));
    CHECK_EQ_INT(s.reused[0], 3);
    CHECK_NEAR(s.gini[0].min, gini_by_definition((const double[]){0, 0, 2, 1, 1, 0}, 6), 1e-9);
    CHECK_NEAR(s.gini[0].max, gini_by_definition((const double[]){2, 2, 0, 0, 0, 0}, 6), 1e-9);
    CHECK_EQ_INT(moeinf_trace_stats("/nonexistent/t.txt", &s, &err), MOEINF_ERR_IO);
}

/* ---- CLI ---------------------------------------------------------------------------------- */

static char out_buf[1 << 16], err_buf[1 << 14];

/* Runs `moeinf trace ARGS`: exit code, stdout and stderr in out_buf / err_buf. */
static int trace_cli(const char *args) {
    char full[4096];
    snprintf(full, sizeof full, "trace %s", args);
    return test_run_moeinf("cli-trace", full, out_buf, sizeof out_buf, err_buf, sizeof err_buf);
}

/* Copies fmt to out, replacing {T}, {G}, {B} and {O} by the given paths. */
static void expand(const char *fmt, const char *t, const char *g, const char *b, const char *o,
                   char *out, size_t size) {
    size_t n = 0;
    for (const char *p = fmt; *p && n + 1 < size; p++) {
        const char *sub = NULL;
        if (p[0] == '{' && p[1] && p[2] == '}') {
            sub = p[1] == 'T' ? t : p[1] == 'G' ? g : p[1] == 'B' ? b : p[1] == 'O' ? o : NULL;
        }
        if (sub) {
            n += (size_t)snprintf(out + n, size - n, "%s", sub);
            if (n >= size) n = size - 1;
            p += 2;
        } else {
            out[n++] = *p;
        }
    }
    out[n] = '\0';
}

static void test_cli_exit_codes(void) {
    if (!getenv("MOEINF_BIN")) { /* NOLINT(concurrency-mt-unsafe): main thread */
        test_skip("MOEINF_BIN not set (run through ctest)");
        return;
    }
    CHECK_EQ_INT(trace_cli("--help"), 0);
    CHECK_STR_CONTAINS(out_buf, "usage: moeinf trace SUBCOMMAND");
    static const char *const subs[] = {"heatmap", "filter", "concat", "stats"};
    for (int i = 0; i < 4; i++) {
        char line[64];
        snprintf(line, sizeof line, "\n  %-8s ", subs[i]);
        CHECK_STR_CONTAINS(out_buf, line);
    }
    for (const char *const *s = subs; s < subs + 4; s++) {
        char args[64];
        snprintf(args, sizeof args, "%s --help", *s);
        CHECK_EQ_INT(trace_cli(args), 0);
        char want[64];
        snprintf(want, sizeof want, "usage: moeinf trace %s", *s);
        CHECK_STR_CONTAINS(out_buf, want);
    }
    CHECK_EQ_INT(trace_cli(""), 2);
    CHECK_EQ_INT(trace_cli("bogus"), 2);
    CHECK_STR_CONTAINS(err_buf, "unknown subcommand 'bogus'");

    const char *t = small_path();
    const char *other = write_file("tt_other_cli.txt", "# moe-trace v1\n# n_layers: 2\n"
                                                       "# n_experts: 4\n# top_k: 2\n"
                                                       "0 P 0 0,1|2,3\n");
    const char *bad = write_file("tt_bad_cli.txt", "# moe-trace v1\n# n_layers: 2\n"
                                                   "# n_experts: 6\n# top_k: 2\n0 P 0 0,1|2\n");
    char o[512];
    test_tmp_path("tt_cli_o.txt", o, sizeof o);

    static const struct {
        const char *fmt; /* {T} small trace, {G} other geometry, {B} malformed, {O} output */
        int code;
    } cases[] = {
        {"heatmap --request 3", 2},
        {"heatmap --trace {T}", 2},
        {"heatmap --trace {T} --request 3 --index 0", 2},
        {"heatmap --trace {T} --request -1", 2},
        {"heatmap --trace {T} --request 3 --phase prompt", 2},
        {"heatmap --trace {T} --request 3 --bogus", 2},
        {"heatmap --trace {T} --request 4", 2},
        {"heatmap --trace {T} --index 3", 2},
        {"heatmap --trace {T} --request", 2},
        {"heatmap --trace /nonexistent/t.txt --request 3", 1},
        {"heatmap --trace {B} --index 0", 1},
        {"heatmap --trace {T} --request 3 -o /nonexistent/dir/h.svg", 1},
        {"filter --trace {T}", 2},
        {"filter -o {O}", 2},
        {"filter --trace {T} -o {O} --every 0", 2},
        {"filter --trace {T} -o {O} --first x", 2},
        {"filter --trace {T} -o {O} --requests 9-5", 2},
        {"filter --trace {T} -o {O} --requests 5-", 2},
        {"filter --trace {T} -o {O} --tag-prefix nope/", 2},
        {"filter --trace /nonexistent/t.txt -o {O}", 1},
        {"filter --trace {B} -o {O}", 1},
        {"concat {T} {T}", 2},
        {"concat -o {O}", 2},
        {"concat -o {O} --bogus {T}", 2},
        {"concat -o {O} {T} {G}", 1},
        {"concat -o {O} {T} /nonexistent/t.txt", 1},
        {"stats", 2},
        {"stats --trace {T} --bogus", 2},
        {"stats {T} {T}", 2}, /* one trace: positional or --trace, not two */
        {"stats {T} --trace {G}", 2},
        {"heatmap {T} {T} --index 0", 2},
        {"filter {T} -o {O} {G}", 2},
        {"stats --trace", 2},
        {"filter --trace {T} -o /nonexistent/dir/f.txt", 1},
        {"stats --trace /nonexistent/t.txt", 1},
        {"stats --trace {B}", 1},
    };

    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char args[2048];
        expand(cases[i].fmt, t, other, bad, o, args, sizeof args);
        int code = trace_cli(args);
        CHECK_MSG(code == cases[i].code, "'%s' exited %d, expected %d (%s)", args, code,
                  cases[i].code, err_buf);
        CHECK_MSG(err_buf[0] != '\0', "'%s' printed nothing on stderr", args);
        if (cases[i].code == 1) {
            CHECK_MSG(!strncmp(err_buf, "moeinf: ", 8) &&
                          strchr(err_buf, '\n') == err_buf + strlen(err_buf) - 1,
                      "'%s': not one line 'moeinf: ...': %s", args, err_buf);
        }
    }
    char args[2048];
    snprintf(args, sizeof args, "concat -o %s %s %s", o, t, other);
    CHECK_EQ_INT(trace_cli(args), 1);
    CHECK_STR_CONTAINS(err_buf, "geometry mismatch");
}

static void test_cli_output(void) {
    if (!getenv("MOEINF_BIN")) { /* NOLINT(concurrency-mt-unsafe): main thread */
        test_skip("MOEINF_BIN not set (run through ctest)");
        return;
    }
    const char *t = small_path();
    char svg[512];
    char o[512];
    char args[2048];
    test_tmp_path("tt_cli.svg", svg, sizeof svg);
    test_tmp_path("tt_cli_f.txt", o, sizeof o);
    remove(svg);
    snprintf(args, sizeof args, "heatmap --trace %s --request 3 -o %s", t, svg);
    CHECK_EQ_INT(trace_cli(args), 0);
    /* the hand-computed skew of request 3 (see test_eam_skew), uniform distinct
     * 6 (1 - (2/3)^T) = 3.3 (T = 2) and 4.8 (T = 4) */
    CHECK_STR_CONTAINS(out_buf, "request  3 'mmlu/a/0' (index 0 of tt_small.txt): 2 prefill + 2 "
                                "decode tokens");
    CHECK_STR_CONTAINS(out_buf, "prefill         2  0.500 (0.500-0.500)   1.000  3.0 (3-3)\n");
    CHECK_STR_CONTAINS(out_buf, "all             4  0.500 (0.500-0.500)   0.938  4.5 (4-5)\n");
    CHECK_STR_CONTAINS(out_buf, "1.000  3.3\n");
    CHECK_STR_CONTAINS(out_buf, "4.8\n");
    CHECK(access(svg, F_OK) == 0);
    snprintf(args, sizeof args, "heatmap --trace %s --index 1 --phase decode --layers", t);
    CHECK_EQ_INT(trace_cli(args), 0);
    CHECK_STR_CONTAINS(out_buf, "decode          0  (no tokens)");

    snprintf(args, sizeof args, "filter --trace %s -o %s --tag-prefix puffin/ --tag-prefix mmlu/b",
             t, o);
    CHECK_EQ_INT(trace_cli(args), 0);
    CHECK_STR_CONTAINS(out_buf, "2 requests, 2 prefill + 1 decode tokens");
    char *text = slurp(o);
    CHECK_STR_CONTAINS(text, "# derived: moeinf trace filter of tt_small.txt: --tag-prefix "
                             "puffin/ --tag-prefix mmlu/b\n");
    free(text);
    snprintf(args, sizeof args, "filter --trace %s -o %s --requests 3", t, o);
    CHECK_EQ_INT(trace_cli(args), 0);
    CHECK_STR_CONTAINS(out_buf, "1 requests, 2 prefill + 2 decode tokens");

    snprintf(args, sizeof args, "concat -o %s %s %s", o, t, t);
    CHECK_EQ_INT(trace_cli(args), 0);
    CHECK_STR_CONTAINS(out_buf, "6 requests, 8 prefill + 6 decode tokens; request ids of 1 "
                                "input shifted");

    snprintf(args, sizeof args, "stats --trace %s --json", t);
    CHECK_EQ_INT(trace_cli(args), 0);
    CHECK_STR_CONTAINS(out_buf, "\"requests\": 3, \"top_share_experts\": 1");
    CHECK_STR_CONTAINS(out_buf, "\"prefill\": {\"tokens\": 4, \"accesses\": 16, \"reused\": 2, "
                                "\"reuse_ratio\": 0.125000");
    CHECK_STR_CONTAINS(out_buf, "\"decode\": {\"tokens\": 3, \"accesses\": 12, \"reused\": 9, "
                                "\"reuse_ratio\": 0.750000");
    CHECK_STR_CONTAINS(out_buf, "\"top_share\": {\"mean\": 0.375000, \"min\": 0.375000");
    CHECK(strchr(out_buf, '\n') == out_buf + strlen(out_buf) - 1); /* one line */
    snprintf(args, sizeof args, "stats --trace %s", t);
    CHECK_EQ_INT(trace_cli(args), 0);
    CHECK_STR_CONTAINS(out_buf, "75.0%"); /* decode reuse 9 / 12 */
}

/* A trace named without --trace; a trace with a header and no requests (legal: filter and
 * stats accept it, heatmap has nothing to show: a bad file for it, exit 1); a FIFO as the
 * trace, refused at once instead of hanging in open. */
static void test_cli_positional_empty_fifo(void) {
    if (!getenv("MOEINF_BIN")) { /* NOLINT(concurrency-mt-unsafe): main thread */
        test_skip("MOEINF_BIN not set (run through ctest)");
        return;
    }
    const char *t = small_path();
    char args[2048];
    char o[512];
    test_tmp_path("tt_cli_e.txt", o, sizeof o);
    snprintf(args, sizeof args, "stats %s --json", t);
    CHECK_EQ_INT(trace_cli(args), 0);
    CHECK_STR_CONTAINS(out_buf, "\"requests\": 3,");
    snprintf(args, sizeof args, "heatmap %s --request 3", t);
    CHECK_EQ_INT(trace_cli(args), 0);
    CHECK_STR_CONTAINS(out_buf, "request  3 'mmlu/a/0'");
    snprintf(args, sizeof args, "filter %s -o %s --requests 3", t, o);
    CHECK_EQ_INT(trace_cli(args), 0);
    CHECK_STR_CONTAINS(out_buf, "1 requests");
    CHECK_EQ_INT(trace_cli("stats /nonexistent/t.txt --bogus"), 2);
    CHECK_STR_CONTAINS(err_buf, "unknown option '--bogus'");

    const char *empty = write_file("tt_empty.txt", "# moe-trace v1\n# n_layers: 2\n"
                                                   "# n_experts: 4\n# top_k: 2\n");
    snprintf(args, sizeof args, "heatmap --trace %s --index 0", empty);
    CHECK_EQ_INT(trace_cli(args), 1);
    CHECK_STR_CONTAINS(err_buf, "tt_empty.txt: the trace has no requests\n");
    snprintf(args, sizeof args, "filter --trace %s -o %s --tag-prefix mmlu/", empty, o);
    CHECK_EQ_INT(trace_cli(args), 0);
    CHECK_STR_CONTAINS(out_buf, "wrote");
    CHECK_STR_CONTAINS(out_buf, ": 0 requests, 0 prefill + 0 decode tokens");
    struct moeinf_trace_reader *r = NULL;
    struct moeinf_error err = {0};
    CHECK_EQ_INT(moeinf_trace_open(o, &r, &err), MOEINF_OK);
    if (r) {
        CHECK_EQ_INT(moeinf_trace_header(r)->n_requests, 0);
        CHECK_EQ_INT(moeinf_trace_header(r)->n_layers, 2);
    }
    moeinf_trace_close(r);
    snprintf(args, sizeof args, "stats %s --json", empty);
    CHECK_EQ_INT(trace_cli(args), 0);
    CHECK_STR_CONTAINS(out_buf, "\"requests\": 0,");

    char fifo[512];
    test_tmp_path("tt_trace.fifo", fifo, sizeof fifo);
    remove(fifo);
    CHECK(mkfifo(fifo, 0644) == 0);
    /* `timeout` turns a hang (a blocking open waits for a writer) into exit 124 */
    snprintf(args, sizeof args, "stats %s", fifo);
    char full[2100];
    /* NOLINTNEXTLINE(concurrency-mt-unsafe): main thread */
    snprintf(full, sizeof full, "timeout 20 '%s' trace %s", getenv("MOEINF_BIN"), args);
    CHECK_EQ_INT(WEXITSTATUS(system(full)), 1); // NOLINT(concurrency-mt-unsafe): main thread
    snprintf(full, sizeof full, "stats %s", fifo);
    alarm(30);
    CHECK_EQ_INT(trace_cli(full), 1);
    alarm(0);
    CHECK_STR_CONTAINS(err_buf, "a pipe or FIFO, not a regular file");
    remove(fifo);
    remove(o);
}

/* ---- the shared real traces --------------------------------------------------------------- */

static void test_real_traces(void) {
    char llama[512];
    char deepseek[512];
    if (!test_shared_path("traces/llama4_maverick_mmlu.txt", llama, sizeof llama)) return;
    test_shared_path("traces/deepseek_v2_lite_puffin_prefill.txt", deepseek, sizeof deepseek);
    char astro[512];
    char algebra[512];
    char out[512];
    test_tmp_path("tt_astronomy.txt", astro, sizeof astro);
    test_tmp_path("tt_algebra.txt", algebra, sizeof algebra);
    test_tmp_path("tt_shift.txt", out, sizeof out);
    struct moeinf_error err;
    struct moeinf_trace_copy_result res;
    struct moeinf_trace_filter_params p = moeinf_trace_filter_params_default();
    const char *pa[] = {"mmlu/astronomy/"};
    p.tag_prefixes = pa;
    p.n_tag_prefixes = 1;
    CHECK_EQ_INT(moeinf_trace_filter(llama, astro, &p, &res, &err), MOEINF_OK);
    CHECK_EQ_INT(res.n_requests, 152); /* ../shared/traces/README.md */
    const char *pb[] = {"mmlu/abstract_algebra/"};
    p.tag_prefixes = pb;
    CHECK_EQ_INT(moeinf_trace_filter(llama, algebra, &p, &res, &err), MOEINF_OK);
    CHECK_EQ_INT(res.n_requests, 100);
    /* astronomy then algebra: the algebra ids (0..99) come after astronomy's, shifted */
    const char *ab[] = {astro, algebra};
    CHECK_EQ_INT(moeinf_trace_concat(ab, 2, out, NULL, &res, &err), MOEINF_OK);
    CHECK_EQ_INT(res.n_requests, 252);
    CHECK_EQ_INT(res.n_shifted, 1);
    CHECK_EQ_INT(res.n_tokens[0] + res.n_tokens[1], 37296);
    struct moeinf_trace_stats s;
    CHECK_EQ_INT(moeinf_trace_stats(out, &s, &err), MOEINF_OK);
    CHECK_EQ_INT(s.n_tokens[0], 5346);
    CHECK_EQ_INT(s.n_tokens[1], 31950);

    struct moeinf_trace_eam *m = NULL;
    CHECK_EQ_INT(moeinf_trace_eam_load(deepseek, -1, 0, &m, &err), MOEINF_OK);
    if (!m) return;
    CHECK(!strcmp(m->tag, "puffin/1"));
    CHECK_EQ_INT(m->n_tokens[0], 33);
    uint64_t sum = 0;
    for (int l = 0; l < m->n_layers; l++)
        for (int e = 0; e < m->n_experts; e++)
            sum += moeinf_trace_eam_count(m, MOEINF_PHASE_ALL, l, e);
    CHECK_EQ_INT(sum, 33 * 26 * 6);
    char svg_path[512];
    test_tmp_path("tt_deepseek.svg", svg_path, sizeof svg_path);
    CHECK_EQ_INT(moeinf_trace_eam_svg(m, MOEINF_PHASE_PREFILL, "deepseek", svg_path, &err),
                 MOEINF_OK);
    char *svg = slurp(svg_path);
    int white = 0;
    CHECK_EQ_INT(cell_rects(svg ? svg : "", &white), 26 * 64);
    free(svg);
    moeinf_trace_eam_free(m);
}

int main(void) {
    RUN(test_gini_and_top_sum);
    RUN(test_uniform_skew);
    RUN(test_colors);
    RUN(test_xml_text);
    RUN(test_eam_load);
    RUN(test_eam_skew);
    RUN(test_eam_svg);
    RUN(test_filter);
    RUN(test_concat);
    RUN(test_stats);
    RUN(test_cli_exit_codes);
    RUN(test_cli_output);
    RUN(test_cli_positional_empty_fifo);
    RUN(test_real_traces);
    return test_report();
}
