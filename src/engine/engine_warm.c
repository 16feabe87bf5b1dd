/*
 * engine_warm.c - warm starts: what a context's expert-cache policy has learned, saved to and
 * loaded from the versioned EAMC file that `moeinf sim --eamc` uses (experts/eam.h), and the
 * request boundary the policy learns at.
 */
#include "base/status.h"
#include "engine/engine.h"
#include "experts/eam.h"

static enum moeinf_status need_tier(const struct moeinf_context *ctx, const char *path,
                                    struct moeinf_error *err) {
    if (!ctx->tier) {
        return moeinf_fail(err, MOEINF_ERR_ARG, "%s: the context has no expert cache", path);
    }
    return MOEINF_OK;
}

void moeinf_context_request_end(struct moeinf_context *ctx) {
    if (ctx->tier) moeinf_tier_request_end(ctx->tier);
}

enum moeinf_status moeinf_context_expert_state_load(struct moeinf_context *ctx, const char *path,
                                                    bool *loaded, struct moeinf_error *err) {
    enum moeinf_status st = need_tier(ctx, path, err);
    if (st != MOEINF_OK) return st;
    moeinf_context_request_end(ctx);
    bool got = false;
    st = moeinf_policy_state_load(moeinf_tier_policy(ctx->tier), path, 0, &got, err);
    if (st == MOEINF_OK && loaded) *loaded = got;
    return st;
}

enum moeinf_status moeinf_context_expert_state_save(struct moeinf_context *ctx, const char *path,
                                                    struct moeinf_error *err) {
    enum moeinf_status st = need_tier(ctx, path, err);
    if (st != MOEINF_OK) return st;
    moeinf_context_request_end(ctx);
    return moeinf_policy_state_save(moeinf_tier_policy(ctx->tier), path, err);
}
