/*
 * test_fit.c - `moeinf fit` as a user calls it: the sizes it prints against the tensor table
 * `moeinf inspect` prints and against sizes worked out by hand from the geometry; the same
 * sizes from a file cut after its tensor table and from the gen-model preset the file was
 * written with; the probe cache reused; bad input as a one-line error and a non-zero exit.
 * The machine's figures come from a seeded probe cache, so nothing here is timed.
 */
#include <inttypes.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "app/fit.h"
#include "offload/store.h"
#include "test.h"

#define OUT_SIZE 16384

static char g_model[512], g_cache[512], g_env[1200];

static int fit(const char *args, char *out, char *err) {
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "%s '%s' fit %s", g_env, test_moeinf_bin(), args);
    return test_run_shell("fit", cmd, out, OUT_SIZE, err, OUT_SIZE);
}

/* The number after `key` at the start of a line of out ("resident         123 bytes"). */
static uint64_t field(const char *out, const char *key) {
    char pat[64];
    snprintf(pat, sizeof pat, "\n%s ", key);
    const char *p = strstr(out, pat);
    if (!p && strncmp(out, pat + 1, strlen(pat) - 1) == 0) p = out - 1;
    if (!p) return UINT64_MAX;
    p += strlen(pat);
    while (*p == ' ')
        p++;
    return strtoull(p, NULL, 10);
}

/* Every line of out from `from` to the line starting with `to` (exclusive), in buf. */
static void lines_between(const char *out, const char *from, const char *to, char *buf,
                          size_t size) {
    buf[0] = '\0';
    const char *a = strstr(out, from);
    const char *b = a ? strstr(a, to) : NULL;
    if (!a || !b) return;
    snprintf(buf, size, "%.*s", (int)(b - a), a);
}

/* The probe cache holding one line for 1 thread, the cache folder's disk and type 8: its
 * time, key, then `figures`; the cache file's path in path. */
static void write_cache_line(const char *figures, char *path, size_t size) {
    char dir[600];
    snprintf(dir, sizeof dir, "%s/moeinf", g_cache);
    mkdir(g_cache, 0700);
    mkdir(dir, 0755);
    struct stat sb;
    CHECK(stat(dir, &sb) == 0);
    snprintf(path, size, "%s/fit-probe.txt", dir);
    FILE *f = fopen(path, "w");
    CHECK(f != NULL);
    if (!f) return;
    fprintf(f, "%lld 1 %llu 8 %s\n", (long long)time(NULL), (unsigned long long)sb.st_dev, figures);
    fclose(f);
}

/* A seeded probe cache: 10 GB/s memory, 2 GB/s disk, 20 G/s compute; attention's kernels 10
 * G/s q.k, 4 G/s weighted sum; for 1 thread on the disk of the cache
 * folder (the model is too small to probe) and the expert type Q8_0 (8). */
static void seed_cache(void) {
    char path[700];
    write_cache_line("10.000 2.000 20.000 0 10.000 4.000 5", path, sizeof path);
}

static bool setup(void) {
    test_tmp_path("fit-model.gguf", g_model, sizeof g_model);
    test_tmp_path("fit-cache", g_cache, sizeof g_cache);
    snprintf(g_env, sizeof g_env, "XDG_CACHE_HOME='%s' TMPDIR='%s'", g_cache, g_cache);
    char cmd[1200];
    char out[OUT_SIZE];
    char err[OUT_SIZE];
    /* gen-model's default: llama, 4 layers, 8 experts top 2, n_embd 256, n_ff 512, 8 heads,
     * 4 KV heads, Q8_0 */
    snprintf(cmd, sizeof cmd, "'%s' gen-model -o '%s'", test_moeinf_bin(), g_model);
    int rc = test_run_shell("fit", cmd, out, sizeof out, err, sizeof err);
    CHECK_MSG(rc == 0, "gen-model: %s", err);
    seed_cache();
    return rc == 0;
}

