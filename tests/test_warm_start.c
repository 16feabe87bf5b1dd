/*
 * test_warm_start.c - warm starts (--eamc FILE, moeinf_context_expert_state_load/save): what
 * the cache policy learned survives a save and a load exactly (a context loaded from the file
 * and the context that wrote it, its cache emptied so that both start from the same contents,
 * hit and miss alike on every layer of the next requests, and save the same bytes); a file of
 * `moeinf sim --eamc` runs in `moeinf run --eamc` and the other way; a corrupt, truncated,
 * another policy's or another model's file is refused with one line naming it and is left as
 * it was, the context unchanged; a SIGTERM during `moeinf run` leaves a valid file.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "engine/engine.h"
#include "experts/eam.h"
#include "moeinf.h"
#include "test.h"

#define TINY "testdata/models/tiny-mixtral-Q8_0.gguf"

static struct moeinf_model *open_model(const char *path) {
    struct moeinf_model_params mp = moeinf_model_params_default();
    mp.offload_experts = true;
    struct moeinf_model *m = NULL;
    struct moeinf_error err;
    CHECK_EQ_INT(moeinf_model_load(path, &mp, &m, &err), MOEINF_OK);
    return m;
}

static struct moeinf_context *open_ctx(struct moeinf_model *m, const char *policy) {
    struct moeinf_context_params cp = moeinf_context_params_default();
    cp.n_ctx = 256;
    cp.n_threads = 1;
    cp.expert_cache.kind = MOEINF_EXPERT_CACHE_PERCENT;
    cp.expert_cache.percent = 25.0; /* 4 of tiny-mixtral's 2 x 8 experts */
    cp.expert_io = MOEINF_EXPERT_IO_CACHED;
    cp.expert_policy = policy;
    /* no reading ahead: whether a prefetch is dropped depends on the I/O threads' timing,
     * and these tests compare counts between contexts exactly */
    cp.expert_prefetch = 0;
    cp.expert_lookahead = 0;
    struct moeinf_context *ctx = NULL;
    struct moeinf_error err;
    CHECK_EQ_INT(moeinf_context_init(m, &cp, &ctx, &err), MOEINF_OK);
    return ctx;
}

/* Requests [first, first + n): a pseudo-random prompt of 6..13 ids, then 5 greedy tokens. */
static bool requests(struct moeinf_context *ctx, int first, int n) {
    const int n_vocab = moeinf_model_n_vocab(ctx->model);
    float *logits = malloc((size_t)n_vocab * sizeof *logits);
    if (!logits) return false;
    struct moeinf_error err;
    bool ok = true;
    for (int r = first; r < first + n && ok; r++) {
        uint64_t x = 0x51ED2701u + (uint64_t)r * 0x9E3779B97F4A7C15ull;
        int32_t ids[16];
        int len = 6 + r % 8;
        for (int i = 0; i < len; i++) {
            x = x * 6364136223846793005ull + 1442695040888963407ull;
            ids[i] = (int32_t)((x >> 33) % (uint64_t)n_vocab);
        }
        moeinf_context_reset(ctx);
        ok = moeinf_decode(ctx, ids, len, logits, false, &err) == MOEINF_OK;
        for (int t = 0; t < 5 && ok; t++) {
            int32_t best = 0;
            for (int32_t v = 1; v < n_vocab; v++)
                if (logits[v] > logits[best]) best = v;
            ok = moeinf_decode(ctx, &best, 1, logits, false, &err) == MOEINF_OK;
        }
    }
    free(logits);
    return ok;
}

/* Every expert leaves the cache, the policy told as for an eviction (engine internals: no
 * public call empties a cache). Between requests no read is in flight, and a slot the cache
 * frees is read again before its next use. */
static void empty_cache(struct moeinf_context *ctx) {
    moeinf_tier_evict_all(ctx->tier);
}

static size_t slurp(const char *path, uint8_t *buf, size_t cap) {
    FILE *f = fopen(path, "rb");
    if (!f) return 0;
    size_t n = fread(buf, 1, cap, f);
    fclose(f);
    return n;
}

