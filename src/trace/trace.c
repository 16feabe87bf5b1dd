/*
 * trace.c - streaming reader of moe-trace v1 (format in trace.h).
 *
 * Lines come from a block buffer scanned with memchr: the buffer holds at least one whole line
 * of the longest allowed length, so memory is bounded by the geometry. When the header has
 * "# req" lines, a second FILE walks them in step with the token lines, so that each
 * request's counts are checked without keeping the list in memory.
 */
#include "trace/trace.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/file.h"
#include "base/status.h"

#define BLOCK_BYTES ((size_t)64 * 1024)

static const char *const defect_names[] = {
    [MOEINF_TRACE_OK] = "ok",
    [MOEINF_TRACE_BAD_MAGIC] = "not a moe-trace v1 file",
    [MOEINF_TRACE_BAD_HEADER] = "malformed header line",
    [MOEINF_TRACE_DUPLICATE_KEY] = "duplicate header key",
    [MOEINF_TRACE_MISSING_KEY] = "missing header key",
    [MOEINF_TRACE_BAD_GEOMETRY] = "bad geometry",
    [MOEINF_TRACE_BAD_REQ_LINE] = "malformed req line",
    [MOEINF_TRACE_LATE_HEADER] = "header line after token lines",
    [MOEINF_TRACE_OVERLONG_LINE] = "overlong line",
    [MOEINF_TRACE_BAD_FIELDS] = "bad fields",
    [MOEINF_TRACE_BAD_REQUEST_ID] = "bad request id",
    [MOEINF_TRACE_REQUEST_ORDER] = "requests out of order",
    [MOEINF_TRACE_BAD_PHASE] = "bad phase",
    [MOEINF_TRACE_PHASE_ORDER] = "prefill after decode",
    [MOEINF_TRACE_BAD_TOKEN_INDEX] = "bad token index",
    [MOEINF_TRACE_BAD_EXPERTS] = "bad expert list",
    [MOEINF_TRACE_LAYER_COUNT] = "wrong layer count",
    [MOEINF_TRACE_EXPERT_COUNT] = "wrong expert count",
    [MOEINF_TRACE_EXPERT_RANGE] = "expert id out of range",
    [MOEINF_TRACE_DUPLICATE_EXPERT] = "duplicate expert",
    [MOEINF_TRACE_REQUEST_MISMATCH] = "request disagrees with its req line",
    [MOEINF_TRACE_COUNT_MISMATCH] = "header count mismatch",
};

const char *moeinf_trace_defect_name(enum moeinf_trace_defect d) {
    if ((unsigned)d < sizeof defect_names / sizeof defect_names[0]) return defect_names[d];
    return "unknown defect";
}

/* One parsed "# req" line. */
struct req_line {
    int64_t id;
    int64_t prefill;
    int64_t decode;
    uint64_t line;
    char tag[MOEINF_TRACE_MAX_HEADER_LINE + 1];
};

struct moeinf_trace_reader {
    char *path;
    FILE *fp;
    char *buf; /* block buffer: [start, end) not consumed yet */
    size_t cap, start, end;
    bool eof;
    uint64_t line;        /* number of the last line taken */
    uint64_t offset;      /* file offset of the next line */
    uint64_t line_offset; /* file offset of the last line taken */
    size_t token_limit;   /* longest token line allowed, from the geometry */
    struct moeinf_trace_header hdr;
    unsigned seen_keys; /* bit per known key, for duplicates */

    /* the first token line, read while looking for the end of the header */
    bool pending;
    size_t pending_off, pending_len;
    uint64_t pending_line;

    int32_t *experts; /* (n_layers * top_k) the current line's experts */
    uint32_t *stamp;  /* (n_experts) group serial that last listed each expert */
    uint32_t serial;

    /* the current request */
    bool in_request;
    int64_t req_id;
    int64_t req_index; /* token index of the last line */
    enum moeinf_phase req_phase;
    int64_t req_prefill, req_decode;
    /* totals */
    int64_t n_requests, n_tokens, n_prefill, n_decode;

    /* "# req" cursor */
    FILE *req_fp;
    uint64_t req_first_offset, req_first_line;
    uint64_t req_cursor_line;
    int64_t req_lines_taken;
    struct req_line req; /* the current request's req line */
    char *req_buf;

    bool done;
    enum moeinf_trace_defect defect;
    struct moeinf_error failure; /* sticky: replayed on every later read */
};

