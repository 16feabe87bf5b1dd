/* arch_bind.c - binding the tensors that architectures share (see arch.h). Every tensor bound
 * is recorded in llm->bound. */
#include <assert.h>
#include <stdio.h>
#include <string.h>

#include "base/status.h"
#include "model/arch.h"

#define NAME_MAX_LEN 96

static void record(struct moeinf_arch_loader *ld, struct moeinf_weight *w, const float **v,
                   size_t bytes, bool expert) {
    struct moeinf_llm *llm = ld->llm;
    /* each tensor of the file is bound at most once, as one view or (a fused ffn_gate_up_exps)
     * two, so the table sized at twice the file's tensor count cannot fill */
    assert((uint64_t)llm->n_bound < 2 * ld->g->n_tensors);
    llm->bound[llm->n_bound++] = (struct moeinf_bound){w, v, bytes, expert};
}

/* Tensor `name` checked for shape and type and viewed in *w; not recorded. */
static enum moeinf_status view(struct moeinf_arch_loader *ld, const char *name, int64_t ne0,
                               int64_t ne1, int64_t ne2, bool optional, struct moeinf_weight *w) {
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
    w->mat_stride = w->mat_bytes;
    return MOEINF_OK;
}

static enum moeinf_status bind_as(struct moeinf_arch_loader *ld, const char *name, int64_t ne0,
                                  int64_t ne1, int64_t ne2, bool optional, bool expert,
                                  struct moeinf_weight *w) {
    enum moeinf_status st = view(ld, name, ne0, ne1, ne2, optional, w);
    if (st == MOEINF_OK && w->data) record(ld, w, NULL, w->mat_bytes * (size_t)w->n_mat, expert);
    return st;
}

enum moeinf_status moeinf_arch_bind(struct moeinf_arch_loader *ld, const char *name, int64_t ne0,
                                    int64_t ne1, int64_t ne2, bool optional,
                                    struct moeinf_weight *w) {
    return bind_as(ld, name, ne0, ne1, ne2, optional, false, w);
}

enum moeinf_status moeinf_arch_bind_vec(struct moeinf_arch_loader *ld, const char *name, int64_t n,
                                        bool optional, const float **out) {
    *out = NULL;
    const struct moeinf_gguf_tensor *t = moeinf_gguf_find_tensor(ld->g, name);
    if (!t && optional) return MOEINF_OK;
    struct moeinf_weight w;
    enum moeinf_status st = view(ld, name, n, 1, 1, false, &w); /* a matrix of one row */
    if (st != MOEINF_OK) return st;
    if (w.type != MOEINF_TYPE_F32) {
        return moeinf_fail(ld->err, MOEINF_ERR_UNSUPPORTED, "%s: tensor '%s' must be f32",
                           ld->g->path, name);
    }
    *out = (const float *)w.data;
    record(ld, NULL, out, (size_t)n * sizeof(float), false);
    return MOEINF_OK;
}

/* "blk.<il>.<suffix>" into buf. */
static const char *layer_name(char *buf, int il, const char *suffix) {
    snprintf(buf, NAME_MAX_LEN, "blk.%d.%s", il, suffix);
    return buf;
}

enum moeinf_status moeinf_arch_bind_layer(struct moeinf_arch_loader *ld, int il, const char *suffix,
                                          int64_t ne0, int64_t ne1, int64_t ne2, bool optional,
                                          struct moeinf_weight *w) {
    char name[NAME_MAX_LEN];
    return moeinf_arch_bind(ld, layer_name(name, il, suffix), ne0, ne1, ne2, optional, w);
}

enum moeinf_status moeinf_arch_bind_layer_vec(struct moeinf_arch_loader *ld, int il,
                                              const char *suffix, int64_t n, bool optional,
                                              const float **out) {
    char name[NAME_MAX_LEN];
    return moeinf_arch_bind_vec(ld, layer_name(name, il, suffix), n, optional, out);
}

