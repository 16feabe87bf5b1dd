/* arch_read.c - reading the metadata that architectures share (see arch.h). */
#include <stdio.h>
#include <string.h>

#include "base/escape.h"
#include "base/status.h"
#include "model/arch.h"

#define KEY_MAX 96

static const char *arch_key(char *buf, const char *arch, const char *suffix) {
    snprintf(buf, KEY_MAX, "%s.%s", arch, suffix);
    return buf;
}

enum moeinf_status moeinf_arch_get_int(struct moeinf_arch_loader *ld, const char *suffix,
                                       bool required, int max, int *out) {
    char key[KEY_MAX];
    uint32_t v = (uint32_t)*out;
    enum moeinf_status st =
        required ? moeinf_gguf_get_u32(ld->g, arch_key(key, ld->arch, suffix), &v, ld->err)
                 : moeinf_gguf_get_u32_opt(ld->g, arch_key(key, ld->arch, suffix), &v, ld->err);
    if (st != MOEINF_OK) {
        if (required && moeinf_gguf_find_key(ld->g, key) < 0) {
            return moeinf_fail(ld->err, MOEINF_ERR_FORMAT,
                               "%s: missing required key '%s' for arch '%s'", ld->g->path, key,
                               ld->arch);
        }
        return st;
    }
    if ((int64_t)v > max) {
        return moeinf_fail(ld->err, MOEINF_ERR_FORMAT, "%s: %s = %u is out of range (max %d)",
                           ld->g->path, key, v, max);
    }
    *out = (int)v;
    return MOEINF_OK;
}

enum moeinf_status moeinf_arch_get_float(struct moeinf_arch_loader *ld, const char *suffix,
                                         bool required, float *out) {
    char key[KEY_MAX];
    arch_key(key, ld->arch, suffix);
    if (required && moeinf_gguf_find_key(ld->g, key) < 0) {
        return moeinf_fail(ld->err, MOEINF_ERR_FORMAT,
                           "%s: missing required key '%s' for arch '%s'", ld->g->path, key,
                           ld->arch);
    }
    return moeinf_gguf_get_f32_opt(ld->g, key, out, ld->err);
}

bool moeinf_arch_has_key(const struct moeinf_arch_loader *ld, const char *suffix) {
    char key[KEY_MAX];
    return moeinf_gguf_find_key(ld->g, arch_key(key, ld->arch, suffix)) >= 0;
}

enum moeinf_status moeinf_arch_get_bool(struct moeinf_arch_loader *ld, const char *suffix,
                                        bool *out) {
    char key[KEY_MAX];
    return moeinf_gguf_get_bool_opt(ld->g, arch_key(key, ld->arch, suffix), out, ld->err);
}

/* YaRN's keys, with llama.cpp's defaults: the original context (context_length), the betas
 * (32 and 1) and the attention factor (1). A yarn_log_multiplier (the DeepSeek form of the
 * attention factor) is refused unless the architecture applies it (ld->yarn_log_mul). */