static void spit(const char *path, const uint8_t *buf, size_t n) {
    FILE *f = fopen(path, "wb");
    if (!f) return;
    CHECK_EQ_INT(fwrite(buf, 1, n, f), n);
    fclose(f);
}

static uint8_t file_a[1 << 17];
static uint8_t file_b[1 << 17];

static void test_round_trip(void) {
    char model_path[1024];
    if (!test_shared_path(TINY, model_path, sizeof model_path)) return;
    char a[512];
    char b[512];
    test_tmp_path("warm_trip_a.eamc", a, sizeof a);
    test_tmp_path("warm_trip_b.eamc", b, sizeof b);
    struct moeinf_model *m = open_model(model_path);
    if (!m) return;
    static const char *const policies[] = {"reuse", "moe-infinity"};
    for (int k = 0; k < 2; k++) {
        struct moeinf_error err;
        struct moeinf_context *ca = open_ctx(m, policies[k]);
        struct moeinf_context *cb = open_ctx(m, policies[k]);
        struct moeinf_context *cold = open_ctx(m, policies[k]);
        if (!ca || !cb || !cold) goto next;
        remove(a);
        CHECK(requests(ca, 0, 12));
        CHECK_EQ_INT(moeinf_context_expert_state_save(ca, a, &err), MOEINF_OK);
        bool loaded = false;
        CHECK_EQ_INT(moeinf_context_expert_state_load(cb, a, &loaded, &err), MOEINF_OK);
        CHECK(loaded);
        empty_cache(ca);
        moeinf_context_expert_stats_reset(ca);
        CHECK(requests(ca, 12, 12));
        CHECK(requests(cb, 12, 12));
        CHECK(requests(cold, 12, 12));
        uint64_t hits_a = 0;
        uint64_t hits_cold = 0;
        bool differs = false;
        for (int l = 0; l < 2; l++) {
            struct moeinf_expert_stats sa;
            struct moeinf_expert_stats sb;
            struct moeinf_expert_stats sc;
            CHECK_EQ_INT(moeinf_context_expert_stats(ca, l, &sa, &err), MOEINF_OK);
            CHECK_EQ_INT(moeinf_context_expert_stats(cb, l, &sb, &err), MOEINF_OK);
            CHECK_EQ_INT(moeinf_context_expert_stats(cold, l, &sc, &err), MOEINF_OK);
            CHECK_EQ_INT(sa.accesses, sb.accesses);
            CHECK_MSG(sa.hits == sb.hits, "%s layer %d: %llu hits continuing, %llu loaded",
                      policies[k], l, (unsigned long long)sa.hits, (unsigned long long)sb.hits);
            CHECK_EQ_INT(sa.misses, sb.misses);
            CHECK_EQ_INT(sa.accesses, sc.accesses);
            hits_a += sa.hits;
            hits_cold += sc.hits;
            differs |= sa.hits != sc.hits;
        }
        /* what was learned changes the decisions: a cold context does otherwise */
        CHECK_MSG(differs, "%s: %llu hits warm, %llu cold", policies[k], (unsigned long long)hits_a,
                  (unsigned long long)hits_cold);
        /* and both learned the same from the new requests */
        CHECK_EQ_INT(moeinf_context_expert_state_save(ca, a, &err), MOEINF_OK);
        CHECK_EQ_INT(moeinf_context_expert_state_save(cb, b, &err), MOEINF_OK);
        size_t na = slurp(a, file_a, sizeof file_a);
        CHECK(na > 56 && na < sizeof file_a);
        CHECK(slurp(b, file_b, sizeof file_b) == na && !memcmp(file_a, file_b, na));
    next:
        moeinf_context_free(ca);
        moeinf_context_free(cb);
        moeinf_context_free(cold);
    }
    /* no cache, or a policy that learns nothing: an argument error, no file */
    struct moeinf_error err;
    struct moeinf_context *lru = open_ctx(m, "lru");
    remove(b);
    if (lru) {
        CHECK_EQ_INT(moeinf_context_expert_state_save(lru, b, &err), MOEINF_ERR_ARG);
        CHECK_STR_CONTAINS(err.msg, "lru");
        CHECK(!test_file_exists(b));
    }
    moeinf_context_free(lru);
    moeinf_model_free(m);
    remove(a);
    remove(b);
}

