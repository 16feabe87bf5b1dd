/*
 * test_cache_policy.c - the policies "moe-infinity" and "reuse" (src/experts/policy_eam.c,
 * policy_reuse.c): a hand-computed Algorithm 1 case; both policies against plain reference
 * implementations written here, which recompute everything from the raw history at every
 * decision (brute-force EAMC matching, counts and features) instead of the library's
 * incremental state; the same decisions whether the simulator or a direct caller (as the
 * engine will) drives the policy; and reuse's prefetch proposals obeying their contract. The
 * reference of reuse replays its duel the plain way too: two shadow caches that evict by a full
 * scan, and the frequency ranking summed over the request's recorded uses.
 */
#include <math.h>
#include <stdint.h>

#include "base/rng.h"
#include "experts/cache.h"
#include "experts/eam.h"
#include "experts/policy.h"
#include "sim/replay.h"
#include "trace/trace.h"
#include "test.h"

#define ML      4 /* layers */
#define ME      8 /* experts per layer */
#define MK      2 /* top_k */
#define MN      (ML * ME)
#define MAX_TOK 400
#define MAX_ENT 256

/* A trace in memory: tokens with their request, phase and experts. */
struct mtrace {
    int n;
    int req[MAX_TOK];
    bool decode[MAX_TOK];
    int ex[MAX_TOK][ML][MK];
};

static void make(struct mtrace *t, uint64_t seed, int n_req) {
    uint64_t rng = seed;
    t->n = 0;
    for (int q = 0; q < n_req; q++) {
        int topic = (int)(moeinf_splitmix64(&rng) % 3);
        int n_tok = 1 + (int)(moeinf_splitmix64(&rng) % 12);
        int n_pre = (int)(moeinf_splitmix64(&rng) % (uint64_t)(n_tok + 1));
        for (int k = 0; k < n_tok && t->n < MAX_TOK; k++, t->n++) {
            t->req[t->n] = q;
            t->decode[t->n] = k >= n_pre;
            for (int l = 0; l < ML; l++) {
                for (int j = 0; j < MK; j++) {
                    int e;
                    bool dup;
                    do {
                        uint64_t r = moeinf_splitmix64(&rng);
                        e = (r % 3) ? (topic * 2 + l + (int)((r >> 2) % 3)) % ME
                                    : (int)((r >> 2) % ME);
                        dup = j == 1 && t->ex[t->n][l][0] == e;
                    } while (dup);
                    t->ex[t->n][l][j] = e;
                }
            }
        }
    }
}

static void write_mtrace(const struct mtrace *t, const char *path) {
    struct moeinf_trace_meta meta = {ML, ME, MK, "test"};
    struct moeinf_trace_writer *w = NULL;
    struct moeinf_error err;
    CHECK_EQ_INT(moeinf_trace_writer_open(path, &meta, &w, &err), MOEINF_OK);
    if (!w) return;
    for (int i = 0; i < t->n; i++) {
        if (i == 0 || t->req[i] != t->req[i - 1]) {
            CHECK_EQ_INT(moeinf_trace_writer_request(w, t->req[i], "r", &err), MOEINF_OK);
        }
        int32_t ex[ML * MK];
        for (int l = 0; l < ML; l++)
            for (int j = 0; j < MK; j++)
                ex[l * MK + j] = t->ex[i][l][j];
        CHECK_EQ_INT(moeinf_trace_writer_token(
                         w, t->decode[i] ? MOEINF_PHASE_DECODE : MOEINF_PHASE_PREFILL, ex, &err),
                     MOEINF_OK);
    }
    CHECK_EQ_INT(moeinf_trace_writer_close(w, &err), MOEINF_OK);
}

/* ---- the library policies driven directly (the engine's way) ---------------------------- */

struct decisions {
    int n;
    uint32_t victim[MAX_TOK * ML * MK * 2];
    long hits;
    long freq_victims; /* references only: victims chosen by reuse's frequency ranking */
};

/* Replays t through `name` at capacity cap; victims of demand misses (and of prefetches) in
 * order. */