enum key_bit {
    KEY_N_LAYERS = 1u << 0,
    KEY_N_EXPERTS = 1u << 1,
    KEY_TOP_K = 1u << 2,
    KEY_N_REQUESTS = 1u << 3,
    KEY_N_TOKENS = 1u << 4,
    KEY_N_PREFILL = 1u << 5,
    KEY_N_DECODE = 1u << 6,
    KEY_MODEL = 1u << 7,
    KEY_MODEL_ID = 1u << 8,
};

/* Remembers a failure so that later reads repeat it. */
static enum moeinf_status sticky(struct moeinf_trace_reader *r, struct moeinf_error *err,
                                 enum moeinf_status st) {
    if (r->failure.status == MOEINF_OK) {
        if (err)
            r->failure = *err;
        else
            moeinf_fail(&r->failure, st, "%s: %s", r->path, moeinf_status_str(st));
    }
    return st;
}

static enum moeinf_status defect(struct moeinf_trace_reader *r, struct moeinf_error *err,
                                 enum moeinf_trace_defect d, uint64_t line, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));

static enum moeinf_status defect(struct moeinf_trace_reader *r, struct moeinf_error *err,
                                 enum moeinf_trace_defect d, uint64_t line, const char *fmt, ...) {
    char detail[200];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(detail, sizeof detail, fmt, ap);
    va_end(ap);
    r->defect = d;
    struct moeinf_error local;
    struct moeinf_error *e = err ? err : &local;
    moeinf_fail(e, MOEINF_ERR_FORMAT, "%s:%llu: %s: %s", r->path, (unsigned long long)line,
                moeinf_trace_defect_name(d), detail);
    r->failure = *e;
    return MOEINF_ERR_FORMAT;
}

static enum moeinf_status io_error(struct moeinf_trace_reader *r, struct moeinf_error *err,
                                   const char *what) {
    struct moeinf_error local;
    struct moeinf_error *e = err ? err : &local;
    char eb[64];
    moeinf_fail(e, MOEINF_ERR_IO, "%s: %s: %s", r->path, what,
                moeinf_strerror(errno, eb, sizeof eb));
    r->failure = *e;
    return MOEINF_ERR_IO;
}

/* ---- lines -------------------------------------------------------------------------------- */

static size_t limit_for(const struct moeinf_trace_reader *r, char first) {
    if (first == '#' || r->token_limit == 0) return MOEINF_TRACE_MAX_HEADER_LINE;
    return r->token_limit;
}

/* Makes room for a line of `limit` bytes plus "\r\n" (keeps [start, end)). */
static enum moeinf_status reserve(struct moeinf_trace_reader *r, size_t limit,
                                  struct moeinf_error *err) {
    size_t want = limit + 2 > BLOCK_BYTES ? limit + 2 : BLOCK_BYTES;
    if (r->cap >= want) return MOEINF_OK;
    char *b = realloc(r->buf, want);
    if (!b) return moeinf_fail(err, MOEINF_ERR_NOMEM, "%s: out of memory", r->path);
    r->buf = b;
    r->cap = want;
    return MOEINF_OK;
}

/* Takes the next line: [*off, *off + *len) in r->buf without its '\n'; *end at end of file. */
static enum moeinf_status next_line(struct moeinf_trace_reader *r, size_t *off, size_t *len,
                                    bool *end, struct moeinf_error *err) {
    *end = false;
    for (;;) {
        size_t avail = r->end - r->start;
        char *s = r->buf + r->start;
        char *nl = avail ? memchr(s, '\n', avail) : NULL;
        size_t limit = avail ? limit_for(r, s[0]) : MOEINF_TRACE_MAX_HEADER_LINE;
        size_t n = nl ? (size_t)(nl - s) : avail;
        if (n > limit) {
            return defect(r, err, MOEINF_TRACE_OVERLONG_LINE, r->line + 1,
                          "longer than %zu bytes, the limit for a %s line", limit,
                          s[0] == '#' ? "header" : "token");
        }
        if (nl || (r->eof && avail)) {
            *off = r->start;
            *len = n;
            r->line_offset = r->offset;
            r->start += nl ? n + 1 : n;
            r->offset += nl ? n + 1 : n;
            r->line++;
            return MOEINF_OK;
        }
        if (r->eof) {
            *end = true;
            return MOEINF_OK;
        }
        if (r->start > 0) {
            memmove(r->buf, s, avail);
            r->start = 0;
            r->end = avail;
        }
        size_t got = fread(r->buf + r->end, 1, r->cap - r->end, r->fp);
        if (got == 0) {
            if (ferror(r->fp)) return io_error(r, err, "read");
            r->eof = true;
        }
        r->end += got;
    }
}

