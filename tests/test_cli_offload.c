/*
 * test_cli_offload.c - the expert options of run, logits and bench as a user types them:
 * the same text and logits as without the cache, --stats and --stats-json reporting what
 * happened (counts checked against each other and against the run), and every bad value a
 * one-line error with the documented exit code (2 bad option, 1 bad file or runtime).
 */
#include <sys/wait.h>

#include "golden.h"
#include "test.h"

static int run_cmd(const char *cmd, char *out, size_t out_size, char *errbuf, size_t err_size) {
    return test_run_shell("cli-offload", cmd, out, out_size, errbuf, err_size);
}

static const char *bin(void) {
    return test_moeinf_bin();
}

/* The unsigned integer after "key": in a JSON text, or -1. */
static long long json_int(const char *json, const char *key) {
    char pat[64];
    snprintf(pat, sizeof pat, "\"%s\": ", key);
    const char *p = strstr(json, pat);
    return p ? strtoll(p + strlen(pat), NULL, 10) : -1;
}

/* `moeinf run` of the fixed greedy prompt on `model` with `extra` options; its exit code. */
static int run_fox(const char *model, const char *extra, char *out, size_t out_size, char *errbuf,
                   size_t err_size) {
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "%s run -m %s -p 'The quick brown fox' -n 12 --temp 0 --print-ids %s",
             bin(), model, extra);
    return run_cmd(cmd, out, out_size, errbuf, err_size);
}

static void test_run_same_text_and_stats(void) {
    char model[1024];
    char cmd[4096];
    char out_ref[8192];
    char out[8192];
    char err[8192];
    char json_path[512];
    char json[16384];
    if (!test_shared_path("testdata/models/tiny-mixtral-Q8_0.gguf", model, sizeof model)) return;
    test_tmp_path("cli_offload_stats.json", json_path, sizeof json_path);
    CHECK_EQ_INT(run_fox(model, "", out_ref, sizeof out_ref, err, sizeof err), 0);
    snprintf(cmd, sizeof cmd, "--expert-cache 25%% --policy lru --stats --stats-json %s",
             json_path);
    CHECK_EQ_INT(run_fox(model, cmd, out, sizeof out, err, sizeof err), 0);
    CHECK_MSG(strcmp(out, out_ref) == 0, "text differs:\n%s\nvs\n%s", out, out_ref);
    /* the announcement and the per-layer table */
    CHECK_STR_CONTAINS(err, "expert cache: 4 of 16 experts (25.0%)");
    CHECK_STR_CONTAINS(err, "policy lru");
    CHECK_STR_CONTAINS(err, "total");
    test_read_text(json_path, json, sizeof json);
    long long acc = json_int(json, "accesses");
    long long hits = json_int(json, "hits");
    long long misses = json_int(json, "misses");
    long long tokens = json_int(json, "tokens");
    CHECK(acc > 0 && hits >= 0 && misses > 0);
    CHECK_EQ_INT(hits + misses, acc);
    CHECK_EQ_INT(json_int(json, "cache_experts"), 4);
    /* the prompt in one micro-batch, then 11 decode steps (the 12th token is sampled from the
     * last logits without a decode) */
    char ids[256];
    snprintf(cmd, sizeof cmd, "%s tokenize -m %s 'The quick brown fox'", bin(), model);
    CHECK_EQ_INT(run_cmd(cmd, ids, sizeof ids, err, sizeof err), 0);
    long long n_prompt = 0;
    for (const char *p = ids; *p; p++)
        n_prompt += (*p == ' ' || *p == '\n');
    CHECK_EQ_INT(json_int(json, "decode_tokens"), 11);
    CHECK_EQ_INT(tokens, n_prompt + 11);
    /* a decode step accesses top_k = 2 experts per layer (2 layers): 4 each */
    CHECK(acc >= 11LL * 4);
    CHECK_STR_CONTAINS(json, "\"layers\": [{\"layer\": 0, ");
    CHECK_STR_CONTAINS(json, "\"policy\": \"lru\"");
    remove(json_path);
}

/* Reading ahead changes no output; gate lookahead names top_k experts of the next layer per
 * decode token (2 layers, top-2: 11 decode tokens x 2 experts of layer 1 named, and the steps
 * it named experts for use 11 x 2), and on the trained model it predicts far better than
 * chance (top-2 of 16: 0.125). */
