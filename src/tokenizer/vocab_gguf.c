/*
 * vocab_gguf.c - reads tokenizer.ggml.* from a GGUF into a struct moeinf_vocab_desc and
 * builds the vocabulary (vocab.c). Keys and their defaults are llama.cpp's.
 */
#include <stdlib.h>
#include <string.h>

#include "base/escape.h"
#include "base/status.h"
#include "gguf/gguf.h"
#include "tokenizer/vocab.h"

/* An optional uint32 id into *out (-1 when absent). */
static enum moeinf_status opt_id(const struct moeinf_gguf *g, const char *key, int64_t *out,
                                 struct moeinf_error *err) {
    uint32_t v = 0;
    enum moeinf_status st = moeinf_gguf_get_u32_opt(g, key, &v, err);
    if (st != MOEINF_OK) return st;
    /* _opt leaves v untouched when the key is absent; presence decides. */
    *out = moeinf_gguf_find_key(g, key) >= 0 ? (int64_t)v : -1;
    return MOEINF_OK;
}

static enum moeinf_status opt_flag(const struct moeinf_gguf *g, const char *key, int *out,
                                   struct moeinf_error *err) {
    bool b = false;
    enum moeinf_status st = moeinf_gguf_get_bool_opt(g, key, &b, err);
    if (st != MOEINF_OK) return st;
    *out = moeinf_gguf_find_key(g, key) >= 0 ? (int)b : -1;
    return MOEINF_OK;
}

/* A NUL-terminated copy of a gguf string (at most 255 bytes kept). */
static void copy_str(char *dst, size_t size, struct moeinf_gguf_str s) {
    size_t n = s.len < size - 1 ? (size_t)s.len : size - 1;
    memcpy(dst, s.data, n);
    dst[n] = '\0';
}

/* A gpt2 vocabulary's tokenizer.ggml.pre (copied into pre, when present) and
 * tokenizer.ggml.merges (required; *merges and *lens are malloc'ed views into g, the caller
 * frees them even on failure). */
static enum moeinf_status read_bpe_keys(const struct moeinf_gguf *g, struct moeinf_vocab_desc *d,
                                        char *pre, size_t pre_size, const char ***merges,
                                        uint64_t **lens, struct moeinf_error *err) {
    struct moeinf_gguf_str s = {0};
    enum moeinf_status st = moeinf_gguf_get_str_opt(g, "tokenizer.ggml.pre", &s, err);
    if (st != MOEINF_OK) return st;
    if (s.data) {
        if (s.len >= pre_size)
            return moeinf_fail(err, MOEINF_ERR_UNSUPPORTED,
                               "%s: unknown pre-tokenizer '%s' (tokenizer.ggml.pre)", g->path,
                               moeinf_esc(s.data, (size_t)s.len).s);
        copy_str(pre, pre_size, s);
        d->pre = pre;
    }
    const struct moeinf_gguf_kv *mk;
    st = moeinf_gguf_get_arr(g, "tokenizer.ggml.merges", MOEINF_GGUF_TYPE_STRING, &mk, err);
    if (st != MOEINF_OK) return st;
    size_t n = mk->n_elem ? (size_t)mk->n_elem : 1;
    *merges = malloc(n * sizeof **merges);
    *lens = malloc(n * sizeof **lens);
    if (!*merges || !*lens)
        return moeinf_fail(err, MOEINF_ERR_NOMEM, "%s: out of memory reading the merges", g->path);
    for (uint64_t i = 0; i < mk->n_elem; i++) {
        struct moeinf_gguf_str t = moeinf_gguf_arr_str(mk, i);
        (*merges)[i] = t.data;
        (*lens)[i] = t.len;
    }
    d->merges = *merges;
    d->merge_lens = *lens;
    d->n_merges = mk->n_elem;
    return MOEINF_OK;
}