static enum moeinf_status read_yarn(struct moeinf_arch_loader *ld, struct moeinf_hparams *hp) {
    enum moeinf_status st;
    float log_mul = 0.0f;
    hp->rope_scaling = MOEINF_ROPE_SCALING_YARN;
    hp->yarn_orig_ctx = hp->n_ctx_train;
    hp->yarn_beta_fast = 32.0f;
    hp->yarn_beta_slow = 1.0f;
    hp->yarn_attn_factor = 1.0f;
    if ((st = moeinf_arch_get_int(ld, "rope.scaling.original_context_length", false, 1 << 30,
                                  &hp->yarn_orig_ctx)) ||
        (st = moeinf_arch_get_float(ld, "rope.scaling.yarn_beta_fast", false,
                                    &hp->yarn_beta_fast)) ||
        (st = moeinf_arch_get_float(ld, "rope.scaling.yarn_beta_slow", false,
                                    &hp->yarn_beta_slow)) ||
        (st = moeinf_arch_get_float(ld, "rope.scaling.attn_factor", false,
                                    &hp->yarn_attn_factor)) ||
        (st = moeinf_arch_get_float(ld, "rope.scaling.yarn_log_multiplier", false, &log_mul))) {
        return st;
    }
    if (log_mul != 0.0f && !ld->yarn_log_mul) {
        return moeinf_fail(ld->err, MOEINF_ERR_UNSUPPORTED,
                           "%s: YaRN with rope.scaling.yarn_log_multiplier is not supported for "
                           "arch '%s'",
                           ld->g->path, ld->arch);
    }
    if (!(log_mul >= 0.0f && log_mul < 100.0f)) {
        return moeinf_fail(ld->err, MOEINF_ERR_FORMAT,
                           "%s: invalid rope.scaling.yarn_log_multiplier %g", ld->g->path,
                           (double)log_mul);
    }
    hp->yarn_log_mul = log_mul;
    if (hp->yarn_orig_ctx < 1 || !(hp->yarn_beta_fast > 0.0f) || !(hp->yarn_beta_slow > 0.0f) ||
        !(hp->yarn_attn_factor > 0.0f && hp->yarn_attn_factor < 1e3f) ||
        hp->n_rot > MOEINF_MAX_ROT) {
        return moeinf_fail(ld->err, MOEINF_ERR_FORMAT,
                           "%s: invalid YaRN parameters (original context %d, betas %g and %g, "
                           "attention factor %g, %d rotated dimensions)",
                           ld->g->path, hp->yarn_orig_ctx, (double)hp->yarn_beta_fast,
                           (double)hp->yarn_beta_slow, (double)hp->yarn_attn_factor, hp->n_rot);
    }
    return MOEINF_OK;
}

/* rope.scaling.type none, linear or yarn (with rope.scaling.factor), or the older
 * rope.scale_linear; hp->rope_freq_scale is 1 / factor. */
static enum moeinf_status read_rope_scaling(struct moeinf_arch_loader *ld,
                                            struct moeinf_hparams *hp) {
    char key[KEY_MAX];
    struct moeinf_gguf_str kind = {0};
    enum moeinf_status st = moeinf_gguf_get_str_opt(
        ld->g, arch_key(key, ld->arch, "rope.scaling.type"), &kind, ld->err);
    if (st != MOEINF_OK) return st;
    float factor = 1.0f;
    if (kind.data && !moeinf_gguf_str_eq(kind, "none")) {
        if (moeinf_gguf_str_eq(kind, "yarn")) {
            st = read_yarn(ld, hp);
        } else if (!moeinf_gguf_str_eq(kind, "linear")) {
            return moeinf_fail(ld->err, MOEINF_ERR_UNSUPPORTED,
                               "%s: RoPE scaling '%s' is not supported yet (none, linear and yarn "
                               "are)",
                               ld->g->path, moeinf_esc(kind.data, (size_t)kind.len).s);
        }
        if (st == MOEINF_OK) st = moeinf_arch_get_float(ld, "rope.scaling.factor", false, &factor);
    } else {
        st = moeinf_arch_get_float(ld, "rope.scale_linear", false, &factor); /* older files */
    }
    if (st != MOEINF_OK) return st;
    if (factor == 0.0f) factor = 1.0f; /* llama.cpp reads 0 as none */
    if (!(factor >= 1.0f && factor <= 1024.0f)) {
        return moeinf_fail(ld->err, MOEINF_ERR_FORMAT, "%s: RoPE scaling factor %g is invalid",
                           ld->g->path, (double)factor);
    }
    hp->rope_freq_scale = 1.0f / factor;
    return MOEINF_OK;
}

/* Head size, RoPE dimensions and base, RMSNorm epsilon, RoPE scaling. The value head size goes
 * to *v_out, or must equal the key head size when v_out is NULL. */