/* A refused file: an error naming it, the file untouched, the context's state unchanged (it
 * saves the same bytes as before the attempt). */
static void expect_refused(struct moeinf_context *ctx, const char *path, const char *defect,
                           const char *before_path) {
    static uint8_t file[1 << 17];
    static uint8_t again[1 << 17];
    static uint8_t before[1 << 17];
    static uint8_t after[1 << 17];
    size_t n = slurp(path, file, sizeof file);
    struct moeinf_error err;
    bool loaded = false;
    CHECK_EQ_INT(moeinf_context_expert_state_load(ctx, path, &loaded, &err), MOEINF_ERR_FORMAT);
    CHECK_STR_CONTAINS(err.msg, path);
    CHECK_STR_CONTAINS(err.msg, defect);
    CHECK(!strchr(err.msg, '\n'));
    CHECK(slurp(path, again, sizeof again) == n && !memcmp(file, again, n));
    char now_path[600];
    snprintf(now_path, sizeof now_path, "%s.now", before_path);
    CHECK_EQ_INT(moeinf_context_expert_state_save(ctx, now_path, &err), MOEINF_OK);
    size_t nb = slurp(before_path, before, sizeof before);
    CHECK(nb > 0 && slurp(now_path, after, sizeof after) == nb && !memcmp(before, after, nb));
    remove(now_path);
}

static void test_refused_files(void) {
    char model_path[1024];
    if (!test_shared_path(TINY, model_path, sizeof model_path)) return;
    char good[512];
    char bad[512];
    char mine[512];
    test_tmp_path("warm_refuse_good.eamc", good, sizeof good);
    test_tmp_path("warm_refuse_bad.eamc", bad, sizeof bad);
    test_tmp_path("warm_refuse_mine.eamc", mine, sizeof mine);
    struct moeinf_model *m = open_model(model_path);
    struct moeinf_context *ctx = m ? open_ctx(m, "reuse") : NULL;
    struct moeinf_context *other = m ? open_ctx(m, "moe-infinity") : NULL;
    struct moeinf_error err;
    if (!ctx || !other) goto done;
    CHECK(requests(ctx, 0, 4));
    CHECK(requests(other, 0, 4));
    CHECK_EQ_INT(moeinf_context_expert_state_save(ctx, good, &err), MOEINF_OK);
    CHECK(requests(ctx, 4, 3)); /* ctx has learned more than the file holds */
    CHECK_EQ_INT(moeinf_context_expert_state_save(ctx, mine, &err), MOEINF_OK);
    static uint8_t buf[1 << 17];
    size_t n = slurp(good, buf, sizeof buf);
    CHECK(n > 1000 && n < sizeof buf);
    /* a flipped byte in the policy's section, and one in the collection */
    buf[n - 100] ^= 0x10;
    spit(bad, buf, n);
    expect_refused(ctx, bad, "checksum mismatch", mine);
    buf[n - 100] ^= 0x10;
    buf[70] ^= 0x01;
    spit(bad, buf, n);
    expect_refused(ctx, bad, "checksum mismatch", mine);
    buf[70] ^= 0x01;
    /* truncated at several places, the header included */
    static const size_t cuts[] = {4, 40, 60, 500};
    for (size_t i = 0; i < sizeof cuts / sizeof cuts[0]; i++) {
        spit(bad, buf, cuts[i]);
        expect_refused(ctx, bad, cuts[i] < 8 ? "not an EAMC file" : "truncated", mine);
    }
    spit(bad, buf, n - 1);
    expect_refused(ctx, bad, "truncated", mine);
    /* empty, and not an EAMC file at all */
    spit(bad, buf, 0);
    expect_refused(ctx, bad, "not an EAMC file", mine);
    spit(bad, (const uint8_t *)"GGUF and more bytes", 19);
    expect_refused(ctx, bad, "not an EAMC file", mine);
    /* another policy's */
    CHECK_EQ_INT(moeinf_context_expert_state_save(other, bad, &err), MOEINF_OK);
    expect_refused(ctx, bad, "written by policy 'moe-infinity', this is 'reuse'", mine);
    /* another model's: a collection for 2 x 8 experts top-3 */
    struct moeinf_policy_geometry g3 = {2, 8, 3, 0, {0}};
    struct moeinf_eamc *c3 = NULL;
    CHECK_EQ_INT(moeinf_eamc_init(&g3, 8, &c3, &err), MOEINF_OK);
    if (c3) CHECK_EQ_INT(moeinf_eamc_save(c3, bad, &err), MOEINF_OK);
    moeinf_eamc_free(c3);
    expect_refused(ctx, bad, "geometry mismatch", mine);
    /* and the good file still loads */
    bool loaded = false;
    CHECK_EQ_INT(moeinf_context_expert_state_load(ctx, good, &loaded, &err), MOEINF_OK);
    CHECK(loaded);
    /* a missing file is a cold start: nothing changes */
    remove(bad);
    CHECK_EQ_INT(moeinf_context_expert_state_load(ctx, bad, &loaded, &err), MOEINF_OK);
    CHECK(!loaded);
done:
    moeinf_context_free(ctx);
    moeinf_context_free(other);
    moeinf_model_free(m);
    remove(good);
    remove(bad);
    remove(mine);
}

