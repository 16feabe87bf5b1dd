/*
 * spm.c - SentencePiece tokenizing as llama.cpp does it for "llama" vocabularies, per text
 * fragment (tokenize.c splits out special tokens first): space prefix, spaces -> U+2581,
 * greedy merging of adjacent pieces by token score, byte fallback. The steps are in vocab.h.
 * Also the pieces of normal tokens (U+2581 back to a space). Reached through its table,
 * moeinf_tokenizer_spm (tokenizer.h).
 *
 * llama.cpp also keeps a "reverse merge" map to split a merged piece that is not a token
 * back into its parts. A piece is only ever merged when its text is a token, so every
 * multi-character piece is a token and that path never runs; it is left out here.
 */
#include <assert.h>
#include <stdlib.h>
#include <string.h>

#include "base/status.h"
#include "tokenizer/bigram_queue.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/vocab_impl.h"

/* ---- SentencePiece merging -------------------------------------------------------------- */

struct sym {
    int prev, next; /* neighbours in the chain, -1 at the ends */
    size_t off, n;  /* bytes of the piece in the escaped text; n = 0 once merged away */
};

struct spm {
    const struct moeinf_vocab *v;
    const char *text; /* escaped fragment */
    struct sym *syms;
    struct moeinf_bigram_queue q;
};

static bool try_add_bigram(struct spm *s, int left, int right) {
    if (left < 0 || right < 0) return true;
    size_t n = s->syms[left].n + s->syms[right].n;
    int32_t id = moeinf_vocab_find(s->v, s->text + s->syms[left].off, n);
    if (id < 0) return true;
    return moeinf_bigram_push(
        &s->q, (struct moeinf_bigram){left, right, -(double)s->v->tokens[id].score, n});
}

/* UTF-8 length from the lead byte (continuation and invalid bytes count as 1, F8..FF as 4),
 * as llama.cpp's unicode_len_utf8. */
static size_t utf8_len(unsigned char c) {
    static const unsigned char len[16] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4};
    return len[c >> 4];
}

/* Tokenizes one escaped fragment into out. */
static enum moeinf_status spm_fragment(const struct moeinf_vocab *v, const char *text, size_t len,
                                       struct moeinf_ids *out, struct moeinf_error *err) {
    enum moeinf_status st = MOEINF_OK;
    struct spm s = {v, text, NULL, {0}};
    if (len == 0) return MOEINF_OK;
    s.syms = malloc(len * sizeof *s.syms);
    if (!s.syms) goto nomem;
    int n_syms = 0;
    for (size_t off = 0; off < len;) {
        size_t n = utf8_len((unsigned char)text[off]);
        if (n > len - off) n = len - off;
        s.syms[n_syms] = (struct sym){n_syms - 1, off + n == len ? -1 : n_syms + 1, off, n};
        n_syms++;
        off += n;
    }
    for (int i = 1; i < n_syms; i++)
        if (!try_add_bigram(&s, i - 1, i)) goto nomem;

    while (s.q.n > 0) {
        struct moeinf_bigram b = moeinf_bigram_pop(&s.q);
        struct sym *l = &s.syms[b.left];
        struct sym *r = &s.syms[b.right];
        if (l->n == 0 || r->n == 0 || l->n + r->n != b.size) continue; /* stale */
        l->n += r->n;
        r->n = 0;
        l->next = r->next;
        if (r->next >= 0) s.syms[r->next].prev = b.left;
        if (!try_add_bigram(&s, l->prev, b.left) || !try_add_bigram(&s, b.left, l->next))
            goto nomem;
    }

    for (int i = 0; i != -1; i = s.syms[i].next) {
        const struct sym *y = &s.syms[i];
        int32_t id = moeinf_vocab_find(v, text + y->off, y->n);
        if (id >= 0) {
            if (!moeinf_ids_push(out, id)) goto nomem;
            continue;
        }
        /* Byte fallback: <0xXX>, else the one-byte token, else the unknown token. */
        for (size_t k = 0; k < y->n; k++) {
            unsigned char c = (unsigned char)text[y->off + k];
            id = v->byte_token[c] >= 0 ? v->byte_token[c] : v->unk;
            if (id < 0) {
                st = moeinf_fail(err, MOEINF_ERR_FORMAT,
                                 "%s: no token for byte 0x%02X and no "
                                 "unknown token to stand for it",
                                 v->source, c);
                goto done;
            }
            if (!moeinf_ids_push(out, id)) goto nomem;
        }
    }
    goto done;

nomem:
    st = moeinf_fail(err, MOEINF_ERR_NOMEM, "%s: out of memory while tokenizing", v->source);
done:
    free(s.syms);
    moeinf_bigram_queue_free(&s.q);
    return st;
}

/* The fragment with an optional leading space, every space as U+2581. */
static char *escape(const char *text, size_t len, bool prefix, size_t *n_out) {
    size_t n = prefix ? 3 : 0;
    for (size_t i = 0; i < len; i++)
        n += text[i] == ' ' ? 3 : 1;
    char *buf = malloc(n ? n : 1);
    if (!buf) return NULL;
    size_t k = 0;
    for (size_t i = prefix ? 0 : 1; i <= len; i++) {
        /* i == 0 stands for the prefix space, i >= 1 for text[i - 1]. */
        char c = ' ';
        if (i > 0) c = text[i - 1];
        if (c == ' ') {
            buf[k++] = '\xe2'; /* U+2581 */
            buf[k++] = '\x96';
            buf[k++] = '\x81';
        } else {
            buf[k++] = c;
        }
    }
    assert(k == n);
    *n_out = n;
    return buf;
}

/* One text fragment (between special tokens), with the space prefix if `prefix`. */
static enum moeinf_status spm_tokenize(const struct moeinf_vocab *v, const char *text, size_t len,
                                       bool prefix, struct moeinf_ids *out,
                                       struct moeinf_error *err) {
    size_t n;
    char *esc = escape(text, len, prefix, &n);
    if (!esc)
        return moeinf_fail(err, MOEINF_ERR_NOMEM, "%s: out of memory while tokenizing", v->source);
    enum moeinf_status st = spm_fragment(v, esc, n, out, err);
    free(esc);
    return st;
}

/* A normal token's piece: its text with every U+2581 turned back into a space. */
static size_t spm_decode_text(const struct moeinf_vocab *v, const char *text, size_t len,
                              char *dst) {
    (void)v;
    size_t n = 0;
    for (size_t i = 0; i < len;) {
        if (i + 3 <= len && memcmp(text + i, "\xe2\x96\x81", 3) == 0) {
            if (dst) dst[n] = ' ';
            i += 3;
        } else {
            if (dst) dst[n] = text[i];
            i++;
        }
        n++;
    }
    return n;
}

/* llama.cpp's SentencePiece defaults: BOS 1, EOS 2, UNK 0, add_bos, add_space_prefix. */
const struct moeinf_tokenizer_ops moeinf_tokenizer_spm = {
    .model = "llama",
    .bos_default = 1,
    .eos_default = 2,
    .unk_default = 0,
    .add_space_prefix_default = true,
    .fragment = spm_tokenize,
    .decode_text = spm_decode_text,
};
