/*
 * layer_deltanet.c - the Gated DeltaNet block of a layer (MOEINF_ATTN_DELTANET: qwen35moe,
 * qwen3next), in llama.cpp's arithmetic (src/models/qwen35moe.cpp, delta-net-base.cpp and
 * ggml's gated_delta_net). For each token of the micro-batch, in order:
 *   mix = Wqkv x;  z = Wz x;  beta = sigmoid(Wbeta x);  g = softplus(Walpha x + dt) * a
 *   c = SiLU(causal depthwise conv over the last d_conv mixes); q, k, v = split(c)
 *   q, k L2-normalised per key head
 *   per value head h, with its key head's q and k and the state S_h (row r: value element r):
 *     S_h *= exp(g_h);  d = (v_h - S_h k) * beta_h;  S_h += d k^T;  o_h = S_h q / sqrt(hd)
 *   out = Wout (RMSNorm(o_h) * ssm_norm * SiLU(z_h) per head)
 * The conv inputs and S are the layer's recurrent state (fwd_state.h), carried from one eval
 * to the next. Prefill runs the recurrence token by token (value heads in parallel), not in
 * llama.cpp's chunked form.
 */
#include <math.h>
#include <string.h>

#include "compute/ops.h"
#include "compute/pool.h"
#include "model/fwd_state.h"

static float sigmoid(float x) {
    return 1.0f / (1.0f + expf(-x));
}

/* ggml's softplus: log(1 + e^x), x itself above 20. */
static float softplus(float x) {
    return x > 20.0f ? x : logf(1.0f + expf(x));
}

/* The layer's part of the bound sequence's recurrent state. */
static float *layer_state(const struct moeinf_fwd *f, const struct moeinf_layer *lw) {
    return f->cur->rs + (size_t)lw->recurrent_index * (f->rs_conv_floats + f->rs_delta_floats);
}

/* The projections: q/k/v mix, z, beta and the log decay g, from the normed rows in xb. */
static void project(struct moeinf_fwd *f, const struct moeinf_layer *lw, int m) {
    const struct moeinf_hparams *hp = &f->llm->hp;
    const int n_v = hp->ssm_n_v_heads;
    const int ratio = n_v / hp->ssm_n_k_heads;
    const int hd = hp->ssm_head_dim;
    const bool legacy = lw->ssm_in.data != NULL;
    const bool fused_ba = lw->ssm_ba.data != NULL;
    struct moeinf_mm_job jobs[4];
    int n_jobs = 0;
    const size_t proj_stride =
        legacy ? (size_t)f->ssm_conv_dim + f->ssm_value_dim : 2 * (size_t)n_v;
    const struct moeinf_weight *ws[4] = {
        legacy ? &lw->ssm_in : &lw->ssm_qkv,
        legacy ? NULL : &lw->ssm_z,
        fused_ba ? &lw->ssm_ba : &lw->ssm_beta,
        fused_ba ? NULL : &lw->ssm_alpha,
    };
    float *ys[4] = {legacy ? f->ssm_proj : f->ssm_mix, f->ssm_z, fused_ba ? f->ssm_ba : f->ssm_beta,
                    f->ssm_g};
    size_t strides[4] = {legacy ? proj_stride : (size_t)f->ssm_conv_dim, (size_t)f->ssm_value_dim,
                         fused_ba ? 2 * (size_t)n_v : (size_t)n_v, (size_t)n_v};
    for (int i = 0; i < 4; i++) {
        if (!ws[i]) continue;
        size_t rb;
        const uint8_t *x = moeinf_fwd_act(f, ws[i]->type, f->xb, m, hp->n_embd, &rb);
        jobs[n_jobs++] = moeinf_fwd_job(ws[i], 0, x, rb, m, ys[i], strides[i]);
    }
    moeinf_matmul_run(f->p.pool, f->p.kern, jobs, n_jobs);
    for (int j = 0; j < m; j++) {
        float *mix = f->ssm_mix + (size_t)j * f->ssm_conv_dim;
        float *z = f->ssm_z + (size_t)j * f->ssm_value_dim;
        float *beta = f->ssm_beta + (size_t)j * n_v;
        float *g = f->ssm_g + (size_t)j * n_v;
        if (legacy) { /* per key head: q, k, then its value heads' v and z */
            const float *src = f->ssm_proj + (size_t)j * proj_stride;
            const size_t group = 2 * (size_t)hd + 2 * (size_t)ratio * hd;
            for (int kh = 0; kh < hp->ssm_n_k_heads; kh++) {
                const float *s = src + (size_t)kh * group;
                const size_t vw = (size_t)ratio * hd;
                memcpy(mix + (size_t)kh * hd, s, (size_t)hd * sizeof(float));
                memcpy(mix + f->ssm_key_dim + (size_t)kh * hd, s + hd, (size_t)hd * sizeof(float));
                memcpy(mix + 2 * (size_t)f->ssm_key_dim + kh * vw, s + 2 * (size_t)hd,
                       vw * sizeof(float));
                memcpy(z + kh * vw, s + 2 * (size_t)hd + vw, vw * sizeof(float));
            }
        }
        if (fused_ba) { /* per key head: its value heads' betas, then their alphas */
            const float *ba = f->ssm_ba + (size_t)j * 2 * n_v;
            for (int h = 0; h < n_v; h++) {
                int kh = h / ratio;
                int r = h % ratio;
                beta[h] = ba[(size_t)kh * 2 * ratio + r];
                g[h] = ba[(size_t)kh * 2 * ratio + ratio + r];
            }
        }
        for (int h = 0; h < n_v; h++) {
            beta[h] = sigmoid(beta[h]);
            g[h] = softplus(g[h] + lw->ssm_dt_bias[h]) * lw->ssm_a[h];
        }
    }
}

