/* fwd_ops.c - activation conversion and matrix products of the forward pass (see
 * fwd_state.h). */
#include <assert.h>

#include "compute/ops.h"

#include "model/fwd_state.h"

const uint8_t *moeinf_fwd_act(struct moeinf_fwd *f, enum moeinf_type wt, const float *src, int m,
                              int64_t n, size_t *row_bytes) {
    enum moeinf_type vt = moeinf_type_cpu_get(wt)->vec_dot_type;
    struct moeinf_fwd_act *a = &f->acts[vt];
    assert(a->buf); /* allocated at init for every weight type of the model */
    *row_bytes = moeinf_row_bytes(vt, n);
    if (a->src != src || a->row_bytes != *row_bytes) {
        moeinf_quantize_rows(f->p.pool, f->p.kern, vt, src, (size_t)n, m, n, a->buf, *row_bytes);
        a->src = src;
        a->row_bytes = *row_bytes;
    }
    return a->buf;
}

void moeinf_fwd_acts_invalidate(struct moeinf_fwd *f) {
    for (int t = 0; t < MOEINF_TYPE_COUNT; t++)
        f->acts[t].src = NULL;
}

struct moeinf_mm_job moeinf_fwd_job(const struct moeinf_weight *w, int64_t e, const uint8_t *x,
                                    size_t x_stride, int m,
                                    float *y, // NOLINT(readability-non-const-parameter)
                                    size_t y_stride) {
    struct moeinf_mm_job j = {
        .w = moeinf_weight_row(w, e, 0),
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

void moeinf_fwd_matmul(struct moeinf_fwd *f, const struct moeinf_weight *w, const float *src, int m,
                       float *y, size_t y_stride) {
    size_t rb;
    const uint8_t *xq = moeinf_fwd_act(f, w->type, src, m, w->n_in, &rb);
    struct moeinf_mm_job j = moeinf_fwd_job(w, 0, xq, rb, m, y, y_stride);
    moeinf_matmul_run(f->p.pool, f->p.kern, &j, 1);
}

void moeinf_fwd_rope(const struct moeinf_hparams *hp, float *x, int n_heads, int head_dim,
                     int pos) {
    if (hp->rope_scaling == MOEINF_ROPE_SCALING_YARN) { /* n_rot <= MOEINF_MAX_ROT (load) */
        float corr[2];
        float cs[MOEINF_MAX_ROT];
        moeinf_rope_yarn_corr(hp->n_rot, hp->yarn_orig_ctx, hp->rope_base, hp->yarn_beta_fast,
                              hp->yarn_beta_slow, corr);
        moeinf_rope_yarn_angles(cs, hp->n_rot, pos, hp->rope_base, hp->rope_freq_scale, corr,
                                hp->yarn_attn_factor);
        if (hp->rope == MOEINF_ROPE_IMROPE) {
            /* the pairs of the fourth section are at position 0 for text (model.h) */
            float cs0[MOEINF_MAX_ROT];
            moeinf_rope_yarn_angles(cs0, hp->n_rot, 0, hp->rope_base, hp->rope_freq_scale, corr,
                                    hp->yarn_attn_factor);
            for (int i = 0; i < hp->n_rot / 2; i++) {
                if (moeinf_imrope_positioned(hp->rope_sections, i)) continue;
                cs[2 * (size_t)i] = cs0[2 * (size_t)i];
                cs[2 * (size_t)i + 1] = cs0[2 * (size_t)i + 1];
            }
        }
        const bool neox = hp->rope != MOEINF_ROPE_NORM; /* IMRoPE: NEOX pairs */
        moeinf_rope_cs(x, n_heads, head_dim, hp->n_rot, cs, neox);
        return;
    }
    switch (hp->rope) {
    case MOEINF_ROPE_NEOX:
        moeinf_rope_neox(x, n_heads, head_dim, hp->n_rot, pos, hp->rope_base, hp->rope_freq_scale);
        break;
    case MOEINF_ROPE_IMROPE:
        moeinf_rope_imrope_text(x, n_heads, head_dim, hp->n_rot, pos, hp->rope_base,
                                hp->rope_freq_scale, hp->rope_sections);
        break;
    case MOEINF_ROPE_NORM:
        moeinf_rope_norm(x, n_heads, head_dim, hp->n_rot, pos, hp->rope_base, hp->rope_freq_scale);
        break;
    }
}
