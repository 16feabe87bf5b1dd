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
 * order, so every result equals vec_dot's bit for bit. Every kind here takes an eight-row
 * tile further down (avx2: q8r_*, 256-bit; avx512: q8z_*, 512-bit with vpdpbusd), and qgemm
 * only the last rows (fewer than eight) of a call; the amx table puts groups of 16 rows on
 * its AMX-INT8 tile first (kernels_x86_amx.h).
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
        prefetch_block(wg, QG_WROWS * w_stride, gbytes);
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

#define Q8R_PASS  32 /* activation rows per pass */
#define Q8R_CHUNK 8  /* blocks prepared at a time */

/* hsum8_ps of v[0], v[stride], ..., v[7 * stride]: one lane of a pass's eight accumulators,
 * stored row after row (stride: floats per stored accumulator). */
INLINE float hsum_column8(const float *v, size_t stride) {
    return hsum8_ps(_mm256_setr_ps(v[0], v[stride], v[2 * stride], v[3 * stride], v[4 * stride],
                                   v[5 * stride], v[6 * stride], v[7 * stride]));
}

/* The weight scales of block `off` of the eight rows w0, w0 + w_stride, ..., row order. */
INLINE __m256 rows8_scales(enum qkind k, const uint8_t *w0, size_t w_stride, size_t off) {
    if (k != QK_MXFP4) return load_scales8(w0 + off, w_stride);
    uint64_t e = 0;
    for (int r = 0; r < 8; r++)
        e |= (uint64_t)w0[(size_t)r * w_stride + off] << (8 * r);
    return iq_e8m0_half8_u64(e);
}

/* The scales d_x of cb (<= Q8R_CHUNK) Q8_0 activation blocks from xb: a whole chunk in one
 * conversion. */
INLINE void chunk_scales(const uint8_t *xb, int cb, float dx[Q8R_CHUNK]) {
    if (cb == Q8R_CHUNK) {
        _mm256_storeu_ps(dx, load_scales8(xb, Q8_BYTES));
        return;
    }
    for (int i = 0; i < cb; i++)
        dx[i] = moeinf_fp16_to_fp32(load_u16(xb + (size_t)i * Q8_BYTES));
}

/* Block `off` of the eight rows after w0's eight: a prompt's expert weights come from DRAM
 * once. */
INLINE void prefetch_next8(const uint8_t *w0, size_t w_stride, size_t off) {
    for (int r = 8; r < 16; r++)
        prefetch_ahead(w0, (size_t)r * w_stride + off);
}

#if !defined(X86_VNNI)
/* ---- eight weight rows in one vector (the avx2 table) --------------------------------------
 *
 * qgemm's pairs each end in a vector of 8 int32 lanes of one block's dot, which sum_lanes8
 * reduces with 6 vphaddd per 8 blocks (qgroup_dx_small: 2); on Zen 1 vphaddd runs on the pipe
 * that does the vpmaddubsw and vpmaddwd, the tile's floor. Here a vector holds four weight
 * rows' 8-element quarters of a block ([row 0 | row 1 | row 2 | row 3]) against one
 * activation row's quarter broadcast to all four, so a quad's four quarters add up to two
 * lanes per row, and one vphaddd turns two quads (8 rows) into one lane per row: 1 vphaddd per
 * 8 block pairs. The activation rows are read as they are (a 64-bit broadcast per quarter);
 * the weight rows are unpacked and rearranged once per block and pass of Q8R_PASS activation
 * rows. Weights of magnitude at most 16 (Q4_0, Q5_0, MXFP4) add a quad's four vpmaddubsw
 * outputs in int16 (4 x 2 x 16 x 128 = 16384 at most) before one vpmaddwd; Q8_0 and IQ4_NL
 * widen each.
 *
 * Each block's integer dot is exact whatever the grouping, and lane l of acc[j][k] sums the
 * blocks b = k mod 8 of row q8r_row[l] in block order with qgroup_dx's float steps ((dw*dx) *
 * isum + acc), so hsum8_ps over k gives vec_dot's result bit for bit. The VNNI table has
 * its own tile, in 512-bit vectors, further down. */
/* The row whose dot lands in lane l of a step's vector (vphaddd of quads 0-3 and 4-7). */
static const int q8r_row[8] = {0, 1, 4, 5, 2, 3, 6, 7};