/* What the conv and the delta rule run over, split among the threads: the rows row0 ..
 * row0 + m - 1 of one run, with its sequence bound. */
struct layer_job {
    struct moeinf_fwd *f;
    const struct moeinf_layer *lw;
    int row0;
    int m;
};

/* Channels per block of the conv: its weights transposed fit in a few KiB of stack (the
 * loader refuses a kernel over CONV_MAX_KERNEL, arch_deltanet.c). */
#define CONV_BLOCK      64
#define CONV_MAX_KERNEL 16

/* The causal conv of each channel over its last d_conv inputs (state then this batch), SiLU,
 * and the state moved on. Channels are independent: split among the threads in blocks, and
 * within a block the loop runs over channels, so that it vectorises. */
static void conv_channels(void *arg, int ith, int nth) {
    const struct layer_job *job = arg;
    struct moeinf_fwd *f = job->f;
    const int d_conv = f->llm->hp.ssm_d_conv;
    const int n_hist = d_conv - 1;
    const int n_c = f->ssm_conv_dim;
    const int m = job->m;
    const int n_blocks = (n_c + CONV_BLOCK - 1) / CONV_BLOCK;
    const int b0 = (int)((int64_t)n_blocks * ith / nth);
    const int b1 = (int)((int64_t)n_blocks * (ith + 1) / nth);
    float *state = layer_state(f, job->lw); /* [d_conv - 1][conv_dim], oldest first */
    const float *mix = f->ssm_mix + (size_t)job->row0 * n_c;
    float *conv = f->ssm_conv + (size_t)job->row0 * n_c;
    const float *weights = (const float *)job->lw->ssm_conv1d.data;
    float wt[CONV_MAX_KERNEL][CONV_BLOCK];
    for (int b = b0; b < b1; b++) {
        const int c0 = b * CONV_BLOCK;
        const int nb = n_c - c0 < CONV_BLOCK ? n_c - c0 : CONV_BLOCK;
        for (int c = 0; c < nb; c++) {
            for (int t = 0; t < d_conv; t++)
                wt[t][c] = weights[(size_t)(c0 + c) * d_conv + t];
        }
        for (int j = 0; j < m; j++) {
            float *out = conv + (size_t)j * n_c + c0;
            for (int c = 0; c < nb; c++)
                out[c] = 0.0f;
            for (int t = 0; t < d_conv; t++) {
                /* input t of token j's window: token j - n_hist + t of the batch, or of the
                 * state when that is before the batch */
                const int src = j - n_hist + t;
                const float *in = src >= 0 ? mix + (size_t)src * n_c + c0
                                           : state + (size_t)(n_hist + src) * n_c + c0;
                for (int c = 0; c < nb; c++)
                    out[c] += in[c] * wt[t][c];
            }
            for (int c = 0; c < nb; c++)
                out[c] = out[c] / (1.0f + expf(-out[c]));
        }
        /* the state becomes the last n_hist inputs: older state rows first, when the batch
         * is shorter than the history */
        for (int t = 0; t < n_hist; t++) {
            const int src = m - n_hist + t;
            float *dst = state + (size_t)t * n_c + c0;
            if (src >= 0) {
                memcpy(dst, mix + (size_t)src * n_c + c0, (size_t)nb * sizeof(float));
            } else {
                memmove(dst, state + (size_t)(n_hist + src) * n_c + c0, (size_t)nb * sizeof(float));
            }
        }
    }
}

/* x / sqrt(sum x^2 + eps), as llama.cpp writes it: an RMSNorm with eps / n, scaled by
 * 1 / sqrt(n). */
