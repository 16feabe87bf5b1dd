/* forward.c - the layer loop of the architectures of model.h; see forward.h. */
#include "model/forward.h"

#include <assert.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/status.h"
#include "compute/attention.h"
#include "compute/matmul.h"
#include "compute/ops.h"
#include "offload/tier.h"

/* Activation rows converted to one vec_dot_type, valid for one source buffer at a time. */
struct act {
    uint8_t *buf;
    size_t row_bytes;
    const float *src; /* which float buffer buf currently holds, NULL = stale */
};

struct moeinf_fwd {
    const struct moeinf_llm *llm;
    struct moeinf_fwd_params p;
    int n_kv;         /* n_head_kv * head_dim */
    int n_q;          /* n_head * head_dim */
    int max_width;    /* widest activation row */
    size_t kv_elem;   /* bytes per cached value */
    uint8_t *k_cache; /* [n_layer][n_ctx][n_kv] */
    uint8_t *v_cache;
    float *x;            /* [n_batch][n_embd] residual stream */
    float *xb;           /* [n_batch][n_embd] normed input */
    float *q;            /* [n_batch][n_q] */
    float *k;            /* [n_batch][n_kv] */
    float *v;            /* [n_batch][n_kv] */
    float *att;          /* [n_batch][n_q] */
    float *tmp;          /* [n_batch][n_embd] sub-layer output */
    float *hg;           /* [n_batch * n_used][n_ff] gate, then swiglu */
    float *hu;           /* [n_batch * n_used][n_ff] up */
    float *eo;           /* [n_batch * n_used][n_embd] expert outputs */
    float *sh_out;       /* [n_batch][n_embd] shared expert output (n_ff_shexp > 0) */
    float *router;       /* [n_batch][n_expert] */
    float *lookahead;    /* [n_expert] a later layer's router logits (gate lookahead) */
    uint8_t *ex_in;      /* [n_batch * n_used] gathered quantized rows */
    float *attn_scratch; /* per thread */
    size_t attn_scratch_stride;
    struct act acts[MOEINF_TYPE_COUNT]; /* lazily allocated per vec_dot_type */
    int32_t *sel;                       /* [n_layer][n_batch][n_used] selected experts */
    float *sel_w;                       /* [n_layer][n_batch][n_used] their weights */
    int *slot;                          /* [n_batch][n_used] slot of (token, rank) */
    int *expert_count;                  /* [n_expert] */
    int *expert_first;                  /* [n_expert + 1] */
    struct moeinf_mm_job *jobs;         /* [2 * n_expert + 3] */
    int *wave;                          /* [n_expert] experts of the current wave, ascending */
    int *wave_index;                    /* [n_expert] position of an expert in the tier's wave */
    const uint8_t *(*wave_parts)[3];    /* [n_expert] their gate, up, down matrices */
    uint8_t *wave_done;                 /* [n_expert] the wave's i-th expert was computed */
    uint64_t bytes;                     /* allocated: KV cache and scratch */
    int nonfinite_layer; /* first layer of the last eval whose output was not finite; -1 */
};

/* Rows of `src` (m rows of n floats, n floats apart) converted for weight type wt. */
static const uint8_t *act_get(struct moeinf_fwd *f, enum moeinf_type wt, const float *src, int m,
                              int64_t n, size_t *row_bytes) {
    enum moeinf_type vt = moeinf_type_cpu_get(wt)->vec_dot_type;
    struct act *a = &f->acts[vt];
    assert(a->buf); /* allocated at init for every weight type of the model */
    *row_bytes = moeinf_row_bytes(vt, n);
    if (a->src != src || a->row_bytes != *row_bytes) {
        moeinf_quantize_rows(f->p.pool, f->p.kern, vt, src, (size_t)n, m, n, a->buf, *row_bytes);
        a->src = src;
        a->row_bytes = *row_bytes;
    }
    return a->buf;
}

static void acts_invalidate(struct moeinf_fwd *f) {
    for (int t = 0; t < MOEINF_TYPE_COUNT; t++)
        f->acts[t].src = NULL;
}

/* Matrix `data` (laid out as w's matrices); y is written later, by the matmul the job is
 * given to. */
static struct moeinf_mm_job job_at(const uint8_t *data, const struct moeinf_weight *w,
                                   const uint8_t *x, size_t x_stride, int m,
                                   float *y, // NOLINT(readability-non-const-parameter)
                                   size_t y_stride) {
    struct moeinf_mm_job j = {
        .w = data,
        .w_row_bytes = w->row_bytes,
        .type = w->type,
        .n_in = w->n_in,
        .n_out = w->n_out,
        .x = x,
        .x_stride = x_stride,
        .m = m,
        .y = y,
        .y_stride = y_stride,
    };
    return j;
}

/* Matrix e of w. */
static struct moeinf_mm_job job_for(const struct moeinf_weight *w, int64_t e, const uint8_t *x,
                                    size_t x_stride, int m,
                                    float *y, // NOLINT(readability-non-const-parameter)
                                    size_t y_stride) {
    return job_at(moeinf_weight_row(w, e, 0), w, x, x_stride, m, y, y_stride);
}