static void test_sizes(void) {
    char out[OUT_SIZE];
    char err[OUT_SIZE];
    char cmd[1200];
    char ins[1 << 16];
    char args[700];
    snprintf(args, sizeof args, "-m '%s' -t 1 --memory 1G", g_model);
    CHECK_EQ_INT(fit(args, out, err), 0);
    /* by hand: Q8_0 is 34 bytes per 32 weights; gate and up 512 rows of 256, down 256 of 512 */
    const uint64_t expert = 3ull * 512 * 256 / 32 * 34;
    CHECK_MSG(strstr(out, "= 32 x 417792 bytes") != NULL, "%s", out);
    CHECK(expert == 417792);
    CHECK_EQ_INT((long long)field(out, "experts"), (long long)(32 * expert));
    /* K and V of 4 KV heads x 32 dims, F16, on 4 layers */
    CHECK_EQ_INT((long long)field(out, "KV per token"), 4 * 2 * 4 * 32 * 2);
    /* from the tensor table inspect prints: every tensor's bytes, and the *_exps ones */
    snprintf(cmd, sizeof cmd, "'%s' inspect '%s'", test_moeinf_bin(), g_model);
    CHECK_EQ_INT(test_run_shell("fit", cmd, ins, sizeof ins, err, sizeof err), 0);
    uint64_t all = 0;
    uint64_t exps = 0;
    const char *p = strstr(ins, "tensors:\n");
    CHECK(p != NULL);
    for (p = p ? strchr(p + 9, '\n') : NULL; p && p[1]; p = strchr(p + 1, '\n')) {
        char name[128];
        char *after = NULL;
        strtoull(p + 1, &after, 10);
        if (after == p + 1 || sscanf(after, " %127s", name) != 1) continue;
        const char *end = strchr(p + 1, '\n');
        const char *last = end ? end : p + strlen(p);
        while (last > p && last[-1] != ' ')
            last--;
        uint64_t bytes = strtoull(last, NULL, 10);
        all += bytes;
        if (strstr(name, "_exps.")) exps += bytes;
    }
    CHECK_EQ_INT((long long)field(out, "resident"), (long long)all);
    CHECK_EQ_INT((long long)field(out, "experts"), (long long)exps);
    CHECK_EQ_INT((long long)field(out, "non-expert"), (long long)(all - exps));
    CHECK_MSG(strstr(out, "cached, probed") != NULL, "the seeded cache was not used: %s", out);
    CHECK(strstr(out, "memory 10.0 GB/s, disk 2.00 GB/s") != NULL);
}

/* The size lines of a run: from "resident" to "machine". */
static void size_lines(const char *model_arg, const char *extra, char *buf, size_t size) {
    char out[OUT_SIZE];
    char err[OUT_SIZE];
    char args[800];
    snprintf(args, sizeof args, "-m %s -t 1 %s", model_arg, extra);
    CHECK_MSG(fit(args, out, err) == 0, "fit -m %s: %s", model_arg, err);
    lines_between(out, "\nresident", "\nmachine", buf, size);
    CHECK(buf[0] != '\0');
}

static void test_truncated_and_preset(void) {
    char whole[4096];
    char cut[4096];
    char preset[4096];
    char q[700];
    snprintf(q, sizeof q, "'%s'", g_model);
    size_lines(q, "", whole, sizeof whole);
    /* the header and tensor table only: up to the data section (inspect's "data at offset") */
    char cmd[1600];
    char ins[1 << 16];
    char err[OUT_SIZE];
    snprintf(cmd, sizeof cmd, "'%s' inspect '%s'", test_moeinf_bin(), g_model);
    CHECK_EQ_INT(test_run_shell("fit", cmd, ins, sizeof ins, err, sizeof err), 0);
    const char *d = strstr(ins, "data at offset ");
    CHECK(d != NULL);
    unsigned long long data_at = d ? strtoull(d + 15, NULL, 10) : 0;
    char part[512];
    test_tmp_path("fit-part.gguf", part, sizeof part);
    snprintf(cmd, sizeof cmd, "head -c %llu '%s' > '%s'; true", data_at + 1000, g_model, part);
    CHECK_EQ_INT(test_run_shell("fit", cmd, ins, sizeof ins, err, sizeof err), 0);
    snprintf(q, sizeof q, "'%s'", part);
    size_lines(q, "", cut, sizeof cut);
    CHECK_MSG(strcmp(whole, cut) == 0, "whole:\n%s\ncut:\n%s", whole, cut);
    /* the preset the file was written with, header never written to disk as a model */
    size_lines("default", "", preset, sizeof preset);
    CHECK_MSG(strcmp(whole, preset) == 0, "whole:\n%s\npreset:\n%s", whole, preset);
    /* the loader refuses the cut file: fit's read path is its own */
    snprintf(cmd, sizeof cmd, "'%s' run -m '%s' -n 1 -p hi", test_moeinf_bin(), part);
    CHECK(test_run_shell("fit", cmd, ins, sizeof ins, err, sizeof err) == 1);
    remove(part);
}

