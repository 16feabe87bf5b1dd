/*
 * policy_reuse_state.c - the reuse policy's state (policy_reuse_impl.h): its allocation and
 * geometry-derived tables, and what survives a restart (save, load: the EAMC with a section
 * of everything else the policy learned).
 */
#include <assert.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/le.h"
#include "base/status.h"
#include "experts/eam.h"
#include "experts/idset.h"
#include "experts/policy_reuse_impl.h"

/* Eviction ranks p x (L / steps)^SOON: of two experts equally likely to be used at their next
 * visit, the one whose layer runs sooner holds its slot for less time before paying off
 * (0 = ignore the distance; 1 = likelihood per step held; chosen on the first halves). */
#define SOON 0.3

/* ---- life cycle ---------------------------------------------------------------------- */

void moeinf_reuse_free(void *state) {
    struct reuse *s = state;
    if (!s) return;
    moeinf_eamc_free(s->eamc);
    free(s->last_use);
    free(s->last_stamp);
    free(s->global);
    free(s->pe);
    free(s->prior);
    free(s->cell);
    free(s->cell_next);
    free(s->soon);
    moeinf_idset_free(&s->res);
    free(s->co);
    free(s->co_src);
    free(s->step_ids);
    free(s->prev_ids);
    free(s->step_count);
    free(s->freq_use);
    free(s->freq_tok);
    for (int k = 0; k < N_RANKINGS; k++)
        moeinf_idset_free(&s->shadow[k]);
    free(s->shadow_pin);
    free(s->cand);
    free(s);
}

enum moeinf_status moeinf_reuse_init(const struct moeinf_policy_geometry *geom, void **state,
                                     struct moeinf_error *err) {
    struct reuse *s = calloc(1, sizeof *s);
    if (!s) return moeinf_fail(err, MOEINF_ERR_NOMEM, "policy reuse: out of memory");
    s->geom = *geom;
    s->n_layers = geom->n_layers;
    s->n_experts = geom->n_experts;
    s->top_k = geom->top_k;
    s->n_ids = (uint32_t)geom->n_layers * (uint32_t)geom->n_experts;
    enum moeinf_status st = moeinf_eamc_init(geom, MOEINF_EAMC_DEFAULT_CAPACITY, &s->eamc, err);
    if (st != MOEINF_OK) {
        free(s);
        return st;
    }
    size_t n = s->n_ids;
    size_t pairs = (size_t)(geom->n_layers - 1) * (size_t)geom->n_experts;
    s->last_use = malloc(n * sizeof *s->last_use);
    s->last_stamp = calloc(n, sizeof *s->last_stamp);
    s->global = calloc(n, sizeof *s->global);
    s->pe = malloc(n * sizeof *s->pe);
    s->prior = malloc(n * sizeof *s->prior);
    s->cell = calloc(n, sizeof *s->cell);
    s->cell_next = calloc(n, sizeof *s->cell_next);
    s->soon = malloc(((size_t)geom->n_layers + 1) * sizeof *s->soon);
    s->co = calloc(pairs * (size_t)geom->n_experts + 1, sizeof *s->co);
    s->co_src = calloc(pairs + 1, sizeof *s->co_src);
    s->step_ids = malloc((size_t)geom->n_experts * sizeof *s->step_ids);
    s->prev_ids = malloc((size_t)geom->n_experts * sizeof *s->prev_ids);
    s->step_count = malloc(n * sizeof *s->step_count);
    s->batch = 1;
    s->freq_use = calloc(n, sizeof *s->freq_use);
    s->freq_tok = calloc(n, sizeof *s->freq_tok);
    s->shadow_pin = calloc(n, sizeof *s->shadow_pin);
    s->cand = malloc((size_t)geom->capacity * sizeof *s->cand);
    if (!s->last_use || !s->last_stamp || !s->global || !s->pe || !s->prior || !s->cell ||
        !s->cell_next || !s->soon || !s->co || !s->co_src || !s->step_ids || !s->prev_ids ||
        !s->step_count || !s->freq_use || !s->freq_tok || !s->shadow_pin || !s->cand) {
        moeinf_reuse_free(s);
        return moeinf_fail(err, MOEINF_ERR_NOMEM, "policy reuse: out of memory");
    }
    st = moeinf_idset_init(&s->res, s->n_ids, geom->capacity, err);
    for (int k = 0; k < N_RANKINGS && st == MOEINF_OK; k++)
        st = moeinf_idset_init(&s->shadow[k], s->n_ids, geom->capacity, err);
    if (st != MOEINF_OK) {
        moeinf_reuse_free(s);
        return st;
    }
    for (int k = 0; k < FREQ_POW_N; k++)
        s->freq_pow[k] = pow(2.0, -k / FREQ_HALF_LIFE);
    s->soon[0] = 1.0;
    for (int d = 1; d <= geom->n_layers; d++)
        s->soon[d] = pow((double)geom->n_layers / d, SOON);
    for (size_t i = 0; i < n; i++) {
        s->last_use[i] = INT64_MIN / 2;
        s->step_count[i] = 1;
        s->pe[i] = s->prior[i] = 1.0f / (float)geom->n_experts;
    }
    *state = s;
    return MOEINF_OK;
}