/* Another model of the same geometry (2 x 8 experts, top-2: random weights, other routers)
 * refuses tiny-mixtral's file naming both models; tiny-mixtral quantized otherwise (Q4_0: the
 * same F32 routers) reads it as its own. */
static void test_other_model_refused(void) {
    char q8[1024];
    char q4[1024];
    if (!test_shared_path(TINY, q8, sizeof q8)) return;
    if (!test_shared_path("testdata/models/tiny-mixtral-Q4_0.gguf", q4, sizeof q4)) return;
    char state[512];
    char mine[512];
    char other_path[512];
    test_tmp_path("warm_model_a.eamc", state, sizeof state);
    test_tmp_path("warm_model_b.eamc", mine, sizeof mine);
    test_tmp_path("warm_model_other.gguf", other_path, sizeof other_path);
    struct moeinf_gen_params gp = moeinf_gen_params_default();
    gp.n_layer = 2;
    gp.n_expert = 8;
    gp.n_expert_used = 2;
    gp.n_embd = 64;
    gp.n_ff = 64;
    gp.n_head = 4;
    gp.n_head_kv = 2;
    gp.seed = 5;
    gp.n_threads = 1;
    struct moeinf_error err = {0};
    CHECK_MSG(moeinf_gen_model(&gp, other_path, &err) == MOEINF_OK, "%s", err.msg);
    struct moeinf_model *ma = open_model(q8);
    struct moeinf_model *mq = open_model(q4);
    struct moeinf_model *mb = open_model(other_path);
    struct moeinf_context *ca = ma ? open_ctx(ma, "reuse") : NULL;
    struct moeinf_context *cq = mq ? open_ctx(mq, "reuse") : NULL;
    struct moeinf_context *cb = mb ? open_ctx(mb, "reuse") : NULL;
    if (!ca || !cq || !cb) goto done;
    CHECK(requests(ca, 0, 3));
    CHECK(requests(cb, 0, 3));
    CHECK_EQ_INT(moeinf_context_expert_state_save(ca, state, &err), MOEINF_OK);
    CHECK_EQ_INT(moeinf_context_expert_state_save(cb, mine, &err), MOEINF_OK);
    expect_refused(cb, state, "another model's state: this is '", mine);
    bool loaded = false;
    CHECK_EQ_INT(moeinf_context_expert_state_load(cb, state, &loaded, &err), MOEINF_ERR_FORMAT);
    CHECK_STR_CONTAINS(err.msg, "(model id ");
    CHECK_STR_CONTAINS(err.msg, "), the file was written for '");
    /* the same routers: the other quantization's warm start */
    CHECK_EQ_INT(moeinf_context_expert_state_load(cq, state, &loaded, &err), MOEINF_OK);
    CHECK(loaded);
done:
    moeinf_context_free(ca);
    moeinf_context_free(cq);
    moeinf_context_free(cb);
    moeinf_model_free(ma);
    moeinf_model_free(mq);
    moeinf_model_free(mb);
    remove(state);
    remove(mine);
    remove(other_path);
}

