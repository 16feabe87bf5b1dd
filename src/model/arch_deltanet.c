/* arch_deltanet.c - reading and binding what the hybrid Gated DeltaNet architectures share
 * (qwen35moe, qwen3next; see arch.h): the ssm.* keys, the pattern of recurrent and full
 * attention layers, the gated full-attention layer and the Gated DeltaNet layer's tensors. */
#include <stdio.h>

#include "base/status.h"
#include "model/arch.h"

#define NAME_MAX_LEN 96

static const char *layer_name(char *buf, int il, const char *suffix) {
    snprintf(buf, NAME_MAX_LEN, "blk.%d.%s", il, suffix);
    return buf;
}

/* attention.recurrent_layers: one bool per block (the converter writes it from the model's
 * layer_types), which llama.cpp prefers to full_attention_interval when present. */
static enum moeinf_status read_recurrent_layers(struct moeinf_arch_loader *ld,
                                                struct moeinf_hparams *hp, int n_blocks) {
    char key[NAME_MAX_LEN];
    snprintf(key, sizeof key, "%s.attention.recurrent_layers", ld->arch);
    hp->recurrent_layers = NULL;
    if (moeinf_gguf_find_key(ld->g, key) < 0) return MOEINF_OK;
    const struct moeinf_gguf_kv *kv;
    enum moeinf_status st = moeinf_gguf_get_arr(ld->g, key, MOEINF_GGUF_TYPE_BOOL, &kv, ld->err);
    if (st != MOEINF_OK) return st;
    if (kv->n_elem != (uint64_t)n_blocks) {
        return moeinf_fail(ld->err, MOEINF_ERR_FORMAT, "%s: '%s' has %llu values for %d blocks",
                           ld->g->path, key, (unsigned long long)kv->n_elem, n_blocks);
    }
    hp->recurrent_layers = kv->data;
    return MOEINF_OK;
}

enum moeinf_status moeinf_arch_read_deltanet(struct moeinf_arch_loader *ld,
                                             struct moeinf_hparams *hp) {
    enum moeinf_status st;
    int d_inner = 0;
    const int n_blocks = hp->n_layer; /* block_count, the prediction heads included */
    if ((st = moeinf_arch_drop_nextn_layers(ld, hp)) ||
        (st = moeinf_arch_get_int(ld, "ssm.conv_kernel", true, 16, &hp->ssm_d_conv)) ||
        (st = moeinf_arch_get_int(ld, "ssm.inner_size", true, 1 << 20, &d_inner)) ||
        (st = moeinf_arch_get_int(ld, "ssm.state_size", true, 4096, &hp->ssm_head_dim)) ||
        (st = moeinf_arch_get_int(ld, "ssm.time_step_rank", true, 4096, &hp->ssm_n_v_heads)) ||
        (st = moeinf_arch_get_int(ld, "ssm.group_count", true, 4096, &hp->ssm_n_k_heads))) {
        return st;
    }
    if (hp->ssm_d_conv < 1 || hp->ssm_head_dim < 1 || hp->ssm_n_v_heads < 1 ||
        hp->ssm_n_k_heads < 1 || hp->ssm_n_v_heads % hp->ssm_n_k_heads != 0 ||
        d_inner != hp->ssm_head_dim * hp->ssm_n_v_heads) {
        return moeinf_fail(ld->err, MOEINF_ERR_FORMAT,
                           "%s: invalid Gated DeltaNet geometry (conv kernel %d, inner size %d, "
                           "state size %d, %d value heads, %d key heads)",
                           ld->g->path, hp->ssm_d_conv, d_inner, hp->ssm_head_dim,
                           hp->ssm_n_v_heads, hp->ssm_n_k_heads);
    }
    if ((st = read_recurrent_layers(ld, hp, n_blocks))) return st;
    hp->full_attn_interval = 4; /* llama.cpp's default */
    if ((st = moeinf_arch_get_int(ld, "full_attention_interval", false, 4096,
                                  &hp->full_attn_interval))) {
        return st;
    }
    if (hp->full_attn_interval < 1) {
        return moeinf_fail(ld->err, MOEINF_ERR_FORMAT, "%s: invalid full_attention_interval %d",
                           ld->g->path, hp->full_attn_interval);
    }
    hp->n_recurrent = 0;
    for (int il = 0; il < hp->n_layer; il++)
        hp->n_recurrent += moeinf_arch_layer_recurrent(hp, il);
    return MOEINF_OK;
}

