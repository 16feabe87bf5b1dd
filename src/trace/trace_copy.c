/*
 * trace_copy.c - new traces from old ones (moeinf.h, "trace tools"): filter (a subset of one
 * trace's requests) and concat (traces one after another), both through the trace writer,
 * with the first input's model and provenance header lines and a "derived" line.
 *
 * Inputs are streamed with the reader of trace.h, so a defect is reported as the simulator
 * reports it; the writer keeps nothing per token in memory.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/file.h"
#include "base/status.h"
#include "trace/trace.h"
#include "trace/trace_tools.h"

#define DERIVED_MAX    1000 /* the "derived" provenance value is cut to this many bytes */
#define MAX_REQUEST_ID 999999999999999999LL /* request ids have at most 18 digits (trace.h) */

/* The header lines a new trace takes from its first input: model and provenance. */
struct header_copy {
    char *model; /* NULL when absent */
    char *lines; /* "key\tvalue\n" for each provenance line, in order */
    size_t len;
    char *derived; /* the input's own "derived" value, NULL when absent */
};

static void header_copy_free(struct header_copy *c) {
    free(c->model);
    free(c->lines);
    free(c->derived);
}

/* Keys the writer writes itself (or derives): not copied. */
static bool written_by_writer(const char *key) {
    static const char *const keys[] = {
        "n_layers",         "n_experts",       "top_k",   "model", "n_requests", "n_tokens",
        "n_prefill_tokens", "n_decode_tokens", "columns", "req",   "derived"};
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) {
        if (!strcmp(key, keys[i])) return true;
    }
    return false;
}

/* Reads the header lines of a trace already checked by moeinf_trace_open. */
static enum moeinf_status read_header_copy(const char *path, struct header_copy *c,
                                           struct moeinf_error *err) {
    memset(c, 0, sizeof *c);
    enum moeinf_status st = MOEINF_OK;
    char ebuf[128];
    char *line = malloc(MOEINF_TRACE_MAX_HEADER_LINE + 3);
    FILE *f = NULL;
    if (!line) {
        st = moeinf_fail(err, MOEINF_ERR_NOMEM, "%s: out of memory", path);
        goto done;
    }
    if ((st = moeinf_file_fopen_regular(path, &f, err)) != MOEINF_OK) goto done;
    while (fgets(line, MOEINF_TRACE_MAX_HEADER_LINE + 3, f) && line[0] == '#') {
        line[strcspn(line, "\r\n")] = '\0';
        if (strncmp(line, "# ", 2) != 0) continue;
        char *key = line + 2;
        char *colon = strchr(key, ':');
        if (!colon || strspn(key, "abcdefghijklmnopqrstuvwxyz0123456789_") != (size_t)(colon - key))
            continue; /* the magic line and "# req" lines */
        *colon = '\0';
        const char *value = colon[1] == ' ' ? colon + 2 : colon + 1;
        char **slot = !strcmp(key, "model")     ? &c->model
                      : !strcmp(key, "derived") ? &c->derived
                                                : NULL;
        if (slot) {
            free(*slot);
            if (!(*slot = strdup(value))) goto nomem;
            continue;
        }
        if (written_by_writer(key)) continue;
        size_t add = strlen(key) + strlen(value) + 2;
        char *grown = realloc(c->lines, c->len + add + 1);
        if (!grown) goto nomem;
        c->lines = grown;
        c->len += (size_t)snprintf(c->lines + c->len, add + 1, "%s\t%s\n", key, value);
    }
    if (ferror(f))
        st = moeinf_fail(err, MOEINF_ERR_IO, "%s: read: %s", path,
                         moeinf_strerror(errno, ebuf, sizeof ebuf));
    goto done;
nomem:
    st = moeinf_fail(err, MOEINF_ERR_NOMEM, "%s: out of memory", path);
done:
    if (f) fclose(f);
    free(line);
    if (st != MOEINF_OK) header_copy_free(c);
    return st;
}

/* Opens the writer of a derived trace: the first input's geometry, model and provenance, and
 * "derived" = the input's own derivation followed by `note`. */
