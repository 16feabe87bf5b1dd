/* engine_kv.c - keeping a prefix of the KV cache (moeinf_context_truncate) and the version. */
#include "base/status.h"
#include "engine/engine.h"

#define STR(x)     #x
#define VERSION(x) STR(x)

enum moeinf_status moeinf_context_truncate(struct moeinf_context *ctx, int n_keep,
                                           struct moeinf_error *err) {
    if (n_keep < 0 || n_keep > ctx->n_past) {
        return moeinf_fail(err, MOEINF_ERR_ARG, "cannot keep %d tokens of a context holding %d",
                           n_keep, ctx->n_past);
    }
    /* Attention reads positions below n_past only, so the rows past it are simply rewritten
     * by the next decode. A recurrent state goes back to its latest checkpoint at or before
     * n_keep (model/recurrent.c). */
    if (n_keep < ctx->n_past) n_keep = moeinf_fwd_rewind(ctx->fwd, n_keep);
    ctx->n_past = n_keep;
    return MOEINF_OK;
}

const char *moeinf_version(void) {
    return VERSION(MOEINF_VERSION_MAJOR) "." VERSION(MOEINF_VERSION_MINOR) "." VERSION(
        MOEINF_VERSION_PATCH);
}