static void test_offload_prediction(void) {
    char out[OUT_SIZE];
    char err[OUT_SIZE];
    char args[700];
    snprintf(args, sizeof args, "-m '%s' -t 1", g_model);
    CHECK_EQ_INT(fit(args, out, err), 0);
    const uint64_t need = field(out, "need resident");
    /* half the experts' bytes less: 16 x 417792 bytes left for slots of 417792 + 3 x 4 KiB
     * rounded up to 4 KiB (430080 bytes) hold 15 */
    snprintf(args, sizeof args, "-m '%s' -t 1 --memory %" PRIu64, g_model,
             need - (uint64_t)16 * 417792);
    CHECK_EQ_INT(fit(args, out, err), 0);
    CHECK_MSG(strstr(out, "(15 of 32 experts") != NULL, "%s", out);
    CHECK(strstr(out, "--expert-cache 6M ") != NULL); /* 15 x 430080 bytes, in MiB */
    CHECK(strstr(out, "synthetic routing") != NULL);
    /* a recorded routing: every token, prompt and decode, takes experts 0 and 1 of each layer:
     * 8 experts in the 15 slots, in from the prompt, so every decode access hits */
    char trace[512];
    test_tmp_path("fit-routing.txt", trace, sizeof trace);
    CHECK(test_write_text(trace, "# moe-trace v1\n# n_layers: 4\n# n_experts: 8\n# top_k: 2\n"
                                 "0 P 0 0,1|0,1|0,1|0,1\n0 D 1 0,1|0,1|0,1|0,1\n"
                                 "0 D 2 1,0|1,0|1,0|1,0\n"));
    snprintf(args, sizeof args, "-m '%s' -t 1 --memory %" PRIu64 " --trace '%s'", g_model,
             need - (uint64_t)16 * 417792, trace);
    CHECK_EQ_INT(fit(args, out, err), 0);
    CHECK_MSG(strstr(out, "hit ratio 1.00:") != NULL && strstr(out, "the recorded routing") != NULL,
              "%s", out);
    /* a routing of another geometry (1 layer) is refused, in one line */
    CHECK(test_write_text(trace, "# moe-trace v1\n# n_layers: 1\n# n_experts: 8\n# top_k: 2\n"
                                 "0 P 0 0,1\n0 D 1 0,1\n"));
    CHECK_EQ_INT(fit(args, out, err), 1);
    CHECK_MSG(strstr(err, "the trace has 1 layers x 8 experts, top 2; the model 4 x 8, top 2") !=
                      NULL &&
                  strchr(err, '\n') == err + strlen(err) - 1,
              "%s", err);
    remove(trace);
}

static bool near(double got, double want) {
    return fabs(got - want) <= 1e-9 * fabs(want);
}

/* The prefill model's inputs from the tensor table, worked out by hand from gen-model's
 * default geometry (4 layers, n_embd 256, 8 heads of 32, 4 KV heads, 8 experts of n_ff 512,
 * top 2, vocabulary 1010). */
static void test_prefill_inputs(void) {
    struct cli_fit_model m;
    struct moeinf_error err;
    CHECK_EQ_INT(cli_fit_read(g_model, &m, &err), MOEINF_OK);
    /* per layer q 256x256, k and v 256x128, output 256x256, router 256x8, 2 experts of gate
     * and up 256x512 and down 512x256; then the lm_head 256x1010 */
    const uint64_t layer = 65536 + 2 * 32768 + 65536 + 2048 + 2 * 3 * 131072;
    CHECK_EQ_INT((long long)m.output_elems, 256 * 1010);
    CHECK_EQ_INT((long long)m.active_elems, (long long)(4 * layer + 256ull * 1010));
    CHECK_EQ_INT((long long)m.routed_elems, 4 * 2 * 3 * 131072);
    /* a 512-token prompt: 512 x 513 / 2 = 131328 position pairs per layer, each 8 query heads'
     * dot and weighted sum of 32 */
    const double pairs = 131328.0 * 4;
    CHECK_MSG(near(m.attn_dot, pairs * 8 * 32), "%.0f", m.attn_dot);
    CHECK_MSG(near(m.attn_wsum, pairs * 8 * 32), "%.0f", m.attn_wsum);
    cli_fit_model_free(&m);
}