struct q8r_block {
    __m256i w[2][4];  /* quad h (rows 4h..4h+3), quarter q: elements 8q..8q+7 of each row */
    __m256i aw[2][4]; /* |w|, the sign trick's unsigned operand */
    __m256 dw;        /* the rows' scales, in q8r_row's lane order */
};

struct q8r_tile {
    __m256 acc[Q8R_PASS][8]; /* activation row j, blocks k mod 8; lane l: row q8r_row[l] */
    float dx[Q8R_PASS][Q8R_CHUNK];
    struct q8r_block blk[Q8R_CHUNK];
};

/* Four rows' blocks (int8 values, element order) as four quarter vectors [r0 | r1 | r2 | r3]. */
INLINE void q8r_quad(const __m256i v[4], __m256i out[4]) {
    const __m256i t0 = _mm256_unpacklo_epi64(v[0], v[1]); /* [r0 q0, r1 q0 | r0 q2, r1 q2] */
    const __m256i t1 = _mm256_unpackhi_epi64(v[0], v[1]); /* [r0 q1, r1 q1 | r0 q3, r1 q3] */
    const __m256i t2 = _mm256_unpacklo_epi64(v[2], v[3]);
    const __m256i t3 = _mm256_unpackhi_epi64(v[2], v[3]);
    out[0] = _mm256_inserti128_si256(t0, _mm256_castsi256_si128(t2), 1);
    out[1] = _mm256_inserti128_si256(t1, _mm256_castsi256_si128(t3), 1);
    out[2] = _mm256_inserti128_si256(t2, _mm256_extracti128_si256(t0, 1), 0);
    out[3] = _mm256_inserti128_si256(t3, _mm256_extracti128_si256(t1, 1), 0);
}

/* Block `off` (bytes into each row) of the eight rows w0, w0 + w_stride, ... */
INLINE void q8r_prepare(enum qkind k, __m256i table, const uint8_t *w0, size_t w_stride, size_t off,
                        struct q8r_block *b) {
    for (int h = 0; h < 2; h++) {
        __m256i v[4];
        for (int i = 0; i < 4; i++)
            v[i] = qvalues(k, table, w0 + (size_t)(4 * h + i) * w_stride + off);
        q8r_quad(v, b->w[h]);
        for (int i = 0; i < 4; i++)
            b->aw[h][i] = _mm256_sign_epi8(b->w[h][i], b->w[h][i]);
    }
    const __m256 d = rows8_scales(k, w0, w_stride, off); /* row order */
    b->dw = _mm256_permutevar8x32_ps(d, _mm256_loadu_si256((const __m256i *)(const void *)q8r_row));
}

/* Eight rows' exact block dots against one activation block (quants at xq), lane l: row
 * q8r_row[l]. small: every |w| <= 16. */
INLINE __m256i q8r_step(bool small, const struct q8r_block *b, const uint8_t *xq) {
    const __m256i ones = _mm256_set1_epi16(1);
    __m256i p[2] = {_mm256_setzero_si256(), _mm256_setzero_si256()};
    for (int q = 0; q < 4; q++) {
        int64_t v;
        memcpy(&v, xq + (size_t)8 * q, sizeof v);
        const __m256i xv = _mm256_set1_epi64x(v);
        for (int h = 0; h < 2; h++) {
            const __m256i m = _mm256_maddubs_epi16(b->aw[h][q], _mm256_sign_epi8(xv, b->w[h][q]));
            p[h] = small ? _mm256_add_epi16(p[h], m)
                         : _mm256_add_epi32(p[h], _mm256_madd_epi16(m, ones));
        }
    }
    if (small)
        for (int h = 0; h < 2; h++)
            p[h] = _mm256_madd_epi16(p[h], ones);
    return _mm256_hadd_epi32(p[0], p[1]);
}

/* y for the eight weight rows w0, w0 + w_stride, ... and activation rows 0..np-1
 * (np <= Q8R_PASS) of x. */