static enum moeinf_status read_attention(struct moeinf_arch_loader *ld, struct moeinf_hparams *hp,
                                         int *v_out) {
    enum moeinf_status st;
    hp->head_dim = hp->n_embd % hp->n_head == 0 ? hp->n_embd / hp->n_head : 0;
    if ((st = moeinf_arch_get_int(ld, "attention.key_length", false, 1 << 16, &hp->head_dim))) {
        return st;
    }
    int v_len = hp->head_dim;
    if ((st = moeinf_arch_get_int(ld, "attention.value_length", false, 1 << 16, &v_len))) return st;
    if (v_out) *v_out = v_len;
    if (hp->head_dim <= 0 || hp->head_dim % 2 != 0 || v_len <= 0 ||
        (!v_out && v_len != hp->head_dim)) {
        return moeinf_fail(ld->err, MOEINF_ERR_FORMAT, "%s: invalid head size (key %d, value %d)",
                           ld->g->path, hp->head_dim, v_len);
    }
    hp->n_rot = hp->head_dim;
    if ((st = moeinf_arch_get_int(ld, "rope.dimension_count", false, 1 << 16, &hp->n_rot))) {
        return st;
    }
    if (hp->n_rot <= 0 || hp->n_rot > hp->head_dim || hp->n_rot % 2 != 0) {
        return moeinf_fail(ld->err, MOEINF_ERR_FORMAT, "%s: invalid rope.dimension_count %d",
                           ld->g->path, hp->n_rot);
    }
    hp->rope_base = 10000.0f;
    hp->rms_eps = 1e-5f;
    if ((st = moeinf_arch_get_float(ld, "rope.freq_base", false, &hp->rope_base)) ||
        (st = moeinf_arch_get_float(ld, "attention.layer_norm_rms_epsilon", true, &hp->rms_eps))) {
        return st;
    }
    if (!(hp->rope_base > 0.0f) || !(hp->rms_eps > 0.0f && hp->rms_eps < 1.0f)) {
        return moeinf_fail(ld->err, MOEINF_ERR_FORMAT, "%s: invalid rope base or rms epsilon",
                           ld->g->path);
    }
    return read_rope_scaling(ld, hp);
}

static enum moeinf_status read_geometry(struct moeinf_arch_loader *ld, struct moeinf_hparams *hp,
                                        bool ff_required, int *ff_len, int *v_len) {
    enum moeinf_status st;
    *ff_len = 0;
    if ((st = moeinf_arch_get_int(ld, "embedding_length", true, 1 << 20, &hp->n_embd)) ||
        (st = moeinf_arch_get_int(ld, "block_count", true, 4096, &hp->n_layer)) ||
        (st = moeinf_arch_get_int(ld, "attention.head_count", true, 4096, &hp->n_head)) ||
        (st = moeinf_arch_get_int(ld, "feed_forward_length", ff_required, 1 << 22, ff_len)) ||
        (st = moeinf_arch_get_int(ld, "context_length", true, 1 << 30, &hp->n_ctx_train))) {
        return st;
    }
    if (ff_required) hp->n_ff = *ff_len;
    hp->n_head_kv = hp->n_head;
    if ((st = moeinf_arch_get_int(ld, "attention.head_count_kv", false, 4096, &hp->n_head_kv))) {
        return st;
    }
    if (hp->n_embd <= 0 || hp->n_layer <= 0 || hp->n_head <= 0 || hp->n_head_kv <= 0 ||
        (ff_required && hp->n_ff <= 0) || hp->n_ctx_train <= 0 || hp->n_head % hp->n_head_kv != 0) {
        return moeinf_fail(ld->err, MOEINF_ERR_FORMAT,
                           "%s: invalid geometry (embd %d, layers %d, heads %d/%d kv, ff %d)",
                           ld->g->path, hp->n_embd, hp->n_layer, hp->n_head, hp->n_head_kv,
                           *ff_len);
    }
    return read_attention(ld, hp, v_len);
}

