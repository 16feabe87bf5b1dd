/*
 * test_eam.c - EAM, EAMC and PredictEAM against hand-computed cases and brute-force
 * recomputation (cosines from the stored entries, in float64); the EAMC file: round trip,
 * atomic replacement under a crash before the rename, every defect named, and a rejected file
 * leaving the policy as it was; `sim --eamc` saving and reloading.
 */
#include <stdint.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/file.h"
#include "base/le.h"
#include "base/rng.h"
#include "experts/cache.h"
#include "experts/eam.h"
#include "experts/policy.h"
#include "moeinf_sim.h"
#include "trace/trace.h"
#include "test.h"

/* Bytes before the first record of an EAMC file: header, model block, policy block (eam.h). */
#define HEAD 120

/* Feeds one token (phase, one expert per layer given as `experts[l]`, top_k 1). */
static void token1(struct moeinf_eamc *c, enum moeinf_phase ph, int n_experts, const int *experts,
                   int n_layers) {
    moeinf_eamc_token_begin(c, ph);
    for (int l = 0; l < n_layers; l++)
        moeinf_eamc_record(c, (uint32_t)(l * n_experts + experts[l]));
}

static void test_predict_hand_computed(void) {
    struct moeinf_policy_geometry g = {2, 4, 1, 0, {0}};
    struct moeinf_eamc *c = NULL;
    struct moeinf_error err;
    CHECK_EQ_INT(moeinf_eamc_init(&g, 4, &c, &err), MOEINF_OK);
    if (!c) return;
    float p[8];
    /* empty collection: uniform */
    CHECK_EQ_INT(moeinf_eamc_predict(c, 1, p), 0);
    CHECK_NEAR(p[0], 0.25, 1e-7);
    CHECK_NEAR(p[7], 0.25, 1e-7);

    /* request A: prefill [0|1] [0|1] [2|3]; decode [3|3] */
    moeinf_eamc_request_begin(c);
    token1(c, MOEINF_PHASE_PREFILL, 4, (const int[]){0, 1}, 2);
    token1(c, MOEINF_PHASE_PREFILL, 4, (const int[]){0, 1}, 2);
    token1(c, MOEINF_PHASE_PREFILL, 4, (const int[]){2, 3}, 2);
    token1(c, MOEINF_PHASE_DECODE, 4, (const int[]){3, 3}, 2);
    CHECK_EQ_INT(moeinf_eamc_current_tokens(c, MOEINF_PHASE_PREFILL), 3);
    CHECK_EQ_INT(moeinf_eamc_current_tokens(c, MOEINF_PHASE_DECODE), 1);
    CHECK_NEAR(moeinf_eamc_current(c, MOEINF_PHASE_PREFILL)[0], 2, 0);
    CHECK_NEAR(moeinf_eamc_current(c, MOEINF_PHASE_PREFILL)[4 + 1], 2, 0);
    moeinf_eamc_request_end(c);
    /* request B: prefill [1|2] [1|2]; decode [0|0] */
    moeinf_eamc_request_begin(c);
    token1(c, MOEINF_PHASE_PREFILL, 4, (const int[]){1, 2}, 2);
    token1(c, MOEINF_PHASE_PREFILL, 4, (const int[]){1, 2}, 2);
    token1(c, MOEINF_PHASE_DECODE, 4, (const int[]){0, 0}, 2);
    moeinf_eamc_request_end(c);
    CHECK_EQ_INT(moeinf_eamc_size(c), 2);

    /* request C, first prefill token [0|1]: closest is A (cos 4/sqrt(10*2)), B is orthogonal */
    moeinf_eamc_request_begin(c);
    moeinf_eamc_token_begin(c, MOEINF_PHASE_PREFILL);
    /* nothing recorded yet: every entry is the prediction, A + B prefill:
     * layer 0: e0 2, e1 2, e2 1 -> /5; layer 1: e1 2, e2 2, e3 1 -> /5 */
    CHECK_EQ_INT(moeinf_eamc_predict(c, 1, p), 2);
    CHECK_NEAR(p[0], 0.4, 1e-6);
    CHECK_NEAR(p[1], 0.4, 1e-6);
    CHECK_NEAR(p[2], 0.2, 1e-6);
    CHECK_NEAR(p[3], 0.0, 1e-6);
    CHECK_NEAR(p[4 + 3], 0.2, 1e-6);
    moeinf_eamc_record(c, 0);
    moeinf_eamc_record(c, 4 + 1);
    int ids[4];
    CHECK_EQ_INT(moeinf_eamc_match(c, 2, ids), 2);
    CHECK_EQ_INT(ids[0], 0); /* A */
    CHECK_EQ_INT(ids[1], 1); /* B: cosine 0, still a candidate */
    CHECK_EQ_INT(moeinf_eamc_predict(c, 1, p), 1);
    /* A's prefill: layer 0 [2, 0, 1, 0] / 3, layer 1 [0, 2, 0, 1] / 3 */
    CHECK_NEAR(p[0], 2.0 / 3, 1e-6);
    CHECK_NEAR(p[2], 1.0 / 3, 1e-6);
    CHECK_NEAR(p[1], 0.0, 1e-6);
    CHECK_NEAR(p[4 + 1], 2.0 / 3, 1e-6);
    CHECK_NEAR(p[4 + 3], 1.0 / 3, 1e-6);
    /* first decode token, nothing decoded yet: matched on the prompt (A), predicts A's decode
     * EAM: layer 0 e3, layer 1 e3 */
    moeinf_eamc_token_begin(c, MOEINF_PHASE_DECODE);
    CHECK_EQ_INT(moeinf_eamc_predict(c, 1, p), 1);
    CHECK_NEAR(p[3], 1.0, 1e-6);
    CHECK_NEAR(p[4 + 3], 1.0, 1e-6);
    /* after a decode token [0|0], the decode EAMs match: B's decode is [0|0] */
    moeinf_eamc_record(c, 0);
    moeinf_eamc_record(c, 4 + 0);
    CHECK_EQ_INT(moeinf_eamc_predict(c, 1, p), 1);
    CHECK_NEAR(p[0], 1.0, 1e-6);
    CHECK_NEAR(p[4], 1.0, 1e-6);
    /* two matches: A + B decode rows, each layer [1, 0, 0, 1] / 2 */
    CHECK_EQ_INT(moeinf_eamc_predict(c, 2, p), 2);
    CHECK_NEAR(p[0], 0.5, 1e-6);
    CHECK_NEAR(p[3], 0.5, 1e-6);
    moeinf_eamc_free(c);

    CHECK_NEAR(moeinf_eam_proximity(3, 3, 4), 1.0, 0);
    CHECK_NEAR(moeinf_eam_proximity(0, 3, 4), 0.75, 0); /* next token's layer 0: one step */
    CHECK_NEAR(moeinf_eam_proximity(2, 3, 4), 0.25, 0);
    CHECK_EQ_INT(moeinf_eamc_init(&g, 0, &c, &err), MOEINF_ERR_ARG);
}

