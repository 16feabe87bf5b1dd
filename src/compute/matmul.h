/*
 * matmul.h - weight x activation products split across the pool.
 *
 * A job is one weight matrix (n_out rows of n_in elements of one type) times m activation
 * rows already converted to the weight's vec_dot_type (see quant/quant.h). A batch of jobs
 * runs in one pool dispatch (q/k/v together; every selected expert's gate and up together).
 * The rows of all jobs, laid end to end and weighed by their cost, are cut into chunks that
 * the threads claim one after another (an atomic counter), so a thread that gets less CPU
 * time on a shared machine simply does fewer chunks. Prefill rows go to the type's gemm tile
 * kernel where the table has one (the K-quants), else to vec_dot_m row by row. Every kernel's
 * result for an output element equals vec_dot's and does not depend on the other rows it is
 * called with, so results do not depend on the thread count, the chunking or the timing.
 */
#ifndef MOEINF_MATMUL_H
#define MOEINF_MATMUL_H

#include <stddef.h>
#include <stdint.h>

#include "compute/pool.h"
#include "quant/quant.h"

struct moeinf_mm_job {
    const uint8_t *w;     /* row 0 of the weight matrix */
    size_t w_row_bytes;
    int64_t n_in;
    int64_t n_out;
    const uint8_t *x;     /* activation row 0, in type's vec_dot_type */
    size_t x_stride;      /* bytes between activation rows */
    float *y;             /* y[j * y_stride + r] = dot(w row r, x row j) */
    size_t y_stride;      /* floats between output rows */
    enum moeinf_type type;
    int m;                /* activation rows */
};

void moeinf_matmul_run(struct moeinf_pool *pool, const struct moeinf_kernels *kern,
                       const struct moeinf_mm_job *jobs, int n_jobs);

/* Converts m rows of n floats (x_stride floats apart) to `type` (a vec_dot_type), rows
 * out_stride bytes apart, split across the pool. */
void moeinf_quantize_rows(struct moeinf_pool *pool, const struct moeinf_kernels *kern,
                          enum moeinf_type type, const float *x, size_t x_stride, int m,
                          int64_t n, uint8_t *out, size_t out_stride);

#endif
