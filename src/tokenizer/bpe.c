/*
 * bpe.c - byte-level BPE tokenizing as llama.cpp does it for tokenizer.ggml.model = "gpt2":
 * the fragment's invalid UTF-8 becomes U+FFFD, the pre-tokenizer (pretok.c) cuts it into
 * words, every byte of a word becomes its GPT-2 character (printable bytes stand for
 * themselves, the other 68 for U+0100..U+0143 in byte order), and adjacent symbols merge by
 * the rank of their pair in tokenizer.ggml.merges (lowest rank first, ties leftmost) until no
 * pair has a rank. Each final symbol is its token; a symbol that is not a token (a character
 * the vocabulary lacks, or what a merge that makes a non-token leaves) becomes, as in
 * llama.cpp, the tokens of those of its single bytes that are tokens, and the rest is dropped
 * (no unknown token, no error: one stray control byte does not fail the text).
 * Reached through its table, moeinf_tokenizer_bpe (tokenizer.h), at the end of this file.
 */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/grow.h"
#include "base/status.h"
#include "tokenizer/bigram_queue.h"
#include "tokenizer/pretok.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/vocab_impl.h"

/* ---- the byte map ----------------------------------------------------------------------- */

/* GPT-2's character for a byte: itself for '!'..'~', U+00A1..U+00AC, U+00AE..U+00FF; the
 * other bytes (0x00..0x20, 0x7F..0xA0, 0xAD) take U+0100 onwards in byte order. */