INLINE void q8r_pass(enum qkind k, int64_t nb, int np, const uint8_t *w0, size_t w_stride,
                     const uint8_t *x, size_t x_stride, float *y, size_t y_stride,
                     struct q8r_tile *t) {
    const size_t bs = qk_bytes(k);
    const __m256i table = qcodebook(k);
    const bool small = k == QK_Q4_0 || k == QK_Q5_0 || k == QK_MXFP4;
    for (int j = 0; j < np; j++)
        for (int i = 0; i < 8; i++)
            t->acc[j][i] = _mm256_setzero_ps();
    for (int64_t b0 = 0; b0 < nb; b0 += Q8R_CHUNK) {
        const int cb = nb - b0 < Q8R_CHUNK ? (int)(nb - b0) : Q8R_CHUNK;
        for (int j = 0; j < np; j++) {
            const uint8_t *xb = x + (size_t)j * x_stride + (size_t)b0 * Q8_BYTES;
            chunk_scales(xb, cb, t->dx[j]);
        }
        for (int i = 0; i < cb; i++) {
            const size_t off = (size_t)(b0 + i) * bs;
            prefetch_next8(w0, w_stride, off);
            q8r_prepare(k, table, w0, w_stride, off, &t->blk[i]);
        }
        for (int i = 0; i < cb; i++) {
            const struct q8r_block *b = &t->blk[i];
            const int lane = (int)((b0 + i) % 8);
            const size_t off = (size_t)(b0 + i) * Q8_BYTES + 2;
            for (int j = 0; j < np; j++) {
                const __m256 d = _mm256_mul_ps(b->dw, _mm256_broadcast_ss(&t->dx[j][i]));
                const __m256 isum =
                    _mm256_cvtepi32_ps(q8r_step(small, b, x + (size_t)j * x_stride + off));
                t->acc[j][lane] = _mm256_fmadd_ps(d, isum, t->acc[j][lane]);
            }
        }
    }
    for (int j = 0; j < np; j++) {
        float v[8 * 8]; /* one flat array: hsum_column8 reads across the stored vectors */
        for (int i = 0; i < 8; i++)
            _mm256_storeu_ps(v + (size_t)8 * i, t->acc[j][i]);
        for (int l = 0; l < 8; l++)
            y[(size_t)j * y_stride + (size_t)q8r_row[l]] = hsum_column8(v + l, 8);
    }
}

#    define Q8_TILE struct q8r_tile
#    define Q8_PASS q8r_pass
#else
/* ---- eight weight rows in one 512-bit vector (the avx512 table) ----------------------------
 *
 * As the avx2 tile, with all eight rows' quarter q in one vector ([row 0 | ... | row 7], 8
 * bytes each) against the activation row's quarter broadcast to all eight: four vpdpbusd per
 * activation block against eight rows, and no sign trick. vpdpbusd takes its first operand
 * unsigned, so the activation quants go in offset by 128 (x ^ 0x80 is x + 128 for every int8
 * x) and each row's 128 * sum(w) is subtracted after: (x + 128) . w - 128 sum(w) = x . w, exact
 * in int32 (the offset quants are copied once per chunk of blocks and pass). A row's two
 * lanes are added across two activation rows at once (two vpermt2d and one add), leaving
 * [activation row j: rows 0-7 | row j + 1: rows 0-7]. The float steps per lane are the
 * tile's ((dw*dx) * isum + acc, blocks k mod 8, hsum8_ps), so every
 * output still equals vec_dot bit for bit. On an Intel Xeon (family 6 model 207) it took
 * 0.7-0.8 of the ticks of the 256-bit tile with vpdpbusd, itself 0.6-0.8 of qgemm's
 * (docs/PERFORMANCE.md). */
struct q8z_block {
    __m512i w[4]; /* quarter q: elements 8q..8q+7 of rows 0-7 */
    __m512i corr; /* 128 * sum(w) of rows 0-7, twice */
    __m512 dw;    /* the rows' scales, twice */
};

struct q8z_tile {
    __m512 acc[Q8R_PASS / 2][8]; /* activation rows 2p, 2p + 1; blocks k mod 8 */
    float dx[Q8R_PASS + 1][Q8R_CHUNK];
    uint8_t xu[Q8R_PASS + 1][Q8R_CHUNK][32]; /* the chunk's activation quants + 128 */
    struct q8z_block blk[Q8R_CHUNK];
};

/* Lanes 2r + h of a and b as [a's row sums | b's row sums] (h = 0: even lanes, 1: odd). */
INLINE __m512i q8z_rowsums(__m512i a, __m512i b) {
    const __m512i even =
        _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
    const __m512i odd =
        _mm512_setr_epi32(1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31);
    return _mm512_add_epi32(_mm512_permutex2var_epi32(a, even, b),
                            _mm512_permutex2var_epi32(a, odd, b));
}

