/*
 * test_replay.c - routing replay (engine_replay.h, `moeinf bench --route-trace`) on a
 * generated model and a hand-made trace:
 * - the routing the engine used, as its routing record writes it, is the trace's, token by
 *   token, phases included (a one-token prompt counts as prefill, as the trace says);
 * - replaying the engine's own recorded routing gives its logits and mixing weights to the
 *   bit (the weights are the router's probabilities, renormalised as the router does), and
 *   replaying other experts changes them (the replay is not a no-op);
 * - through the expert cache, bench's hits and accesses equal `moeinf sim` on the same trace,
 *   capacity, policy and micro-batch, also for a --trace-requests subset (against the sim on
 *   that subset, made by moeinf_trace_filter);
 * - a trace of another geometry, a malformed trace, an empty selection and bad ids are clear
 *   errors.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "engine/engine.h"
#include "engine/engine_replay.h"
#include "moeinf.h"
#include "moeinf_sim.h"
#include "trace/trace.h"
#include "test.h"

#define N_LAYER  3
#define N_EXPERT 16
#define TOP_K    4
#define N_BATCH  4
#define N_REQ    3

/* The hand-made trace: prompt and decode lengths (a one-token prompt, prompts longer than
 * the micro-batch, a request without decode tokens) and ids with gaps. */
static const int req_id[N_REQ] = {4, 10, 11};
static const int req_prefill[N_REQ] = {5, 1, 7};
static const int req_decode[N_REQ] = {3, 2, 0};

static char model_path[512];
static char trace_path[512];

/* Expert r of token t of request q at layer l: TOP_K distinct ids (an odd stride mod 16). */
static int hand_expert(int q, int t, int l, int r) {
    int base = (q * 7 + t * 5 + l * 3) % N_EXPERT;
    int stride = 1 + 2 * ((q + t + l) % 4);
    return (base + r * stride) % N_EXPERT;
}

static bool write_text(const char *path, const char *text) {
    FILE *f = fopen(path, "w");
    if (!f) return false;
    fputs(text, f);
    return fclose(f) == 0;
}

static void write_trace(const char *path) {
    FILE *f = fopen(path, "w");
    CHECK(f != NULL);
    if (!f) return;
    fprintf(f, "# moe-trace v1\n# n_layers: %d\n# n_experts: %d\n# top_k: %d\n", N_LAYER,
            N_EXPERT, TOP_K);
    for (int q = 0; q < N_REQ; q++)
        fprintf(f, "# req %d t%d prefill=%d decode=%d\n", req_id[q], q, req_prefill[q], req_decode[q]);
    for (int q = 0; q < N_REQ; q++) {
        for (int t = 0; t < req_prefill[q] + req_decode[q]; t++) {
            fprintf(f, "%d %c %d ", req_id[q], t < req_prefill[q] ? 'P' : 'D', t);
            for (int l = 0; l < N_LAYER; l++) {
                for (int r = 0; r < TOP_K; r++)
                    fprintf(f, "%d%s", hand_expert(q, t, l, r), r + 1 < TOP_K ? "," : "");
                fprintf(f, "%s", l + 1 < N_LAYER ? "|" : "\n");
            }
        }
    }
    CHECK(fclose(f) == 0);
}

static void setup(void) {
    char name[64];
    snprintf(name, sizeof name, "replay-gen-%d.gguf", (int)getpid());
    test_tmp_path(name, model_path, sizeof model_path);
    struct moeinf_gen_params gp = moeinf_gen_params_default();
    gp.n_layer = N_LAYER;
    gp.n_expert = N_EXPERT;
    gp.n_expert_used = TOP_K;
    gp.n_embd = 96;
    gp.n_ff = 160;
    gp.n_head = 4;
    gp.n_head_kv = 2;
    gp.type = 8; /* Q8_0 */
    gp.seed = 5;
    gp.n_threads = 1;
    struct moeinf_error err = {0};
    CHECK_MSG(moeinf_gen_model(&gp, model_path, &err) == MOEINF_OK, "%s", err.msg);
    snprintf(name, sizeof name, "replay-trace-%d.txt", (int)getpid());
    test_tmp_path(name, trace_path, sizeof trace_path);
    write_trace(trace_path);
}