/* The misses' disk probe reads each missed expert's three parts as the store does: each
 * part's 4 KiB-aligned window. Two layers of 3 experts, parts 9000 bytes long at unaligned
 * offsets, 10000 bytes apart; expert 1 of layer 0 and expert 0 of layer 1 missed. By hand:
 *   layer 0, expert 1: 15000..24000 -> 12288..24576 (12288), 110000..119000 -> 106496..122880
 *     (16384), 210000..219000 -> 208896..221184 (12288)
 *   layer 1, expert 0: 300000..309000, 400000..409000, 500000..509000 -> 12288 each
 * 77824 bytes in all. The windows are read from a file of 600000 bytes (O_DIRECT where the
 * folder allows it: elsewhere the probe reports 0 and the prediction keeps the random-read
 * rate). */
static void test_miss_probe_windows(void) {
    char path[512];
    test_tmp_path("fit-misses.bin", path, sizeof path);
    FILE *f = fopen(path, "wb");
    CHECK(f != NULL);
    if (!f) return;
    static uint8_t zeros[600000];
    CHECK(fwrite(zeros, 1, sizeof zeros, f) == sizeof zeros);
    CHECK(fclose(f) == 0);
    struct moeinf_store_layer layout[2] = {
        {{5000, 100000, 200000}, {10000, 10000, 10000}, {9000, 9000, 9000}},
        {{300000, 400000, 500000}, {10000, 10000, 10000}, {9000, 9000, 9000}},
    };
    struct cli_fit_model m;
    memset(&m, 0, sizeof m);
    m.n_moe_layers = 2;
    m.n_expert = 3;
    m.layout = layout;
    const uint64_t misses[6] = {0, 5, 0, 2, 0, 0};
    uint64_t footprint = 0;
    const double gbps = cli_fit_probe_misses(path, &m, misses, &footprint);
    CHECK_EQ_INT((long long)footprint, 77824);
    CHECK_MSG(gbps >= 0 && gbps < 1000, "%g GB/s", gbps);
    const uint64_t none[6] = {0};
    CHECK(cli_fit_probe_misses(path, &m, none, &footprint) == 0 && footprint == 0);
    m.header_only = true; /* the experts' data is not on disk */
    CHECK(cli_fit_probe_misses(path, &m, misses, &footprint) == 0);
    remove(path);
}

/* The simulator replays prefill in micro-batches as the engine runs them. Two requests of the
 * same routing (2 layers x 4 experts, top 2): a prefill of 4 tokens choosing {0, 1}, {2, 3},
 * {0, 1}, {2, 3} at each layer, then one decode token choosing {0, 1}; a cache of all 8. The
 * first prefill's one micro-batch misses its 8 experts, the second's finds all 8: 8 of 16.
 * (Token by token the first prefill's last 2 tokens would hit: 24 of 32.) */
static void test_prefill_hit_in_micro_batches(void) {
    char path[512];
    test_tmp_path("fit-prefill.trace", path, sizeof path);
    CHECK(test_write_text(path, "# moe-trace v1\n# n_layers: 2\n# n_experts: 4\n# top_k: 2\n"
                                "# req 0 test/0 prefill=4 decode=1\n"
                                "# req 1 test/1 prefill=4 decode=1\n"
                                "0 P 0 0,1|0,1\n0 P 1 2,3|2,3\n0 P 2 0,1|0,1\n0 P 3 2,3|2,3\n"
                                "0 D 4 0,1|0,1\n"
                                "1 P 0 0,1|0,1\n1 P 1 2,3|2,3\n1 P 2 0,1|0,1\n1 P 3 2,3|2,3\n"
                                "1 D 4 0,1|0,1\n"));
    struct cli_fit_model m;
    memset(&m, 0, sizeof m);
    m.n_moe_layers = 2;
    m.n_expert = 4;
    m.n_expert_used = 2;
    double hit = -1;
    double prefill_hit = -1;
    char source[256];
    struct moeinf_error err;
    CHECK_EQ_INT(
        cli_fit_hit_ratio(&m, 8, path, NULL, &hit, &prefill_hit, source, sizeof source, &err),
        MOEINF_OK);
    CHECK_MSG(prefill_hit == 0.5, "%g", prefill_hit);
    CHECK_MSG(hit == 1, "%g", hit);
    remove(path);
}

