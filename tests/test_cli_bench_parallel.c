/*
 * test_cli_bench_parallel.c - `moeinf bench --parallel N` (N sequences decoding together):
 * the report's shape (prefill and decode of all sequences, a row per sequence whose prompt
 * and decoded tokens add up to the totals, and whose tokens/s add up to the aggregate), the
 * expert cache's figures with --parallel 1 equal to the single-sequence path's (the same
 * iterations and token ids give the same accesses, hits, misses and bytes), -f, and the
 * refused combinations with their exit code 2.
 */
#include "test.h"

static int run_cmd(const char *cmd, char *out, size_t out_size, char *errbuf, size_t err_size) {
    return test_run_shell("cli-bench-par", cmd, out, out_size, errbuf, err_size);
}

/* The numbers of the row that starts with `name ` (at a line start): up to max of them. */
static int row(const char *text, const char *name, double *v, int max) {
    char key[64];
    snprintf(key, sizeof key, "\n%s ", name);
    const char *p = strstr(text, key);
    if (!p) return 0;
    p += strlen(key);
    int n = 0;
    while (n < max) {
        char *end = NULL;
        double x = strtod(p, &end);
        if (end == p) break;
        v[n++] = x;
        p = end;
        if (*p == '\n') break;
    }
    return n;
}

static void test_report_shape(void) {
    char model[1024];
    char cmd[2048];
    char out[8192];
    char err[4096];
    if (!test_shared_path("testdata/models/tiny-mixtral-Q8_0.gguf", model, sizeof model)) return;
    snprintf(cmd, sizeof cmd, "%s bench -m %s --parallel 3 -p 5 -n 4 -r 2 -b 4 -t 2",
             test_moeinf_bin(), model);
    CHECK_EQ_INT(run_cmd(cmd, out, sizeof out, err, sizeof err), 0);
    CHECK_STR_CONTAINS(out,
                       "parallel: 3 sequences in one context, each its own prompt of 5 tokens");
    CHECK_STR_CONTAINS(out, "iterations of up to 4 tokens, decode runs 4 iterations");
    double v[8] = {0};
    CHECK_EQ_INT(row(out, "prefill", v, 8), 3);
    CHECK_EQ_INT((int)v[0], 15);
    CHECK_EQ_INT(row(out, "decode", v, 8), 3);
    CHECK_EQ_INT((int)v[0], 12);
    const double aggregate = v[2];
    double sum_prompt = 0;
    double sum_decoded = 0;
    double sum_rate = 0;
    for (int s = 0; s < 3; s++) {
        char name[8];
        snprintf(name, sizeof name, "%d", s);
        CHECK_EQ_INT(row(out, name, v, 8), 4); /* after the sequence: prompt decoded first tok/s */
        CHECK_EQ_INT((int)v[0], 5);
        CHECK_EQ_INT((int)v[1], 4);
        CHECK(v[2] > 0);
        sum_prompt += v[0];
        sum_decoded += v[1];
        sum_rate += v[3];
    }
    CHECK(row(out, "3", v, 8) == 0); /* no fourth sequence */
    CHECK_EQ_INT(row(out, "total", v, 8), 3);
    CHECK_EQ_INT((int)v[0], (int)sum_prompt);
    CHECK_EQ_INT((int)v[1], (int)sum_decoded);
    /* each printed to 2 decimals: the sum within their rounding */
    CHECK_MSG(sum_rate > v[2] - 0.02 && sum_rate < v[2] + 0.02 && v[2] == aggregate,
              "per-sequence tokens/s add to %.2f, total %.2f, decode row %.2f", sum_rate, v[2],
              aggregate);
    CHECK(strstr(out, "expert cache") == NULL); /* resident: no cache table */
}

/* The cache table's rows (tokens, hit, misses, MiB read) of --parallel 1 and of the plain
 * path: equal. (-p 8 -b 3: no prefill micro-batch of one token, which the plain path's
 * moeinf_decode counts as a decode iteration; -r 1: which warm run is the median is a
 * matter of timing, and the runs feed different ids.) */