static struct moeinf_context *new_context(struct moeinf_model *model) {
    struct moeinf_context_params cp = moeinf_context_params_default();
    cp.n_ctx = 16;
    cp.n_batch = N_BATCH;
    cp.n_threads = 1;
    struct moeinf_context *ctx = NULL;
    struct moeinf_error err = {0};
    CHECK_MSG(moeinf_context_init(model, &cp, &ctx, &err) == MOEINF_OK, "%s", err.msg);
    return ctx;
}

/* Replays every request of t as bench does (prompt in micro-batches of N_BATCH, then one
 * decode call per token), token ids id0, id0 + 1, ...; logits of every call appended to
 * `logits` (NULL: none). */
static bool replay_all(struct moeinf_context *ctx, const struct moeinf_route_trace *t,
                       float *logits, int n_vocab) {
    const size_t row = (size_t)t->n_layers * (size_t)t->top_k;
    struct moeinf_error err = {0};
    for (int q = 0; q < t->n_requests; q++) {
        const struct moeinf_route_request *rq = &t->requests[q];
        moeinf_context_reset(ctx);
        int n = rq->n_prefill + rq->n_decode;
        for (int i = 0; i < n;) {
            bool prefill = i < rq->n_prefill;
            int m = prefill ? (rq->n_prefill - i < N_BATCH ? rq->n_prefill - i : N_BATCH) : 1;
            int32_t ids[N_BATCH];
            for (int j = 0; j < m; j++)
                ids[j] = 7 + i + j + 31 * q;
            enum moeinf_status st =
                moeinf_context_route_replay(ctx, rq->experts + (size_t)i * row, m, prefill, &err);
            if (st == MOEINF_OK) st = moeinf_decode(ctx, ids, m, logits, false, &err);
            CHECK_MSG(st == MOEINF_OK, "request %d token %d: %s", q, i, err.msg);
            if (st != MOEINF_OK) return false;
            if (logits) logits += n_vocab;
            i += m;
        }
    }
    return true;
}

/* (a) The engine's routing record of a replay is the trace. */
static void test_routing_is_the_trace(void) {
    struct moeinf_error err = {0};
    struct moeinf_model *model = NULL;
    struct moeinf_model_params mp = moeinf_model_params_default();
    CHECK_MSG(moeinf_model_load(model_path, &mp, &model, &err) == MOEINF_OK, "%s", err.msg);
    if (!model) return;
    struct moeinf_route_trace t;
    CHECK_MSG(moeinf_route_trace_load(trace_path, 0, -1, &t, &err) == MOEINF_OK, "%s", err.msg);
    CHECK_EQ_INT(t.n_requests, N_REQ);
    CHECK_EQ_INT(t.requests[1].n_prefill, 1);
    CHECK_EQ_INT(t.requests[1].id, 10);
    struct moeinf_context *ctx = new_context(model);
    char rec[512];
    char name[64];
    snprintf(name, sizeof name, "replay-rec-%d.txt", (int)getpid());
    test_tmp_path(name, rec, sizeof rec);
    CHECK(moeinf_context_route_fits(ctx, &t, &err) == MOEINF_OK);
    CHECK_MSG(moeinf_context_record_open(ctx, rec, "r", &err) == MOEINF_OK, "%s", err.msg);
    replay_all(ctx, &t, NULL, 0);
    CHECK_MSG(moeinf_context_record_close(ctx, &err) == MOEINF_OK, "%s", err.msg);
    /* the record against the hand-made routing */
    struct moeinf_trace_reader *r = NULL;
    CHECK_MSG(moeinf_trace_open(rec, &r, &err) == MOEINF_OK, "%s", err.msg);
    int q = -1;
    int t_in_req = 0;
    int n_tokens = 0;
    int mismatches = 0;
    for (; r;) {
        struct moeinf_trace_token tok;
        bool end = false;
        if (moeinf_trace_read(r, &tok, &end, &err) != MOEINF_OK || end) break;
        if (tok.request_begins) {
            q++;
            t_in_req = 0;
        }
        CHECK(q >= 0 && q < N_REQ);
        if (q < 0 || q >= N_REQ) break;
        bool prefill = t_in_req < req_prefill[q];
        if ((tok.phase == MOEINF_PHASE_PREFILL) != prefill) mismatches++;
        for (int l = 0; l < N_LAYER; l++) {
            for (int k = 0; k < TOP_K; k++) {
                if (tok.experts[l * TOP_K + k] != hand_expert(q, t_in_req, l, k)) mismatches++;
            }
        }
        t_in_req++;
        n_tokens++;
    }
    CHECK_EQ_INT(q, N_REQ - 1);
    CHECK_EQ_INT(n_tokens, 5 + 3 + 1 + 2 + 7);
    CHECK_EQ_INT(mismatches, 0);
    moeinf_trace_close(r);
    remove(rec);
    moeinf_context_free(ctx);
    moeinf_route_trace_free(&t);
    moeinf_model_free(model);
}