enum moeinf_status moeinf_arch_bind_f32(struct moeinf_arch_loader *ld, const char *name,
                                        int64_t ne0, int64_t ne1, const float **out) {
    struct moeinf_weight w;
    enum moeinf_status st = view(ld, name, ne0, ne1, 1, false, &w);
    if (st != MOEINF_OK) return st;
    if (w.type != MOEINF_TYPE_F32) {
        return moeinf_fail(ld->err, MOEINF_ERR_UNSUPPORTED, "%s: tensor '%s' must be f32",
                           ld->g->path, name);
    }
    *out = (const float *)w.data;
    record(ld, NULL, out, (size_t)ne0 * (size_t)ne1 * sizeof(float), false);
    return MOEINF_OK;
}

enum moeinf_status moeinf_arch_bind_attention_q(struct moeinf_arch_loader *ld,
                                                const struct moeinf_hparams *hp, int il,
                                                int64_t q_rows, struct moeinf_layer *lw) {
    char name[NAME_MAX_LEN];
    const int64_t n_embd = hp->n_embd;
    const int64_t n_q_dim = (int64_t)hp->n_head * hp->head_dim;
    const int64_t n_kv_dim = (int64_t)hp->n_head_kv * hp->head_dim;
    enum moeinf_status st;
    lw->attn = MOEINF_ATTN_FULL;
    if ((st = moeinf_arch_bind_vec(ld, layer_name(name, il, "attn_norm.weight"), n_embd, false,
                                   &lw->attn_norm)) ||
        (st = moeinf_arch_bind(ld, layer_name(name, il, "attn_q.weight"), n_embd, q_rows, 1, false,
                               &lw->wq)) ||
        (st = moeinf_arch_bind(ld, layer_name(name, il, "attn_k.weight"), n_embd, n_kv_dim, 1,
                               false, &lw->wk)) ||
        (st = moeinf_arch_bind(ld, layer_name(name, il, "attn_v.weight"), n_embd, n_kv_dim, 1,
                               false, &lw->wv)) ||
        (st = moeinf_arch_bind(ld, layer_name(name, il, "attn_output.weight"), n_q_dim, n_embd, 1,
                               false, &lw->wo))) {
        return st;
    }
    return MOEINF_OK;
}

enum moeinf_status moeinf_arch_bind_attention(struct moeinf_arch_loader *ld,
                                              const struct moeinf_hparams *hp, int il,
                                              struct moeinf_layer *lw) {
    return moeinf_arch_bind_attention_q(ld, hp, il, (int64_t)hp->n_head * hp->head_dim, lw);
}

enum moeinf_status moeinf_arch_bind_qkv_bias(struct moeinf_arch_loader *ld,
                                             const struct moeinf_hparams *hp, int il, bool required,
                                             struct moeinf_layer *lw) {
    char name[NAME_MAX_LEN];
    const int64_t n_q_dim = (int64_t)hp->n_head * hp->head_dim;
    const int64_t n_kv_dim = (int64_t)hp->n_head_kv * hp->head_dim;
    enum moeinf_status st;
    if ((st = moeinf_arch_bind_vec(ld, layer_name(name, il, "attn_q.bias"), n_q_dim, true,
                                   &lw->bq)) ||
        (st = moeinf_arch_bind_vec(ld, layer_name(name, il, "attn_k.bias"), n_kv_dim, true,
                                   &lw->bk)) ||
        (st = moeinf_arch_bind_vec(ld, layer_name(name, il, "attn_v.bias"), n_kv_dim, true,
                                   &lw->bv))) {
        return st;
    }
    if (required && (!lw->bq || !lw->bk || !lw->bv)) {
        return moeinf_fail(ld->err, MOEINF_ERR_FORMAT, "%s: %s layer %d lacks a q/k/v bias",
                           ld->g->path, ld->arch, il);
    }
    return MOEINF_OK;
}

enum moeinf_status moeinf_arch_bind_qk_norm(struct moeinf_arch_loader *ld,
                                            const struct moeinf_hparams *hp, int il,
                                            struct moeinf_layer *lw) {
    if (hp->qk_norm == MOEINF_QK_NORM_NONE) return MOEINF_OK;
    char name[NAME_MAX_LEN];
    const bool head = hp->qk_norm == MOEINF_QK_NORM_HEAD;
    const int64_t n_q = head ? hp->head_dim : (int64_t)hp->n_head * hp->head_dim;
    const int64_t n_k = head ? hp->head_dim : (int64_t)hp->n_head_kv * hp->head_dim;
    enum moeinf_status st;
    if ((st = moeinf_arch_bind_vec(ld, layer_name(name, il, "attn_q_norm.weight"), n_q, false,
                                   &lw->q_norm)) ||
        (st = moeinf_arch_bind_vec(ld, layer_name(name, il, "attn_k_norm.weight"), n_k, false,
                                   &lw->k_norm))) {
        return st;
    }
    return MOEINF_OK;
}

