/* eam.c - EAM, EAMC, PredictEAM and the EAMC file (see eam.h). */
#include "experts/eam.h"

#include <assert.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "base/file.h"
#include "base/le.h"
#include "base/status.h"

/* The text of errno, thread-safe (GNU strerror_r: _GNU_SOURCE is set for every file). */
static const char *errno_text(int errnum, char *buf, size_t size) {
    return strerror_r(errnum, buf, size);
}

#define N_PHASES 2

static const char magic[8] = {'M', 'O', 'E', 'I', 'E', 'A', 'M', 'C'};
#define VERSION     3u /* the model's identity, the collection, the named policy's section */
#define HEADER_SIZE 32u
#define MODEL_HEAD  (16u + MOEINF_MODEL_NAME_BYTES) /* kind, 0, hash, name */
#define POLICY_HEAD 24u /* policy name (16 bytes, NUL-padded) + u64 length */

struct moeinf_eamc {
    int n_layers;
    int n_experts;
    int top_k;
    uint32_t n_ids;
    int capacity;
    int size;
    struct moeinf_model_id model; /* whose routing the collection holds (the geometry's) */
    /* The collection, expert-major so that one record touches one contiguous row:
     * col[ph][id * capacity + m] is entry m's count of expert id in phase ph. */
    float *col[N_PHASES];
    /* The same counts entry-major, row[ph][m * n_ids + id], for PredictEAM's sums. */
    float *row[N_PHASES];
    double *norm2[N_PHASES];    /* (capacity) squared norm of entry m in phase ph */
    uint32_t *tokens[N_PHASES]; /* (capacity) tokens of entry m in phase ph */
    /* The current request. */
    float *cur[N_PHASES]; /* (n_ids) */
    double cur_norm2[N_PHASES];
    uint32_t cur_tokens[N_PHASES];
    double *dot[N_PHASES]; /* (capacity) dot(cur[ph], entry m in ph) */
    enum moeinf_phase phase;
};

const char *moeinf_eamc_defect_name(enum moeinf_eamc_defect d) {
    switch (d) {
    case MOEINF_EAMC_OK:
        return "ok";
    case MOEINF_EAMC_BAD_MAGIC:
        return "not an EAMC file";
    case MOEINF_EAMC_BAD_VERSION:
        return "unsupported EAMC version";
    case MOEINF_EAMC_TRUNCATED:
        return "truncated";
    case MOEINF_EAMC_TRAILING:
        return "trailing bytes";
    case MOEINF_EAMC_BAD_HEADER:
        return "bad header";
    case MOEINF_EAMC_CHECKSUM:
        return "checksum mismatch";
    case MOEINF_EAMC_BAD_VALUE:
        return "bad count";
    case MOEINF_EAMC_GEOMETRY:
        return "geometry mismatch";
    case MOEINF_EAMC_FOREIGN:
        return "another policy's state";
    case MOEINF_EAMC_MODEL:
        return "another model's state";
    }
    return "unknown defect";
}

void moeinf_eamc_free(struct moeinf_eamc *c) {
    if (!c) return;
    for (int ph = 0; ph < N_PHASES; ph++) {
        free(c->col[ph]);
        free(c->row[ph]);
        free(c->norm2[ph]);
        free(c->tokens[ph]);
        free(c->cur[ph]);
        free(c->dot[ph]);
    }
    free(c);
}

enum moeinf_status moeinf_eamc_init(const struct moeinf_policy_geometry *geom, int capacity,
                                    struct moeinf_eamc **out, struct moeinf_error *err) {
    if (geom->n_layers < 1 || geom->n_experts < 1 ||
        (uint64_t)geom->n_layers * (uint64_t)geom->n_experts > MOEINF_MAX_EXPERT_IDS) {
        return moeinf_fail(err, MOEINF_ERR_ARG, "eamc: impossible geometry %d x %d", geom->n_layers,
                           geom->n_experts);
    }
    if (capacity < 1 || capacity > MOEINF_EAMC_MAX_CAPACITY) {
        return moeinf_fail(err, MOEINF_ERR_ARG, "eamc: capacity %d is not in [1, %d]", capacity,
                           MOEINF_EAMC_MAX_CAPACITY);
    }
    struct moeinf_eamc *c = calloc(1, sizeof *c);
    if (!c) goto nomem;
    c->n_layers = geom->n_layers;
    c->n_experts = geom->n_experts;
    c->top_k = geom->top_k;
    c->n_ids = (uint32_t)geom->n_layers * (uint32_t)geom->n_experts;
    c->capacity = capacity;
    c->model = geom->model;
    c->phase = MOEINF_PHASE_PREFILL;
    size_t cells = (size_t)c->n_ids * (size_t)capacity;
    for (int ph = 0; ph < N_PHASES; ph++) {
        c->col[ph] = calloc(cells, sizeof *c->col[ph]);
        c->row[ph] = calloc(cells, sizeof *c->row[ph]);
        c->norm2[ph] = calloc((size_t)capacity, sizeof *c->norm2[ph]);
        c->tokens[ph] = calloc((size_t)capacity, sizeof *c->tokens[ph]);
        c->cur[ph] = calloc(c->n_ids, sizeof *c->cur[ph]);
        c->dot[ph] = calloc((size_t)capacity, sizeof *c->dot[ph]);
        if (!c->col[ph] || !c->row[ph] || !c->norm2[ph] || !c->tokens[ph] || !c->cur[ph] ||
            !c->dot[ph]) {
            goto nomem;
        }
    }
    *out = c;
    return MOEINF_OK;
nomem:
    moeinf_eamc_free(c);
    return moeinf_fail(err, MOEINF_ERR_NOMEM, "eamc: out of memory for %d entries", capacity);
}