/* Replaying the engine's own routing changes nothing; replaying other experts does. */
static void test_own_routing_replays_bit_identical(void) {
    struct moeinf_error err = {0};
    struct moeinf_model *model = NULL;
    struct moeinf_model_params mp = moeinf_model_params_default();
    CHECK_MSG(moeinf_model_load(model_path, &mp, &model, &err) == MOEINF_OK, "%s", err.msg);
    if (!model) return;
    const int n_vocab = moeinf_model_n_vocab(model);
    struct moeinf_context *ctx = new_context(model);
    char rec[512];
    char name[64];
    snprintf(name, sizeof name, "replay-own-%d.txt", (int)getpid());
    test_tmp_path(name, rec, sizeof rec);
    /* native: a 6-token prompt (micro-batches of 4 and 2), then 3 decode tokens */
    enum { N_CALLS = 5 };
    float *native = malloc((size_t)N_CALLS * n_vocab * sizeof(float));
    float *replayed = malloc((size_t)N_CALLS * n_vocab * sizeof(float));
    float weights[2][N_LAYER][TOP_K];
    CHECK(native && replayed);
    if (!native || !replayed) goto done;
    CHECK(moeinf_context_record_open(ctx, rec, "own", &err) == MOEINF_OK);
    int32_t ids[6] = {7, 8, 9, 10, 11, 12};
    CHECK(moeinf_decode(ctx, ids, 4, native, false, &err) == MOEINF_OK);
    CHECK(moeinf_decode(ctx, ids + 4, 2, native + n_vocab, false, &err) == MOEINF_OK);
    for (int i = 0; i < 3; i++) {
        int32_t id = 13 + i;
        CHECK(moeinf_decode(ctx, &id, 1, native + (size_t)(2 + i) * n_vocab, false, &err) ==
              MOEINF_OK);
    }
    for (int l = 0; l < N_LAYER; l++)
        memcpy(weights[0][l], moeinf_fwd_routing_weights(ctx->fwd, l, 0), sizeof weights[0][l]);
    CHECK(moeinf_context_record_close(ctx, &err) == MOEINF_OK);
    struct moeinf_route_trace t;
    CHECK_MSG(moeinf_route_trace_load(rec, 0, -1, &t, &err) == MOEINF_OK, "%s", err.msg);
    if (t.n_requests != 1) goto done;
    CHECK_EQ_INT(t.requests[0].n_prefill, 6);
    CHECK_EQ_INT(t.requests[0].n_decode, 3);
    const size_t row = (size_t)N_LAYER * TOP_K;
    /* the same calls with the recorded routing */
    for (int pass = 0; pass < 2; pass++) {
        /* pass 1: every token's experts shifted by one id (another choice, still distinct) */
        int32_t *experts = malloc(9 * row * sizeof(int32_t));
        if (!experts) break;
        for (size_t i = 0; i < 9 * row; i++)
            experts[i] = (t.requests[0].experts[i] + pass) % N_EXPERT;
        moeinf_context_reset(ctx);
        CHECK(moeinf_context_route_replay(ctx, experts, 4, true, &err) == MOEINF_OK);
        CHECK(moeinf_decode(ctx, ids, 4, replayed, false, &err) == MOEINF_OK);
        CHECK(moeinf_context_route_replay(ctx, experts + 4 * row, 2, true, &err) == MOEINF_OK);
        CHECK(moeinf_decode(ctx, ids + 4, 2, replayed + n_vocab, false, &err) == MOEINF_OK);
        for (int i = 0; i < 3; i++) {
            int32_t id = 13 + i;
            CHECK(moeinf_context_route_replay(ctx, experts + (6 + i) * row, 1, false, &err) ==
                  MOEINF_OK);
            CHECK(moeinf_decode(ctx, &id, 1, replayed + (size_t)(2 + i) * n_vocab, false,
                                &err) == MOEINF_OK);
        }
        for (int l = 0; l < N_LAYER; l++) {
            memcpy(weights[1][l], moeinf_fwd_routing_weights(ctx->fwd, l, 0),
                   sizeof weights[1][l]);
        }
        bool same_logits =
            test_same_bytes(native, replayed, (size_t)N_CALLS * n_vocab * sizeof(float));
        bool same_weights = test_same_bytes(weights[0], weights[1], sizeof weights[0]);
        if (pass == 0) {
            CHECK_MSG(same_logits, "replaying the engine's own routing changed the logits");
            CHECK_MSG(same_weights, "replaying the engine's own routing changed the weights");
        } else {
            CHECK_MSG(!same_logits, "replaying other experts left the logits unchanged");
            float sum = 0.0f;
            for (int k = 0; k < TOP_K; k++) {
                CHECK(weights[1][0][k] > 0.0f);
                sum += weights[1][0][k];
            }
            CHECK_NEAR(sum, 1.0, 1e-6); /* renormalised over the replayed experts */
        }
        free(experts);
    }
    moeinf_route_trace_free(&t);
done:
    remove(rec);
    free(native);
    free(replayed);
    moeinf_context_free(ctx);
    moeinf_model_free(model);
}

