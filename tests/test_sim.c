/*
 * test_sim.c - the expert cache and its policies against plain reference implementations
 * written here: LRU, LFU and count on random small traces; Belady against an exhaustive search
 * over every victim choice; prefetch accounting and the time model on hand-computed cases and
 * against a reference with a scripted prefetching policy; cache pins and policy errors.
 */
#include <stdint.h>

#include "base/rng.h"
#include "experts/cache.h"
#include "experts/policy.h"
#include "sim/replay.h"
#include "trace/trace.h"
#include "test.h"

#define MAX_ACC 4096
#define MAX_IDS 64

/* A trace in memory, flattened in replay order. */
struct mem_trace {
    int n_layers, n_experts, top_k;
    int n;                 /* accesses */
    uint32_t ids[MAX_ACC]; /* flat ids */
    bool decode[MAX_ACC];
    int req[MAX_ACC]; /* request index of each access */
};

/* Random trace with a skew (a few hot experts) so that every policy gets hits; written with
 * the trace writer to `path` and kept in *t. */
static void make_trace(uint64_t *rng, int n_layers, int n_experts, int top_k, int n_req,
                       int max_tokens, const char *path, struct mem_trace *t) {
    t->n_layers = n_layers;
    t->n_experts = n_experts;
    t->top_k = top_k;
    t->n = 0;
    struct moeinf_trace_meta meta = {n_layers, n_experts, top_k, "random"};
    struct moeinf_trace_writer *w = NULL;
    struct moeinf_error err;
    CHECK_EQ_INT(moeinf_trace_writer_open(path, &meta, &w, &err), MOEINF_OK);
    if (!w) return;
    for (int q = 0; q < n_req; q++) {
        CHECK_EQ_INT(moeinf_trace_writer_request(w, q, "r", &err), MOEINF_OK);
        int n_tok = 1 + (int)(moeinf_splitmix64(rng) % (uint64_t)max_tokens);
        int n_prefill = (int)(moeinf_splitmix64(rng) % (uint64_t)(n_tok + 1));
        for (int tk = 0; tk < n_tok; tk++) {
            int32_t ex[64];
            for (int l = 0; l < n_layers; l++) {
                for (int j = 0; j < top_k; j++) {
                    int32_t e;
                    bool dup;
                    do { /* half the draws from the first third of the experts */
                        uint64_t r = moeinf_splitmix64(rng);
                        e = (int32_t)((r & 1) ? (r >> 1) % (uint64_t)(n_experts / 3 + 1)
                                              : (r >> 1) % (uint64_t)n_experts);
                        dup = false;
                        for (int i = 0; i < j; i++)
                            dup |= ex[l * top_k + i] == e;
                    } while (dup);
                    ex[l * top_k + j] = e;
                }
            }
            bool dec = tk >= n_prefill;
            CHECK_EQ_INT(moeinf_trace_writer_token(
                             w, dec ? MOEINF_PHASE_DECODE : MOEINF_PHASE_PREFILL, ex, &err),
                         MOEINF_OK);
            for (int i = 0; i < n_layers * top_k && t->n < MAX_ACC; i++) {
                t->ids[t->n] = (uint32_t)((i / top_k) * n_experts + ex[i]);
                t->decode[t->n] = dec;
                t->req[t->n] = q;
                t->n++;
            }
        }
    }
    CHECK_EQ_INT(moeinf_trace_writer_close(w, &err), MOEINF_OK);
}

/* ---- reference implementations (plain scans, no shared code with src/) ---------------------- */

struct ref_counts {
    long accesses, hits, decode_accesses, decode_hits;
    long pf_loads, pf_hits, pf_wasted;
};

enum ref_policy {
    REF_LRU,
    REF_LFU,
    REF_COUNT,
    REF_FREQ_ORACLE /* smallest (uses in the current request's phase, all of it; last use) */
};

/* Is `id` needed by the step of access p? */
static bool ref_pinned(const struct mem_trace *t, int p, uint32_t id) {
    int s = p / t->top_k * t->top_k;
    for (int i = s; i < s + t->top_k; i++) {
        if (t->ids[i] == id) return true;
    }
    return false;
}

/*
 * Replays t with capacity cap. Victim: the resident, unpinned id with the smallest
 * (count, last use) for LFU/COUNT, or smallest last use for LRU. With n_pf > 0, after each step
 * of layer l the experts pf[0..n_pf) of layer (l + 1) % n_layers are prefetched.
 */