bool moeinf_arch_layer_recurrent(const struct moeinf_hparams *hp, int il) {
    if (hp->recurrent_layers) return hp->recurrent_layers[il] != 0;
    return hp->full_attn_interval > 0 && (il + 1) % hp->full_attn_interval != 0;
}

/* rope.dimension_sections, four counts of pairs whose sum lies in 1 .. n_rot / 2 (which pairs
 * of a text token rotate: moeinf_imrope_positioned, compute/ops.h). */
enum moeinf_status moeinf_arch_read_imrope(struct moeinf_arch_loader *ld,
                                           struct moeinf_hparams *hp) {
    char key[NAME_MAX_LEN];
    snprintf(key, sizeof key, "%s.rope.dimension_sections", ld->arch);
    const struct moeinf_gguf_kv *kv;
    enum moeinf_status st = moeinf_gguf_get_arr(ld->g, key, MOEINF_GGUF_TYPE_INT32, &kv, ld->err);
    if (st != MOEINF_OK) return st;
    if (kv->n_elem != 4) {
        return moeinf_fail(ld->err, MOEINF_ERR_FORMAT, "%s: '%s' has %llu values, expected 4",
                           ld->g->path, key, (unsigned long long)kv->n_elem);
    }
    int total = 0;
    for (int i = 0; i < 4; i++) {
        hp->rope_sections[i] = moeinf_gguf_arr_i32(kv, (uint64_t)i);
        if (hp->rope_sections[i] < 0 || hp->rope_sections[i] > hp->n_rot) {
            return moeinf_fail(ld->err, MOEINF_ERR_FORMAT, "%s: '%s' holds %d", ld->g->path, key,
                               hp->rope_sections[i]);
        }
        total += hp->rope_sections[i];
    }
    if (total < 1 || total > hp->n_rot / 2) {
        return moeinf_fail(ld->err, MOEINF_ERR_FORMAT,
                           "%s: '%s' sums to %d, outside 1..rope.dimension_count / 2 = %d",
                           ld->g->path, key, total, hp->n_rot / 2);
    }
    hp->rope = MOEINF_ROPE_IMROPE;
    return MOEINF_OK;
}

enum moeinf_status moeinf_arch_bind_gated_attention(struct moeinf_arch_loader *ld,
                                                    const struct moeinf_hparams *hp, int il,
                                                    struct moeinf_layer *lw) {
    enum moeinf_status st;
    if ((st = moeinf_arch_bind_attention_q(ld, hp, il, 2 * (int64_t)hp->n_head * hp->head_dim,
                                           lw)) ||
        (st = moeinf_arch_bind_qk_norm(ld, hp, il, lw))) {
        return st;
    }
    lw->attn = MOEINF_ATTN_GATED;
    return MOEINF_OK;
}

/* An F32 matrix of ne0 x ne1 values (conv1d weights, which the forward pass reads as floats). */
static enum moeinf_status bind_f32_matrix(struct moeinf_arch_loader *ld, const char *name,
                                          int64_t ne0, int64_t ne1, struct moeinf_weight *w) {
    enum moeinf_status st = moeinf_arch_bind(ld, name, ne0, ne1, 1, false, w);
    if (st != MOEINF_OK) return st;
    if (w->type != MOEINF_TYPE_F32) {
        return moeinf_fail(ld->err, MOEINF_ERR_UNSUPPORTED, "%s: tensor '%s' must be f32",
                           ld->g->path, name);
    }
    return MOEINF_OK;
}

/* The q/k/v and z projections: attn_qkv with attn_gate, or an older qwen3next file's ssm_in. */
static enum moeinf_status bind_deltanet_inputs(struct moeinf_arch_loader *ld,
                                               const struct moeinf_hparams *hp, int il, bool next,
                                               struct moeinf_layer *lw) {
    char name[NAME_MAX_LEN];
    const int64_t n_embd = hp->n_embd;
    const int64_t key_dim = (int64_t)hp->ssm_n_k_heads * hp->ssm_head_dim;
    const int64_t value_dim = (int64_t)hp->ssm_n_v_heads * hp->ssm_head_dim;
    const int64_t conv_dim = 2 * key_dim + value_dim;
    enum moeinf_status st;
    if (next && moeinf_gguf_find_tensor(ld->g, layer_name(name, il, "ssm_in.weight"))) {
        return moeinf_arch_bind(ld, name, n_embd, conv_dim + value_dim, 1, false, &lw->ssm_in);
    }
    if ((st = moeinf_arch_bind(ld, layer_name(name, il, "attn_qkv.weight"), n_embd, conv_dim, 1,
                               false, &lw->ssm_qkv)) ||
        (st = moeinf_arch_bind(ld, layer_name(name, il, "attn_gate.weight"), n_embd, value_dim, 1,
                               false, &lw->ssm_z))) {
        return st;
    }
    return MOEINF_OK;
}