/* Strips a final '\r' and rejects NUL bytes (which would cut the line short for C strings). */
static enum moeinf_status clean_line(struct moeinf_trace_reader *r, char *s, size_t *len,
                                     uint64_t line, struct moeinf_error *err) {
    if (*len && s[*len - 1] == '\r') (*len)--;
    if (memchr(s, '\0', *len)) {
        return defect(r, err, MOEINF_TRACE_BAD_FIELDS, line, "NUL byte in line");
    }
    s[*len] = '\0'; /* the '\n' (or '\r', or free space past a last line) becomes the end */
    return MOEINF_OK;
}

/* A non-negative decimal of 1..18 digits occupying all of [s, s + n). */
static bool parse_count(const char *s, size_t n, int64_t *out) {
    if (n == 0 || n > 18) return false;
    int64_t v = 0;
    for (size_t i = 0; i < n; i++) {
        if (s[i] < '0' || s[i] > '9') return false;
        v = v * 10 + (s[i] - '0');
    }
    *out = v;
    return true;
}

/* ---- header ------------------------------------------------------------------------------- */

/* "# req <id> <tag> prefill=<n> decode=<n>" */
static bool parse_req(const char *s, struct req_line *out) {
    if (strncmp(s, "# req ", 6) != 0) return false;
    const char *p = s + 6;
    const char *sp = strchr(p, ' ');
    if (!sp || !parse_count(p, (size_t)(sp - p), &out->id)) return false;
    p = sp + 1;
    sp = strchr(p, ' ');
    if (!sp || sp == p || (size_t)(sp - p) >= sizeof out->tag) return false;
    memcpy(out->tag, p, (size_t)(sp - p));
    out->tag[sp - p] = '\0';
    p = sp + 1;
    if (strncmp(p, "prefill=", 8) != 0) return false;
    p += 8;
    sp = strchr(p, ' ');
    if (!sp || !parse_count(p, (size_t)(sp - p), &out->prefill)) return false;
    p = sp + 1;
    if (strncmp(p, "decode=", 7) != 0) return false;
    p += 7;
    return parse_count(p, strlen(p), &out->decode);
}

static enum moeinf_status geometry_key(struct moeinf_trace_reader *r, const char *key,
                                       const char *value, int *out, int64_t hi, uint64_t line,
                                       struct moeinf_error *err) {
    int64_t v = 0;
    if (!parse_count(value, strlen(value), &v) || v < 1 || v > hi) {
        return defect(r, err, MOEINF_TRACE_BAD_GEOMETRY, line,
                      "%s '%.40s' is not an integer in [1, %lld]", key, value, (long long)hi);
    }
    *out = (int)v;
    struct moeinf_trace_header *h = &r->hdr;
    if (h->n_layers && h->n_experts &&
        (uint64_t)h->n_layers * (uint64_t)h->n_experts > MOEINF_MAX_EXPERT_IDS) {
        return defect(r, err, MOEINF_TRACE_BAD_GEOMETRY, line,
                      "n_layers %d x n_experts %d exceeds %u experts", h->n_layers, h->n_experts,
                      MOEINF_MAX_EXPERT_IDS);
    }
    if (h->top_k && h->n_experts && h->top_k > h->n_experts) {
        return defect(r, err, MOEINF_TRACE_BAD_GEOMETRY, line, "top_k %d > n_experts %d", h->top_k,
                      h->n_experts);
    }
    return MOEINF_OK;
}