static void test_parallel_1_matches_single(void) {
    char model[1024];
    char cmd[2048];
    char one[8192];
    char par[8192];
    char err[4096];
    if (!test_shared_path("testdata/models/tiny-mixtral-Q8_0.gguf", model, sizeof model)) return;
    const char *opts = "-p 8 -n 6 -r 1 -b 3 -t 2 --expert-cache 50% --expert-io cached";
    snprintf(cmd, sizeof cmd, "%s bench -m %s %s", test_moeinf_bin(), model, opts);
    CHECK_EQ_INT(run_cmd(cmd, one, sizeof one, err, sizeof err), 0);
    snprintf(cmd, sizeof cmd, "%s bench -m %s --parallel 1 %s", test_moeinf_bin(), model, opts);
    CHECK_EQ_INT(run_cmd(cmd, par, sizeof par, err, sizeof err), 0);
    const char *rows[] = {"prefill-cold", "prefill-warm", "decode-cold", "decode-warm"};
    for (int i = 0; i < 4; i++) {
        double a[8] = {0};
        double b[8] = {0};
        CHECK_EQ_INT(row(one, rows[i], a, 8), 8);
        CHECK_EQ_INT(row(par, rows[i], b, 8), 8);
        /* tokens, hit ratio, misses and MiB read per token: the same accesses */
        CHECK_MSG(a[0] == b[0] && a[3] == b[3] && a[4] == b[4] && a[5] == b[5],
                  "%s: single %g tokens hit %g misses %g MiB %g; --parallel 1 %g %g %g %g", rows[i],
                  a[0], a[3], a[4], a[5], b[0], b[3], b[4], b[5]);
    }
    double a[4] = {0};
    double b[4] = {0};
    CHECK_EQ_INT(row(one, "decode", a, 4), 3);
    CHECK_EQ_INT(row(par, "decode", b, 4), 3);
    CHECK_EQ_INT((int)a[0], (int)b[0]);
}

static void test_file_prompt_and_errors(void) {
    char model[1024];
    char cmd[2048];
    char out[8192];
    char err[4096];
    if (!test_shared_path("testdata/models/tiny-mixtral-Q8_0.gguf", model, sizeof model)) return;
    const char *b = test_moeinf_bin();
    /* -f: the file's tokens per sequence, the context sized for all of them */
    snprintf(cmd, sizeof cmd,
             "printf 'The quick brown fox jumps' | %s bench -m %s -f - --parallel 2 -n 3 -r 1", b,
             model);
    CHECK_EQ_INT(run_cmd(cmd, out, sizeof out, err, sizeof err), 0);
    double v[8] = {0};
    CHECK_EQ_INT(row(out, "total", v, 8), 3);
    CHECK_EQ_INT((int)v[1], 6);
    CHECK(v[0] > 2 && (int)v[0] % 2 == 0);

    struct {
        const char *args, *msg;
    } bad[] = {
        {"--parallel 0", "--parallel"},
        {"--parallel 257", "--parallel"},
        {"--parallel 2 --record-routing x.trace", "--parallel does not go with --record-routing"},
        {"--parallel 4 -b 2", "micro-batch (-b) of at least 4"},
        {"--parallel 2 -p 5 -n 4 -c 12", "shared by the --parallel sequences"},
    };

    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        snprintf(cmd, sizeof cmd, "%s bench -m %s -r 1 %s", b, model, bad[i].args);
        CHECK_EQ_INT(run_cmd(cmd, out, sizeof out, err, sizeof err), 2);
        CHECK_MSG(strstr(err, bad[i].msg) != NULL, "%s: %s", bad[i].args, err);
    }
}

int main(void) {
    RUN(test_report_shape);
    RUN(test_parallel_1_matches_single);
    RUN(test_file_prompt_and_errors);
    return test_report();
}
