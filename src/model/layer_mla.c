/*
 * layer_mla.c - the multi-head latent attention block of a layer (MOEINF_ATTN_MLA, DeepSeek-V2
 * and later; llama.cpp's "absorbed" form). Per token:
 *   q       = wq_b rmsnorm(wq_a x) (or wq x): per head nope values, then n_rot to rotate
 *   [c, kr] = wkv_a x: the latent c (mla_kv values, RMSNormed) and one key part kr (RoPE'd)
 * The cache keeps only the row [c, kr] of each token, shared by all heads. Each head's query
 * is absorbed into the latent space, qa = W_kb q_nope, so that its score against position t
 * is [qa, q_rope] . [c_t, kr_t], scaled by hp->attn_scale; its output is the weighted sum of
 * the latents c_t, expanded by W_vb. W_kb and W_vb are attn_k_b and attn_v_b (products with
 * the activations rounded to their vec_dot_type, as llama.cpp's absorbed graph has them), or
 * the key and value rows of an older file's attn_kv_b. llama.cpp computes such a file's K and V
 * from c rounded to attn_kv_b's vec_dot_type; moeinf caches that rounded c and multiplies by
 * the dequantized rows in float (the key rows transposed: each added, scaled by its q_nope
 * value), which gives llama.cpp's K.q and sum p V up to the order of float sums.
 */
#include <string.h>

#include "compute/attention.h"
#include "compute/ops.h"
#include "model/fwd_state.h"

/* q (f->q) and the new latent rows (f->k) of the m tokens, before norms and RoPE. */
static void project(struct moeinf_fwd *f, const struct moeinf_layer *lw, int m) {
    const struct moeinf_hparams *hp = &f->llm->hp;
    const struct moeinf_weight *first = lw->wq_a.data ? &lw->wq_a : &lw->wq;
    float *first_out = lw->wq_a.data ? f->mla_qa : f->q;
    const size_t first_stride = lw->wq_a.data ? (size_t)hp->mla_q : (size_t)f->n_q;
    size_t r1;
    size_t r2;
    const uint8_t *x1 = moeinf_fwd_act(f, first->type, f->xb, m, hp->n_embd, &r1);
    const uint8_t *x2 = moeinf_fwd_act(f, lw->wkv_a.type, f->xb, m, hp->n_embd, &r2);
    struct moeinf_mm_job jobs[2] = {
        moeinf_fwd_job(first, 0, x1, r1, m, first_out, first_stride),
        moeinf_fwd_job(&lw->wkv_a, 0, x2, r2, m, f->k, (size_t)f->n_kv),
    };
    moeinf_matmul_run(f->p.pool, f->p.kern, jobs, 2);
    if (!lw->wq_a.data) return;
    for (int j = 0; j < m; j++) {
        float *qa = f->mla_qa + (size_t)j * hp->mla_q;
        moeinf_rmsnorm(qa, qa, lw->q_a_norm, hp->mla_q, hp->rms_eps);
    }
    moeinf_fwd_acts_invalidate(f); /* mla_qa changed since it was last converted */
    moeinf_fwd_matmul(f, &lw->wq_b, f->mla_qa, m, f->q, (size_t)f->n_q);
}

/* For each head h, the m rows of w->n_in floats at src + (j * n_head + h) * head_stride (the
 * heads of a token side by side) times matrix h of w, into dst + h * out_head (out_row floats
 * apart): one conversion and one dispatch for all heads. */
static void per_head_products(struct moeinf_fwd *f, const struct moeinf_weight *w, const float *src,
                              size_t head_stride, int m, float *dst, size_t out_head,
                              size_t out_row) {
    const int n_head = f->llm->hp.n_head;
    const enum moeinf_type vt = moeinf_type_cpu_get(w->type)->vec_dot_type;
    const size_t rb = moeinf_row_bytes(vt, w->n_in); /* <= an F32 row: mla_act fits */
    moeinf_quantize_rows(f->p.pool, f->p.kern, vt, src, head_stride, m * n_head, w->n_in,
                         f->mla_act, rb);
    for (int h = 0; h < n_head; h++) {
        f->jobs[h] = moeinf_fwd_job(w, h, f->mla_act + (size_t)h * rb, (size_t)n_head * rb, m,
                                    dst + (size_t)h * out_head, out_row);
    }
    moeinf_matmul_run(f->p.pool, f->p.kern, f->jobs, n_head);
}

struct absorb_args {
    struct moeinf_fwd *f;
    const struct moeinf_layer *lw;
    int m;
};