/* float64 cosine, written here (not the library's). */
static double cos64(const float *a, const float *b, size_t n) {
    double ab = 0;
    double aa = 0;
    double bb = 0;
    for (size_t i = 0; i < n; i++) {
        ab += (double)a[i] * b[i];
        aa += (double)a[i] * a[i];
        bb += (double)b[i] * b[i];
    }
    return aa > 0 && bb > 0 ? ab / sqrt(aa * bb) : 0;
}

/* Random requests drawn from a few "topics" so that matches mean something. */
static void random_request(struct moeinf_eamc *c, uint64_t *rng, int n_layers, int n_experts,
                           int top_k) {
    int topic = (int)(moeinf_splitmix64(rng) % 3);
    int n_tok = 1 + (int)(moeinf_splitmix64(rng) % 6);
    int n_pre = (int)(moeinf_splitmix64(rng) % (uint64_t)(n_tok + 1));
    moeinf_eamc_request_begin(c);
    for (int t = 0; t < n_tok; t++) {
        moeinf_eamc_token_begin(c, t < n_pre ? MOEINF_PHASE_PREFILL : MOEINF_PHASE_DECODE);
        for (int l = 0; l < n_layers; l++) {
            int used[16] = {0};
            for (int j = 0; j < top_k; j++) {
                int e;
                do {
                    uint64_t r = moeinf_splitmix64(rng);
                    e = (r & 1) ? (topic * 3 + (int)((r >> 1) % 3)) % n_experts
                                : (int)((r >> 1) % n_experts);
                } while (used[e]);
                used[e] = 1;
                moeinf_eamc_record(c, (uint32_t)(l * n_experts + e));
            }
        }
    }
}

enum {
    L3 = 3,
    E9 = 9,
    CAP = 5
};

static void test_match_and_replacement_brute_force(void) {
    const int n_layers = L3;
    const int n_experts = E9;
    const int top_k = 2;
    struct moeinf_policy_geometry g = {n_layers, n_experts, top_k, 0, {0}};
    struct moeinf_eamc *c = NULL;
    struct moeinf_error err;
    CHECK_EQ_INT(moeinf_eamc_init(&g, CAP, &c, &err), MOEINF_OK);
    if (!c) return;
    uint64_t rng = 7;
    float ent[CAP][2][27];
    float cur[2][27];
    float both_cur[54];
    float both_ent[54];
    for (int r = 0; r < 40; r++) {
        random_request(c, &rng, n_layers, n_experts, top_k);
        int size = moeinf_eamc_size(c);
        for (int m = 0; m < size; m++) {
            moeinf_eamc_entry(c, m, MOEINF_PHASE_PREFILL, ent[m][0]);
            moeinf_eamc_entry(c, m, MOEINF_PHASE_DECODE, ent[m][1]);
        }
        for (int ph = 0; ph < 2; ph++)
            memcpy(cur[ph], moeinf_eamc_current(c, (enum moeinf_phase)ph), sizeof cur[ph]);
        /* matching: the library's top 3 against a float64 ranking of the same phase */
        int mph = moeinf_eamc_phase(c);
        float zero[27] = {0};
        if (test_same_bytes(cur[mph], zero, sizeof zero)) mph = 0;
        int ids[3];
        int n = moeinf_eamc_match(c, 3, ids);
        double prev = 2;
        for (int i = 0; i < n; i++) {
            double sim = cos64(cur[mph], ent[ids[i]][mph], 27);
            CHECK(sim <= prev + 1e-12);
            prev = sim;
            /* no unpicked entry is strictly closer than the last pick */
            for (int m = 0; m < size && i == n - 1; m++) {
                bool picked = false;
                for (int j = 0; j < n; j++)
                    picked |= ids[j] == m;
                float z[27] = {0};
                if (!picked && !test_same_bytes(ent[m][mph], z, sizeof z)) {
                    CHECK(cos64(cur[mph], ent[m][mph], 27) <= sim + 1e-12);
                }
            }
        }
        /* replacement: when full, the entry most similar over both phases is overwritten */
        memcpy(both_cur, cur[0], sizeof cur[0]);
        memcpy(both_cur + 27, cur[1], sizeof cur[1]);
        int expect = size < CAP ? size : -1;
        if (expect < 0) {
            double best = -2;
            for (int m = 0; m < size; m++) {
                memcpy(both_ent, ent[m][0], sizeof ent[m][0]);
                memcpy(both_ent + 27, ent[m][1], sizeof ent[m][1]);
                double sim = cos64(both_cur, both_ent, 54);
                if (sim > best + 1e-12) {
                    best = sim;
                    expect = m;
                }
            }
        }
        moeinf_eamc_request_end(c);
        float after[27];
        moeinf_eamc_entry(c, expect, MOEINF_PHASE_PREFILL, after);
        CHECK(test_same_bytes(after, cur[0], sizeof after));
        moeinf_eamc_entry(c, expect, MOEINF_PHASE_DECODE, after);
        CHECK(test_same_bytes(after, cur[1], sizeof after));
        /* every other entry unchanged */
        for (int m = 0; m < size; m++) {
            if (m == expect) continue;
            moeinf_eamc_entry(c, m, MOEINF_PHASE_PREFILL, after);
            CHECK(test_same_bytes(after, ent[m][0], sizeof after));
        }
    }
    CHECK_EQ_INT(moeinf_eamc_size(c), CAP);
    /* an empty request is not stored */
    moeinf_eamc_entry(c, 0, MOEINF_PHASE_PREFILL, ent[0][0]);
    moeinf_eamc_request_begin(c);
    moeinf_eamc_request_end(c);
    moeinf_eamc_entry(c, 0, MOEINF_PHASE_PREFILL, cur[0]);
    CHECK(test_same_bytes(cur[0], ent[0][0], sizeof cur[0]));
    moeinf_eamc_free(c);
}