/* Prefill's waiting for reads in one layer's step, by hand: experts computing in c = 1 (any
 * unit) and read in r each, 8 used. */
static void test_prefill_read_waves(void) {
    /* one wave of 8, 2 cached: the 6 misses are read from its start and computed once there:
     * with r = 1.5 the reads end at 9 and the last computes until 10, against 8 computing */
    CHECK_MSG(near(cli_fit_prefill_read_wait(8, 2, 8, 1, 1.5), 2), "%g",
              cli_fit_prefill_read_wait(8, 2, 8, 1, 1.5));
    /* r = 0.5: the reads keep ahead of the computing: nothing to wait for */
    CHECK(cli_fit_prefill_read_wait(8, 2, 8, 1, 0.5) == 0);
    /* waves of 4: the cached expert and 3 misses (reads end at 1.5 while the cached one
     * computes: the wave takes 4), then 4 misses with nothing cached to compute meanwhile:
     * the first read (0.5), then 4 computed: 0.5 waited */
    CHECK_MSG(near(cli_fit_prefill_read_wait(8, 1, 4, 1, 0.5), 0.5), "%g",
              cli_fit_prefill_read_wait(8, 1, 4, 1, 0.5));
    /* the same with r = 2: wave 1 reads until 6 and computes its last until 7 (3 waited),
     * wave 2 until 8 and 9 (5 waited) */
    CHECK_MSG(near(cli_fit_prefill_read_wait(8, 1, 4, 1, 2), 8), "%g",
              cli_fit_prefill_read_wait(8, 1, 4, 1, 2));
    /* every expert cached: no reads */
    CHECK(cli_fit_prefill_read_wait(8, 8, 8, 1, 2) == 0);
}

/* The predicted rates of a made-up model on made-up probe figures, against the arithmetic by
 * hand: resident, then with an expert cache of a quarter of the experts. */