static void test_reading_ahead(void) {
    char model[1024];
    char cmd[4096];
    char out_ref[8192];
    char out[8192];
    char err[8192];
    char json_path[512];
    char json[16384];
    char trained[1024];
    if (!test_shared_path("testdata/models/tiny-mixtral-Q8_0.gguf", model, sizeof model)) return;
    test_src_path("models/trained-moe-Q8_0.gguf", trained, sizeof trained);
    test_tmp_path("cli_offload_ahead.json", json_path, sizeof json_path);
    CHECK_EQ_INT(run_fox(model, "", out_ref, sizeof out_ref, err, sizeof err), 0);
    snprintf(cmd, sizeof cmd,
             "--expert-cache 50%% --prefetch 2 --lookahead 1 --io-threads 1 --stats "
             "--stats-json %s",
             json_path);
    CHECK_EQ_INT(run_fox(model, cmd, out, sizeof out, err, sizeof err), 0);
    CHECK_MSG(strcmp(out, out_ref) == 0, "text differs:\n%s\nvs\n%s", out, out_ref);
    CHECK_STR_CONTAINS(err, "gate lookahead: precision");
    CHECK_STR_CONTAINS(err, "stall");
    test_read_text(json_path, json, sizeof json);
    const char *la = strstr(json, "\"lookahead_prediction\"");
    CHECK(la != NULL);
    if (la) {
        CHECK_EQ_INT(json_int(la, "predicted"), 22);
        CHECK_EQ_INT(json_int(la, "actual"), 22);
        long long correct = json_int(la, "correct");
        CHECK(correct >= 0 && correct <= 22);
    }
    long long pf = json_int(json, "prefetches");
    CHECK(pf > 0 && json_int(json, "prefetch_hits") <= pf);
    /* late prefetches are neither hits nor misses; every prefetched expert was used (hit or
     * late), or is wasted (evicted, or unused at the end, as `moeinf sim` counts); every read
     * queued finished, is still in flight, or was cancelled (dropped) */
    long long late = json_int(json, "late_prefetches");
    CHECK(late >= 0);
    CHECK_EQ_INT(json_int(json, "hits") + late + json_int(json, "misses"),
                 json_int(json, "accesses"));
    CHECK_EQ_INT(json_int(json, "prefetch_hits") + late + json_int(json, "wasted_prefetches"), pf);
    CHECK_EQ_INT(json_int(json, "misses") + pf, json_int(json, "reads") +
                                                    json_int(json, "reads_in_flight") +
                                                    json_int(json, "dropped_prefetches"));
    remove(json_path);

    /* the trained default model: measured precision 0.65 at lookahead 1 (seed 2: 27 decode
     * tokens, 162 experts named; seeds 1 and 3 gave 0.63 and 0.55) */
    snprintf(cmd, sizeof cmd,
             "%s run -m %s -p 'The module' -n 64 --seed 2 --expert-cache 50%% --lookahead 1 "
             "--stats-json %s >/dev/null",
             bin(), trained, json_path);
    CHECK_EQ_INT(run_cmd(cmd, out, sizeof out, err, sizeof err), 0);
    test_read_text(json_path, json, sizeof json);
    la = strstr(json, "\"lookahead_prediction\"");
    CHECK(la != NULL);
    if (la) {
        double precision = (double)json_int(la, "correct") / (double)json_int(la, "predicted");
        CHECK_MSG(precision >= 0.45, "lookahead precision %.3f (measured 0.65, chance 0.125)",
                  precision);
    }
    remove(json_path);
}

/* Auto reading ahead (the default) on the trained default model at 25 %: the text is the
 * resident run's; the lookahead's precision on the experts that had to be read is high in
 * layers 2 and 3 (measured .78 each: the routers of layers 2 and 3 on the inputs of layers 1
 * and 2) and low in layer 1 (.15), and layer 0 is never predicted: after its first window (16
 * decode steps; 27 are decoded) the controller wants its reads in 2 of 4 layers. The margins
 * are wide enough that no spare time changes that (prefetch_auto.h: cost in [0.75, 1]). The
 * policy's proposals (.21 on the reads) stay off. The wall-time check of the wanted lookahead
 * starts with its reads on (8 steps), so reads happen whatever the timings. */