/* A collection with some history and a current request, for file tests. */
static struct moeinf_eamc *sample(const struct moeinf_policy_geometry *g, int cap, int n_req,
                                  uint64_t seed) {
    struct moeinf_eamc *c = NULL;
    struct moeinf_error err;
    if (moeinf_eamc_init(g, cap, &c, &err) != MOEINF_OK) return NULL;
    uint64_t rng = seed;
    for (int r = 0; r < n_req; r++) {
        random_request(c, &rng, g->n_layers, g->n_experts, g->top_k);
        moeinf_eamc_request_end(c);
    }
    return c;
}

static bool same_collection(const struct moeinf_eamc *a, const struct moeinf_eamc *b) {
    if (moeinf_eamc_size(a) != moeinf_eamc_size(b)) return false;
    if (moeinf_eamc_capacity(a) != moeinf_eamc_capacity(b)) return false;
    uint32_t n = moeinf_eamc_n_ids(a);
    float *x = malloc(n * sizeof *x);
    float *y = malloc(n * sizeof *y);
    bool same = x && y;
    for (int m = 0; same && m < moeinf_eamc_size(a); m++) {
        for (int ph = 0; ph < 2 && same; ph++) {
            moeinf_eamc_entry(a, m, (enum moeinf_phase)ph, x);
            moeinf_eamc_entry(b, m, (enum moeinf_phase)ph, y);
            same = !memcmp(x, y, n * sizeof *x) &&
                   moeinf_eamc_entry_tokens(a, m, (enum moeinf_phase)ph) ==
                       moeinf_eamc_entry_tokens(b, m, (enum moeinf_phase)ph);
        }
    }
    free(x);
    free(y);
    return same;
}

static void test_file_round_trip(void) {
    struct moeinf_policy_geometry g = {3, 9, 2, 0, {0}};
    char path[512];
    test_tmp_path("eam_round_trip.eamc", path, sizeof path);
    struct moeinf_error err;
    for (int n_req = 0; n_req <= 9; n_req += 3) {
        struct moeinf_eamc *a = sample(&g, 6, n_req, 11 + (uint64_t)n_req);
        struct moeinf_eamc *b = NULL;
        if (!a) continue;
        CHECK_EQ_INT(moeinf_eamc_save(a, path, &err), MOEINF_OK);
        enum moeinf_eamc_defect d = MOEINF_EAMC_BAD_MAGIC;
        CHECK_EQ_INT(moeinf_eamc_load(&g, path, &b, &d, &err), MOEINF_OK);
        CHECK_EQ_INT(d, MOEINF_EAMC_OK);
        if (b) {
            CHECK(same_collection(a, b));
            /* the same request predicts the same after the reload */
            float pa[27];
            float pb[27];
            uint64_t r1 = 99;
            uint64_t r2 = 99;
            random_request(a, &r1, 3, 9, 2);
            random_request(b, &r2, 3, 9, 2);
            CHECK_EQ_INT(moeinf_eamc_predict(a, 2, pa), moeinf_eamc_predict(b, 2, pb));
            CHECK(test_same_bytes(pa, pb, sizeof pa));
        }
        /* the file's size is what the format says */
        struct stat st;
        CHECK_EQ_INT(stat(path, &st), 0);
        CHECK_EQ_INT(st.st_size, HEAD + moeinf_eamc_size(a) * (8 + 2 * 27 * 4) + 8);
        moeinf_eamc_free(a);
        moeinf_eamc_free(b);
    }
    remove(path);
}

static void test_crash_before_rename_keeps_old_file(void) {
    struct moeinf_policy_geometry g = {3, 9, 2, 0, {0}};
    char path[512];
    test_tmp_path("eam_atomic.eamc", path, sizeof path);
    struct moeinf_error err;
    struct moeinf_eamc *old = sample(&g, 6, 4, 1);
    struct moeinf_eamc *fresh = sample(&g, 6, 6, 2);
    struct moeinf_eamc *back = NULL;
    if (!old || !fresh) goto done;
    CHECK_EQ_INT(moeinf_eamc_save(old, path, &err), MOEINF_OK);
    fflush(NULL);
    /* A child writes the new collection through the atomic writer and dies before the
     * commit (no rename). */
    pid_t pid = fork();
    if (pid == 0) {
        struct moeinf_atomic_file af;
        if (moeinf_atomic_open(path, &af, NULL) != MOEINF_OK) _exit(3);
        if (moeinf_eamc_write(fresh, af.fp, path, NULL) != MOEINF_OK) _exit(4);
        fflush(af.fp);
        _exit(0); /* crash: neither commit nor abort */
    }
    int status = 0;
    CHECK(pid > 0 && waitpid(pid, &status, 0) == pid);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    char tmp[600];
    snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)pid);
    struct stat st;
    CHECK_EQ_INT(stat(tmp, &st), 0); /* the half-done temp file is there... */
    CHECK_EQ_INT(moeinf_eamc_load(&g, path, &back, NULL, &err), MOEINF_OK);
    if (back) CHECK(same_collection(back, old)); /* ...and the file is the old one */
    moeinf_eamc_free(back);
    back = NULL;
    remove(tmp);
    /* a completed save replaces it */
    CHECK_EQ_INT(moeinf_eamc_save(fresh, path, &err), MOEINF_OK);
    CHECK_EQ_INT(moeinf_eamc_load(&g, path, &back, NULL, &err), MOEINF_OK);
    if (back) CHECK(same_collection(back, fresh));
    /* saving into a missing directory fails and writes nothing */
    char bad[600];
    snprintf(bad, sizeof bad, "%s.missing-dir/x.eamc", path);
    CHECK_EQ_INT(moeinf_eamc_save(fresh, bad, &err), MOEINF_ERR_IO);
