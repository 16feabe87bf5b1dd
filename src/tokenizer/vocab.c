/*
 * vocab.c - building a vocabulary from tokenizer.ggml.* arrays: the text -> id map, token
 * attributes, special ids, the end-of-generation set, pieces; plus detokenizing and the
 * streaming UTF-8 detokenizer. Tokenizing itself is in tokenize.c, spm.c and bpe.c; what
 * differs per tokenizer.ggml.model (defaults, the tokenizer's own state, normal tokens'
 * pieces) comes through the model's table (tokenizer.h), never by a call into spm.c or bpe.c.
 * The rules follow llama.cpp's llama_vocab::impl::load (see vocab.h for the summary).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/escape.h"
#include "base/status.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/vocab_impl.h"

#define NO_ID (-1)

struct moeinf_vocab_desc moeinf_vocab_desc_default(void) {
    struct moeinf_vocab_desc d;
    memset(&d, 0, sizeof d);
    d.bos_id = d.eos_id = d.unk_id = d.pad_id = d.eot_id = d.eom_id = -1;
    for (int i = 0; i < MOEINF_VOCAB_N_FIM; i++)
        d.fim_ids[i] = -1;
    d.add_bos = d.add_eos = d.add_space_prefix = -1;
    return d;
}

/* ---- text -> id map ------------------------------------------------------------------- */

static const char *tok_text(const struct moeinf_vocab *v, int32_t id) {
    return v->text_arena + v->tokens[id].text_off;
}

int32_t moeinf_vocab_find(const struct moeinf_vocab *v, const char *text, size_t len) {
    size_t i = (size_t)moeinf_hash_bytes(text, len) & v->table_mask;
    for (;;) {
        int32_t id = v->table[i];
        if (id == NO_ID) return NO_ID;
        if (v->tokens[id].text_len == len && memcmp(tok_text(v, id), text, len) == 0) return id;
        i = (i + 1) & v->table_mask;
    }
}

/* Inserts id; returns the id already holding that text, or NO_ID. */
static int32_t table_insert(struct moeinf_vocab *v, int32_t id) {
    const char *text = tok_text(v, id);
    size_t len = v->tokens[id].text_len;
    size_t i = (size_t)moeinf_hash_bytes(text, len) & v->table_mask;
    for (;;) {
        int32_t other = v->table[i];
        if (other == NO_ID) {
            v->table[i] = id;
            return NO_ID;
        }
        if (v->tokens[other].text_len == len && memcmp(tok_text(v, other), text, len) == 0)
            return other;
        i = (i + 1) & v->table_mask;
    }
}

static int32_t find_cstr(const struct moeinf_vocab *v, const char *s) {
    return moeinf_vocab_find(v, s, strlen(s));
}

/* ---- attributes and special tokens ----------------------------------------------------- */

static unsigned attr_of_type(int32_t type) {
    switch (type) {
    case MOEINF_TOKEN_TYPE_NORMAL:
        return MOEINF_TOKEN_ATTR_NORMAL;
    case MOEINF_TOKEN_TYPE_UNKNOWN:
        return MOEINF_TOKEN_ATTR_UNKNOWN;
    case MOEINF_TOKEN_TYPE_CONTROL:
        return MOEINF_TOKEN_ATTR_CONTROL;
    case MOEINF_TOKEN_TYPE_USER_DEFINED:
        return MOEINF_TOKEN_ATTR_USER_DEFINED;
    case MOEINF_TOKEN_TYPE_UNUSED:
        return MOEINF_TOKEN_ATTR_UNUSED;
    case MOEINF_TOKEN_TYPE_BYTE:
        return MOEINF_TOKEN_ATTR_BYTE;
    default:
        return MOEINF_TOKEN_ATTR_UNDEFINED; /* as llama.cpp: never rendered, no error */
    }
}