static enum moeinf_status open_derived(const char *out_path, const char *in_path,
                                       const struct moeinf_trace_header *h, const char *note,
                                       struct moeinf_trace_writer **out, struct moeinf_error *err) {
    struct header_copy c;
    enum moeinf_status st = read_header_copy(in_path, &c, err);
    if (st != MOEINF_OK) return st;
    struct moeinf_trace_writer *w = NULL;
    struct moeinf_trace_meta meta = {h->n_layers, h->n_experts, h->top_k, c.model};
    if ((st = moeinf_trace_writer_open(out_path, &meta, &w, err)) != MOEINF_OK) goto done;
    for (char *p = c.lines; p && p < c.lines + c.len;) {
        char *tab = strchr(p, '\t');
        char *nl = strchr(tab, '\n');
        *tab = *nl = '\0';
        if ((st = moeinf_trace_writer_header(w, p, tab + 1, err)) != MOEINF_OK) goto done;
        p = nl + 1;
    }
    if (c.derived || note) {
        char value[DERIVED_MAX + 1];
        snprintf(value, sizeof value, "%s%s%s", c.derived ? c.derived : "",
                 c.derived && note ? "; then " : "", note ? note : "");
        if ((st = moeinf_trace_writer_header(w, "derived", value, err)) != MOEINF_OK) goto done;
    }
done:
    header_copy_free(&c);
    if (st != MOEINF_OK) {
        moeinf_trace_writer_abort(w);
        return st;
    }
    *out = w;
    return MOEINF_OK;
}

struct moeinf_trace_filter_params moeinf_trace_filter_params_default(void) {
    struct moeinf_trace_filter_params p;
    memset(&p, 0, sizeof p);
    p.id_max = INT64_MAX;
    p.index_max = INT64_MAX;
    p.every = 1;
    return p;
}

static bool tag_passes(const struct moeinf_trace_filter_params *p, const char *tag) {
    if (p->n_tag_prefixes == 0) return true;
    if (!tag) tag = "";
    for (int i = 0; i < p->n_tag_prefixes; i++) {
        const char *pre = p->tag_prefixes[i];
        if (!strncmp(tag, pre, strlen(pre))) return true;
    }
    return false;
}

enum moeinf_status moeinf_trace_filter(const char *in_path, const char *out_path,
                                       const struct moeinf_trace_filter_params *params,
                                       struct moeinf_trace_copy_result *out,
                                       struct moeinf_error *err) {
    if (params->every < 1 || params->first < 0 || params->n_tag_prefixes < 0) {
        return moeinf_fail(err, MOEINF_ERR_ARG, "filter: every must be >= 1 and first >= 0");
    }
    struct moeinf_trace_reader *r = NULL;
    struct moeinf_trace_writer *w = NULL;
    struct moeinf_trace_copy_result res;
    memset(&res, 0, sizeof res);
    enum moeinf_status st = moeinf_trace_open(in_path, &r, err);
    if (st != MOEINF_OK) return st;
    st = open_derived(out_path, in_path, moeinf_trace_header(r), params->note, &w, err);
    if (st != MOEINF_OK) goto fail;
    int64_t pos = -1;
    int64_t passed = 0;
    bool keep = false;
    for (;;) {
        struct moeinf_trace_token tok;
        bool end = false;
        if ((st = moeinf_trace_read(r, &tok, &end, err)) != MOEINF_OK) goto fail;
        if (end) break;
        if (tok.request_begins) {
            pos++;
            /* ids and positions only grow: once past a range, nothing later passes */
            if ((params->first > 0 && res.n_requests >= params->first) ||
                tok.request_id > params->id_max || pos > params->index_max) {
                break;
            }
            keep = tag_passes(params, tok.request_tag) && tok.request_id >= params->id_min &&
                   pos >= params->index_min;
            if (keep) keep = passed++ % params->every == 0;
            if (keep) {
                st = moeinf_trace_writer_request(w, tok.request_id, tok.request_tag, err);
                if (st != MOEINF_OK) goto fail;
                res.n_requests++;
            }
        }
        if (!keep) continue;
        if ((st = moeinf_trace_writer_token(w, tok.phase, tok.experts, err)) != MOEINF_OK) {
            goto fail;
        }
        res.n_tokens[moeinf_trace_phase_index(tok.phase)]++;
    }
    /* A trace without requests gives one without requests; a filter that keeps none of
     * the requests there are is refused as a mistake. */
    if (res.n_requests == 0 && pos >= 0) {
        st = moeinf_fail(err, MOEINF_ERR_ARG,
                         "%s: no request passes the filter (%lld requests "
                         "read); nothing written",
                         in_path, (long long)pos + 1);
        goto fail;
    }
    moeinf_trace_close(r);
    st = moeinf_trace_writer_close(w, err);
    if (st == MOEINF_OK && out) *out = res;
    return st;
fail:
    moeinf_trace_close(r);
    moeinf_trace_writer_abort(w);
    return st;
}