enum moeinf_status moeinf_arch_read_geometry(struct moeinf_arch_loader *ld,
                                             struct moeinf_hparams *hp, bool ff_required,
                                             int *ff_len) {
    return read_geometry(ld, hp, ff_required, ff_len, NULL);
}

enum moeinf_status moeinf_arch_read_geometry_kv(struct moeinf_arch_loader *ld,
                                                struct moeinf_hparams *hp, bool ff_required,
                                                int *ff_len, int *v_len) {
    return read_geometry(ld, hp, ff_required, ff_len, v_len);
}

enum moeinf_status moeinf_arch_drop_nextn_layers(struct moeinf_arch_loader *ld,
                                                 struct moeinf_hparams *hp) {
    int nextn = 0;
    enum moeinf_status st = moeinf_arch_get_int(ld, "nextn_predict_layers", false, 4096, &nextn);
    if (st != MOEINF_OK) return st;
    if (nextn < 0 || nextn >= hp->n_layer) {
        return moeinf_fail(ld->err, MOEINF_ERR_FORMAT,
                           "%s: nextn_predict_layers %d leaves none of the %d blocks to run",
                           ld->g->path, nextn, hp->n_layer);
    }
    hp->n_layer -= nextn;
    return MOEINF_OK;
}

enum moeinf_status moeinf_arch_read_experts(struct moeinf_arch_loader *ld,
                                            struct moeinf_hparams *hp, bool required) {
    enum moeinf_status st;
    if ((st = moeinf_arch_get_int(ld, "expert_count", required, 1 << 16, &hp->n_expert))) {
        return st;
    }
    if (required && hp->n_expert <= 0) {
        return moeinf_fail(ld->err, MOEINF_ERR_FORMAT, "%s: arch '%s' needs expert_count > 0",
                           ld->g->path, ld->arch);
    }
    if (hp->n_expert <= 0) return MOEINF_OK;
    if ((st = moeinf_arch_get_int(ld, "expert_used_count", true, MOEINF_MAX_EXPERT_USED,
                                  &hp->n_expert_used))) {
        return st;
    }
    if (hp->n_expert_used <= 0 || hp->n_expert_used > hp->n_expert) {
        return moeinf_fail(ld->err, MOEINF_ERR_FORMAT,
                           "%s: expert_used_count %d is invalid for %d experts", ld->g->path,
                           hp->n_expert_used, hp->n_expert);
    }
    return MOEINF_OK;
}

enum moeinf_status moeinf_arch_read_shared_expert(struct moeinf_arch_loader *ld,
                                                  struct moeinf_hparams *hp, int fallback) {
    hp->n_ff_shexp = fallback;
    enum moeinf_status st = moeinf_arch_get_int(ld, "expert_shared_feed_forward_length", false,
                                                1 << 22, &hp->n_ff_shexp);
    if (st != MOEINF_OK) return st;
    if (hp->n_ff_shexp <= 0) {
        return moeinf_fail(ld->err, MOEINF_ERR_FORMAT,
                           "%s: %s needs expert_shared_feed_forward_length (or "
                           "feed_forward_length) for its shared expert",
                           ld->g->path, ld->arch);
    }
    return MOEINF_OK;
}

enum moeinf_status moeinf_arch_read_expert_width(struct moeinf_arch_loader *ld,
                                                 struct moeinf_hparams *hp, int fallback) {
    int n_ff_exp = 0;
    enum moeinf_status st =
        moeinf_arch_get_int(ld, "expert_feed_forward_length", false, 1 << 22, &n_ff_exp);
    if (st != MOEINF_OK) return st;
    hp->n_ff = n_ff_exp > 0 ? n_ff_exp : fallback;
    if (hp->n_ff <= 0) {
        return moeinf_fail(ld->err, MOEINF_ERR_FORMAT,
                           "%s: neither expert_feed_forward_length nor feed_forward_length gives "
                           "the expert width",
                           ld->g->path);
    }
    return MOEINF_OK;
}

