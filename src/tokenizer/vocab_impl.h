/*
 * vocab_impl.h - the inside of struct moeinf_vocab, shared by vocab.c (building, pieces,
 * lookups) and spm.c (tokenizing). Nothing outside src/tokenizer includes it.
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
};

struct moeinf_vocab {
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
    char source[128]; /* file name for messages */
};

#endif