/* Older files: qa = W_k^T q_nope per head, W_k's rows (the key rows of attn_kv_b) dequantized
 * one at a time and added in row order; a head per item, so the sums do not depend on the
 * threads. */
static void absorb_worker(void *arg, int ith, int nth) {
    const struct absorb_args *a = arg;
    struct moeinf_fwd *f = a->f;
    const struct moeinf_hparams *hp = &f->llm->hp;
    const struct moeinf_weight *w = &a->lw->wkv_b;
    const int nope = hp->head_dim - hp->n_rot;
    const int row = f->n_kv;
    float *buf = f->mla_row + (size_t)ith * (size_t)(hp->mla_kv + f->p.n_batch); /* thread's */
    const moeinf_to_float_fn to_float = f->p.kern->to_float[w->type];
    for (int h = ith; h < hp->n_head; h += nth) {
        for (int j = 0; j < a->m; j++) {
            memset(f->mla_q + ((size_t)j * hp->n_head + h) * row, 0,
                   (size_t)hp->mla_kv * sizeof(float));
        }
        for (int d = 0; d < nope; d++) {
            to_float(moeinf_weight_row(w, 0, (int64_t)h * (nope + hp->mla_v) + d), buf, hp->mla_kv);
            for (int j = 0; j < a->m; j++) {
                const float qd = f->q[(size_t)j * f->n_q + (size_t)h * hp->head_dim + d];
                f->p.kern->axpy_f32(hp->mla_kv, qd, buf,
                                    f->mla_q + ((size_t)j * hp->n_head + h) * row);
            }
        }
    }
}

/* An older file's latent as llama.cpp multiplies it by attn_kv_b: rounded to its
 * vec_dot_type (mla_act is free at this point). */
static void round_latent(struct moeinf_fwd *f, const struct moeinf_layer *lw, float *c) {
    const enum moeinf_type vt = moeinf_type_cpu_get(lw->wkv_b.type)->vec_dot_type;
    if (vt == MOEINF_TYPE_F32) return;
    const int kv = f->llm->hp.mla_kv;
    f->p.kern->from_float[vt](c, f->mla_act, kv);
    f->p.kern->to_float[vt](f->mla_act, c, kv);
}

/* Older files: each head's output, W_v lat, from attn_kv_b's value rows dequantized one at a
 * time and dotted in float with the m tokens' latent outputs; a head per item. */
static void expand_worker(void *arg, int ith, int nth) {
    const struct absorb_args *a = arg;
    struct moeinf_fwd *f = a->f;
    const struct moeinf_hparams *hp = &f->llm->hp;
    const struct moeinf_weight *w = &a->lw->wkv_b;
    const int nope = hp->head_dim - hp->n_rot;
    const int kv = hp->mla_kv;
    float *buf = f->mla_row + (size_t)ith * (size_t)(kv + f->p.n_batch);
    float *dots = buf + kv;
    const moeinf_to_float_fn to_float = f->p.kern->to_float[w->type];
    const moeinf_vec_dot_m_fn dot_m = f->p.kern->vec_dot_m[MOEINF_TYPE_F32];
    const size_t att_row = (size_t)hp->n_head * (size_t)hp->mla_v;
    for (int h = ith; h < hp->n_head; h += nth) {
        for (int i = 0; i < hp->mla_v; i++) {
            to_float(moeinf_weight_row(w, 0, (int64_t)h * (nope + hp->mla_v) + nope + i), buf, kv);
            dot_m(kv, a->m, dots, buf, f->mla_lat + (size_t)h * kv,
                  (size_t)hp->n_head * (size_t)kv * sizeof(float));
            for (int j = 0; j < a->m; j++)
                f->att[(size_t)j * att_row + (size_t)h * hp->mla_v + i] = dots[j];
        }
    }
}

/* Rows row0 .. row0 + m - 1 of the latents into the bound sequence's cache at n_past .. */
static void store_latents(struct moeinf_fwd *f, int il, int row0, int m, int n_past) {
    for (int j = 0; j < m; j++) {
        size_t off = f->kv_off[il] + (size_t)((n_past + j) % f->kv_rows[il]) * (size_t)f->n_kv;
        const float *k = f->k + (size_t)(row0 + j) * f->n_kv;
        if (f->p.kv_f16) {
            f->p.kern->from_float[MOEINF_TYPE_F16](k, (uint16_t *)f->cur->k_cache + off, f->n_kv);
        } else {
            memcpy((float *)f->cur->k_cache + off, k, (size_t)f->n_kv * sizeof(float));
        }
    }
}

