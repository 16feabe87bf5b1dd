/* attention.c - causal GQA over the KV cache; work split by (block of tokens, KV head). */
#include "compute/attention.h"

#include <math.h>
#include <string.h>

/* Rows (token x query head) per call of the weighted sum of V rows, whose row pointers go
 * through the stack. */
#define ATTN_SUM_ROWS 64

/* Floats between score rows beyond their span: rows a power of two of floats long, 4 KiB apart
 * or a multiple, would all fall in one set of the L1 cache, and the dots write a column of them
 * per K row. (Its effect alone was not measured apart from the blocks': this host's noise hid
 * it.) */
#define ATTN_ROW_PAD 16

/* Floats of a block's packed q rows at most (tokens x heads of a KV head x head_dim), and so of
 * its outputs: 16 KiB of each stay in L1. A qwen3-shaped block of 16 tokens x 8 heads x 128
 * (64 KiB each) attended a 2048-token prompt no faster than token by token, 32 rows of 128 in
 * 0.8-0.9 of its time; a DeepSeek-V2-Lite-shaped one (16 heads of 576 on one KV head) ran
 * 1.3x slower in blocks of 2 than token by token (the attention alone on this Xeon, family 6
 * model 207). */
#define ATTN_BLOCK_Q_FLOATS 4096

int moeinf_attn_block(int n_head, int n_head_kv, int width) {
    const int rows = ATTN_BLOCK_Q_FLOATS / width;
    const int b = rows / (n_head / n_head_kv);
    return b < 1 ? 1 : (b > MOEINF_ATTN_BLOCK ? MOEINF_ATTN_BLOCK : b);
}

/* Floats of scratch per thread beyond one token's scores, for the scores of a block's other
 * tokens: a fixed amount, so that a longer context gets smaller blocks, not a scratch that grows
 * MOEINF_ATTN_BLOCK times as fast as the KV cache. */
#define ATTN_BLOCK_FLOATS ((size_t)1 << 18)

size_t moeinf_attn_scratch_floats(int n_ctx, int n_head, int n_head_kv, int head_dim) {
    /* one token's scores over the whole context, the block's, and a row of head_dim floats: the
     * room of a converted K or V row, unused since the kernels read the cache's rows in place;
     * kept so that the sizes callers compute (and bench/attention.c built in an older tree)
     * stay valid */
    return (size_t)(n_head / n_head_kv) * (size_t)n_ctx + ATTN_BLOCK_FLOATS + (size_t)head_dim;
}

/* The first position the token at pos sees. */
static int first_seen(const struct moeinf_attn_args *a, int pos) {
    return a->window > 0 && pos >= a->window ? pos - a->window + 1 : 0;
}

/* The tokens b_lo .. b_hi - 1 of the block of nb tokens from position pos_first that see
 * position t (pos >= t, and t >= first_seen(pos)); false if none does. */
static bool seeing(const struct moeinf_attn_args *a, int t, int pos_first, int nb, int *b_lo,
                   int *b_hi) {
    *b_lo = t > pos_first ? t - pos_first : 0;
    *b_hi = a->window > 0 && t + a->window - pos_first < nb ? t + a->window - pos_first : nb;
    return *b_lo < *b_hi;
}

/* A run of positions t0 .. end - 1 that the same tokens b_lo .. b_hi - 1 of a block see and
 * that does not wrap around the ring: the positions one kernel call takes. */
struct run {
    int t0, end, b_lo, b_hi;
};

/* The next run from *t (positions no token sees skipped) up to pos_last, *t moved past it;
 * false when none is left. */
static bool next_run(const struct moeinf_attn_args *a, int *t, int pos_first, int pos_last, int nb,
                     struct run *r) {
    while (*t <= pos_last && !seeing(a, *t, pos_first, nb, &r->b_lo, &r->b_hi))
        (*t)++;
    if (*t > pos_last) return false;
    r->t0 = *t;
    int end = *t + 1;
    int lo = 0;
    int hi = 0;
    while (end <= pos_last && end % a->ring != 0 && seeing(a, end, pos_first, nb, &lo, &hi) &&
           lo == r->b_lo && hi == r->b_hi)
        end++;
    r->end = end;
    *t = end;
    return true;
}

