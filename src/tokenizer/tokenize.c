/*
 * tokenize.c - moeinf_vocab_tokenize: special tokens are split out of the text first (as
 * llama.cpp's tokenizer_st_partition), then each text fragment goes to the vocabulary's
 * tokenizer through its table (tokenizer.h: spm.c or bpe.c); BOS/EOS around it when
 * add_special asks. moeinf_vocab_tokenize_mixed leaves control tokens (and the turn markers
 * made user-defined, vocab_impl.h) unrecognised in given ranges (a chat's message texts), so
 * only the template's own markup can hold them.
 */
#include <stdlib.h>
#include <string.h>

#include "base/status.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/vocab_impl.h"

/* ---- special-token partition ------------------------------------------------------------ */

/* A piece of the input: raw text [off, off + len) when id < 0, else a special token. */
struct frag {
    int32_t id;
    size_t off, len;
};

struct frags {
    struct frag *data;
    size_t n, cap;
};

static bool frags_push(struct frags *a, struct frag f) {
    if (a->n == a->cap) {
        size_t cap = a->cap ? 2 * a->cap : 16;
        struct frag *p = realloc(a->data, cap * sizeof *p);
        if (!p) return false;
        a->data = p;
        a->cap = cap;
    }
    a->data[a->n++] = f;
    return true;
}

/* C-locale isspace, without depending on the process locale. */
static bool is_space(char c) {
    return c == ' ' || c == '\t' || c == '\n' || c == '\v' || c == '\f' || c == '\r';
}

/* Ranges of the text where control tokens are not recognised (moeinf_vocab_tokenize_mixed):
 * r[2i] <= byte < r[2i + 1], sorted and disjoint. */
struct plain {
    const size_t *r;
    size_t n;
};