static void test_prediction_arithmetic(void) {
    struct cli_fit_model m;
    memset(&m, 0, sizeof m);
    snprintf(m.arch, sizeof m.arch, "llama");
    m.n_layer = 4;
    m.n_moe_layers = 4;
    m.n_expert = 8;
    m.n_expert_used = 2;
    m.expert_bytes = 1000000;
    m.slot_bytes = 1048576;
    m.experts_bytes = 32000000;
    m.nonexpert_bytes = 2000000;
    m.weight_bytes = 34000000;
    m.decode_bytes = 5000000;
    m.nonexpert_decode = 1000000;
    m.active_elems = 1000000;
    m.output_elems = 100000;
    m.routed_elems = 400000;
    m.attn_dot = 1e8;
    m.attn_wsum = 4e7;
    struct cli_fit_machine mc;
    memset(&mc, 0, sizeof mc);
    mc.mem_gbps = 10;
    mc.disk_gbps = 2;
    mc.dot_gops = 20;
    mc.fdot_gops = 10;
    mc.wsum_gops = 4;
    mc.threads = 1;
    struct cli_fit_prediction p;
    struct moeinf_error err;
    char source[256];
    /* the products: 900000 weights x 512 tokens + the lm_head's 100000 once = 460.9e6 at
     * 20e9/s; the attention: 1e8 / 10e9 + 4e7 / 4e9 = 20 ms */
    const double t_dot = 0.023045 / CLI_FIT_DOT_EFF;
    const double t_attn = 0.020 / CLI_FIT_ATTN_EFF;
    CHECK_EQ_INT(
        cli_fit_predict(&m, &mc, 1ull << 40, 0, NULL, NULL, &p, source, sizeof source, &err),
        MOEINF_OK);
    CHECK(p.resident && p.runs);
    CHECK_MSG(near(p.t_dot, t_dot) && near(p.t_attn, t_attn), "%g %g", p.t_dot, p.t_attn);
    CHECK_MSG(near(p.prefill_tps, 512 / (t_dot + t_attn)), "%g", p.prefill_tps);
    CHECK_MSG(near(p.decode_tps, 10e9 * CLI_FIT_MEM_EFF / 5e6), "%g", p.decode_tps);
    /* 8 slots of the 32 experts: the non-expert weights and the 64 MiB margin, then 8 slots */
    const uint64_t memory = 2000000 + (64ull << 20) + 8ull * 1048576 + 1000;
    CHECK_EQ_INT(cli_fit_predict(&m, &mc, memory, 0, NULL, NULL, &p, source, sizeof source, &err),
                 MOEINF_OK);
    CHECK(!p.resident && p.runs);
    CHECK_EQ_INT(p.cache_slots, 8);
    /* prefill: a 512-token batch uses all 8 experts of each layer (1 - 0.75^512 of them: 1 to
     * 1e-60); the simulator's micro-batches say what share of them is cached. An expert
     * computes 400000 / 4 / 2 weights for each of its 128 tokens (512 x 2 / 8) at 20e9 a
     * second: 0.32 ms, and is read in 1e6 B / 2e9 B/s (/ the efficiency); 4 layers */
    const double c = 0.00032;
    const double r = 1e6 / (2e9 * CLI_FIT_PREFILL_READ_EFF);
    /* the share is the simulator's on the same (synthetic) routing, not the slots' 8 of 32 */
    double sim_hit = -1;
    double sim_prefill_hit = -1;
    CHECK_EQ_INT(cli_fit_hit_ratio(&m, 8, NULL, NULL, &sim_hit, &sim_prefill_hit, source,
                                   sizeof source, &err),
                 MOEINF_OK);
    CHECK_MSG(p.prefill_hit == sim_prefill_hit && sim_prefill_hit != 0.25, "%g %g", p.prefill_hit,
              sim_prefill_hit);
    const double t_read = 4 * cli_fit_prefill_read_wait(8, 8 * p.prefill_hit, 8, c, r);
    CHECK_MSG(t_read > 0.0001 && near(p.t_read, t_read), "%g (want %g)", p.t_read, t_read);
    CHECK_MSG(near(p.prefill_tps, 512 / (t_dot + t_attn + t_read)), "%g", p.prefill_tps);
    /* decode: the 1e6 non-expert bytes from memory, then max(the 4e6 expert bytes from
     * memory, (1 - hit) x 8 experts x 1e6 B from the disk), then LAYER_S for each of the 4
     * MoE layers */
    const double t_nonexpert = 1e6 / (10e9 * CLI_FIT_MEM_EFF);
    const double t_experts = 4e6 / (10e9 * CLI_FIT_MEM_EFF);
    const double t_disk = (1 - p.hit) * 8e6 / (2e9 * CLI_FIT_DISK_EFF);
    CHECK(p.hit > 0 && p.hit < 1);
    CHECK_MSG(near(p.t_nonexpert, t_nonexpert), "%g", p.t_nonexpert);
    CHECK_MSG(near(p.decode_tps, 1 / (t_nonexpert + (t_experts > t_disk ? t_experts : t_disk) +
                                      4 * CLI_FIT_LAYER_S)),
              "%g", p.decode_tps);
}

/* Cache lines of older probes are not reused: fit probes again, prints the new figures and
 * rewrites the line in the current format (version 5, 11 fields). The old lines: 11 fields
 * without a version (before PROBES_VERSION 2: the memory figure came from a plain stream, not the
 * decode kernel; its last figure, read as a version, is 4), version 2 (the disk read into 4 KiB
 * pages, which a virtual disk served at a third of the rate of the huge pages the expert cache
 * reads into), and versions 3 and 4 (12 fields: attention's F16 conversion, dot and axpy or
 * weighted sum, where it now runs q.k and the weighted sum on F16 rows). This runs the real
 * probes (about a second each); nothing is asserted about their values but that they are new. */