enum moeinf_status moeinf_vocab_init_from_gguf(const struct moeinf_gguf *g,
                                               struct moeinf_vocab **out,
                                               struct moeinf_error *err) {
    struct moeinf_vocab_desc d = moeinf_vocab_desc_default();
    const char **texts = NULL;
    uint64_t *lens = NULL;
    float *scores = NULL;
    int32_t *types = NULL;
    const char **merges = NULL;
    uint64_t *merge_lens = NULL;
    char pre[64];
    char model[64];
    char name[256];
    enum moeinf_status st;
    d.source = g->path;

    struct moeinf_gguf_str s;
    if ((st = moeinf_gguf_get_str(g, "tokenizer.ggml.model", &s, err))) return st;
    copy_str(model, sizeof model, s);
    d.model = model;
    s.data = NULL;
    if ((st = moeinf_gguf_get_str_opt(g, "general.name", &s, err))) return st;
    if (s.data) {
        copy_str(name, sizeof name, s);
        d.name = name;
    }
    if (strcmp(model, "llama") != 0 && strcmp(model, "gpt2") != 0)
        return moeinf_vocab_init(&d, out, err); /* names it */
    if (strcmp(model, "gpt2") == 0 &&
        (st = read_bpe_keys(g, &d, pre, sizeof pre, &merges, &merge_lens, err)))
        goto done;

    const struct moeinf_gguf_kv *tok;
    if ((st = moeinf_gguf_get_arr(g, "tokenizer.ggml.tokens", MOEINF_GGUF_TYPE_STRING, &tok, err)))
        goto done;
    if (tok->n_elem > INT32_MAX) {
        st = moeinf_fail(err, MOEINF_ERR_FORMAT, "%s: tokenizer.ggml.tokens has %llu entries",
                         g->path, (unsigned long long)tok->n_elem);
        goto done;
    }
    uint32_t n = (uint32_t)tok->n_elem;
    texts = malloc((n ? n : 1) * sizeof *texts);
    lens = malloc((n ? n : 1) * sizeof *lens);
    if (!texts || !lens) goto nomem;
    for (uint32_t i = 0; i < n; i++) {
        struct moeinf_gguf_str t = moeinf_gguf_arr_str(tok, i);
        texts[i] = t.data;
        lens[i] = t.len;
    }
    d.n_tokens = n;
    d.texts = texts;
    d.text_lens = lens;

    int64_t ki = moeinf_gguf_find_key(g, "tokenizer.ggml.scores");
    if (ki >= 0) {
        const struct moeinf_gguf_kv *kv = &g->kv[ki];
        if (kv->type != MOEINF_GGUF_TYPE_ARRAY || (kv->elem_type != MOEINF_GGUF_TYPE_FLOAT32 &&
                                                   kv->elem_type != MOEINF_GGUF_TYPE_INT32)) {
            st = moeinf_fail(err, MOEINF_ERR_FORMAT,
                             "%s: tokenizer.ggml.scores is not an array "
                             "of float32 or int32",
                             g->path);
            goto done;
        }
        uint64_t m = kv->n_elem < n ? kv->n_elem : n; /* fewer than n: vocab init names it */
        scores = malloc((m ? m : 1) * sizeof *scores);
        if (!scores) goto nomem;
        for (uint64_t i = 0; i < m; i++)
            scores[i] = moeinf_gguf_arr_f32(kv, i);
        d.scores = scores;
        d.n_scores = kv->n_elem;
    }
    if (moeinf_gguf_find_key(g, "tokenizer.ggml.token_type") >= 0) {
        const struct moeinf_gguf_kv *kv;
        if ((st = moeinf_gguf_get_arr(g, "tokenizer.ggml.token_type", MOEINF_GGUF_TYPE_INT32, &kv,
                                      err)))
            goto done;
        uint64_t m = kv->n_elem < n ? kv->n_elem : n;
        types = malloc((m ? m : 1) * sizeof *types);
        if (!types) goto nomem;
        for (uint64_t i = 0; i < m; i++)
            types[i] = moeinf_gguf_arr_i32(kv, i);
        d.types = types;
        d.n_types = kv->n_elem;
    }

    static const char *const fim_keys[MOEINF_VOCAB_N_FIM] = {
        "tokenizer.ggml.fim_pre_token_id", "tokenizer.ggml.fim_suf_token_id",
        "tokenizer.ggml.fim_mid_token_id", "tokenizer.ggml.fim_pad_token_id",
        "tokenizer.ggml.fim_rep_token_id", "tokenizer.ggml.fim_sep_token_id"};
    if ((st = opt_id(g, "tokenizer.ggml.bos_token_id", &d.bos_id, err)) ||
        (st = opt_id(g, "tokenizer.ggml.eos_token_id", &d.eos_id, err)) ||
        (st = opt_id(g, "tokenizer.ggml.unknown_token_id", &d.unk_id, err)) ||
        (st = opt_id(g, "tokenizer.ggml.padding_token_id", &d.pad_id, err)) ||
        (st = opt_id(g, "tokenizer.ggml.eot_token_id", &d.eot_id, err)) ||
        (st = opt_id(g, "tokenizer.ggml.eom_token_id", &d.eom_id, err)) ||
        (st = opt_flag(g, "tokenizer.ggml.add_bos_token", &d.add_bos, err)) ||
        (st = opt_flag(g, "tokenizer.ggml.add_eos_token", &d.add_eos, err)) ||
        (st = opt_flag(g, "tokenizer.ggml.add_space_prefix", &d.add_space_prefix, err)))
        goto done;
    for (int i = 0; i < MOEINF_VOCAB_N_FIM; i++)
        if ((st = opt_id(g, fim_keys[i], &d.fim_ids[i], err))) goto done;
    /* Deprecated spellings of the first three. */
    static const char *const old_keys[3] = {"tokenizer.ggml.prefix_token_id",
                                            "tokenizer.ggml.suffix_token_id",
                                            "tokenizer.ggml.middle_token_id"};
    for (int i = 0; i < 3; i++)
        if (d.fim_ids[i] < 0 && (st = opt_id(g, old_keys[i], &d.fim_ids[i], err))) goto done;

    st = moeinf_vocab_init(&d, out, err);
    goto done;

nomem:
    st = moeinf_fail(err, MOEINF_ERR_NOMEM, "%s: out of memory reading the vocabulary", g->path);
done:
    free(merges);
    free(merge_lens);
    free(texts);
    free(lens);
    free(scores);
    free(types);
    return st;
}
