/*
 * kernels_x86_amxk.h - the K-quant prefill tile (Q4_K, Q5_K, Q6_K weights x Q8_K activations)
 * on AMX-INT8 tile registers, for the amx table. Included by kernels_x86_kprefill.h when
 * X86_AMX is defined, after the 512-bit K-quant tile, which it hands the calls and rows it
 * does not take; it uses kernels_x86_amx.h's tile configuration, transpose and sums.
 *
 * DESIGN: a super-block's packed quant bytes are transposed into B layout once per pass (16
 * weight rows) and unpacked there into signed int8 values (Q6_K's minus 32, so no offset term
 * is left); its scales and mins are transposed into one vector per sub-block. Each sub-block (32
 * quants; Q6_K 16) is one TDPBSSD of up to 16 activation rows x 16 weight rows, its exact int32
 * dots stored (TILESTORED) per sub-block; the sum of a super-block over its sub-blocks, scale x
 * dot, is then formed in int32 (vpmulld) with lane r = weight row r: the same integer isum as the
 * scalar code's, whatever the order. The mins' term (Q4_K, Q5_K) sums min x the activation's pair
 * of 16-element sums with vpdpwssd. The float steps are quant.h's, lane by lane: A[b % 8] = fma(d_w
 * * d_x, isum, A[b % 8]), then fma(-(dmin_w * d_x), imin, ...), and hsum8's tree at the end, so
 * every output equals vec_dot bit for bit.
 */
#ifndef MOEINF_QUANT_KERNELS_X86_AMXK_H
#define MOEINF_QUANT_KERNELS_X86_AMXK_H

/* Fewer activation rows than this go to the 512-bit tile: the unpacking per super-block and
 * pass is repaid from 4 rows on for Q4_K, 5 for Q5_K; Q6_K's 16 sub-blocks take twice the tile
 * multiplies and stores, and its tile beat the 512-bit one only from about 16 rows
 * (bench_gemm, Intel Xeon family 6 model 207, docs/PERFORMANCE.md 2026-12-06). */
#define AMXK_MIN_M(k) ((k) == AMXK_Q6_K ? 16 : (k) == AMXK_Q5_K ? 5 : 4)

enum amxk_kind {
    AMXK_Q4_K,
    AMXK_Q5_K,
    AMXK_Q6_K
};

struct amxk_tile {
    _Alignas(64) int8_t b[8][8][64];    /* the super-block's 8 groups of 32 quants, B layout */
    int32_t c[16][16][AMX_WROWS];       /* one A tile's dots: [sub-block][activation row] */
    float acc[AMX_PASS][8][AMX_WROWS];  /* activation row j, super-blocks k mod 8; lane r */
    int32_t sc[16][AMX_WROWS];          /* sub-block scales, lane r = weight row r */
    int32_t mins[8][AMX_WROWS];         /* Q4_K/Q5_K: min of sub-block t twice, as int16 */
    float dw[AMX_WROWS];
    float dmin[AMX_WROWS];
};

/* The 16 x 16 bytes m[r][s] as columns: m[s] byte r (four unpack steps, bytes to 64-bit
 * units: each doubles the run of rows that sit together for one column). */
