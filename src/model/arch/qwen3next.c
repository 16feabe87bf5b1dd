/*
 * qwen3next.c - arch `qwen3next` (Qwen3-Next-80B-A3B). llama.cpp: src/models/qwen3next.cpp.
 *   layers     as qwen35moe: Gated DeltaNet, every full_attention_interval-th layer gated full
 *              attention with q/k RMSNorm per head; partial RoPE on half-split pairs (NEOX)
 *   DeltaNet   attn_qkv and attn_gate projections (older files: ssm_in, laid out per key
 *              head), beta and alpha fused in ssm_ba per key head; value head h reads key
 *              head h / (value heads / key heads)
 *   FFN        top-k of a softmax router, renormalised, plus the shared expert behind a
 *              sigmoid gate
 *   not run    the multi-token-prediction block (nextn_predict_layers)
 */
#include "model/arch.h"

static enum moeinf_status read_hparams(struct moeinf_arch_loader *ld, struct moeinf_hparams *hp) {
    enum moeinf_status st = moeinf_arch_read_hybrid(ld, hp);
    if (st != MOEINF_OK) return st;
    hp->ssm_heads = MOEINF_DELTA_HEADS_GROUPED;
    hp->rope = MOEINF_ROPE_NEOX;
    return MOEINF_OK;
}

static enum moeinf_status bind_layer(struct moeinf_arch_loader *ld, const struct moeinf_hparams *hp,
                                     int il, struct moeinf_layer *lw) {
    return moeinf_arch_bind_hybrid_layer(ld, hp, il, true, lw);
}

const struct moeinf_arch moeinf_arch_qwen3next = {
    .name = "qwen3next",
    .read_hparams = read_hparams,
    .bind_layer = bind_layer,
};
