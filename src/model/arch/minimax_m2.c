/*
 * minimax_m2.c - arch `minimax-m2` (MiniMax-M2, M2.1, M2.5: 230B-A10B). llama.cpp:
 * src/models/minimax-m2.cpp.
 *   attention  full, grouped-query; RMSNorm over the whole q and k projections before RoPE
 *              (as olmoe), RoPE on half-split pairs of the first rope.dimension_count values of
 *              each head (partial RoPE)
 *   FFN        routed experts only: the router's scores through expert_gating_func (sigmoid
 *              in MiniMax-M2's files, and when the key is absent), the experts chosen by
 *              score plus the selection bias
 *              exp_probs_b, their scores renormalised to sum 1 whatever expert_weights_norm
 *              says, and no expert_weights_scale (llama.cpp reads neither key for it)
 */
#include "model/arch.h"

static enum moeinf_status read_hparams(struct moeinf_arch_loader *ld, struct moeinf_hparams *hp) {
    int ff_len;
    enum moeinf_status st;
    if ((st = moeinf_arch_read_geometry(ld, hp, false, &ff_len)) ||
        (st = moeinf_arch_read_experts(ld, hp, true)) ||
        (st = moeinf_arch_read_expert_width(ld, hp, ff_len)) ||
        (st = moeinf_arch_read_routing(ld, hp, 2))) {
        return st;
    }
    hp->expert_weights_norm = true;
    hp->expert_weights_scale = 0.0f;
    hp->rope = MOEINF_ROPE_NEOX;
    hp->qk_norm = MOEINF_QK_NORM_WHOLE;
    return MOEINF_OK;
}

static enum moeinf_status bind_layer(struct moeinf_arch_loader *ld, const struct moeinf_hparams *hp,
                                     int il, struct moeinf_layer *lw) {
    enum moeinf_status st = moeinf_arch_bind_std_layer(ld, hp, il, false, lw);
    if (st != MOEINF_OK) return st;
    /* llama.cpp requires the selection bias of every layer */
    return moeinf_arch_bind_layer_vec(ld, il, "exp_probs_b.bias", hp->n_expert, false,
                                      &lw->exp_probs_b);
}

const struct moeinf_arch moeinf_arch_minimax_m2 = {
    .name = "minimax-m2",
    .read_hparams = read_hparams,
    .bind_layer = bind_layer,
};