int moeinf_eamc_capacity(const struct moeinf_eamc *c) {
    return c->capacity;
}

int moeinf_eamc_size(const struct moeinf_eamc *c) {
    return c->size;
}

uint32_t moeinf_eamc_n_ids(const struct moeinf_eamc *c) {
    return c->n_ids;
}

void moeinf_eamc_request_begin(struct moeinf_eamc *c) {
    for (int ph = 0; ph < N_PHASES; ph++) {
        memset(c->cur[ph], 0, c->n_ids * sizeof *c->cur[ph]);
        memset(c->dot[ph], 0, (size_t)c->capacity * sizeof *c->dot[ph]);
        c->cur_norm2[ph] = 0;
        c->cur_tokens[ph] = 0;
    }
    c->phase = MOEINF_PHASE_PREFILL;
}

void moeinf_eamc_tokens_begin(struct moeinf_eamc *c, enum moeinf_phase phase, int n_tokens) {
    assert(phase == MOEINF_PHASE_PREFILL || phase == MOEINF_PHASE_DECODE);
    assert(n_tokens >= 1);
    c->phase = phase;
    c->cur_tokens[phase] += (uint32_t)n_tokens;
}

void moeinf_eamc_token_begin(struct moeinf_eamc *c, enum moeinf_phase phase) {
    moeinf_eamc_tokens_begin(c, phase, 1);
}

void moeinf_eamc_record_n(struct moeinf_eamc *c, uint32_t id, uint32_t count) {
    assert(id < c->n_ids);
    int ph = (int)c->phase;
    float old = c->cur[ph][id];
    float k = (float)count;
    c->cur[ph][id] = old + k;
    /* |v + k e_id|^2 = |v|^2 + 2 k v_id + k^2 */
    c->cur_norm2[ph] += 2.0 * (double)k * (double)old + (double)k * (double)k;
    const float *row = c->col[ph] + (size_t)id * (size_t)c->capacity;
    double *dot = c->dot[ph];
    for (int m = 0; m < c->size; m++)
        dot[m] += (double)k * (double)row[m];
}

void moeinf_eamc_record(struct moeinf_eamc *c, uint32_t id) {
    moeinf_eamc_record_n(c, id, 1);
}

const float *moeinf_eamc_current(const struct moeinf_eamc *c, enum moeinf_phase phase) {
    return c->cur[phase];
}

uint32_t moeinf_eamc_current_tokens(const struct moeinf_eamc *c, enum moeinf_phase phase) {
    return c->cur_tokens[phase];
}

void moeinf_eamc_entry(const struct moeinf_eamc *c, int i, enum moeinf_phase phase, float *out) {
    assert(i >= 0 && i < c->size);
    memcpy(out, c->row[phase] + (size_t)i * c->n_ids, c->n_ids * sizeof *out);
}

uint32_t moeinf_eamc_entry_tokens(const struct moeinf_eamc *c, int i, enum moeinf_phase phase) {
    assert(i >= 0 && i < c->size);
    return c->tokens[phase][i];
}

static void store_column(struct moeinf_eamc *c, int m) {
    for (int ph = 0; ph < N_PHASES; ph++) {
        float *col = c->col[ph];
        const float *cur = c->cur[ph];
        size_t stride = (size_t)c->capacity;
        for (uint32_t id = 0; id < c->n_ids; id++)
            col[(size_t)id * stride + (size_t)m] = cur[id];
        memcpy(c->row[ph] + (size_t)m * c->n_ids, cur, c->n_ids * sizeof *cur);
        c->norm2[ph][m] = c->cur_norm2[ph];
        c->tokens[ph][m] = c->cur_tokens[ph];
    }
}

void moeinf_eamc_request_end(struct moeinf_eamc *c) {
    if (c->cur_tokens[0] + c->cur_tokens[1] == 0) return;
    int slot;
    if (c->size < c->capacity) {
        slot = c->size++;
    } else {
        /* Replace the most similar entry: keeps the newest pattern and the collection
         * diverse (PAPER.md). Cosine over both phases together. */
        double cur = sqrt(c->cur_norm2[0] + c->cur_norm2[1]);
        double best = -2.0;
        slot = 0;
        for (int m = 0; m < c->size; m++) {
            double en = sqrt(c->norm2[0][m] + c->norm2[1][m]);
            double sim = en > 0 ? (c->dot[0][m] + c->dot[1][m]) / (cur * en) : 0.0;
            if (sim > best) {
                best = sim;
                slot = m;
            }
        }
    }
    store_column(c, slot);
}

