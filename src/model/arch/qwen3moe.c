/*
 * qwen3moe.c - arch `qwen3moe` (Qwen3-30B-A3B, Qwen3-235B-A22B). llama.cpp:
 * src/models/qwen3moe.cpp.
 *   attention  full, RMSNorm of each q and k head before RoPE, RoPE on half-split pairs
 *              (optional q/k/v biases, as the other archs here)
 *   FFN        top-k of a softmax router, the chosen probabilities renormalised; an expert is
 *              expert_feed_forward_length wide, else feed_forward_length / expert_used_count
 */
#include "model/arch.h"

static enum moeinf_status read_hparams(struct moeinf_arch_loader *ld, struct moeinf_hparams *hp) {
    int ff_len;
    enum moeinf_status st;
    if ((st = moeinf_arch_read_geometry(ld, hp, false, &ff_len)) ||
        (st = moeinf_arch_read_experts(ld, hp, true)) ||
        (st = moeinf_arch_read_expert_width(ld, hp, ff_len / hp->n_expert_used))) {
        return st;
    }
    hp->rope = MOEINF_ROPE_NEOX;
    hp->qk_norm = MOEINF_QK_NORM_HEAD;
    return moeinf_arch_read_softmax_routing(ld, hp, true);
}

static enum moeinf_status bind_layer(struct moeinf_arch_loader *ld, const struct moeinf_hparams *hp,
                                     int il, struct moeinf_layer *lw) {
    return moeinf_arch_bind_std_layer(ld, hp, il, false, lw);
}

const struct moeinf_arch moeinf_arch_qwen3moe = {
    .name = "qwen3moe",
    .read_hparams = read_hparams,
    .bind_layer = bind_layer,
};
