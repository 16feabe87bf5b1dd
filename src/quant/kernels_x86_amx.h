/*
 * kernels_x86_amx.h - the Q8_0-family prefill tile on AMX-INT8 tile registers (the amx
 * table: Sapphire Rapids and later Xeons). Included by kernels_x86_qprefill.h when X86_AMX is
 * defined, after the 512-bit eight-row tile, which it hands the calls and rows it does not
 * take; everything here is static.
 *
 * DESIGN: one TDPBSSD multiplies a tile of up to 16 activation rows (A: their block's 32 int8
 * quants, read in place from the Q8_0 rows) by 16 weight rows' block (B: 8 rows of 64 bytes,
 * weight row r's quants 4kk..4kk+3 at bytes 4r..4r+3 of row kk) into 16 x 16 exact int32
 * block dots (C). The K dimension is one block (32 quants), because every block has its own
 * scales: each block's dots leave the tile (TILESTORED) and take the eight-row tiles' float
 * steps in 512-bit vectors, lane r = weight row r: ((dw*dx) * isum + acc, blocks k mod 8,
 * then hsum8_ps's tree down the eight). So every output equals vec_dot bit for bit, as the
 * other tiles' do. A pass holds up to AMX_PASS activation rows (two A and two C tiles beside
 * the one B) and packs each weight block once for them.
 *
 * Where the time goes (bench_gemm, Intel Xeon family 6 model 207, m = 32): with the float
 * steps left out a call took about 0.75 of its time, with the packing left out 0.98: the tile
 * loads, multiplies and stores of one block at a time bound it. Issuing the next block's
 * multiply into a second set of B and C tiles before storing this one's made it slower
 * (about 2x), as if each tile instruction waited for the ones before it.
 *
 * Tile state: each call configures the tiles (LDTILECFG; a new configuration only when the
 * pass's row count changes) and releases them at the end (TILERELEASE), so a thread holds no
 * tile state between calls. kernels.c offers the table only after Linux has granted this
 * process the tile data state (arch_prctl ARCH_REQ_XCOMP_PERM).
 */
#ifndef MOEINF_QUANT_KERNELS_X86_AMX_H
#define MOEINF_QUANT_KERNELS_X86_AMX_H

#define AMX_WROWS 16 /* weight rows per pass: the 16 int32 columns of a C tile */
#define AMX_PASS  32 /* activation rows per pass: two A tiles of 16 rows */
/* Fewer activation rows than this go to the 512-bit eight-row tile: a tile multiply costs the
 * same whatever its row count, and with fewer rows the packing is not repaid. Measured with
 * bench_gemm (Intel Xeon family 6 model 207, docs/PERFORMANCE.md 2026-12-06): at 4 rows the
 * tile took 0.81-0.90 of the 512-bit tile's time, except Q5_0 (1.25; its unpacking costs
 * most), which at 8 rows took 0.93. */
#define AMX_MIN_M(k) ((k) == QK_Q5_0 ? 8 : 4)

/* Tile registers: A (activation rows 0-15, 16-31) 0 and 1, B 2, C 4 and 5. (gcc's tile
 * intrinsics paste the number into the instruction's text, so each must be a literal.) */

/* LDTILECFG's 64-byte operand (palette 1). */
struct amx_config {
    uint8_t palette;
    uint8_t start_row;
    uint8_t reserved[14];
    uint16_t colsb[16]; /* bytes per row of each tile */
    uint8_t rows[16];
};

struct amx_tile {
    _Alignas(64) int8_t b[Q8R_CHUNK][8][64]; /* the chunk's weight blocks in B layout */
    int32_t c[AMX_PASS][AMX_WROWS];          /* one block's dots as the C tiles store them */
    float acc[AMX_PASS][8][AMX_WROWS];       /* activation row j, blocks k mod 8; lane r */
    float dw[Q8R_CHUNK][AMX_WROWS];          /* the chunk's weight scales */
    float dx[AMX_PASS][Q8R_CHUNK];           /* and activation scales */
};

/* Loads the configuration of a pass of mp activation rows (1 to AMX_PASS) whose tile
 * multiplies take kbytes quants (32, or 16 for Q6_K's sub-blocks): A tiles (0, 1) and C tiles
 * (4, 5) of 16 rows, the second with what remains, and the B tile (2). */