/* Block `off` of the eight rows w0, w0 + w_stride, ... */
INLINE void q8z_prepare(enum qkind k, __m256i table, const uint8_t *w0, size_t w_stride, size_t off,
                        struct q8z_block *b) {
    __m512i z[4]; /* rows 2i and 2i + 1, element order */
    for (int i = 0; i < 4; i++) {
        const __m256i lo = qvalues(k, table, w0 + (size_t)(2 * i) * w_stride + off);
        const __m256i hi = qvalues(k, table, w0 + (size_t)(2 * i + 1) * w_stride + off);
        z[i] = _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1);
    }
    /* qword 4 * (r % 2) + q of z[r / 2] to qword r of quarter q */
    for (int q = 0; q < 4; q += 2) {
        const __m512i idx = _mm512_setr_epi64(q, 4 + q, 8 + q, 12 + q, q + 1, 5 + q, 9 + q, 13 + q);
        const __m512i t01 = _mm512_permutex2var_epi64(z[0], idx, z[1]);
        const __m512i t23 = _mm512_permutex2var_epi64(z[2], idx, z[3]);
        b->w[q] = _mm512_shuffle_i64x2(t01, t23, 0x44);     /* lower halves */
        b->w[q + 1] = _mm512_shuffle_i64x2(t01, t23, 0xee); /* upper halves */
    }
    __m512i c = _mm512_setzero_si512();
    for (int q = 0; q < 4; q++)
        c = _mm512_dpbusd_epi32(c, _mm512_set1_epi8((char)0x80), b->w[q]);
    b->corr = q8z_rowsums(c, c);
    const __m256 d = rows8_scales(k, w0, w_stride, off);
    b->dw = _mm512_insertf32x8(_mm512_castps256_ps512(d), d, 1);
}

/* The eight rows' block dots, offset by 128 sum(w), against one activation block's quants
 * + 128 (xu); row r's sum is in lanes 2r and 2r + 1. */
INLINE __m512i q8z_step(const struct q8z_block *b, const uint8_t *xu) {
    __m512i p = _mm512_setzero_si512();
    for (int q = 0; q < 4; q++) {
        int64_t v;
        memcpy(&v, xu + (size_t)8 * q, sizeof v);
        p = _mm512_dpbusd_epi32(p, _mm512_set1_epi64(v), b->w[q]);
    }
    return p;
}

/* y for the eight weight rows w0, w0 + w_stride, ... and activation rows 0..np-1
 * (np <= Q8R_PASS) of x. */
INLINE void q8z_pass(enum qkind k, int64_t nb, int np, const uint8_t *w0, size_t w_stride,
                     const uint8_t *x, size_t x_stride, float *y, size_t y_stride,
                     struct q8z_tile *t) {
    const size_t bs = qk_bytes(k);
    const __m256i table = qcodebook(k);
    const int npairs = (np + 1) / 2;
    for (int p = 0; p < npairs; p++)
        for (int i = 0; i < 8; i++)
            t->acc[p][i] = _mm512_setzero_ps();
    /* an odd last row pairs with a row of zero quants and scales, whose lanes are dropped */
    memset(t->dx[np], 0, sizeof t->dx[np]);
    memset(t->xu[np], 0x80, sizeof t->xu[np]);
    for (int64_t b0 = 0; b0 < nb; b0 += Q8R_CHUNK) {
        const int cb = nb - b0 < Q8R_CHUNK ? (int)(nb - b0) : Q8R_CHUNK;
        for (int j = 0; j < np; j++) {
            const uint8_t *xb = x + (size_t)j * x_stride + (size_t)b0 * Q8_BYTES;
            chunk_scales(xb, cb, t->dx[j]);
            for (int i = 0; i < cb; i++) {
                const uint8_t *blk = xb + (size_t)i * Q8_BYTES;
                const __m256i q = _mm256_loadu_si256((const __m256i *)(const void *)(blk + 2));
                _mm256_storeu_si256((__m256i *)(void *)t->xu[j][i],
                                    _mm256_xor_si256(q, _mm256_set1_epi8((char)0x80)));
            }
        }
        for (int i = 0; i < cb; i++) {
            const size_t off = (size_t)(b0 + i) * bs;
            prefetch_next8(w0, w_stride, off);
            q8z_prepare(k, table, w0, w_stride, off, &t->blk[i]);
        }
        for (int i = 0; i < cb; i++) {
            const struct q8z_block *b = &t->blk[i];
            const int lane = (int)((b0 + i) % 8);
            for (int p = 0; p < npairs; p++) {
                const int j0 = 2 * p;
                const int j1 = j0 + 1 < np ? j0 + 1 : np;
                const __m512i isum = _mm512_sub_epi32(
                    q8z_rowsums(q8z_step(b, t->xu[j0][i]), q8z_step(b, t->xu[j1][i])), b->corr);
                const __m512 dx =
                    _mm512_insertf32x8(_mm512_castps256_ps512(_mm256_set1_ps(t->dx[j0][i])),
                                       _mm256_set1_ps(t->dx[j1][i]), 1);
                t->acc[p][lane] = _mm512_fmadd_ps(_mm512_mul_ps(b->dw, dx),
                                                  _mm512_cvtepi32_ps(isum), t->acc[p][lane]);
            }
        }
    }
    for (int p = 0; p < npairs; p++) {
        float v[8 * 16];
        for (int i = 0; i < 8; i++)
            _mm512_storeu_ps(v + (size_t)16 * i, t->acc[p][i]);
        for (int h = 0; h < 2 && 2 * p + h < np; h++)
            for (int r = 0; r < 8; r++)
                y[(size_t)(2 * p + h) * y_stride + (size_t)r] =
                    hsum_column8(v + (size_t)(8 * h + r), 16);
    }
}