static void drive(const char *name, const struct mtrace *t, int cap, int prefetch,
                  struct decisions *d) {
    struct moeinf_policy_geometry g = {ML, ME, MK, cap, {0}};
    struct moeinf_policy *p = NULL;
    struct moeinf_cache *c = NULL;
    struct moeinf_error err;
    d->n = 0;
    d->hits = 0;
    CHECK_EQ_INT(moeinf_policy_create(name, &g, &p, &err), MOEINF_OK);
    CHECK_EQ_INT(moeinf_cache_init(&g, &c, &err), MOEINF_OK);
    if (!p || !c) goto done;
    for (int i = 0; i < t->n; i++) {
        if (i == 0 || t->req[i] != t->req[i - 1]) {
            if (i > 0) moeinf_policy_request_end(p);
            moeinf_policy_request_begin(p, (uint64_t)t->req[i]);
        }
        moeinf_policy_token_begin(p, t->decode[i] ? MOEINF_PHASE_DECODE : MOEINF_PHASE_PREFILL);
        for (int l = 0; l < ML; l++) {
            uint32_t ids[MK];
            for (int j = 0; j < MK; j++)
                ids[j] = (uint32_t)(l * ME + t->ex[i][l][j]);
            moeinf_cache_step_begin(c, p, l, ids, MK);
            for (int j = 0; j < MK; j++) {
                struct moeinf_cache_event ev;
                CHECK_EQ_INT(moeinf_cache_access(c, p, ids[j], &ev, &err), MOEINF_OK);
                d->hits += ev.hit;
                if (ev.evicted != MOEINF_EXPERT_NONE) d->victim[d->n++] = ev.evicted;
            }
            moeinf_cache_step_end(c, p, l, ids, MK);
            uint32_t pf[8];
            int n = moeinf_policy_propose_prefetch(p, l, pf, prefetch);
            CHECK(n >= 0 && n <= prefetch);
            for (int k = 0; k < n; k++) {
                struct moeinf_cache_event ev;
                CHECK_EQ_INT(moeinf_cache_prefetch(c, p, pf[k], &ev, &err), MOEINF_OK);
                if (ev.evicted != MOEINF_EXPERT_NONE) d->victim[d->n++] = ev.evicted;
            }
        }
        moeinf_policy_token_end(p);
    }
    if (t->n > 0) moeinf_policy_request_end(p);
done:
    moeinf_cache_free(c);
    moeinf_policy_free(p);
}

/* ---- reference EAMC: brute force over the stored entries -------------------------------- */

struct ref_eamc {
    int cap, size;
    float ent[MAX_ENT][2][MN];
    float cur[2][MN];
    int phase;
};

static double dot(const float *a, const float *b) {
    double s = 0;
    for (int i = 0; i < MN; i++)
        s += (double)a[i] * (double)b[i];
    return s;
}

static void ref_request_end(struct ref_eamc *r) {
    double n2 = dot(r->cur[0], r->cur[0]) + dot(r->cur[1], r->cur[1]);
    if (n2 == 0) return;
    int slot = r->size;
    if (r->size < r->cap) {
        r->size++;
    } else {
        double best = -2;
        for (int m = 0; m < r->size; m++) {
            double en = sqrt(dot(r->ent[m][0], r->ent[m][0]) + dot(r->ent[m][1], r->ent[m][1]));
            double sim = en > 0 ? (dot(r->cur[0], r->ent[m][0]) + dot(r->cur[1], r->ent[m][1])) /
                                      (sqrt(n2) * en)
                                : 0.0;
            if (sim > best) {
                best = sim;
                slot = m;
            }
        }
    }
    memcpy(r->ent[slot], r->cur, sizeof r->cur);
    memset(r->cur, 0, sizeof r->cur);
}