static enum moeinf_status header_line(struct moeinf_trace_reader *r, char *s, uint64_t line,
                                      struct moeinf_error *err) {
    if (!strncmp(s, "# req", 5) && (s[5] == ' ' || s[5] == '\0')) {
        struct req_line q;
        if (!parse_req(s, &q)) {
            return defect(r, err, MOEINF_TRACE_BAD_REQ_LINE, line,
                          "expected '# req <id> <tag> prefill=<n> decode=<n>'");
        }
        if (r->hdr.n_req_lines == 0) {
            r->req_first_offset = r->line_offset;
            r->req_first_line = line;
        } else if (q.id <= r->req.id) {
            return defect(r, err, MOEINF_TRACE_REQUEST_ORDER, line,
                          "'# req %lld' after '# req %lld': ids must increase", (long long)q.id,
                          (long long)r->req.id);
        }
        r->req.id = q.id; /* only the last id is kept: memory stays bounded */
        r->hdr.n_req_lines++;
        return MOEINF_OK;
    }
    /* "# key: value" */
    char *key = s + 2;
    size_t klen = 0;
    while ((key[klen] >= 'a' && key[klen] <= 'z') || (key[klen] >= '0' && key[klen] <= '9') ||
           key[klen] == '_') {
        klen++;
    }
    if (s[1] != ' ' || klen == 0 || key[klen] != ':' || (key[klen + 1] && key[klen + 1] != ' ')) {
        return defect(r, err, MOEINF_TRACE_BAD_HEADER, line,
                      "expected '# key: value' or '# req ...'");
    }
    key[klen] = '\0';
    const char *value = key[klen + 1] ? key + klen + 2 : "";

    static const struct {
        const char *name;
        unsigned bit;
    } known[] = {
        {"n_layers", KEY_N_LAYERS},
        {"n_experts", KEY_N_EXPERTS},
        {"top_k", KEY_TOP_K},
        {"n_requests", KEY_N_REQUESTS},
        {"n_tokens", KEY_N_TOKENS},
        {"n_prefill_tokens", KEY_N_PREFILL},
        {"n_decode_tokens", KEY_N_DECODE},
        {"model", KEY_MODEL},
        {"model_id", KEY_MODEL_ID},
    };

    unsigned bit = 0;
    for (size_t i = 0; i < sizeof known / sizeof known[0]; i++) {
        if (!strcmp(key, known[i].name)) bit = known[i].bit;
    }
    if (!bit) return MOEINF_OK; /* provenance */
    if (r->seen_keys & bit) {
        return defect(r, err, MOEINF_TRACE_DUPLICATE_KEY, line, "'%s' given twice", key);
    }
    r->seen_keys |= bit;
    struct moeinf_trace_header *h = &r->hdr;
    int64_t *total = NULL;
    switch (bit) {
    case KEY_N_LAYERS:
        return geometry_key(r, key, value, &h->n_layers, MOEINF_MAX_EXPERT_IDS, line, err);
    case KEY_N_EXPERTS:
        return geometry_key(r, key, value, &h->n_experts, MOEINF_MAX_EXPERT_IDS, line, err);
    case KEY_TOP_K:
        return geometry_key(r, key, value, &h->top_k, MOEINF_MAX_EXPERT_IDS, line, err);
    case KEY_MODEL:
        snprintf(h->model, sizeof h->model, "%s", value);
        return MOEINF_OK;
    case KEY_MODEL_ID: {
        size_t n = strspn(value, "0123456789abcdefABCDEF");
        if (n == 0 || n > 16 || value[n] != '\0') {
            return defect(r, err, MOEINF_TRACE_BAD_HEADER, line,
                          "model_id '%.40s' is not 1 to 16 hex digits", value);
        }
        h->model_id = strtoull(value, NULL, 16);
        h->has_model_id = true;
        return MOEINF_OK;
    }
    case KEY_N_REQUESTS:
        total = &h->n_requests;
        break;
    case KEY_N_TOKENS:
        total = &h->n_tokens;
        break;
    case KEY_N_PREFILL:
        total = &h->n_prefill_tokens;
        break;
    default:
        total = &h->n_decode_tokens;
        break;
    }
    if (!parse_count(value, strlen(value), total)) {
        return defect(r, err, MOEINF_TRACE_BAD_HEADER, line, "%s '%.40s' is not a count", key,
                      value);
    }
    return MOEINF_OK;
}

static int n_digits(int v) {
    int d = 1;
    while (v >= 10) {
        v /= 10;
        d++;
    }
    return d;
}

