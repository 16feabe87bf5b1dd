/*
 * layer_attn.c - the full-attention block of a layer (MOEINF_ATTN_FULL and _GATED): RMSNorm,
 * q/k/v in one dispatch, the biases and q/k RMSNorm the architecture has, RoPE (hp->rope,
 * YaRN-scaled where hp->rope_scaling says), K and V stored in the layer's cache (a ring for a
 * sliding-window layer) of each run's sequence, causal grouped-query attention over it (within the
 * window, with the layer's sinks), the output gate of a gated layer, the output projection with its
 * bias and the residual add.
 */
#include <math.h>
#include <string.h>

#include "compute/attention.h"
#include "compute/ops.h"
#include "model/fwd_state.h"

/* Rows row0 .. row0 + m - 1 of k and v into the bound sequence's cache at n_past .. */
static void store_kv(struct moeinf_fwd *f, int il, int row0, int m, int n_past) {
    for (int j = 0; j < m; j++) {
        size_t off = f->kv_off[il] + (size_t)((n_past + j) % f->kv_rows[il]) * (size_t)f->n_kv;
        const float *k = f->k + (size_t)(row0 + j) * f->n_kv;
        const float *v = f->v + (size_t)(row0 + j) * f->n_kv;
        if (f->p.kv_f16) {
            uint16_t *kc = (uint16_t *)f->cur->k_cache + off;
            uint16_t *vc = (uint16_t *)f->cur->v_cache + off;
            f->p.kern->from_float[MOEINF_TYPE_F16](k, kc, f->n_kv);
            f->p.kern->from_float[MOEINF_TYPE_F16](v, vc, f->n_kv);
        } else {
            memcpy((float *)f->cur->k_cache + off, k, (size_t)f->n_kv * sizeof(float));
            memcpy((float *)f->cur->v_cache + off, v, (size_t)f->n_kv * sizeof(float));
        }
    }
}

static void add_bias(float *x, const float *b, int n) {
    if (!b) return;
    for (int i = 0; i < n; i++)
        x[i] += b[i];
}

/* One token's q, k, v before RoPE: the biases the layer has, then q/k RMSNorm per head or
 * over the whole projection (hp->qk_norm). */
static void qkv_bias_norm(const struct moeinf_hparams *hp, const struct moeinf_layer *lw, float *q,
                          float *k, float *v) {
    const int n_q = hp->n_head * hp->head_dim;
    const int n_kv = hp->n_head_kv * hp->head_dim;
    add_bias(q, lw->bq, n_q);
    add_bias(k, lw->bk, n_kv);
    add_bias(v, lw->bv, n_kv);
    switch (hp->qk_norm) {
    case MOEINF_QK_NORM_NONE:
        break;
    case MOEINF_QK_NORM_WHOLE:
        moeinf_rmsnorm(q, q, lw->q_norm, n_q, hp->rms_eps);
        moeinf_rmsnorm(k, k, lw->k_norm, n_kv, hp->rms_eps);
        break;
    case MOEINF_QK_NORM_HEAD:
        for (int h = 0; h < hp->n_head; h++) {
            float *qh = q + (size_t)h * hp->head_dim;
            moeinf_rmsnorm(qh, qh, lw->q_norm, hp->head_dim, hp->rms_eps);
        }
        for (int h = 0; h < hp->n_head_kv; h++) {
            float *kh = k + (size_t)h * hp->head_dim;
            moeinf_rmsnorm(kh, kh, lw->k_norm, hp->head_dim, hp->rms_eps);
        }
        break;
    }
}

/* A gated layer's wq gives, per head, head_dim of q then head_dim of its output gate: q to
 * f->q, the gate to f->gate. */
static void split_q_gate(struct moeinf_fwd *f, int m) {
    const int hd = f->llm->hp.head_dim;
    for (int j = 0; j < m; j++) {
        for (int h = 0; h < f->llm->hp.n_head; h++) {
            const float *src = f->qg + ((size_t)j * f->n_q + (size_t)h * hd) * 2;
            size_t dst = (size_t)j * f->n_q + (size_t)h * hd;
            memcpy(f->q + dst, src, (size_t)hd * sizeof(float));
            memcpy(f->gate + dst, src + hd, (size_t)hd * sizeof(float));
        }
    }
}