static void test_old_cache_line(void) {
    const char *old[4] = {
        "77.000 2.000 20.000 0 5.000 10.000 4.000", "77.000 0.700 20.000 1 5.000 10.000 4.000 2",
        "77.000 0.700 20.000 1 5.000 10.000 4.000 3", "77.000 0.700 20.000 1 5.000 10.000 4.000 4"};
    for (int i = 0; i < 4; i++) {
        char path[700];
        write_cache_line(old[i], path, sizeof path);
        char out[OUT_SIZE];
        char err[OUT_SIZE];
        char args[700];
        snprintf(args, sizeof args, "-m '%s' -t 1 --memory 1G", g_model);
        CHECK_EQ_INT(fit(args, out, err), 0);
        CHECK_MSG(strstr(out, "memory 77.0 GB/s") == NULL && strstr(out, "cached, probed") == NULL,
                  "the old line %d was reused: %s", i, out);
        char line[512] = "";
        FILE *f = fopen(path, "r");
        CHECK(f != NULL);
        if (f) {
            CHECK(fgets(line, sizeof line, f) != NULL);
            fclose(f);
        }
        const size_t len = strlen(line);
        CHECK_MSG(len > 3 && strcmp(line + len - 3, " 5\n") == 0, "cache line: %s", line);
        int fields = 0;
        for (const char *p = line; *p; p++)
            fields += (p == line || p[-1] == ' ') && *p != ' ';
        CHECK_EQ_INT(fields, 11);
    }
    seed_cache(); /* the seeded figures again, for the tests after this one */
}

static void test_bad_input(void) {
    char out[OUT_SIZE];
    char err[OUT_SIZE];
    char args[1400];
    char path[512];
    char cmd[1600];
    /* not a GGUF */
    test_tmp_path("fit-not.gguf", path, sizeof path);
    FILE *f = fopen(path, "w");
    CHECK(f != NULL);
    if (f) {
        fputs("this is not a model\n", f);
        fclose(f);
    }
    snprintf(args, sizeof args, "-m '%s' -t 1", path);
    CHECK_EQ_INT(fit(args, out, err), 1);
    CHECK_MSG(strstr(err, "not a GGUF") != NULL && strchr(err, '\n') == err + strlen(err) - 1, "%s",
              err);
    CHECK(out[0] == '\0');
    /* cut inside the tensor table: 200 bytes before the data section */
    char ins[1 << 16];
    snprintf(cmd, sizeof cmd, "'%s' inspect '%s'", test_moeinf_bin(), g_model);
    CHECK_EQ_INT(test_run_shell("fit", cmd, ins, sizeof ins, err, sizeof err), 0);
    const char *d = strstr(ins, "data at offset ");
    unsigned long long data_at = d ? strtoull(d + 15, NULL, 10) : 0;
    snprintf(cmd, sizeof cmd, "head -c %llu '%s' > '%s'; true", data_at - 200, g_model, path);
    CHECK_EQ_INT(test_run_shell("fit", cmd, ins, sizeof ins, err, sizeof err), 0);
    snprintf(args, sizeof args, "-m '%s' -t 1", path);
    CHECK_EQ_INT(fit(args, out, err), 1);
    CHECK_MSG(strstr(err, "truncated") != NULL && strchr(err, '\n') == err + strlen(err) - 1, "%s",
              err);
    remove(path);
    /* a budget the model cannot run in */
    snprintf(args, sizeof args, "-m '%s' -t 1 --memory 1M", g_model);
    CHECK_EQ_INT(fit(args, out, err), 1);
    CHECK_MSG(strstr(err, "too small") != NULL && strchr(err, '\n') == err + strlen(err) - 1, "%s",
              err);
    /* neither a file nor a preset */
    CHECK_EQ_INT(fit("-m no-such-model -t 1", out, err), 1);
    CHECK(strstr(err, "not a gen-model preset") != NULL);
    /* not a size */
    snprintf(args, sizeof args, "-m '%s' --memory lots", g_model);
    CHECK_EQ_INT(fit(args, out, err), 2);
}

int main(void) {
    if (!setup()) return test_report();
    RUN(test_sizes);
    RUN(test_truncated_and_preset);
    RUN(test_offload_prediction);
    RUN(test_prefill_inputs);
    RUN(test_prefill_read_waves);
    RUN(test_prefill_hit_in_micro_batches);
    RUN(test_miss_probe_windows);
    RUN(test_prediction_arithmetic);
    RUN(test_old_cache_line);
    RUN(test_bad_input);
    remove(g_model);
    return test_report();
}
