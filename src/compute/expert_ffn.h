/*
 * expert_ffn.h - the gated FFN (SwiGLU, or gpt-oss's clamped form, with biases where the model
 * has them) of several routed experts of one layer over the token rows
 * routed to each, on the CPU: every expert's gate and up in one pool dispatch, SwiGLU, the
 * down input converted, every down in a second dispatch. The resident experts of the forward
 * pass and the RAM fast tier of the expert cache (offload/fast_tier.h) both run it.
 *
 * Rows are grouped by expert: expert i's tokens are rows [row0[i], row0[i] + rows[i]) of the
 * input, of the scratch and of the output, and each expert's outputs land in its own rows, so
 * the result does not depend on how a layer's experts are split into calls.
 */
#ifndef MOEINF_COMPUTE_EXPERT_FFN_H
#define MOEINF_COMPUTE_EXPERT_FFN_H

#include <stddef.h>
#include <stdint.h>

#include "compute/matmul.h"
#include "compute/ops.h"
#include "compute/pool.h"
#include "quant/quant.h"

/* The layout of one expert's matrix, the same for every expert of a layer. */
struct moeinf_expert_mat {
    enum moeinf_type type;
    int64_t n_in;
    int64_t n_out;
    size_t row_bytes;
};

enum {
    MOEINF_EXPERT_GATE = 0,
    MOEINF_EXPERT_UP = 1,
    MOEINF_EXPERT_DOWN = 2
};

struct moeinf_expert_ffn {
    struct moeinf_expert_mat mat[3];  /* gate [n_embd, n_ff], up [n_embd, n_ff], down [n_ff,
                                         n_embd]; gate and up share a vec_dot_type */
    int n;                            /* experts */
    const uint8_t *const (*parts)[3]; /* [n] each expert's gate, up and down matrices */
    const float *const (*bias)[3];    /* NULL, or [n] each expert's gate, up and down bias */
    enum moeinf_glu glu;
    const int *row0;                  /* [n] its first row */
    const int *rows;                  /* [n] its row count (> 0) */
    const uint8_t *x;                 /* input rows in gate's vec_dot_type */
    size_t x_stride;                  /* bytes between input rows */
    float *out;                       /* output rows, n_embd floats each */
    /* scratch covering every row named: */
    float *hg;                  /* [rows][n_ff] gate, then SwiGLU */
    float *hu;                  /* [rows][n_ff] up */
    uint8_t *hq;                /* [rows] SwiGLU rows in down's vec_dot_type */
    struct moeinf_mm_job *jobs; /* [2 * n] */
};

void moeinf_expert_ffn_run(struct moeinf_pool *pool, const struct moeinf_kernels *kern,
                           const struct moeinf_expert_ffn *a);

#endif