/* PredictEAM as specified in eam.h, recomputed from scratch; returns entries used. */
static int ref_predict(const struct ref_eamc *r, int n_match, float *out) {
    int mph = r->phase;
    if (dot(r->cur[mph], r->cur[mph]) == 0) mph = 0;
    double cn = dot(r->cur[mph], r->cur[mph]);
    int pick[MAX_ENT];
    int n = 0;
    bool taken[MAX_ENT] = {false};
    while (cn > 0 && n < n_match) {
        int best = -1;
        double bs = 0;
        for (int m = 0; m < r->size; m++) {
            double en = dot(r->ent[m][mph], r->ent[m][mph]);
            if (taken[m] || !(en > 0)) continue;
            double sim = dot(r->cur[mph], r->ent[m][mph]) / (sqrt(cn) * sqrt(en));
            if (best < 0 || sim > bs) {
                best = m;
                bs = sim;
            }
        }
        if (best < 0) break;
        taken[best] = true;
        pick[n++] = best;
    }
    int n_sum = n > 0 ? n : r->size;
    for (int id = 0; id < MN; id++)
        out[id] = 0.0f;
    for (int j = 0; j < n_sum; j++)
        for (int id = 0; id < MN; id++)
            out[id] += r->ent[n > 0 ? pick[j] : j][r->phase][id];
    for (int l = 0; l < ML; l++) {
        double sum = 0;
        for (int e = 0; e < ME; e++)
            sum += (double)out[l * ME + e];
        float scale = sum > 0 ? (float)(1.0 / sum) : 0.0f;
        for (int e = 0; e < ME; e++)
            out[l * ME + e] = sum > 0 ? out[l * ME + e] * scale : 1.0f / ME;
    }
    return r->size == 0 ? 0 : (n > 0 ? n : r->size);
}

/* ---- reference policies ----------------------------------------------------------------- */

enum ref_kind {
    REF_MOE_INFINITY,
    REF_REUSE
};

struct ref {
    enum ref_kind kind;
    struct ref_eamc eamc;
    /* history of the whole replay: token of every use of every id */
    int n_uses[MN];
    long last_tok[MN];  /* token of last use, -1e9 if never */
    uint64_t stamp[MN]; /* recency for ties */
    uint64_t clock;
    double global[MN];
    long tok, req_tokens;
    float pe[MN], prior[MN];
    double used[14 * 14 * 9], seen[14 * 14 * 9];
    int cell[MN];
    /* reuse's duel: the tokens of each id's uses in this request, and two shadow caches */
    int n_req_uses[MN];
    long req_use_tok[MN][MAX_TOK];
    bool shadow[2][MN];
    int shadow_n[2];
    long shadow_misses[2];
};

static int ref_age_bucket(long age) {
    static const long lim[] = {1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64, 128};
    for (int i = 0; i < 13; i++)
        if (age >= 0 && age <= lim[i]) return i;
    return 13;
}

static int ref_bucket(double v, const double *lim, int n) {
    int b = 0;
    while (b < n && v >= lim[b])
        b++;
    return b;
}

/* reuse's feature cell of id for a visit at token `tok`, as docs/CACHE_POLICY.md defines it */
static int ref_cell(const struct ref *r, int id, long tok) {
    static const double flim[] = {0.02, 0.05, 0.1, 0.2, 0.3, 0.5, 0.75, 1, 1.5, 2, 3, 4.5, 7};
    static const double glim[] = {0.125, 0.25, 0.5, 0.8, 1.25, 2, 4, 8};
    double count = (double)r->eamc.cur[0][id] + (double)r->eamc.cur[1][id];
    double f = (count + 8.0 * MK * (double)r->pe[id]) / ((double)r->req_tokens + 8.0) * 4.0;
    int g = ref_bucket((double)r->prior[id] * ME, glim, 8);
    return (g * 14 + ref_bucket(f, flim, 13)) * 14 + ref_age_bucket(tok - r->last_tok[id]);
}

static void ref_token_begin(struct ref *r, bool decode) {
    r->eamc.phase = decode;
    if (r->kind != REF_REUSE) return;
    int used = ref_predict(&r->eamc, 16, r->pe);
    double mix = used > 0 ? 0.5 : 0.0;
    for (int l = 0; l < ML; l++) {
        double row = 0;
        for (int e = 0; e < ME; e++)
            row += r->global[l * ME + e];
        for (int e = 0; e < ME; e++) {
            int id = l * ME + e;
            double pg = (r->global[id] + 1e-3) / (row + 1e-3 * ME);
            r->prior[id] = (float)((1.0 - mix) * pg + mix * (double)r->pe[id]);
        }
    }
    for (int id = 0; id < MN; id++)
        r->cell[id] = ref_cell(r, id, r->tok);
}