static int hex_value(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

/* The byte of a "<0xXX>" text, or -1. */
static int byte_of_text(const char *t, size_t n) {
    if (n != 6 || memcmp(t, "<0x", 3) != 0 || t[5] != '>') return -1;
    int hi = hex_value(t[3]);
    int lo = hex_value(t[4]);
    return hi < 0 || lo < 0 ? -1 : hi * 16 + lo;
}

/* "<｜end▁of▁sentence｜>" (fullwidth bars U+FF5C, U+2581 between words; octal escapes). */
#define DEEPSEEK_EOS "<\357\275\234end\342\226\201of\342\226\201sentence\357\275\234>"

/* Texts that mark a token as end of generation (llama.cpp's list, by text). */
static const char *const eog_texts[] = {"<|eot_id|>",
                                        "<|im_end|>",
                                        "<|end|>",
                                        "<|return|>",
                                        "<|call|>",
                                        "<|flush|>",
                                        "<|calls|>",
                                        "<end_of_turn>",
                                        "<|endoftext|>",
                                        "</s>",
                                        "<|eom_id|>",
                                        "<EOT>",
                                        "_<EOT>",
                                        "[EOT]",
                                        "[EOS]",
                                        "<|end_of_text|>",
                                        "<end_of_utterance>",
                                        "<eos>",
                                        "<turn|>",
                                        "<|tool_response>",
                                        DEEPSEEK_EOS,
                                        "[e~[",
                                        NULL};

/* Texts that identify EOT, EOM and the FIM tokens when the metadata does not name them. */
static const char *const eot_texts[] = {
    "<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>", "<|endoftext|>",      "<|end_of_text|>",
    "<EOT>",      "_<EOT>",     "[EOT]",   DEEPSEEK_EOS,    "<end_of_utterance>", NULL};
static const char *const eom_texts[] = {"<|eom_id|>", NULL};
static const char *const fim_texts[MOEINF_VOCAB_N_FIM][9] = {
    {"<|fim_prefix|>", "<fim-prefix>", "<fim_prefix>",
     "<\357\275\234fim\342\226\201begin\357\275\234>", "<PRE>", "\xe2\x96\x81<PRE>",
     "<|code_prefix|>", "<|prefix|>", NULL},
    {"<|fim_suffix|>", "<fim-suffix>", "<fim_suffix>",
     "<\357\275\234fim\342\226\201hole\357\275\234>", "<SUF>", "\xe2\x96\x81<SUF>",
     "<|code_suffix|>", "<|suffix|>", NULL},
    {"<|fim_middle|>", "<fim-middle>", "<fim_middle>",
     "<\357\275\234fim\342\226\201end\357\275\234>", "<MID>", "\xe2\x96\x81<MID>",
     "<|code_middle|>", "<|middle|>", NULL},
    {"<|fim_pad|>", "<fim-pad>", "<fim_pad>", "<PAD>", "[PAD]", NULL},
    {"<|fim_repo|>", "<|repo_name|>", "<fim-repo>", "<REPO>", "<reponame>", NULL},
    {"<|file_sep|>", NULL},
};

/* Lowest id whose text is in the list, or NO_ID. */
static int32_t find_any(const struct moeinf_vocab *v, const char *const *texts) {
    int32_t best = NO_ID;
    for (int i = 0; texts[i]; i++) {
        int32_t id = find_cstr(v, texts[i]);
        if (id != NO_ID && (best == NO_ID || id < best)) best = id;
    }
    return best;
}

/* An id from metadata: absent -> the default (if in range), present -> must be in range. */
static enum moeinf_status special_id(const struct moeinf_vocab *v, int64_t meta, int32_t def,
                                     const char *key, int32_t *out, struct moeinf_error *err) {
    if (meta < 0) {
        *out = def >= 0 && def < v->n_tokens ? def : NO_ID;
        return MOEINF_OK;
    }
    if (meta >= v->n_tokens)
        return moeinf_fail(err, MOEINF_ERR_FORMAT,
                           "%s: tokenizer.ggml.%s %lld is out of range "
                           "(%d tokens)",
                           v->source, key, (long long)meta, v->n_tokens);
    *out = (int32_t)meta;
    return MOEINF_OK;
}

static enum moeinf_status read_special_ids(struct moeinf_vocab *v,
                                           const struct moeinf_vocab_desc *d, int32_t *fim,
                                           struct moeinf_error *err) {
    static const char *const fim_keys[MOEINF_VOCAB_N_FIM] = {
        "fim_pre_token_id", "fim_suf_token_id", "fim_mid_token_id",
        "fim_pad_token_id", "fim_rep_token_id", "fim_sep_token_id"};
    enum moeinf_status st;
    const struct moeinf_tokenizer_ops *ops = v->ops;
    int32_t bos_default = ops->bos_default_id ? ops->bos_default_id(v) : ops->bos_default;
    if ((st = special_id(v, d->bos_id, bos_default, "bos_token_id", &v->bos, err)) ||
        (st = special_id(v, d->eos_id, ops->eos_default, "eos_token_id", &v->eos, err)) ||
        (st = special_id(v, d->unk_id, ops->unk_default, "unknown_token_id", &v->unk, err)) ||
        (st = special_id(v, d->pad_id, NO_ID, "padding_token_id", &v->pad, err)) ||
        (st = special_id(v, d->eot_id, NO_ID, "eot_token_id", &v->eot, err)) ||
        (st = special_id(v, d->eom_id, NO_ID, "eom_token_id", &v->eom, err)))
        return st;
    for (int i = 0; i < MOEINF_VOCAB_N_FIM; i++)
        if ((st = special_id(v, d->fim_ids[i], NO_ID, fim_keys[i], &fim[i], err))) return st;

    bool def_bos = ops->add_bos_default ? ops->add_bos_default(v) : true;
    v->add_bos = d->add_bos < 0 ? def_bos : d->add_bos != 0;
    v->add_eos = d->add_eos < 0 ? false : d->add_eos != 0;
    v->add_space_prefix =
        d->add_space_prefix < 0 ? ops->add_space_prefix_default : d->add_space_prefix != 0;
    if (v->add_bos && v->bos == NO_ID)
        return moeinf_fail(err, MOEINF_ERR_FORMAT,
                           "%s: tokenizer.ggml.add_bos_token is true, "
                           "but bos_token_id is not set",
                           v->source);
    if (v->add_eos && v->eos == NO_ID)
        return moeinf_fail(err, MOEINF_ERR_FORMAT,
                           "%s: tokenizer.ggml.add_eos_token is true, "
                           "but eos_token_id is not set",
                           v->source);
    return MOEINF_OK;
}

/* llama.cpp finds EOT/EOM/FIM tokens by text when the metadata is silent, and forces every
 * such token, and every end-of-generation text, to be a control token. */
static void find_eog(struct moeinf_vocab *v, int32_t *fim) {
    int32_t *slot[2 + MOEINF_VOCAB_N_FIM];
    const char *const *lists[2 + MOEINF_VOCAB_N_FIM];
    slot[0] = &v->eot, lists[0] = eot_texts;
    slot[1] = &v->eom, lists[1] = eom_texts;
    for (int i = 0; i < MOEINF_VOCAB_N_FIM; i++)
        slot[2 + i] = &fim[i], lists[2 + i] = fim_texts[i];
    for (int k = 0; k < 2 + MOEINF_VOCAB_N_FIM; k++) {
        if (*slot[k] != NO_ID) continue;
        *slot[k] = find_any(v, lists[k]);
        if (*slot[k] != NO_ID) v->tokens[*slot[k]].attr |= MOEINF_TOKEN_ATTR_CONTROL;
    }

    /* Control tokens named "unused..." are unused. */
    for (int32_t id = 0; id < v->n_tokens; id++) {
        struct moeinf_vocab_token *t = &v->tokens[id];
        if ((t->attr & MOEINF_TOKEN_ATTR_CONTROL) &&
            memmem(tok_text(v, id), t->text_len, "unused", 6))
            t->attr |= MOEINF_TOKEN_ATTR_UNUSED;
    }

    for (int i = MOEINF_VOCAB_FIM_PAD; i <= MOEINF_VOCAB_FIM_SEP; i++)
        if (fim[i] != NO_ID) v->eog[fim[i]] = 1;
    for (int i = 0; eog_texts[i]; i++) {
        int32_t id = find_cstr(v, eog_texts[i]);
        if (id == NO_ID) continue;
        v->eog[id] = 1;
        v->tokens[id].attr |= MOEINF_TOKEN_ATTR_CONTROL;
    }
    /* gpt-oss (o200k_harmony): the markup of its channels is user-defined, so that it is
     * always rendered and the generated text shows "<|channel|>analysis<|message|>..."; as in
     * llama.cpp, by text and in any vocabulary, every other attribute dropped. */
    static const char *const harmony_markup[] = {"<|channel|>", "<|message|>", "<|start|>",
                                                 "<|constrain|>"};
    for (size_t i = 0; i < sizeof harmony_markup / sizeof harmony_markup[0]; i++) {
        int32_t id = find_cstr(v, harmony_markup[i]);
        if (id == NO_ID) continue;
        v->tokens[id].attr = MOEINF_TOKEN_ATTR_USER_DEFINED;
        v->tokens[id].markup = true;
    }
    if (v->eos != NO_ID) v->eog[v->eos] = 1;
    if (v->eot != NO_ID) v->eog[v->eot] = 1;
    if (v->eom != NO_ID) v->eog[v->eom] = 1;

    /* gpt-oss / solar-open: "<|end|>" separates turns there and must not stop generation; it
     * becomes user-defined (rendered) too. */
    int32_t end = find_cstr(v, "<|end|>");
    if (end != NO_ID && v->eog[end]) {
        int32_t ret = find_cstr(v, "<|return|>");
        int32_t call = find_cstr(v, "<|call|>");
        int32_t calls = find_cstr(v, "<|calls|>");
        int32_t flush = find_cstr(v, "<|flush|>");
        bool has_call = (call != NO_ID && v->eog[call]) || (calls != NO_ID && v->eog[calls]);
        bool has_ret = ret != NO_ID && v->eog[ret];
        bool has_flush = flush != NO_ID && v->eog[flush];
        if ((has_ret && has_call) || (has_call && has_flush)) {
            v->eog[end] = 0;
            v->tokens[end].attr = MOEINF_TOKEN_ATTR_USER_DEFINED;
            v->tokens[end].markup = true;
        }
    }
    /* gemma4 / paddleocr: "</s>" is ordinary text when "<|tool_response>" exists. */
    int32_t tr = find_cstr(v, "<|tool_response>");
    int32_t s = find_cstr(v, "</s>");
    if (tr != NO_ID && s != NO_ID && v->eog[tr] && v->eog[s]) {
        v->eog[s] = 0;
        v->tokens[s].attr = MOEINF_TOKEN_ATTR_NORMAL;
    }
}

struct len_id {
    uint32_t len;
    int32_t id;
};

static int cmp_len_desc(const void *pa, const void *pb) {
    const struct len_id *a = pa;
    const struct len_id *b = pb;
    if (a->len != b->len) return a->len > b->len ? -1 : 1;
    return (a->id > b->id) - (a->id < b->id);
}

static enum moeinf_status build_special_list(struct moeinf_vocab *v, struct moeinf_error *err) {
    const unsigned mask =
        MOEINF_TOKEN_ATTR_CONTROL | MOEINF_TOKEN_ATTR_USER_DEFINED | MOEINF_TOKEN_ATTR_UNKNOWN;
    int32_t n = 0;
    for (int32_t id = 0; id < v->n_tokens; id++)
        if (v->tokens[id].attr & mask) n++;
    struct len_id *tmp = malloc((size_t)(n ? n : 1) * sizeof *tmp);
    v->special = malloc((size_t)(n ? n : 1) * sizeof *v->special);
    if (!tmp || !v->special) {
        free(tmp);
        return moeinf_fail(err, MOEINF_ERR_NOMEM, "%s: out of memory", v->source);
    }
    n = 0;
    for (int32_t id = 0; id < v->n_tokens; id++)
        if (v->tokens[id].attr & mask) tmp[n++] = (struct len_id){v->tokens[id].text_len, id};
    /* Longest first so that a special text containing another wins; equal lengths in id
     * order to stay deterministic (llama.cpp's std::sort leaves them unspecified). */
    qsort(tmp, (size_t)n, sizeof *tmp, cmp_len_desc);
    for (int32_t i = 0; i < n; i++)
        v->special[i] = tmp[i].id;
    v->n_special = n;
    free(tmp);
    return MOEINF_OK;
}

/* Phi-3 GGUFs do not carry token attributes; llama.cpp sets rstrip on their special tokens
 * by model name, which changes how text next to them is split. */
static void name_rules(struct moeinf_vocab *v, const char *name) {
    if (!name) return;
    char low[256];
    size_t n = strlen(name);
    if (n >= sizeof low) n = sizeof low - 1;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)name[i];
        if (c >= 'A' && c <= 'Z') c = (unsigned char)(c + ('a' - 'A'));
        low[i] = (char)c;
    }
    low[n] = '\0';
    if (!strstr(low, "phi-3") && !strstr(low, "phi3")) return;
    for (int32_t i = 0; i < v->n_special; i++)
        v->tokens[v->special[i]].attr |= MOEINF_TOKEN_ATTR_RSTRIP;
    int32_t id = find_cstr(v, "</s>");
    if (id != NO_ID) v->tokens[id].attr |= MOEINF_TOKEN_ATTR_RSTRIP;
    static const char *const keep[] = {"<unk>", "<s>", "<|endoftext|>"};
    for (size_t i = 0; i < sizeof keep / sizeof keep[0]; i++) {
        id = find_cstr(v, keep[i]);
        if (id != NO_ID) v->tokens[id].attr &= ~(unsigned)MOEINF_TOKEN_ATTR_RSTRIP;
    }
}

