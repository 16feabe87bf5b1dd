/*
 * decode_check.h - for the tests of contexts that go back (test_recurrent.c,
 * test_sliding_window.c): decoding a span of a prompt must give, bit for bit, the rows a fresh
 * context computed for the whole prompt in one call.
 */
#ifndef MOEINF_TESTS_DECODE_CHECK_H
#define MOEINF_TESTS_DECODE_CHECK_H

#include <stdlib.h>
#include <string.h>

#include "moeinf.h"
#include "test.h"

/* Decodes ids[from, to) (all logits) and checks them against rows from.. of ref, and that the
 * context then holds `to` tokens. */
static inline void decode_check(struct moeinf_context *ctx, const int32_t *ids, int from, int to,
                                const float *ref, int n_vocab, const char *what) {
    struct moeinf_error err = {0};
    float *out = malloc((size_t)(to - from) * (size_t)n_vocab * sizeof(float));
    CHECK(out != NULL);
    if (!out) return;
    CHECK_MSG(moeinf_decode(ctx, ids + from, to - from, out, true, &err) == MOEINF_OK, "%s: %s",
              what, err.msg);
    CHECK_EQ_INT(moeinf_context_n_past(ctx), to);
    size_t bytes = (size_t)(to - from) * (size_t)n_vocab * sizeof(float);
    CHECK_MSG(memcmp(out, ref + (size_t)from * n_vocab, bytes) == 0,
              "%s: logits of positions %d..%d differ from a fresh context's", what, from, to - 1);
    free(out);
}

#endif