/* y = W x for m rows of src (n_in wide) into y (y_stride floats apart). */
static void matmul1(struct moeinf_fwd *f, const struct moeinf_weight *w, const float *src, int m,
                    float *y, size_t y_stride) {
    size_t rb;
    const uint8_t *xq = act_get(f, w->type, src, m, w->n_in, &rb);
    struct moeinf_mm_job j = job_for(w, 0, xq, rb, m, y, y_stride);
    moeinf_matmul_run(f->p.pool, f->p.kern, &j, 1);
}

static void store_kv(struct moeinf_fwd *f, int il, int m, int n_past) {
    size_t layer_off = (size_t)il * (size_t)f->p.n_ctx * (size_t)f->n_kv;
    for (int j = 0; j < m; j++) {
        size_t off = layer_off + (size_t)(n_past + j) * (size_t)f->n_kv;
        const float *k = f->k + (size_t)j * f->n_kv;
        const float *v = f->v + (size_t)j * f->n_kv;
        if (f->p.kv_f16) {
            uint16_t *kc = (uint16_t *)f->k_cache + off;
            uint16_t *vc = (uint16_t *)f->v_cache + off;
            f->p.kern->from_float[MOEINF_TYPE_F16](k, kc, f->n_kv);
            f->p.kern->from_float[MOEINF_TYPE_F16](v, vc, f->n_kv);
        } else {
            memcpy((float *)f->k_cache + off, k, (size_t)f->n_kv * sizeof(float));
            memcpy((float *)f->v_cache + off, v, (size_t)f->n_kv * sizeof(float));
        }
    }
}

static void add_bias(float *x, const float *b, int n) {
    if (!b) return;
    for (int i = 0; i < n; i++)
        x[i] += b[i];
}

/* One token's q, k, v before RoPE: the biases (qwen2moe), then q/k RMSNorm per head
 * (qwen3moe) or over the whole projection (olmoe). */
static void qkv_bias_norm(const struct moeinf_hparams *hp, const struct moeinf_layer *lw, float *q,
                          float *k, float *v) {
    const int n_q = hp->n_head * hp->head_dim;
    const int n_kv = hp->n_head_kv * hp->head_dim;
    add_bias(q, lw->bq, n_q);
    add_bias(k, lw->bk, n_kv);
    add_bias(v, lw->bv, n_kv);
    if (hp->qk_norm == MOEINF_QK_NORM_WHOLE) {
        moeinf_rmsnorm(q, q, lw->q_norm, n_q, hp->rms_eps);
        moeinf_rmsnorm(k, k, lw->k_norm, n_kv, hp->rms_eps);
    } else if (hp->qk_norm == MOEINF_QK_NORM_HEAD) {
        for (int h = 0; h < hp->n_head; h++) {
            float *qh = q + (size_t)h * hp->head_dim;
            moeinf_rmsnorm(qh, qh, lw->q_norm, hp->head_dim, hp->rms_eps);
        }
        for (int h = 0; h < hp->n_head_kv; h++) {
            float *kh = k + (size_t)h * hp->head_dim;
            moeinf_rmsnorm(kh, kh, lw->k_norm, hp->head_dim, hp->rms_eps);
        }
    }
}

static void attention_block(struct moeinf_fwd *f, int il, int m, int n_past) {
    const struct moeinf_hparams *hp = &f->llm->hp;
    const struct moeinf_layer *lw = &f->llm->layers[il];
    for (int j = 0; j < m; j++) {
        moeinf_rmsnorm(f->xb + (size_t)j * hp->n_embd, f->x + (size_t)j * hp->n_embd, lw->attn_norm,
                       hp->n_embd, hp->rms_eps);
    }
    acts_invalidate(f);
    /* q, k and v in one dispatch when their weights share an activation type */
    size_t rq;
    size_t rk;
    size_t rv;
    const uint8_t *xq = act_get(f, lw->wq.type, f->xb, m, hp->n_embd, &rq);
    const uint8_t *xk = act_get(f, lw->wk.type, f->xb, m, hp->n_embd, &rk);
    const uint8_t *xv = act_get(f, lw->wv.type, f->xb, m, hp->n_embd, &rv);
    struct moeinf_mm_job jobs[3] = {
        job_for(&lw->wq, 0, xq, rq, m, f->q, (size_t)f->n_q),
        job_for(&lw->wk, 0, xk, rk, m, f->k, (size_t)f->n_kv),
        job_for(&lw->wv, 0, xv, rv, m, f->v, (size_t)f->n_kv),
    };
    moeinf_matmul_run(f->p.pool, f->p.kern, jobs, 3);
    for (int j = 0; j < m; j++) {
        float *q = f->q + (size_t)j * f->n_q;
        float *k = f->k + (size_t)j * f->n_kv;
        qkv_bias_norm(hp, lw, q, k, f->v + (size_t)j * f->n_kv);
        if (hp->rope_neox) {
            moeinf_rope_neox(q, hp->n_head, hp->head_dim, hp->n_rot, n_past + j, hp->rope_base,
                             hp->rope_freq_scale);
            moeinf_rope_neox(k, hp->n_head_kv, hp->head_dim, hp->n_rot, n_past + j, hp->rope_base,
                             hp->rope_freq_scale);
        } else {
            moeinf_rope_norm(q, hp->n_head, hp->head_dim, hp->n_rot, n_past + j, hp->rope_base,
                             hp->rope_freq_scale);
            moeinf_rope_norm(k, hp->n_head_kv, hp->head_dim, hp->n_rot, n_past + j, hp->rope_base,
                             hp->rope_freq_scale);
        }
    }
    store_kv(f, il, m, n_past);
    size_t layer_off = (size_t)il * (size_t)f->p.n_ctx * (size_t)f->n_kv * f->kv_elem;
    struct moeinf_attn_args a = {
        .q = f->q,
        .k = f->k_cache + layer_off,
        .v = f->v_cache + layer_off,
        .kv_f16 = f->p.kv_f16,
        .m = m,
        .pos0 = n_past,
        .n_head = hp->n_head,
        .n_head_kv = hp->n_head_kv,
        .head_dim = hp->head_dim,
        .out = f->att,
        .scratch = f->attn_scratch,
        .scratch_stride = f->attn_scratch_stride,
        .kern = f->p.kern,
    };
    moeinf_attention(f->p.pool, &a);
    matmul1(f, &lw->wo, f->att, m, f->tmp, (size_t)hp->n_embd);
    for (size_t i = 0; i < (size_t)m * hp->n_embd; i++)
        f->x[i] += f->tmp[i];
}