/* ---- pieces ----------------------------------------------------------------------------- */

/* Writes the special = true piece of id to dst (NULL: only measure); returns its length. */
static size_t render_piece(const struct moeinf_vocab *v, int32_t id, char *dst) {
    const struct moeinf_vocab_token *t = &v->tokens[id];
    const char *text = tok_text(v, id);
    const unsigned verbatim =
        MOEINF_TOKEN_ATTR_UNKNOWN | MOEINF_TOKEN_ATTR_CONTROL | MOEINF_TOKEN_ATTR_USER_DEFINED;
    if (t->attr & verbatim) {
        if (dst) memcpy(dst, text, t->text_len);
        return t->text_len;
    }
    if (t->attr & MOEINF_TOKEN_ATTR_NORMAL) return v->ops->decode_text(v, text, t->text_len, dst);
    if (t->attr & MOEINF_TOKEN_ATTR_BYTE) {
        if (dst) dst[0] = (char)byte_of_text(text, t->text_len);
        return 1;
    }
    return 0; /* unused, undefined */
}

static enum moeinf_status build_pieces(struct moeinf_vocab *v, struct moeinf_error *err) {
    size_t total = 0;
    for (int32_t id = 0; id < v->n_tokens; id++)
        total += render_piece(v, id, NULL);
    v->piece_arena = malloc(total ? total : 1);
    if (!v->piece_arena) return moeinf_fail(err, MOEINF_ERR_NOMEM, "%s: out of memory", v->source);
    size_t off = 0;
    for (int32_t id = 0; id < v->n_tokens; id++) {
        size_t n = render_piece(v, id, v->piece_arena + off);
        v->tokens[id].piece_off = off;
        v->tokens[id].piece_len = (uint32_t)n;
        off += n;
    }
    return MOEINF_OK;
}