/* expert_weights_norm (default norm_default) and expert_weights_scale (default none). */
static enum moeinf_status read_weight_keys(struct moeinf_arch_loader *ld, struct moeinf_hparams *hp,
                                           bool norm_default) {
    enum moeinf_status st;
    hp->expert_weights_norm = norm_default;
    if ((st = moeinf_arch_get_bool(ld, "expert_weights_norm", &hp->expert_weights_norm)) ||
        (st =
             moeinf_arch_get_float(ld, "expert_weights_scale", false, &hp->expert_weights_scale))) {
        return st;
    }
    if (!(hp->expert_weights_scale >= 0.0f && hp->expert_weights_scale <= 1e6f)) {
        return moeinf_fail(ld->err, MOEINF_ERR_FORMAT, "%s: expert_weights_scale %g is invalid",
                           ld->g->path, (double)hp->expert_weights_scale);
    }
    return MOEINF_OK;
}

/*
 * llama.cpp reads expert_weights_norm, expert_weights_scale and expert_gating_func only for
 * the architectures whose converters write them, and for qwen2moe, qwen3moe and olmoe takes
 * fixed choices whatever the file says. moeinf takes the same defaults and honours the keys
 * where a file has them (no converter writes them for these archs): then it differs from
 * llama.cpp, on purpose, and a gating function other than softmax is refused.
 */
enum moeinf_status moeinf_arch_read_softmax_routing(struct moeinf_arch_loader *ld,
                                                    struct moeinf_hparams *hp, bool norm_default) {
    enum moeinf_status st;
    hp->router = MOEINF_ROUTER_SOFTMAX;
    if ((st = read_weight_keys(ld, hp, norm_default))) return st;
    /* llama.cpp's gating functions: 1 softmax, 2 sigmoid, 3 softmax of the chosen logits */
    int gating = 1;
    if ((st = moeinf_arch_get_int(ld, "expert_gating_func", false, 16, &gating))) return st;
    if (gating != 1) {
        return moeinf_fail(ld->err, MOEINF_ERR_UNSUPPORTED,
                           "%s: expert_gating_func %d is not supported yet for arch '%s' (1, "
                           "softmax, is)",
                           ld->g->path, gating, ld->arch);
    }
    return MOEINF_OK;
}

enum moeinf_status moeinf_arch_read_dense_lead(struct moeinf_arch_loader *ld,
                                               struct moeinf_hparams *hp, int ff_len) {
    int n_shared = 0;
    enum moeinf_status st;
    if ((st = moeinf_arch_get_int(ld, "leading_dense_block_count", false, 4096,
                                  &hp->n_layer_dense_lead)) ||
        (st = moeinf_arch_get_int(ld, "expert_shared_count", false, 256, &n_shared))) {
        return st;
    }
    if (hp->n_layer_dense_lead < 0 || hp->n_layer_dense_lead >= hp->n_layer || n_shared < 0 ||
        (hp->n_layer_dense_lead > 0 && ff_len <= 0)) {
        return moeinf_fail(ld->err, MOEINF_ERR_FORMAT,
                           "%s: invalid leading_dense_block_count %d (feed_forward_length %d, %d "
                           "layers) or expert_shared_count %d",
                           ld->g->path, hp->n_layer_dense_lead, ff_len, hp->n_layer, n_shared);
    }
    hp->n_ff_dense = hp->n_layer_dense_lead > 0 ? ff_len : 0;
    hp->n_ff_shexp = n_shared * hp->n_ff;
    hp->shexp_ungated = true;
    return MOEINF_OK;
}