/* A cell's rate, backed off with weight 128 to the rate of its age bucket over all cells,
 * which is smoothed with weight 0.5 towards top_k / n_experts. */
static double ref_rate(const struct ref *r, int cell) {
    double base = (double)MK / ME;
    double used_age = 0;
    double seen_age = 0;
    for (int c = cell % 14; c < (int)(sizeof r->used / sizeof r->used[0]); c += 14) {
        used_age += r->used[c];
        seen_age += r->seen[c];
    }
    double age_rate = (used_age + 0.5 * base) / (seen_age + 0.5);
    return (r->used[cell] + 128.0 * age_rate) / (r->seen[cell] + 128.0);
}

/* reuse's frequency ranking: uses in this request per token of the request, each weighted by
 * 2^(-tokens ago / 16) from the token of the layer's last visit, shrunk towards PredictEAM by
 * 2 tokens. */
static double ref_freq(const struct ref *r, int id, int layer) {
    bool done = id / ME <= layer;
    long now = done ? r->tok : r->tok - 1;
    double uses = 0;
    for (int u = 0; u < r->n_req_uses[id]; u++)
        uses += pow(2.0, -(double)(now - r->req_use_tok[id][u]) / 16.0);
    double d = pow(2.0, -1.0 / 16.0);
    double mass = (1.0 - pow(d, (double)(r->req_tokens + done))) / (1.0 - d);
    return (uses + 2.0 * MK * (double)r->pe[id]) / (mass + 2.0);
}

/* The victim among residents (res[id]) not pinned (pin[id]) at layer `layer`, ranked as the
 * policy's table ranks them (freq false) or by frequency (reuse only). */
static int ref_victim(const struct ref *r, const bool *res, const bool *pin, int layer, bool freq) {
    int best = -1;
    double bp = 0;
    int bsteps = 0;
    float peam[MN];
    if (r->kind == REF_MOE_INFINITY) ref_predict(&r->eamc, 1, peam);
    for (int id = 0; id < MN; id++) {
        if (!res[id] || pin[id]) continue;
        int l = id / ME;
        double p;
        int steps = 0;
        if (r->kind == REF_MOE_INFINITY) {
            p = ((double)peam[id] + 1e-4) * (1.0 - (double)l / ML);
        } else {
            steps = l > layer ? l - layer : l - layer + ML;
            if (freq) {
                p = ref_freq(r, id, layer);
            } else {
                p = ref_rate(r, l > layer ? r->cell[id] : ref_cell(r, id, r->tok + 1));
            }
            p *= pow((double)ML / steps, 0.3);
        }
        bool worse =
            best < 0 || p < bp ||
            (p == bp && (steps > bsteps || (steps == bsteps && r->stamp[id] < r->stamp[best])));
        if (worse) {
            best = id;
            bp = p;
            bsteps = steps;
        }
    }
    return best;
}

