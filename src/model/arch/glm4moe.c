/*
 * glm4moe.c - arch `glm4moe` (GLM-4.5, GLM-4.5-Air, GLM-4.6). llama.cpp: src/models/glm4-moe.cpp.
 *   attention  full, grouped-query; q/k/v biases where the file has them, q/k RMSNorm per head
 *              where it has attn_q_norm (GLM-4.5), RoPE on half-split pairs of the first
 *              rope.dimension_count values of each head (partial RoPE)
 *   FFN        after post_attention_norm: leading_dense_block_count dense SwiGLU layers
 *              (feed_forward_length wide), then routed experts (expert_feed_forward_length)
 *              plus expert_shared_count shared experts as one ungated FFN; sigmoid routing
 *              with the selection bias exp_probs_b, expert_weights_norm and _scale
 * The trailing next-token-prediction block (nextn_predict_layers) is loaded by llama.cpp for
 * speculative decoding and never run; moeinf leaves it unbound. Files with
 * rope.dimension_sections (multimodal M-RoPE) are refused.
 */

#include "base/status.h"
#include "gguf/gguf.h"
#include "model/arch.h"

static enum moeinf_status read_hparams(struct moeinf_arch_loader *ld, struct moeinf_hparams *hp) {
    int ff_len;
    enum moeinf_status st;
    if ((st = moeinf_arch_read_geometry(ld, hp, false, &ff_len)) ||
        (st = moeinf_arch_drop_nextn_layers(ld, hp)) ||
        (st = moeinf_arch_read_experts(ld, hp, true)) ||
        (st = moeinf_arch_read_expert_width(ld, hp, ff_len / hp->n_expert_used)) ||
        (st = moeinf_arch_read_dense_lead(ld, hp, ff_len)) ||
        (st = moeinf_arch_read_routing(ld, hp, 2))) {
        return st;
    }
    if (moeinf_arch_has_key(ld, "rope.dimension_sections")) {
        return moeinf_fail(ld->err, MOEINF_ERR_UNSUPPORTED,
                           "%s: multimodal RoPE sections (rope.dimension_sections) are not "
                           "supported yet",
                           ld->g->path);
    }
    hp->rope = MOEINF_ROPE_NEOX;
    /* GLM-4.5 has q/k norms, GLM-4.5-Air not: the first layer tells */
    hp->qk_norm = moeinf_gguf_find_tensor(ld->g, "blk.0.attn_q_norm.weight") ? MOEINF_QK_NORM_HEAD
                                                                             : MOEINF_QK_NORM_NONE;
    return MOEINF_OK;
}

static enum moeinf_status bind_layer(struct moeinf_arch_loader *ld, const struct moeinf_hparams *hp,
                                     int il, struct moeinf_layer *lw) {
    const char *norm = "post_attention_norm.weight";
    enum moeinf_status st;
    if ((st = moeinf_arch_bind_attention(ld, hp, il, lw)) ||
        (st = moeinf_arch_bind_qkv_bias(ld, hp, il, false, lw)) ||
        (st = moeinf_arch_bind_qk_norm(ld, hp, il, lw))) {
        return st;
    }
    if (il < hp->n_layer_dense_lead) return moeinf_arch_bind_dense_ffn_norm(ld, hp, il, norm, lw);
    if ((st = moeinf_arch_bind_moe_ffn_norm(ld, hp, il, norm, lw))) return st;
    /* llama.cpp requires the selection bias of every glm4moe MoE layer */
    return moeinf_arch_bind_layer_vec(ld, il, "exp_probs_b.bias", hp->n_expert, false,
                                      &lw->exp_probs_b);
}

const struct moeinf_arch moeinf_arch_glm4moe = {
    .name = "glm4moe",
    .read_hparams = read_hparams,
    .bind_layer = bind_layer,
};