done:
    moeinf_eamc_free(old);
    moeinf_eamc_free(fresh);
    moeinf_eamc_free(back);
    remove(path);
}

/* ---- defects ------------------------------------------------------------------------- */

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

/* FNV-1a 64, written here from the format's definition. */
static uint64_t fnv(const uint8_t *p, size_t n) {
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < n; i++) {
        h ^= p[i];
        h *= 0x100000001b3ull;
    }
    return h;
}

static void reseal(uint8_t *buf, size_t n) {
    moeinf_le_put_u64(buf + n - 8, fnv(buf, n - 8));
}

static enum moeinf_eamc_defect load_defect(const struct moeinf_policy_geometry *g, const char *path,
                                           struct moeinf_error *err) {
    struct moeinf_eamc *c = NULL;
    enum moeinf_eamc_defect d = MOEINF_EAMC_OK;
    enum moeinf_status st = moeinf_eamc_load(g, path, &c, &d, err);
    CHECK(c == NULL || st == MOEINF_OK);
    CHECK(st == MOEINF_OK || st == MOEINF_ERR_FORMAT);
    moeinf_eamc_free(c);
    return d;
}

static void test_defects_are_named(void) {
    struct moeinf_policy_geometry g = {3, 9, 2, 0, {0}};
    char good[512];
    char bad[512];
    test_tmp_path("eam_good.eamc", good, sizeof good);
    test_tmp_path("eam_bad.eamc", bad, sizeof bad);
    struct moeinf_error err;
    struct moeinf_eamc *c = sample(&g, 6, 4, 5);
    if (!c) return;
    CHECK_EQ_INT(moeinf_eamc_save(c, good, &err), MOEINF_OK);
    moeinf_eamc_free(c);
    static uint8_t buf[1 << 14];
    static uint8_t mod[1 << 14];
    size_t n = slurp(good, buf, sizeof buf);
    CHECK_EQ_INT(n, HEAD + 4 * (8 + 2 * 27 * 4) + 8);
    CHECK_EQ_INT(load_defect(&g, good, &err), MOEINF_EAMC_OK);

    struct {
        const char *what;
        size_t offset; /* byte to change (or the new length for truncation) */
        int kind;      /* 0 flip a byte, 1 truncate, 2 append, 3 set u32 and reseal */
        uint32_t value;
        enum moeinf_eamc_defect expect;
    } cases[] = {
        {"magic", 0, 0, 0, MOEINF_EAMC_BAD_MAGIC},
        {"empty", 0, 1, 0, MOEINF_EAMC_BAD_MAGIC},
        {"half header", 20, 1, 0, MOEINF_EAMC_TRUNCATED},
        {"version", 8, 3, 4, MOEINF_EAMC_BAD_VERSION},
        {"version 2, no model", 8, 3, 2, MOEINF_EAMC_BAD_VERSION},
        {"model kind", 32, 3, 3, MOEINF_EAMC_BAD_HEADER},
        {"model reserved word", 36, 3, 1, MOEINF_EAMC_BAD_HEADER},
        {"model name unprintable", 48, 3, 0x1b, MOEINF_EAMC_BAD_HEADER},
        {"model name unterminated", 92, 3, 0x41414141u, MOEINF_EAMC_BAD_HEADER},
        {"section with no policy", 112, 3, 4, MOEINF_EAMC_BAD_HEADER},
        {"capacity 0", 24, 3, 0, MOEINF_EAMC_BAD_HEADER},
        {"capacity huge", 24, 3, 1u << 30, MOEINF_EAMC_BAD_HEADER},
        {"entries > capacity", 28, 3, 7, MOEINF_EAMC_BAD_HEADER},
        {"top_k > experts", 20, 3, 10, MOEINF_EAMC_BAD_HEADER},
        {"entries cut", HEAD + 100, 1, 0, MOEINF_EAMC_TRUNCATED},
        {"model block cut", 60, 1, 0, MOEINF_EAMC_TRUNCATED},
        {"checksum cut", n - 3, 1, 0, MOEINF_EAMC_TRUNCATED},
        {"one more byte", n, 2, 0, MOEINF_EAMC_TRAILING},
        {"body byte", HEAD + 8 + 13, 0, 0, MOEINF_EAMC_CHECKSUM},
        {"token count", HEAD, 0, 0, MOEINF_EAMC_CHECKSUM},
        {"model hash byte", 41, 0, 0, MOEINF_EAMC_CHECKSUM},
        {"checksum byte", n - 1, 0, 0, MOEINF_EAMC_CHECKSUM},
        {"n_layers, resealed", 12, 3, 4, MOEINF_EAMC_TRUNCATED}, /* size now differs */
        {"NaN count, resealed", HEAD + 8 + 4, 3, 0x7fc00000u, MOEINF_EAMC_BAD_VALUE},
        {"negative count, resealed", HEAD + 8 + 8, 3, 0xbf800000u, MOEINF_EAMC_BAD_VALUE},
        {"infinite count, resealed", HEAD + 8 + 12, 3, 0x7f800000u, MOEINF_EAMC_BAD_VALUE},
    };

    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        memcpy(mod, buf, n);
        size_t len = n;
        switch (cases[i].kind) {
        case 0:
            mod[cases[i].offset] ^= 0x5a;
            break;
        case 1:
            len = cases[i].offset;
            break;
        case 2:
            mod[len++] = 0;
            break;
        default:
            moeinf_le_put_u32(mod + cases[i].offset, cases[i].value);
            reseal(mod, len);
        }
        spit(bad, mod, len);
        enum moeinf_eamc_defect d = load_defect(&g, bad, &err);
        CHECK_MSG(d == cases[i].expect, "%s: got %s", cases[i].what, moeinf_eamc_defect_name(d));
        CHECK_STR_CONTAINS(err.msg, bad);
        CHECK_STR_CONTAINS(err.msg, moeinf_eamc_defect_name(cases[i].expect));
    }
    /* an old version says why it is refused */
    memcpy(mod, buf, n);
    moeinf_le_put_u32(mod + 8, 2);
    reseal(mod, n);
    spit(bad, mod, n);
    CHECK_EQ_INT(load_defect(&g, bad, &err), MOEINF_EAMC_BAD_VERSION);
    CHECK_STR_CONTAINS(err.msg, "version 2 does not name its model");
    /* a clean file for another model */
    struct moeinf_policy_geometry other = {3, 9, 3, 0, {0}};
    CHECK_EQ_INT(load_defect(&other, good, &err), MOEINF_EAMC_GEOMETRY);
    CHECK_STR_CONTAINS(err.msg, "geometry mismatch");
    other = (struct moeinf_policy_geometry){2, 9, 2, 0, {0}};
    CHECK_EQ_INT(load_defect(&other, good, &err), MOEINF_EAMC_GEOMETRY);
    /* a damaged file for another model reports the damage */
    memcpy(mod, buf, n);
    mod[40] ^= 1;
    spit(bad, mod, n);
    CHECK_EQ_INT(load_defect(&other, bad, &err), MOEINF_EAMC_CHECKSUM);
    struct moeinf_eamc *none = NULL;
    CHECK_EQ_INT(moeinf_eamc_load(&g, "/nonexistent/x.eamc", &none, NULL, &err), MOEINF_ERR_IO);
    remove(good);
    remove(bad);
}