double moeinf_eam_proximity(int layer, int current, int n_layers) {
    int d = ((layer - current) % n_layers + n_layers) % n_layers;
    return 1.0 - (double)d / (double)n_layers;
}

/* Inserts (sim, m) into the descending top list of at most k; equal sims keep the earlier
 * (lower) entry first. */
static void top_insert(double *sims, int *ids, int *n, int k, double sim, int m) {
    int i = *n;
    if (i == k) {
        if (!(sim > sims[k - 1])) return;
        i = k - 1;
    } else {
        (*n)++;
    }
    while (i > 0 && sims[i - 1] < sim) {
        sims[i] = sims[i - 1];
        ids[i] = ids[i - 1];
        i--;
    }
    sims[i] = sim;
    ids[i] = m;
}

int moeinf_eamc_match(const struct moeinf_eamc *c, int n_match, int *ids) {
    if (n_match < 1) n_match = 1;
    if (n_match > MOEINF_EAMC_MAX_MATCH) n_match = MOEINF_EAMC_MAX_MATCH;
    /* The phase to match on: at the first decode token the prompt is all we know. */
    int mph = (int)c->phase;
    if (c->cur_norm2[mph] == 0) mph = MOEINF_PHASE_PREFILL;
    double sims[MOEINF_EAMC_MAX_MATCH];
    int n = 0;
    if (c->cur_norm2[mph] > 0) {
        double cur = sqrt(c->cur_norm2[mph]);
        for (int m = 0; m < c->size; m++) {
            if (!(c->norm2[mph][m] > 0)) continue;
            double sim = c->dot[mph][m] / (cur * sqrt(c->norm2[mph][m]));
            top_insert(sims, ids, &n, n_match, sim, m);
        }
    }
    return n;
}

void moeinf_eamc_predict_matched(const struct moeinf_eamc *c, const int *ids, int n, float *out) {
    const int n_exp = c->n_experts;
    const float *rows = c->row[c->phase];
    /* Sum the matched entries, or the whole collection when nothing could be matched. */
    const int n_sum = n > 0 ? n : c->size;
    for (uint32_t id = 0; id < c->n_ids; id++)
        out[id] = 0.0f;
    for (int j = 0; j < n_sum; j++) {
        const float *r = rows + (size_t)(n > 0 ? ids[j] : j) * c->n_ids;
        for (uint32_t id = 0; id < c->n_ids; id++)
            out[id] += r[id];
    }
    for (int l = 0; l < c->n_layers; l++) {
        float *o = out + (size_t)l * n_exp;
        double sum = 0;
        for (int e = 0; e < n_exp; e++)
            sum += (double)o[e];
        const float scale = sum > 0 ? (float)(1.0 / sum) : 0.0f;
        for (int e = 0; e < n_exp; e++)
            o[e] = sum > 0 ? o[e] * scale : 1.0f / (float)n_exp;
    }
}

int moeinf_eamc_predict(const struct moeinf_eamc *c, int n_match, float *out) {
    int ids[MOEINF_EAMC_MAX_MATCH] = {0};
    int n = c->size > 0 ? moeinf_eamc_match(c, n_match, ids) : 0;
    moeinf_eamc_predict_matched(c, ids, n, out);
    return n > 0 ? n : c->size;
}

enum moeinf_phase moeinf_eamc_phase(const struct moeinf_eamc *c) {
    return c->phase;
}

/* ---- file ---------------------------------------------------------------------------- */

#define FNV_OFFSET 0xcbf29ce484222325ull
#define FNV_PRIME  0x100000001b3ull

static uint64_t fnv1a(uint64_t h, const uint8_t *p, size_t n) {
    for (size_t i = 0; i < n; i++) {
        h ^= p[i];
        h *= FNV_PRIME;
    }
    return h;
}

struct writer {
    FILE *f;
    uint64_t hash;
    bool failed;
};

static void emit(struct writer *w, const uint8_t *p, size_t n) {
    w->hash = fnv1a(w->hash, p, n);
    if (!w->failed && fwrite(p, 1, n, w->f) != n) w->failed = true;
}