/* ---- init ------------------------------------------------------------------------------- */

/* The table of the desc's tokenizer.ggml.model (absent: "llama"), or an error naming it. */
static enum moeinf_status find_tokenizer(const struct moeinf_vocab_desc *d, const char *src,
                                         const struct moeinf_tokenizer_ops **out,
                                         struct moeinf_error *err) {
    const char *m = d->model ? d->model : "llama";
    *out = moeinf_tokenizer_find(m);
    if (*out) return MOEINF_OK;
    const char *kind = "";
    if (strcmp(m, "gemma4") == 0)
        kind = " (SentencePiece-style BPE)";
    else if (strcmp(m, "bert") == 0)
        kind = " (WordPiece)";
    else if (strcmp(m, "t5") == 0)
        kind = " (Unigram)";
    else if (strcmp(m, "none") == 0 || strcmp(m, "no_vocab") == 0)
        kind = " (no vocabulary)";
    return moeinf_fail(err, MOEINF_ERR_UNSUPPORTED,
                       "%s: %s%s vocabularies are not supported yet (only llama/SentencePiece "
                       "and gpt2/byte-level BPE)",
                       src, moeinf_esc_str(m).s, kind);
}

static size_t text_len_of(const struct moeinf_vocab_desc *d, uint32_t i) {
    return d->text_lens ? (size_t)d->text_lens[i] : strlen(d->texts[i]);
}