/* The file names its model: a reader with another identity (another model of the same
 * geometry, or a trace that names no model) refuses it naming both; the same identity, or a
 * reader with none, reads it. */
static void test_model_identity(void) {
    struct moeinf_policy_geometry ga = {3, 9, 2, 0, {0}};
    ga.model.kind = MOEINF_MODEL_ID_ROUTERS;
    ga.model.hash = 0x0123456789abcdefull;
    moeinf_model_id_set_name(&ga.model, "Model A\x1b[31m");
    struct moeinf_policy_geometry gb = ga;
    gb.model.hash = 0xfedcba9876543210ull;
    moeinf_model_id_set_name(&gb.model, "Model B");
    char path[512];
    test_tmp_path("eam_identity.eamc", path, sizeof path);
    struct moeinf_error err;
    struct moeinf_eamc *a = sample(&ga, 6, 3, 7);
    if (!a) return;
    CHECK_EQ_INT(moeinf_eamc_save(a, path, &err), MOEINF_OK);
    moeinf_eamc_free(a);
    CHECK_EQ_INT(load_defect(&ga, path, &err), MOEINF_EAMC_OK);
    CHECK_EQ_INT(load_defect(&gb, path, &err), MOEINF_EAMC_MODEL);
    CHECK_STR_CONTAINS(err.msg, path);
    CHECK_STR_CONTAINS(err.msg, "another model's state: this is 'Model B' (model id "
                                "fedcba9876543210), the file was written for 'Model A?[31m' "
                                "(model id 0123456789abcdef)");
    CHECK(!strchr(err.msg, '\x1b'));
    /* the same name is not the same model */
    moeinf_model_id_set_name(&gb.model, "Model A?[31m");
    CHECK_EQ_INT(load_defect(&gb, path, &err), MOEINF_EAMC_MODEL);
    /* a reader with no identity reads it and keeps the file's */
    struct moeinf_policy_geometry g0 = {3, 9, 2, 0, {0}};
    struct moeinf_eamc *c = NULL;
    CHECK_EQ_INT(moeinf_eamc_load(&g0, path, &c, NULL, &err), MOEINF_OK);
    char again[512];
    test_tmp_path("eam_identity2.eamc", again, sizeof again);
    if (c) CHECK_EQ_INT(moeinf_eamc_save(c, again, &err), MOEINF_OK);
    moeinf_eamc_free(c);
    CHECK_EQ_INT(load_defect(&ga, again, &err), MOEINF_EAMC_OK);
    /* a trace's identity: its model_id when it has one, else its model line (which no
     * model's identity is, even with the same hash) */
    struct moeinf_policy_geometry gt = ga;
    moeinf_model_id_for_trace("llama: 3 layers", true, ga.model.hash, &gt.model);
    CHECK_EQ_INT(load_defect(&gt, path, &err), MOEINF_EAMC_OK);
    moeinf_model_id_for_trace("Model A", false, 0, &gt.model);
    CHECK_EQ_INT(gt.model.kind, MOEINF_MODEL_ID_TRACE);
    CHECK_EQ_INT(load_defect(&gt, path, &err), MOEINF_EAMC_MODEL);
    CHECK_STR_CONTAINS(err.msg, "this is a trace of 'Model A' (no model_id), the file");
    gt.model.hash = ga.model.hash;
    CHECK_EQ_INT(load_defect(&gt, path, &err), MOEINF_EAMC_MODEL);
    /* a file built from such a trace is refused by a model */
    a = sample(&gt, 6, 2, 9);
    if (a) CHECK_EQ_INT(moeinf_eamc_save(a, again, &err), MOEINF_OK);
    moeinf_eamc_free(a);
    CHECK_EQ_INT(load_defect(&ga, again, &err), MOEINF_EAMC_MODEL);
    CHECK_STR_CONTAINS(err.msg, "the file was written for a trace of 'Model A' (no model_id)");
    remove(path);
    remove(again);
}