static struct ref_counts ref_replay(const struct mem_trace *t, enum ref_policy pol, int cap,
                                    int warmup, const int *pf, int n_pf) {
    struct ref_counts rc = {0, 0, 0, 0, 0, 0, 0};
    int n_ids = t->n_layers * t->n_experts;
    bool resident[MAX_IDS] = {false}, prefetched[MAX_IDS] = {false}, pf_counted[MAX_IDS] = {false};
    long last[MAX_IDS] = {0};
    long count[MAX_IDS] = {0};
    static long req_count[8][2][MAX_IDS]; /* freq-oracle: uses per request (at most 5) and
                                             phase (decode 1) */
    if (pol == REF_FREQ_ORACLE) {
        memset(req_count, 0, sizeof req_count);
        for (int p = 0; p < t->n; p++)
            req_count[t->req[p]][t->decode[p]][t->ids[p]]++;
    }
    long clock = 0;
    long n_access = 0;
    int n_res = 0;
    for (int p = 0; p < t->n; p++) {
        uint32_t id = t->ids[p];
        bool counted = t->req[p] >= warmup;
        bool hit = resident[id];
        if (hit) {
            if (prefetched[id] && pf_counted[id]) rc.pf_hits++;
            prefetched[id] = false;
        } else {
            if (n_res == cap) {
                int v = -1;
                for (int i = 0; i < n_ids; i++) {
                    if (!resident[i] || ref_pinned(t, p, (uint32_t)i)) continue;
                    bool better = v < 0;
                    if (!better && pol == REF_LRU) better = last[i] < last[v];
                    if (!better && pol == REF_FREQ_ORACLE) {
                        const long *rq = req_count[t->req[p]][t->decode[p]];
                        better = rq[i] < rq[v] || (rq[i] == rq[v] && last[i] < last[v]);
                    }
                    if (!better && (pol == REF_LFU || pol == REF_COUNT)) {
                        better = count[i] < count[v] || (count[i] == count[v] && last[i] < last[v]);
                    }
                    if (better) v = i;
                }
                resident[v] = false;
                if (prefetched[v] && pf_counted[v]) rc.pf_wasted++;
                prefetched[v] = false;
                n_res--;
            }
            resident[id] = true;
            n_res++;
        }
        last[id] = ++clock;
        count[id]++;
        if (pol == REF_COUNT && ++n_access % n_ids == 0) {
            for (int i = 0; i < n_ids; i++)
                count[i] /= 2;
        }
        if (counted) {
            rc.accesses++;
            rc.hits += hit;
            rc.decode_accesses += t->decode[p];
            rc.decode_hits += hit && t->decode[p];
        }
        if ((p + 1) % t->top_k != 0 || n_pf == 0) continue;
        /* step done: prefetch into the next layer (nothing is pinned now) */
        int layer = (int)(id / (uint32_t)t->n_experts);
        for (int k = 0; k < n_pf; k++) {
            int pid = ((layer + 1) % t->n_layers) * t->n_experts + pf[k];
            if (resident[pid]) continue;
            if (n_res == cap) {
                int v = -1;
                for (int i = 0; i < n_ids; i++) {
                    if (resident[i] && (v < 0 || last[i] < last[v])) v = i;
                }
                resident[v] = false;
                if (prefetched[v] && pf_counted[v]) rc.pf_wasted++;
                prefetched[v] = false;
                n_res--;
            }
            resident[pid] = true;
            n_res++;
            prefetched[pid] = true;
            pf_counted[pid] = counted;
            last[pid] = ++clock;
            rc.pf_loads += counted;
        }
    }
    for (int i = 0; i < n_ids; i++)
        rc.pf_wasted += resident[i] && prefetched[i] && pf_counted[i];
    return rc;
}

/* Exhaustive search: the most hits over every sequence of victim choices. memo[p][mask] */
static int best_hits(const struct mem_trace *t, int cap, int p, unsigned mask, short *memo) {
    if (p == t->n) return 0;
    short *m = &memo[(size_t)p * 256 + mask];
    if (*m >= 0) return *m;
    uint32_t id = t->ids[p];
    unsigned bit = 1u << id;
    int best = 0;
    if (mask & bit) {
        best = 1 + best_hits(t, cap, p + 1, mask, memo);
    } else if (__builtin_popcount(mask) < cap) {
        best = best_hits(t, cap, p + 1, mask | bit, memo);
    } else {
        for (uint32_t v = 0; v < 8; v++) {
            if (!(mask & (1u << v)) || ref_pinned(t, p, v)) continue;
            int h = best_hits(t, cap, p + 1, (mask & ~(1u << v)) | bit, memo);
            if (h > best) best = h;
        }
    }
    *m = (short)best;
    return best;
}

static struct moeinf_sim_result sim(const char *path, const char *policy, int cap, int warmup,
                                    enum moeinf_status *st) {
    struct moeinf_sim_params p = moeinf_sim_params_default();
    p.trace_path = path;
    p.policy = policy;
    p.cache_experts = cap;
    p.warmup_requests = warmup;
    struct moeinf_sim_result r;
    memset(&r, 0, sizeof r);
    struct moeinf_error err;
    *st = moeinf_sim_run(&p, &r, &err);
    if (*st != MOEINF_OK) fprintf(stderr, "sim: %s\n", err.msg);
    return r;
}