/* After the header: geometry present, per-geometry buffers, "# req" cursor. */
static enum moeinf_status header_done(struct moeinf_trace_reader *r, uint64_t line,
                                      struct moeinf_error *err) {
    static const char *const names[] = {"n_layers", "n_experts", "top_k"};
    for (int i = 0; i < 3; i++) {
        if (!(r->seen_keys & (1u << i))) {
            return defect(r, err, MOEINF_TRACE_MISSING_KEY, line,
                          "no '# %s:' line before the "
                          "first token line",
                          names[i]);
        }
    }
    struct moeinf_trace_header *h = &r->hdr;
    r->token_limit =
        256 + (size_t)h->n_layers * (size_t)h->top_k * (size_t)(n_digits(h->n_experts - 1) + 1);
    /* The first token line was read under the header's limit. */
    if (r->pending && r->pending_len > r->token_limit) {
        return defect(r, err, MOEINF_TRACE_OVERLONG_LINE, r->pending_line,
                      "longer than %zu bytes, the limit for a token line", r->token_limit);
    }
    enum moeinf_status st = reserve(r, r->token_limit, err);
    if (st != MOEINF_OK) return st;
    r->experts = malloc((size_t)h->n_layers * (size_t)h->top_k * sizeof *r->experts);
    r->stamp = calloc((size_t)h->n_experts, sizeof *r->stamp);
    if (!r->experts || !r->stamp)
        return moeinf_fail(err, MOEINF_ERR_NOMEM, "%s: out of memory", r->path);
    if (h->n_req_lines > 0) {
        r->req_buf = malloc(MOEINF_TRACE_MAX_HEADER_LINE + 2);
        if (!r->req_buf) return moeinf_fail(err, MOEINF_ERR_NOMEM, "%s: out of memory", r->path);
        enum moeinf_status ost = moeinf_file_fopen_regular(r->path, &r->req_fp, err);
        if (ost != MOEINF_OK) return ost;
        if (fseeko(r->req_fp, (off_t)r->req_first_offset, SEEK_SET) != 0) {
            return io_error(r, err, "cannot reopen for its req lines");
        }
        r->req_cursor_line = r->req_first_line - 1;
    }
    return MOEINF_OK;
}

void moeinf_trace_close(struct moeinf_trace_reader *r) {
    if (!r) return;
    if (r->fp) fclose(r->fp);
    if (r->req_fp) fclose(r->req_fp);
    free(r->path);
    free(r->buf);
    free(r->experts);
    free(r->stamp);
    free(r->req_buf);
    free(r);
}

enum moeinf_status moeinf_trace_open(const char *path, struct moeinf_trace_reader **out,
                                     struct moeinf_error *err) {
    struct moeinf_trace_reader *r = calloc(1, sizeof *r);
    if (!r || !(r->path = strdup(path))) {
        free(r);
        return moeinf_fail(err, MOEINF_ERR_NOMEM, "%s: out of memory", path);
    }
    enum moeinf_status st = MOEINF_OK;
    r->hdr.n_requests = r->hdr.n_tokens = r->hdr.n_prefill_tokens = r->hdr.n_decode_tokens = -1;
    /* A regular file only: the "# req" lines are read through a second handle, and offline
     * policies replay the trace twice; a pipe can be read once (and a FIFO would hang). */
    st = moeinf_file_fopen_regular(path, &r->fp, err);
    if (st != MOEINF_OK) goto fail;
    st = reserve(r, MOEINF_TRACE_MAX_HEADER_LINE, err);
    if (st != MOEINF_OK) goto fail;

    size_t off = 0;
    size_t len = 0;
    bool end = false;
    st = next_line(r, &off, &len, &end, err);
    if (st != MOEINF_OK) goto fail;
    if (end) {
        st = defect(r, err, MOEINF_TRACE_BAD_MAGIC, 1, "empty file");
        goto fail;
    }
    if ((st = clean_line(r, r->buf + off, &len, r->line, err)) != MOEINF_OK) goto fail;
    if (strcmp(r->buf + off, "# moe-trace v1") != 0) {
        st = defect(r, err, MOEINF_TRACE_BAD_MAGIC, 1,
                    "first line is '%.60s', not '# moe-trace v1'", r->buf + off);
        goto fail;
    }
    for (;;) {
        st = next_line(r, &off, &len, &end, err);
        if (st != MOEINF_OK) goto fail;
        if (end) break;
        char *s = r->buf + off;
        if ((st = clean_line(r, s, &len, r->line, err)) != MOEINF_OK) goto fail;
        if (s[0] != '#') {
            r->pending = true;
            r->pending_off = off;
            r->pending_len = len;
            r->pending_line = r->line;
            break;
        }
        if ((st = header_line(r, s, r->line, err)) != MOEINF_OK) goto fail;
    }
    st = header_done(r, r->pending ? r->pending_line : r->line + 1, err);
    if (st != MOEINF_OK) goto fail;
    r->req.id = -1;
    *out = r;
    return MOEINF_OK;
fail:
    moeinf_trace_close(r);
    return st;
}