INLINE void amx_configure(int mp, int kbytes) {
    struct amx_config cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.palette = 1;
    for (int i = 0; 16 * i < mp; i++) {
        const uint8_t rows = (uint8_t)(mp - 16 * i < 16 ? mp - 16 * i : 16);
        cfg.rows[i] = rows; /* A */
        cfg.colsb[i] = (uint16_t)kbytes;
        cfg.rows[4 + i] = rows; /* C */
        cfg.colsb[4 + i] = 64;
    }
    cfg.rows[2] = (uint8_t)(kbytes / 4); /* B */
    cfg.colsb[2] = 64;
    _tile_loadconfig(&cfg);
}

/* 16 rows of 32 int8 quants (v[r]: row r, element order) in B layout: a transpose of 16 rows
 * x 8 dwords. z[i] holds row i in its low half and row i + 8 in its high; two unpack steps
 * gather, in each 128-bit lane, dword e of one lane's four rows (rows 4g..4g+3 of z), and a
 * two-source permute puts the four lanes of rows 0-15 in order. */
INLINE void amx_transpose16(const __m256i v[16], int8_t b[8][64]) {
    __m512i z[8];
    for (int i = 0; i < 8; i++)
        z[i] = _mm512_inserti64x4(_mm512_castsi256_si512(v[i]), v[i + 8], 1);
    __m512i u[2][4]; /* group g (z[4g..4g+3]), element e of each 128-bit lane */
    for (size_t g = 0; g < 2; g++) {
        const __m512i *zg = z + 4 * g;
        const __m512i t0 = _mm512_unpacklo_epi32(zg[0], zg[1]);
        const __m512i t1 = _mm512_unpackhi_epi32(zg[0], zg[1]);
        const __m512i t2 = _mm512_unpacklo_epi32(zg[2], zg[3]);
        const __m512i t3 = _mm512_unpackhi_epi32(zg[2], zg[3]);
        u[g][0] = _mm512_unpacklo_epi64(t0, t2);
        u[g][1] = _mm512_unpackhi_epi64(t0, t2);
        u[g][2] = _mm512_unpacklo_epi64(t1, t3);
        u[g][3] = _mm512_unpackhi_epi64(t1, t3);
    }
    /* lane 0 of u[g][e]: dword e of rows 4g..4g+3; lane 1: dword 4 + e; lanes 2, 3: the same
     * of rows 8 + 4g.. */
    const __m512i lo = _mm512_setr_epi64(0, 1, 8, 9, 4, 5, 12, 13);
    const __m512i hi = _mm512_setr_epi64(2, 3, 10, 11, 6, 7, 14, 15);
    for (int e = 0; e < 4; e++) {
        _mm512_store_si512((void *)b[e], _mm512_permutex2var_epi64(u[0][e], lo, u[1][e]));
        _mm512_store_si512((void *)b[4 + e], _mm512_permutex2var_epi64(u[0][e], hi, u[1][e]));
    }
}

/* Block `off` of the 16 weight rows w0, w0 + w_stride, ... in B layout. */
INLINE void amx_pack(enum qkind k, __m256i table, const uint8_t *w0, size_t w_stride, size_t off,
                     int8_t b[8][64]) {
    __m256i v[16];
    for (int r = 0; r < 16; r++)
        v[r] = qvalues(k, table, w0 + (size_t)r * w_stride + off);
    amx_transpose16(v, b);
}

/* One block's dots: A holds rows 0 .. 16 * na - 1 of the activation quants at xq, B the
 * packed weight block; the C tiles go to t->c. */
INLINE void amx_block(int na, const uint8_t *xq, size_t x_stride, const int8_t b[8][64],
                      struct amx_tile *t) {
    _tile_loadd(2, b, 64);
    _tile_zero(4);
    _tile_loadd(0, xq, (long)x_stride);
    _tile_dpbssd(4, 0, 2);
    if (na > 1) {
        _tile_zero(5);
        _tile_loadd(1, xq + 16 * x_stride, (long)x_stride);
        _tile_dpbssd(5, 1, 2);
    }
    _tile_stored(4, t->c[0], 64);
    if (na > 1) _tile_stored(5, t->c[16], 64);
}

/* Block i of the chunk's dots (t->c) times the scales, into the accumulators of lane `lane`
 * (blocks k mod 8). */
INLINE void amx_scale_add(int mp, int i, int lane, struct amx_tile *t) {
    const __m512 dw = _mm512_loadu_ps(t->dw[i]);
    for (int j = 0; j < mp; j++) {
        const __m512 d = _mm512_mul_ps(dw, _mm512_set1_ps(t->dx[j][i]));
        const __m512 isum = _mm512_cvtepi32_ps(_mm512_loadu_si512(t->c[j]));
        float *a = t->acc[j][lane];
        _mm512_storeu_ps(a, _mm512_fmadd_ps(d, isum, _mm512_loadu_ps(a)));
    }
}

