/*
 * bigram_queue.h - the merge queue of the SentencePiece (spm.c) and byte-level BPE (bpe.c)
 * tokenizers: candidate merges of two adjacent pieces, popped smallest key first and, on equal
 * keys, leftmost first (llama.cpp's order). SPM's key is the merged token's score, negated
 * (higher scores first); BPE's is the merge rank. A double holds both exactly.
 */
#ifndef MOEINF_TOKENIZER_BIGRAM_QUEUE_H
#define MOEINF_TOKENIZER_BIGRAM_QUEUE_H

#include <stdbool.h>
#include <stddef.h>

struct moeinf_bigram {
    int left, right; /* the pieces' indices */
    double key;
    size_t size; /* bytes of the pair when queued: stale if the pieces changed since */
};

struct moeinf_bigram_queue {
    struct moeinf_bigram *data;
    size_t n, cap;
};

/* False when out of memory (the queue is unchanged). */
bool moeinf_bigram_push(struct moeinf_bigram_queue *q, struct moeinf_bigram b);
/* The first bigram; the queue must not be empty. */
struct moeinf_bigram moeinf_bigram_pop(struct moeinf_bigram_queue *q);
void moeinf_bigram_queue_free(struct moeinf_bigram_queue *q);

#endif