/* The value of "key": N in a --stats-json object (its first occurrence: the totals). */
static unsigned long long json_u64(const char *json, const char *key) {
    char pat[64];
    snprintf(pat, sizeof pat, "\"%s\": ", key);
    const char *p = strstr(json, pat);
    return p ? strtoull(p + strlen(pat), NULL, 10) : ~0ull;
}

/* bench --route-trace through the cache against the simulator at the same prefetch K (no gate
 * lookahead, which the simulator does not model). With K > 0 the reads ahead run on I/O
 * threads: whether a prefetch has arrived when its expert is demanded depends on timing, so
 * the engine splits the simulator's hits into hits (arrived) and late prefetches (waited for);
 * everything the cache decides (admissions, victims) is the simulator's. */
static unsigned long long sim_prefetched; /* the simulator's prefetches, summed over checks */

static void check_against_sim_k(const char *trace, const char *sim_trace, const char *extra,
                                const char *policy, int slots, int prefetch) {
    char json_path[512];
    char name[64];
    snprintf(name, sizeof name, "replay-stats-%d.json", (int)getpid());
    test_tmp_path(name, json_path, sizeof json_path);
    char args[2048];
    snprintf(args, sizeof args,
             "bench -m '%s' --route-trace '%s' %s --expert-cache %.6f%% --policy %s -b %d -t 1 "
             "--prefetch %d --io-threads 2 --lookahead 0 --stats-json '%s'",
             model_path, trace, extra, 100.0 * slots / (N_LAYER * N_EXPERT), policy, N_BATCH,
             prefetch, json_path);
    char out[8192];
    char errs[4096];
    int rc = test_run_moeinf("replay-sim", args, out, sizeof out, errs, sizeof errs);
    if (rc == -1) {
        test_skip("MOEINF_BIN is not set");
        return;
    }
    CHECK_MSG(rc == 0, "%s: %s", args, errs);
    CHECK_STR_CONTAINS(out, "routing:  replayed from");
    char json[16384];
    test_read_text(json_path, json, sizeof json);
    remove(json_path);
    CHECK_STR_CONTAINS(json, "\"routing_replayed_from\": ");
    CHECK_EQ_INT((long long)json_u64(json, "cache_experts"), slots);
    struct moeinf_sim_params sp = moeinf_sim_params_default();
    sp.trace_path = sim_trace;
    sp.policy = policy;
    sp.cache_experts = slots;
    sp.batch = N_BATCH;
    sp.prefetch = prefetch;
    struct moeinf_sim_result res;
    struct moeinf_error err = {0};
    enum moeinf_status st = moeinf_sim_run(&sp, &res, &err);
    CHECK_MSG(st == MOEINF_OK, "%s", err.msg);
    if (st != MOEINF_OK) return;
    const unsigned long long late = json_u64(json, "late_prefetches");
    CHECK_MSG(
        json_u64(json, "accesses") == res.accesses && json_u64(json, "hits") + late == res.hits &&
            json_u64(json, "misses") == res.accesses - res.hits,
        "%s, %d slots, prefetch %d %s: sim %llu/%llu, bench %llu+%llu late/%llu "
        "hits/accesses",
        policy, slots, prefetch, extra, (unsigned long long)res.hits,
        (unsigned long long)res.accesses, json_u64(json, "hits"), late, json_u64(json, "accesses"));
    CHECK_MSG(json_u64(json, "prefetches") == res.prefetch_loads &&
                  json_u64(json, "prefetch_hits") + late == res.prefetch_hits &&
                  json_u64(json, "wasted_prefetches") == res.wasted_prefetches,
              "%s, %d slots, prefetch %d %s: sim prefetched %llu, used %llu, wasted %llu; bench "
              "%llu, %llu+%llu late, %llu",
              policy, slots, prefetch, extra, (unsigned long long)res.prefetch_loads,
              (unsigned long long)res.prefetch_hits, (unsigned long long)res.wasted_prefetches,
              json_u64(json, "prefetches"), json_u64(json, "prefetch_hits"), late,
              json_u64(json, "wasted_prefetches"));
    if (prefetch == 0) CHECK_EQ_INT((long long)late, 0);
    sim_prefetched += res.prefetch_loads;
    CHECK_EQ_INT((long long)json_u64(json, "tokens"), (long long)res.tokens);
    /* both outcomes occur, except with one layer's worth of slots: the next step is
     * another layer, whose experts are other cache entries */
    if (slots > TOP_K) {
        CHECK_MSG(res.hits > 0 && res.hits < res.accesses, "%s, %d slots: %llu/%llu hits",
                  policy, slots, (unsigned long long)res.hits, (unsigned long long)res.accesses);
    }
}

