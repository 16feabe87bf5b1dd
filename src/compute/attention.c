/* attention.c - causal GQA over the KV cache; work split by (token, KV head). */
#include "compute/attention.h"

#include <math.h>
#include <string.h>

size_t moeinf_attn_scratch_floats(int n_ctx, int n_head, int n_head_kv, int head_dim) {
    int group = n_head / n_head_kv;
    /* scores for each head of the group, plus one converted K or V row */
    return (size_t)group * (size_t)n_ctx + (size_t)head_dim;
}

/* The width values of KV head kh at position t of a cache whose rows hold row_len values. */
static const float *cache_row(const struct moeinf_attn_args *a, const void *base, int t, int kh,
                              int row_len, int width, float *buf) {
    size_t row = (size_t)(t % a->ring) * (size_t)row_len + (size_t)kh * (size_t)width;
    if (!a->kv_f16) return (const float *)base + row;
    a->kern->to_float[MOEINF_TYPE_F16]((const uint16_t *)base + row, buf, width);
    return buf;
}

/* Query heads of a group scored against one K row per kernel call. */
#define ATTN_GROUP_CHUNK 16

static void attend(const struct moeinf_attn_args *a, int j, int kh, float *scratch) {
    const int group = a->n_head / a->n_head_kv;
    const int hd = a->head_dim;
    const int vd = a->v_dim > 0 ? a->v_dim : hd;
    const int k_row = a->k_row > 0 ? a->k_row : a->n_head_kv * hd;
    const int v_row = a->v_row > 0 ? a->v_row : a->n_head_kv * vd;
    const int out_stride = a->n_head * vd;
    const int pos = a->pos0 + j;
    const int t0 = a->window > 0 && pos >= a->window ? pos - a->window + 1 : 0;
    const int n_kv = pos + 1 - t0; /* causal: positions t0 .. pos */
    const int q_stride = a->n_head * hd;
    float *row = scratch + (size_t)group * (size_t)(a->pos0 + a->m);
    const float scale = a->scale != 0.0f ? a->scale : 1.0f / sqrtf((float)hd);
    /* q.k with the table's F32 dot (as vec_dot_m: one K row against the group's q rows, which
     * are hd floats apart): its summation order is fixed (quant.h), so every table gives the
     * same scores, and SIMD tables run it 32 lanes wide. */
    const moeinf_vec_dot_m_fn dot_m = a->kern->vec_dot_m[MOEINF_TYPE_F32];
    const float *q0 = a->q + (size_t)j * q_stride + (size_t)kh * group * hd;
    for (int t = 0; t < n_kv; t++) {
        const float *k = cache_row(a, a->k, t0 + t, kh, k_row, hd, row);
        for (int g0 = 0; g0 < group; g0 += ATTN_GROUP_CHUNK) {
            const int gn = group - g0 < ATTN_GROUP_CHUNK ? group - g0 : ATTN_GROUP_CHUNK;
            float s[ATTN_GROUP_CHUNK];
            dot_m(hd, gn, s, k, q0 + (size_t)g0 * hd, (size_t)hd * sizeof(float));
            for (int g = 0; g < gn; g++)
                scratch[(size_t)(g0 + g) * n_kv + t] = s[g] * scale;
        }
    }
    for (int g = 0; g < group; g++) {
        float *s = scratch + (size_t)g * n_kv;
        const float *sink = a->sinks ? a->sinks + (size_t)kh * group + g : NULL;
        float max = sink ? *sink : -INFINITY;
        for (int t = 0; t < n_kv; t++) max = s[t] > max ? s[t] : max;
        double sum = sink ? (double)expf(*sink - max) : 0.0;
        for (int t = 0; t < n_kv; t++) {
            s[t] = expf(s[t] - max);
            sum += s[t];
        }
        const float inv = (float)(1.0 / sum);
        for (int t = 0; t < n_kv; t++) s[t] *= inv;
        memset(a->out + (size_t)j * out_stride + (size_t)(kh * group + g) * vd, 0,
               (size_t)vd * sizeof(float));
    }
    const moeinf_axpy_fn axpy = a->kern->axpy_f32; /* the same bits on every table */
    for (int t = 0; t < n_kv; t++) {
        const float *v = cache_row(a, a->v, t0 + t, kh, v_row, vd, row);
        for (int g = 0; g < group; g++) {
            float *o = a->out + (size_t)j * out_stride + (size_t)(kh * group + g) * vd;
            axpy(vd, scratch[(size_t)g * n_kv + t], v, o);
        }
    }
}

static void attn_worker(void *arg, int ith, int nth) {
    const struct moeinf_attn_args *a = arg;
    float *scratch = a->scratch + (size_t)ith * a->scratch_stride;
    const int n_items = a->m * a->n_head_kv;
    for (int it = ith; it < n_items; it += nth) attend(a, it / a->n_head_kv, it % a->n_head_kv, scratch);
}

void moeinf_attention(struct moeinf_pool *pool, const struct moeinf_attn_args *args) {
    moeinf_pool_run(pool, attn_worker, (void *)args);
}