/* A policy's EAMC is replaced only by a good file; a bad one leaves it as it was. */
static void test_policy_state_all_or_nothing(void) {
    struct moeinf_policy_geometry g = {3, 9, 2, 12, {0}};
    char a[512];
    char b[512];
    char c2[512];
    test_tmp_path("eam_state_a.eamc", a, sizeof a);
    test_tmp_path("eam_state_b.eamc", b, sizeof b);
    test_tmp_path("eam_state_c.eamc", c2, sizeof c2);
    struct moeinf_error err;
    static const char *const names[] = {"moe-infinity", "reuse"};
    for (int k = 0; k < 2; k++) {
        struct moeinf_policy *p = NULL;
        CHECK_EQ_INT(moeinf_policy_create(names[k], &g, &p, &err), MOEINF_OK);
        if (!p) continue;
        /* give it a history through its events */
        uint64_t rng = 3;
        for (int r = 0; r < 5; r++) {
            moeinf_policy_request_begin(p, (uint64_t)r);
            for (int t = 0; t < 3; t++) {
                moeinf_policy_token_begin(p, MOEINF_PHASE_PREFILL);
                for (int l = 0; l < 3; l++) {
                    uint32_t ids[2] = {(uint32_t)(l * 9 + (int)(moeinf_splitmix64(&rng) % 4)), 0};
                    ids[1] = (uint32_t)(l * 9 + 4 + (int)(moeinf_splitmix64(&rng) % 5));
                    if (p->ops->on_step_begin) p->ops->on_step_begin(p->state, l, ids, NULL, 2);
                    for (int j = 0; j < 2; j++)
                        p->ops->on_access(p->state, ids[j], true);
                }
                moeinf_policy_token_end(p);
            }
            moeinf_policy_request_end(p);
        }
        bool loaded = true;
        remove(a);
        CHECK_EQ_INT(moeinf_policy_state_load(p, a, 0, &loaded, &err), MOEINF_OK);
        CHECK(!loaded); /* missing file: keeps its collection */
        CHECK_EQ_INT(moeinf_policy_state_save(p, a, &err), MOEINF_OK);
        static uint8_t buf[1 << 16];
        size_t n = slurp(a, buf, sizeof buf);
        CHECK(n > 40);
        buf[n / 2] ^= 0xff;
        spit(b, buf, n);
        CHECK_EQ_INT(moeinf_policy_state_load(p, b, 0, &loaded, &err), MOEINF_ERR_FORMAT);
        CHECK_STR_CONTAINS(err.msg, b);
        CHECK_STR_CONTAINS(err.msg, "checksum mismatch");
        /* unchanged: saving again gives the same bytes as before */
        CHECK_EQ_INT(moeinf_policy_state_save(p, c2, &err), MOEINF_OK);
        static uint8_t again[1 << 16];
        buf[n / 2] ^= 0xff;
        CHECK_EQ_INT(slurp(c2, again, sizeof again), n);
        CHECK(!memcmp(again, buf, n));
        CHECK_EQ_INT(moeinf_policy_state_load(p, a, 0, &loaded, &err), MOEINF_OK);
        CHECK(loaded);
        moeinf_policy_free(p);
    }
    struct moeinf_policy *lru = NULL;
    CHECK_EQ_INT(moeinf_policy_create("lru", &g, &lru, &err), MOEINF_OK);
    bool loaded;
    if (lru) CHECK_EQ_INT(moeinf_policy_state_load(lru, a, 0, &loaded, &err), MOEINF_ERR_ARG);
    moeinf_policy_free(lru);
    remove(a);
    remove(b);
    remove(c2);
}

/* Drives requests through a cache and policy, one token at a time (top_k 2 of 12 experts,
 * skewed per request topic); appends one hit bit per access to hits (if not NULL) and returns
 * the hits. */
static int drive(struct moeinf_policy *p, struct moeinf_cache *c, uint64_t *rng, int n_req,
                 uint64_t first, uint8_t *hits, int *n_hits) {
    const int n_layers = p->geom.n_layers;
    const int n_exp = p->geom.n_experts;
    int total = 0;
    for (int r = 0; r < n_req; r++) {
        moeinf_policy_request_begin(p, first + (uint64_t)r);
        int topic = (int)(moeinf_splitmix64(rng) % 3);
        int n_tok = 3 + (int)(moeinf_splitmix64(rng) % 8);
        for (int t = 0; t < n_tok; t++) {
            moeinf_policy_token_begin(p, t < 2 ? MOEINF_PHASE_PREFILL : MOEINF_PHASE_DECODE);
            for (int l = 0; l < n_layers; l++) {
                uint32_t ids[2];
                uint64_t x = moeinf_splitmix64(rng);
                int e0 = (x % 4) ? (topic * 4 + (int)((x >> 2) % 4)) % n_exp
                                 : (int)((x >> 2) % (uint64_t)n_exp);
                int e1 = (e0 + 1 + (int)((x >> 8) % (uint64_t)(n_exp - 1))) % n_exp;
                ids[0] = (uint32_t)(l * n_exp + e0);
                ids[1] = (uint32_t)(l * n_exp + e1);
                moeinf_cache_step_begin(c, p, l, ids, 2);
                for (int j = 0; j < 2; j++) {
                    struct moeinf_cache_event ev;
                    struct moeinf_error err;
                    CHECK_EQ_INT(moeinf_cache_access(c, p, ids[j], &ev, &err), MOEINF_OK);
                    total += ev.hit;
                    if (hits) hits[(*n_hits)++] = ev.hit;
                }
                moeinf_cache_step_end(c, p, l, ids, 2);
            }
            moeinf_policy_token_end(p);
        }
        moeinf_policy_request_end(p);
    }
    return total;
}

