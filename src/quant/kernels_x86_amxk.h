/*
 * kernels_x86_amxk.h - the K-quant prefill tile (Q4_K, Q5_K, Q6_K weights x Q8_K activations)
 * on AMX-INT8 tile registers, for the amx table. Included by kernels_x86_kprefill.h when
 * X86_AMX is defined, after the 512-bit K-quant tile, which it hands the calls and rows it
 * does not take; it uses kernels_x86_amx.h's tile configuration, transpose and sums.
 *
 * DESIGN: a super-block's quants are unpacked once per pass (16 weight rows) into signed int8
 * values (Q6_K's minus 32, so no offset term is left) and transposed into B layout, 32 quants
 * at a time. Each sub-block (32 quants; Q6_K 16) is one TDPBSSD of up to 16 activation rows x
 * 16 weight rows, its exact int32 dots stored (TILESTORED) per sub-block; the sum of a
 * super-block over its sub-blocks, scale x dot, is then formed in int32 (vpmulld) with lane r
 * = weight row r: the same integer isum as the scalar code's, whatever the order. The mins'
 * term (Q4_K, Q5_K) sums min x the activation's pair of 16-element sums with vpdpwssd. The
 * float steps are quant.h's, lane by lane: A[b % 8] = fma(d_w * d_x, isum, A[b % 8]), then
 * fma(-(dmin_w * d_x), imin, ...), and hsum8's tree at the end, so every output equals vec_dot
 * bit for bit.
 */
#ifndef MOEINF_QUANT_KERNELS_X86_AMXK_H
#define MOEINF_QUANT_KERNELS_X86_AMXK_H

#define AMXK_PASS 32 /* activation rows per pass: two A tiles */
/* Fewer activation rows than this go to the 512-bit tile: the unpacking per super-block and
 * pass is repaid from 5 rows on for Q4_K and Q5_K, 8 for Q6_K, whose sub-blocks take twice
 * the tile multiplies (bench_gemm, docs/PERFORMANCE.md 2026-12-06). */
#define AMXK_MIN_M(k) ((k) == AMXK_Q6_K ? 8 : 5)

enum amxk_kind {
    AMXK_Q4_K,
    AMXK_Q5_K,
    AMXK_Q6_K
};

struct amxk_tile {
    _Alignas(64) int8_t b[8][8][64];    /* the super-block's 8 groups of 32 quants, B layout */
    int32_t c[16][16][AMX_WROWS];       /* one A tile's dots: [sub-block][activation row] */
    float acc[AMXK_PASS][8][AMX_WROWS]; /* activation row j, super-blocks k mod 8; lane r */
    int32_t sc[16][AMX_WROWS];          /* sub-block scales, lane r = weight row r */
    int32_t mins[8][AMX_WROWS];         /* Q4_K/Q5_K: min of sub-block t twice, as int16 */
    float dw[AMX_WROWS];
    float dmin[AMX_WROWS];
};

/* Super-block `off` of the 16 weight rows w0, w0 + w_stride, ...: quants, scales, mins. */
INLINE void amxk_prepare(enum amxk_kind k, const uint8_t *w0, size_t w_stride, size_t off,
                         struct amxk_tile *t) {
    __m256i q[AMX_WROWS][8]; /* row r, elements 32g .. 32g + 31 */
    for (int r = 0; r < AMX_WROWS; r++) {
        const uint8_t *wb = w0 + (size_t)r * w_stride + off;
        if (k == AMXK_Q6_K) {
            k6_unpack_half(wb, 0, q[r]);
            k6_unpack_half(wb, 1, q[r] + 4);
            for (int g = 0; g < 8; g++)
                q[r][g] = _mm256_sub_epi8(q[r][g], _mm256_set1_epi8(32));
            for (int s = 0; s < 16; s++)
                t->sc[s][r] = (int8_t)wb[192 + s];
            t->dw[r] = _cvtsh_ss(load_u16(wb + 208));
        } else {
            k45_unpack(wb, k == AMXK_Q5_K, q[r]);
            uint8_t sm[16]; /* 8 scales, 8 mins */
            _mm_storeu_si128((__m128i *)(void *)sm, k4_scales_mins(wb + 4));
            for (int s = 0; s < 8; s++) {
                t->sc[s][r] = sm[s];
                t->mins[s][r] = sm[8 + s] | sm[8 + s] << 16;
            }
            t->dw[r] = _cvtsh_ss(load_u16(wb));
            t->dmin[r] = _cvtsh_ss(load_u16(wb + 2));
        }
    }
    for (int g = 0; g < 8; g++) {
        __m256i v[AMX_WROWS];
        for (int r = 0; r < AMX_WROWS; r++)
            v[r] = q[r][g];
        amx_transpose16(v, t->b[g]);
    }
}

/* The dots of sub-block s (kbytes quants) for A tile `a` (0: rows 0-15 at xq; 1: rows 16..
 * at xq + 16 x_stride) into t->c[s]. */
INLINE void amxk_sub(int a, int s, int kbytes, const uint8_t *xq, size_t x_stride,
                     struct amxk_tile *t) {
    const int per_group = 32 / kbytes; /* sub-blocks per 32-quant group */
    _tile_loadd(2, t->b[s / per_group][(s % per_group) * (kbytes / 4)], 64);
    if (a == 0) {
        _tile_zero(4);
        _tile_loadd(0, xq + (size_t)s * kbytes, (long)x_stride);
        _tile_dpbssd(4, 0, 2);
        _tile_stored(4, t->c[s], 64);
    } else {
        _tile_zero(5);
        _tile_loadd(1, xq + 16 * x_stride + (size_t)s * kbytes, (long)x_stride);
        _tile_dpbssd(5, 1, 2);
        _tile_stored(5, t->c[s], 64);
    }
}