/* ---- the command line ------------------------------------------------------------------ */

static int shell(const char *cmd, char *out, size_t out_size, char *err, size_t err_size) {
    return test_run_shell("warm-start", cmd, out, out_size, err, err_size);
}

static int eamc_entries(const char *path, int n_layers, int n_experts, int top_k) {
    struct moeinf_policy_geometry g = {n_layers, n_experts, top_k, 0, {0}};
    struct moeinf_eamc *c = NULL;
    struct moeinf_error err;
    if (moeinf_eamc_load(&g, path, &c, NULL, &err) != MOEINF_OK) return -1;
    int n = moeinf_eamc_size(c);
    moeinf_eamc_free(c);
    return n;
}

static void test_cli_sim_and_run_share_the_file(void) {
    char model[1024];
    if (!test_shared_path(TINY, model, sizeof model)) return;
    char trace[512];
    char state[512];
    char cmd[4096];
    char out[8192];
    char err[8192];
    test_tmp_path("warm_cli.trace", trace, sizeof trace);
    test_tmp_path("warm_cli.eamc", state, sizeof state);
    remove(state);
    const char *bin = test_moeinf_bin();
    /* the engine's own routing, two requests, through the simulator into the file */
    snprintf(cmd, sizeof cmd,
             "%s run -m %s -p 'The quick brown fox' -n 6 --temp 0 --record-routing %s", bin, model,
             trace);
    CHECK_EQ_INT(shell(cmd, out, sizeof out, err, sizeof err), 0);
    snprintf(cmd, sizeof cmd, "%s sim --trace %s --cache 4 --eamc %s", bin, trace, state);
    CHECK_EQ_INT(shell(cmd, out, sizeof out, err, sizeof err), 0);
    CHECK_EQ_INT(eamc_entries(state, 2, 8, 2), 1);
    /* the recorded trace names the model (model_id); without that line the simulator's file
     * names only the trace's model line, and run refuses it, giving its own id, which a
     * model_id line claims */
    char bare[512];
    char bare_state[512];
    test_tmp_path("warm_cli_bare.trace", bare, sizeof bare);
    test_tmp_path("warm_cli_bare.eamc", bare_state, sizeof bare_state);
    remove(bare_state);
    snprintf(cmd, sizeof cmd, "grep -c '^# model_id: [0-9a-f]\\{16\\}$' %s", trace);
    CHECK_EQ_INT(shell(cmd, out, sizeof out, err, sizeof err), 0);
    snprintf(cmd, sizeof cmd,
             "grep -v '^# model_id:' %s >%s && %s sim --trace %s --cache 4 --eamc %s", trace, bare,
             bin, bare, bare_state);
    CHECK_EQ_INT(shell(cmd, out, sizeof out, err, sizeof err), 0);
    snprintf(cmd, sizeof cmd,
             "%s run -m %s -p 'Once upon a time' -n 2 --expert-cache 25%% --expert-io cached "
             "--eamc %s",
             bin, model, bare_state);
    CHECK_EQ_INT(shell(cmd, out, sizeof out, err, sizeof err), 1);
    CHECK_STR_CONTAINS(err, "another model's state: this is '");
    CHECK_STR_CONTAINS(err, "the file was written for a trace of 'llama: 2 layers");
    const char *id = strstr(err, "(model id ");
    CHECK(id != NULL);
    if (id) {
        snprintf(cmd, sizeof cmd,
                 "sed -i '2i # model_id: %.16s' %s && rm %s && %s sim --trace %s --cache 4 "
                 "--eamc %s && %s run -m %s -p 'Once upon a time' -n 2 --expert-cache 25%% "
                 "--expert-io cached --eamc %s",
                 id + 10, bare, bare_state, bin, bare, bare_state, bin, model, bare_state);
        CHECK_EQ_INT(shell(cmd, out, sizeof out, err, sizeof err), 0);
        CHECK_STR_CONTAINS(err, "loaded (warm start)");
    }
    remove(bare);
    remove(bare_state);
    /* run starts from it and adds its request */
    snprintf(cmd, sizeof cmd,
             "%s run -m %s -p 'Once upon a time' -n 6 --temp 0 --expert-cache 25%% "
             "--expert-io cached --eamc %s",
             bin, model, state);
    CHECK_EQ_INT(shell(cmd, out, sizeof out, err, sizeof err), 0);
    CHECK_STR_CONTAINS(err, "loaded (warm start)");
    CHECK_EQ_INT(eamc_entries(state, 2, 8, 2), 2);
    /* and the simulator reads what run wrote */
    snprintf(cmd, sizeof cmd, "%s sim --trace %s --cache 4 --eamc %s", bin, trace, state);
    CHECK_EQ_INT(shell(cmd, out, sizeof out, err, sizeof err), 0);
    CHECK_EQ_INT(eamc_entries(state, 2, 8, 2), 3);
    /* bench and a missing file: a cold start that creates it */
    remove(state);
    snprintf(cmd, sizeof cmd,
             "%s bench -m %s -p 8 -n 4 -r 1 --expert-cache 25%% --expert-io cached --eamc %s", bin,
             model, state);
    CHECK_EQ_INT(shell(cmd, out, sizeof out, err, sizeof err), 0);
    CHECK_STR_CONTAINS(err, "does not exist yet (cold start");
    CHECK_EQ_INT(eamc_entries(state, 2, 8, 2), 2); /* the warm-up run and one repetition */
    /* --eamc without a cache, and with a policy that keeps nothing */
    snprintf(cmd, sizeof cmd, "%s run -m %s -p 'a' -n 1 --eamc %s", bin, model, state);
    CHECK_EQ_INT(shell(cmd, out, sizeof out, err, sizeof err), 2);
    CHECK_STR_CONTAINS(err, "need --expert-cache");
    snprintf(cmd, sizeof cmd, "%s run -m %s -p 'a' -n 1 --expert-cache 25%% --policy lru --eamc %s",
             bin, model, state);
    CHECK_EQ_INT(shell(cmd, out, sizeof out, err, sizeof err), 2);
    CHECK_STR_CONTAINS(err, "keeps no EAMC");
    /* logits computes one batch and keeps no state */
    snprintf(cmd, sizeof cmd,
             "%s logits -m %s --ids \"1 2\" -o /dev/null --expert-cache 25%% --eamc %s", bin, model,
             state);
    CHECK_EQ_INT(shell(cmd, out, sizeof out, err, sizeof err), 2);
    CHECK_STR_CONTAINS(err, "--eamc is for run, chat, bench and serve");
    /* a folder that does not exist: refused before the model loads */
    snprintf(cmd, sizeof cmd,
             "%s run -m %s -p 'a' -n 1 --expert-cache 25%% --eamc /nonexistent-dir/x.eamc", bin,
             model);
    CHECK_EQ_INT(shell(cmd, out, sizeof out, err, sizeof err), 1);
    CHECK_STR_CONTAINS(err, "/nonexistent-dir/x.eamc");
    remove(trace);
    remove(state);
}