static void l2_norm(float *x, int n, float eps) {
    double sum = 0.0;
    for (int i = 0; i < n; i++)
        sum += (double)(x[i] * x[i]);
    const float mean = (float)(sum / n);
    const float scale = 1.0f / sqrtf(mean + eps / (float)n);
    const float inv_sqrt_n = 1.0f / sqrtf((float)n);
    for (int i = 0; i < n; i++)
        x[i] = x[i] * scale * inv_sqrt_n;
}

/* The delta rule of a range of value heads over the micro-batch's tokens, in order, by the
 * kernel table's delta_rule_f32: each row of a head's state is updated on its own (decay, its
 * element of S k, the rank-one update, its element of S q), which is llama.cpp's arithmetic
 * for that row. */
static void delta_heads(void *arg, int ith, int nth) {
    const struct layer_job *job = arg;
    struct moeinf_fwd *f = job->f;
    const struct moeinf_hparams *hp = &f->llm->hp;
    const int n_v = hp->ssm_n_v_heads;
    const int n_k = hp->ssm_n_k_heads;
    const int hd = hp->ssm_head_dim;
    const int ratio = n_v / n_k;
    const float scale = 1.0f / sqrtf((float)hd);
    float *delta_state = layer_state(f, job->lw) + f->rs_conv_floats;
    const moeinf_delta_rule_fn rule = f->p.kern->delta_rule_f32;
    const int h0 = (int)((int64_t)n_v * ith / nth);
    const int h1 = (int)((int64_t)n_v * (ith + 1) / nth);
    for (int h = h0; h < h1; h++) {
        const int kh = hp->ssm_heads == MOEINF_DELTA_HEADS_TILED ? h % n_k : h / ratio;
        float *state = delta_state + (size_t)h * hd * hd;
        for (int j = job->row0; j < job->row0 + job->m; j++) {
            const float *c = f->ssm_conv + (size_t)j * f->ssm_conv_dim;
            const float *q = c + (size_t)kh * hd;
            const float *k = c + f->ssm_key_dim + (size_t)kh * hd;
            const float *v = c + 2 * (size_t)f->ssm_key_dim + (size_t)h * hd;
            const float beta = f->ssm_beta[(size_t)j * n_v + h];
            const float decay = expf(f->ssm_g[(size_t)j * n_v + h]);
            float *o = f->ssm_o + (size_t)j * f->ssm_value_dim + (size_t)h * hd;
            rule(state, hd, q, k, v, decay, beta, scale, o);
        }
    }
}

void moeinf_fwd_deltanet(struct moeinf_fwd *f, int il, int m) {
    const struct moeinf_hparams *hp = &f->llm->hp;
    const struct moeinf_layer *lw = &f->llm->layers[il];
    const int hd = hp->ssm_head_dim;
    for (int j = 0; j < m; j++) {
        moeinf_rmsnorm(f->xb + (size_t)j * hp->n_embd, f->x + (size_t)j * hp->n_embd, lw->attn_norm,
                       hp->n_embd, hp->rms_eps);
    }
    moeinf_fwd_acts_invalidate(f);
    project(f, lw, m);
    for (int r = 0; r < f->n_runs; r++) {
        struct layer_job job = {f, lw, f->runs[r].row0, f->runs[r].m};
        moeinf_fwd_bind_seq(f, f->runs[r].seq);
        moeinf_pool_run(f->p.pool, conv_channels, &job);
    }
    for (int j = 0; j < m; j++) {
        float *c = f->ssm_conv + (size_t)j * f->ssm_conv_dim;
        for (int kh = 0; kh < 2 * hp->ssm_n_k_heads; kh++) /* q heads, then k heads */
            l2_norm(c + (size_t)kh * hd, hd, hp->rms_eps);
    }
    for (int r = 0; r < f->n_runs; r++) {
        struct layer_job job = {f, lw, f->runs[r].row0, f->runs[r].m};
        moeinf_fwd_bind_seq(f, f->runs[r].seq);
        moeinf_pool_run(f->p.pool, delta_heads, &job);
    }
    for (int j = 0; j < m; j++) {
        for (int h = 0; h < hp->ssm_n_v_heads; h++) {
            size_t off = (size_t)j * f->ssm_value_dim + (size_t)h * hd;
            float *o = f->ssm_o + off;
            const float *z = f->ssm_z + off;
            moeinf_rmsnorm(o, o, lw->ssm_norm, hd, hp->rms_eps);
            for (int i = 0; i < hd; i++)
                o[i] *= z[i] / (1.0f + expf(-z[i]));
        }
    }
    moeinf_fwd_acts_invalidate(f);
    moeinf_fwd_matmul(f, &lw->ssm_out, f->ssm_o, m, f->tmp, (size_t)hp->n_embd);
    for (size_t i = 0; i < (size_t)m * hp->n_embd; i++)
        f->x[i] += f->tmp[i];
}
