/*
 * test_cli_sim.c - `moeinf sim` through the binary ($MOEINF_BIN): exit codes, --help, the
 * JSON object (hand-computed values, null ratios), the sweep table and the SVG plot.
 */
#include <stdbool.h>
#include <sys/wait.h>

#include "test.h"

static char out_buf[1 << 16], err_buf[1 << 14];

/* Runs `moeinf sim ARGS`; returns the exit code, stdout and stderr in out_buf / err_buf. */
static int sim(const char *args) {
    char full[4096];
    snprintf(full, sizeof full, "sim %s", args);
    return test_run_moeinf("cli-sim", full, out_buf, sizeof out_buf, err_buf, sizeof err_buf);
}

static const char *trace_path(void) {
    static char path[512];
    test_tmp_path("cli_trace.txt", path, sizeof path);
    FILE *f = fopen(path, "w");
    if (!f) return path;
    /* L=2, E=4, K=2: with 4 slots the first token misses 4 times and the second hits 4 times */
    fprintf(f, "# moe-trace v1\n# n_layers: 2\n# n_experts: 4\n# top_k: 2\n"
               "0 P 0 0,1|2,3\n0 D 1 1,0|3,2\n");
    fclose(f);
    return path;
}

static void test_help_and_usage_errors(void) {
    if (!getenv("MOEINF_BIN")) { /* NOLINT(concurrency-mt-unsafe): main thread */
        test_skip("MOEINF_BIN not set (run through ctest)");
        return;
    }
    CHECK_EQ_INT(sim("--help"), 0);
    CHECK_STR_CONTAINS(out_buf, "usage: moeinf sim");
    CHECK_STR_CONTAINS(out_buf, "belady");
    CHECK_STR_CONTAINS(out_buf, "max(0, prefetches * load - T)");
    CHECK_EQ_INT(sim(""), 2);
    char args[1024];
    const char *t = trace_path();

    static const struct {
        bool with_trace;
        const char *rest;
    } bad[] = {
        {false, "--cache 4"},   /* no trace */
        {true, ""},             /* no cache */
        {true, "--cache 0"},    /* zero */
        {true, "--cache 101%"}, /* over 100% */
        {true, "--cache x%"},   /* not a number */
        {true, "--cache 4 --phase prompt"},
        {true, "--cache 4 --bogus"},
        {true, "--cache 4 --prefetch -1"},
        {true, "--cache 4 --compute-ms 5"}, /* half a time model */
        {true, "--cache 1"},                /* smaller than top_k = 2 */
        {true, "--cache 4 --policy nope"},
        {true, "--cache 4 --sweep"},
        {true, "--cache 4 --plot x.svg"},
    };

    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        snprintf(args, sizeof args, "%s%s %s", bad[i].with_trace ? "--trace " : "",
                 bad[i].with_trace ? t : "", bad[i].rest);
        int code = sim(args);
        CHECK_MSG(code == 2, "'%s' exited %d", args, code);
        CHECK_MSG(err_buf[0] != '\0', "'%s' printed nothing on stderr", args);
    }
    /* the engine's auto is not modelled: said so, not "not an integer" */
    snprintf(args, sizeof args, "--trace %s --cache 4 --prefetch auto", t);
    CHECK_EQ_INT(sim(args), 2);
    CHECK_STR_CONTAINS(err_buf, "--prefetch auto is the engine's alone");
    CHECK_EQ_INT(sim("--trace /nonexistent/trace.txt --cache 4"), 1);
    CHECK_STR_CONTAINS(err_buf, "moeinf: /nonexistent/trace.txt: cannot open");
    /* a positional argument is named as such, not as an option missing its value */
    snprintf(args, sizeof args, "%s --cache 4", t);
    CHECK_EQ_INT(sim(args), 2);
    CHECK_STR_CONTAINS(err_buf, "moeinf sim: unexpected argument '");
    snprintf(args, sizeof args, "--cache 4 --trace %s --bogus", t);
    CHECK_EQ_INT(sim(args), 2);
    CHECK_STR_CONTAINS(err_buf, "moeinf sim: unknown option '--bogus'");
}

/* A trace from a pipe: refused with a clear line (the reader needs a regular file: its "# req"
 * lines are read through a second handle and offline policies replay it twice), not an
 * "Illegal seek" from deep inside. */