/* Version 1 when policy is NULL, else version 2 with the policy's section. */
static enum moeinf_status write_file(const struct moeinf_eamc *c, FILE *f, const char *what,
                                     const char *policy, const uint8_t *section, size_t len,
                                     struct moeinf_error *err) {
    struct writer w = {f, FNV_OFFSET, false};
    uint8_t head[HEADER_SIZE + MODEL_HEAD + POLICY_HEAD];
    memset(head, 0, sizeof head);
    memcpy(head, magic, sizeof magic);
    moeinf_le_put_u32(head + 8, VERSION);
    moeinf_le_put_u32(head + 12, (uint32_t)c->n_layers);
    moeinf_le_put_u32(head + 16, (uint32_t)c->n_experts);
    moeinf_le_put_u32(head + 20, (uint32_t)c->top_k);
    moeinf_le_put_u32(head + 24, (uint32_t)c->capacity);
    moeinf_le_put_u32(head + 28, (uint32_t)c->size);
    uint8_t *mh = head + HEADER_SIZE; /* the model: kind, 0, hash, name (NUL-padded) */
    moeinf_le_put_u32(mh, (uint32_t)c->model.kind);
    moeinf_le_put_u64(mh + 8, c->model.hash);
    struct moeinf_model_id label;
    moeinf_model_id_set_name(&label, c->model.name); /* printable, NUL-terminated */
    memcpy(mh + 16, label.name, strlen(label.name));
    uint8_t *pol = mh + MODEL_HEAD; /* the policy: name (NUL-padded; none: all NUL), length */
    if (policy) {
        size_t name_len = strlen(policy);
        if (name_len >= MOEINF_EAMC_POLICY_NAME) {
            return moeinf_fail(err, MOEINF_ERR_ARG, "%s: policy name '%s' is too long", what,
                               policy);
        }
        memcpy(pol, policy, name_len + 1); /* with its NUL; the rest of the field stays NUL */
        moeinf_le_put_u64(pol + MOEINF_EAMC_POLICY_NAME, (uint64_t)len);
    }
    emit(&w, head, sizeof head);
    uint8_t buf[4096];
    for (int m = 0; m < c->size && !w.failed; m++) {
        uint8_t tok[8];
        moeinf_le_put_u32(tok, c->tokens[0][m]);
        moeinf_le_put_u32(tok + 4, c->tokens[1][m]);
        emit(&w, tok, sizeof tok);
        for (int ph = 0; ph < N_PHASES; ph++) {
            size_t n = 0;
            for (uint32_t id = 0; id < c->n_ids; id++) {
                moeinf_le_put_f32(buf + n, c->row[ph][(size_t)m * c->n_ids + id]);
                n += 4;
                if (n == sizeof buf) {
                    emit(&w, buf, n);
                    n = 0;
                }
            }
            emit(&w, buf, n);
        }
    }
    if (policy && len) emit(&w, section, len);
    uint8_t sum[8];
    moeinf_le_put_u64(sum, w.hash);
    if (!w.failed && fwrite(sum, 1, sizeof sum, f) != sizeof sum) w.failed = true;
    if (w.failed || ferror(f)) {
        char ebuf[128];
        return moeinf_fail(err, MOEINF_ERR_IO, "%s: write failed: %s", what,
                           errno_text(errno ? errno : EIO, ebuf, sizeof ebuf));
    }
    return MOEINF_OK;
}

enum moeinf_status moeinf_eamc_write(const struct moeinf_eamc *c, FILE *f, const char *what,
                                     struct moeinf_error *err) {
    return write_file(c, f, what, NULL, NULL, 0, err);
}

enum moeinf_status moeinf_eamc_write_policy(const struct moeinf_eamc *c, FILE *f, const char *what,
                                            const char *policy, const uint8_t *section, size_t len,
                                            struct moeinf_error *err) {
    return write_file(c, f, what, policy, section, len, err);
}

struct reader {
    FILE *f;
    uint64_t hash;
};

/* Reads exactly n bytes into p (hashing them); false at a short read. */
static bool take(struct reader *r, uint8_t *p, size_t n) {
    if (fread(p, 1, n, r->f) != n) return false;
    r->hash = fnv1a(r->hash, p, n);
    return true;
}

static enum moeinf_status defect_fail(struct moeinf_error *err, enum moeinf_eamc_defect *out,
                                      enum moeinf_eamc_defect d, const char *what,
                                      const char *detail) {
    if (out) *out = d;
    return moeinf_fail(err, MOEINF_ERR_FORMAT, "%s: %s: %s", what, moeinf_eamc_defect_name(d),
                       detail);
}

/* Streams n bytes through the hash, into out when it is not NULL. */
static bool take_or_skip(struct reader *r, uint8_t *out, uint64_t n) {
    uint8_t buf[4096];
    while (n > 0) {
        size_t k = n < sizeof buf ? (size_t)n : sizeof buf;
        if (!take(r, out ? out : buf, k)) return false;
        if (out) out += k;
        n -= k;
    }
    return true;
}

/* Reads `size` records of n_ids counts per phase into c (NULL: only through the hash); a bad
 * count sets *late and is stored as 0. False at a short read. */