static void route(struct moeinf_fwd *f, int il, int m) {
    const struct moeinf_hparams *hp = &f->llm->hp;
    const int n_expert = hp->n_expert;
    const int n_used = hp->n_expert_used;
    matmul1(f, &f->llm->layers[il].router, f->xb, m, f->router, (size_t)n_expert);
    for (int j = 0; j < m; j++) {
        float *p = f->router + (size_t)j * n_expert;
        moeinf_softmax(p, n_expert);
        int idx[MOEINF_MAX_EXPERT_USED];
        moeinf_top_k(p, n_expert, n_used, idx);
        int32_t *sel = f->sel + ((size_t)il * f->p.n_batch + j) * n_used;
        float *w = f->sel_w + ((size_t)il * f->p.n_batch + j) * n_used;
        float sum = 0.0f;
        for (int r = 0; r < n_used; r++)
            sum += p[idx[r]];
        for (int r = 0; r < n_used; r++) {
            sel[r] = idx[r];
            /* Mixtral and qwen3moe renormalise the chosen probabilities, qwen2moe and olmoe
             * use them as they are (model.h) */
            w[r] = hp->expert_weights_norm ? p[idx[r]] / sum : p[idx[r]];
            if (hp->expert_weights_scale != 0.0f && hp->expert_weights_scale != 1.0f)
                w[r] *= hp->expert_weights_scale;
        }
    }
}

/* out[m x n_embd] = down(SwiGLU(gate(xb), up(xb))), n_ff wide: a dense SwiGLU FFN on the FFN
 * input (the dense layers' FFN, and qwen2moe's shared expert). */
static void swiglu_ffn(struct moeinf_fwd *f, const struct moeinf_weight *gate,
                       const struct moeinf_weight *up, const struct moeinf_weight *down, int n_ff,
                       int m, float *out) {
    const int n_embd = f->llm->hp.n_embd;
    size_t rg;
    size_t ru;
    const uint8_t *xg = act_get(f, gate->type, f->xb, m, n_embd, &rg);
    const uint8_t *xu = act_get(f, up->type, f->xb, m, n_embd, &ru);
    struct moeinf_mm_job jobs[2] = {
        job_for(gate, 0, xg, rg, m, f->hg, (size_t)n_ff),
        job_for(up, 0, xu, ru, m, f->hu, (size_t)n_ff),
    };
    moeinf_matmul_run(f->p.pool, f->p.kern, jobs, 2);
    for (int j = 0; j < m; j++) {
        moeinf_swiglu(f->hg + (size_t)j * n_ff, f->hg + (size_t)j * n_ff, f->hu + (size_t)j * n_ff,
                      n_ff);
    }
    matmul1(f, down, f->hg, m, out, (size_t)n_embd);
}

/*
 * qwen2moe's shared expert for the m normed rows in xb, into sh_out: SwiGLU of width
 * n_ff_shexp scaled per token by sigmoid(gate_inp_shexp . x). The sigmoid is computed as
 * llama.cpp does, silu(g) / g.
 */
static void shared_expert(struct moeinf_fwd *f, const struct moeinf_layer *lw, int m) {
    const struct moeinf_hparams *hp = &f->llm->hp;
    const int n_embd = hp->n_embd;
    swiglu_ffn(f, &lw->gate_shexp, &lw->up_shexp, &lw->down_shexp, hp->n_ff_shexp, m, f->sh_out);
    for (int j = 0; j < m; j++) {
        const float *x = f->xb + (size_t)j * n_embd;
        float g = 0.0f;
        for (int i = 0; i < n_embd; i++)
            g += lw->gate_inp_shexp[i] * x[i];
        const float silu = g / (1.0f + expf(-g));
        const float gate = g != 0.0f ? silu / g : 0.5f;
        float *o = f->sh_out + (size_t)j * n_embd;
        for (int i = 0; i < n_embd; i++)
            o[i] *= gate;
    }
}

