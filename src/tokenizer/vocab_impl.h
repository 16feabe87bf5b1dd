/*
 * vocab_impl.h - the inside of struct moeinf_vocab, shared by vocab.c (building, pieces,
 * lookups), tokenize.c (special tokens, dispatch), spm.c and bpe.c (the two tokenizers,
 * reached through the table in tokenizer.h). Nothing outside src/tokenizer includes it.
 */
#ifndef MOEINF_TOKENIZER_VOCAB_IMPL_H
#define MOEINF_TOKENIZER_VOCAB_IMPL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tokenizer/vocab.h"

struct moeinf_vocab_token {
    size_t text_off;  /* into text_arena; the text is also NUL-terminated there */
    size_t piece_off; /* into piece_arena: the piece as rendered with special = true */
    uint32_t text_len;
    uint32_t piece_len;
    float score;
    unsigned attr; /* enum moeinf_token_attr bits */
    bool markup;   /* a turn or channel marker that llama.cpp makes user-defined so that it is
                      rendered (gpt-oss's <|start|>, <|end|>, ...): still not recognised in a
                      chat message's text, like a control token (tokenize.c) */
};

/* tokenizer.ggml.merges: "left right" -> rank (its index; the first of duplicates wins). */
struct moeinf_bpe_merges {
    char *arena;    /* the merge strings, each NUL-terminated */
    size_t *off;    /* [n] into arena */
    uint32_t *len;  /* [n] */
    int32_t *rank;  /* [n] index in tokenizer.ggml.merges */
    int32_t n;      /* merges kept (those with a space after their first byte) */
    int32_t *table; /* open addressing: merge string -> entry, -1 = empty */
    size_t table_mask;
};

struct moeinf_pretok;
struct moeinf_tokenizer_ops;

struct moeinf_vocab {
    const struct moeinf_tokenizer_ops *ops; /* by tokenizer.ggml.model (tokenizer.h) */
    int32_t n_tokens;
    struct moeinf_vocab_token *tokens; /* [n_tokens] */
    char *text_arena;
    char *piece_arena;
    int32_t *table;          /* open-addressing text -> id map, -1 = empty */
    size_t table_mask;       /* capacity - 1 (a power of two) */
    int32_t byte_token[256]; /* <0xXX> (else the one-byte token) per byte, -1 if none */
    unsigned char *eog;      /* [n_tokens] 1 for end-of-generation tokens */
    int32_t *special;        /* ids split out before tokenizing: longest text first */
    int32_t n_special;
    int32_t bos, eos, unk, pad, eot, eom;
    bool add_bos, add_eos, add_space_prefix;
    /* BPE only (bpe.c's init fills them; clean_spaces, read by vocab.c, stays false otherwise) */
    struct moeinf_pretok *pretok;
    struct moeinf_bpe_merges merges;
    bool ignore_merges, clean_spaces;
    char byte_utf8[256][2]; /* GPT-2's byte -> character map, as UTF-8 */
    unsigned char byte_utf8_len[256];
    char source[128]; /* file name for messages */
};

/* FNV-1a of n bytes: the hash of the token-text and merge tables. */
static inline uint64_t moeinf_hash_bytes(const char *s, size_t n) {
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < n; i++) {
        h ^= (unsigned char)s[i];
        h *= 0x100000001b3ull;
    }
    return h;
}

#endif