static bool read_records(struct reader *r, struct moeinf_eamc *c, uint32_t size, uint32_t n_ids,
                         uint32_t capacity, enum moeinf_eamc_defect *late) {
    uint8_t buf[4096];
    for (uint32_t m = 0; m < size; m++) {
        uint8_t tok[8];
        if (!take(r, tok, sizeof tok)) return false;
        if (c) {
            c->tokens[0][m] = moeinf_le_u32(tok);
            c->tokens[1][m] = moeinf_le_u32(tok + 4);
        }
        for (int ph = 0; ph < N_PHASES; ph++) {
            double norm2 = 0;
            for (uint32_t id0 = 0; id0 < n_ids; id0 += (uint32_t)(sizeof buf / 4)) {
                uint32_t n =
                    n_ids - id0 < sizeof buf / 4 ? n_ids - id0 : (uint32_t)(sizeof buf / 4);
                if (!take(r, buf, (size_t)n * 4)) return false;
                if (!c) continue;
                for (uint32_t i = 0; i < n; i++) {
                    float v = moeinf_le_f32(buf + (size_t)4 * i);
                    if (!isfinite(v) || v < 0) {
                        *late = MOEINF_EAMC_BAD_VALUE;
                        v = 0;
                    }
                    c->col[ph][(size_t)(id0 + i) * capacity + m] = v;
                    c->row[ph][(size_t)m * n_ids + id0 + i] = v;
                    norm2 += (double)v * (double)v;
                }
            }
            if (c) c->norm2[ph][m] = norm2;
        }
    }
    return true;
}

/* Version 2's policy name and section length into owner and *len. */
static enum moeinf_status read_policy_head(struct reader *r, const char *what,
                                           char owner[MOEINF_EAMC_POLICY_NAME + 1], uint64_t *len,
                                           enum moeinf_eamc_defect *defect,
                                           struct moeinf_error *err) {
    uint8_t ph[POLICY_HEAD];
    if (!take(r, ph, sizeof ph)) {
        if (ferror(r->f)) return moeinf_fail(err, MOEINF_ERR_IO, "%s: read failed", what);
        return defect_fail(err, defect, MOEINF_EAMC_TRUNCATED, what, "header cut short");
    }
    memcpy(owner, ph, MOEINF_EAMC_POLICY_NAME);
    owner[MOEINF_EAMC_POLICY_NAME] = '\0';
    *len = moeinf_le_u64(ph + MOEINF_EAMC_POLICY_NAME);
    bool name_ok = ph[MOEINF_EAMC_POLICY_NAME - 1] == 0;
    for (size_t i = 0; name_ok && owner[i]; i++)
        name_ok = owner[i] > ' ' && owner[i] < 0x7f;
    if (!name_ok) {
        return defect_fail(err, defect, MOEINF_EAMC_BAD_HEADER, what,
                           "the policy name is not a short printable word");
    }
    if (!owner[0] && *len != 0) {
        return defect_fail(err, defect, MOEINF_EAMC_BAD_HEADER, what,
                           "a policy section with no policy name");
    }
    return MOEINF_OK;
}

/* The model block: kind, a zero word, hash, name (printable ASCII, NUL-padded). */
static enum moeinf_status read_model_head(struct reader *r, const char *what,
                                          struct moeinf_model_id *out,
                                          enum moeinf_eamc_defect *defect,
                                          struct moeinf_error *err) {
    uint8_t mh[MODEL_HEAD];
    memset(out, 0, sizeof *out);
    if (!take(r, mh, sizeof mh)) {
        if (ferror(r->f)) return moeinf_fail(err, MOEINF_ERR_IO, "%s: read failed", what);
        return defect_fail(err, defect, MOEINF_EAMC_TRUNCATED, what, "header cut short");
    }
    uint32_t kind = moeinf_le_u32(mh);
    out->hash = moeinf_le_u64(mh + 8);
    memcpy(out->name, mh + 16, MOEINF_MODEL_NAME_BYTES);
    bool ok = kind <= MOEINF_MODEL_ID_TRACE && moeinf_le_u32(mh + 4) == 0 &&
              out->name[MOEINF_MODEL_NAME_BYTES - 1] == '\0';
    for (size_t i = 0; ok && out->name[i]; i++)
        ok = out->name[i] >= ' ' && out->name[i] < 0x7f;
    if (!ok) {
        return defect_fail(err, defect, MOEINF_EAMC_BAD_HEADER, what,
                           "the model block is not a known kind and a printable name");
    }
    out->kind = (enum moeinf_model_id_kind)kind;
    return MOEINF_OK;
}

/* "'NAME' (model id HEX)", "a trace of 'NAME' (no model_id)" or "no model", into buf. */
static const char *describe(const struct moeinf_model_id *id, char *buf, size_t size) {
    switch (id->kind) {
    case MOEINF_MODEL_ID_ROUTERS:
        snprintf(buf, size, "'%s' (model id %016llx)", id->name, (unsigned long long)id->hash);
        break;
    case MOEINF_MODEL_ID_TRACE:
        snprintf(buf, size, "a trace of '%s' (no model_id)", id->name);
        break;
    case MOEINF_MODEL_ID_NONE:
        snprintf(buf, size, "no model");
        break;
    }
    return buf;
}

