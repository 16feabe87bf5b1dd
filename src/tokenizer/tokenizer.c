/*
 * tokenizer.c - the registry of tokenizers (tokenizer.h) and the id array they fill.
 */
#include <stdlib.h>
#include <string.h>

#include "tokenizer/tokenizer.h"

static const struct moeinf_tokenizer_ops *const tokenizers[] = {
    &moeinf_tokenizer_spm,
    &moeinf_tokenizer_bpe,
};

const struct moeinf_tokenizer_ops *moeinf_tokenizer_find(const char *model) {
    for (size_t i = 0; i < sizeof tokenizers / sizeof tokenizers[0]; i++)
        if (strcmp(tokenizers[i]->model, model) == 0) return tokenizers[i];
    return NULL;
}

bool moeinf_ids_push(struct moeinf_ids *a, int32_t id) {
    if (a->n == a->cap) {
        size_t cap = a->cap ? 2 * a->cap : 64;
        int32_t *p = realloc(a->data, cap * sizeof *p);
        if (!p) return false;
        a->data = p;
        a->cap = cap;
    }
    a->data[a->n++] = id;
    return true;
}