static void test_online_policies_match_references(void) {
    static struct mem_trace t;
    uint64_t rng = 7;
    char path[512];
    test_tmp_path("sim_random.txt", path, sizeof path);
    static const char *const names[] = {"lru", "lfu", "count", "freq-oracle"};
    int n_cases = 0;
    for (int round = 0; round < 40; round++) {
        int n_layers = 1 + (int)(moeinf_splitmix64(&rng) % 4);
        int n_experts = 2 + (int)(moeinf_splitmix64(&rng) % (uint64_t)(MAX_IDS / n_layers - 1));
        int top_k = 1 + (int)(moeinf_splitmix64(&rng) % (uint64_t)(n_experts < 4 ? n_experts : 4));
        make_trace(&rng, n_layers, n_experts, top_k, 1 + (int)(moeinf_splitmix64(&rng) % 5), 30,
                   path, &t);
        int warmup = round % 4 == 3 ? 1 : 0;
        for (int cap = top_k; cap <= n_layers * n_experts; cap += 1 + cap / 3) {
            for (int pol = 0; pol < 4; pol++) {
                enum moeinf_status st;
                struct moeinf_sim_result r = sim(path, names[pol], cap, warmup, &st);
                struct ref_counts rc = ref_replay(&t, (enum ref_policy)pol, cap, warmup, NULL, 0);
                CHECK_EQ_INT(st, MOEINF_OK);
                CHECK_MSG(r.hits == (uint64_t)rc.hits,
                          "%s n_layers=%d n_experts=%d top_k=%d cap=%d warmup=%d: hits %llu, "
                          "reference %ld",
                          names[pol], n_layers, n_experts, top_k, cap, warmup,
                          (unsigned long long)r.hits, rc.hits);
                CHECK_EQ_INT(r.accesses, rc.accesses);
                CHECK_EQ_INT(r.decode_accesses, rc.decode_accesses);
                CHECK_EQ_INT(r.decode_hits, rc.decode_hits);
                CHECK_EQ_INT(r.cache_experts, cap);
                n_cases++;
            }
        }
    }
    CHECK(n_cases > 400);
}

/* The frequency oracle by hand: one layer of 6 experts, top-1, 2 slots, decode tokens only.
 * Request 0 uses 0 0 0 1 2 1 2 0 (counts 0: 4, 1: 2, 2: 2): 0 misses, hits twice; 1 misses;
 * 2 misses and evicts 1 (2 < 4); 1 misses and evicts 2; 2 misses and evicts 1; 0 hits: 3
 * hits, 5 misses (LRU has 4 hits; Belady would evict 0, never used again).
 * Request 1 uses 3 4 3 5 4 (counts 3: 2, 4: 2, 5: 1; 0 and 2 count 0 now): 3 misses and evicts
 * 2 (count 0 like 0, used less recently); 4 misses and evicts 0; 3 hits; 5 misses and evicts
 * 4 (count 2 like 3, used less recently; evicting the lower id would keep 4); 4 misses and
 * evicts 5 (1 < 2): 1 hit, 4 misses.
 * Then a request whose prompt uses 0 0 0 0 and whose decode uses 1 2 1 2 1 2: the prompt
 * misses once; in decode 0 counts 0 (its prefill uses are the other phase's), so 1 takes the
 * free slot, 2 evicts 0, and the rest hit: 7 hits, 3 misses. (Counting the whole request, 0
 * would count 4 against 3 and stay, and every decode token would miss.) */
static void test_freq_oracle_hand_computed(void) {
    char path[512];
    test_tmp_path("sim_oracle.txt", path, sizeof path);
    FILE *f = fopen(path, "w");
    CHECK(f != NULL);
    if (!f) return;
    fprintf(f, "# moe-trace v1\n# n_layers: 1\n# n_experts: 6\n# top_k: 1\n");
    const int req0[8] = {0, 0, 0, 1, 2, 1, 2, 0};
    const int req1[5] = {3, 4, 3, 5, 4};
    for (int i = 0; i < 8; i++)
        fprintf(f, "0 D %d %d\n", i, req0[i]);
    for (int i = 0; i < 5; i++)
        fprintf(f, "1 D %d %d\n", i, req1[i]);
    CHECK(fclose(f) == 0);
    enum moeinf_status st;
    struct moeinf_sim_result r = sim(path, "freq-oracle", 2, 0, &st);
    CHECK_EQ_INT(st, MOEINF_OK);
    CHECK_EQ_INT(r.accesses, 13);
    CHECK_EQ_INT(r.hits, 4);
    CHECK_EQ_INT(r.decode_accesses, 13);
    CHECK_EQ_INT(r.decode_hits, 4);
    r = sim(path, "freq-oracle", 2, 1, &st); /* request 1 alone counted */
    CHECK_EQ_INT(r.accesses, 5);
    CHECK_EQ_INT(r.hits, 1);
    r = sim(path, "lru", 2, 0, &st);
    CHECK_EQ_INT(r.hits, 5); /* 4 in request 0, 1 in request 1 */
    /* it knows requests, not steps: it replays prefill micro-batches too (belady does not) */
    struct moeinf_sim_params p = moeinf_sim_params_default();
    p.trace_path = path;
    p.policy = "freq-oracle";
    p.cache_experts = 2;
    p.batch = 4;
    struct moeinf_error err;
    CHECK_EQ_INT(moeinf_sim_run(&p, &r, &err), MOEINF_OK);
    CHECK_EQ_INT(r.hits, 4);
    f = fopen(path, "w");
    CHECK(f != NULL);
    if (!f) return;
    fprintf(f, "# moe-trace v1\n# n_layers: 1\n# n_experts: 6\n# top_k: 1\n");
    for (int i = 0; i < 10; i++)
        fprintf(f, "0 %c %d %d\n", i < 4 ? 'P' : 'D', i, i < 4 ? 0 : 1 + i % 2);
    CHECK(fclose(f) == 0);
    r = sim(path, "freq-oracle", 2, 0, &st);
    CHECK_EQ_INT(st, MOEINF_OK);
    CHECK_EQ_INT(r.accesses, 10);
    CHECK_EQ_INT(r.hits, 7);
    CHECK_EQ_INT(r.decode_hits, 4);
    CHECK_EQ_INT(moeinf_sim_run(&p, &r, &err), MOEINF_OK); /* the prompt in one micro-batch */
    CHECK_EQ_INT(r.hits, 4);
    remove(path);
}