static enum moeinf_status check_version(uint32_t version, const char *what,
                                        enum moeinf_eamc_defect *defect, struct moeinf_error *err) {
    char detail[160];
    if (version == VERSION) return MOEINF_OK;
    if (version == 1 || version == 2) {
        /* No model identity: it could be any model's of the geometry (eam.h). */
        snprintf(detail, sizeof detail,
                 "version %u does not name its model, this build reads version %u only: delete "
                 "it (a cold start) or rebuild it",
                 version, VERSION);
    } else {
        snprintf(detail, sizeof detail, "version %u, this build reads version %u", version,
                 VERSION);
    }
    return defect_fail(err, defect, MOEINF_EAMC_BAD_VERSION, what, detail);
}

static bool same_model(const struct moeinf_model_id *a, const struct moeinf_model_id *b) {
    return a->kind == b->kind && a->hash == b->hash;
}

/*
 * Reads a version 1 or 2 file. policy NULL: any policy's file, its section skipped. Otherwise a
 * version 2 file must name that policy, and its section must be empty or `want` bytes long; a
 * non-empty section is returned in *section (malloc'ed), else *section = NULL.
 */
static enum moeinf_status read_file(const struct moeinf_policy_geometry *geom, FILE *f,
                                    const char *what, const char *policy, uint64_t want,
                                    struct moeinf_eamc **out, uint8_t **section,
                                    enum moeinf_eamc_defect *defect, struct moeinf_error *err) {
    struct reader r = {f, FNV_OFFSET};
    struct moeinf_eamc *c = NULL;
    uint8_t *sec = NULL;
    char detail[240];
    uint8_t head[HEADER_SIZE];
    size_t got = fread(head, 1, sizeof head, f);
    if (got < sizeof magic || memcmp(head, magic, sizeof magic) != 0) {
        if (ferror(f)) return moeinf_fail(err, MOEINF_ERR_IO, "%s: read failed", what);
        return defect_fail(err, defect, MOEINF_EAMC_BAD_MAGIC, what, "no MOEIEAMC magic");
    }
    if (got < sizeof head) {
        return defect_fail(err, defect, MOEINF_EAMC_TRUNCATED, what, "header cut short");
    }
    r.hash = fnv1a(r.hash, head, sizeof head);
    enum moeinf_status hst = check_version(moeinf_le_u32(head + 8), what, defect, err);
    if (hst != MOEINF_OK) return hst;
    uint32_t n_layers = moeinf_le_u32(head + 12);
    uint32_t n_experts = moeinf_le_u32(head + 16);
    uint32_t top_k = moeinf_le_u32(head + 20);
    uint32_t capacity = moeinf_le_u32(head + 24);
    uint32_t size = moeinf_le_u32(head + 28);
    if (n_layers < 1 || n_experts < 1 || top_k < 1 || top_k > n_experts ||
        (uint64_t)n_layers * n_experts > MOEINF_MAX_EXPERT_IDS || capacity < 1 ||
        capacity > MOEINF_EAMC_MAX_CAPACITY || size > capacity) {
        snprintf(detail, sizeof detail, "%u x %u experts, top_k %u, %u of %u entries", n_layers,
                 n_experts, top_k, size, capacity);
        return defect_fail(err, defect, MOEINF_EAMC_BAD_HEADER, what, detail);
    }
    struct moeinf_model_id model = {MOEINF_MODEL_ID_NONE, 0, ""};
    hst = read_model_head(&r, what, &model, defect, err);
    if (hst != MOEINF_OK) return hst;
    char owner[MOEINF_EAMC_POLICY_NAME + 1] = "";
    uint64_t sec_len = 0;
    hst = read_policy_head(&r, what, owner, &sec_len, defect, err);
    if (hst != MOEINF_OK) return hst;
    const bool same = (int)n_layers == geom->n_layers && (int)n_experts == geom->n_experts &&
                      (int)top_k == geom->top_k;
    const bool mine = policy && !strcmp(owner, policy);
    if (same && mine && sec_len != 0 && sec_len != want) {
        snprintf(detail, sizeof detail,
                 "a policy section of %llu bytes, policy %s keeps %llu for this model",
                 (unsigned long long)sec_len, policy, (unsigned long long)want);
        return defect_fail(err, defect, MOEINF_EAMC_BAD_HEADER, what, detail);
    }
    const uint32_t n_ids = n_layers * n_experts;
    if (same) {
        enum moeinf_status st = moeinf_eamc_init(geom, (int)capacity, &c, err);
        if (st != MOEINF_OK) return st;
        if (!c) return moeinf_fail(err, MOEINF_ERR_NOMEM, "%s: out of memory", what);
    }
    /* Stream the records (into c when the geometry matches, else only through the hash, so
     * that a corrupt file reports its corruption rather than a mismatch). */
    enum moeinf_eamc_defect late = MOEINF_EAMC_OK;
    if (!read_records(&r, c, size, n_ids, capacity, &late)) goto truncated;
    /* The policy's section: kept only when it is this policy's, for this model. */
    if (sec_len > 0 && same && mine && section) {
        sec = malloc((size_t)sec_len);
        if (!sec) {
            moeinf_eamc_free(c);
            return moeinf_fail(err, MOEINF_ERR_NOMEM, "%s: out of memory", what);
        }
    }
    if (!take_or_skip(&r, sec, sec_len)) goto truncated;
    uint8_t sum[8];
    if (fread(sum, 1, sizeof sum, f) != sizeof sum) goto truncated;
    if (fgetc(f) != EOF) {
        moeinf_eamc_free(c);
        free(sec);
        return defect_fail(err, defect, MOEINF_EAMC_TRAILING, what, "bytes after the checksum");
    }
    if (moeinf_le_u64(sum) != r.hash) {
        moeinf_eamc_free(c);
        free(sec);
        return defect_fail(err, defect, MOEINF_EAMC_CHECKSUM, what,
                           "the file was altered or damaged");
    }
    if (policy && owner[0] && !mine) {
        moeinf_eamc_free(c);
        free(sec);
        snprintf(detail, sizeof detail, "written by policy '%s', this is '%s'", owner, policy);
        return defect_fail(err, defect, MOEINF_EAMC_FOREIGN, what, detail);
    }
    if (!same) {
        free(sec);
        snprintf(detail, sizeof detail, "file has %u x %u experts top-%u, model has %d x %d top-%d",
                 n_layers, n_experts, top_k, geom->n_layers, geom->n_experts, geom->top_k);
        return defect_fail(err, defect, MOEINF_EAMC_GEOMETRY, what, detail);
    }
    if (geom->model.kind != MOEINF_MODEL_ID_NONE && !same_model(&model, &geom->model)) {
        moeinf_eamc_free(c);
        free(sec);
        char a[120];
        char b[120];
        /* this model's first: a long path cuts the end of the message */
        snprintf(detail, sizeof detail, "this is %s, the file was written for %s",
                 describe(&geom->model, b, sizeof b), describe(&model, a, sizeof a));
        return defect_fail(err, defect, MOEINF_EAMC_MODEL, what, detail);
    }
    if (late != MOEINF_EAMC_OK || !c) {
        moeinf_eamc_free(c);
        free(sec);
        return defect_fail(err, defect, MOEINF_EAMC_BAD_VALUE, what,
                           "a count is negative, NaN or infinite");
    }
    c->size = (int)size;
    if (geom->model.kind == MOEINF_MODEL_ID_NONE) c->model = model; /* a tool's read: keep it */
    if (defect) *defect = MOEINF_EAMC_OK;
    *out = c;
    if (section) *section = sec;
    return MOEINF_OK;
truncated:
    moeinf_eamc_free(c);
    free(sec);
    if (ferror(f)) return moeinf_fail(err, MOEINF_ERR_IO, "%s: read failed", what);
    return defect_fail(err, defect, MOEINF_EAMC_TRUNCATED, what, "shorter than its header says");
}