/* Every resident expert leaves the cache (the policy told as for an eviction). */
static void empty_cache(struct moeinf_cache *c, struct moeinf_policy *p) {
    for (int slot = 0; slot < moeinf_cache_capacity(c); slot++) {
        uint32_t id = moeinf_cache_slot_expert(c, slot);
        if (id != MOEINF_EXPERT_NONE) moeinf_cache_drop(c, p, id);
    }
}

/*
 * What a policy learned survives a save and a load exactly: a policy loaded from the file of
 * one that ran 40 requests, and that one itself (its cache emptied, so that both start from
 * the same cache contents), make the same hit/miss on every access of 40 more requests, and
 * then save the same bytes.
 */
static void test_policy_state_round_trip(void) {
    struct moeinf_policy_geometry g = {4, 12, 2, 10, {0}};
    char a[512];
    char b[512];
    test_tmp_path("eam_trip_a.eamc", a, sizeof a);
    test_tmp_path("eam_trip_b.eamc", b, sizeof b);
    struct moeinf_error err;
    static const char *const names[] = {"moe-infinity", "reuse"};
    static uint8_t hits_p[4000];
    static uint8_t hits_q[4000];
    static uint8_t hits_cold[4000];
    static uint8_t fa[1 << 17];
    static uint8_t fb[1 << 17];
    for (int k = 0; k < 2; k++) {
        struct moeinf_policy *p = NULL;
        struct moeinf_policy *q = NULL;
        struct moeinf_policy *cold = NULL;
        struct moeinf_cache *cp = NULL;
        struct moeinf_cache *cq = NULL;
        struct moeinf_cache *cc = NULL;
        CHECK_EQ_INT(moeinf_policy_create(names[k], &g, &p, &err), MOEINF_OK);
        CHECK_EQ_INT(moeinf_policy_create(names[k], &g, &q, &err), MOEINF_OK);
        CHECK_EQ_INT(moeinf_policy_create(names[k], &g, &cold, &err), MOEINF_OK);
        CHECK_EQ_INT(moeinf_cache_init(&g, &cp, &err), MOEINF_OK);
        CHECK_EQ_INT(moeinf_cache_init(&g, &cq, &err), MOEINF_OK);
        CHECK_EQ_INT(moeinf_cache_init(&g, &cc, &err), MOEINF_OK);
        if (!p || !q || !cold || !cp || !cq || !cc) goto next;
        uint64_t rng = 7 + (uint64_t)k;
        drive(p, cp, &rng, 40, 0, NULL, NULL);
        CHECK_EQ_INT(moeinf_policy_state_save(p, a, &err), MOEINF_OK);
        bool loaded = false;
        CHECK_EQ_INT(moeinf_policy_state_load(q, a, 0, &loaded, &err), MOEINF_OK);
        CHECK(loaded);
        empty_cache(cp, p);
        uint64_t r1 = 99;
        uint64_t r2 = 99;
        uint64_t r3 = 99;
        int np = 0;
        int nq = 0;
        int nc = 0;
        int hp = drive(p, cp, &r1, 40, 40, hits_p, &np);
        int hq = drive(q, cq, &r2, 40, 40, hits_q, &nq);
        int hc = drive(cold, cc, &r3, 40, 0, hits_cold, &nc);
        CHECK_EQ_INT(np, nq);
        CHECK_EQ_INT(hp, hq);
        CHECK(np == nq && !memcmp(hits_p, hits_q, (size_t)np));
        /* and what was learned mattered: a cold policy decides differently */
        CHECK_MSG(hc != hp || memcmp(hits_p, hits_cold, (size_t)np) != 0, "%s: no difference",
                  names[k]);
        CHECK_EQ_INT(moeinf_policy_state_save(p, a, &err), MOEINF_OK);
        CHECK_EQ_INT(moeinf_policy_state_save(q, b, &err), MOEINF_OK);
        size_t na = slurp(a, fa, sizeof fa);
        CHECK(na > 56 && na < sizeof fa);
        CHECK(slurp(b, fb, sizeof fb) == na && !memcmp(fa, fb, na));
        /* the file names its policy: the other EAMC policy refuses it */
        struct moeinf_policy *other = NULL;
        CHECK_EQ_INT(moeinf_policy_create(names[1 - k], &g, &other, &err), MOEINF_OK);
        if (other) {
            CHECK_EQ_INT(moeinf_policy_state_load(other, a, 0, &loaded, &err), MOEINF_ERR_FORMAT);
            CHECK_STR_CONTAINS(err.msg, a);
            CHECK_STR_CONTAINS(err.msg, "another policy's state");
            CHECK_STR_CONTAINS(err.msg, names[k]);
        }
        moeinf_policy_free(other);
    next:
        moeinf_policy_free(p);
        moeinf_policy_free(q);
        moeinf_policy_free(cold);
        moeinf_cache_free(cp);
        moeinf_cache_free(cq);
        moeinf_cache_free(cc);
    }
    remove(a);
    remove(b);
}