/* Per-expert decode misses (params.decode_misses) on a hand-made trace of 2 layers x 3
 * experts, top-1, LRU with 2 slots shared by the layers (ids: layer * 3 + expert):
 *   P t0: 0, 3      prefill: misses not counted per expert; cache {0, 3}
 *   D t1: 1, 3      1 misses (evicts 0); 3 hits
 *   D t2: 0, 5      0 misses (evicts 1); 5 misses (evicts 3)
 *   D t3: 0, 5      both hit
 *   D t4: 1, 3      1 misses (evicts 0); 3 misses (evicts 5)
 * Decode: 8 accesses, 3 hits; misses 0: 1, 1: 2, 3: 1, 5: 1. */
static void test_decode_misses_hand_computed(void) {
    char path[512];
    test_tmp_path("sim_misses.txt", path, sizeof path);
    CHECK(test_write_text(path, "# moe-trace v1\n# n_layers: 2\n# n_experts: 3\n# top_k: 1\n"
                                "0 P 0 0|0\n0 D 1 1|0\n0 D 2 0|2\n0 D 3 0|2\n0 D 4 1|0\n"));
    uint64_t misses[6] = {9, 9, 9, 9, 9, 9};
    struct moeinf_sim_params p = moeinf_sim_params_default();
    p.trace_path = path;
    p.policy = "lru";
    p.cache_experts = 2;
    p.decode_misses = misses;
    p.n_decode_misses = 6;
    struct moeinf_sim_result r;
    struct moeinf_error err;
    CHECK_EQ_INT(moeinf_sim_run(&p, &r, &err), MOEINF_OK);
    CHECK_EQ_INT(r.decode_accesses, 8);
    CHECK_EQ_INT(r.decode_hits, 3);
    const uint64_t want[6] = {1, 2, 0, 1, 0, 1};
    for (int i = 0; i < 6; i++)
        CHECK_EQ_INT(misses[i], want[i]);
    p.n_decode_misses = 5; /* not the trace's 2 x 3 */
    CHECK_EQ_INT(moeinf_sim_run(&p, &r, &err), MOEINF_ERR_ARG);
    CHECK(strstr(err.msg, "per-expert misses") != NULL);
    remove(path);
}

/* Continuous batching (parallel 2, batch 4) on a hand-made trace of one layer, top-1, with a
 * cache of every expert (so a hit is a repeat). Request 0: prompt 0 1 2, then 3 0 fed one at a
 * time; request 1: prompt 4, then 3 0 1. Iterations, as the server composes them:
 *   1 (prefill): 0 1 2 | 4         -> {0,1,2,4}: 4 misses
 *   2 (decode):  3 | 3             -> {3}: 1 miss (one read for both sequences)
 *   3 (decode):  0 | 0             -> {0}: 1 hit; request 0 ends
 *   4 (decode):  1                 -> {1}: 1 hit; request 1 ends
 * One request after another instead: 5 + 4 accesses, hits 1 (r0's 0) + 3 (r1's 3, 0, 1). */
static void test_parallel_hand_computed(void) {
    char path[512];
    test_tmp_path("sim_parallel.txt", path, sizeof path);
    FILE *f = fopen(path, "w");
    CHECK(f != NULL);
    if (!f) return;
    fprintf(f, "# moe-trace v1\n# n_layers: 1\n# n_experts: 6\n# top_k: 1\n");
    fprintf(f, "0 P 0 0\n0 P 1 1\n0 P 2 2\n0 D 3 3\n0 D 4 0\n");
    fprintf(f, "1 P 0 4\n1 D 1 3\n1 D 2 0\n1 D 3 1\n");
    CHECK(fclose(f) == 0);
    struct moeinf_sim_params p = moeinf_sim_params_default();
    p.trace_path = path;
    p.policy = "lru";
    p.cache_experts = 6;
    p.batch = 4;
    p.parallel = 2;
    struct moeinf_sim_result r;
    struct moeinf_error err;
    CHECK_EQ_INT(moeinf_sim_run(&p, &r, &err), MOEINF_OK);
    CHECK_EQ_INT(r.iterations, 4);
    CHECK_EQ_INT(r.tokens, 9);
    CHECK_EQ_INT(r.decode_tokens, 5);
    CHECK_EQ_INT(r.accesses, 7);
    CHECK_EQ_INT(r.hits, 2);
    CHECK_EQ_INT(r.decode_accesses, 3);
    CHECK_EQ_INT(r.decode_hits, 2);
    CHECK_EQ_INT(r.requests, 2);
    p.parallel = 1; /* one after another */
    CHECK_EQ_INT(moeinf_sim_run(&p, &r, &err), MOEINF_OK);
    CHECK_EQ_INT(r.accesses, 9);
    CHECK_EQ_INT(r.hits, 4);
    /* the warmup request 0 takes part in iterations 1-3: only iteration 4 counts */
    p.parallel = 2;
    p.warmup_requests = 1;
    CHECK_EQ_INT(moeinf_sim_run(&p, &r, &err), MOEINF_OK);
    CHECK_EQ_INT(r.iterations, 1);
    CHECK_EQ_INT(r.accesses, 1);
    CHECK_EQ_INT(r.hits, 1);
    CHECK_EQ_INT(r.requests, 1);
    /* a budget of 2: iteration 1 holds request 0's first 2 prompt tokens only (its last chunk
     * would be 1 token: it keeps 2 where it can), so request 1's prompt waits */
    p.warmup_requests = 0;
    p.batch = 2;
    CHECK_EQ_INT(moeinf_sim_run(&p, &r, &err), MOEINF_OK);
    CHECK_EQ_INT(r.tokens, 9);
    CHECK(r.iterations > 4);
    p.policy = "belady"; /* offline policies replay per token */
    CHECK_EQ_INT(moeinf_sim_run(&p, &r, &err), MOEINF_ERR_ARG);
    remove(path);
}