/*
 * Routing replay (forward.h): layer il's choice of the m tokens replaced by the recorded
 * experts. route() left the router's probabilities (softmax over all experts) in f->router;
 * the weights are the recorded experts' probabilities, renormalised over them and scaled as
 * route() does for its own choice (hp->expert_weights_norm, expert_weights_scale). When every
 * recorded expert's probability underflows to 0 the renormalised weights are equal (rather
 * than 0/0).
 */
static void replay_routing(struct moeinf_fwd *f, int il, int m) {
    const struct moeinf_hparams *hp = &f->llm->hp;
    const int n_expert = hp->n_expert;
    const int n_used = hp->n_expert_used;
    for (int j = 0; j < m; j++) {
        const float *p = f->router + (size_t)j * n_expert;
        const int32_t *rec = f->p.route_replay + ((size_t)j * hp->n_layer + il) * n_used;
        int32_t *sel = f->sel + ((size_t)il * f->p.n_batch + j) * n_used;
        float *w = f->sel_w + ((size_t)il * f->p.n_batch + j) * n_used;
        float sum = 0.0f;
        for (int r = 0; r < n_used; r++)
            sum += p[rec[r]];
        for (int r = 0; r < n_used; r++) {
            sel[r] = rec[r];
            if (hp->expert_weights_norm) {
                w[r] = sum > 0.0f ? p[rec[r]] / sum : 1.0f / (float)n_used;
            } else {
                w[r] = p[rec[r]];
            }
            if (hp->expert_weights_scale != 0.0f && hp->expert_weights_scale != 1.0f)
                w[r] *= hp->expert_weights_scale;
        }
    }
}

/*
 * The experts of one wave: n experts of the layer (ascending), with parts[i] their gate, up
 * and down matrices, for the token rows grouped by expert (expert_first). gate and up in one
 * dispatch, SwiGLU, the down input quantized, down in a second dispatch; each expert's
 * outputs land in eo at its rows, so the result does not depend on how experts are split
 * into waves.
 */
static void experts_compute(struct moeinf_fwd *f, const struct moeinf_layer *lw, const int *experts,
                            const uint8_t *const (*parts)[3], int n, size_t rb) {
    const struct moeinf_hparams *hp = &f->llm->hp;
    const int n_embd = hp->n_embd;
    const int n_ff = hp->n_ff;
    const int *first = f->expert_first;
    int nj = 0;
    for (int i = 0; i < n; i++) {
        int e = experts[i];
        int rows = first[e + 1] - first[e];
        const uint8_t *x = f->ex_in + (size_t)first[e] * rb;
        f->jobs[nj++] = job_at(parts[i][0], &lw->gate_exps, x, rb, rows,
                               f->hg + (size_t)first[e] * n_ff, (size_t)n_ff);
        f->jobs[nj++] = job_at(parts[i][1], &lw->up_exps, x, rb, rows,
                               f->hu + (size_t)first[e] * n_ff, (size_t)n_ff);
    }
    moeinf_matmul_run(f->p.pool, f->p.kern, f->jobs, nj);
    for (int i = 0; i < n; i++) {
        for (int s = first[experts[i]]; s < first[experts[i] + 1]; s++) {
            moeinf_swiglu(f->hg + (size_t)s * n_ff, f->hg + (size_t)s * n_ff,
                          f->hu + (size_t)s * n_ff, n_ff);
        }
    }
    /* The down input, quantized per run of consecutive rows (one run when the wave holds
     * every selected expert); rows are quantized independently, so runs give the same bytes. */
    enum moeinf_type vt = moeinf_type_cpu_get(lw->down_exps.type)->vec_dot_type;
    struct act *a = &f->acts[vt];
    const size_t rd = moeinf_row_bytes(vt, n_ff);
    for (int i = 0; i < n;) {
        int j = i + 1;
        while (j < n && first[experts[j]] == first[experts[j - 1] + 1])
            j++;
        int r0 = first[experts[i]];
        int r1 = first[experts[j - 1] + 1];
        moeinf_quantize_rows(f->p.pool, f->p.kern, vt, f->hg + (size_t)r0 * n_ff, (size_t)n_ff,
                             r1 - r0, n_ff, a->buf + (size_t)r0 * rd, rd);
        i = j;
    }
    a->src = NULL; /* holds parts of hg only */
    nj = 0;
    for (int i = 0; i < n; i++) {
        int e = experts[i];
        f->jobs[nj++] =
            job_at(parts[i][2], &lw->down_exps, a->buf + (size_t)first[e] * rd, rd,
                   first[e + 1] - first[e], f->eo + (size_t)first[e] * n_embd, (size_t)n_embd);
    }
    moeinf_matmul_run(f->p.pool, f->p.kern, f->jobs, nj);
}

/* Every selected expert in one wave, straight from the weights (resident experts). */
static void experts_resident(struct moeinf_fwd *f, const struct moeinf_layer *lw, size_t rb) {
    int n = 0;
    for (int e = 0; e < f->llm->hp.n_expert; e++) {
        if (f->expert_first[e + 1] == f->expert_first[e]) continue;
        f->wave[n] = e;
        f->wave_parts[n][0] = moeinf_weight_row(&lw->gate_exps, e, 0);
        f->wave_parts[n][1] = moeinf_weight_row(&lw->up_exps, e, 0);
        f->wave_parts[n][2] = moeinf_weight_row(&lw->down_exps, e, 0);
        n++;
    }
    experts_compute(f, lw, f->wave, (const uint8_t *const(*)[3])f->wave_parts, n, rb);
}