#    define Q8_TILE struct q8z_tile
#    define Q8_PASS q8z_pass
#endif

/* The rows in groups of eight by the table's eight-row pass, the last (fewer than eight) by
 * qgemm. */
INLINE void qgemm_rows8(enum qkind k, int64_t n, int64_t nr, int m, float *y, size_t y_stride,
                        const void *w, size_t w_stride, const void *x, size_t x_stride) {
    Q8_TILE t;
    const int64_t nr8 = nr / 8 * 8;
    for (int64_t r0 = 0; r0 < nr8; r0 += 8) {
        const uint8_t *w0 = (const uint8_t *)w + (size_t)r0 * w_stride;
        for (int j0 = 0; j0 < m; j0 += Q8R_PASS)
            Q8_PASS(k, n / 32, m - j0 < Q8R_PASS ? m - j0 : Q8R_PASS, w0, w_stride,
                    (const uint8_t *)x + (size_t)j0 * x_stride, x_stride,
                    y + (size_t)j0 * y_stride + r0, y_stride, &t);
    }
    if (nr8 < nr)
        qgemm(k, n, nr - nr8, m, y + nr8, y_stride, (const uint8_t *)w + (size_t)nr8 * w_stride,
              w_stride, x, x_stride);
}

#if defined(X86_AMX)
#    include "quant/kernels_x86_amx.h" /* amx_qgemm */
#    define Q8_GEMM amx_qgemm
#else
#    define Q8_GEMM qgemm_rows8
#endif

static void gemm_q8_0(int64_t n, int64_t nr, int m, float *y, size_t y_stride, const void *w,
                      size_t w_stride, const void *x, size_t x_stride) {
    Q8_GEMM(QK_Q8_0, n, nr, m, y, y_stride, w, w_stride, x, x_stride);
}

static void gemm_q4_0(int64_t n, int64_t nr, int m, float *y, size_t y_stride, const void *w,
                      size_t w_stride, const void *x, size_t x_stride) {
    Q8_GEMM(QK_Q4_0, n, nr, m, y, y_stride, w, w_stride, x, x_stride);
}

static void gemm_q5_0(int64_t n, int64_t nr, int m, float *y, size_t y_stride, const void *w,
                      size_t w_stride, const void *x, size_t x_stride) {
    Q8_GEMM(QK_Q5_0, n, nr, m, y, y_stride, w, w_stride, x, x_stride);
}

static void gemm_iq4_nl(int64_t n, int64_t nr, int m, float *y, size_t y_stride, const void *w,
                        size_t w_stride, const void *x, size_t x_stride) {
    Q8_GEMM(QK_IQ4_NL, n, nr, m, y, y_stride, w, w_stride, x, x_stride);
}

static void gemm_mxfp4(int64_t n, int64_t nr, int m, float *y, size_t y_stride, const void *w,
                       size_t w_stride, const void *x, size_t x_stride) {
    Q8_GEMM(QK_MXFP4, n, nr, m, y, y_stride, w, w_stride, x, x_stride);
}

#endif