static void test_belady_is_the_exhaustive_optimum(void) {
    static struct mem_trace t;
    static short memo[MAX_ACC * 256];
    uint64_t rng = 11;
    char path[512];
    test_tmp_path("sim_belady.txt", path, sizeof path);
    int n_beaten = 0;
    for (int round = 0; round < 120; round++) {
        int top_k = 1 + round % 2; /* 2 layers x 4 experts, top-1 or top-2, ~12 tokens */
        make_trace(&rng, 2, 4, top_k, 1 + round % 3, 6, path, &t);
        for (int cap = 2; cap <= 3; cap++) {
            if (cap < top_k) continue;
            memset(memo, 0xff, (size_t)(t.n + 1) * 256 * sizeof memo[0]);
            int best = best_hits(&t, cap, 0, 0, memo);
            enum moeinf_status st;
            struct moeinf_sim_result r = sim(path, "belady", cap, 0, &st);
            CHECK_EQ_INT(st, MOEINF_OK);
            CHECK_MSG(r.hits == (uint64_t)best, "top_k=%d cap=%d n=%d: belady %llu, optimum %d",
                      top_k, cap, t.n, (unsigned long long)r.hits, best);
            struct moeinf_sim_result lru = sim(path, "lru", cap, 0, &st);
            CHECK(lru.hits <= r.hits);
            n_beaten += lru.hits < r.hits;
        }
    }
    CHECK(n_beaten > 10); /* the cases are not all trivial */
}

/* Belady on larger traces against a plain furthest-next-use scan (the exhaustive search does
 * not scale there); every policy must stay at or below it. */
static void test_belady_larger_traces(void) {
    static struct mem_trace t;
    uint64_t rng = 13;
    char path[512];
    test_tmp_path("sim_belady_big.txt", path, sizeof path);
    for (int round = 0; round < 10; round++) {
        int n_layers = 2 + round % 3;
        int n_experts = 8 + round;
        int top_k = 1 + round % 4;
        make_trace(&rng, n_layers, n_experts, top_k, 4, 40, path, &t);
        for (int cap = top_k; cap <= n_layers * n_experts; cap += 5) {
            bool resident[MAX_IDS * 2] = {false};
            int n_res = 0;
            long hits = 0;
            for (int p = 0; p < t.n; p++) {
                uint32_t id = t.ids[p];
                if (resident[id]) {
                    hits++;
                    continue;
                }
                if (n_res == cap) {
                    int v = -1;
                    int v_next = -1;
                    for (int i = 0; i < n_layers * n_experts; i++) {
                        if (!resident[i] || ref_pinned(&t, p, (uint32_t)i)) continue;
                        int nx = p + 1;
                        while (nx < t.n && t.ids[nx] != (uint32_t)i)
                            nx++;
                        if (nx > v_next) {
                            v = i;
                            v_next = nx;
                        }
                    }
                    resident[v] = false;
                    n_res--;
                }
                resident[id] = true;
                n_res++;
            }
            enum moeinf_status st;
            struct moeinf_sim_result r = sim(path, "belady", cap, 0, &st);
            CHECK_EQ_INT(r.hits, hits);
            static const char *const online[] = {"lru", "lfu", "count"};
            for (int i = 0; i < 3; i++)
                CHECK(sim(path, online[i], cap, 0, &st).hits <= r.hits);
        }
    }
}

/* ---- prefetch ----------------------------------------------------------------------------- */

/* LRU's own table plus a scripted proposal: after layer l, experts script[0..) of the next
 * layer (wrapping to layer 0 for the next token). Test-only, so the script is file state. */
static int script_n_layers, script_n_experts;
static const int *script;
static int script_len;

static int scripted_propose(void *state, int layer, uint32_t *out, int max) {
    (void)state;
    int n = 0;
    for (int i = 0; i < script_len && n < max; i++) {
        out[n++] = (uint32_t)(((layer + 1) % script_n_layers) * script_n_experts + script[i]);
    }
    return n;
}

static struct moeinf_policy_ops scripted_ops(void) {
    struct moeinf_policy_ops ops = moeinf_policy_lru;
    ops.name = "scripted";
    ops.propose_prefetch = scripted_propose;
    return ops;
}

