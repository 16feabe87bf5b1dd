/*
 * llama.c - arch `llama`: dense Llama, and the Mixtral family when the file has routed
 * experts (expert_count > 0). llama.cpp: src/models/llama.cpp.
 *   attention  full, optional q/k/v biases, no q/k norm, RoPE on adjacent pairs
 *   FFN        SwiGLU: dense (feed_forward_length wide), or top-k of a softmax router over
 *              experts feed_forward_length wide, the chosen probabilities renormalised
 */
#include "model/arch.h"

static enum moeinf_status read_hparams(struct moeinf_arch_loader *ld, struct moeinf_hparams *hp) {
    int ff_len;
    enum moeinf_status st = moeinf_arch_read_geometry(ld, hp, true, &ff_len);
    if (st == MOEINF_OK) st = moeinf_arch_read_experts(ld, hp, false);
    if (st != MOEINF_OK) return st;
    hp->rope = MOEINF_ROPE_NORM;
    hp->qk_norm = MOEINF_QK_NORM_NONE;
    /* llama.cpp reads no routing keys for llama: Mixtral renormalises, unscaled */
    hp->router = MOEINF_ROUTER_SOFTMAX;
    hp->expert_weights_norm = true;
    return MOEINF_OK;
}

static enum moeinf_status bind_layer(struct moeinf_arch_loader *ld, const struct moeinf_hparams *hp,
                                     int il, struct moeinf_layer *lw) {
    return moeinf_arch_bind_std_layer(ld, hp, il, false, lw);
}

const struct moeinf_arch moeinf_arch_llama = {
    .name = "llama",
    .read_hparams = read_hparams,
    .bind_layer = bind_layer,
};