/*
 * Gate lookahead for a decode token: applies the routers of the next `lookahead` layers to
 * this layer's FFN input (the residual stream changes little from layer to layer) and hints
 * their top-k experts to the cache, which prefetches them behind this layer's demand reads.
 * One router product per layer ahead (n_embd x n_expert), no I/O.
 */
static void lookahead_hints(struct moeinf_fwd *f, int il) {
    const struct moeinf_hparams *hp = &f->llm->hp;
    struct moeinf_tier *t = f->p.tier;
    for (int d = 1; d <= t->cfg.lookahead && il + d < hp->n_layer; d++) {
        matmul1(f, &f->llm->layers[il + d].router, f->xb, 1, f->lookahead, (size_t)hp->n_expert);
        int idx[MOEINF_MAX_EXPERT_USED];
        moeinf_top_k(f->lookahead, hp->n_expert, hp->n_expert_used, idx);
        moeinf_tier_hint(t, il + d, idx, hp->n_expert_used);
    }
}

/* Computes the wave's experts (flat ids[0..n) of layer il) that are in their slots and not
 * computed yet, in ascending order, and marks them computed (f->wave_done). Returns how many
 * of the wave are left. */
static int experts_arrived(struct moeinf_fwd *f, const struct moeinf_layer *lw, int il,
                           const uint32_t *ids, int n, size_t rb) {
    const int n_expert = f->llm->hp.n_expert;
    struct moeinf_tier *t = f->p.tier;
    for (int e = 0; e < n_expert; e++)
        f->wave_index[e] = -1;
    int left = 0;
    for (int i = 0; i < n; i++) {
        if (f->wave_done[i]) continue;
        if (moeinf_tier_ready(t, i)) {
            f->wave_index[ids[i] - (uint32_t)il * (uint32_t)n_expert] = i;
            f->wave_done[i] = 1;
        } else {
            left++;
        }
    }
    int k = 0;
    for (int e = 0; e < n_expert; e++) {
        int i = f->wave_index[e];
        if (i < 0) continue;
        f->wave[k] = e;
        for (int part = 0; part < 3; part++)
            f->wave_parts[k][part] = moeinf_tier_part(t, i, part);
        k++;
    }
    if (k > 0) experts_compute(f, lw, f->wave, (const uint8_t *const(*)[3])f->wave_parts, k, rb);
    return left;
}

/* The selected experts through the expert cache, in the waves it allows. Of each wave, the
 * experts already in their slots are computed first while the rest are read, then each of the
 * rest as soon as it has arrived, while the later ones are still read: each expert's outputs
 * land in its own rows, so the split changes no bit. */
static enum moeinf_status experts_offloaded(struct moeinf_fwd *f, const struct moeinf_layer *lw,
                                            int il, int m, size_t rb, struct moeinf_error *err) {
    struct moeinf_tier *t = f->p.tier;
    moeinf_tier_layer_begin(t, il, f->sel + (size_t)il * f->p.n_batch * f->llm->hp.n_expert_used, m,
                            f->llm->hp.n_expert_used);
    /* Under a routing replay the routers' own choice is not the one made, so their lookahead
     * would predict routing that never happens: it is off. */
    if (m == 1 && !f->p.route_replay) lookahead_hints(f, il);
    for (;;) {
        const uint32_t *ids;
        int n = 0;
        enum moeinf_status st = moeinf_tier_wave(t, &ids, &n, err);
        if (st != MOEINF_OK) return st;
        if (n == 0) break;
        memset(f->wave_done, 0, (size_t)n);
        int left = experts_arrived(f, lw, il, ids, n, rb);
        while (left > 0) {
            st = moeinf_tier_wave_wait_next(t, err);
            if (st != MOEINF_OK) return st;
            left = experts_arrived(f, lw, il, ids, n, rb);
        }
        st = moeinf_tier_wave_wait(t, err); /* every read is in: retires them */
        if (st != MOEINF_OK) return st;
        moeinf_tier_wave_end(t);
    }
    return moeinf_tier_layer_end(t, err);
}