static void test_auto_reading_ahead(void) {
    char trained[1024];
    char cmd[4096];
    char out_ref[8192];
    char out[8192];
    char err[8192];
    char json_path[512];
    char json[16384];
    test_src_path("models/trained-moe-Q8_0.gguf", trained, sizeof trained);
    test_tmp_path("cli_offload_auto.json", json_path, sizeof json_path);
    const char *run = "run -p 'The module' -n 64 --seed 2 --print-ids";
    snprintf(cmd, sizeof cmd, "%s %s -m %s", bin(), run, trained);
    CHECK_EQ_INT(run_cmd(cmd, out_ref, sizeof out_ref, err, sizeof err), 0);
    snprintf(cmd, sizeof cmd, "%s %s -m %s --expert-cache 25%% --stats --stats-json %s", bin(), run,
             trained, json_path);
    CHECK_EQ_INT(run_cmd(cmd, out, sizeof out, err, sizeof err), 0);
    CHECK_MSG(strcmp(out, out_ref) == 0, "text differs:\n%s\nvs\n%s", out, out_ref);
    CHECK_STR_CONTAINS(err, "gate lookahead: precision");
    CHECK_STR_CONTAINS(err, "auto: wanted in 2 of 4 layers, read in ");
    CHECK_STR_CONTAINS(err, "auto wall-time check: ");
    test_read_text(json_path, json, sizeof json);
    const char *la = strstr(json, "\"lookahead_prediction\"");
    const char *pp = strstr(json, "\"policy_prediction\"");
    CHECK(la != NULL && pp != NULL);
    if (la && pp) {
        CHECK_EQ_INT(json_int(la, "layers_on"), 2);
        CHECK_EQ_INT(json_int(pp, "layers_on"), 0);
        /* where it is wanted, the wall-time check starts with the reads on */
        CHECK(json_int(la, "layers_read") >= 0 && json_int(la, "layers_read") <= 2);
        CHECK_EQ_INT(json_int(pp, "layers_read"), 0);
        long long reads = json_int(la, "reads");
        long long used = json_int(la, "reads_used");
        CHECK(reads > 0 && used > 0 && used <= reads);
        CHECK_MSG((double)used / (double)reads >= 0.45, "lookahead: %lld of %lld reads used", used,
                  reads);
        CHECK(json_int(json, "prefetches") > 0); /* it did read ahead */
    }
    /* explicit counts are not auto */
    snprintf(cmd, sizeof cmd,
             "%s %s -m %s --expert-cache 25%% --prefetch 0 --lookahead 0 --stats-json %s", bin(),
             run, trained, json_path);
    CHECK_EQ_INT(run_cmd(cmd, out, sizeof out, err, sizeof err), 0);
    CHECK_MSG(strcmp(out, out_ref) == 0, "text differs:\n%s\nvs\n%s", out, out_ref);
    test_read_text(json_path, json, sizeof json);
    la = strstr(json, "\"lookahead_prediction\"");
    CHECK(la != NULL && json_int(la, "layers_on") == -1 && json_int(la, "layers_read") == -1 &&
          json_int(la, "predicted") == 0);
    CHECK_EQ_INT(json_int(json, "prefetches"), 0);
    remove(json_path);
}

static void test_logits_identical(void) {
    char model[1024];
    char cmd[4096];
    char out[4096];
    char err[4096];
    char a[512];
    char b[512];
    if (!test_shared_path("testdata/models/tiny-mixtral-F32.gguf", model, sizeof model)) return;
    test_tmp_path("cli_offload_a.f32", a, sizeof a);
    test_tmp_path("cli_offload_b.f32", b, sizeof b);
    const char *ids = "1 15043 3186 29892 920 526 366 29973";
    snprintf(cmd, sizeof cmd, "%s logits -m %s --ids '%s' -o %s -b 3", bin(), model, ids, a);
    CHECK_EQ_INT(run_cmd(cmd, out, sizeof out, err, sizeof err), 0);
    snprintf(cmd, sizeof cmd, "%s logits -m %s --ids '%s' -o %s -b 3 --expert-cache 12.5%%", bin(),
             model, ids, b);
    CHECK_EQ_INT(run_cmd(cmd, out, sizeof out, err, sizeof err), 0);
    size_t na = 0;
    size_t nb = 0;
    char *x = golden_read_file(a, &na);
    char *y = golden_read_file(b, &nb);
    CHECK(x && y && na == (size_t)8 * 32000 * sizeof(float) && na == nb && memcmp(x, y, na) == 0);
    free(x);
    free(y);
    remove(a);
    remove(b);
}