/* Copies the texts (empty ones become "[EMPTY_<id>]", as in llama.cpp) and fills the map. */
static enum moeinf_status load_texts(struct moeinf_vocab *v, const struct moeinf_vocab_desc *d,
                                     struct moeinf_error *err) {
    size_t total = 0;
    for (uint32_t i = 0; i < d->n_tokens; i++) {
        size_t n = text_len_of(d, i);
        if (n > UINT32_MAX / 2)
            return moeinf_fail(err, MOEINF_ERR_FORMAT, "%s: token %u text is %zu bytes long",
                               v->source, i, n);
        total += (n ? n : 24) + 1;
    }
    v->text_arena = malloc(total);
    size_t cap = 1;
    while (cap < 2 * (size_t)d->n_tokens)
        cap *= 2;
    v->table = malloc(cap * sizeof *v->table);
    if (!v->text_arena || !v->table)
        return moeinf_fail(err, MOEINF_ERR_NOMEM, "%s: out of memory for %u tokens", v->source,
                           d->n_tokens);
    v->table_mask = cap - 1;
    for (size_t i = 0; i < cap; i++)
        v->table[i] = NO_ID;

    size_t off = 0;
    for (uint32_t i = 0; i < d->n_tokens; i++) {
        struct moeinf_vocab_token *t = &v->tokens[i];
        size_t n = text_len_of(d, i);
        char *dst = v->text_arena + off;
        if (n)
            memcpy(dst, d->texts[i], n);
        else
            n = (size_t)snprintf(dst, 25, "[EMPTY_%u]", i);
        dst[n] = '\0';
        t->text_off = off;
        t->text_len = (uint32_t)n;
        off += n + 1;
        int32_t dup = table_insert(v, (int32_t)i);
        if (dup != NO_ID)
            return moeinf_fail(err, MOEINF_ERR_FORMAT,
                               "%s: duplicate token in vocabulary: '%s' has ids %d and %u",
                               v->source, moeinf_esc(dst, n).s, dup, i);
    }
    return MOEINF_OK;
}