static void test_cli_refuses_bad_file_and_keeps_it(void) {
    char model[1024];
    if (!test_shared_path(TINY, model, sizeof model)) return;
    char state[512];
    char cmd[4096];
    char out[8192];
    char err[8192];
    test_tmp_path("warm_cli_bad.eamc", state, sizeof state);
    const char *bin = test_moeinf_bin();
    remove(state);
    snprintf(cmd, sizeof cmd,
             "%s run -m %s -p 'The quick brown fox' -n 4 --expert-cache 25%% --expert-io cached "
             "--eamc %s",
             bin, model, state);
    CHECK_EQ_INT(shell(cmd, out, sizeof out, err, sizeof err), 0);
    static uint8_t buf[1 << 17];
    static uint8_t after[1 << 17];
    size_t n = slurp(state, buf, sizeof buf);
    CHECK(n > 100);
    buf[n / 2] ^= 0x40;
    spit(state, buf, n);
    CHECK_EQ_INT(shell(cmd, out, sizeof out, err, sizeof err), 1);
    char want[700];
    snprintf(want, sizeof want, "moeinf: %s: EAMC: checksum mismatch", state);
    CHECK_STR_CONTAINS(err, want);
    CHECK(slurp(state, after, sizeof after) == n && !memcmp(buf, after, n));
    CHECK(out[0] == '\0'); /* nothing generated */
    /* truncated */
    spit(state, buf, n / 3);
    CHECK_EQ_INT(shell(cmd, out, sizeof out, err, sizeof err), 1);
    CHECK_STR_CONTAINS(err, "truncated");
    CHECK_EQ_INT(slurp(state, after, sizeof after), n / 3);
    /* another policy's */
    snprintf(cmd, sizeof cmd,
             "%s run -m %s -p 'x' -n 2 --expert-cache 25%% --policy moe-infinity "
             "--expert-io cached --eamc %s",
             bin, model, state);
    remove(state);
    CHECK_EQ_INT(shell(cmd, out, sizeof out, err, sizeof err), 0);
    snprintf(cmd, sizeof cmd,
             "%s run -m %s -p 'x' -n 2 --expert-cache 25%% --expert-io cached --eamc %s", bin,
             model, state);
    CHECK_EQ_INT(shell(cmd, out, sizeof out, err, sizeof err), 1);
    CHECK_STR_CONTAINS(err, "written by policy 'moe-infinity', this is 'reuse'");
    remove(state);
}