static void test_bench_cold_warm(void) {
    char model[1024];
    char cmd[4096];
    char out[8192];
    char err[8192];
    if (!test_shared_path("testdata/models/tiny-mixtral-Q4_0.gguf", model, sizeof model)) return;
    snprintf(cmd, sizeof cmd, "%s bench -m %s -p 8 -n 8 -r 2 --expert-cache 50%%", bin(), model);
    CHECK_EQ_INT(run_cmd(cmd, out, sizeof out, err, sizeof err), 0);
    CHECK_STR_CONTAINS(out, "\nweights:  routed experts read from the file through the expert "
                            "cache, the others read into memory\n");
    CHECK_STR_CONTAINS(out, "prefill-cold");
    CHECK_STR_CONTAINS(out, "prefill-warm");
    CHECK_STR_CONTAINS(out, "decode-cold");
    CHECK_STR_CONTAINS(out, "decode-warm");
    /* the cold prefill starts from an empty cache: every access misses, hit ratio 0 */
    const char *p = strstr(out, "prefill-cold");
    double hit = -1;
    if (p) { /* the fifth column */
        const char *q = p;
        for (int field = 0; field < 4 && q; field++) {
            q = strchr(q, ' ');
            while (q && *q == ' ')
                q++;
        }
        if (q) hit = strtod(q, NULL);
    }
    CHECK_NEAR(hit, 0.0, 1e-9);
}

/* bench --record-routing: one request per run (the warm-up too), and `moeinf sim` replaying the
 * record at the same cache size, policy and micro-batch finds the engine's misses exactly. */
static void test_bench_record_routing(void) {
    char model[1024];
    char cmd[4096];
    char out[8192];
    char err[8192];
    char trace[512];
    char json_path[512];
    char json[16384];
    char text[16384];
    if (!test_shared_path("testdata/models/tiny-mixtral-Q4_0.gguf", model, sizeof model)) return;
    test_tmp_path("cli_bench_record.trace", trace, sizeof trace);
    test_tmp_path("cli_bench_record.json", json_path, sizeof json_path);
    snprintf(cmd, sizeof cmd,
             "%s bench -m %s -p 8 -n 8 -r 2 --expert-cache 50%% --policy lru "
             "--record-routing %s --stats-json %s",
             bin(), model, trace, json_path);
    CHECK_EQ_INT(run_cmd(cmd, out, sizeof out, err, sizeof err), 0);
    test_read_text(trace, text, sizeof text);
    CHECK_STR_CONTAINS(text, "\n# n_requests: 3\n");
    CHECK_STR_CONTAINS(text, "\n# req 0 moeinf/bench prefill=8 decode=8\n");
    CHECK_STR_CONTAINS(text, "\n# req 2 moeinf/bench prefill=8 decode=8\n");
    test_read_text(json_path, json, sizeof json);
    long long misses = json_int(json, "misses");
    CHECK(misses > 0);
    /* the prompt is one micro-batch of 8 (bench's -b is clamped to its context of 17) */
    snprintf(cmd, sizeof cmd, "%s sim --trace %s --cache 8 --policy lru --batch 8 --json", bin(),
             trace);
    CHECK_EQ_INT(run_cmd(cmd, out, sizeof out, err, sizeof err), 0);
    CHECK_EQ_INT(json_int(out, "misses"), misses);
    snprintf(cmd, sizeof cmd, "%s bench -m %s --route-trace %s --record-routing %s", bin(), model,
             trace, trace);
    CHECK_EQ_INT(run_cmd(cmd, out, sizeof out, err, sizeof err), 2);
    CHECK_STR_CONTAINS(err, "--record-routing does not go with --route-trace");
    remove(trace);
    remove(json_path);
}

