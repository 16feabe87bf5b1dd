/*
 * qwen35moe.c - arch `qwen35moe` (Qwen3.5 and Qwen3.6 MoE, e.g. Qwen3.6-35B-A3B). llama.cpp:
 * src/models/qwen35moe.cpp.
 *   layers     Gated DeltaNet, except every full_attention_interval-th (default 4) layer:
 *              full attention gated by sigmoid of a per-head gate from attn_q, q/k RMSNorm
 *              per head, partial interleaved multi-section RoPE (IMRoPE; text rotates as
 *              NEOX); the pre-FFN norm is post_attention_norm
 *   DeltaNet   attn_qkv and attn_gate projections, beta and alpha apart (ssm_beta,
 *              ssm_alpha); value head h reads key head h % key heads
 *   FFN        top-k of a softmax router, renormalised, plus the shared expert behind a
 *              sigmoid gate
 *   not run    the multi-token-prediction block (nextn_predict_layers) and vision, which
 *              llama.cpp keeps in a separate projector file
 */
#include "model/arch.h"

static enum moeinf_status read_hparams(struct moeinf_arch_loader *ld, struct moeinf_hparams *hp) {
    enum moeinf_status st = moeinf_arch_read_hybrid(ld, hp);
    if (st != MOEINF_OK) return st;
    hp->ssm_heads = MOEINF_DELTA_HEADS_TILED;
    return moeinf_arch_read_imrope(ld, hp);
}

static enum moeinf_status bind_layer(struct moeinf_arch_loader *ld, const struct moeinf_hparams *hp,
                                     int il, struct moeinf_layer *lw) {
    return moeinf_arch_bind_hybrid_layer(ld, hp, il, false, lw);
}

const struct moeinf_arch moeinf_arch_qwen35moe = {
    .name = "qwen35moe",
    .read_hparams = read_hparams,
    .bind_layer = bind_layer,
};