static unsigned byte_to_cpt(unsigned b) {
    if ((b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE) return b;
    if (b <= 0x20) return 0x100 + b;
    if (b <= 0xA0) return 0x100 + 0x21 + (b - 0x7F);
    return 0x100 + 0x21 + 0x22; /* 0xAD */
}

/* The byte a character stands for, or -1. */
static int cpt_to_byte(unsigned c) {
    if (c < 0x100) return byte_to_cpt(c) == c ? (int)c : -1;
    if (c <= 0x120) return (int)(c - 0x100);
    if (c <= 0x142) return (int)(c - 0x121 + 0x7F);
    if (c == 0x143) return 0xAD;
    return -1;
}

/* ---- UTF-8 ------------------------------------------------------------------------------ */

/* Decodes one character as llama.cpp's unicode_cpt_from_utf8 does (lead byte, continuation
 * bytes checked; overlong forms accepted); returns its length, or 0 for an invalid one. */
static size_t decode_utf8(const unsigned char *s, size_t n, unsigned *cpt) {
    unsigned c = s[0];
    if (c < 0x80) {
        *cpt = c;
        return 1;
    }
    size_t len = (c & 0xE0) == 0xC0 ? 2 : (c & 0xF0) == 0xE0 ? 3 : (c & 0xF8) == 0xF0 ? 4 : 0;
    if (len == 0 || len > n) return 0;
    unsigned v = c & (0x7Fu >> len);
    for (size_t i = 1; i < len; i++) {
        if ((s[i] & 0xC0) != 0x80) return 0;
        v = (v << 6) | (s[i] & 0x3Fu);
    }
    *cpt = v;
    return len;
}

static size_t encode_utf8(unsigned c, char *dst) {
    if (c < 0x80) {
        dst[0] = (char)c;
        return 1;
    }
    if (c < 0x800) {
        dst[0] = (char)(0xC0 | (c >> 6));
        dst[1] = (char)(0x80 | (c & 0x3F));
        return 2;
    }
    if (c < 0x10000) {
        dst[0] = (char)(0xE0 | (c >> 12));
        dst[1] = (char)(0x80 | ((c >> 6) & 0x3F));
        dst[2] = (char)(0x80 | (c & 0x3F));
        return 3;
    }
    dst[0] = (char)(0xF0 | (c >> 18));
    dst[1] = (char)(0x80 | ((c >> 12) & 0x3F));
    dst[2] = (char)(0x80 | ((c >> 6) & 0x3F));
    dst[3] = (char)(0x80 | (c & 0x3F));
    return 4;
}

/* The text as valid UTF-8: each invalid sequence (one byte at a time), surrogate and code
 * point past U+10FFFF becomes U+FFFD, as llama.cpp's decoding does for invalid bytes (it
 * would throw on the other two). dst holds >= 3 * n bytes. */
static size_t clean_utf8(const char *text, size_t n, char *dst) {
    const unsigned char *s = (const unsigned char *)text;
    size_t o = 0;
    for (size_t i = 0; i < n;) {
        unsigned c = 0;
        size_t k = decode_utf8(s + i, n - i, &c);
        if (k == 0) {
            k = 1;
            c = 0xFFFD;
        }
        if ((c >= 0xD800 && c <= 0xDFFF) || c > 0x10FFFF) c = 0xFFFD;
        o += encode_utf8(c, dst + o);
        i += k;
    }
    return o;
}

/* A normal token's text back to bytes (dst NULL: only measure); characters outside the byte
 * map are copied as they are. */
static size_t bpe_decode_text(const struct moeinf_vocab *v, const char *text, size_t n, char *dst) {
    (void)v;
    const unsigned char *s = (const unsigned char *)text;
    size_t o = 0;
    for (size_t i = 0; i < n;) {
        unsigned c = 0;
        size_t k = decode_utf8(s + i, n - i, &c);
        int b = k ? cpt_to_byte(c) : -1;
        if (k == 0) k = 1;
        if (b >= 0) {
            if (dst) dst[o] = (char)b;
            o++;
        } else { /* not a mapped character: its bytes as they are */
            if (dst) memcpy(dst + o, text + i, k);
            o += k;
        }
        i += k;
    }
    return o;
}

/* ---- merges ----------------------------------------------------------------------------- */

/* Rank of the merge "key" (left, space, right), or -1. */
static int32_t merge_rank(const struct moeinf_bpe_merges *m, const char *key, size_t n) {
    size_t i = (size_t)moeinf_hash_bytes(key, n) & m->table_mask;
    for (;;) {
        int32_t e = m->table[i];
        if (e < 0) return -1;
        if (m->len[e] == n && memcmp(m->arena + m->off[e], key, n) == 0) return m->rank[e];
        i = (i + 1) & m->table_mask;
    }
}

static size_t merge_text_len(const struct moeinf_vocab_desc *d, uint64_t i) {
    return d->merge_lens ? (size_t)d->merge_lens[i] : strlen(d->merges[i]);
}

static enum moeinf_status load_merges(struct moeinf_vocab *v, const struct moeinf_vocab_desc *d,
                                      struct moeinf_error *err) {
    struct moeinf_bpe_merges *m = &v->merges;
    if (!d->merges && d->n_merges > 0)
        return moeinf_fail(err, MOEINF_ERR_FORMAT, "%s: tokenizer.ggml.merges is missing",
                           v->source);
    if (d->n_merges > INT32_MAX)
        return moeinf_fail(err, MOEINF_ERR_FORMAT, "%s: tokenizer.ggml.merges has %llu entries",
                           v->source, (unsigned long long)d->n_merges);
    size_t n = (size_t)d->n_merges;
    size_t total = 0;
    for (size_t i = 0; i < n; i++) {
        size_t k = merge_text_len(d, i);
        if (k > UINT32_MAX / 2)
            return moeinf_fail(err, MOEINF_ERR_FORMAT,
                               "%s: tokenizer.ggml.merges[%zu] is %zu bytes long", v->source, i, k);
        total += k + 1;
    }
    size_t cap = 1;
    while (cap < 2 * n)
        cap *= 2;
    m->arena = malloc(total ? total : 1);
    m->off = malloc((n ? n : 1) * sizeof *m->off);
    m->len = malloc((n ? n : 1) * sizeof *m->len);
    m->rank = malloc((n ? n : 1) * sizeof *m->rank);
    m->table = malloc(cap * sizeof *m->table);
    if (!m->arena || !m->off || !m->len || !m->rank || !m->table)
        return moeinf_fail(err, MOEINF_ERR_NOMEM, "%s: out of memory for %zu merges", v->source, n);
    m->table_mask = cap - 1;
    for (size_t i = 0; i < cap; i++)
        m->table[i] = -1;
    size_t off = 0;
    for (size_t i = 0; i < n; i++) {
        const char *s = d->merges[i];
        size_t k = merge_text_len(d, i);
        /* llama.cpp splits at the first space after the first byte; a merge without one
         * can never apply, so it is not kept. */
        if (k < 3 || !memchr(s + 1, ' ', k - 1)) continue;
        memcpy(m->arena + off, s, k);
        m->arena[off + k] = '\0';
        int32_t e = m->n;
        m->off[e] = off;
        m->len[e] = (uint32_t)k;
        m->rank[e] = (int32_t)i;
        size_t h = (size_t)moeinf_hash_bytes(s, k) & m->table_mask;
        for (;;) {
            int32_t o = m->table[h];
            if (o < 0) {
                m->table[h] = e;
                m->n++;
                off += k + 1;
                break;
            }
            if (m->len[o] == k && memcmp(m->arena + m->off[o], s, k) == 0) break; /* dup */
            h = (h + 1) & m->table_mask;
        }
    }
    return MOEINF_OK;
}

/* llama.cpp warns at length when a BPE vocabulary names no pre-tokenizer; one line, once per
 * process, says the same here. */
static void note_default_pre(const char *src) {
    static atomic_flag said = ATOMIC_FLAG_INIT;
    if (atomic_flag_test_and_set(&said)) return;
    fprintf(stderr,
            "moeinf: %s: no tokenizer.ggml.pre; using the 'default' pre-tokenizer, as llama.cpp "
            "does (text may split differently from the model's own tokenizer)\n",
            src);
}

/* The merges, pre-tokenizer and byte map of a BPE vocabulary (after its texts). */
static enum moeinf_status bpe_init(struct moeinf_vocab *v, const struct moeinf_vocab_desc *d,
                                   struct moeinf_error *err) {
    if (!d->pre) note_default_pre(d->source ? d->source : "(memory)");
    for (unsigned b = 0; b < 256; b++) {
        char tmp[4];
        size_t k = encode_utf8(byte_to_cpt(b), tmp);
        memcpy(v->byte_utf8[b], tmp, k); /* at most U+0143: two bytes */
        v->byte_utf8_len[b] = (unsigned char)k;
    }
    enum moeinf_status st = load_merges(v, d, err);
    if (st != MOEINF_OK) return st;
    struct moeinf_error inner = {0};
    st = moeinf_pretok_create(d->pre, &v->pretok, &inner);
    if (st != MOEINF_OK) return moeinf_fail(err, st, "%s: %s", v->source, inner.msg);
    struct moeinf_pretok_flags f = moeinf_pretok_flags(v->pretok);
    v->ignore_merges = f.ignore_merges;
    v->clean_spaces = f.clean_spaces;
    return MOEINF_OK;
}

static void bpe_free(struct moeinf_vocab *v) {
    moeinf_pretok_free(v->pretok);
    free(v->merges.arena);
    free(v->merges.off);
    free(v->merges.len);
    free(v->merges.rank);
    free(v->merges.table);
}

/* ---- merging one word ------------------------------------------------------------------- */

struct sym {
    int prev, next; /* neighbours, -1 at the ends */
    size_t off, n;  /* bytes in the word; n = 0 once merged into its left neighbour */
};

struct session {
    const struct moeinf_vocab *v;
    char *word;       /* the byte-mapped word: 2 bytes per byte at most */
    struct sym *syms; /* one per byte at most */
    struct moeinf_bigram_queue q;
    char *key; /* "left right" for rank lookups */
    size_t key_cap;
};

/* Queues the pair (left, right) if the merges know it. */
static bool add_bigram(struct session *s, int left, int right) {
    if (left < 0 || right < 0) return true;
    const struct sym *l = &s->syms[left];
    const struct sym *r = &s->syms[right];
    size_t n = l->n + 1 + r->n;
    char *key = moeinf_grow(s->key, &s->key_cap, n, 1);
    if (!key) return false;
    s->key = key;
    memcpy(s->key, s->word + l->off, l->n);
    s->key[l->n] = ' ';
    memcpy(s->key + l->n + 1, s->word + r->off, r->n);
    int32_t rank = merge_rank(&s->v->merges, s->key, n);
    if (rank < 0) return true;
    return moeinf_bigram_push(&s->q, (struct moeinf_bigram){left, right, rank, l->n + r->n});
}

/* A symbol that is not a token, as llama.cpp's BPE session does it: each of its bytes that
 * is a token by itself, the others dropped without a word. Only printable ASCII stands for
 * itself in a byte-level vocabulary, so a byte whose character the vocabulary lacks (Falcon
 * has none for 14 control bytes) leaves no token rather than failing the text. */
static bool emit_bytes(const struct moeinf_vocab *v, const char *t, size_t n,
                       struct moeinf_ids *out) {
    for (size_t i = 0; i < n; i++) {
        int32_t id = moeinf_vocab_find(v, t + i, 1);
        if (id >= 0 && !moeinf_ids_push(out, id)) return false;
    }
    return true;
}

static enum moeinf_status fail_nomem(const struct moeinf_vocab *v, struct moeinf_error *err) {
    return moeinf_fail(err, MOEINF_ERR_NOMEM, "%s: out of memory while tokenizing", v->source);
}

/* Tokenizes the word text[0, n) (raw bytes, before the byte map); s->word holds 2n bytes and
 * s->syms n symbols. */
static enum moeinf_status bpe_word(struct session *s, const char *text, size_t n,
                                   struct moeinf_ids *out, struct moeinf_error *err) {
    const struct moeinf_vocab *v = s->v;
    if (n == 0) return MOEINF_OK; /* the pre-tokenizer gives none */
    size_t len = 0;
    int n_syms = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char b = (unsigned char)text[i];
        memcpy(s->word + len, v->byte_utf8[b], v->byte_utf8_len[b]);
        s->syms[n_syms] =
            (struct sym){n_syms - 1, i + 1 == n ? -1 : n_syms + 1, len, v->byte_utf8_len[b]};
        len += v->byte_utf8_len[b];
        n_syms++;
    }
    if (v->ignore_merges) {
        int32_t id = moeinf_vocab_find(v, s->word, len);
        if (id >= 0) return moeinf_ids_push(out, id) ? MOEINF_OK : fail_nomem(v, err);
    }
    s->q.n = 0;
    for (int i = 1; i < n_syms; i++)
        if (!add_bigram(s, i - 1, i)) goto nomem;
    while (s->q.n > 0) {
        struct moeinf_bigram b = moeinf_bigram_pop(&s->q);
        struct sym *l = &s->syms[b.left];
        struct sym *r = &s->syms[b.right];
        /* Stale: either side merged away, the left one grew (then it has another right
         * neighbour) or the right one grew (then the size differs). */
        if (l->n == 0 || r->n == 0 || l->next != b.right || l->n + r->n != b.size) continue;
        l->n += r->n;
        r->n = 0;
        l->next = r->next;
        if (r->next >= 0) s->syms[r->next].prev = b.left;
        if (!add_bigram(s, l->prev, b.left) || !add_bigram(s, b.left, l->next)) goto nomem;
    }
    for (int i = 0; i != -1; i = s->syms[i].next) {
        const struct sym *y = &s->syms[i];
        int32_t id = moeinf_vocab_find(v, s->word + y->off, y->n);
        if (id >= 0) {
            if (!moeinf_ids_push(out, id)) goto nomem;
            continue;
        }
        if (!emit_bytes(v, s->word + y->off, y->n, out)) goto nomem;
    }
    return MOEINF_OK;

nomem:
    return fail_nomem(v, err);
}