void moeinf_fwd_attention(struct moeinf_fwd *f, int il, int m) {
    const struct moeinf_hparams *hp = &f->llm->hp;
    const struct moeinf_layer *lw = &f->llm->layers[il];
    for (int j = 0; j < m; j++) {
        moeinf_rmsnorm(f->xb + (size_t)j * hp->n_embd, f->x + (size_t)j * hp->n_embd, lw->attn_norm,
                       hp->n_embd, hp->rms_eps);
    }
    moeinf_fwd_acts_invalidate(f);
    /* q, k and v in one dispatch when their weights share an activation type */
    size_t rq;
    size_t rk;
    size_t rv;
    const uint8_t *xq = moeinf_fwd_act(f, lw->wq.type, f->xb, m, hp->n_embd, &rq);
    const uint8_t *xk = moeinf_fwd_act(f, lw->wk.type, f->xb, m, hp->n_embd, &rk);
    const uint8_t *xv = moeinf_fwd_act(f, lw->wv.type, f->xb, m, hp->n_embd, &rv);
    const bool gated = lw->attn == MOEINF_ATTN_GATED;
    struct moeinf_mm_job jobs[3] = {
        gated ? moeinf_fwd_job(&lw->wq, 0, xq, rq, m, f->qg, 2 * (size_t)f->n_q)
              : moeinf_fwd_job(&lw->wq, 0, xq, rq, m, f->q, (size_t)f->n_q),
        moeinf_fwd_job(&lw->wk, 0, xk, rk, m, f->k, (size_t)f->n_kv),
        moeinf_fwd_job(&lw->wv, 0, xv, rv, m, f->v, (size_t)f->n_kv),
    };
    moeinf_matmul_run(f->p.pool, f->p.kern, jobs, 3);
    if (gated) split_q_gate(f, m);
    for (int r = 0; r < f->n_runs; r++) {
        const struct moeinf_fwd_run *run = &f->runs[r];
        moeinf_fwd_bind_seq(f, run->seq);
        for (int j = 0; j < run->m; j++) {
            const size_t row = (size_t)run->row0 + (size_t)j;
            float *q = f->q + row * f->n_q;
            float *k = f->k + row * f->n_kv;
            qkv_bias_norm(hp, lw, q, k, f->v + row * f->n_kv);
            moeinf_fwd_rope(hp, q, hp->n_head, hp->head_dim, run->n_past + j);
            moeinf_fwd_rope(hp, k, hp->n_head_kv, hp->head_dim, run->n_past + j);
        }
        store_kv(f, il, run->row0, run->m, run->n_past);
        size_t layer_off = f->kv_off[il] * f->kv_elem;
        struct moeinf_attn_args a = {
            .q = f->q + (size_t)run->row0 * f->n_q,
            .k = f->cur->k_cache + layer_off,
            .v = f->cur->v_cache + layer_off,
            .ring = f->kv_rows[il],
            .window = lw->swa ? hp->n_swa : 0,
            .sinks = lw->attn_sinks,
            .kv_f16 = f->p.kv_f16,
            .m = run->m,
            .pos0 = run->n_past,
            .n_head = hp->n_head,
            .n_head_kv = hp->n_head_kv,
            .head_dim = hp->head_dim,
            .out = f->att + (size_t)run->row0 * f->n_q,
            .scratch = f->attn_scratch,
            .scratch_stride = f->attn_scratch_stride,
            .kern = f->p.kern,
        };
        moeinf_attention(f->p.pool, &a);
    }
    if (gated) {
        for (size_t i = 0; i < (size_t)m * (size_t)f->n_q; i++)
            f->att[i] *= 1.0f / (1.0f + expf(-f->gate[i]));
    }
    moeinf_fwd_matmul(f, &lw->wo, f->att, m, f->tmp, (size_t)hp->n_embd);
    for (int j = 0; j < m; j++)
        add_bias(f->tmp + (size_t)j * hp->n_embd, lw->bo, hp->n_embd);
    for (size_t i = 0; i < (size_t)m * hp->n_embd; i++)
        f->x[i] += f->tmp[i];
}