static struct moeinf_sim_result run_scripted(const char *path, int n_layers, int n_experts, int cap,
                                             int prefetch, int warmup, const int *pf, int n_pf,
                                             double compute_ms) {
    script_n_layers = n_layers;
    script_n_experts = n_experts;
    script = pf;
    script_len = n_pf;
    struct moeinf_policy_ops ops = scripted_ops();
    struct moeinf_sim_params p = moeinf_sim_params_default();
    p.trace_path = path;
    p.cache_experts = cap;
    p.prefetch = prefetch;
    p.warmup_requests = warmup;
    if (compute_ms > 0) {
        p.expert_bytes = 1e6;
        p.bandwidth_gbps = 1.0; /* one expert = 1 ms */
        p.compute_ms = compute_ms;
    }
    struct moeinf_sim_result r;
    memset(&r, 0, sizeof r);
    struct moeinf_error err;
    enum moeinf_status st = moeinf_sim_replay(&p, &ops, &r, &err);
    CHECK_MSG(st == MOEINF_OK, "%s", err.msg);
    return r;
}

static void write_small(const char *name, const char *tokens, char *path, size_t size) {
    test_tmp_path(name, path, size);
    FILE *f = fopen(path, "w");
    if (!f) return;
    fprintf(f, "# moe-trace v1\n# n_layers: 1\n# n_experts: 4\n# top_k: 1\n%s", tokens);
    fclose(f);
}

static void test_prefetch_hand_computed(void) {
    char path[512];
    static const int pf[2] = {2, 3};
    /* A: tokens 0, 2, 3 (one layer, cache 3). Token 1 misses 0, then prefetches 2 and 3;
     * tokens 2 and 3 hit them. Time (load 1 ms, compute 1.5): 1.5 + 1 + max(0, 2 - 1.5) = 3,
     * then 1.5 and 1.5. */
    write_small("pf_a.txt", "0 P 0 0\n0 D 1 2\n0 D 2 3\n", path, sizeof path);
    struct moeinf_sim_result r = run_scripted(path, 1, 4, 3, 2, 0, pf, 2, 1.5);
    CHECK_EQ_INT(r.accesses, 3);
    CHECK_EQ_INT(r.hits, 2);
    CHECK_EQ_INT(r.decode_hits, 2);
    CHECK_EQ_INT(r.prefetch_loads, 2);
    CHECK_EQ_INT(r.prefetch_hits, 2);
    CHECK_EQ_INT(r.wasted_prefetches, 0);
    CHECK(r.timed);
    CHECK_NEAR(r.ms_per_token, 6.0 / 3, 1e-12);
    CHECK_NEAR(r.decode_ms_per_token, 1.5, 1e-12);
    /* B: tokens 0, 0, 1. Token 1: miss 0, prefetch 2, 3 (cache full: 0 2 3). Token 2: hit 0.
     * Token 3: miss 1 evicts 2 (LRU, wasted), then prefetch 2 evicts 3 (wasted), prefetch 3
     * evicts 0; 2 and 3 are left unused at the end (wasted). Times 3, 1.5, 1.5 + 1 + 0.5. */
    write_small("pf_b.txt", "0 P 0 0\n0 D 1 0\n0 D 2 1\n", path, sizeof path);
    r = run_scripted(path, 1, 4, 3, 2, 0, pf, 2, 1.5);
    CHECK_EQ_INT(r.hits, 1);
    CHECK_EQ_INT(r.prefetch_loads, 4);
    CHECK_EQ_INT(r.prefetch_hits, 0);
    CHECK_EQ_INT(r.wasted_prefetches, 4);
    CHECK_NEAR(r.ms_per_token, 7.5 / 3, 1e-12);
    CHECK_NEAR(r.decode_ms_per_token, 4.5 / 2, 1e-12);
    /* --prefetch 1 takes only the first proposal. Token 1: miss 0, prefetch 2; token 2: 0 hit;
     * token 3: 1 misses with room to spare. 2 is left unused. Times 2.5, 1.5, 2.5 (one
     * prefetch never exceeds compute). */
    r = run_scripted(path, 1, 4, 3, 1, 0, pf, 2, 1.5);
    CHECK_EQ_INT(r.prefetch_loads, 1);
    CHECK_EQ_INT(r.wasted_prefetches, 1);
    CHECK_NEAR(r.ms_per_token, 6.5 / 3, 1e-12);
    /* Without the time model nothing is timed. */
    r = run_scripted(path, 1, 4, 3, 1, 0, pf, 2, 0);
    CHECK(!r.timed);
    /* Prefetch 0: the policy is never asked. */
    r = run_scripted(path, 1, 4, 3, 0, 0, pf, 2, 0);
    CHECK_EQ_INT(r.prefetch_loads, 0);
    CHECK_EQ_INT(r.hits, 1);
}