enum moeinf_status moeinf_arch_bind_dense_ffn(struct moeinf_arch_loader *ld,
                                              const struct moeinf_hparams *hp, int il,
                                              struct moeinf_layer *lw) {
    return moeinf_arch_bind_dense_ffn_norm(ld, hp, il, "ffn_norm.weight", lw);
}

enum moeinf_status moeinf_arch_bind_dense_ffn_norm(struct moeinf_arch_loader *ld,
                                                   const struct moeinf_hparams *hp, int il,
                                                   const char *norm, struct moeinf_layer *lw) {
    char name[NAME_MAX_LEN];
    const int64_t n_embd = hp->n_embd;
    const int64_t n_ff = hp->n_ff_dense > 0 ? hp->n_ff_dense : hp->n_ff;
    enum moeinf_status st;
    lw->ffn = MOEINF_FFN_DENSE;
    if ((st = moeinf_arch_bind_vec(ld, layer_name(name, il, norm), n_embd, false,
                                   &lw->ffn_norm)) ||
        (st = moeinf_arch_bind(ld, layer_name(name, il, "ffn_gate.weight"), n_embd, n_ff, 1, false,
                               &lw->ffn_gate)) ||
        (st = moeinf_arch_bind(ld, layer_name(name, il, "ffn_up.weight"), n_embd, n_ff, 1, false,
                               &lw->ffn_up)) ||
        (st = moeinf_arch_bind(ld, layer_name(name, il, "ffn_down.weight"), n_ff, n_embd, 1, false,
                               &lw->ffn_down))) {
        return st;
    }
    return MOEINF_OK;
}

/* The shared expert: its sigmoid gate (a vector; none when hp->shexp_ungated) and its SwiGLU
 * matrices, n_ff_shexp wide. */
static enum moeinf_status bind_shared_expert(struct moeinf_arch_loader *ld,
                                             const struct moeinf_hparams *hp, int il,
                                             struct moeinf_layer *lw) {
    char name[NAME_MAX_LEN];
    const int64_t n_embd = hp->n_embd;
    const int64_t n_sh = hp->n_ff_shexp;
    enum moeinf_status st;
    if ((!hp->shexp_ungated &&
         (st = moeinf_arch_bind_vec(ld, layer_name(name, il, "ffn_gate_inp_shexp.weight"), n_embd,
                                    false, &lw->gate_inp_shexp))) ||
        (st = moeinf_arch_bind(ld, layer_name(name, il, "ffn_gate_shexp.weight"), n_embd, n_sh, 1,
                               false, &lw->gate_shexp)) ||
        (st = moeinf_arch_bind(ld, layer_name(name, il, "ffn_up_shexp.weight"), n_embd, n_sh, 1,
                               false, &lw->up_shexp)) ||
        (st = moeinf_arch_bind(ld, layer_name(name, il, "ffn_down_shexp.weight"), n_sh, n_embd, 1,
                               false, &lw->down_shexp))) {
        return st;
    }
    return MOEINF_OK;
}

/* A converter option (convert_hf_to_gguf.py --fuse-gate-up-exps) writes each expert's gate and
 * up matrices as one [n_embd, 2 n_ff] matrix of ffn_gate_up_exps: gate's n_ff rows, then up's,
 * as llama.cpp's build_moe_ffn splits it. Bound as two views of it, each n_ff rows with a
 * stride of two matrices between experts, so the rest of the engine (and the expert cache,
 * which reads each view's rows of an expert as a part) sees gate and up as in other files. */
