/* bigram_queue.c - a binary heap of merge candidates; see bigram_queue.h. */
#include "tokenizer/bigram_queue.h"

#include <stdlib.h>

/* a pops before b: smaller key, then the leftmost pair. */
static bool before(const struct moeinf_bigram *a, const struct moeinf_bigram *b) {
    return a->key < b->key || (a->key == b->key && a->left < b->left);
}

bool moeinf_bigram_push(struct moeinf_bigram_queue *q, struct moeinf_bigram b) {
    if (q->n == q->cap) {
        size_t cap = q->cap ? 2 * q->cap : 64;
        struct moeinf_bigram *p = realloc(q->data, cap * sizeof *p);
        if (!p) return false;
        q->data = p;
        q->cap = cap;
    }
    size_t i = q->n++;
    while (i > 0) {
        size_t parent = (i - 1) / 2;
        if (!before(&b, &q->data[parent])) break;
        q->data[i] = q->data[parent];
        i = parent;
    }
    q->data[i] = b;
    return true;
}

struct moeinf_bigram moeinf_bigram_pop(struct moeinf_bigram_queue *q) {
    struct moeinf_bigram top = q->data[0];
    struct moeinf_bigram last = q->data[--q->n];
    size_t i = 0;
    for (;;) {
        size_t l = 2 * i + 1;
        size_t r = l + 1;
        size_t best = i;
        const struct moeinf_bigram *cand = &last;
        if (l < q->n && before(&q->data[l], cand)) best = l, cand = &q->data[l];
        if (r < q->n && before(&q->data[r], cand)) best = r;
        if (best == i) break;
        q->data[i] = q->data[best];
        i = best;
    }
    if (q->n > 0) q->data[i] = last;
    return top;
}

void moeinf_bigram_queue_free(struct moeinf_bigram_queue *q) {
    free(q->data);
    *q = (struct moeinf_bigram_queue){0};
}
