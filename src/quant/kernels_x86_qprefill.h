/*
 * kernels_x86_qprefill.h - the prefill tile (gemm) for Q8_0, Q4_0, Q5_0, IQ4_NL and MXFP4
 * weights x Q8_0 activations. Included by kernels_x86.h after qdot_rows, whose helpers it uses;
 * everything here is static.
 *
 * DESIGN: qdot_rows (vec_dot_m) prepares each group of 8 weight blocks once for 8 activation
 * rows and reads those rows' blocks for every weight row; with long rows (an expert's down
 * projection: 5632 elements, 48 KiB of activations for 8 rows) they come from L2. The tile
 * keeps a pass of QG_PASS activation rows' group (QG_PASS x 272 bytes, 8.5 KiB) and their
 * scales in L1 and applies it to QG_WROWS weight rows, each group prepared once per pass.
 * The arithmetic of each (weight row, activation row) pair is qgroup's, in the same block
 * order, so every result equals vec_dot's bit for bit.
 */
#ifndef MOEINF_QUANT_KERNELS_X86_QPREFILL_H
#define MOEINF_QUANT_KERNELS_X86_QPREFILL_H

#define QG_WROWS 8
#define QG_PASS  32

struct qg_tile {
    __m256 acc[QG_WROWS][QG_PASS];     /* lane b: the blocks b mod 8, as qdot_rows */
    __m256 dx[QG_PASS];                /* the activation scales of the current group */
    uint8_t xt[QG_PASS][8 * Q8_BYTES]; /* a last partial group, zero-padded */
};

/* The tile's rows against one group: xg(j) is activation row j's group (8 blocks). */
INLINE void qg_group(enum qkind k, int nw, int mp, const uint8_t *w, size_t w_stride, size_t woff,
                     const uint8_t *const xg[QG_PASS], struct qg_tile *t) {
    for (int j = 0; j < mp; j++)
        t->dx[j] = load_scales8(xg[j], Q8_BYTES);
    const size_t gbytes = 8 * qk_bytes(k);
    for (int r = 0; r < nw; r++) {
        const uint8_t *wg = w + (size_t)r * w_stride + woff;
        /* the next tile's group: a prompt's expert weights come from DRAM once */
        for (size_t l = 0; l < gbytes; l += 64)
            _mm_prefetch((const char *)wg + QG_WROWS * w_stride + l, _MM_HINT_T0);
        __m256i wq[8];
        __m256i aw[8];
        __m256 dw;
        qprep(k, wg, wq, aw, &dw);
        for (int j = 0; j < mp; j++)
            t->acc[r][j] = QGROUP_DX(k, wq, aw, dw, xg[j], t->dx[j], t->acc[r][j]);
    }
}

INLINE void qg_tile_run(enum qkind k, int64_t n, int nw, int mp, float *y, size_t y_stride,
                        const uint8_t *w, size_t w_stride, const uint8_t *x, size_t x_stride,
                        struct qg_tile *t) {
    const size_t bs = qk_bytes(k);
    const int64_t nb = n / 32;
    const int64_t ng = nb / 8;
    const int64_t rem = nb % 8;
    for (int r = 0; r < nw; r++)
        for (int j = 0; j < mp; j++)
            t->acc[r][j] = _mm256_setzero_ps();
    const uint8_t *xg[QG_PASS];
    for (int64_t g = 0; g < ng; g++) {
        for (int j = 0; j < mp; j++)
            xg[j] = x + (size_t)j * x_stride + (size_t)g * 8 * Q8_BYTES;
        qg_group(k, nw, mp, w, w_stride, (size_t)g * 8 * bs, xg, t);
    }
    if (rem) {
        /* As qdot_rows: the last blocks copied into zero-padded groups (zero quants and
         * scales add nothing, and leave each lane's sum as the scalar code leaves it). */
        for (int j = 0; j < mp; j++) {
            memset(t->xt[j], 0, sizeof t->xt[j]);
            memcpy(t->xt[j], x + (size_t)j * x_stride + (size_t)ng * 8 * Q8_BYTES,
                   (size_t)rem * Q8_BYTES);
            xg[j] = t->xt[j];
        }
        for (int j = 0; j < mp; j++)
            t->dx[j] = load_scales8(xg[j], Q8_BYTES);
        for (int r = 0; r < nw; r++) {
            uint8_t wt[8 * Q8_BYTES] = {0};
            memcpy(wt, w + (size_t)r * w_stride + (size_t)ng * 8 * bs, (size_t)rem * bs);
            __m256i wq[8];
            __m256i aw[8];
            __m256 dw;
            qprep(k, wt, wq, aw, &dw);
            for (int j = 0; j < mp; j++)
                t->acc[r][j] = QGROUP_DX(k, wq, aw, dw, xg[j], t->dx[j], t->acc[r][j]);
        }
    }
    for (int r = 0; r < nw; r++)
        for (int j = 0; j < mp; j++)
            y[(size_t)j * y_stride + (size_t)r] = hsum8_ps(t->acc[r][j]);
}

INLINE void qgemm(enum qkind k, int64_t n, int64_t nr, int m, float *y, size_t y_stride,
                  const void *w, size_t w_stride, const void *x, size_t x_stride) {
    struct qg_tile t;
    for (int64_t r0 = 0; r0 < nr; r0 += QG_WROWS)
        for (int j0 = 0; j0 < m; j0 += QG_PASS)
            qg_tile_run(k, n, nr - r0 < QG_WROWS ? (int)(nr - r0) : QG_WROWS,
                        m - j0 < QG_PASS ? m - j0 : QG_PASS, y + (size_t)j0 * y_stride + r0,
                        y_stride, (const uint8_t *)w + (size_t)r0 * w_stride, w_stride,
                        (const uint8_t *)x + (size_t)j0 * x_stride, x_stride, &t);
}

static void gemm_q8_0(int64_t n, int64_t nr, int m, float *y, size_t y_stride, const void *w,
                      size_t w_stride, const void *x, size_t x_stride) {
    qgemm(QK_Q8_0, n, nr, m, y, y_stride, w, w_stride, x, x_stride);
}

static void gemm_q4_0(int64_t n, int64_t nr, int m, float *y, size_t y_stride, const void *w,
                      size_t w_stride, const void *x, size_t x_stride) {
    qgemm(QK_Q4_0, n, nr, m, y, y_stride, w, w_stride, x, x_stride);
}

static void gemm_q5_0(int64_t n, int64_t nr, int m, float *y, size_t y_stride, const void *w,
                      size_t w_stride, const void *x, size_t x_stride) {
    qgemm(QK_Q5_0, n, nr, m, y, y_stride, w, w_stride, x, x_stride);
}

static void gemm_iq4_nl(int64_t n, int64_t nr, int m, float *y, size_t y_stride, const void *w,
                        size_t w_stride, const void *x, size_t x_stride) {
    qgemm(QK_IQ4_NL, n, nr, m, y, y_stride, w, w_stride, x, x_stride);
}

static void gemm_mxfp4(int64_t n, int64_t nr, int m, float *y, size_t y_stride, const void *w,
                       size_t w_stride, const void *x, size_t x_stride) {
    qgemm(QK_MXFP4, n, nr, m, y, y_stride, w, w_stride, x, x_stride);
}

#endif
