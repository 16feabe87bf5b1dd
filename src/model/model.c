/* model.c - hyper-parameters from metadata and weight views for the architectures of model.h. */
#include "model/model.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/status.h"

#define KEY_MAX 96

struct loader {
    const struct moeinf_gguf *g;
    const char *arch;
    struct moeinf_error *err;
};

static const char *arch_key(char *buf, const char *arch, const char *suffix) {
    snprintf(buf, KEY_MAX, "%s.%s", arch, suffix);
    return buf;
}

/* A required positive integer key of the architecture, at most `max`. */
static enum moeinf_status get_int(struct loader *ld, const char *suffix, bool required, int max,
                                  int *out) {
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

static enum moeinf_status get_float(struct loader *ld, const char *suffix, bool required,
                                    float *out) {
    char key[KEY_MAX];
    arch_key(key, ld->arch, suffix);
    if (required && moeinf_gguf_find_key(ld->g, key) < 0) {
        return moeinf_fail(ld->err, MOEINF_ERR_FORMAT,
                           "%s: missing required key '%s' for arch '%s'", ld->g->path, key,
                           ld->arch);
    }
    return moeinf_gguf_get_f32_opt(ld->g, key, out, ld->err);
}

/*
 * Binds tensor `name` with the expected shape (ne0, ne1, ne2; 0 = any, for the vocabulary
 * dimension). Absent tensors are an error unless optional (then w->data stays NULL).
 */
static enum moeinf_status bind(struct loader *ld, const char *name, int64_t ne0, int64_t ne1,
                               int64_t ne2, bool optional, struct moeinf_weight *w) {
    const struct moeinf_gguf_tensor *t = moeinf_gguf_find_tensor(ld->g, name);
    memset(w, 0, sizeof *w);
    if (!t) {
        if (optional) return MOEINF_OK;
        return moeinf_fail(ld->err, MOEINF_ERR_FORMAT, "%s: missing tensor '%s'", ld->g->path,
                           name);
    }
    if (!moeinf_type_cpu_get(t->type)) {
        return moeinf_fail(ld->err, MOEINF_ERR_UNSUPPORTED,
                           "%s: tensor '%s' has type %s, which moeinf does not support yet",
                           ld->g->path, name, moeinf_type_name(t->type));
    }
    int64_t want[3] = {ne0, ne1, ne2};
    for (int d = 0; d < MOEINF_GGUF_MAX_DIMS; d++) {
        int64_t expect = d < 3 ? want[d] : 1;
        if (expect != 0 && t->ne[d] != expect) {
            return moeinf_fail(ld->err, MOEINF_ERR_FORMAT,
                               "%s: tensor '%s' has shape [%lld, %lld, %lld, %lld], expected "
                               "[%lld, %lld, %lld]",
                               ld->g->path, name, (long long)t->ne[0], (long long)t->ne[1],
                               (long long)t->ne[2], (long long)t->ne[3], (long long)ne0,
                               (long long)ne1, (long long)ne2);
        }
    }
    w->data = t->data;
    w->type = (enum moeinf_type)t->type;
    w->n_in = t->ne[0];
    w->n_out = t->ne[1];
    w->n_mat = t->ne[2];
    w->row_bytes = moeinf_row_bytes(w->type, w->n_in);
    w->mat_bytes = w->row_bytes * (size_t)w->n_out;
    return MOEINF_OK;
}

/* A 1-D F32 vector (norm weights). */
static enum moeinf_status bind_vec(struct loader *ld, const char *name, int64_t n,
                                   const float **out) {
    struct moeinf_weight w;
    enum moeinf_status st = bind(ld, name, n, 1, 1, false, &w);
    if (st != MOEINF_OK) return st;
    if (w.type != MOEINF_TYPE_F32) {
        return moeinf_fail(ld->err, MOEINF_ERR_UNSUPPORTED, "%s: tensor '%s' must be f32",
                           ld->g->path, name);
    }
    *out = (const float *)w.data;
    return MOEINF_OK;
}

/* A 1-D F32 vector that may be absent (*out = NULL then). */
static enum moeinf_status bind_vec_opt(struct loader *ld, const char *name, int64_t n,
                                       const float **out) {
    *out = NULL;
    if (!moeinf_gguf_find_tensor(ld->g, name)) return MOEINF_OK;
    return bind_vec(ld, name, n, out);
}

static enum moeinf_status read_rope_scaling(struct loader *ld, struct moeinf_hparams *hp) {
    char key[KEY_MAX];
    struct moeinf_gguf_str kind = {0};
    enum moeinf_status st = moeinf_gguf_get_str_opt(
        ld->g, arch_key(key, ld->arch, "rope.scaling.type"), &kind, ld->err);
    if (st != MOEINF_OK) return st;
    float factor = 1.0f;
    if (kind.data && !moeinf_gguf_str_eq(kind, "none")) {
        if (!moeinf_gguf_str_eq(kind, "linear")) {
            return moeinf_fail(ld->err, MOEINF_ERR_UNSUPPORTED,
                               "%s: RoPE scaling '%.*s' is not supported yet (none and linear are)",
                               ld->g->path, (int)(kind.len > 32 ? 32 : kind.len), kind.data);
        }
        st = get_float(ld, "rope.scaling.factor", false, &factor);
    } else {
        st = get_float(ld, "rope.scale_linear", false, &factor); /* older converters */
    }
    if (st != MOEINF_OK) return st;
    if (!(factor >= 1.0f && factor <= 1024.0f)) {
        return moeinf_fail(ld->err, MOEINF_ERR_FORMAT, "%s: RoPE scaling factor %g is invalid",
                           ld->g->path, (double)factor);
    }
    hp->rope_freq_scale = 1.0f / factor;
    return MOEINF_OK;
}

/*
 * What the MoE architectures add (after expert_count and expert_used_count are known), as
 * llama.cpp reads them: the expert width expert_feed_forward_length, else
 * feed_forward_length / expert_used_count (qwen2moe, qwen3moe) or feed_forward_length itself
 * (olmoe); qwen2moe's shared expert width expert_shared_feed_forward_length, else
 * feed_forward_length. Routing is a softmax over all experts, then the top k; llama.cpp
 * renormalises the chosen probabilities for qwen3moe only and never scales them, for these
 * three archs whatever the metadata says (it reads expert_weights_norm, expert_weights_scale
 * and expert_gating_func for other archs only). moeinf takes those defaults, and honours the
 * keys where a file has them (no converter writes them for these archs): then it differs
 * from llama.cpp, on purpose, and a gating function other than softmax is refused.
 */
static enum moeinf_status read_moe_arch(struct loader *ld, int ff_len, struct moeinf_hparams *hp) {
    char key[KEY_MAX];
    enum moeinf_status st;
    int n_ff_exp = 0;
    if ((st = get_int(ld, "expert_feed_forward_length", false, 1 << 22, &n_ff_exp))) return st;
    if (n_ff_exp > 0) {
        hp->n_ff = n_ff_exp;
    } else {
        hp->n_ff = hp->arch == MOEINF_ARCH_OLMOE ? ff_len : ff_len / hp->n_expert_used;
    }
    if (hp->arch == MOEINF_ARCH_QWEN2MOE) {
        hp->n_ff_shexp = ff_len;
        if ((st = get_int(ld, "expert_shared_feed_forward_length", false, 1 << 22,
                          &hp->n_ff_shexp))) {
            return st;
        }
        if (hp->n_ff_shexp <= 0) {
            return moeinf_fail(ld->err, MOEINF_ERR_FORMAT,
                               "%s: qwen2moe needs expert_shared_feed_forward_length (or "
                               "feed_forward_length) for its shared expert",
                               ld->g->path);
        }
    }
    if (hp->n_ff <= 0) {
        return moeinf_fail(ld->err, MOEINF_ERR_FORMAT,
                           "%s: neither expert_feed_forward_length nor feed_forward_length gives "
                           "the expert width",
                           ld->g->path);
    }
    hp->rope_neox = true;
    hp->qk_norm = hp->arch == MOEINF_ARCH_QWEN3MOE ? MOEINF_QK_NORM_HEAD
                  : hp->arch == MOEINF_ARCH_OLMOE  ? MOEINF_QK_NORM_WHOLE
                                                   : MOEINF_QK_NORM_NONE;
    hp->expert_weights_norm = hp->arch == MOEINF_ARCH_QWEN3MOE;
    if ((st = moeinf_gguf_get_bool_opt(ld->g, arch_key(key, ld->arch, "expert_weights_norm"),
                                       &hp->expert_weights_norm, ld->err)) ||
        (st = get_float(ld, "expert_weights_scale", false, &hp->expert_weights_scale))) {
        return st;
    }
    if (!(hp->expert_weights_scale >= 0.0f && hp->expert_weights_scale <= 1e6f)) {
        return moeinf_fail(ld->err, MOEINF_ERR_FORMAT, "%s: expert_weights_scale %g is invalid",
                           ld->g->path, (double)hp->expert_weights_scale);
    }
    /* llama.cpp's gating functions: 1 softmax, 2 sigmoid, 3 softmax of the chosen logits */
    int gating = 1;
    if ((st = get_int(ld, "expert_gating_func", false, 16, &gating))) return st;
    if (gating != 1) {
        return moeinf_fail(ld->err, MOEINF_ERR_UNSUPPORTED,
                           "%s: expert_gating_func %d is not supported yet for arch '%s' (1, "
                           "softmax, is)",
                           ld->g->path, gating, ld->arch);
    }
    return MOEINF_OK;
}

static enum moeinf_status read_hparams(struct loader *ld, enum moeinf_arch arch,
                                       struct moeinf_hparams *hp) {
    enum moeinf_status st;
    memset(hp, 0, sizeof *hp);
    hp->arch = arch;
    /* The MoE-only architectures give the expert width in expert_feed_forward_length and may
     * leave feed_forward_length out (read_moe_arch). */
    const bool moe_arch = arch != MOEINF_ARCH_LLAMA;
    int ff_len = 0;
    if ((st = get_int(ld, "embedding_length", true, 1 << 20, &hp->n_embd)) ||
        (st = get_int(ld, "block_count", true, 4096, &hp->n_layer)) ||
        (st = get_int(ld, "attention.head_count", true, 4096, &hp->n_head)) ||
        (st = get_int(ld, "feed_forward_length", !moe_arch, 1 << 22, &ff_len)) ||
        (st = get_int(ld, "context_length", true, 1 << 30, &hp->n_ctx_train))) {
        return st;
    }
    hp->n_ff = moe_arch ? 1 : ff_len; /* set by read_moe_arch */
    hp->n_head_kv = hp->n_head;
    if ((st = get_int(ld, "attention.head_count_kv", false, 4096, &hp->n_head_kv))) return st;
    if (hp->n_embd <= 0 || hp->n_layer <= 0 || hp->n_head <= 0 || hp->n_head_kv <= 0 ||
        hp->n_ff <= 0 || hp->n_ctx_train <= 0 || hp->n_head % hp->n_head_kv != 0) {
        return moeinf_fail(ld->err, MOEINF_ERR_FORMAT,
                           "%s: invalid geometry (embd %d, layers %d, heads %d/%d kv, ff %d)",
                           ld->g->path, hp->n_embd, hp->n_layer, hp->n_head, hp->n_head_kv,
                           hp->n_ff);
    }
    hp->head_dim = hp->n_embd % hp->n_head == 0 ? hp->n_embd / hp->n_head : 0;
    if ((st = get_int(ld, "attention.key_length", false, 1 << 16, &hp->head_dim))) return st;
    int v_len = hp->head_dim;
    if ((st = get_int(ld, "attention.value_length", false, 1 << 16, &v_len))) return st;
    if (hp->head_dim <= 0 || hp->head_dim % 2 != 0 || v_len != hp->head_dim) {
        return moeinf_fail(ld->err, MOEINF_ERR_FORMAT, "%s: invalid head size (key %d, value %d)",
                           ld->g->path, hp->head_dim, v_len);
    }
    hp->n_rot = hp->head_dim;
    if ((st = get_int(ld, "rope.dimension_count", false, 1 << 16, &hp->n_rot))) return st;
    if (hp->n_rot <= 0 || hp->n_rot > hp->head_dim || hp->n_rot % 2 != 0) {
        return moeinf_fail(ld->err, MOEINF_ERR_FORMAT, "%s: invalid rope.dimension_count %d",
                           ld->g->path, hp->n_rot);
    }
    hp->rope_base = 10000.0f;
    hp->rms_eps = 1e-5f;
    if ((st = get_float(ld, "rope.freq_base", false, &hp->rope_base)) ||
        (st = get_float(ld, "attention.layer_norm_rms_epsilon", true, &hp->rms_eps))) {
        return st;
    }
    if (!(hp->rope_base > 0.0f) || !(hp->rms_eps > 0.0f && hp->rms_eps < 1.0f)) {
        return moeinf_fail(ld->err, MOEINF_ERR_FORMAT, "%s: invalid rope base or rms epsilon",
                           ld->g->path);
    }
    if ((st = read_rope_scaling(ld, hp))) return st;
    if ((st = get_int(ld, "expert_count", moe_arch, 1 << 16, &hp->n_expert))) return st;
    if (moe_arch && hp->n_expert <= 0) {
        return moeinf_fail(ld->err, MOEINF_ERR_FORMAT, "%s: arch '%s' needs expert_count > 0",
                           ld->g->path, ld->arch);
    }
    hp->expert_weights_norm = true; /* llama: the Mixtral family renormalises */
    if (hp->n_expert > 0) {
        if ((st = get_int(ld, "expert_used_count", true, MOEINF_MAX_EXPERT_USED,
                          &hp->n_expert_used))) {
            return st;
        }
        if (hp->n_expert_used <= 0 || hp->n_expert_used > hp->n_expert) {
            return moeinf_fail(ld->err, MOEINF_ERR_FORMAT,
                               "%s: expert_used_count %d is invalid for %d experts", ld->g->path,
                               hp->n_expert_used, hp->n_expert);
        }
    }
    if (moe_arch) return read_moe_arch(ld, ff_len, hp);
    return MOEINF_OK;
}

/* q/k/v biases (qwen2moe, optional elsewhere) and q/k norms (qwen3moe per head, olmoe over
 * the whole projection). */
static enum moeinf_status bind_attn_extras(struct loader *ld, const struct moeinf_hparams *hp,
                                           int il, struct moeinf_layer *lw) {
    char name[96];
    const int64_t n_q_dim = (int64_t)hp->n_head * hp->head_dim;
    const int64_t n_kv_dim = (int64_t)hp->n_head_kv * hp->head_dim;
    enum moeinf_status st;
#define NAME(s) (snprintf(name, sizeof name, "blk.%d.%s", il, s), name)
    if ((st = bind_vec_opt(ld, NAME("attn_q.bias"), n_q_dim, &lw->bq)) ||
        (st = bind_vec_opt(ld, NAME("attn_k.bias"), n_kv_dim, &lw->bk)) ||
        (st = bind_vec_opt(ld, NAME("attn_v.bias"), n_kv_dim, &lw->bv))) {
        return st;
    }
    if (hp->arch == MOEINF_ARCH_QWEN2MOE && (!lw->bq || !lw->bk || !lw->bv)) {
        return moeinf_fail(ld->err, MOEINF_ERR_FORMAT, "%s: qwen2moe layer %d lacks a q/k/v bias",
                           ld->g->path, il);
    }
    if (hp->qk_norm != MOEINF_QK_NORM_NONE) {
        const bool head = hp->qk_norm == MOEINF_QK_NORM_HEAD;
        if ((st = bind_vec(ld, NAME("attn_q_norm.weight"), head ? hp->head_dim : n_q_dim,
                           &lw->q_norm)) ||
            (st = bind_vec(ld, NAME("attn_k_norm.weight"), head ? hp->head_dim : n_kv_dim,
                           &lw->k_norm))) {
            return st;
        }
    }
#undef NAME
    return MOEINF_OK;
}

/* qwen2moe's shared expert: its sigmoid gate (a vector) and its SwiGLU matrices. */
static enum moeinf_status bind_shared_expert(struct loader *ld, const struct moeinf_hparams *hp,
                                             int il, struct moeinf_layer *lw) {
    char name[96];
    const int64_t n_embd = hp->n_embd;
    const int64_t n_sh = hp->n_ff_shexp;
    enum moeinf_status st;
#define NAME(s) (snprintf(name, sizeof name, "blk.%d.%s", il, s), name)
    if ((st = bind_vec(ld, NAME("ffn_gate_inp_shexp.weight"), n_embd, &lw->gate_inp_shexp)) ||
        (st = bind(ld, NAME("ffn_gate_shexp.weight"), n_embd, n_sh, 1, false, &lw->gate_shexp)) ||
        (st = bind(ld, NAME("ffn_up_shexp.weight"), n_embd, n_sh, 1, false, &lw->up_shexp)) ||
        (st = bind(ld, NAME("ffn_down_shexp.weight"), n_sh, n_embd, 1, false, &lw->down_shexp))) {
        return st;
    }
#undef NAME
    return MOEINF_OK;
}

static enum moeinf_status bind_layer(struct loader *ld, const struct moeinf_hparams *hp, int il,
                                     struct moeinf_layer *lw) {
    char name[96];
    const int64_t n_embd = hp->n_embd;
    const int64_t n_q_dim = (int64_t)hp->n_head * hp->head_dim;
    const int64_t n_kv_dim = (int64_t)hp->n_head_kv * hp->head_dim;
    const int64_t n_ff = hp->n_ff;
    const int64_t n_expert = hp->n_expert;
    enum moeinf_status st;
#define NAME(s) (snprintf(name, sizeof name, "blk.%d.%s", il, s), name)
    if ((st = bind_vec(ld, NAME("attn_norm.weight"), n_embd, &lw->attn_norm)) ||
        (st = bind(ld, NAME("attn_q.weight"), n_embd, n_q_dim, 1, false, &lw->wq)) ||
        (st = bind(ld, NAME("attn_k.weight"), n_embd, n_kv_dim, 1, false, &lw->wk)) ||
        (st = bind(ld, NAME("attn_v.weight"), n_embd, n_kv_dim, 1, false, &lw->wv)) ||
        (st = bind(ld, NAME("attn_output.weight"), n_q_dim, n_embd, 1, false, &lw->wo)) ||
        (st = bind_vec(ld, NAME("ffn_norm.weight"), n_embd, &lw->ffn_norm))) {
        return st;
    }
    if ((st = bind_attn_extras(ld, hp, il, lw))) return st;
    if (n_expert > 0) {
        if ((st = bind(ld, NAME("ffn_gate_inp.weight"), n_embd, n_expert, 1, false, &lw->router)) ||
            (st = bind(ld, NAME("ffn_gate_exps.weight"), n_embd, n_ff, n_expert, false,
                       &lw->gate_exps)) ||
            (st = bind(ld, NAME("ffn_up_exps.weight"), n_embd, n_ff, n_expert, false,
                       &lw->up_exps)) ||
            (st = bind(ld, NAME("ffn_down_exps.weight"), n_ff, n_embd, n_expert, false,
                       &lw->down_exps))) {
            return st;
        }
        if (moeinf_type_cpu_get(lw->gate_exps.type)->vec_dot_type !=
            moeinf_type_cpu_get(lw->up_exps.type)->vec_dot_type) {
            return moeinf_fail(ld->err, MOEINF_ERR_UNSUPPORTED,
                               "%s: layer %d mixes expert gate and up types %s and %s", ld->g->path,
                               il, moeinf_type_name(lw->gate_exps.type),
                               moeinf_type_name(lw->up_exps.type));
        }
        if (lw->router.type != MOEINF_TYPE_F32) {
            return moeinf_fail(ld->err, MOEINF_ERR_UNSUPPORTED, "%s: router '%s' must be f32",
                               ld->g->path, NAME("ffn_gate_inp.weight"));
        }
        if (hp->n_ff_shexp > 0 && (st = bind_shared_expert(ld, hp, il, lw))) return st;
    } else {
        if ((st = bind(ld, NAME("ffn_gate.weight"), n_embd, n_ff, 1, false, &lw->ffn_gate)) ||
            (st = bind(ld, NAME("ffn_up.weight"), n_embd, n_ff, 1, false, &lw->ffn_up)) ||
            (st = bind(ld, NAME("ffn_down.weight"), n_ff, n_embd, 1, false, &lw->ffn_down))) {
            return st;
        }
    }
#undef NAME
    return MOEINF_OK;
}

/* GGUF names, indexed by enum moeinf_arch. */
static const char *const arch_names[] = {"llama", "qwen2moe", "qwen3moe", "olmoe"};

const char *moeinf_arch_name(enum moeinf_arch arch) {
    return (size_t)arch < sizeof arch_names / sizeof arch_names[0] ? arch_names[arch] : "?";
}

enum moeinf_status moeinf_llm_init(const struct moeinf_gguf *g, struct moeinf_llm **out,
                                   struct moeinf_error *err) {
    struct moeinf_gguf_str arch;
    enum moeinf_status st = moeinf_gguf_get_str(g, "general.architecture", &arch, err);
    if (st != MOEINF_OK) return st;
    const size_t n_archs = sizeof arch_names / sizeof arch_names[0];
    size_t ia = 0;
    while (ia < n_archs && !moeinf_gguf_str_eq(arch, arch_names[ia]))
        ia++;
    if (ia == n_archs) {
        return moeinf_fail(err, MOEINF_ERR_UNSUPPORTED,
                           "%s: architecture '%.*s' is not supported yet (llama, qwen2moe, "
                           "qwen3moe and olmoe are)",
                           g->path, (int)(arch.len > 40 ? 40 : arch.len), arch.data);
    }
    struct loader ld = {g, arch_names[ia], err};
    struct moeinf_llm *llm = calloc(1, sizeof *llm);
    if (!llm) return moeinf_fail(err, MOEINF_ERR_NOMEM, "%s: out of memory", g->path);
    struct moeinf_hparams *hp = &llm->hp;
    if ((st = read_hparams(&ld, (enum moeinf_arch)ia, hp))) goto fail;
    if ((st = bind(&ld, "token_embd.weight", hp->n_embd, 0, 1, false, &llm->tok_embd))) goto fail;
    if (llm->tok_embd.n_out <= 0 || llm->tok_embd.n_out > (1 << 24)) {
        st = moeinf_fail(err, MOEINF_ERR_FORMAT, "%s: invalid vocabulary size %lld", g->path,
                         (long long)llm->tok_embd.n_out);
        goto fail;
    }
    hp->n_vocab = (int)llm->tok_embd.n_out;
    if ((st = bind_vec(&ld, "output_norm.weight", hp->n_embd, &llm->output_norm))) goto fail;
    if ((st = bind(&ld, "output.weight", hp->n_embd, hp->n_vocab, 1, true, &llm->output))) {
        goto fail;
    }
    if (!llm->output.data) llm->output = llm->tok_embd; /* tied lm_head */
    llm->layers = calloc((size_t)hp->n_layer, sizeof *llm->layers);
    if (!llm->layers) {
        st = moeinf_fail(err, MOEINF_ERR_NOMEM, "%s: out of memory", g->path);
        goto fail;
    }
    for (int il = 0; il < hp->n_layer; il++) {
        if ((st = bind_layer(&ld, hp, il, &llm->layers[il]))) goto fail;
    }
    *out = llm;
    return MOEINF_OK;
fail:
    moeinf_llm_free(llm);
    return st;
}

void moeinf_llm_free(struct moeinf_llm *llm) {
    if (!llm) return;
    free(llm->layers);
    free(llm);
}