static void check_against_sim(const char *trace, const char *sim_trace, const char *extra,
                              const char *policy, int slots) {
    check_against_sim_k(trace, sim_trace, extra, policy, slots, 0);
}

/* (b) Hits and misses through the engine's cache equal the simulator's. */
static void test_cache_counts_equal_sim(void) {
    const char *policies[] = {"lru", "reuse", "moe-infinity"};
    const int sizes[] = {TOP_K, 12, 24};
    for (size_t pi = 0; pi < 3; pi++) {
        for (size_t si = 0; si < 3; si++)
            check_against_sim(trace_path, trace_path, "", policies[pi], sizes[si]);
    }
    /* a subset: positions 1-2, against the simulator on that subset */
    char sub[512];
    char name[64];
    snprintf(name, sizeof name, "replay-sub-%d.txt", (int)getpid());
    test_tmp_path(name, sub, sizeof sub);
    struct moeinf_trace_filter_params fp = moeinf_trace_filter_params_default();
    fp.index_min = 1;
    fp.index_max = 2;
    struct moeinf_trace_copy_result cr;
    struct moeinf_error err = {0};
    CHECK_MSG(moeinf_trace_filter(trace_path, sub, &fp, &cr, &err) == MOEINF_OK, "%s", err.msg);
    CHECK_EQ_INT(cr.n_requests, 2);
    check_against_sim(trace_path, sub, "--trace-requests 1-2", "moe-infinity", 12);
    check_against_sim(trace_path, sub, "--trace-requests 1-2", "lru", TOP_K);
    remove(sub);
}