static void test_prefetch_matches_reference(void) {
    static struct mem_trace t;
    uint64_t rng = 17;
    char path[512];
    test_tmp_path("sim_prefetch.txt", path, sizeof path);
    static const int pf[3] = {0, 1, 2};
    for (int round = 0; round < 30; round++) {
        int n_layers = 1 + round % 3;
        int n_experts = 4 + round % 9;
        int top_k = 1 + round % 3;
        make_trace(&rng, n_layers, n_experts, top_k, 3, 25, path, &t);
        int warmup = round % 3 == 2 ? 1 : 0;
        for (int n_pf = 1; n_pf <= 3; n_pf++) {
            for (int cap = top_k; cap <= n_layers * n_experts; cap += 2) {
                struct moeinf_sim_result r =
                    run_scripted(path, n_layers, n_experts, cap, n_pf, warmup, pf, 3, 0);
                struct ref_counts rc = ref_replay(&t, REF_LRU, cap, warmup, pf, n_pf);
                CHECK_MSG(r.hits == (uint64_t)rc.hits &&
                              r.prefetch_loads == (uint64_t)rc.pf_loads &&
                              r.prefetch_hits == (uint64_t)rc.pf_hits &&
                              r.wasted_prefetches == (uint64_t)rc.pf_wasted,
                          "n_layers=%d n_experts=%d top_k=%d cap=%d pf=%d: hits %llu/%ld loads "
                          "%llu/%ld pf_hits "
                          "%llu/%ld wasted %llu/%ld",
                          n_layers, n_experts, top_k, cap, n_pf, (unsigned long long)r.hits,
                          rc.hits, (unsigned long long)r.prefetch_loads, rc.pf_loads,
                          (unsigned long long)r.prefetch_hits, rc.pf_hits,
                          (unsigned long long)r.wasted_prefetches, rc.pf_wasted);
                CHECK(r.prefetch_hits <= r.hits);
                if (!warmup) CHECK_EQ_INT(r.prefetch_loads, r.prefetch_hits + r.wasted_prefetches);
            }
        }
    }
}

/* ---- cache, registry, parameters ------------------------------------------------------------- */

/* A policy whose victim is whatever `bad_victim` says. */
static uint32_t bad_victim;

static uint32_t choose_bad(void *state, const struct moeinf_cache *cache) {
    (void)state;
    (void)cache;
    return bad_victim;
}

static void test_cache_pins_and_errors(void) {
    struct moeinf_policy_geometry g = {2, 4, 2, 3, {0}};
    struct moeinf_cache *c = NULL;
    struct moeinf_policy *p = NULL;
    struct moeinf_error err;
    CHECK_EQ_INT(moeinf_cache_init(&g, &c, &err), MOEINF_OK);
    CHECK_EQ_INT(moeinf_policy_create("lru", &g, &p, &err), MOEINF_OK);
    if (!c || !p) return;
    struct moeinf_cache_event ev;
    /* fill 0, 1, 2; then a step needing 0 and 3: 0 hits, 3 must not evict 0 (pinned) although
     * 0 is the least recently used before the step */
    for (uint32_t id = 0; id < 3; id++) {
        CHECK_EQ_INT(moeinf_cache_access(c, p, id, &ev, &err), MOEINF_OK);
        CHECK(!ev.hit);
        CHECK_EQ_INT(ev.slot, (int)id);
    }
    uint32_t step[2] = {3, 0};
    moeinf_cache_step_begin(c, p, 0, step, 2);
    CHECK(moeinf_cache_is_pinned(c, 0) && moeinf_cache_is_pinned(c, 3));
    CHECK_EQ_INT(moeinf_cache_access(c, p, 3, &ev, &err), MOEINF_OK);
    CHECK(!ev.hit);
    CHECK_EQ_INT(ev.evicted, 1); /* 0 is older but pinned */
    CHECK_EQ_INT(ev.slot, 1);    /* the victim's slot */
    CHECK_EQ_INT(moeinf_cache_slot(c, 3), 1);
    CHECK_EQ_INT(moeinf_cache_slot(c, 1), -1);
    CHECK_EQ_INT(moeinf_cache_access(c, p, 0, &ev, &err), MOEINF_OK);
    CHECK(ev.hit);
    moeinf_cache_step_end(c, p, 0, step, 2);
    CHECK(!moeinf_cache_is_pinned(c, 0));
    /* every resident pinned: a demand miss is an error, a prefetch is skipped */
    for (uint32_t id = 0; id < 4; id++) {
        if (moeinf_cache_is_resident(c, id)) moeinf_cache_pin(c, id);
    }
    CHECK_EQ_INT(moeinf_cache_access(c, p, 5, &ev, &err), MOEINF_ERR_ARG);
    CHECK_EQ_INT(moeinf_cache_prefetch(c, p, 5, &ev, &err), MOEINF_OK);
    CHECK(!ev.admitted && ev.slot == -1);
    CHECK_EQ_INT(moeinf_cache_access(c, p, 99, &ev, &err), MOEINF_ERR_ARG);
    moeinf_policy_free(p);
    p = NULL;
    moeinf_cache_free(c);
    c = NULL;

    /* a policy that returns an invalid victim is caught and named */
    struct moeinf_policy_ops bad = moeinf_policy_lru;
    bad.name = "bad";
    bad.choose_victim = choose_bad;
    g.capacity = 2;
    CHECK_EQ_INT(moeinf_cache_init(&g, &c, &err), MOEINF_OK);
    CHECK_EQ_INT(moeinf_policy_create_ops(&bad, &g, &p, &err), MOEINF_OK);
    if (!c || !p) return;
    moeinf_cache_access(c, p, 0, &ev, &err);
    moeinf_cache_access(c, p, 1, &ev, &err);
    static const uint32_t victims[3] = {5, 100, 0};
    static const char *const why[3] = {"not resident", "out of range", "pinned"};
    moeinf_cache_pin(c, 0);
    for (int i = 0; i < 3; i++) {
        bad_victim = victims[i];
        CHECK_EQ_INT(moeinf_cache_access(c, p, 2, &ev, &err), MOEINF_ERR_ARG);
        CHECK_STR_CONTAINS(err.msg, "policy 'bad'");
        CHECK_STR_CONTAINS(err.msg, why[i]);
    }
    moeinf_cache_free(c);
    moeinf_policy_free(p);
    moeinf_cache_free(NULL);
    moeinf_policy_free(NULL);
}

