/*
 * deepseek2.c - arch `deepseek2` (DeepSeek-V2, V2-Lite, V3, R1, Kimi-K2, GLM-4.7-Flash,
 * Moonlight). llama.cpp: src/models/deepseek2.cpp.
 *   attention  multi-head latent attention (model.h, MOEINF_ATTN_MLA): queries through a
 *              low-rank q_a / q_a_norm / q_b (attention.q_lora_rank) or a plain attn_q; one
 *              latent of kv_lora_rank values and one RoPE'd key part (adjacent pairs) per
 *              token, cached for all heads; the query heads absorbed through attn_k_b and
 *              the outputs expanded through attn_v_b, or, in older files, through the key and
 *              value rows of attn_kv_b. YaRN with the DeepSeek attention factor: the scores
 *              are scaled by mscale^2 / sqrt(head size), mscale from yarn_log_multiplier
 *   FFN        leading_dense_block_count dense SwiGLU layers (feed_forward_length wide), then
 *              routed experts (expert_feed_forward_length) and expert_shared_count shared
 *              experts as one ungated FFN; softmax (V2) or sigmoid with the selection bias
 *              exp_probs_b (V3) routing, expert groups, expert_weights_norm and _scale
 * The trailing next-token-prediction blocks (nextn_predict_layers) are not run.
 */
#include <math.h>

#include "base/status.h"
#include "gguf/gguf.h"
#include "model/arch.h"

/* The attention geometry: the latent ranks, the query/key head (nope + n_rot, hp->head_dim)
 * and the value head (hp->mla_v), from the _mla keys of current files or the head sizes of
 * older ones. */
static enum moeinf_status read_mla(struct moeinf_arch_loader *ld, struct moeinf_hparams *hp,
                                   int v_len) {
    enum moeinf_status st;
    int k_mla = 0;
    int v_mla = 0;
    if ((st = moeinf_arch_get_int(ld, "attention.q_lora_rank", false, 1 << 16, &hp->mla_q)) ||
        (st = moeinf_arch_get_int(ld, "attention.kv_lora_rank", true, 1 << 16, &hp->mla_kv)) ||
        (st = moeinf_arch_get_int(ld, "attention.key_length_mla", false, 1 << 16, &k_mla)) ||
        (st = moeinf_arch_get_int(ld, "attention.value_length_mla", false, 1 << 16, &v_mla))) {
        return st;
    }
    if (k_mla > 0 || v_mla > 0) { /* split attn_k_b / attn_v_b: head sizes in the _mla keys */
        hp->head_dim = k_mla;
        hp->mla_v = v_mla;
    } else { /* attn_kv_b: key_length and value_length are the heads' */
        hp->mla_v = v_len;
    }
    if (hp->mla_q < 0 || hp->mla_kv <= 0 || hp->head_dim <= hp->n_rot || hp->mla_v <= 0 ||
        hp->mla_kv + hp->n_rot > (1 << 16)) {
        return moeinf_fail(ld->err, MOEINF_ERR_FORMAT,
                           "%s: invalid latent attention (q_lora_rank %d, kv_lora_rank %d, "
                           "key head %d with %d rotated, value head %d)",
                           ld->g->path, hp->mla_q, hp->mla_kv, hp->head_dim, hp->n_rot, hp->mla_v);
    }
    hp->n_head_kv = 1; /* the latent row serves every head */
    return MOEINF_OK;
}

/* llama.cpp's DeepSeek YaRN: the converter wrote 0.1 * mscale_all_dim as yarn_log_multiplier,
 * the RoPE's attention factor becomes attn_factor / (1 + 0.1 ln s) (the ratio of the two
 * mscales is 1, since DeepSeek's mscale equals mscale_all_dim), and the scores are scaled by
 * mscale^2 / sqrt(head size), mscale = attn_factor_org (1 + 0.1 mscale_all_dim ln s). */
static void attention_scale(struct moeinf_hparams *hp) {
    const float ln_s = logf(1.0f / hp->rope_freq_scale);
    const float log_mul = hp->yarn_log_mul / 0.1f;
    float attn_factor = 1.0f;
    if (hp->rope_scaling == MOEINF_ROPE_SCALING_YARN) {
        if (log_mul != 0.0f) hp->yarn_attn_factor *= 1.0f / (1.0f + 0.1f * ln_s);
        attn_factor = hp->yarn_attn_factor;
    }
    const float attn_factor_org = attn_factor * (1.0f + 0.1f * ln_s);
    const float mscale = attn_factor_org * (1.0f + 0.1f * log_mul * ln_s);
    hp->attn_scale = 1.0f * mscale * mscale / sqrtf((float)hp->head_dim);
}