static enum moeinf_status bind_gate_up_exps(struct moeinf_arch_loader *ld, int il, int64_t n_embd,
                                            int64_t n_ff, int64_t n_expert,
                                            struct moeinf_layer *lw) {
    char name[NAME_MAX_LEN];
    struct moeinf_weight both;
    enum moeinf_status st = view(ld, layer_name(name, il, "ffn_gate_up_exps.weight"), n_embd,
                                 2 * n_ff, n_expert, false, &both);
    if (st != MOEINF_OK) return st;
    struct moeinf_weight half = both;
    half.n_out = n_ff;
    half.mat_bytes = both.mat_bytes / 2;
    half.mat_stride = both.mat_bytes;
    lw->gate_exps = half;
    lw->up_exps = half;
    lw->up_exps.data = both.data + half.mat_bytes;
    record(ld, &lw->gate_exps, NULL, half.mat_bytes * (size_t)n_expert, true);
    record(ld, &lw->up_exps, NULL, half.mat_bytes * (size_t)n_expert, true);
    return MOEINF_OK;
}

enum moeinf_status moeinf_arch_bind_moe_ffn(struct moeinf_arch_loader *ld,
                                            const struct moeinf_hparams *hp, int il,
                                            struct moeinf_layer *lw) {
    return moeinf_arch_bind_moe_ffn_norm(ld, hp, il, "ffn_norm.weight", lw);
}

enum moeinf_status moeinf_arch_bind_moe_ffn_norm(struct moeinf_arch_loader *ld,
                                                 const struct moeinf_hparams *hp, int il,
                                                 const char *norm, struct moeinf_layer *lw) {
    char name[NAME_MAX_LEN];
    const int64_t n_embd = hp->n_embd;
    const int64_t n_ff = hp->n_ff;
    const int64_t n_expert = hp->n_expert;
    enum moeinf_status st;
    lw->ffn = MOEINF_FFN_MOE;
    const bool fused =
        moeinf_gguf_find_tensor(ld->g, layer_name(name, il, "ffn_gate_up_exps.weight"));
    if ((st = moeinf_arch_bind_vec(ld, layer_name(name, il, norm), n_embd, false, &lw->ffn_norm)) ||
        (st = moeinf_arch_bind(ld, layer_name(name, il, "ffn_gate_inp.weight"), n_embd, n_expert, 1,
                               false, &lw->router)) ||
        (st = fused ? bind_gate_up_exps(ld, il, n_embd, n_ff, n_expert, lw)
                    : bind_as(ld, layer_name(name, il, "ffn_gate_exps.weight"), n_embd, n_ff,
                              n_expert, false, true, &lw->gate_exps)) ||
        (!fused && (st = bind_as(ld, layer_name(name, il, "ffn_up_exps.weight"), n_embd, n_ff,
                                 n_expert, false, true, &lw->up_exps))) ||
        (st = bind_as(ld, layer_name(name, il, "ffn_down_exps.weight"), n_ff, n_embd, n_expert,
                      false, true, &lw->down_exps))) {
        return st;
    }
    if (moeinf_type_cpu_get(lw->gate_exps.type)->vec_dot_type !=
        moeinf_type_cpu_get(lw->up_exps.type)->vec_dot_type) {
        return moeinf_fail(ld->err, MOEINF_ERR_UNSUPPORTED,
                           "%s: layer %d mixes expert gate and up types %s and %s", ld->g->path, il,
                           moeinf_type_name(lw->gate_exps.type),
                           moeinf_type_name(lw->up_exps.type));
    }
    if (lw->router.type != MOEINF_TYPE_F32) {
        return moeinf_fail(ld->err, MOEINF_ERR_UNSUPPORTED, "%s: router '%s' must be f32",
                           ld->g->path, layer_name(name, il, "ffn_gate_inp.weight"));
    }
    if (hp->n_ff_shexp > 0) return bind_shared_expert(ld, hp, il, lw);
    return MOEINF_OK;
}

enum moeinf_status moeinf_arch_bind_std_layer(struct moeinf_arch_loader *ld,
                                              const struct moeinf_hparams *hp, int il,
                                              bool bias_required, struct moeinf_layer *lw) {
    enum moeinf_status st;
    if ((st = moeinf_arch_bind_attention(ld, hp, il, lw)) ||
        (st = moeinf_arch_bind_qkv_bias(ld, hp, il, bias_required, lw)) ||
        (st = moeinf_arch_bind_qk_norm(ld, hp, il, lw))) {
        return st;
    }
    if (hp->n_expert > 0) return moeinf_arch_bind_moe_ffn(ld, hp, il, lw);
    return moeinf_arch_bind_dense_ffn(ld, hp, il, lw);
}
