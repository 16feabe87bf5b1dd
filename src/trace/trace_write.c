/*
 * trace_write.c - writer of moe-trace v1 (format in trace.h). The header holds totals and one
 * "# req" line per request, which are known only at the end, so token lines and req lines go
 * to two anonymous temporary files and close assembles the trace through an atomic rename:
 * memory stays bounded whatever the number of tokens.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "base/file.h"
#include "base/status.h"
#include "trace/trace.h"

#define EXTRA_BYTES_MAX ((size_t)64 * 1024)

struct moeinf_trace_writer {
    char *path;
    struct moeinf_trace_meta meta;
    char *model;
    char *extra; /* "# key: value\n" lines */
    size_t extra_len;
    FILE *body;      /* token lines */
    FILE *reqs;      /* "# req" lines */
    uint32_t *stamp; /* (n_experts) for duplicate checks */
    uint32_t serial;
    bool in_request;
    bool any_request;
    int64_t req_id;
    char req_tag[MOEINF_TRACE_MAX_HEADER_LINE];
    int64_t req_prefill, req_decode;
    int64_t n_requests, n_prefill, n_decode;
};

static const char *const reserved_keys[] = {
    "n_layers", "n_experts",        "top_k",           "model",   "n_requests",
    "n_tokens", "n_prefill_tokens", "n_decode_tokens", "columns", "req",
};

void moeinf_trace_writer_abort(struct moeinf_trace_writer *w) {
    if (!w) return;
    if (w->body) fclose(w->body);
    if (w->reqs) fclose(w->reqs);
    free(w->path);
    free(w->model);
    free(w->extra);
    free(w->stamp);
    free(w);
}

static bool one_line(const char *s) {
    return !strpbrk(s, "\r\n");
}

enum moeinf_status moeinf_trace_writer_open(const char *path, const struct moeinf_trace_meta *meta,
                                            struct moeinf_trace_writer **out,
                                            struct moeinf_error *err) {
    struct moeinf_policy_geometry g = {
        meta->n_layers, meta->n_experts, meta->top_k, meta->top_k, {0}};
    enum moeinf_status st = moeinf_policy_geometry_check(&g, path, err);
    if (st != MOEINF_OK) return st;
    if (meta->model && !one_line(meta->model)) {
        return moeinf_fail(err, MOEINF_ERR_ARG, "%s: the model name must be one line", path);
    }
    /* The file itself is written at close, after all the work: a path that cannot be
     * written is refused now. */
    if ((st = moeinf_file_check_output(path, err)) != MOEINF_OK) return st;
    struct moeinf_trace_writer *w = calloc(1, sizeof *w);
    if (!w) return moeinf_fail(err, MOEINF_ERR_NOMEM, "%s: out of memory", path);
    w->meta = *meta;
    w->path = strdup(path);
    w->model = meta->model ? strdup(meta->model) : NULL;
    w->stamp = calloc((size_t)meta->n_experts, sizeof *w->stamp);
    if (!w->path || (meta->model && !w->model) || !w->stamp) {
        st = moeinf_fail(err, MOEINF_ERR_NOMEM, "%s: out of memory", path);
        goto fail;
    }
    w->meta.model = w->model;
    w->body = tmpfile();
    w->reqs = w->body ? tmpfile() : NULL;
    if (!w->reqs) {
        char eb[64];
        st = moeinf_fail(err, MOEINF_ERR_IO, "%s: cannot create a temporary file: %s", path,
                         moeinf_strerror(errno, eb, sizeof eb));
        goto fail;
    }
    *out = w;
    return MOEINF_OK;
fail:
    moeinf_trace_writer_abort(w);
    return st;
}

enum moeinf_status moeinf_trace_writer_header(struct moeinf_trace_writer *w, const char *key,
                                              const char *value, struct moeinf_error *err) {
    size_t klen = strspn(key, "abcdefghijklmnopqrstuvwxyz0123456789_");
    if (klen == 0 || key[klen] != '\0') {
        return moeinf_fail(err, MOEINF_ERR_ARG, "%s: header key '%s' is not [a-z0-9_]+", w->path,
                           key);
    }
    for (size_t i = 0; i < sizeof reserved_keys / sizeof reserved_keys[0]; i++) {
        if (!strcmp(key, reserved_keys[i])) {
            return moeinf_fail(err, MOEINF_ERR_ARG, "%s: header key '%s' is written by the writer",
                               w->path, key);
        }
    }
    if (!one_line(value)) {
        return moeinf_fail(err, MOEINF_ERR_ARG, "%s: header '%s' must be one line", w->path, key);
    }
    size_t n = klen + strlen(value) + 6;
    if (n > MOEINF_TRACE_MAX_HEADER_LINE || w->extra_len + n > EXTRA_BYTES_MAX) {
        return moeinf_fail(err, MOEINF_ERR_ARG, "%s: header '%s' too long", w->path, key);
    }
    char *e = realloc(w->extra, w->extra_len + n + 1);
    if (!e) return moeinf_fail(err, MOEINF_ERR_NOMEM, "%s: out of memory", w->path);
    w->extra = e;
    w->extra_len += (size_t)snprintf(e + w->extra_len, n + 1, "# %s: %s\n", key, value);
    return MOEINF_OK;
}

/* Writes the current request's req line; a request without tokens leaves no trace, since
 * token lines are what a reader sees of a request. */
static enum moeinf_status end_request(struct moeinf_trace_writer *w, struct moeinf_error *err) {
    if (!w->in_request) return MOEINF_OK;
    w->in_request = false;
    if (w->req_prefill + w->req_decode == 0) return MOEINF_OK;
    w->n_requests++;
    if (fprintf(w->reqs, "# req %lld %s prefill=%lld decode=%lld\n", (long long)w->req_id,
                w->req_tag, (long long)w->req_prefill, (long long)w->req_decode) < 0) {
        char eb[64];
        return moeinf_fail(err, MOEINF_ERR_IO, "%s: temporary file: %s", w->path,
                           moeinf_strerror(errno, eb, sizeof eb));
    }
    return MOEINF_OK;
}