static void test_registry_and_parameters(void) {
    struct moeinf_policy_geometry g = {2, 4, 2, 2, {0}};
    struct moeinf_error err;
    int n = 0;
    for (size_t i = 0; moeinf_sim_policy_name(i); i++, n++) {
        const char *name = moeinf_sim_policy_name(i);
        const struct moeinf_policy_ops *ops = moeinf_sim_policy_find(name);
        CHECK(ops && !strcmp(ops->name, name) && moeinf_sim_policy_summary(i));
        /* the engine's registry has exactly the online ones */
        CHECK_EQ_INT(moeinf_policy_find(name) != NULL, !moeinf_policy_ops_offline(ops));
    }
    CHECK_EQ_INT(n, 7); /* lru, lfu, count, reuse, moe-infinity, belady, freq-oracle */
    CHECK(!strcmp(moeinf_sim_default_policy(), MOEINF_POLICY_DEFAULT));
    struct moeinf_policy *p = NULL;
    CHECK_EQ_INT(moeinf_policy_create("belady", &g, &p, &err), MOEINF_ERR_ARG);
    CHECK_EQ_INT(moeinf_policy_create("nope", &g, &p, &err), MOEINF_ERR_ARG);
    g.capacity = 1;
    CHECK_EQ_INT(moeinf_policy_create("lru", &g, &p, &err), MOEINF_ERR_ARG);
    CHECK_STR_CONTAINS(err.msg, "smaller than top_k");

    struct moeinf_sim_params sp = moeinf_sim_params_default();
    int c = 0;
    sp.cache_percent = 10;
    CHECK_EQ_INT(moeinf_sim_cache_size(&sp, 3072, &c, &err), MOEINF_OK);
    CHECK_EQ_INT(c, 307);
    sp.cache_percent = 5;
    CHECK_EQ_INT(moeinf_sim_cache_size(&sp, 1664, &c, &err), MOEINF_OK);
    CHECK_EQ_INT(c, 83); /* 83.2 */
    sp.cache_percent = 50;
    CHECK_EQ_INT(moeinf_sim_cache_size(&sp, 3, &c, &err), MOEINF_OK);
    CHECK_EQ_INT(c, 2); /* 1.5 rounds up */
    sp.cache_percent = 0;
    CHECK_EQ_INT(moeinf_sim_cache_size(&sp, 3, &c, &err), MOEINF_ERR_ARG);
    sp.cache_experts = 12;
    CHECK_EQ_INT(moeinf_sim_cache_size(&sp, 3, &c, &err), MOEINF_OK);
    CHECK_EQ_INT(c, 12);

    /* through moeinf_sim_run: cache below top_k, unknown policy, missing file */
    char path[512];
    test_tmp_path("sim_params.txt", path, sizeof path);
    FILE *f = fopen(path, "w");
    if (!f) return;
    fprintf(f, "# moe-trace v1\n# n_layers: 2\n# n_experts: 4\n# top_k: 2\n0 P 0 0,1|2,3\n");
    fclose(f);
    enum moeinf_status st;
    sim(path, "lru", 1, 0, &st);
    CHECK_EQ_INT(st, MOEINF_ERR_ARG);
    sim(path, "nope", 4, 0, &st);
    CHECK_EQ_INT(st, MOEINF_ERR_ARG);
    struct moeinf_sim_result r = sim(path, NULL, 2, 0, &st);
    CHECK_EQ_INT(st, MOEINF_OK);
    CHECK(!strcmp(r.policy, MOEINF_POLICY_DEFAULT));
    CHECK_EQ_INT(r.accesses, 4);
    CHECK_EQ_INT(r.hits, 0);
    CHECK_EQ_INT(r.decode_accesses, 0);
    sim("/nonexistent/trace.txt", "lru", 2, 0, &st);
    CHECK_EQ_INT(st, MOEINF_ERR_IO);
    /* a malformed trace stops the replay with its defect, for online and offline policies */
    f = fopen(path, "w");
    if (!f) return;
    fprintf(f, "# moe-trace v1\n# n_layers: 2\n# n_experts: 4\n# top_k: 2\n0 P 0 0,1|2,3\n"
               "0 P 1 0,1|2,9\n");
    fclose(f);
    sim(path, "lru", 2, 0, &st);
    CHECK_EQ_INT(st, MOEINF_ERR_FORMAT);
    sim(path, "belady", 2, 0, &st);
    CHECK_EQ_INT(st, MOEINF_ERR_FORMAT);
}

int main(void) {
    RUN(test_online_policies_match_references);
    RUN(test_freq_oracle_hand_computed);
    RUN(test_parallel_hand_computed);
    RUN(test_decode_misses_hand_computed);
    RUN(test_belady_is_the_exhaustive_optimum);
    RUN(test_belady_larger_traces);
    RUN(test_prefetch_hand_computed);
    RUN(test_prefetch_matches_reference);
    RUN(test_cache_pins_and_errors);
    RUN(test_registry_and_parameters);
    return test_report();
}