/* (b') With --prefetch K the engine's cache decides what `moeinf sim --prefetch K` decides:
 * same misses, same prefetches, same victims, whatever the reads' timing. Run twice
 * each, since a timing-dependent decision would show on some runs only. */
static void test_prefetch_counts_equal_sim(void) {
    sim_prefetched = 0;
    const char *policies[] = {"reuse", "moe-infinity"};
    const int sizes[] = {TOP_K, 6, 12, 24};
    for (int rep = 0; rep < 2; rep++) {
        for (size_t pi = 0; pi < 2; pi++) {
            for (size_t si = 0; si < 4; si++) {
                check_against_sim_k(trace_path, trace_path, "", policies[pi], sizes[si], 2);
                check_against_sim_k(trace_path, trace_path, "", policies[pi], sizes[si], 5);
            }
        }
    }
    CHECK_MSG(sim_prefetched > 0, "no prefetch happened: the comparison says nothing");
}

/* (c) Clear errors: geometry, malformed traces, selections, options and ids. */
static void test_errors(void) {
    char out[8192];
    char errs[4096];
    char args[2048];
    char bad[512];
    char name[64];
    snprintf(name, sizeof name, "replay-bad-%d.txt", (int)getpid());
    test_tmp_path(name, bad, sizeof bad);
    struct {
        const char *trace; /* NULL: the good one */
        const char *extra;
        int rc;
        const char *msg;
    } cases[] = {
        {"# moe-trace v1\n# n_layers: 4\n# n_experts: 16\n# top_k: 4\n"
         "0 P 0 0,1,2,3|0,1,2,3|0,1,2,3|0,1,2,3\n",
         "", 1, "does not fit the model: the trace has 4 MoE layers, the model 3"},
        {"# moe-trace v1\n# n_layers: 3\n# n_experts: 8\n# top_k: 4\n0 P 0 0,1,2,3|0,1,2,3|0,1,2,3\n",
         "", 1, "the trace has 8 experts per layer, the model 16"},
        {"# moe-trace v1\n# n_layers: 3\n# n_experts: 16\n# top_k: 2\n0 P 0 0,1|0,1|0,1\n", "", 1,
         "the trace has top-k 2, the model top-k 4"},
        {"# moe-trace v1\n# n_layers: 3\n# n_experts: 16\n# top_k: 4\n"
         "0 P 0 0,1,2,3|0,1,2,3|0,1,2,16\n",
         "", 1, "expert id out of range"},
        {"# moe-trace v1\n# n_layers: 3\n# n_experts: 16\n# top_k: 4\n0 P 0 0,1,2,3|0,1,2,3\n", "",
         1, ":5: "},
        {"not a trace\n", "", 1, "moe-trace v1"},
        {NULL, "--trace-requests 3-9", 2, "has 3 requests (positions 0-2): none at positions 3-9"},
        {NULL, "--trace-requests 0-999999", 2, "(positions 0-2): none at positions 3-999999"},
        {NULL, "--trace-requests 2-1", 2, "invalid value '2-1' for --trace-requests"},
        {NULL, "--trace-requests x", 2, "invalid value 'x' for --trace-requests"},
        {NULL, "-n 4", 2, "-n does not go with --route-trace"},
        {NULL, "-c 4", 2, "has 8 tokens: more than -c 4"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const char *trace = trace_path;
        if (cases[i].trace) {
            CHECK(write_text(bad, cases[i].trace));
            trace = bad;
        }
        snprintf(args, sizeof args, "bench -m '%s' --route-trace '%s' %s -t 1", model_path, trace,
                 cases[i].extra);
        int rc = test_run_moeinf("replay-err", args, out, sizeof out, errs, sizeof errs);
        if (rc == -1) {
            test_skip("MOEINF_BIN is not set");
            break;
        }
        CHECK_MSG(rc == cases[i].rc, "case %zu: exit %d, expected %d (%s)", i, rc, cases[i].rc,
                  errs);
        CHECK_MSG(strstr(errs, cases[i].msg) != NULL, "case %zu: '%s' lacks '%s'", i, errs,
                  cases[i].msg);
        CHECK_MSG(strncmp(errs, "moeinf", 6) == 0 && strchr(errs, '\n') != NULL,
                  "case %zu: not a one-line moeinf error: %s", i, errs);
    }
    remove(bad);
    snprintf(args, sizeof args, "bench -m '%s' --trace-requests 0", model_path);
    CHECK_EQ_INT(test_run_moeinf("replay-err", args, out, sizeof out, errs, sizeof errs), 2);
    CHECK_STR_CONTAINS(errs, "--trace-requests needs --route-trace");

    /* the library refuses bad ids and a decode call of another length */
    struct moeinf_error err = {0};
    struct moeinf_model *model = NULL;
    struct moeinf_model_params mp = moeinf_model_params_default();
    CHECK(moeinf_model_load(model_path, &mp, &model, &err) == MOEINF_OK);
    if (!model) return;
    struct moeinf_context *ctx = new_context(model);
    int32_t row[N_LAYER * TOP_K] = {0, 1, 2, 3, 0, 1, 2, 3, 0, 1, 2, 16};
    CHECK(moeinf_context_route_replay(ctx, row, 1, false, &err) == MOEINF_ERR_ARG);
    CHECK_STR_CONTAINS(err.msg, "layer 2: expert 16 is outside [0, 16)");
    row[11] = 1;
    CHECK(moeinf_context_route_replay(ctx, row, 1, false, &err) == MOEINF_ERR_ARG);
    CHECK_STR_CONTAINS(err.msg, "layer 2: expert 1 twice");
    row[11] = 3;
    CHECK(moeinf_context_route_replay(ctx, row, 1, false, &err) == MOEINF_OK);
    int32_t ids[2] = {5, 6};
    CHECK(moeinf_decode(ctx, ids, 2, NULL, false, &err) == MOEINF_ERR_ARG);
    CHECK_STR_CONTAINS(err.msg, "the routing replay holds 1 tokens but decode was given 2");
    CHECK_EQ_INT(moeinf_context_n_past(ctx), 0);
    /* a call that fails before it runs (context full) clears the replay too */
    CHECK(moeinf_context_route_replay(ctx, row, 1, false, &err) == MOEINF_OK);
    int32_t many[17] = {0};
    CHECK(moeinf_decode(ctx, many, 17, NULL, false, &err) == MOEINF_ERR_CONTEXT);
    /* cleared by those calls: the next one routes natively */
    CHECK(moeinf_decode(ctx, ids, 2, NULL, false, &err) == MOEINF_OK);
    moeinf_context_free(ctx);
    moeinf_model_free(model);
}

int main(void) {
    setup();
    RUN(test_routing_is_the_trace);
    RUN(test_own_routing_replays_bit_identical);
    RUN(test_cache_counts_equal_sim);
    RUN(test_prefetch_counts_equal_sim);
    RUN(test_errors);
    remove(model_path);
    remove(trace_path);
    return test_report();
}