const struct moeinf_trace_header *moeinf_trace_header(const struct moeinf_trace_reader *r) {
    return &r->hdr;
}

enum moeinf_trace_defect moeinf_trace_defect(const struct moeinf_trace_reader *r) {
    return r->defect;
}

/* ---- token lines -------------------------------------------------------------------------- */

/* Reads the next "# req" line of the header into r->req; false when there is none. */
static enum moeinf_status next_req(struct moeinf_trace_reader *r, bool *found,
                                   struct moeinf_error *err) {
    *found = false;
    if (!r->req_fp || r->req_lines_taken >= r->hdr.n_req_lines) return MOEINF_OK;
    while (fgets(r->req_buf, MOEINF_TRACE_MAX_HEADER_LINE + 2, r->req_fp)) {
        r->req_cursor_line++;
        r->req_buf[strcspn(r->req_buf, "\r\n")] = '\0';
        if (strncmp(r->req_buf, "# req ", 6) != 0) continue; /* a key line among them */
        if (!parse_req(r->req_buf, &r->req)) break;          /* the file changed under us */
        r->req.line = r->req_cursor_line;
        r->req_lines_taken++;
        *found = true;
        return MOEINF_OK;
    }
    if (ferror(r->req_fp)) return io_error(r, err, "read of req lines");
    return defect(r, err, MOEINF_TRACE_BAD_REQ_LINE, r->req_cursor_line,
                  "req line changed while reading");
}

static enum moeinf_status finish_request(struct moeinf_trace_reader *r, uint64_t line,
                                         struct moeinf_error *err) {
    if (!r->in_request || !r->req_fp) return MOEINF_OK;
    if (r->req_prefill != r->req.prefill || r->req_decode != r->req.decode) {
        return defect(r, err, MOEINF_TRACE_REQUEST_MISMATCH, line,
                      "request %lld has %lld prefill and %lld decode tokens; its req line "
                      "(line %llu) says prefill=%lld decode=%lld",
                      (long long)r->req_id, (long long)r->req_prefill, (long long)r->req_decode,
                      (unsigned long long)r->req.line, (long long)r->req.prefill,
                      (long long)r->req.decode);
    }
    return MOEINF_OK;
}

static enum moeinf_status parse_experts(struct moeinf_trace_reader *r, const char *p,
                                        const char *end, uint64_t line, struct moeinf_error *err) {
    const struct moeinf_trace_header *h = &r->hdr;
    int layer = 0;
    int j = 0;
    if (++r->serial == 0) {
        memset(r->stamp, 0, (size_t)h->n_experts * sizeof *r->stamp);
        r->serial = 1;
    }
    for (;;) {
        if (p == end || *p < '0' || *p > '9') {
            return defect(r, err, MOEINF_TRACE_BAD_EXPERTS, line,
                          "expected an expert id in layer %d, found '%c'", layer,
                          p == end ? ' ' : *p);
        }
        const char *digits = p;
        int64_t v = 0;
        while (p < end && *p >= '0' && *p <= '9') {
            if (v < h->n_experts) v = v * 10 + (*p - '0'); /* stops growing once too big */
            p++;
        }
        if (v >= h->n_experts) {
            return defect(r, err, MOEINF_TRACE_EXPERT_RANGE, line,
                          "expert %.*s in layer %d, n_experts is %d",
                          (int)(p - digits > 20 ? 20 : p - digits), digits, layer, h->n_experts);
        }
        if (j >= h->top_k) {
            return defect(r, err, MOEINF_TRACE_EXPERT_COUNT, line,
                          "layer %d lists more than top_k %d experts", layer, h->top_k);
        }
        if (r->stamp[v] == r->serial) {
            return defect(r, err, MOEINF_TRACE_DUPLICATE_EXPERT, line,
                          "expert %lld twice in layer %d", (long long)v, layer);
        }
        r->stamp[v] = r->serial;
        r->experts[(size_t)layer * (size_t)h->top_k + (size_t)j++] = (int32_t)v;
        if (p < end && *p == ',') {
            p++;
            continue;
        }
        if (p < end && *p != '|') {
            return defect(r, err, MOEINF_TRACE_BAD_EXPERTS, line,
                          "unexpected character '%c' in layer %d", *p, layer);
        }
        if (j != h->top_k) {
            return defect(r, err, MOEINF_TRACE_EXPERT_COUNT, line,
                          "layer %d lists %d experts, top_k is %d", layer, j, h->top_k);
        }
        if (p == end) break;
        p++; /* '|' */
        if (++layer >= h->n_layers) {
            return defect(r, err, MOEINF_TRACE_LAYER_COUNT, line,
                          "more than n_layers %d layer groups", h->n_layers);
        }
        j = 0;
        if (++r->serial == 0) {
            memset(r->stamp, 0, (size_t)h->n_experts * sizeof *r->stamp);
            r->serial = 1;
        }
    }
    if (layer + 1 != h->n_layers) {
        return defect(r, err, MOEINF_TRACE_LAYER_COUNT, line, "%d layer groups, n_layers is %d",
                      layer + 1, h->n_layers);
    }
    return MOEINF_OK;
}