/* Replays t through the reference at capacity cap (no prefetch). */
static void ref_drive(enum ref_kind kind, const struct mtrace *t, int cap, struct decisions *d) {
    static struct ref r;
    memset(&r, 0, sizeof r);
    r.kind = kind;
    r.eamc.cap = MOEINF_EAMC_DEFAULT_CAPACITY;
    for (int id = 0; id < MN; id++)
        r.last_tok[id] = -1000000000L;
    bool res[MN] = {false};
    int n_res = 0;
    d->n = 0;
    d->hits = 0;
    d->freq_victims = 0;
    for (int i = 0; i < t->n; i++) {
        if (i > 0 && t->req[i] != t->req[i - 1]) {
            ref_request_end(&r.eamc);
            r.req_tokens = 0;
        }
        if (i == 0 || t->req[i] != t->req[i - 1]) { /* the duel starts even */
            memset(r.n_req_uses, 0, sizeof r.n_req_uses);
            memset(r.shadow, 0, sizeof r.shadow);
            memset(r.shadow_n, 0, sizeof r.shadow_n);
            memset(r.shadow_misses, 0, sizeof r.shadow_misses);
        }
        ref_token_begin(&r, t->decode[i]);
        for (int l = 0; l < ML; l++) {
            bool pin[MN] = {false};
            for (int j = 0; j < MK; j++)
                pin[l * ME + t->ex[i][l][j]] = true;
            if (kind == REF_REUSE) {
                for (int e = 0; e < ME; e++) {
                    r.seen[r.cell[l * ME + e]] += 1;
                    if (pin[l * ME + e]) r.used[r.cell[l * ME + e]] += 1;
                }
                /* the duel: each shadow takes the step's misses, evicting by its ranking */
                for (int k = 0; k < 2; k++) {
                    for (int j = 0; j < MK; j++) {
                        int id = l * ME + t->ex[i][l][j];
                        if (r.shadow[k][id]) continue;
                        r.shadow_misses[k]++;
                        if (r.shadow_n[k] == cap) {
                            int v = ref_victim(&r, r.shadow[k], pin, l, k == 1);
                            CHECK(v >= 0);
                            if (v < 0) return;
                            r.shadow[k][v] = false;
                            r.shadow_n[k]--;
                        }
                        r.shadow[k][id] = true;
                        r.shadow_n[k]++;
                    }
                }
            } else {
                for (int j = 0; j < MK; j++)
                    r.eamc.cur[r.eamc.phase][l * ME + t->ex[i][l][j]] += 1;
            }
            for (int j = 0; j < MK; j++) {
                int id = l * ME + t->ex[i][l][j];
                if (res[id]) {
                    d->hits++;
                } else {
                    if (n_res == cap) {
                        bool freq = kind == REF_REUSE && r.shadow_misses[1] < r.shadow_misses[0];
                        d->freq_victims += freq;
                        int v = ref_victim(&r, res, pin, l, freq);
                        CHECK(v >= 0);
                        if (v < 0) return;
                        res[v] = false;
                        n_res--;
                        d->victim[d->n++] = (uint32_t)v;
                    }
                    res[id] = true;
                    n_res++;
                    r.stamp[id] = ++r.clock; /* admission */
                }
                r.stamp[id] = ++r.clock; /* access */
                if (kind == REF_REUSE) {
                    r.req_use_tok[id][r.n_req_uses[id]++] = r.tok;
                    r.last_tok[id] = r.tok;
                    r.global[id] += 1;
                    r.eamc.cur[r.eamc.phase][id] += 1;
                }
            }
        }
        r.tok++;
        r.req_tokens++;
    }
}

/* Compares `name` with its reference; returns how many of the reference's victims reuse's
 * frequency ranking chose. */
static long compare(const char *name, enum ref_kind kind, uint64_t seed, int cap) {
    static struct mtrace t;
    static struct decisions got;
    static struct decisions want;
    make(&t, seed, 40);
    drive(name, &t, cap, 0, &got);
    ref_drive(kind, &t, cap, &want);
    CHECK_EQ_INT(got.n, want.n);
    CHECK_EQ_INT(got.hits, want.hits);
    int first = -1;
    for (int i = 0; i < got.n && i < want.n && first < 0; i++)
        if (got.victim[i] != want.victim[i]) first = i;
    CHECK_MSG(first < 0, "%s seed %llu cap %d: victim %d differs (%u vs %u)", name,
              (unsigned long long)seed, cap, first, first >= 0 ? got.victim[first] : 0,
              first >= 0 ? want.victim[first] : 0);
    return want.freq_victims;
}

