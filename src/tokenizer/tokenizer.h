/*
 * tokenizer.h - the tokenizer interface: a table of functions per tokenizer.ggml.model, which
 * the vocabulary (vocab.c) and the tokenizing driver (tokenize.c) call through its pointer,
 * plus a registry that finds a table by model name. Each tokenizer calls only down (vocab.c's
 * lookups, the id array below), never back into the driver: the table is what keeps
 * vocab.c, tokenize.c, spm.c and bpe.c from calling each other around a loop.
 *
 * Registering a tokenizer: write <name>.c defining
 *   const struct moeinf_tokenizer_ops moeinf_tokenizer_<name> = {.model = "...", ...};
 * declare it here and add &moeinf_tokenizer_<name> to the table in tokenizer.c; vocab.c's
 * message for an unsupported model names the supported ones.
 */
#ifndef MOEINF_TOKENIZER_TOKENIZER_H
#define MOEINF_TOKENIZER_TOKENIZER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tokenizer/vocab.h"

/* A growing array of ids. */
struct moeinf_ids {
    int32_t *data;
    size_t n, cap;
};

/* Appends id; false when out of memory (the array is then unchanged). */
bool moeinf_ids_push(struct moeinf_ids *a, int32_t id);

struct moeinf_tokenizer_ops {
    const char *model; /* tokenizer.ggml.model: "llama", "gpt2" */

    /* Defaults for keys the metadata leaves out: ids (-1: none; an id out of range is none
     * too) and add_space_prefix. */
    int32_t bos_default, eos_default, unk_default;
    bool add_space_prefix_default;

    /* (optional) builds the tokenizer's part of v once the token texts, attributes and byte
     * tokens are in, before the special ids are read */
    enum moeinf_status (*init)(struct moeinf_vocab *v, const struct moeinf_vocab_desc *d,
                               struct moeinf_error *err);
    /* (optional) frees it; called on every vocabulary of this model, built or partly built */
    void (*free)(struct moeinf_vocab *v);
    /* (optional; NULL: true) add_bos when the metadata leaves it out; after init */
    bool (*add_bos_default)(const struct moeinf_vocab *v);
    /* (optional; NULL: bos_default) the BOS id when the metadata leaves it out; after init */
    int32_t (*bos_default_id)(const struct moeinf_vocab *v);

    /* Tokenizes one text fragment (between special tokens) into out; `prefix` asks for the
     * space prefix (tokenize.c: add_space_prefix and the fragment is first or follows a
     * special token; a tokenizer without one ignores it). */
    enum moeinf_status (*fragment)(const struct moeinf_vocab *v, const char *text, size_t len,
                                   bool prefix, struct moeinf_ids *out, struct moeinf_error *err);
    /* A normal token's text as the bytes its piece prints (dst NULL: only measure); returns
     * the length. */
    size_t (*decode_text)(const struct moeinf_vocab *v, const char *text, size_t n, char *dst);
};

extern const struct moeinf_tokenizer_ops moeinf_tokenizer_spm; /* spm.c: "llama" */
extern const struct moeinf_tokenizer_ops moeinf_tokenizer_bpe; /* bpe.c: "gpt2" */

/* The table of tokenizer.ggml.model `model`, or NULL when none is registered. */
const struct moeinf_tokenizer_ops *moeinf_tokenizer_find(const char *model);

#endif