/* Super-block b's terms for activation row j (its block at xb; its dots in t->c[.][i]) into
 * the accumulators of lane b % 8. */
INLINE void amxk_row(enum amxk_kind k, int nsub, int i, const uint8_t *xb, float *a,
                     const struct amxk_tile *t) {
    __m512i isum = _mm512_setzero_si512();
    for (int s = 0; s < nsub; s++)
        isum = _mm512_add_epi32(
            isum, _mm512_mullo_epi32(_mm512_loadu_si512(t->c[s][i]), _mm512_loadu_si512(t->sc[s])));
    float dx;
    memcpy(&dx, xb, sizeof dx);
    const __m512 vdx = _mm512_set1_ps(dx);
    __m512 acc = _mm512_fmadd_ps(_mm512_mul_ps(_mm512_loadu_ps(t->dw), vdx),
                                 _mm512_cvtepi32_ps(isum), _mm512_loadu_ps(a));
    if (k != AMXK_Q6_K) {
        __m512i imin = _mm512_setzero_si512();
        for (int p = 0; p < 8; p++) {
            int32_t pair; /* the activation's sums of elements 32p..32p+15 and 32p+16..32p+31 */
            memcpy(&pair, xb + 260 + 4 * p, sizeof pair);
            imin =
                _mm512_dpwssd_epi32(imin, _mm512_set1_epi32(pair), _mm512_loadu_si512(t->mins[p]));
        }
        const __m512 dm =
            _mm512_xor_ps(_mm512_mul_ps(_mm512_loadu_ps(t->dmin), vdx), _mm512_set1_ps(-0.0f));
        acc = _mm512_fmadd_ps(dm, _mm512_cvtepi32_ps(imin), acc);
    }
    _mm512_storeu_ps(a, acc);
}

/* y for the 16 weight rows w0, w0 + w_stride, ... (wbytes per super-block) and activation
 * rows 0..mp-1 (mp <= AMXK_PASS) of x; the tiles are configured for mp rows. */
INLINE void amxk_pass(enum amxk_kind k, size_t wbytes, int64_t nsb, int mp, const uint8_t *w0,
                      size_t w_stride, const uint8_t *x, size_t x_stride, float *y, size_t y_stride,
                      struct amxk_tile *t) {
    const int kbytes = k == AMXK_Q6_K ? 16 : 32;
    const int nsub = 256 / kbytes;
    for (int j = 0; j < mp; j++)
        for (int i = 0; i < 8; i++)
            _mm512_storeu_ps(t->acc[j][i], _mm512_setzero_ps());
    for (int64_t b = 0; b < nsb; b++) {
        const size_t off = (size_t)b * wbytes;
        for (int r = AMX_WROWS; r < 2 * AMX_WROWS; r++) /* the next pass's rows */
            prefetch_block(w0, (size_t)r * w_stride + off, wbytes);
        amxk_prepare(k, w0, w_stride, off, t);
        const size_t xoff = (size_t)b * QK_K_BYTES_X;
        for (int a = 0; 16 * a < mp; a++) {
            for (int s = 0; s < nsub; s++)
                amxk_sub(a, s, kbytes, x + xoff + 4, x_stride, t);
            const int rows = mp - 16 * a < 16 ? mp - 16 * a : 16;
            for (int i = 0; i < rows; i++) {
                const int j = 16 * a + i;
                amxk_row(k, nsub, i, x + (size_t)j * x_stride + xoff, t->acc[j][b % 8], t);
            }
        }
    }
    for (int j = 0; j < mp; j++)
        _mm512_storeu_ps(y + (size_t)j * y_stride, amx_sum8(t->acc[j]));
}

/* The rows in groups of 16 by the tile passes, the rest (and calls of fewer than AMXK_MIN_M(k)
 * activation rows) by the 512-bit tile `rest`. */
INLINE void amxk_gemm(enum amxk_kind k, size_t wbytes, int64_t n, int64_t nr, int m, float *y,
                      size_t y_stride, const void *w, size_t w_stride, const void *x,
                      size_t x_stride, moeinf_gemm_fn rest) {
    const int64_t nr16 = m < AMXK_MIN_M(k) ? 0 : nr / AMX_WROWS * AMX_WROWS;
    if (nr16 > 0) {
        struct amxk_tile t;
        int configured = 0; /* the row count of the loaded configuration */
        for (int64_t r0 = 0; r0 < nr16; r0 += AMX_WROWS) {
            const uint8_t *w0 = (const uint8_t *)w + (size_t)r0 * w_stride;
            for (int j0 = 0; j0 < m; j0 += AMXK_PASS) {
                const int mp = m - j0 < AMXK_PASS ? m - j0 : AMXK_PASS;
                if (mp != configured) amx_configure(mp, k == AMXK_Q6_K ? 16 : 32);
                configured = mp;
                amxk_pass(k, wbytes, n / 256, mp, w0, w_stride,
                          (const uint8_t *)x + (size_t)j0 * x_stride, x_stride,
                          y + (size_t)j0 * y_stride + r0, y_stride, &t);
            }
        }
        _tile_release();
    }
    if (nr16 < nr)
        rest(n, nr - nr16, m, y + nr16, y_stride, (const uint8_t *)w + (size_t)nr16 * w_stride,
             w_stride, x, x_stride);
}

#endif