static void test_bad_values(void) {
    char model[1024];
    char cmd[4096];
    char out[4096];
    char err[4096];
    char dense[512];
    if (!test_shared_path("testdata/models/tiny-mixtral-Q8_0.gguf", model, sizeof model)) return;

    struct {
        const char *args;
        int code;
        const char *msg;
    } cases[] = {
        {"--expert-cache 0", 2, "invalid expert cache size '0'"},
        {"--expert-cache 10GB", 2, "invalid expert cache size '10GB'"},
        {"--expert-cache 150%", 2, "a percentage must be in (0, 100]"},
        {"--expert-cache", 2, "--expert-cache"},
        {"--policy lru", 2, "need --expert-cache"},
        {"--stats", 2, "need --expert-cache"},
        {"--expert-cache 25% --expert-io sideways", 2, "--expert-io must be direct, cached or nocache"},
        {"--expert-cache 25% --policy nosuch", 2, "--policy: unknown cache policy 'nosuch'"},
        {"--expert-cache 25% --policy belady", 2, "belady is offline"},
        {"--expert-cache 1K", 2, "at least 2 slots"}, /* from the header, before the load */
        {"--expert-cache 25% --stats-json /no/such/dir/s.json", 1, "/no/such/dir/s.json"},
        {"--prefetch 2", 2, "need --expert-cache"},
        /* -1 is the library's auto: the CLI spells it auto */
        {"--expert-cache 25% --prefetch -1", 2, "'-1' for --prefetch: must be auto or at least 0"},
        {"--expert-cache 25% --lookahead -1", 2, "'-1' for --lookahead: must be auto or at least 0"},
        {"--expert-cache 25% --prefetch sometimes", 2, "'sometimes' for --prefetch"},
        {"--expert-cache 25% --prefetch 65", 2, "--prefetch: 65 is not in [0, 64], nor auto"},
        /* past the model's layers: known once the model is loaded */
        {"--expert-cache 25% --lookahead 2", 1, "--lookahead: 2 is not in [0, 1]"},
        {"--expert-cache 25% --lookahead 4096", 2, "--lookahead: 4096 is not in [0, 4095]"},
        {"--expert-cache 25% --io-threads x", 2, "--io-threads"},
        {"--expert-cache 25% --io-threads 0 --lookahead 1", 2,
         "--lookahead: reading ahead runs on I/O threads: it needs --io-threads of at least 1"},
        {"--expert-cache 25% --io-threads 65", 2, "--io-threads: 65 is not in [0, 64]"},
        {"-c 0", 2, "-c: 0 is not in [1, 16777216]"},
        {"-t -1", 2, "-t: -1 is not in [0, 1024]"},
    };

    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        snprintf(cmd, sizeof cmd, "%s run -m %s -p hi -n 2 %s", bin(), model, cases[i].args);
        int code = run_cmd(cmd, out, sizeof out, err, sizeof err);
        CHECK_MSG(code == cases[i].code, "'%s': exit %d, expected %d", cases[i].args, code,
                  cases[i].code);
        CHECK_STR_CONTAINS(err, cases[i].msg);
        CHECK_MSG(strchr(err, '\n') == strrchr(err, '\n'), "'%s': more than one line: %s",
                  cases[i].args, err);
        /* nothing was generated before the error */
        CHECK_MSG(out[0] == '\0', "'%s': output before the error: %s", cases[i].args, out);
    }
    /* a dense model has no experts to cache */
    test_tmp_path("cli_offload_dense.gguf", dense, sizeof dense);
    snprintf(cmd, sizeof cmd,
             "%s gen-model -o %s --experts 0 --layers 1 --embd 64 --ff 64 --heads 2 "
             "--kv-heads 1 --type f32 >/dev/null && %s run -m %s -p hi -n 2 --expert-cache 50%%",
             bin(), dense, bin(), dense);
    CHECK_EQ_INT(run_cmd(cmd, out, sizeof out, err, sizeof err), 1);
    CHECK_STR_CONTAINS(err, "dense model");
    remove(dense);
}

int main(void) {
    RUN(test_run_same_text_and_stats);
    RUN(test_reading_ahead);
    RUN(test_auto_reading_ahead);
    RUN(test_logits_identical);
    RUN(test_bench_cold_warm);
    RUN(test_bench_record_routing);
    RUN(test_bad_values);
    return test_report();
}