/*
 * The saved state: the EAMC, then this section (little-endian) with everything else the
 * policy learned, so that a reloaded policy decides exactly as the one that saved it would
 * with the same cache contents:
 *   i64 tok, u64 clock, i64 last_use[n_ids], u64 last_stamp[n_ids], f64 global[n_ids],
 *   f64 used[N_CELLS], f64 seen[N_CELLS], f32 co[(L-1) x E x E], f32 co_src[(L-1) x E].
 * What the cache holds (resident) is the cache's, not learned, and is neither saved nor
 * replaced by a load.
 */
static size_t co_cells(const struct reuse *s) {
    return (size_t)(s->n_layers - 1) * (size_t)s->n_experts * (size_t)s->n_experts;
}

static size_t co_rows(const struct reuse *s) {
    return (size_t)(s->n_layers - 1) * (size_t)s->n_experts;
}

static size_t section_bytes(const struct reuse *s) {
    return 16 + (size_t)s->n_ids * 24 + (size_t)N_CELLS * 16 + (co_cells(s) + co_rows(s)) * 4;
}

/* Cursor forms of base/le.h: each writes or reads one value and moves past it. */
static uint8_t *put64(uint8_t *p, uint64_t v) {
    moeinf_le_put_u64(p, v);
    return p + 8;
}

static uint8_t *put_f64(uint8_t *p, double d) {
    moeinf_le_put_f64(p, d);
    return p + 8;
}

static uint8_t *put_f32(uint8_t *p, float f) {
    moeinf_le_put_f32(p, f);
    return p + 4;
}

static uint64_t get64(const uint8_t **p) {
    uint64_t v = moeinf_le_u64(*p);
    *p += 8;
    return v;
}

static double get_f64(const uint8_t **p) {
    double d = moeinf_le_f64(*p);
    *p += 8;
    return d;
}

static float get_f32(const uint8_t **p) {
    float f = moeinf_le_f32(*p);
    *p += 4;
    return f;
}

enum moeinf_status moeinf_reuse_save(const void *state, FILE *f, struct moeinf_error *err) {
    const struct reuse *s = state;
    size_t len = section_bytes(s);
    uint8_t *buf = malloc(len);
    if (!buf) return moeinf_fail(err, MOEINF_ERR_NOMEM, "policy reuse: out of memory");
    uint8_t *p = put64(buf, (uint64_t)s->tok);
    p = put64(p, s->clock);
    for (uint32_t id = 0; id < s->n_ids; id++)
        p = put64(p, (uint64_t)s->last_use[id]);
    for (uint32_t id = 0; id < s->n_ids; id++)
        p = put64(p, s->last_stamp[id]);
    for (uint32_t id = 0; id < s->n_ids; id++)
        p = put_f64(p, s->global[id]);
    for (int c = 0; c < N_CELLS; c++)
        p = put_f64(p, s->used[c]);
    for (int c = 0; c < N_CELLS; c++)
        p = put_f64(p, s->seen[c]);
    for (size_t i = 0; i < co_cells(s); i++)
        p = put_f32(p, s->co[i]);
    for (size_t i = 0; i < co_rows(s); i++)
        p = put_f32(p, s->co_src[i]);
    assert((size_t)(p - buf) == len);
    enum moeinf_status st =
        moeinf_eamc_write_policy(s->eamc, f, "EAMC", moeinf_policy_reuse.name, buf, len, err);
    free(buf);
    return st;
}