/* The tokens of a block per work item for this call: the most (up to moeinf_attn_block) whose
 * scores (span rows of `group` heads each) and packed q rows fit the scratch. One token needs its
 * scores only (its q rows lie together already), and those always fit: the scratch holds a token's
 * scores for the whole context. */
static int block_tokens(const struct moeinf_attn_args *a, int group, int width) {
    const size_t end = (size_t)a->pos0 + (size_t)a->m; /* positions 0 .. end - 1 exist */
    const int most = moeinf_attn_block(a->n_head, a->n_head_kv, width);
    int b = most < a->m ? most : a->m;
    for (; b > 1; b--) {
        size_t span = end;
        if (a->window > 0 && (size_t)a->window + (size_t)b - 1 < span)
            span = (size_t)a->window + (size_t)b - 1;
        const size_t per_head = span + ATTN_ROW_PAD + (size_t)a->head_dim;
        if ((size_t)b * (size_t)group * per_head <= a->scratch_stride) break;
    }
    return b > 0 ? b : 1;
}

/* Tokens j0 .. j0 + nb - 1 against KV head kh. Each token's scores, softmax and weighted sum of
 * V rows are computed with the same operations in the same order as one token alone would
 * (the dot of a K row with a q row does not depend on the rows beside it, quant.h), so the
 * output has the same bits whatever the block. */