/* ((v0 + v4) + (v2 + v6)) + ((v1 + v5) + (v3 + v7)) lane by lane: hsum8_ps's tree. */
INLINE __m512 amx_sum8(const float a[8][AMX_WROWS]) {
    __m512 v[8];
    for (int k = 0; k < 8; k++)
        v[k] = _mm512_loadu_ps(a[k]);
    return _mm512_add_ps(_mm512_add_ps(_mm512_add_ps(v[0], v[4]), _mm512_add_ps(v[2], v[6])),
                         _mm512_add_ps(_mm512_add_ps(v[1], v[5]), _mm512_add_ps(v[3], v[7])));
}

/* y for the 16 weight rows w0, w0 + w_stride, ... and activation rows 0..mp-1 (mp <=
 * AMX_PASS) of x; the tiles are configured for mp rows. */
INLINE void amx_pass(enum qkind k, int64_t nb, int mp, const uint8_t *w0, size_t w_stride,
                     const uint8_t *x, size_t x_stride, float *y, size_t y_stride,
                     struct amx_tile *t) {
    const size_t bs = qk_bytes(k);
    const __m256i table = qcodebook(k);
    const int na = (mp + 15) / 16;
    for (int j = 0; j < mp; j++)
        for (int i = 0; i < 8; i++)
            _mm512_storeu_ps(t->acc[j][i], _mm512_setzero_ps());
    for (int64_t b0 = 0; b0 < nb; b0 += Q8R_CHUNK) {
        const int cb = nb - b0 < Q8R_CHUNK ? (int)(nb - b0) : Q8R_CHUNK;
        for (int j = 0; j < mp; j++)
            chunk_scales(x + (size_t)j * x_stride + (size_t)b0 * Q8_BYTES, cb, t->dx[j]);
        for (int i = 0; i < cb; i++) {
            const size_t off = (size_t)(b0 + i) * bs;
            for (int r = AMX_WROWS; r < 2 * AMX_WROWS; r++) /* the next pass's rows */
                prefetch_ahead(w0, (size_t)r * w_stride + off);
            amx_pack(k, table, w0, w_stride, off, t->b[i]);
            _mm256_storeu_ps(t->dw[i], rows8_scales(k, w0, w_stride, off));
            _mm256_storeu_ps(t->dw[i] + 8, rows8_scales(k, w0 + 8 * w_stride, w_stride, off));
        }
        for (int i = 0; i < cb; i++) {
            amx_block(na, x + (size_t)(b0 + i) * Q8_BYTES + 2, x_stride, t->b[i], t);
            amx_scale_add(mp, i, (int)((b0 + i) % 8), t);
        }
    }
    for (int j = 0; j < mp; j++)
        _mm512_storeu_ps(y + (size_t)j * y_stride, amx_sum8(t->acc[j]));
}

/* The rows in groups of 16 by the tile passes, the rest (and calls of fewer than AMX_MIN_M(k)
 * activation rows) by qgemm_rows8. */
INLINE void amx_qgemm(enum qkind k, int64_t n, int64_t nr, int m, float *y, size_t y_stride,
                      const void *w, size_t w_stride, const void *x, size_t x_stride) {
    const int64_t nr16 = m < AMX_MIN_M(k) ? 0 : nr / AMX_WROWS * AMX_WROWS;
    if (nr16 > 0) {
        struct amx_tile t;
        int configured = 0; /* the row count of the loaded configuration */
        for (int64_t r0 = 0; r0 < nr16; r0 += AMX_WROWS) {
            const uint8_t *w0 = (const uint8_t *)w + (size_t)r0 * w_stride;
            for (int j0 = 0; j0 < m; j0 += AMX_PASS) {
                const int mp = m - j0 < AMX_PASS ? m - j0 : AMX_PASS;
                if (mp != configured) amx_configure(mp, 32);
                configured = mp;
                amx_pass(k, n / 32, mp, w0, w_stride, (const uint8_t *)x + (size_t)j0 * x_stride,
                         x_stride, y + (size_t)j0 * y_stride + r0, y_stride, &t);
            }
        }
        _tile_release();
    }
    if (nr16 < nr)
        qgemm_rows8(k, n, nr - nr16, m, y + nr16, y_stride,
                    (const uint8_t *)w + (size_t)nr16 * w_stride, w_stride, x, x_stride);
}

#endif