enum moeinf_status moeinf_trace_concat(const char *const *in_paths, int n_in, const char *out_path,
                                       const char *note, struct moeinf_trace_copy_result *out,
                                       struct moeinf_error *err) {
    if (n_in < 1) return moeinf_fail(err, MOEINF_ERR_ARG, "concat: no input traces");
    struct moeinf_trace_reader *r = NULL;
    struct moeinf_trace_writer *w = NULL;
    struct moeinf_trace_copy_result res;
    memset(&res, 0, sizeof res);
    struct moeinf_trace_header first;
    memset(&first, 0, sizeof first);
    /* geometry of every input first, so that a mismatch writes nothing */
    enum moeinf_status st = MOEINF_OK;
    for (int i = 0; i < n_in; i++) {
        if ((st = moeinf_trace_open(in_paths[i], &r, err)) != MOEINF_OK) return st;
        const struct moeinf_trace_header *h = moeinf_trace_header(r);
        if (i == 0) {
            first = *h;
        } else if (h->n_layers != first.n_layers || h->n_experts != first.n_experts ||
                   h->top_k != first.top_k) {
            st = moeinf_fail(err, MOEINF_ERR_FORMAT,
                             "%s: geometry mismatch: %d layers x %d experts, top-%d; %s has %d x "
                             "%d, top-%d",
                             in_paths[i], h->n_layers, h->n_experts, h->top_k, in_paths[0],
                             first.n_layers, first.n_experts, first.top_k);
            moeinf_trace_close(r);
            return st;
        }
        moeinf_trace_close(r);
        r = NULL;
    }
    if ((st = open_derived(out_path, in_paths[0], &first, note, &w, err)) != MOEINF_OK) return st;
    bool any = false;
    int64_t last_id = -1;
    for (int i = 0; i < n_in; i++) {
        if ((st = moeinf_trace_open(in_paths[i], &r, err)) != MOEINF_OK) goto fail;
        int64_t shift = 0;
        bool first_request = true;
        for (;;) {
            struct moeinf_trace_token tok;
            bool end = false;
            if ((st = moeinf_trace_read(r, &tok, &end, err)) != MOEINF_OK) goto fail;
            if (end) break;
            if (tok.request_begins) {
                if (first_request && any && tok.request_id <= last_id) {
                    shift = last_id + 1 - tok.request_id;
                    res.n_shifted++;
                }
                first_request = false;
                if (tok.request_id > MAX_REQUEST_ID - shift) {
                    st = moeinf_fail(err, MOEINF_ERR_ARG,
                                     "%s: request id %lld shifted by %lld exceeds the format's "
                                     "18 digits",
                                     in_paths[i], (long long)tok.request_id, (long long)shift);
                    goto fail;
                }
                last_id = tok.request_id + shift;
                st = moeinf_trace_writer_request(w, last_id, tok.request_tag, err);
                if (st != MOEINF_OK) goto fail;
                any = true;
                res.n_requests++;
            }
            st = moeinf_trace_writer_token(w, tok.phase, tok.experts, err);
            if (st != MOEINF_OK) goto fail;
            res.n_tokens[moeinf_trace_phase_index(tok.phase)]++;
        }
        moeinf_trace_close(r);
        r = NULL;
    }
    st = moeinf_trace_writer_close(w, err);
    if (st == MOEINF_OK && out) *out = res;
    return st;
fail:
    moeinf_trace_close(r);
    moeinf_trace_writer_abort(w);
    return st;
}