enum moeinf_status moeinf_arch_read_routing(struct moeinf_arch_loader *ld,
                                            struct moeinf_hparams *hp, int gating_default) {
    enum moeinf_status st;
    if ((st = read_weight_keys(ld, hp, false))) return st;
    int gating = 0;
    if ((st = moeinf_arch_get_int(ld, "expert_gating_func", false, 16, &gating))) return st;
    if (gating == 0) gating = gating_default; /* llama.cpp: 0 is "not set" */
    switch (gating) {
    case 1:
        hp->router = MOEINF_ROUTER_SOFTMAX;
        break;
    case 2:
        hp->router = MOEINF_ROUTER_SIGMOID;
        break;
    default:
        return moeinf_fail(ld->err, MOEINF_ERR_UNSUPPORTED,
                           "%s: expert_gating_func %d is not supported yet for arch '%s' (1, "
                           "softmax, and 2, sigmoid, are)",
                           ld->g->path, gating, ld->arch);
    }
    hp->n_expert_groups = 0;
    hp->n_group_used = 0;
    if ((st = moeinf_arch_get_int(ld, "expert_group_count", false, 1 << 16,
                                  &hp->n_expert_groups)) ||
        (st = moeinf_arch_get_int(ld, "expert_group_used_count", false, 1 << 16,
                                  &hp->n_group_used))) {
        return st;
    }
    if (hp->n_expert_groups > 1) {
        /* llama.cpp's checks; a group's score is the sum of its two best, so it needs two */
        const int per_group = hp->n_expert / hp->n_expert_groups;
        if (hp->n_expert_groups >= hp->n_expert || hp->n_expert % hp->n_expert_groups != 0 ||
            hp->n_expert_groups > MOEINF_MAX_EXPERT_GROUPS ||
            per_group < 2 || hp->n_group_used < 1 || hp->n_group_used >= hp->n_expert_groups ||
            hp->n_group_used * per_group < hp->n_expert_used) {
            return moeinf_fail(ld->err, MOEINF_ERR_FORMAT,
                               "%s: expert groups %d (%d used) do not fit %d experts (top %d)",
                               ld->g->path, hp->n_expert_groups, hp->n_group_used, hp->n_expert,
                               hp->n_expert_used);
        }
    }
    return MOEINF_OK;
}

enum moeinf_status moeinf_arch_read_sliding_window(struct moeinf_arch_loader *ld,
                                                   struct moeinf_hparams *hp, bool required,
                                                   int default_pattern) {
    char key[KEY_MAX];
    enum moeinf_status st =
        moeinf_arch_get_int(ld, "attention.sliding_window", required, 1 << 30, &hp->n_swa);
    if (st != MOEINF_OK) return st;
    if (required && hp->n_swa <= 0) {
        return moeinf_fail(ld->err, MOEINF_ERR_FORMAT, "%s: invalid attention.sliding_window %d",
                           ld->g->path, hp->n_swa);
    }
    hp->swa_pattern = default_pattern;
    hp->swa_layers = NULL;
    arch_key(key, ld->arch, "attention.sliding_window_pattern");
    int64_t at = moeinf_gguf_find_key(ld->g, key);
    if (at >= 0 && ld->g->kv[at].type == MOEINF_GGUF_TYPE_ARRAY) {
        const struct moeinf_gguf_kv *kv;
        if ((st = moeinf_gguf_get_arr(ld->g, key, MOEINF_GGUF_TYPE_BOOL, &kv, ld->err))) return st;
        if (kv->n_elem != (uint64_t)hp->n_layer) {
            return moeinf_fail(ld->err, MOEINF_ERR_FORMAT, "%s: '%s' has %llu values for %d layers",
                               ld->g->path, key, (unsigned long long)kv->n_elem, hp->n_layer);
        }
        hp->swa_layers = kv->data;
        return MOEINF_OK;
    }
    if ((st = moeinf_arch_get_int(ld, "attention.sliding_window_pattern", false, 1 << 16,
                                  &hp->swa_pattern))) {
        return st;
    }
    return MOEINF_OK;
}

bool moeinf_arch_layer_sliding(const struct moeinf_hparams *hp, int il) {
    if (hp->n_swa <= 0) return false;
    if (hp->swa_layers) return hp->swa_layers[il] != 0;
    /* llama.cpp: pattern 0 slides every layer */
    return hp->swa_pattern == 0 || il % hp->swa_pattern < hp->swa_pattern - 1;
}