static bool count_ok(double v) {
    return isfinite(v) && v >= 0;
}

/* Parses a section into a fresh state t; false when a value is out of range. */
static bool parse_section(struct reuse *t, const uint8_t *p) {
    t->tok = (int64_t)get64(&p);
    t->clock = get64(&p);
    bool ok = t->tok >= 0;
    for (uint32_t id = 0; id < t->n_ids; id++) {
        t->last_use[id] = (int64_t)get64(&p);
        ok &=
            t->last_use[id] == INT64_MIN / 2 || (t->last_use[id] >= 0 && t->last_use[id] <= t->tok);
    }
    for (uint32_t id = 0; id < t->n_ids; id++) {
        t->last_stamp[id] = get64(&p);
        ok &= t->last_stamp[id] <= t->clock;
    }
    for (uint32_t id = 0; id < t->n_ids; id++)
        ok &= count_ok(t->global[id] = get_f64(&p));
    for (int c = 0; c < N_CELLS; c++)
        ok &= count_ok(t->used[c] = get_f64(&p));
    for (int c = 0; c < N_CELLS; c++)
        ok &= count_ok(t->seen[c] = get_f64(&p));
    for (size_t i = 0; i < co_cells(t); i++)
        ok &= count_ok((double)(t->co[i] = get_f32(&p)));
    for (size_t i = 0; i < co_rows(t); i++)
        ok &= count_ok((double)(t->co_src[i] = get_f32(&p)));
    return ok;
}

/*
 * All or nothing: the file is read and checked into a fresh state whose learned tables then
 * replace the current ones. A version 1 file (the EAMC alone) gives empty tables.
 */
enum moeinf_status moeinf_reuse_load(void *state, FILE *f, struct moeinf_error *err) {
    struct reuse *s = state;
    void *fresh_state = NULL;
    enum moeinf_status st = moeinf_reuse_init(&s->geom, &fresh_state, err);
    if (st != MOEINF_OK) return st;
    struct reuse *t = fresh_state;
    if (!t) return moeinf_fail(err, MOEINF_ERR_NOMEM, "policy reuse: out of memory");
    struct moeinf_eamc *eamc = NULL;
    uint8_t *section = NULL;
    st = moeinf_eamc_read_policy(&s->geom, f, "EAMC", moeinf_policy_reuse.name, section_bytes(s),
                                 &eamc, &section, NULL, err);
    if (st == MOEINF_OK && section && !parse_section(t, section)) {
        st = moeinf_fail(err, MOEINF_ERR_FORMAT,
                         "EAMC: bad count: the reuse policy's section holds a value out of range");
        moeinf_eamc_free(eamc);
        eamc = NULL;
    }
    free(section);
    if (st == MOEINF_OK) {
        /* t takes the old tables (freed with it), s the new ones */
        struct moeinf_eamc *old_eamc = s->eamc;
        s->eamc = eamc;
        eamc = old_eamc;
        int64_t *last_use = s->last_use;
        uint64_t *last_stamp = s->last_stamp;
        double *global = s->global;
        float *co = s->co;
        float *co_src = s->co_src;
        s->last_use = t->last_use;
        s->last_stamp = t->last_stamp;
        s->global = t->global;
        s->co = t->co;
        s->co_src = t->co_src;
        t->last_use = last_use;
        t->last_stamp = last_stamp;
        t->global = global;
        t->co = co;
        t->co_src = co_src;
        s->tok = t->tok;
        s->clock = t->clock;
        memcpy(s->used, t->used, sizeof s->used);
        memcpy(s->seen, t->seen, sizeof s->seen);
        memset(s->used_age, 0, sizeof s->used_age);
        memset(s->seen_age, 0, sizeof s->seen_age);
        for (int c = 0; c < N_CELLS; c++) {
            s->used_age[c % NA] += s->used[c];
            s->seen_age[c % NA] += s->seen[c];
        }
        s->req_tokens = 0;
        moeinf_reuse_duel_reset(s);
    }
    moeinf_eamc_free(eamc);
    moeinf_reuse_free(t);
    return st;
}