static enum moeinf_status token_line(struct moeinf_trace_reader *r, char *s, size_t len,
                                     uint64_t line, struct moeinf_trace_token *tok,
                                     struct moeinf_error *err) {
    enum moeinf_status st = clean_line(r, s, &len, line, err);
    if (st != MOEINF_OK) return st;
    if (s[0] == '#') {
        return defect(r, err, MOEINF_TRACE_LATE_HEADER, line,
                      "all '#' lines must come before the first token line");
    }
    /* Four fields: the experts field has no spaces, so the first three spaces split them. */
    char *f[4];
    size_t n[4];
    char *p = s;
    char *end = s + len;
    for (int i = 0; i < 4; i++) {
        char *sp = i < 3 ? memchr(p, ' ', (size_t)(end - p)) : NULL;
        if (i < 3 && !sp) {
            return defect(r, err, MOEINF_TRACE_BAD_FIELDS, line,
                          "%d fields, expected 4 separated by single spaces", i + 1);
        }
        f[i] = p;
        n[i] = (size_t)((i < 3 ? sp : end) - p);
        if (n[i] == 0) {
            return defect(r, err, MOEINF_TRACE_BAD_FIELDS, line,
                          "empty field %d: fields are separated by single spaces", i + 1);
        }
        p = i < 3 ? sp + 1 : end;
    }
    if (memchr(f[3], ' ', n[3])) {
        return defect(r, err, MOEINF_TRACE_BAD_FIELDS, line,
                      "more than 4 fields (no spaces inside the experts field)");
    }
    int64_t id = 0;
    int64_t index = 0;
    if (!parse_count(f[0], n[0], &id)) {
        return defect(r, err, MOEINF_TRACE_BAD_REQUEST_ID, line,
                      "'%.*s' is not a non-negative integer", (int)(n[0] > 30 ? 30 : n[0]), f[0]);
    }
    if (n[1] != 1 || (f[1][0] != 'P' && f[1][0] != 'D')) {
        return defect(r, err, MOEINF_TRACE_BAD_PHASE, line, "'%.*s', expected P or D",
                      (int)(n[1] > 30 ? 30 : n[1]), f[1]);
    }
    enum moeinf_phase phase = f[1][0] == 'P' ? MOEINF_PHASE_PREFILL : MOEINF_PHASE_DECODE;
    if (!parse_count(f[2], n[2], &index)) {
        return defect(r, err, MOEINF_TRACE_BAD_TOKEN_INDEX, line,
                      "'%.*s' is not a non-negative integer", (int)(n[2] > 30 ? 30 : n[2]), f[2]);
    }
    bool begins = !r->in_request || id != r->req_id;
    if (begins) {
        if (r->in_request && id < r->req_id) {
            return defect(r, err, MOEINF_TRACE_REQUEST_ORDER, line,
                          "request %lld after request %lld: ids must increase and each request's "
                          "lines be contiguous",
                          (long long)id, (long long)r->req_id);
        }
        if (index != 0) {
            return defect(r, err, MOEINF_TRACE_BAD_TOKEN_INDEX, line,
                          "request %lld starts at token %lld, not 0", (long long)id,
                          (long long)index);
        }
    } else {
        if (index != r->req_index + 1) {
            return defect(r, err, MOEINF_TRACE_BAD_TOKEN_INDEX, line,
                          "token %lld after token %lld of request %lld", (long long)index,
                          (long long)r->req_index, (long long)id);
        }
        if (phase == MOEINF_PHASE_PREFILL && r->req_phase == MOEINF_PHASE_DECODE) {
            return defect(r, err, MOEINF_TRACE_PHASE_ORDER, line,
                          "P token %lld after a D token in request %lld", (long long)index,
                          (long long)id);
        }
    }
    if ((st = parse_experts(r, f[3], f[3] + n[3], line, err)) != MOEINF_OK) return st;
    if (begins) {
        if ((st = finish_request(r, line, err)) != MOEINF_OK) return st;
        if (r->req_fp) {
            bool found = false;
            if ((st = next_req(r, &found, err)) != MOEINF_OK) return st;
            if (!found) {
                return defect(r, err, MOEINF_TRACE_REQUEST_MISMATCH, line,
                              "request %lld has no req line (the header has %lld)", (long long)id,
                              (long long)r->hdr.n_req_lines);
            }
            if (r->req.id != id) {
                return defect(r, err, MOEINF_TRACE_REQUEST_MISMATCH, line,
                              "request %lld, but the next req line (line %llu) is for request "
                              "%lld",
                              (long long)id, (unsigned long long)r->req.line, (long long)r->req.id);
            }
        }
        r->in_request = true;
        r->req_id = id;
        r->req_prefill = r->req_decode = 0;
        r->n_requests++;
    }
    r->req_index = index;
    r->req_phase = phase;
    if (phase == MOEINF_PHASE_PREFILL) {
        r->req_prefill++;
        r->n_prefill++;
    } else {
        r->req_decode++;
        r->n_decode++;
    }
    r->n_tokens++;
    tok->request_id = id;
    tok->token_index = index;
    tok->phase = phase;
    tok->request_begins = begins;
    tok->experts = r->experts;
    tok->request_tag = r->req_fp ? r->req.tag : NULL;
    tok->line = line;
    return MOEINF_OK;
}

