/* engine_kv.c - a context's sequences: their sizes, keeping a prefix of one's KV cache
 * (moeinf_context_truncate, _seq_truncate), starting one over, and the version. */
#include "base/status.h"
#include "engine/engine.h"

#define STR(x)     #x
#define VERSION(x) STR(x)

enum moeinf_status moeinf_context_seq_truncate(struct moeinf_context *ctx, int seq, int n_keep,
                                               struct moeinf_error *err) {
    if (seq < 0 || seq >= ctx->params.n_seq) {
        return moeinf_fail(err, MOEINF_ERR_ARG, "sequence %d is not in [0, %d)", seq,
                           ctx->params.n_seq);
    }
    int *n_past = &ctx->seq_past[seq];
    if (n_keep < 0 || n_keep > *n_past) {
        return moeinf_fail(err, MOEINF_ERR_ARG, "cannot keep %d tokens of a context holding %d",
                           n_keep, *n_past);
    }
    /* Attention reads positions below n_past only, so the rows past it are simply rewritten
     * by the next decode. A recurrent state goes back to its latest checkpoint at or before
     * n_keep (model/recurrent.c). */
    if (n_keep < *n_past) n_keep = moeinf_fwd_rewind(ctx->fwd, seq, n_keep);
    *n_past = n_keep;
    return MOEINF_OK;
}

enum moeinf_status moeinf_context_truncate(struct moeinf_context *ctx, int n_keep,
                                           struct moeinf_error *err) {
    return moeinf_context_seq_truncate(ctx, 0, n_keep, err);
}

enum moeinf_status moeinf_context_seq_reset(struct moeinf_context *ctx, int seq,
                                            struct moeinf_error *err) {
    if (seq < 0 || seq >= ctx->params.n_seq) {
        return moeinf_fail(err, MOEINF_ERR_ARG, "sequence %d is not in [0, %d)", seq,
                           ctx->params.n_seq);
    }
    ctx->seq_past[seq] = moeinf_fwd_rewind(ctx->fwd, seq, 0);
    return MOEINF_OK;
}

int moeinf_context_n_seq(const struct moeinf_context *ctx) {
    return ctx->params.n_seq;
}

int moeinf_context_seq_n_ctx(const struct moeinf_context *ctx) {
    return moeinf_fwd_n_ctx_seq(ctx->fwd);
}

int moeinf_context_seq_n_past(const struct moeinf_context *ctx, int seq) {
    return seq >= 0 && seq < ctx->params.n_seq ? ctx->seq_past[seq] : -1;
}

const char *moeinf_version(void) {
    return VERSION(MOEINF_VERSION_MAJOR) "." VERSION(MOEINF_VERSION_MINOR) "." VERSION(
        MOEINF_VERSION_PATCH);
}