static enum moeinf_status moe_block(struct moeinf_fwd *f, int il, int m, struct moeinf_error *err) {
    const struct moeinf_hparams *hp = &f->llm->hp;
    const struct moeinf_layer *lw = &f->llm->layers[il];
    const int n_expert = hp->n_expert;
    const int n_used = hp->n_expert_used;
    const int n_embd = hp->n_embd;
    route(f, il, m);
    if (f->p.route_replay) replay_routing(f, il, m);
    const int32_t *sel = f->sel + (size_t)il * f->p.n_batch * n_used;
    /* group (token, rank) pairs by expert: slots [expert_first[e], expert_first[e+1]) */
    memset(f->expert_count, 0, (size_t)n_expert * sizeof(int));
    for (int i = 0; i < m * n_used; i++)
        f->expert_count[sel[i]]++;
    f->expert_first[0] = 0;
    for (int e = 0; e < n_expert; e++)
        f->expert_first[e + 1] = f->expert_first[e] + f->expert_count[e];
    memset(f->expert_count, 0, (size_t)n_expert * sizeof(int));
    for (int j = 0; j < m; j++) {
        for (int r = 0; r < n_used; r++) {
            int e = sel[(size_t)j * n_used + r];
            f->slot[(size_t)j * n_used + r] = f->expert_first[e] + f->expert_count[e]++;
        }
    }
    size_t rb;
    /* gate and up share one activation type (checked at load) */
    const uint8_t *xq = act_get(f, lw->gate_exps.type, f->xb, m, n_embd, &rb);
    for (int j = 0; j < m; j++) {
        for (int r = 0; r < n_used; r++) {
            memcpy(f->ex_in + (size_t)f->slot[(size_t)j * n_used + r] * rb, xq + (size_t)j * rb,
                   rb);
        }
    }
    if (f->p.tier) {
        enum moeinf_status st = experts_offloaded(f, lw, il, m, rb, err);
        if (st != MOEINF_OK) return st;
    } else {
        experts_resident(f, lw, rb);
    }
    if (hp->n_ff_shexp > 0) shared_expert(f, lw, m); /* resident, after the routed ones */
    /* weighted sum in router-rank order, then the residual add */
    const float *w = f->sel_w + (size_t)il * f->p.n_batch * n_used;
    for (int j = 0; j < m; j++) {
        float *out = f->tmp + (size_t)j * n_embd;
        for (int r = 0; r < n_used; r++) {
            const float *o = f->eo + (size_t)f->slot[(size_t)j * n_used + r] * n_embd;
            const float wr = w[(size_t)j * n_used + r];
            if (r == 0) {
                for (int i = 0; i < n_embd; i++)
                    out[i] = o[i] * wr;
            } else {
                for (int i = 0; i < n_embd; i++)
                    out[i] += o[i] * wr;
            }
        }
        if (hp->n_ff_shexp > 0) {
            const float *sh = f->sh_out + (size_t)j * n_embd;
            for (int i = 0; i < n_embd; i++)
                out[i] += sh[i];
        }
        float *x = f->x + (size_t)j * n_embd;
        for (int i = 0; i < n_embd; i++)
            x[i] += out[i];
    }
    return MOEINF_OK;
}

static void dense_ffn_block(struct moeinf_fwd *f, int il, int m) {
    const struct moeinf_hparams *hp = &f->llm->hp;
    const struct moeinf_layer *lw = &f->llm->layers[il];
    const int n_embd = hp->n_embd;
    swiglu_ffn(f, &lw->ffn_gate, &lw->ffn_up, &lw->ffn_down, hp->n_ff, m, f->tmp);
    for (size_t i = 0; i < (size_t)m * n_embd; i++)
        f->x[i] += f->tmp[i];
}

enum moeinf_status moeinf_fwd_eval(struct moeinf_fwd *f, const int32_t *ids, int m, int n_past,
                                   float *logits, bool all_logits, struct moeinf_error *err) {
    const struct moeinf_llm *llm = f->llm;
    const struct moeinf_hparams *hp = &llm->hp;
    const int n_embd = hp->n_embd;
    assert(m > 0 && m <= f->p.n_batch && n_past + m <= f->p.n_ctx);
    moeinf_to_float_fn embed = f->p.kern->to_float[llm->tok_embd.type];
    for (int j = 0; j < m; j++) {
        embed(moeinf_weight_row(&llm->tok_embd, 0, ids[j]), f->x + (size_t)j * n_embd, n_embd);
    }
    for (int il = 0; il < hp->n_layer; il++) {
        attention_block(f, il, m, n_past);
        const struct moeinf_layer *lw = &llm->layers[il];
        for (int j = 0; j < m; j++) {
            moeinf_rmsnorm(f->xb + (size_t)j * n_embd, f->x + (size_t)j * n_embd, lw->ffn_norm,
                           n_embd, hp->rms_eps);
        }
        acts_invalidate(f);
        if (hp->n_expert > 0) {
            enum moeinf_status st = moe_block(f, il, m, err);
            if (st != MOEINF_OK) return st;
        } else {
            dense_ffn_block(f, il, m);
        }
        moeinf_fwd_note_finite(f, il, m);
    }
    if (!logits) return MOEINF_OK;
    int first = all_logits ? 0 : m - 1;
    int n_rows = m - first;
    for (int j = first; j < m; j++) {
        moeinf_rmsnorm(f->xb + (size_t)j * n_embd, f->x + (size_t)j * n_embd, llm->output_norm,
                       n_embd, hp->rms_eps);
    }
    acts_invalidate(f);
    matmul1(f, &llm->output, f->xb + (size_t)first * n_embd, n_rows, logits, (size_t)hp->n_vocab);
    return MOEINF_OK;
}

uint64_t moeinf_fwd_bytes(const struct moeinf_fwd *f) {
    return f->bytes;
}

void moeinf_fwd_set_tier(struct moeinf_fwd *f, struct moeinf_tier *tier) {
    f->p.tier = tier;
}