static enum moeinf_status check_total(struct moeinf_trace_reader *r, const char *key,
                                      int64_t header, int64_t seen, struct moeinf_error *err) {
    if (header >= 0 && header != seen) {
        return defect(r, err, MOEINF_TRACE_COUNT_MISMATCH, r->line,
                      "header says %s: %lld, the file has %lld", key, (long long)header,
                      (long long)seen);
    }
    return MOEINF_OK;
}

static enum moeinf_status at_end(struct moeinf_trace_reader *r, struct moeinf_error *err) {
    enum moeinf_status st = finish_request(r, r->line, err);
    if (st != MOEINF_OK) return st;
    if (r->req_fp && r->n_requests != r->hdr.n_req_lines) {
        return defect(r, err, MOEINF_TRACE_REQUEST_MISMATCH, r->line,
                      "%lld req lines in the header, %lld requests in the file",
                      (long long)r->hdr.n_req_lines, (long long)r->n_requests);
    }
    const struct moeinf_trace_header *h = &r->hdr;
    if ((st = check_total(r, "n_requests", h->n_requests, r->n_requests, err)) ||
        (st = check_total(r, "n_tokens", h->n_tokens, r->n_tokens, err)) ||
        (st = check_total(r, "n_prefill_tokens", h->n_prefill_tokens, r->n_prefill, err)) ||
        (st = check_total(r, "n_decode_tokens", h->n_decode_tokens, r->n_decode, err))) {
        return st;
    }
    r->done = true;
    return MOEINF_OK;
}

enum moeinf_status moeinf_trace_read(struct moeinf_trace_reader *r, struct moeinf_trace_token *tok,
                                     bool *end, struct moeinf_error *err) {
    *end = false;
    if (r->failure.status != MOEINF_OK) {
        if (err) *err = r->failure;
        return r->failure.status;
    }
    if (r->done) {
        *end = true;
        return MOEINF_OK;
    }
    size_t off = 0;
    size_t len = 0;
    uint64_t line = 0;
    enum moeinf_status st = MOEINF_OK;
    if (r->pending) {
        r->pending = false;
        off = r->pending_off;
        len = r->pending_len;
        line = r->pending_line;
    } else {
        bool eof = false;
        st = next_line(r, &off, &len, &eof, err);
        if (st != MOEINF_OK) return sticky(r, err, st);
        if (eof) {
            st = at_end(r, err);
            if (st != MOEINF_OK) return sticky(r, err, st);
            *end = true;
            return MOEINF_OK;
        }
        line = r->line;
    }
    st = token_line(r, r->buf + off, len, line, tok, err);
    if (st != MOEINF_OK) return sticky(r, err, st);
    return MOEINF_OK;
}