static enum moeinf_status load_tokens(struct moeinf_vocab *v, const struct moeinf_vocab_desc *d,
                                      struct moeinf_error *err) {
    for (uint32_t i = 0; i < d->n_tokens; i++) {
        struct moeinf_vocab_token *t = &v->tokens[i];
        t->score = d->scores ? d->scores[i] : 0.0f;
        if (t->score != t->score)
            return moeinf_fail(err, MOEINF_ERR_FORMAT, "%s: tokenizer.ggml.scores[%u] is NaN",
                               v->source, i);
        t->attr = d->types ? attr_of_type(d->types[i]) : MOEINF_TOKEN_ATTR_NORMAL;
        if ((t->attr & MOEINF_TOKEN_ATTR_BYTE) &&
            byte_of_text(tok_text(v, (int32_t)i), t->text_len) < 0)
            return moeinf_fail(err, MOEINF_ERR_FORMAT,
                               "%s: token %u has type byte but its text '%s' is not <0xXX>",
                               v->source, i, moeinf_esc(tok_text(v, (int32_t)i), t->text_len).s);
    }
    for (int b = 0; b < 256; b++) {
        char hex[7];
        snprintf(hex, sizeof hex, "<0x%02X>", b);
        int32_t id = find_cstr(v, hex);
        if (id == NO_ID) {
            char c = (char)b;
            id = moeinf_vocab_find(v, &c, 1);
        }
        v->byte_token[b] = id;
    }
    return MOEINF_OK;
}

enum moeinf_status moeinf_vocab_init(const struct moeinf_vocab_desc *desc,
                                     struct moeinf_vocab **out, struct moeinf_error *err) {
    const char *src = desc->source ? desc->source : "(memory)";
    const struct moeinf_tokenizer_ops *ops;
    enum moeinf_status st = find_tokenizer(desc, src, &ops, err);
    if (st != MOEINF_OK) return st;
    if (desc->n_tokens == 0 || !desc->texts)
        return moeinf_fail(err, MOEINF_ERR_FORMAT, "%s: the vocabulary has no tokens", src);
    if (desc->n_tokens > INT32_MAX)
        return moeinf_fail(err, MOEINF_ERR_FORMAT, "%s: %u tokens is more than ids can hold", src,
                           desc->n_tokens);
    if (desc->scores && desc->n_scores < desc->n_tokens)
        return moeinf_fail(err, MOEINF_ERR_FORMAT,
                           "%s: tokenizer.ggml.scores has %llu entries for %u tokens", src,
                           (unsigned long long)desc->n_scores, desc->n_tokens);
    if (desc->types && desc->n_types < desc->n_tokens)
        return moeinf_fail(err, MOEINF_ERR_FORMAT,
                           "%s: tokenizer.ggml.token_type has %llu entries for %u tokens", src,
                           (unsigned long long)desc->n_types, desc->n_tokens);

    struct moeinf_vocab *v = calloc(1, sizeof *v);
    if (!v) return moeinf_fail(err, MOEINF_ERR_NOMEM, "%s: out of memory", src);
    v->ops = ops;
    snprintf(v->source, sizeof v->source, "%s", src);
    v->n_tokens = (int32_t)desc->n_tokens;
    v->tokens = calloc(desc->n_tokens, sizeof *v->tokens);
    v->eog = calloc(desc->n_tokens, 1);
    if (!v->tokens || !v->eog) {
        st = moeinf_fail(err, MOEINF_ERR_NOMEM, "%s: out of memory for %u tokens", src,
                         desc->n_tokens);
        goto fail;
    }
    int32_t fim[MOEINF_VOCAB_N_FIM];
    if ((st = load_texts(v, desc, err)) || (st = load_tokens(v, desc, err))) goto fail;
    if (ops->init && (st = ops->init(v, desc, err))) goto fail;
    if ((st = read_special_ids(v, desc, fim, err))) goto fail;
    find_eog(v, fim);
    if ((st = build_special_list(v, err)) || (st = build_pieces(v, err))) goto fail;
    name_rules(v, desc->name);
    *out = v;
    return MOEINF_OK;

fail:
    moeinf_vocab_free(v);
    return st;
}

void moeinf_vocab_free(struct moeinf_vocab *v) {
    if (!v) return;
    if (v->ops->free) v->ops->free(v);
    free(v->tokens);
    free(v->text_arena);
    free(v->piece_arena);
    free(v->table);
    free(v->eog);
    free(v->special);
    free(v);
}

/* ---- accessors -------------------------------------------------------------------------- */