/* Each run's causal attention over its sequence's latent rows, into mla_lat. */
static void attend_runs(struct moeinf_fwd *f, int il) {
    const struct moeinf_hparams *hp = &f->llm->hp;
    const int kv = hp->mla_kv;
    const int row = f->n_kv;
    for (int r = 0; r < f->n_runs; r++) {
        const struct moeinf_fwd_run *run = &f->runs[r];
        moeinf_fwd_bind_seq(f, run->seq);
        store_latents(f, il, run->row0, run->m, run->n_past);
        size_t layer_off = f->kv_off[il] * f->kv_elem;
        struct moeinf_attn_args a = {
            .q = f->mla_q + (size_t)run->row0 * hp->n_head * row,
            .k = f->cur->k_cache + layer_off,
            .v = f->cur->k_cache + layer_off, /* the latent is the first kv values of each row */
            .kv_f16 = f->p.kv_f16,
            .m = run->m,
            .pos0 = run->n_past,
            .n_head = hp->n_head,
            .n_head_kv = 1,
            .head_dim = row,
            .v_dim = kv,
            .k_row = row,
            .v_row = row,
            .scale = hp->attn_scale,
            .ring = f->kv_rows[il],
            .out = f->mla_lat + (size_t)run->row0 * hp->n_head * kv,
            .scratch = f->attn_scratch,
            .scratch_stride = f->attn_scratch_stride,
            .kern = f->p.kern,
        };
        moeinf_attention(f->p.pool, &a);
    }
}

void moeinf_fwd_mla(struct moeinf_fwd *f, int il, int m) {
    const struct moeinf_hparams *hp = &f->llm->hp;
    const struct moeinf_layer *lw = &f->llm->layers[il];
    const int n_head = hp->n_head;
    const int nope = hp->head_dim - hp->n_rot;
    const int kv = hp->mla_kv;
    const int row = f->n_kv; /* kv + n_rot */
    for (int j = 0; j < m; j++) {
        moeinf_rmsnorm(f->xb + (size_t)j * hp->n_embd, f->x + (size_t)j * hp->n_embd, lw->attn_norm,
                       hp->n_embd, hp->rms_eps);
    }
    moeinf_fwd_acts_invalidate(f);
    project(f, lw, m);
    for (int r = 0; r < f->n_runs; r++) {
        const struct moeinf_fwd_run *run = &f->runs[r];
        for (int i = 0; i < run->m; i++) {
            const int j = run->row0 + i;
            const int pos = run->n_past + i;
            float *c = f->k + (size_t)j * row;
            float *q = f->q + (size_t)j * f->n_q;
            moeinf_rmsnorm(c, c, lw->kv_a_norm, kv, hp->rms_eps);
            if (lw->wkv_b.data) round_latent(f, lw, c);
            moeinf_fwd_rope(hp, c + kv, 1, hp->n_rot, pos);
            moeinf_fwd_rope(hp, q + nope, n_head, hp->head_dim, pos);
            for (int h = 0; h < n_head; h++) {
                memcpy(f->mla_q + ((size_t)j * n_head + h) * row + kv,
                       q + (size_t)h * hp->head_dim + nope, (size_t)hp->n_rot * sizeof(float));
            }
        }
    }
    if (lw->wk_b.data) {
        per_head_products(f, &lw->wk_b, f->q, (size_t)hp->head_dim, m, f->mla_q, (size_t)row,
                          (size_t)n_head * row);
    } else {
        struct absorb_args a = {f, lw, m};
        moeinf_pool_run(f->p.pool, absorb_worker, &a);
    }
    attend_runs(f, il);
    if (lw->wv_b.data) {
        per_head_products(f, &lw->wv_b, f->mla_lat, (size_t)kv, m, f->att, (size_t)hp->mla_v,
                          (size_t)n_head * hp->mla_v);
    } else {
        struct absorb_args e = {f, lw, m};
        moeinf_pool_run(f->p.pool, expand_worker, &e);
    }
    moeinf_fwd_acts_invalidate(f); /* mla_act is not one of the cached conversions, att is new */
    moeinf_fwd_matmul(f, &lw->wo, f->att, m, f->tmp, (size_t)hp->n_embd);
    for (size_t i = 0; i < (size_t)m * hp->n_embd; i++)
        f->x[i] += f->tmp[i];
}