static enum moeinf_status read_hparams(struct moeinf_arch_loader *ld, struct moeinf_hparams *hp) {
    int ff_len;
    int v_len;
    enum moeinf_status st;
    ld->yarn_log_mul = true;
    if ((st = moeinf_arch_read_geometry_kv(ld, hp, false, &ff_len, &v_len)) ||
        (st = moeinf_arch_drop_nextn_layers(ld, hp)) ||
        (st = moeinf_arch_read_experts(ld, hp, true)) ||
        (st = moeinf_arch_read_expert_width(ld, hp, 0)) ||
        (st = moeinf_arch_read_dense_lead(ld, hp, ff_len)) || (st = read_mla(ld, hp, v_len)) ||
        (st = moeinf_arch_read_routing(ld, hp, 1))) {
        return st;
    }
    if (moeinf_arch_has_key(ld, "attention.temperature_scale")) {
        return moeinf_fail(ld->err, MOEINF_ERR_UNSUPPORTED,
                           "%s: attention temperature scaling (attention.temperature_scale) is "
                           "not supported yet",
                           ld->g->path);
    }
    hp->rope = MOEINF_ROPE_NORM;
    attention_scale(hp);
    return MOEINF_OK;
}

static enum moeinf_status bind_mla(struct moeinf_arch_loader *ld, const struct moeinf_hparams *hp,
                                   int il, struct moeinf_layer *lw) {
    const int64_t n_embd = hp->n_embd;
    const int64_t n_head = hp->n_head;
    const int64_t nope = hp->head_dim - hp->n_rot;
    const int64_t q_rows = n_head * hp->head_dim;
    enum moeinf_status st;
    lw->attn = MOEINF_ATTN_MLA;
    if ((st = moeinf_arch_bind_layer_vec(ld, il, "attn_norm.weight", n_embd, false,
                                         &lw->attn_norm))) {
        return st;
    }
    if (hp->mla_q > 0) {
        if ((st = moeinf_arch_bind_layer(ld, il, "attn_q_a.weight", n_embd, hp->mla_q, 1, false,
                                         &lw->wq_a)) ||
            (st = moeinf_arch_bind_layer_vec(ld, il, "attn_q_a_norm.weight", hp->mla_q, false,
                                             &lw->q_a_norm)) ||
            (st = moeinf_arch_bind_layer(ld, il, "attn_q_b.weight", hp->mla_q, q_rows, 1, false,
                                         &lw->wq_b))) {
            return st;
        }
    } else if ((st = moeinf_arch_bind_layer(ld, il, "attn_q.weight", n_embd, q_rows, 1, false,
                                            &lw->wq))) {
        return st;
    }
    if ((st = moeinf_arch_bind_layer(ld, il, "attn_kv_a_mqa.weight", n_embd, hp->mla_kv + hp->n_rot,
                                     1, false, &lw->wkv_a)) ||
        (st = moeinf_arch_bind_layer_vec(ld, il, "attn_kv_a_norm.weight", hp->mla_kv, false,
                                         &lw->kv_a_norm)) ||
        (st = moeinf_arch_bind_layer(ld, il, "attn_k_b.weight", nope, hp->mla_kv, n_head, true,
                                     &lw->wk_b))) {
        return st;
    }
    if (lw->wk_b.data) {
        st = moeinf_arch_bind_layer(ld, il, "attn_v_b.weight", hp->mla_kv, hp->mla_v, n_head, false,
                                    &lw->wv_b);
    } else {
        st = moeinf_arch_bind_layer(ld, il, "attn_kv_b.weight", hp->mla_kv,
                                    n_head * (nope + hp->mla_v), 1, false, &lw->wkv_b);
    }
    if (st != MOEINF_OK) return st;
    return moeinf_arch_bind_layer(ld, il, "attn_output.weight", n_head * hp->mla_v, n_embd, 1,
                                  false, &lw->wo);
}

static enum moeinf_status bind_layer(struct moeinf_arch_loader *ld, const struct moeinf_hparams *hp,
                                     int il, struct moeinf_layer *lw) {
    enum moeinf_status st = bind_mla(ld, hp, il, lw);
    if (st != MOEINF_OK) return st;
    if (il < hp->n_layer_dense_lead) return moeinf_arch_bind_dense_ffn(ld, hp, il, lw);
    if ((st = moeinf_arch_bind_moe_ffn(ld, hp, il, lw))) return st;
    return moeinf_arch_bind_layer_vec(ld, il, "exp_probs_b.bias", hp->n_expert, true,
                                      &lw->exp_probs_b);
}

const struct moeinf_arch moeinf_arch_deepseek2 = {
    .name = "deepseek2",
    .read_hparams = read_hparams,
    .bind_layer = bind_layer,
};