void moeinf_fwd_set_route_replay(struct moeinf_fwd *f, const int32_t *experts) {
    f->p.route_replay = experts;
}

const int32_t *moeinf_fwd_routing(const struct moeinf_fwd *f, int il, int j) {
    if (!f->sel) return NULL;
    return f->sel + ((size_t)il * f->p.n_batch + j) * f->llm->hp.n_expert_used;
}

const float *moeinf_fwd_routing_weights(const struct moeinf_fwd *f, int il, int j) {
    if (!f->sel_w) return NULL;
    return f->sel_w + ((size_t)il * f->p.n_batch + j) * f->llm->hp.n_expert_used;
}

/* Allocates the activation buffer of w's vec_dot_type (once per type). */
static void need_act(struct moeinf_fwd *f, const struct moeinf_weight *w, size_t rows,
                     bool *failed) {
    if (w->row_bytes == 0) return; /* absent (offloaded experts have no data but a shape) */
    enum moeinf_type vt = moeinf_type_cpu_get(w->type)->vec_dot_type;
    if (f->acts[vt].buf) return;
    f->acts[vt].buf = malloc(moeinf_row_bytes(vt, f->max_width) * rows);
    f->bytes += moeinf_row_bytes(vt, f->max_width) * rows;
    if (!f->acts[vt].buf) *failed = true;
}

static void *alloc_array(struct moeinf_fwd *f, size_t n, size_t size, bool *failed) {
    if (n == 0) n = 1;
    void *p = calloc(n, size);
    if (!p) *failed = true;
    f->bytes += n * size;
    return p;
}

enum moeinf_status moeinf_fwd_init(const struct moeinf_llm *llm,
                                   const struct moeinf_fwd_params *params, struct moeinf_fwd **out,
                                   struct moeinf_error *err) {
    const struct moeinf_hparams *hp = &llm->hp;
    if (params->n_ctx < 1 || params->n_batch < 1) {
        return moeinf_fail(err, MOEINF_ERR_ARG, "context size and batch must be positive");
    }
    struct moeinf_fwd *f = calloc(1, sizeof *f);
    if (!f) return moeinf_fail(err, MOEINF_ERR_NOMEM, "out of memory for the context");
    f->llm = llm;
    f->p = *params;
    if (f->p.n_batch > f->p.n_ctx) f->p.n_batch = f->p.n_ctx;
    const size_t n_b = (size_t)f->p.n_batch;
    const size_t n_c = (size_t)f->p.n_ctx;
    f->n_kv = hp->n_head_kv * hp->head_dim;
    f->n_q = hp->n_head * hp->head_dim;
    f->max_width = hp->n_embd;
    if (f->n_q > f->max_width) f->max_width = f->n_q;
    if (hp->n_ff > f->max_width) f->max_width = hp->n_ff;
    if (hp->n_ff_shexp > f->max_width) f->max_width = hp->n_ff_shexp;
    f->kv_elem = params->kv_f16 ? 2 : 4;
    const int n_used = hp->n_expert > 0 ? hp->n_expert_used : 1;
    const size_t slots = n_b * (size_t)n_used;
    bool failed = false;
    /* A file may ask for 4096 layers of 2^28 n_kv_dim values each, so the cache size can pass
     * SIZE_MAX for a long context (it wrapped to a tiny allocation that decoding overran). */
    const size_t kv_row_bytes = (size_t)f->n_kv * f->kv_elem; /* <= 2^30 */
    if (kv_row_bytes > SIZE_MAX / 2 / n_c / (size_t)hp->n_layer) {
        moeinf_fwd_free(f);
        return moeinf_fail(err, MOEINF_ERR_NOMEM,
                           "a context of %d tokens needs a KV cache larger than memory (%d "
                           "layers of %d values per token)",
                           params->n_ctx, hp->n_layer, hp->n_head_kv * hp->head_dim);
    }
    size_t kv_bytes = (size_t)hp->n_layer * n_c * kv_row_bytes;
    f->k_cache = alloc_array(f, kv_bytes, 1, &failed);
    f->v_cache = alloc_array(f, kv_bytes, 1, &failed);
    f->x = alloc_array(f, n_b * hp->n_embd, sizeof(float), &failed);
    f->xb = alloc_array(f, n_b * hp->n_embd, sizeof(float), &failed);
    f->q = alloc_array(f, n_b * f->n_q, sizeof(float), &failed);
    f->k = alloc_array(f, n_b * f->n_kv, sizeof(float), &failed);
    f->v = alloc_array(f, n_b * f->n_kv, sizeof(float), &failed);
    f->att = alloc_array(f, n_b * f->n_q, sizeof(float), &failed);
    f->tmp = alloc_array(f, n_b * hp->n_embd, sizeof(float), &failed);
    /* hg and hu also hold the shared expert's rows */
    size_t h_floats = slots * hp->n_ff;
    if (n_b * (size_t)hp->n_ff_shexp > h_floats) h_floats = n_b * (size_t)hp->n_ff_shexp;
    f->hg = alloc_array(f, h_floats, sizeof(float), &failed);
    f->hu = alloc_array(f, h_floats, sizeof(float), &failed);
    if (hp->n_ff_shexp > 0) f->sh_out = alloc_array(f, n_b * hp->n_embd, sizeof(float), &failed);
    int n_threads = moeinf_pool_size(params->pool);
    f->attn_scratch_stride =
        moeinf_attn_scratch_floats((int)n_c, hp->n_head, hp->n_head_kv, hp->head_dim);
    f->attn_scratch =
        alloc_array(f, f->attn_scratch_stride * (size_t)n_threads, sizeof(float), &failed);
    if (hp->n_expert > 0) {
        f->eo = alloc_array(f, slots * hp->n_embd, sizeof(float), &failed);
        f->router = alloc_array(f, n_b * hp->n_expert, sizeof(float), &failed);
        f->lookahead = alloc_array(f, (size_t)hp->n_expert, sizeof(float), &failed);
        f->ex_in = alloc_array(f, slots, moeinf_row_bytes(MOEINF_TYPE_F32, hp->n_embd), &failed);
        f->sel = alloc_array(f, (size_t)hp->n_layer * slots, sizeof(int32_t), &failed);
        f->sel_w = alloc_array(f, (size_t)hp->n_layer * slots, sizeof(float), &failed);
        f->slot = alloc_array(f, slots, sizeof(int), &failed);
        f->expert_count = alloc_array(f, (size_t)hp->n_expert, sizeof(int), &failed);
        f->expert_first = alloc_array(f, (size_t)hp->n_expert + 1, sizeof(int), &failed);
        f->jobs = alloc_array(f, 2 * (size_t)hp->n_expert, sizeof *f->jobs, &failed);
        f->wave = alloc_array(f, (size_t)hp->n_expert, sizeof *f->wave, &failed);
        f->wave_index = alloc_array(f, (size_t)hp->n_expert, sizeof *f->wave_index, &failed);
        f->wave_parts = alloc_array(f, (size_t)hp->n_expert, sizeof *f->wave_parts, &failed);
        f->wave_done = alloc_array(f, (size_t)hp->n_expert, 1, &failed);
    }
    need_act(f, &llm->output, slots, &failed);
    for (int il = 0; il < hp->n_layer; il++) {
        const struct moeinf_layer *lw = &llm->layers[il];
        const struct moeinf_weight *ws[] = {
            &lw->wq,        &lw->wk,         &lw->wv,        &lw->wo,        &lw->router,
            &lw->gate_exps, &lw->up_exps,    &lw->down_exps, &lw->ffn_gate,  &lw->ffn_up,
            &lw->ffn_down,  &lw->gate_shexp, &lw->up_shexp,  &lw->down_shexp};
        for (size_t i = 0; i < sizeof ws / sizeof ws[0]; i++)
            need_act(f, ws[i], slots, &failed);
    }
    if (failed) {
        moeinf_fwd_free(f);
        return moeinf_fail(err, MOEINF_ERR_NOMEM,
                           "out of memory for a context of %d tokens (KV cache %zu MiB)",
                           params->n_ctx, 2 * kv_bytes >> 20);
    }
    *out = f;
    return MOEINF_OK;
}

