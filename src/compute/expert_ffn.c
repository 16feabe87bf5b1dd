/* expert_ffn.c - several experts' SwiGLU FFNs over their grouped token rows (see
 * expert_ffn.h). */
#include "compute/expert_ffn.h"

#include "compute/ops.h"

static struct moeinf_mm_job job(const uint8_t *w, const struct moeinf_expert_mat *mat,
                                const uint8_t *x, size_t x_stride, int m,
                                float *y, // NOLINT(readability-non-const-parameter)
                                size_t y_stride) {
    struct moeinf_mm_job j = {
        .w = w,
        .w_row_bytes = mat->row_bytes,
        .type = mat->type,
        .n_in = mat->n_in,
        .n_out = mat->n_out,
        .x = x,
        .x_stride = x_stride,
        .m = m,
        .y = y,
        .y_stride = y_stride,
    };
    return j;
}

/* gpt-oss's constants (llama.cpp's LLM_FFN_SWIGLU_OAI_MOE) */
#define OAI_ALPHA 1.702f
#define OAI_LIMIT 7.0f

static void add_bias(float *y, const float *b, int64_t n) {
    if (!b) return;
    for (int64_t k = 0; k < n; k++)
        y[k] += b[k];
}

void moeinf_expert_ffn_run(struct moeinf_pool *pool, const struct moeinf_kernels *kern,
                           const struct moeinf_expert_ffn *a) {
    const struct moeinf_expert_mat *down = &a->mat[MOEINF_EXPERT_DOWN];
    const int64_t n_ff = a->mat[MOEINF_EXPERT_GATE].n_out;
    const int64_t n_embd = down->n_out;
    int nj = 0;
    for (int i = 0; i < a->n; i++) {
        const uint8_t *x = a->x + (size_t)a->row0[i] * a->x_stride;
        const size_t h = (size_t)a->row0[i] * (size_t)n_ff;
        a->jobs[nj++] = job(a->parts[i][MOEINF_EXPERT_GATE], &a->mat[MOEINF_EXPERT_GATE], x,
                            a->x_stride, a->rows[i], a->hg + h, (size_t)n_ff);
        a->jobs[nj++] = job(a->parts[i][MOEINF_EXPERT_UP], &a->mat[MOEINF_EXPERT_UP], x,
                            a->x_stride, a->rows[i], a->hu + h, (size_t)n_ff);
    }
    moeinf_matmul_run(pool, kern, a->jobs, nj);
    for (int i = 0; i < a->n; i++) {
        for (int s = a->row0[i]; s < a->row0[i] + a->rows[i]; s++) {
            float *hg = a->hg + (size_t)s * (size_t)n_ff;
            float *hu = a->hu + (size_t)s * (size_t)n_ff;
            if (a->bias) {
                add_bias(hg, a->bias[i][MOEINF_EXPERT_GATE], n_ff);
                add_bias(hu, a->bias[i][MOEINF_EXPERT_UP], n_ff);
            }
            if (a->glu == MOEINF_GLU_SWIGLU_OAI) {
                moeinf_swiglu_oai(hg, hg, hu, (int)n_ff, OAI_ALPHA, OAI_LIMIT);
            } else {
                moeinf_swiglu(hg, hg, hu, (int)n_ff);
            }
        }
    }
    /* The down input, converted per run of consecutive rows (one run when the call holds
     * every expert of the step); rows convert independently, so runs give the same bytes. */
    const enum moeinf_type vt = moeinf_type_cpu_get(down->type)->vec_dot_type;
    const size_t rd = moeinf_row_bytes(vt, n_ff);
    for (int i = 0; i < a->n;) {
        int j = i + 1;
        while (j < a->n && a->row0[j] == a->row0[j - 1] + a->rows[j - 1])
            j++;
        const int r0 = a->row0[i];
        const int r1 = a->row0[j - 1] + a->rows[j - 1];
        moeinf_quantize_rows(pool, kern, vt, a->hg + (size_t)r0 * (size_t)n_ff, (size_t)n_ff,
                             r1 - r0, n_ff, a->hq + (size_t)r0 * rd, rd);
        i = j;
    }
    nj = 0;
    for (int i = 0; i < a->n; i++) {
        const int r0 = a->row0[i];
        a->jobs[nj++] = job(a->parts[i][MOEINF_EXPERT_DOWN], down, a->hq + (size_t)r0 * rd, rd,
                            a->rows[i], a->out + (size_t)r0 * (size_t)n_embd, (size_t)n_embd);
    }
    moeinf_matmul_run(pool, kern, a->jobs, nj);
    if (!a->bias) return;
    for (int i = 0; i < a->n; i++) {
        for (int s = a->row0[i]; s < a->row0[i] + a->rows[i]; s++)
            add_bias(a->out + (size_t)s * (size_t)n_embd, a->bias[i][MOEINF_EXPERT_DOWN], n_embd);
    }
}