enum moeinf_status moeinf_trace_writer_request(struct moeinf_trace_writer *w, int64_t request_id,
                                               const char *tag, struct moeinf_error *err) {
    if (request_id < 0 || (w->any_request && request_id <= w->req_id)) {
        return moeinf_fail(err, MOEINF_ERR_ARG,
                           "%s: request id %lld must be >= 0 and above the previous one", w->path,
                           (long long)request_id);
    }
    if (!tag) tag = "-";
    if (!*tag || strpbrk(tag, " \t\r\n") || strlen(tag) >= sizeof w->req_tag - 64) {
        return moeinf_fail(err, MOEINF_ERR_ARG, "%s: request tag '%.40s' must be one word", w->path,
                           tag);
    }
    enum moeinf_status st = end_request(w, err);
    if (st != MOEINF_OK) return st;
    w->in_request = true;
    w->req_id = request_id;
    snprintf(w->req_tag, sizeof w->req_tag, "%s", tag);
    w->req_prefill = w->req_decode = 0;
    w->any_request = true;
    return MOEINF_OK;
}

enum moeinf_status moeinf_trace_writer_token(struct moeinf_trace_writer *w, enum moeinf_phase phase,
                                             const int32_t *experts, struct moeinf_error *err) {
    if (!w->in_request) {
        return moeinf_fail(err, MOEINF_ERR_ARG, "%s: token before any request", w->path);
    }
    if (phase == MOEINF_PHASE_PREFILL && w->req_decode > 0) {
        return moeinf_fail(err, MOEINF_ERR_ARG, "%s: prefill token after decode in request %lld",
                           w->path, (long long)w->req_id);
    }
    const int n_layers = w->meta.n_layers;
    const int k = w->meta.top_k;
    for (int l = 0; l < n_layers; l++) {
        if (++w->serial == 0) {
            memset(w->stamp, 0, (size_t)w->meta.n_experts * sizeof *w->stamp);
            w->serial = 1;
        }
        for (int j = 0; j < k; j++) {
            int32_t e = experts[l * k + j];
            if (e < 0 || e >= w->meta.n_experts || w->stamp[e] == w->serial) {
                return moeinf_fail(err, MOEINF_ERR_ARG,
                                   "%s: expert %d of layer %d is out of range or repeated", w->path,
                                   (int)e, l);
            }
            w->stamp[e] = w->serial;
        }
    }
    FILE *f = w->body;
    int64_t index = w->req_prefill + w->req_decode;
    fprintf(f, "%lld %c %lld ", (long long)w->req_id, phase == MOEINF_PHASE_PREFILL ? 'P' : 'D',
            (long long)index);
    for (int l = 0; l < n_layers; l++) {
        for (int j = 0; j < k; j++) {
            fprintf(f, j ? ",%d" : "%d", (int)experts[l * k + j]);
        }
        fputc(l + 1 < n_layers ? '|' : '\n', f);
    }
    if (ferror(f)) {
        char eb[64];
        return moeinf_fail(err, MOEINF_ERR_IO, "%s: temporary file: %s", w->path,
                           moeinf_strerror(errno, eb, sizeof eb));
    }
    if (phase == MOEINF_PHASE_PREFILL) {
        w->req_prefill++;
        w->n_prefill++;
    } else {
        w->req_decode++;
        w->n_decode++;
    }
    return MOEINF_OK;
}

/* Appends the whole of `from` (rewound) to `to`. */
static bool copy_all(FILE *from, FILE *to) {
    char block[1 << 14];
    rewind(from);
    size_t n;
    while ((n = fread(block, 1, sizeof block, from)) > 0) {
        if (fwrite(block, 1, n, to) != n) return false;
    }
    return !ferror(from);
}

enum moeinf_status moeinf_trace_writer_close(struct moeinf_trace_writer *w,
                                             struct moeinf_error *err) {
    enum moeinf_status st = end_request(w, err);
    if (st != MOEINF_OK) goto done;
    struct moeinf_atomic_file out;
    st = moeinf_atomic_open(w->path, &out, err);
    if (st != MOEINF_OK) goto done;
    FILE *f = out.fp;
    fprintf(f, "# moe-trace v1\n");
    if (w->model) fprintf(f, "# model: %s\n", w->model);
    fprintf(f, "# n_layers: %d\n# n_experts: %d\n# top_k: %d\n", w->meta.n_layers,
            w->meta.n_experts, w->meta.top_k);
    if (w->extra_len) fwrite(w->extra, 1, w->extra_len, f);
    fprintf(f,
            "# n_requests: %lld\n# n_tokens: %lld\n# n_prefill_tokens: %lld\n"
            "# n_decode_tokens: %lld\n",
            (long long)w->n_requests, (long long)w->n_prefill + (long long)w->n_decode,
            (long long)w->n_prefill, (long long)w->n_decode);
    fprintf(f, "# columns: request_id phase(P|D) token_index layer0_experts|layer1_experts|... "
               "(experts of one layer comma-separated)\n");
    if (!copy_all(w->reqs, f) || !copy_all(w->body, f)) {
        moeinf_atomic_abort(&out);
        char eb[64];
        st = moeinf_fail(err, MOEINF_ERR_IO, "%s: write failed: %s", w->path,
                         moeinf_strerror(errno, eb, sizeof eb));
        goto done;
    }
    st = moeinf_atomic_commit(&out, err);
done:
    moeinf_trace_writer_abort(w);
    return st;
}