enum moeinf_status moeinf_eamc_read(const struct moeinf_policy_geometry *geom, FILE *f,
                                    const char *what, struct moeinf_eamc **out,
                                    enum moeinf_eamc_defect *defect, struct moeinf_error *err) {
    return read_file(geom, f, what, NULL, 0, out, NULL, defect, err);
}

enum moeinf_status moeinf_eamc_read_policy(const struct moeinf_policy_geometry *geom, FILE *f,
                                           const char *what, const char *policy,
                                           uint64_t section_len, struct moeinf_eamc **out,
                                           uint8_t **section, enum moeinf_eamc_defect *defect,
                                           struct moeinf_error *err) {
    return read_file(geom, f, what, policy, section_len, out, section, defect, err);
}

enum moeinf_status moeinf_eamc_save(const struct moeinf_eamc *c, const char *path,
                                    struct moeinf_error *err) {
    struct moeinf_atomic_file af;
    enum moeinf_status st = moeinf_atomic_open(path, &af, err);
    if (st != MOEINF_OK) return st;
    st = moeinf_eamc_write(c, af.fp, path, err);
    if (st != MOEINF_OK) {
        moeinf_atomic_abort(&af);
        return st;
    }
    return moeinf_atomic_commit(&af, err);
}

enum moeinf_status moeinf_eamc_load(const struct moeinf_policy_geometry *geom, const char *path,
                                    struct moeinf_eamc **out, enum moeinf_eamc_defect *defect,
                                    struct moeinf_error *err) {
    FILE *f = NULL;
    enum moeinf_status st = moeinf_file_fopen_regular(path, &f, err); /* a FIFO would hang */
    if (st != MOEINF_OK) return st;
    st = moeinf_eamc_read(geom, f, path, out, defect, err);
    fclose(f);
    return st;
}