INLINE void amxk_transpose_bytes(__m128i m[16]) {
    __m128i a[16]; /* a[8h + i]: rows 2i, 2i + 1 in 16-bit units, columns 8h.. */
    for (size_t i = 0; i < 8; i++) {
        a[i] = _mm_unpacklo_epi8(m[2 * i], m[2 * i + 1]);
        a[8 + i] = _mm_unpackhi_epi8(m[2 * i], m[2 * i + 1]);
    }
    __m128i b[16]; /* b[8h + 4q + k]: rows 4k..4k+3 in 32-bit units, columns 8h + 4q.. */
    for (size_t h = 0; h < 2; h++)
        for (size_t k = 0; k < 4; k++) {
            b[8 * h + k] = _mm_unpacklo_epi16(a[8 * h + 2 * k], a[8 * h + 2 * k + 1]);
            b[8 * h + 4 + k] = _mm_unpackhi_epi16(a[8 * h + 2 * k], a[8 * h + 2 * k + 1]);
        }
    for (size_t base = 0; base < 16; base += 4) {
        /* c[2p + h8]: rows 8 h8 .. 8 h8 + 7 in 64-bit units, columns base + 2p.. */
        __m128i c[4];
        for (size_t h8 = 0; h8 < 2; h8++) {
            c[h8] = _mm_unpacklo_epi32(b[base + 2 * h8], b[base + 2 * h8 + 1]);
            c[2 + h8] = _mm_unpackhi_epi32(b[base + 2 * h8], b[base + 2 * h8 + 1]);
        }
        for (size_t p = 0; p < 2; p++) {
            m[base + 2 * p] = _mm_unpacklo_epi64(c[2 * p], c[2 * p + 1]);
            m[base + 2 * p + 1] = _mm_unpackhi_epi64(c[2 * p], c[2 * p + 1]);
        }
    }
}

/* 32 bytes at each of the 16 rows p, p + stride, ... in B layout (as raw bytes). */
INLINE void amxk_transpose_rows(const uint8_t *p, size_t stride, int8_t b[8][64]) {
    __m256i v[AMX_WROWS];
    for (int r = 0; r < AMX_WROWS; r++)
        v[r] = _mm256_loadu_si256((const __m256i *)(const void *)(p + (size_t)r * stride));
    amx_transpose16(v, b);
}

INLINE __m512i amxk_load(const int8_t row[64]) {
    return _mm512_load_si512((const void *)row);
}

INLINE __m512i amxk_bits(__m512i v, int shift, int mask) {
    return _mm512_and_si512(_mm512_srl_epi16(v, _mm_cvtsi32_si128(shift)),
                            _mm512_set1_epi8((char)mask));
}

/* Q4_K (five = false) or Q5_K quants of super-block `off` of the 16 rows in B layout. The packed
 * bytes are transposed as they are: a dword of quant bytes holds four consecutive quants of
 * two sub-blocks (low and high nibbles), and Q5_K's qh bytes the fifth bits of the same four
 * elements, so the nibbles are taken apart in B layout. */
INLINE void amxk_quants_45(bool five, const uint8_t *w0, size_t w_stride, size_t off,
                           struct amxk_tile *t) {
    _Alignas(64) int8_t raw[8][64];
    _Alignas(64) int8_t qh[8][64];
    if (five) amxk_transpose_rows(w0 + off + 16, w_stride, qh);
    for (size_t c = 0; c < 4; c++) {
        amxk_transpose_rows(w0 + off + (five ? 48 : 16) + 32 * c, w_stride, raw);
        for (int kk = 0; kk < 8; kk++) {
            const __m512i v = amxk_load(raw[kk]);
            __m512i lo = _mm512_and_si512(v, _mm512_set1_epi8(0x0f));
            __m512i hi = amxk_bits(v, 4, 0x0f);
            if (five) {
                const __m512i h = amxk_load(qh[kk]);
                lo = _mm512_or_si512(lo, _mm512_slli_epi16(amxk_bits(h, (int)(2 * c), 1), 4));
                hi = _mm512_or_si512(hi, _mm512_slli_epi16(amxk_bits(h, (int)(2 * c + 1), 1), 4));
            }
            _mm512_store_si512((void *)t->b[2 * c][kk], lo);
            _mm512_store_si512((void *)t->b[2 * c + 1][kk], hi);
        }
    }
}

/* Q6_K quants (minus 32) of super-block `off` of the 16 rows in B layout: half h's groups of
 * 32 come from ql bytes 0-31 (low nibbles: group 0, high: group 2) and 32-63 (groups 1, 3) and
 * the qh bytes 0-31 (bits 2g, 2g + 1 for group g), element for element. */