/* SIGTERM while run generates: it stops, writes the file and dies of the signal. */
static void test_cli_sigterm_saves(void) {
    char model[1024];
    if (!test_shared_path(TINY, model, sizeof model)) return;
    char state[512];
    char text[512];
    char cmd[8192];
    char out[8192];
    char err[8192];
    test_tmp_path("warm_cli_term.eamc", state, sizeof state);
    test_tmp_path("warm_cli_term.txt", text, sizeof text);
    remove(state);
    /* a long generation; as soon as text streams, SIGTERM */
    snprintf(cmd, sizeof cmd,
             "%s run -m %s -p 'The quick brown fox' -n 60000 -c 65536 --temp 0 "
             "--expert-cache 25%% --expert-io cached --eamc %s >%s 2>/dev/null & pid=$!; "
             "i=0; while [ ! -s %s ] && [ $i -lt 500 ]; do sleep 0.01; i=$((i+1)); done; "
             "kill -TERM $pid; wait $pid; echo status=$?",
             test_moeinf_bin(), model, state, text, text);
    CHECK_EQ_INT(shell(cmd, out, sizeof out, err, sizeof err), 0);
    char want[32];
    snprintf(want, sizeof want, "status=%d", 128 + SIGTERM);
    CHECK_STR_CONTAINS(out, want);
    CHECK_EQ_INT(eamc_entries(state, 2, 8, 2), 1);
    CHECK_EQ_INT(test_temp_leftovers("warm_cli_term.eamc"), 0);
    remove(state);
    remove(text);
}

int main(void) {
    RUN(test_round_trip);
    RUN(test_refused_files);
    RUN(test_other_model_refused);
    RUN(test_cli_sim_and_run_share_the_file);
    RUN(test_cli_refuses_bad_file_and_keeps_it);
    RUN(test_cli_sigterm_saves);
    return test_report();
}