static void attend(const struct moeinf_attn_args *a, int j0, int nb, int kh, float *scratch) {
    const int group = a->n_head / a->n_head_kv;
    const int hd = a->head_dim;
    const int vd = a->v_dim > 0 ? a->v_dim : hd;
    const int k_row = a->k_row > 0 ? a->k_row : a->n_head_kv * hd;
    const int v_row = a->v_row > 0 ? a->v_row : a->n_head_kv * vd;
    const int out_stride = a->n_head * vd;
    const int q_stride = a->n_head * hd;
    const int pos_first = a->pos0 + j0;
    const int pos_last = pos_first + nb - 1;
    const int span0 = first_seen(a, pos_first); /* positions span0 .. pos_last are read */
    const int span = pos_last + 1 - span0;
    /* token b's head g scores position t at scores[(b * group + g) * rs + t - span0]; then
     * the block's q rows, token after token (group rows each: one token's lie together in q) */
    const size_t n_rows = (size_t)nb * (size_t)group;
    const size_t packed = nb > 1 ? n_rows * (size_t)hd : 0;
    size_t rs = (size_t)span + ATTN_ROW_PAD;
    if (n_rows * rs + packed > a->scratch_stride) rs = (size_t)span;
    float *scores = scratch;
    float *qpack = scores + n_rows * rs;
    const float scale = a->scale != 0.0f ? a->scale : 1.0f / sqrtf((float)hd);
    const float *q = a->q + (size_t)j0 * q_stride + (size_t)kh * group * hd;
    if (nb > 1) {
        for (int b = 0; b < nb; b++)
            memcpy(qpack + (size_t)b * group * hd, q + (size_t)b * q_stride,
                   (size_t)group * hd * sizeof(float));
        q = qpack;
    }
    /* q.k in runs of positions that the same tokens see, one call for the run's K rows and the
     * q rows of those tokens (hd floats apart): the F32 dot's summation order (quant.h), so
     * every table gives the same scores, with F16 rows converted in the kernel's registers. */
    const size_t kv_bytes = a->kv_f16 ? sizeof(uint16_t) : sizeof(float);
    struct run r;
    for (int t = span0; next_run(a, &t, pos_first, pos_last, nb, &r);) {
        const size_t k_at = (size_t)(r.t0 % a->ring) * (size_t)k_row + (size_t)kh * (size_t)hd;
        a->kern->qk_f32(hd, r.end - r.t0, (r.b_hi - r.b_lo) * group,
                        scores + (size_t)r.b_lo * group * rs + (size_t)(r.t0 - span0), rs,
                        q + (size_t)r.b_lo * group * hd, (size_t)hd,
                        (const uint8_t *)a->k + k_at * kv_bytes, (size_t)k_row, a->kv_f16, scale);
    }
    for (int b = 0; b < nb; b++) {
        const int pos = pos_first + b;
        const int t0 = first_seen(a, pos);
        const int n_kv = pos + 1 - t0;
        for (int g = 0; g < group; g++) {
            float *s = scores + ((size_t)b * group + g) * rs + (size_t)(t0 - span0);
            a->kern->softmax_f32(s, n_kv, a->sinks ? a->sinks + (size_t)kh * group + g : NULL);
            memset(a->out + (size_t)(j0 + b) * out_stride + (size_t)(kh * group + g) * vd, 0,
                   (size_t)vd * sizeof(float));
        }
    }
    /* The weighted sum of V rows, in runs of positions that the same tokens see and that do not
     * wrap around the ring: one call for all the run's rows (token x head), which reads each V
     * row once for them (quant.h, moeinf_wsum_fn). A token's positions still come in order. */
    const moeinf_wsum_fn wsum = a->kern->wsum_f32;
    for (int t = span0; next_run(a, &t, pos_first, pos_last, nb, &r);) {
        const size_t v_at = (size_t)(r.t0 % a->ring) * (size_t)v_row + (size_t)kh * (size_t)vd;
        const void *v = (const uint8_t *)a->v + v_at * kv_bytes;
        float *outs[ATTN_SUM_ROWS];
        const float *ps[ATTN_SUM_ROWS];
        int n_call = 0;
        for (int b = r.b_lo; b < r.b_hi; b++) {
            for (int g = 0; g < group; g++) {
                outs[n_call] =
                    a->out + (size_t)(j0 + b) * out_stride + (size_t)(kh * group + g) * vd;
                ps[n_call] = scores + ((size_t)b * group + g) * rs + (size_t)(r.t0 - span0);
                if (++n_call == ATTN_SUM_ROWS) {
                    wsum(vd, r.end - r.t0, n_call, outs, ps, v, (size_t)v_row, a->kv_f16);
                    n_call = 0;
                }
            }
        }
        if (n_call > 0) wsum(vd, r.end - r.t0, n_call, outs, ps, v, (size_t)v_row, a->kv_f16);
    }
}

struct attn_job {
    const struct moeinf_attn_args *a;
    int block;
};

/* Items go KV head by KV head (a head's blocks, then the next head's), so that a thread's next
 * item reads mostly the K and V rows its last one read: on one thread an OLMoE-shaped 2048-token
 * prompt took 0.91-0.95 of the time of blocks in the outer order (bench_attention, the Xeon of
 * docs/PERFORMANCE.md). */
static void attn_worker(void *arg, int ith, int nth) {
    const struct attn_job *job = arg;
    const struct moeinf_attn_args *a = job->a;
    float *scratch = a->scratch + (size_t)ith * a->scratch_stride;
    const int n_blocks = (a->m + job->block - 1) / job->block;
    const int n_items = n_blocks * a->n_head_kv;
    for (int it = ith; it < n_items; it += nth) {
        const int j0 = it % n_blocks * job->block;
        const int nb = a->m - j0 < job->block ? a->m - j0 : job->block;
        attend(a, j0, nb, it / n_blocks, scratch);
    }
}

void moeinf_attention(struct moeinf_pool *pool, const struct moeinf_attn_args *args) {
    const int group = args->n_head / args->n_head_kv;
    const int hd = args->head_dim > args->v_dim ? args->head_dim : args->v_dim;
    struct attn_job job = {.a = args, .block = block_tokens(args, group, hd)};
    moeinf_pool_run(pool, attn_worker, &job);
}
