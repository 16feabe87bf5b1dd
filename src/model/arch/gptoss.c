/*
 * gptoss.c - arch `gpt-oss` (gpt-oss-20b, gpt-oss-120b). llama.cpp: src/models/openai-moe.cpp.
 *   attention  full or sliding-window (attention.sliding_window positions) by layer: an array
 *              attention.sliding_window_pattern of bools, else every n-th layer full (the
 *              integer key, default 2: even layers slide, odd ones see everything); biases on
 *              q, k, v and the output; a learned sink logit per head in each softmax; RoPE on
 *              half-split pairs, YaRN-scaled in the published files
 *   FFN        after post_attention_norm, the top-k router logits (with the router's bias)
 *              and a softmax over those k; each expert has biases on gate, up and down and
 *              the clamped SwiGLU (model.h, MOEINF_GLU_SWIGLU_OAI)
 */
#include <stdio.h>

#include "base/status.h"
#include "model/arch.h"

#define NAME_LEN 96

static enum moeinf_status read_hparams(struct moeinf_arch_loader *ld, struct moeinf_hparams *hp) {
    int ff_len;
    enum moeinf_status st;
    if ((st = moeinf_arch_read_geometry(ld, hp, false, &ff_len)) ||
        (st = moeinf_arch_read_experts(ld, hp, true)) ||
        (st = moeinf_arch_read_expert_width(ld, hp, ff_len)) ||
        (st = moeinf_arch_read_sliding_window(ld, hp, true, 2))) {
        return st;
    }
    hp->rope = MOEINF_ROPE_NEOX;
    hp->router = MOEINF_ROUTER_TOPK_SOFTMAX;
    hp->glu = MOEINF_GLU_SWIGLU_OAI;
    return MOEINF_OK;
}

static enum moeinf_status bind_layer(struct moeinf_arch_loader *ld, const struct moeinf_hparams *hp,
                                     int il, struct moeinf_layer *lw) {
    char name[NAME_LEN];
    const int64_t n_ff = hp->n_ff;
    const int64_t n_expert = hp->n_expert;
    enum moeinf_status st;
    if ((st = moeinf_arch_bind_attention(ld, hp, il, lw)) ||
        (st = moeinf_arch_bind_qkv_bias(ld, hp, il, true, lw)) ||
        (st = moeinf_arch_bind_layer_vec(ld, il, "attn_output.bias", hp->n_embd, false, &lw->bo)) ||
        (st = moeinf_arch_bind_layer_vec(ld, il, "attn_sinks.weight", hp->n_head, false,
                                         &lw->attn_sinks)) ||
        (st = moeinf_arch_bind_moe_ffn_norm(ld, hp, il, "post_attention_norm.weight", lw)) ||
        (st = moeinf_arch_bind_layer_vec(ld, il, "ffn_gate_inp.bias", n_expert, false,
                                         &lw->router_b))) {
        return st;
    }
    /* the experts' biases are [n_out, n_expert] matrices of F32, one row per expert */
    const char *names[3] = {"ffn_gate_exps.bias", "ffn_up_exps.bias", "ffn_down_exps.bias"};
    const int64_t widths[3] = {n_ff, n_ff, hp->n_embd};
    const float **dst[3] = {&lw->gate_exps_b, &lw->up_exps_b, &lw->down_exps_b};
    for (int i = 0; i < 3; i++) {
        snprintf(name, sizeof name, "blk.%d.%s", il, names[i]);
        if ((st = moeinf_arch_bind_f32(ld, name, widths[i], n_expert, dst[i]))) return st;
    }
    lw->swa = moeinf_arch_layer_sliding(hp, il);
    return MOEINF_OK;
}

const struct moeinf_arch moeinf_arch_gptoss = {
    .name = "gpt-oss",
    .read_hparams = read_hparams,
    .bind_layer = bind_layer,
};
