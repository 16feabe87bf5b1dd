/*
 * qwen2moe.c - arch `qwen2moe` (Qwen1.5-MoE, Qwen2-MoE). llama.cpp: src/models/qwen2moe.cpp.
 *   attention  full, q/k/v biases (required), no q/k norm, RoPE on half-split pairs
 *   FFN        top-k of a softmax router, probabilities as they are (not renormalised), plus
 *              a shared expert behind a sigmoid gate (expert_shared_feed_forward_length wide,
 *              else feed_forward_length); an expert is expert_feed_forward_length wide, else
 *              feed_forward_length / expert_used_count
 */
#include "model/arch.h"

static enum moeinf_status read_hparams(struct moeinf_arch_loader *ld, struct moeinf_hparams *hp) {
    int ff_len;
    enum moeinf_status st;
    if ((st = moeinf_arch_read_geometry(ld, hp, false, &ff_len)) ||
        (st = moeinf_arch_read_experts(ld, hp, true))) {
        return st;
    }
    if ((st = moeinf_arch_read_shared_expert(ld, hp, ff_len))) return st;
    if ((st = moeinf_arch_read_expert_width(ld, hp, ff_len / hp->n_expert_used))) return st;
    hp->rope = MOEINF_ROPE_NEOX;
    hp->qk_norm = MOEINF_QK_NORM_NONE;
    return moeinf_arch_read_softmax_routing(ld, hp, false);
}

static enum moeinf_status bind_layer(struct moeinf_arch_loader *ld, const struct moeinf_hparams *hp,
                                     int il, struct moeinf_layer *lw) {
    return moeinf_arch_bind_std_layer(ld, hp, il, true, lw);
}

const struct moeinf_arch moeinf_arch_qwen2moe = {
    .name = "qwen2moe",
    .read_hparams = read_hparams,
    .bind_layer = bind_layer,
};