void moeinf_fwd_free(struct moeinf_fwd *f) {
    if (!f) return;
    free(f->k_cache);
    free(f->v_cache);
    free(f->x);
    free(f->xb);
    free(f->q);
    free(f->k);
    free(f->v);
    free(f->att);
    free(f->tmp);
    free(f->hg);
    free(f->hu);
    free(f->eo);
    free(f->sh_out);
    free(f->router);
    free(f->lookahead);
    free(f->ex_in);
    free(f->attn_scratch);
    free(f->sel);
    free(f->sel_w);
    free(f->slot);
    free(f->expert_count);
    free(f->expert_first);
    free(f->jobs);
    free(f->wave);
    free(f->wave_index);
    free(f->wave_done);
    free(f->wave_parts);
    for (int t = 0; t < MOEINF_TYPE_COUNT; t++)
        free(f->acts[t].buf);
    free(f);
}

/* ---- non-finite values ---------------------------------------------------------------- */

void moeinf_fwd_note_finite(struct moeinf_fwd *f, int il, int m) {
    if (il == 0) f->nonfinite_layer = -1;
    if (f->nonfinite_layer >= 0) return;
    if (!moeinf_all_finite(f->x, (size_t)m * (size_t)f->llm->hp.n_embd)) f->nonfinite_layer = il;
}

enum moeinf_status moeinf_fwd_check_finite(const struct moeinf_fwd *f, const float *logits,
                                           int n_rows, struct moeinf_error *err) {
    const struct moeinf_hparams *hp = &f->llm->hp;
    if (f->nonfinite_layer >= 0) {
        return moeinf_fail(err, MOEINF_ERR_FORMAT,
                           "NaN or infinity in the hidden state from layer %d on (layers 0-%d): "
                           "the model's weights hold non-finite values or its activations "
                           "overflow",
                           f->nonfinite_layer, hp->n_layer - 1);
    }
    if (logits && !moeinf_all_finite(logits, (size_t)n_rows * (size_t)hp->n_vocab)) {
        return moeinf_fail(err, MOEINF_ERR_FORMAT,
                           "NaN or infinity in the logits, though every layer's output is "
                           "finite: output_norm or the lm_head hold non-finite values");
    }
    return MOEINF_OK;
}