/* One text fragment: pre-tokenize, byte-map each word, merge by rank. No space prefix: a
 * byte-level vocabulary spells its spaces itself. */
static enum moeinf_status bpe_fragment(const struct moeinf_vocab *v, const char *text, size_t len,
                                       bool prefix, struct moeinf_ids *out,
                                       struct moeinf_error *err) {
    (void)prefix;
    struct session s = {.v = v};
    struct moeinf_span *words = NULL;
    size_t n_words = 0;
    char *clean = malloc(3 * len + 1);
    if (!clean) return fail_nomem(v, err);
    size_t n = clean_utf8(text, len, clean);
    enum moeinf_status st = moeinf_pretok_split(v->pretok, clean, n, &words, &n_words, err);
    if (st != MOEINF_OK) goto done;
    size_t longest = 1;
    for (size_t i = 0; i < n_words; i++)
        if (words[i].len > longest) longest = words[i].len;
    s.word = malloc(2 * longest);
    s.syms = malloc(longest * sizeof *s.syms);
    if (!s.word || !s.syms) {
        st = fail_nomem(v, err);
        goto done;
    }
    for (size_t i = 0; i < n_words; i++) {
        st = bpe_word(&s, clean + words[i].off, words[i].len, out, err);
        if (st != MOEINF_OK) break;
    }
done:
    free(words);
    free(clean);
    free(s.word);
    free(s.syms);
    moeinf_bigram_queue_free(&s.q);
    free(s.key);
    return st;
}

/* add_bos when the metadata leaves it out: the pre-tokenizer's flag (llama.cpp's per-name). */
static bool bpe_add_bos_default(const struct moeinf_vocab *v) {
    return moeinf_pretok_flags(v->pretok).add_bos;
}

/* glm4 and chatglm-bpe have no BOS unless the metadata names one (llama.cpp). */
static int32_t bpe_bos_default_id(const struct moeinf_vocab *v) {
    return moeinf_pretok_flags(v->pretok).no_bos ? -1 : moeinf_tokenizer_bpe.bos_default;
}

/* llama.cpp's BPE defaults: BOS and EOS 11 (BOS none for glm4), no unknown token, no space
 * prefix. */
const struct moeinf_tokenizer_ops moeinf_tokenizer_bpe = {
    .model = "gpt2",
    .bos_default = 11,
    .eos_default = 11,
    .unk_default = -1,
    .add_space_prefix_default = false,
    .init = bpe_init,
    .free = bpe_free,
    .add_bos_default = bpe_add_bos_default,
    .bos_default_id = bpe_bos_default_id,
    .fragment = bpe_fragment,
    .decode_text = bpe_decode_text,
};