static void test_policies_match_references(void) {
    static const int caps[] = {2, 5, 9, 16};
    long freq_victims = 0;
    for (uint64_t seed = 1; seed <= 6; seed++) {
        for (size_t c = 0; c < sizeof caps / sizeof caps[0]; c++) {
            compare("moe-infinity", REF_MOE_INFINITY, seed, caps[c]);
            freq_victims += compare("reuse", REF_REUSE, seed, caps[c]);
        }
    }
    /* both of reuse's rankings evicted: the duel's switch is covered */
    CHECK_MSG(freq_victims > 0, "reuse's frequency ranking never chose a victim");
}

/* Algorithm 1 by hand: L = 2, E = 3, top-1, two slots. Request 0 uses expert 0 in both layers
 * twice, so the EAMC holds A = {layer 0: e0 x2, layer 1: e0 x2}, and the cache ids 0 and 3.
 * Request 1, token [1|1]:
 *   layer 0, id 1 misses. pEAM = A (the only entry): (0,0) p = (1 + eps) x 1,
 *   (1,0) = id 3: p = (1 + eps) x 1/2, so id 3 goes.
 *   layer 1, id 4 misses. Residents 0 and 1: id 1 = (0,1): p = (0 + eps) x 1 < id 0's, goes. */
static void test_moe_infinity_by_hand(void) {
    static struct mtrace t;
    memset(&t, 0, sizeof t);
    struct moeinf_policy_geometry g = {2, 3, 1, 2, {0}};
    struct moeinf_policy *p = NULL;
    struct moeinf_cache *c = NULL;
    struct moeinf_error err;
    CHECK_EQ_INT(moeinf_policy_create("moe-infinity", &g, &p, &err), MOEINF_OK);
    CHECK_EQ_INT(moeinf_cache_init(&g, &c, &err), MOEINF_OK);
    if (!p || !c) goto done;
    static const uint32_t tokens[3][2] = {{0, 3}, {0, 3}, {1, 4}};
    static const int req[3] = {0, 0, 1};
    uint32_t victims[4];
    int n_victims = 0;
    for (int i = 0; i < 3; i++) {
        if (i == 0 || req[i] != req[i - 1]) {
            if (i > 0) moeinf_policy_request_end(p);
            moeinf_policy_request_begin(p, (uint64_t)req[i]);
        }
        moeinf_policy_token_begin(p, MOEINF_PHASE_PREFILL);
        for (int l = 0; l < 2; l++) {
            moeinf_cache_step_begin(c, p, l, &tokens[i][l], 1);
            struct moeinf_cache_event ev;
            CHECK_EQ_INT(moeinf_cache_access(c, p, tokens[i][l], &ev, &err), MOEINF_OK);
            if (ev.evicted != MOEINF_EXPERT_NONE && n_victims < 4)
                victims[n_victims++] = ev.evicted;
            moeinf_cache_step_end(c, p, l, &tokens[i][l], 1);
        }
        moeinf_policy_token_end(p);
    }
    moeinf_policy_request_end(p);
    CHECK_EQ_INT(n_victims, 2);
    if (n_victims == 2) {
        CHECK_EQ_INT(victims[0], 3);
        CHECK_EQ_INT(victims[1], 1);
    }
done:
    moeinf_cache_free(c);
    moeinf_policy_free(p);
}

/* ---- the same decisions through the simulator ------------------------------------------ */

static const struct moeinf_policy_ops *wrapped;
static struct decisions *recorded;

static uint32_t rec_choose(void *state, const struct moeinf_cache *cache) {
    uint32_t v = wrapped->choose_victim(state, cache);
    if (recorded->n < (int)(sizeof recorded->victim / sizeof recorded->victim[0])) {
        recorded->victim[recorded->n++] = v;
    }
    return v;
}