/* True when [at, at + n) overlaps a plain range. */
static bool in_plain(const struct plain *p, size_t at, size_t n) {
    if (!p) return false;
    size_t lo = 0;
    size_t hi = p->n;
    while (lo < hi) { /* the first range that ends after `at` */
        size_t mid = lo + (hi - lo) / 2;
        if (p->r[2 * mid + 1] <= at) {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    return lo < p->n && p->r[2 * lo] < at + n;
}

/* Splits raw fragment f around every occurrence of special token id into out; occurrences
 * that overlap a plain range stay text when the token is a control one. */
static bool split_fragment(const struct moeinf_vocab *v, const char *text, struct frag f,
                           int32_t id, const struct plain *plain, struct frags *out) {
    const struct moeinf_vocab_token *t = &v->tokens[id];
    const char *tt = v->text_arena + t->text_off;
    const bool control =
        (t->attr & (MOEINF_TOKEN_ATTR_CONTROL | MOEINF_TOKEN_ATTR_UNKNOWN)) || t->markup;
    size_t pos = f.off;
    size_t search = pos;
    size_t end = f.off + f.len;
    for (;;) {
        const char *m = search < end ? memmem(text + search, end - search, tt, t->text_len) : NULL;
        if (!m) {
            if (end > pos && !frags_push(out, (struct frag){-1, pos, end - pos})) return false;
            return true;
        }
        size_t at = (size_t)(m - text);
        if (control && in_plain(plain, at, t->text_len)) {
            search = at + 1; /* the text of a message: not a token */
            continue;
        }
        size_t left = at - pos;
        if (t->attr & MOEINF_TOKEN_ATTR_LSTRIP)
            while (left > 0 && is_space(text[pos + left - 1]))
                left--;
        if (left > 0 && !frags_push(out, (struct frag){-1, pos, left})) return false;
        if (!frags_push(out, (struct frag){id, 0, 0})) return false;
        pos = at + t->text_len;
        if (pos >= end) return true;
        if (t->attr & MOEINF_TOKEN_ATTR_RSTRIP)
            while (pos < end && is_space(text[pos]))
                pos++;
        search = pos;
    }
}

/* Long texts: which byte pairs occur in the text, one bit each, so that the special tokens
 * whose first two bytes never occur are skipped without a search through the whole text
 * (vocabularies have hundreds of them: one search each would cost hundreds of passes). */
#define PAIR_BITS_MIN_LEN 4096

static void pair_bits(const char *text, size_t len, uint64_t *bits) {
    memset(bits, 0, (1u << 16) / 8);
    for (size_t i = 0; i + 1 < len; i++) {
        unsigned k = (unsigned)(unsigned char)text[i] << 8 | (unsigned char)text[i + 1];
        bits[k >> 6] |= 1ull << (k & 63);
    }
}

/* False when the token's text cannot occur in the text (its first pair never does). */
static bool may_occur(const uint64_t *bits, const char *t, size_t n) {
    if (!bits || n < 2) return true;
    unsigned k = (unsigned)(unsigned char)t[0] << 8 | (unsigned char)t[1];
    return (bits[k >> 6] >> (k & 63)) & 1;
}

static bool partition(const struct moeinf_vocab *v, const char *text, size_t len,
                      bool parse_special, const struct plain *plain, struct frags *cur) {
    if (len == 0) return true; /* text may then be NULL */
    struct frags next = {0};
    uint64_t *bits = NULL;
    if (len >= PAIR_BITS_MIN_LEN && v->n_special > 8) {
        bits = malloc((1u << 16) / 8);
        if (!bits) return false;
        pair_bits(text, len, bits);
    }
    bool ok = frags_push(cur, (struct frag){-1, 0, len});
    for (int32_t s = 0; ok && s < v->n_special; s++) {
        int32_t id = v->special[s];
        const struct moeinf_vocab_token *t = &v->tokens[id];
        /* Without parse_special only user-defined tokens are split out. */
        if (!parse_special && (t->attr & (MOEINF_TOKEN_ATTR_CONTROL | MOEINF_TOKEN_ATTR_UNKNOWN)))
            continue;
        /* A text absent from the whole input is absent from every fragment. */
        const char *tt = v->text_arena + t->text_off;
        if (!may_occur(bits, tt, t->text_len) || !memmem(text, len, tt, t->text_len)) continue;
        next.n = 0;
        for (size_t i = 0; ok && i < cur->n; i++) {
            if (cur->data[i].id >= 0)
                ok = frags_push(&next, cur->data[i]);
            else
                ok = split_fragment(v, text, cur->data[i], id, plain, &next);
        }
        struct frags tmp = *cur;
        *cur = next;
        next = tmp;
    }
    free(bits);
    free(next.data);
    return ok;
}

static enum moeinf_status tokenize(const struct moeinf_vocab *v, const char *text, size_t len,
                                   bool add_special, bool parse_special, const struct plain *plain,
                                   int32_t **out, size_t *n_out, struct moeinf_error *err) {
    enum moeinf_status st = MOEINF_OK;
    struct moeinf_ids res = {0};
    struct frags frags = {0};
    /* Escaping (SPM) and cleaning UTF-8 (BPE) triple bytes, and symbol indices are ints. */
    if (len > (size_t)INT32_MAX / 4)
        return moeinf_fail(err, MOEINF_ERR_ARG, "%s: a text of %zu bytes is too long to tokenize",
                           v->source, len);
    if (!moeinf_ids_push(&res, 0)) goto nomem; /* reserve: the result is never NULL */
    res.n = 0;
    if (add_special && v->add_bos && !moeinf_ids_push(&res, v->bos)) goto nomem;
    if (!partition(v, text, len, parse_special, plain, &frags)) goto nomem;

    bool prev_special = true; /* the first fragment gets the space prefix too */
    for (size_t i = 0; i < frags.n; i++) {
        struct frag f = frags.data[i];
        if (f.id >= 0) {
            if (!moeinf_ids_push(&res, f.id)) goto nomem;
            prev_special = true;
            continue;
        }
        st = v->ops->fragment(v, text + f.off, f.len, v->add_space_prefix && prev_special, &res,
                              err);
        if (st != MOEINF_OK) goto fail;
        prev_special = false;
    }
    if (add_special && v->add_eos && !moeinf_ids_push(&res, v->eos)) goto nomem;
    free(frags.data);
    *out = res.data;
    *n_out = res.n;
    return MOEINF_OK;

nomem:
    st = moeinf_fail(err, MOEINF_ERR_NOMEM, "%s: out of memory while tokenizing", v->source);
fail:
    free(frags.data);
    free(res.data);
    return st;
}

enum moeinf_status moeinf_vocab_tokenize(const struct moeinf_vocab *v, const char *text, size_t len,
                                         bool add_special, bool parse_special, int32_t **out,
                                         size_t *n_out, struct moeinf_error *err) {
    return tokenize(v, text, len, add_special, parse_special, NULL, out, n_out, err);
}

enum moeinf_status moeinf_vocab_tokenize_mixed(const struct moeinf_vocab *v, const char *text,
                                               size_t len, bool add_special, const size_t *plain,
                                               size_t n_plain, int32_t **out, size_t *n_out,
                                               struct moeinf_error *err) {
    for (size_t i = 0; i < n_plain; i++) {
        if (plain[2 * i] > plain[2 * i + 1] || plain[2 * i + 1] > len ||
            (i > 0 && plain[2 * i] < plain[2 * i - 1])) {
            return moeinf_fail(err, MOEINF_ERR_ARG,
                               "%s: plain range %zu [%zu, %zu) is not sorted within the text",
                               v->source, i, plain[2 * i], plain[2 * i + 1]);
        }
    }
    struct plain p = {plain, n_plain};
    return tokenize(v, text, len, add_special, true, &p, out, n_out, err);
}