int32_t moeinf_vocab_n_tokens(const struct moeinf_vocab *v) {
    return v->n_tokens;
}

int32_t moeinf_vocab_bos(const struct moeinf_vocab *v) {
    return v->bos;
}

int32_t moeinf_vocab_eos(const struct moeinf_vocab *v) {
    return v->eos;
}

int32_t moeinf_vocab_eot(const struct moeinf_vocab *v) {
    return v->eot;
}

int32_t moeinf_vocab_eom(const struct moeinf_vocab *v) {
    return v->eom;
}

int32_t moeinf_vocab_unk(const struct moeinf_vocab *v) {
    return v->unk;
}

int32_t moeinf_vocab_pad(const struct moeinf_vocab *v) {
    return v->pad;
}

bool moeinf_vocab_add_bos(const struct moeinf_vocab *v) {
    return v->add_bos;
}

bool moeinf_vocab_add_eos(const struct moeinf_vocab *v) {
    return v->add_eos;
}

bool moeinf_vocab_add_space_prefix(const struct moeinf_vocab *v) {
    return v->add_space_prefix;
}

static bool valid_id(const struct moeinf_vocab *v, int32_t id) {
    return id >= 0 && id < v->n_tokens;
}

bool moeinf_vocab_is_eog(const struct moeinf_vocab *v, int32_t id) {
    return valid_id(v, id) && v->eog[id];
}

unsigned moeinf_vocab_attr(const struct moeinf_vocab *v, int32_t id) {
    return valid_id(v, id) ? v->tokens[id].attr : 0;
}

const char *moeinf_vocab_text(const struct moeinf_vocab *v, int32_t id, size_t *len) {
    if (!valid_id(v, id)) return NULL;
    if (len) *len = v->tokens[id].text_len;
    return tok_text(v, id);
}

float moeinf_vocab_score(const struct moeinf_vocab *v, int32_t id) {
    return valid_id(v, id) ? v->tokens[id].score : 0.0f;
}

const char *moeinf_vocab_piece(const struct moeinf_vocab *v, int32_t id, bool special,
                               size_t *len) {
    if (!valid_id(v, id) || (!special && (v->tokens[id].attr & (MOEINF_TOKEN_ATTR_UNKNOWN |
                                                                MOEINF_TOKEN_ATTR_CONTROL)))) {
        if (len) *len = 0;
        return "";
    }
    if (len) *len = v->tokens[id].piece_len;
    return v->piece_arena + v->tokens[id].piece_off;
}

/* ---- detokenizing ----------------------------------------------------------------------- */

/* Drops the space before each of ?!.,; returns the new length (rewrites t in place). */
static size_t clean_punct(char *t, size_t n) {
    size_t o = n ? 1 : 0;
    for (size_t i = 1; i < n; i++) {
        char x = t[i];
        if (t[i - 1] == ' ' && (x == '?' || x == '!' || x == '.' || x == ',')) o--;
        t[o++] = x;
    }
    return o;
}

/* " ' " -> "'": an apostrophe between spaces loses both. */
static size_t clean_lone_quote(char *t, size_t n) {
    size_t o = n ? 1 : 0;
    for (size_t i = 1; i < n; i++) {
        char x = t[i];
        if (x == '\'' && i + 1 < n && t[i - 1] == ' ' && t[i + 1] == ' ') {
            o--;           /* the space before goes */
            t[++i] = '\0'; /* and the one after: skipped, and no longer a space for the
                               next quote's test (llama.cpp's way; "a ' ' b" -> "a'' b") */
        }
        t[o++] = x;
    }
    return o;
}

/* " 's", " 'm", " 're", " 've" lose their space (not " 't", " 'd", " 'll"). */
static size_t clean_contractions(char *t, size_t n) {
    size_t o = n ? 1 : 0;
    for (size_t i = 1; i < n; i++) {
        char x = t[i];
        if (t[i - 1] == ' ' && x == '\'' && i + 1 < n) {
            char x1 = t[i + 1];
            bool two = i + 2 < n && (x1 == 'r' || x1 == 'v') && t[i + 2] == 'e';
            if (x1 == 's' || x1 == 'm' || two) o--;
        }
        t[o++] = x;
    }
    return o;
}

/* llama.cpp's clean_up_tokenization_spaces for BPE vocabularies (its detokenize): three passes
 * over the bytes, in place. */
static size_t clean_spaces(char *t, size_t n) {
    n = clean_punct(t, n);
    n = clean_lone_quote(t, n);
    return clean_contractions(t, n);
}