/* ---- model identities ------------------------------------------------------------------ */

void moeinf_model_id_set_name(struct moeinf_model_id *out, const char *name) {
    size_t i = 0;
    for (; name && name[i] && i < MOEINF_MODEL_NAME_BYTES - 1; i++) {
        const unsigned char ch = (unsigned char)name[i];
        out->name[i] = name[i];
        if (ch < ' ' || ch >= 0x7f) out->name[i] = '?';
    }
    memset(out->name + i, 0, MOEINF_MODEL_NAME_BYTES - i);
}

void moeinf_model_id_for_trace(const char *name, bool has_id, uint64_t id,
                               struct moeinf_model_id *out) {
    memset(out, 0, sizeof *out);
    out->kind = has_id ? MOEINF_MODEL_ID_ROUTERS : MOEINF_MODEL_ID_TRACE;
    out->hash = has_id ? id : fnv1a(FNV_OFFSET, (const uint8_t *)name, strlen(name));
    moeinf_model_id_set_name(out, name);
}

/* ---- policy state files ---------------------------------------------------------------- */

static enum moeinf_status no_state(const struct moeinf_policy *p, const char *path,
                                   struct moeinf_error *err) {
    return moeinf_fail(err, MOEINF_ERR_ARG, "%s: policy '%s' keeps no EAMC to load or save", path,
                       p->ops->name);
}

/* Prefixes err's message with the path (the policy's loader does not know it). */
static enum moeinf_status with_path(enum moeinf_status st, const char *path,
                                    struct moeinf_error *err) {
    if (err) {
        char msg[sizeof err->msg];
        snprintf(msg, sizeof msg, "%s", err->msg);
        moeinf_fail(err, st, "%s: %s", path, msg);
    }
    return st;
}

/* Gives the policy an empty collection of `capacity` entries, through its own loader. */
static enum moeinf_status load_empty(struct moeinf_policy *p, const char *path, int capacity,
                                     struct moeinf_error *err) {
    struct moeinf_eamc *c = NULL;
    enum moeinf_status st = moeinf_eamc_init(&p->geom, capacity, &c, err);
    if (st != MOEINF_OK || !c) return with_path(st, path, err);
    char *buf = NULL;
    size_t size = 0;
    FILE *mem = open_memstream(&buf, &size);
    if (!mem) {
        moeinf_eamc_free(c);
        return moeinf_fail(err, MOEINF_ERR_NOMEM, "%s: out of memory", path);
    }
    st = moeinf_eamc_write(c, mem, path, err);
    moeinf_eamc_free(c);
    if (fclose(mem) != 0 && st == MOEINF_OK) {
        st = moeinf_fail(err, MOEINF_ERR_NOMEM, "%s: out of memory", path);
    }
    if (st == MOEINF_OK) {
        FILE *in = fmemopen(buf, size, "rb");
        if (!in) {
            st = moeinf_fail(err, MOEINF_ERR_NOMEM, "%s: out of memory", path);
        } else {
            st = p->ops->load(p->state, in, err);
            fclose(in);
            if (st != MOEINF_OK) st = with_path(st, path, err);
        }
    }
    free(buf);
    return st;
}

enum moeinf_status moeinf_policy_state_load(struct moeinf_policy *p, const char *path, int capacity,
                                            bool *loaded, struct moeinf_error *err) {
    if (!p->ops->load) return no_state(p, path, err);
    if (capacity < 0 || capacity > MOEINF_EAMC_MAX_CAPACITY) {
        return moeinf_fail(err, MOEINF_ERR_ARG, "%s: EAMC capacity %d is not in [1, %d]", path,
                           capacity, MOEINF_EAMC_MAX_CAPACITY);
    }
    struct stat sb;
    if (stat(path, &sb) != 0 && errno == ENOENT) {
        *loaded = false;
        return capacity > 0 ? load_empty(p, path, capacity, err) : MOEINF_OK;
    }
    FILE *f = NULL;
    enum moeinf_status st = moeinf_file_fopen_regular(path, &f, err); /* a FIFO would hang */
    if (st != MOEINF_OK) return st;
    st = p->ops->load(p->state, f, err);
    fclose(f);
    if (st != MOEINF_OK) return with_path(st, path, err);
    *loaded = true;
    return MOEINF_OK;
}

enum moeinf_status moeinf_policy_state_save(const struct moeinf_policy *p, const char *path,
                                            struct moeinf_error *err) {
    if (!p->ops->save) return no_state(p, path, err);
    struct moeinf_atomic_file af;
    enum moeinf_status st = moeinf_atomic_open(path, &af, err);
    if (st != MOEINF_OK) return st;
    st = p->ops->save(p->state, af.fp, err);
    if (st != MOEINF_OK) {
        moeinf_atomic_abort(&af);
        return with_path(st, path, err);
    }
    return moeinf_atomic_commit(&af, err);
}