static void test_pipe_trace(void) {
    if (!getenv("MOEINF_BIN")) { /* NOLINT(concurrency-mt-unsafe): main thread */
        test_skip("MOEINF_BIN not set (run through ctest)");
        return;
    }
    char cmd[2048];
    char out[512];
    char err[512];
    test_tmp_path("cli_pipe_out.txt", out, sizeof out);
    test_tmp_path("cli_pipe_err.txt", err, sizeof err);
    snprintf(cmd, sizeof cmd, "cat %s | timeout 20 '%s' sim --trace /dev/stdin --cache 4 >%s 2>%s",
             trace_path(), getenv("MOEINF_BIN"), out, err); // NOLINT(concurrency-mt-unsafe)
    int status = system(cmd); // NOLINT(concurrency-mt-unsafe): main thread
    CHECK_EQ_INT(WIFEXITED(status) ? WEXITSTATUS(status) : -1, 1);
    test_read_text(err, err_buf, sizeof err_buf);
    CHECK_STR_CONTAINS(err_buf, "moeinf: /dev/stdin: a pipe or FIFO, not a regular file");
    CHECK(strchr(err_buf, '\n') == err_buf + strlen(err_buf) - 1);
    remove(out);
    remove(err);
}

/* Outputs written after the replay (--plot, --eamc) are checked before it: a missing folder
 * fails at once with a "moeinf: " line, and no table is printed. */
static void test_outputs_checked_first(void) {
    if (!getenv("MOEINF_BIN")) { /* NOLINT(concurrency-mt-unsafe): main thread */
        test_skip("MOEINF_BIN not set (run through ctest)");
        return;
    }
    char args[1024];
    snprintf(args, sizeof args, "--trace %s --sweep --sizes 4 --plot /nonexistent-dir/x.svg",
             trace_path());
    CHECK_EQ_INT(sim(args), 1);
    CHECK(strcmp(err_buf, "moeinf: /nonexistent-dir/x.svg: folder /nonexistent-dir: No such file "
                          "or directory\n") == 0);
    CHECK(out_buf[0] == '\0');
    snprintf(args, sizeof args, "--trace %s --cache 4 --policy reuse --eamc /nonexistent-dir/e.bin",
             trace_path());
    CHECK_EQ_INT(sim(args), 1);
    CHECK_STR_CONTAINS(err_buf, "moeinf: /nonexistent-dir/e.bin: folder /nonexistent-dir");
    CHECK(out_buf[0] == '\0');
}