enum moeinf_status moeinf_arch_bind_deltanet(struct moeinf_arch_loader *ld,
                                             const struct moeinf_hparams *hp, int il, bool next,
                                             struct moeinf_layer *lw) {
    char name[NAME_MAX_LEN];
    const int64_t n_embd = hp->n_embd;
    const int64_t n_v = hp->ssm_n_v_heads;
    const int64_t key_dim = (int64_t)hp->ssm_n_k_heads * hp->ssm_head_dim;
    const int64_t value_dim = n_v * hp->ssm_head_dim;
    const int64_t conv_dim = 2 * key_dim + value_dim;
    enum moeinf_status st;
    lw->attn = MOEINF_ATTN_DELTANET;
    if ((st = moeinf_arch_bind_vec(ld, layer_name(name, il, "attn_norm.weight"), n_embd, false,
                                   &lw->attn_norm)) ||
        (st = bind_deltanet_inputs(ld, hp, il, next, lw)) ||
        (st = bind_f32_matrix(ld, layer_name(name, il, "ssm_conv1d.weight"), hp->ssm_d_conv,
                              conv_dim, &lw->ssm_conv1d)) ||
        (st = moeinf_arch_bind_vec(ld, layer_name(name, il, "ssm_dt.bias"), n_v, false,
                                   &lw->ssm_dt_bias)) ||
        (st = moeinf_arch_bind_vec(ld, layer_name(name, il, "ssm_a"), n_v, false, &lw->ssm_a)) ||
        (st = moeinf_arch_bind_vec(ld, layer_name(name, il, "ssm_norm.weight"), hp->ssm_head_dim,
                                   false, &lw->ssm_norm)) ||
        (st = moeinf_arch_bind(ld, layer_name(name, il, "ssm_out.weight"), value_dim, n_embd, 1,
                               false, &lw->ssm_out))) {
        return st;
    }
    if (next) {
        return moeinf_arch_bind(ld, layer_name(name, il, "ssm_ba.weight"), n_embd, 2 * n_v, 1,
                                false, &lw->ssm_ba);
    }
    if ((st = moeinf_arch_bind(ld, layer_name(name, il, "ssm_beta.weight"), n_embd, n_v, 1, false,
                               &lw->ssm_beta)) ||
        (st = moeinf_arch_bind(ld, layer_name(name, il, "ssm_alpha.weight"), n_embd, n_v, 1, false,
                               &lw->ssm_alpha))) {
        return st;
    }
    return MOEINF_OK;
}

enum moeinf_status moeinf_arch_bind_hybrid_layer(struct moeinf_arch_loader *ld,
                                                 const struct moeinf_hparams *hp, int il, bool next,
                                                 struct moeinf_layer *lw) {
    enum moeinf_status st;
    if (moeinf_arch_layer_recurrent(hp, il)) {
        int index = 0;
        for (int i = 0; i < il; i++)
            index += moeinf_arch_layer_recurrent(hp, i);
        lw->recurrent_index = index;
        st = moeinf_arch_bind_deltanet(ld, hp, il, next, lw);
    } else {
        st = moeinf_arch_bind_gated_attention(ld, hp, il, lw);
    }
    if (st != MOEINF_OK) return st;
    return moeinf_arch_bind_moe_ffn_norm(ld, hp, il, "post_attention_norm.weight", lw);
}

enum moeinf_status moeinf_arch_read_hybrid(struct moeinf_arch_loader *ld,
                                           struct moeinf_hparams *hp) {
    int ff_len;
    enum moeinf_status st;
    if ((st = moeinf_arch_read_geometry(ld, hp, false, &ff_len)) ||
        (st = moeinf_arch_read_experts(ld, hp, true))) {
        return st;
    }
    if ((st = moeinf_arch_read_shared_expert(ld, hp, ff_len))) return st;
    if ((st = moeinf_arch_read_expert_width(ld, hp, ff_len / hp->n_expert_used)) ||
        (st = moeinf_arch_read_deltanet(ld, hp))) {
        return st;
    }
    hp->qk_norm = MOEINF_QK_NORM_HEAD;
    return moeinf_arch_read_softmax_routing(ld, hp, true);
}