static void test_same_decisions_in_simulator_and_direct(void) {
    static struct mtrace t;
    static struct decisions direct;
    static struct decisions via_sim;
    char path[512];
    test_tmp_path("cache_policy_same.trace", path, sizeof path);
    static const char *const names[] = {"moe-infinity", "reuse"};
    for (uint64_t seed = 1; seed <= 3; seed++) {
        make(&t, seed * 101, 40);
        write_mtrace(&t, path);
        for (int k = 0; k < 2; k++) {
            for (int pf = 0; pf <= 2; pf += 2) {
                for (int cap = 3; cap <= 12; cap += 9) {
                    drive(names[k], &t, cap, pf, &direct);
                    wrapped = moeinf_policy_find(names[k]);
                    struct moeinf_policy_ops ops = *wrapped;
                    ops.choose_victim = rec_choose;
                    via_sim.n = 0;
                    recorded = &via_sim;
                    struct moeinf_sim_params sp = moeinf_sim_params_default();
                    sp.trace_path = path;
                    sp.cache_experts = cap;
                    sp.prefetch = pf;
                    struct moeinf_sim_result res;
                    struct moeinf_error err;
                    CHECK_EQ_INT(moeinf_sim_replay(&sp, &ops, &res, &err), MOEINF_OK);
                    CHECK_EQ_INT((long)res.hits, direct.hits);
                    CHECK_EQ_INT(via_sim.n, direct.n);
                    CHECK(direct.n > 0);
                    bool same = via_sim.n == direct.n;
                    for (int i = 0; same && i < direct.n; i++)
                        same = via_sim.victim[i] == direct.victim[i];
                    CHECK_MSG(same, "%s prefetch %d cap %d", names[k], pf, cap);
                }
            }
        }
    }
    remove(path);
}

/* reuse's proposals: distinct, not resident, of the next layer, and never more than asked. */
static void test_reuse_prefetch_contract(void) {
    static struct mtrace t;
    make(&t, 77, 60);
    struct moeinf_policy_geometry g = {ML, ME, MK, 6, {0}};
    struct moeinf_policy *p = NULL;
    struct moeinf_cache *c = NULL;
    struct moeinf_error err;
    CHECK_EQ_INT(moeinf_policy_create("reuse", &g, &p, &err), MOEINF_OK);
    CHECK_EQ_INT(moeinf_cache_init(&g, &c, &err), MOEINF_OK);
    if (!p || !c) goto done;
    long proposed = 0;
    for (int i = 0; i < t.n; i++) {
        if (i == 0 || t.req[i] != t.req[i - 1]) {
            if (i > 0) moeinf_policy_request_end(p);
            moeinf_policy_request_begin(p, (uint64_t)t.req[i]);
        }
        moeinf_policy_token_begin(p, t.decode[i] ? MOEINF_PHASE_DECODE : MOEINF_PHASE_PREFILL);
        for (int l = 0; l < ML; l++) {
            uint32_t ids[MK];
            for (int j = 0; j < MK; j++)
                ids[j] = (uint32_t)(l * ME + t.ex[i][l][j]);
            moeinf_cache_step_begin(c, p, l, ids, MK);
            for (int j = 0; j < MK; j++) {
                struct moeinf_cache_event ev;
                CHECK_EQ_INT(moeinf_cache_access(c, p, ids[j], &ev, &err), MOEINF_OK);
            }
            moeinf_cache_step_end(c, p, l, ids, MK);
            uint32_t pf[3];
            int n = moeinf_policy_propose_prefetch(p, l, pf, 3);
            CHECK(n >= 0 && n <= 3);
            for (int k = 0; k < n; k++) {
                CHECK_EQ_INT((int)(pf[k] / ME), (l + 1) % ML);
                CHECK(!moeinf_cache_is_resident(c, pf[k]));
                for (int m = 0; m < k; m++)
                    CHECK(pf[m] != pf[k]);
            }
            for (int k = 0; k < n; k++) {
                struct moeinf_cache_event ev;
                CHECK_EQ_INT(moeinf_cache_prefetch(c, p, pf[k], &ev, &err), MOEINF_OK);
            }
            proposed += n;
        }
        moeinf_policy_token_end(p);
    }
    moeinf_policy_request_end(p);
    CHECK(proposed > 0); /* the skewed trace gives it confident candidates */
done:
    moeinf_cache_free(c);
    moeinf_policy_free(p);
}

int main(void) {
    RUN(test_moe_infinity_by_hand);
    RUN(test_policies_match_references);
    RUN(test_same_decisions_in_simulator_and_direct);
    RUN(test_reuse_prefetch_contract);
    return test_report();
}