/* Writes a small random trace with topic-skewed requests. */
static void write_trace(const char *path, int n_layers, int n_experts, int top_k, int n_req,
                        uint64_t seed) {
    struct moeinf_trace_meta meta = {n_layers, n_experts, top_k, "test"};
    struct moeinf_trace_writer *w = NULL;
    struct moeinf_error err;
    CHECK_EQ_INT(moeinf_trace_writer_open(path, &meta, &w, &err), MOEINF_OK);
    if (!w) return;
    uint64_t rng = seed;
    for (int q = 0; q < n_req; q++) {
        CHECK_EQ_INT(moeinf_trace_writer_request(w, q, "r", &err), MOEINF_OK);
        int topic = (int)(moeinf_splitmix64(&rng) % 3);
        int n_tok = 2 + (int)(moeinf_splitmix64(&rng) % 10);
        for (int t = 0; t < n_tok; t++) {
            int32_t ex[64];
            for (int l = 0; l < n_layers; l++) {
                for (int j = 0; j < top_k; j++) {
                    int32_t e;
                    bool dup;
                    do {
                        uint64_t r = moeinf_splitmix64(&rng);
                        e = (r % 4) ? (int32_t)((topic * 4 + (int)((r >> 2) % 4)) % n_experts)
                                    : (int32_t)((r >> 2) % (uint64_t)n_experts);
                        dup = false;
                        for (int i = 0; i < j; i++)
                            dup |= ex[l * top_k + i] == e;
                    } while (dup);
                    ex[l * top_k + j] = e;
                }
            }
            CHECK_EQ_INT(moeinf_trace_writer_token(
                             w, t < 2 ? MOEINF_PHASE_PREFILL : MOEINF_PHASE_DECODE, ex, &err),
                         MOEINF_OK);
        }
    }
    CHECK_EQ_INT(moeinf_trace_writer_close(w, &err), MOEINF_OK);
}

static void test_sim_eamc_option(void) {
    char trace[512];
    char state[512];
    test_tmp_path("eam_sim.trace", trace, sizeof trace);
    test_tmp_path("eam_sim.eamc", state, sizeof state);
    write_trace(trace, 4, 12, 2, 30, 17);
    remove(state);
    struct moeinf_sim_params sp = moeinf_sim_params_default();
    sp.trace_path = trace;
    sp.cache_experts = 10;
    struct moeinf_sim_result cold;
    struct moeinf_sim_result saved;
    struct moeinf_sim_result warm;
    struct moeinf_error err;
    static const char *const names[] = {"moe-infinity", "reuse"};
    for (int k = 0; k < 2; k++) {
        sp.policy = names[k];
        sp.eamc_path = NULL;
        CHECK_EQ_INT(moeinf_sim_run(&sp, &cold, &err), MOEINF_OK);
        sp.eamc_path = state;
        remove(state);
        /* missing file: same as no file, and the file appears */
        CHECK_EQ_INT(moeinf_sim_run(&sp, &saved, &err), MOEINF_OK);
        CHECK_EQ_INT(saved.hits, cold.hits);
        struct moeinf_policy_geometry g = {4, 12, 2, 0, {0}};
        struct moeinf_eamc *c = NULL;
        CHECK_EQ_INT(moeinf_eamc_load(&g, state, &c, NULL, &err), MOEINF_OK);
        if (c) CHECK_EQ_INT(moeinf_eamc_size(c), 30); /* 30 requests, capacity 256 */
        moeinf_eamc_free(c);
        /* the second replay starts from the saved collection and decides differently */
        CHECK_EQ_INT(moeinf_sim_run(&sp, &warm, &err), MOEINF_OK);
        CHECK(warm.hits != cold.hits);
        /* a file of another geometry is refused before anything runs */
        char other[512];
        test_tmp_path("eam_sim_other.trace", other, sizeof other);
        write_trace(other, 3, 12, 2, 3, 5);
        sp.trace_path = other;
        CHECK_EQ_INT(moeinf_sim_run(&sp, &warm, &err), MOEINF_ERR_FORMAT);
        CHECK_STR_CONTAINS(err.msg, "geometry mismatch");
        sp.trace_path = trace;
        remove(other);
    }
    /* a new collection of 4 entries: the file keeps 4 of the 30 requests */
    remove(state);
    sp.policy = "reuse";
    sp.eamc_capacity = 4;
    CHECK_EQ_INT(moeinf_sim_run(&sp, &warm, &err), MOEINF_OK);
    struct moeinf_policy_geometry g = {4, 12, 2, 0, {0}};
    struct moeinf_eamc *small = NULL;
    CHECK_EQ_INT(moeinf_eamc_load(&g, state, &small, NULL, &err), MOEINF_OK);
    if (small) {
        CHECK_EQ_INT(moeinf_eamc_capacity(small), 4);
        CHECK_EQ_INT(moeinf_eamc_size(small), 4);
    }
    moeinf_eamc_free(small);
    /* an existing file keeps its own capacity */
    sp.eamc_capacity = 9;
    CHECK_EQ_INT(moeinf_sim_run(&sp, &warm, &err), MOEINF_OK);
    CHECK_EQ_INT(moeinf_eamc_load(&g, state, &small, NULL, &err), MOEINF_OK);
    if (small) CHECK_EQ_INT(moeinf_eamc_capacity(small), 4);
    moeinf_eamc_free(small);
    sp.eamc_capacity = 5000;
    remove(state);
    CHECK_EQ_INT(moeinf_sim_run(&sp, &warm, &err), MOEINF_ERR_ARG);
    sp.eamc_capacity = 0;
    sp.policy = "lru";
    CHECK_EQ_INT(moeinf_sim_run(&sp, &warm, &err), MOEINF_ERR_ARG);
    remove(trace);
    remove(state);
}

int main(void) {
    RUN(test_predict_hand_computed);
    RUN(test_match_and_replacement_brute_force);
    RUN(test_file_round_trip);
    RUN(test_crash_before_rename_keeps_old_file);
    RUN(test_defects_are_named);
    RUN(test_model_identity);
    RUN(test_policy_state_all_or_nothing);
    RUN(test_policy_state_round_trip);
    RUN(test_sim_eamc_option);
    return test_report();
}