INLINE void amxk_quants_6(const uint8_t *w0, size_t w_stride, size_t off, struct amxk_tile *t) {
    _Alignas(64) int8_t l0[8][64];
    _Alignas(64) int8_t l1[8][64];
    _Alignas(64) int8_t qh[8][64];
    const __m512i m32 = _mm512_set1_epi8(32);
    for (int h = 0; h < 2; h++) {
        amxk_transpose_rows(w0 + off + 64 * (size_t)h, w_stride, l0);
        amxk_transpose_rows(w0 + off + 64 * (size_t)h + 32, w_stride, l1);
        amxk_transpose_rows(w0 + off + 128 + 32 * (size_t)h, w_stride, qh);
        for (int kk = 0; kk < 8; kk++) {
            const __m512i a0 = amxk_load(l0[kk]);
            const __m512i a1 = amxk_load(l1[kk]);
            const __m512i hh = amxk_load(qh[kk]);
            const __m512i low[4] = {_mm512_and_si512(a0, _mm512_set1_epi8(0x0f)),
                                    _mm512_and_si512(a1, _mm512_set1_epi8(0x0f)),
                                    amxk_bits(a0, 4, 0x0f), amxk_bits(a1, 4, 0x0f)};
            for (int g = 0; g < 4; g++) {
                const __m512i top = _mm512_slli_epi16(amxk_bits(hh, 2 * g, 3), 4);
                _mm512_store_si512((void *)t->b[4 * h + g][kk],
                                   _mm512_sub_epi8(_mm512_or_si512(low[g], top), m32));
            }
        }
    }
}

/* Super-block `off` of the 16 weight rows w0, w0 + w_stride, ...: quants, scales, mins. */
INLINE void amxk_prepare(enum amxk_kind k, const uint8_t *w0, size_t w_stride, size_t off,
                         struct amxk_tile *t) {
    __m128i m[AMX_WROWS]; /* row r: Q6_K its 16 scales; Q4_K/Q5_K its 8 scales, 8 mins */
    for (int r = 0; r < AMX_WROWS; r++) {
        const uint8_t *wb = w0 + (size_t)r * w_stride + off;
        if (k == AMXK_Q6_K) {
            m[r] = _mm_loadu_si128((const __m128i *)(const void *)(wb + 192));
            t->dw[r] = _cvtsh_ss(load_u16(wb + 208));
        } else {
            m[r] = k4_scales_mins(wb + 4);
            t->dw[r] = _cvtsh_ss(load_u16(wb));
            t->dmin[r] = _cvtsh_ss(load_u16(wb + 2));
        }
    }
    amxk_transpose_bytes(m); /* m[s]: byte s of every row */
    if (k == AMXK_Q6_K) {
        for (int s = 0; s < 16; s++)
            _mm512_storeu_si512((void *)t->sc[s], _mm512_cvtepi8_epi32(m[s]));
        amxk_quants_6(w0, w_stride, off, t);
    } else {
        for (int s = 0; s < 8; s++) {
            _mm512_storeu_si512((void *)t->sc[s], _mm512_cvtepu8_epi32(m[s]));
            const __m512i mn = _mm512_cvtepu8_epi32(m[8 + s]);
            _mm512_storeu_si512((void *)t->mins[s], _mm512_or_si512(mn, _mm512_slli_epi32(mn, 16)));
        }
        amxk_quants_45(k == AMXK_Q5_K, w0, w_stride, off, t);
    }
}

/* The dots of sub-block s (kbytes quants) for A tile `a` (0: rows 0-15 at xq; 1: rows 16..
 * at xq + 16 x_stride) into t->c[s]. */
INLINE void amxk_sub(int a, int s, int kbytes, const uint8_t *xq, size_t x_stride,
                     struct amxk_tile *t) {
    const int per_group = 32 / kbytes; /* sub-blocks per 32-quant group */
    _tile_loadd(2, t->b[s / per_group][(size_t)(s % per_group) * (size_t)(kbytes / 4)], 64);
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
            memcpy(&pair, xb + 260 + 4 * (size_t)p, sizeof pair);
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
 * rows 0..mp-1 (mp <= AMX_PASS) of x; the tiles are configured for mp rows. */
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
            for (int j0 = 0; j0 < m; j0 += AMX_PASS) {
                const int mp = m - j0 < AMX_PASS ? m - j0 : AMX_PASS;
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