enum moeinf_status moeinf_vocab_detokenize(const struct moeinf_vocab *v, const int32_t *ids,
                                           size_t n, bool remove_special, bool unparse_special,
                                           char **out, size_t *n_out, struct moeinf_error *err) {
    for (size_t i = 0; i < n; i++)
        if (!valid_id(v, ids[i]))
            return moeinf_fail(err, MOEINF_ERR_ARG,
                               "detokenize: token id %d at %zu is outside "
                               "the vocabulary (%d tokens)",
                               ids[i], i, v->n_tokens);
    bool remove_space = v->add_space_prefix;
    if (remove_special && v->add_bos && n > 0 && ids[0] == v->bos) {
        /* llama.cpp keeps the space after a dropped BOS. */
        remove_space = false;
        ids++;
        n--;
    }
    if (remove_special && v->add_eos && n > 0 && ids[n - 1] == v->eos) n--;

    size_t total = 0;
    for (size_t i = 0; i < n; i++) {
        size_t len;
        moeinf_vocab_piece(v, ids[i], unparse_special, &len);
        total += len;
    }
    char *buf = malloc(total + 1);
    if (!buf) return moeinf_fail(err, MOEINF_ERR_NOMEM, "detokenize: out of memory");
    size_t pos = 0;
    for (size_t i = 0; i < n; i++) {
        size_t len;
        const char *p = moeinf_vocab_piece(v, ids[i], unparse_special, &len);
        if (remove_space && len > 0 && p[0] == ' ') p++, len--;
        remove_space = false;
        memcpy(buf + pos, p, len);
        pos += len;
    }
    if (v->clean_spaces) pos = clean_spaces(buf, pos);
    buf[pos] = '\0';
    *out = buf;
    *n_out = pos;
    return MOEINF_OK;
}

void moeinf_detok_init(struct moeinf_detok *d) {
    d->n_held = 0;
}

/* Length of the UTF-8 sequence a lead byte starts (1 for ASCII), and the range its second
 * byte must fall in (Unicode's table of well-formed sequences: this excludes overlong forms,
 * surrogates and code points past U+10FFFF); 0 for bytes that cannot start one. */
static size_t utf8_lead(unsigned char c, unsigned char *lo, unsigned char *hi) {
    *lo = 0x80;
    *hi = 0xBF;
    if (c < 0x80) return 1;
    if (c >= 0xC2 && c <= 0xDF) return 2;
    if (c == 0xE0) *lo = 0xA0;
    if (c == 0xED) *hi = 0x9F;
    if (c >= 0xE0 && c <= 0xEF) return 3;
    if (c == 0xF0) *lo = 0x90;
    if (c == 0xF4) *hi = 0x8F;
    if (c >= 0xF0 && c <= 0xF4) return 4;
    return 0;
}

static size_t put_replacement(char *out) {
    out[0] = (char)0xEF; /* U+FFFD REPLACEMENT CHARACTER */
    out[1] = (char)0xBF;
    out[2] = (char)0xBD;
    return 3;
}

/*
 * A byte at a time: a complete well-formed sequence is copied out; a lead byte and the
 * continuations that fit it are held until the sequence is complete; where a byte cannot
 * continue the held prefix, the prefix becomes one U+FFFD and the byte starts afresh; a
 * byte that cannot start a sequence is one U+FFFD. (Unicode's "maximal subpart" practice,
 * which browsers and terminals follow.)
 */
size_t moeinf_detok_push(struct moeinf_detok *d, const char *piece, size_t len, char *out) {
    size_t o = 0;
    for (size_t i = 0; i < len;) {
        const unsigned char c = (unsigned char)piece[i];
        unsigned char lo;
        unsigned char hi;
        if (d->n_held == 0) {
            size_t need = utf8_lead(c, &lo, &hi);
            if (need == 1) {
                out[o++] = (char)c;
            } else if (need == 0) {
                o += put_replacement(out + o);
            } else {
                d->held[d->n_held++] = c;
            }
            i++;
            continue;
        }
        size_t need = utf8_lead(d->held[0], &lo, &hi);
        if (d->n_held > 1) lo = 0x80, hi = 0xBF;
        if (c < lo || c > hi) { /* the held prefix ends here; c is looked at again */
            o += put_replacement(out + o);
            d->n_held = 0;
            continue;
        }
        d->held[d->n_held++] = c;
        i++;
        if (d->n_held == need) {
            memcpy(out + o, d->held, need);
            o += need;
            d->n_held = 0;
        }
    }
    return o;
}

size_t moeinf_detok_flush(struct moeinf_detok *d, char *out) {
    if (d->n_held == 0) return 0;
    d->n_held = 0; /* a sequence cut short by the end of the text */
    return put_replacement(out);
}