static void test_json(void) {
    if (!getenv("MOEINF_BIN")) { /* NOLINT(concurrency-mt-unsafe): main thread */
        test_skip("MOEINF_BIN not set (run through ctest)");
        return;
    }
    char args[1024];
    snprintf(args, sizeof args, "--trace %s --cache 4 --json", trace_path());
    CHECK_EQ_INT(sim(args), 0);
    /* the first token's 4 accesses miss, the second token's 4 hit */
    CHECK_STR_CONTAINS(out_buf, "{\"policy\": \"reuse\", \"cache_experts\": 4, \"accesses\": 8, "
                                "\"hits\": 4, \"hit_ratio\": 0.500000");
    snprintf(args, sizeof args, "--trace %s --cache 100%% --json --policy lfu", trace_path());
    CHECK_EQ_INT(sim(args), 0);
    CHECK_STR_CONTAINS(out_buf, "\"policy\": \"lfu\", \"cache_experts\": 8");
    CHECK_STR_CONTAINS(out_buf, "\"accesses\": 8, \"hits\": 4, \"hit_ratio\": 0.500000");
    CHECK_STR_CONTAINS(out_buf, "\"decode_accesses\": 4, \"decode_hits\": 4, "
                                "\"decode_hit_ratio\": 1.000000");
    CHECK_STR_CONTAINS(out_buf, "\"prefetch_loads\": 0, \"prefetch_hits\": 0, "
                                "\"wasted_prefetches\": 0}");
    /* exactly one line, one object */
    CHECK(strchr(out_buf, '\n') == out_buf + strlen(out_buf) - 1);
    /* warmup of the only request: nothing counted, ratios null; time model fields */
    snprintf(args, sizeof args,
             "--trace %s --cache 4 --json --warmup 1 --expert-bytes 1e6 --bandwidth 1 "
             "--compute-ms 2",
             trace_path());
    CHECK_EQ_INT(sim(args), 0);
    CHECK_STR_CONTAINS(out_buf, "\"accesses\": 0, \"hits\": 0, \"hit_ratio\": null");
    CHECK_STR_CONTAINS(out_buf, "\"decode_hit_ratio\": null");
    CHECK_STR_CONTAINS(out_buf, "\"ms_per_token\": null, \"decode_ms_per_token\": null}");
    /* time model: token 1 = 2 + 4 misses x 1 ms = 6, token 2 = 2 (all hits) */
    snprintf(args, sizeof args,
             "--trace %s --cache 4 --json --expert-bytes 1e6 --bandwidth 1 --compute-ms 2",
             trace_path());
    CHECK_EQ_INT(sim(args), 0);
    CHECK_STR_CONTAINS(out_buf, "\"ms_per_token\": 4.000000, \"decode_ms_per_token\": 2.000000}");
    /* --batch (documented, once refused): two prompt tokens that both choose expert 0, then a
     * decode token that does too, one slot. Per token: 3 iterations, 3 accesses, the 2nd and
     * 3rd hit. Batched: the prompt is one iteration with one access (its distinct experts),
     * a miss, then the decode hit. */
    char batch_trace[512];
    test_tmp_path("cli_trace_batch.txt", batch_trace, sizeof batch_trace);
    FILE *f = fopen(batch_trace, "w");
    CHECK(f != NULL);
    if (!f) return;
    fprintf(f, "# moe-trace v1\n# n_layers: 1\n# n_experts: 4\n# top_k: 1\n"
               "0 P 0 0\n0 P 1 0\n0 D 2 0\n");
    fclose(f);
    snprintf(args, sizeof args, "--trace %s --cache 1 --json --batch 1", batch_trace);
    CHECK_EQ_INT(sim(args), 0);
    CHECK_STR_CONTAINS(out_buf, "\"accesses\": 3, \"hits\": 2,");
    CHECK_STR_CONTAINS(out_buf, "\"tokens\": 3, \"decode_tokens\": 1, \"iterations\": 3,");
    snprintf(args, sizeof args, "--trace %s --cache 1 --json --batch 2", batch_trace);
    CHECK_EQ_INT(sim(args), 0);
    CHECK_STR_CONTAINS(out_buf, "\"accesses\": 2, \"hits\": 1,");
    CHECK_STR_CONTAINS(out_buf, "\"tokens\": 3, \"decode_tokens\": 1, \"iterations\": 2,");
}

static void test_text_sweep_and_plot(void) {
    if (!getenv("MOEINF_BIN")) { /* NOLINT(concurrency-mt-unsafe): main thread */
        test_skip("MOEINF_BIN not set (run through ctest)");
        return;
    }
    char args[1024];
    char svg[512];
    snprintf(args, sizeof args, "--trace %s --cache 50%% --phase decode", trace_path());
    CHECK_EQ_INT(sim(args), 0);
    CHECK_STR_CONTAINS(out_buf, "policy     reuse, cache 4 experts (50.0% of 8)");
    CHECK_STR_CONTAINS(out_buf, "decode     hit ratio 1.0000 (4 of 4 accesses)");
    test_tmp_path("cli_plot.svg", svg, sizeof svg);
    remove(svg);
    snprintf(args, sizeof args, "--trace %s --sweep --sizes 2,4,100%% --plot %s", trace_path(),
             svg);
    CHECK_EQ_INT(sim(args), 0);
    CHECK_STR_CONTAINS(
        out_buf, "| cache | lru | lfu | count | reuse | moe-infinity | belady | freq-oracle |");
    CHECK_STR_CONTAINS(out_buf,
                       "| 4 (50.0%) | 0.500 | 0.500 | 0.500 | 0.500 | 0.500 | 0.500 | 0.500 |");
    CHECK_STR_CONTAINS(out_buf, "| 8 (100.0%) |");
    char body[1 << 15];
    test_read_text(svg, body, sizeof body);
    CHECK(strncmp(body, "<svg", 4) == 0);
    CHECK_STR_CONTAINS(body, "</svg>");
    int lines = 0;
    for (const char *p = body; (p = strstr(p, "<polyline")); p++)
        lines++;
    CHECK_EQ_INT(lines, 7); /* one per policy */
    snprintf(args, sizeof args, "--trace %s --sweep --sizes 4 --policies lru,nope", trace_path());
    CHECK_EQ_INT(sim(args), 2);
}

int main(void) {
    RUN(test_help_and_usage_errors);
    RUN(test_json);
    RUN(test_text_sweep_and_plot);
    RUN(test_pipe_trace);
    RUN(test_outputs_checked_first);
    return test_report();
}
