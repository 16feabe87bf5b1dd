/*
 * kernels_x86_iqrows.h - the decode kernels (vec_dot_rows: many weight rows against one
 * activation row) of the codebook types: MXFP4 and IQ4_NL against Q8_0 activations, IQ4_XS
 * against Q8_K. Included by kernels_x86.h in its codebook section, after the Q4_0 rows kernel
 * (whose prepared activation side and driver the first two share) and the K-quant eight-row
 * driver (which IQ4_XS uses).
 *
 * DESIGN, MXFP4 and IQ4_NL: as the Q4_0 rows kernel, with one vpshufb per 32 indices. The
 * activation row is prepared once per call in Q4_0's pair layout (struct xq4_group), and the
 * codebook is shifted by an offset c so that its values read as unsigned bytes for
 * vpmaddubsw / vpdpbusd (unsigned x signed): dot(v, x) = dot(v + c, x) - c * sum(x), with
 * c * sum(x) per block computed once in the prepared row (prep_pairs). The offsets:
 *   - MXFP4 (doubled E2M1 values, -12..12): c = 12, so v + c <= 24 and a vpmaddubsw pair is at
 *     most 2 * 24 * 128; four such products of a lane (low and high nibbles added) and then
 *     one vphaddw (eight) stay below 32767, so the AVX2 table reduces in int16 as far as that;
 *   - IQ4_NL (-127..113): with VNNI, c = 128 (v + c <= 241: vpdpbusd adds its products in
 *     int32 without saturating). vpmaddubsw pairs of 241 * 127 would saturate, so the AVX2
 *     table uses the sign trick of dot_i8 instead (c = 0: |v| <= 127, x with v's sign).
 * Each group of 8 blocks ends as Q4_0's does: the 8 exact block sums in PERM4 lane order,
 * minus c * sum(x), times d_w * d_x (MXFP4's d_w is its E8M0 scale halved, gathered), one fma
 * into A[b % 8] in permuted lanes, hsum8_perm4 at the end: quant.h's order, bit for bit.
 *
 * DESIGN, IQ4_XS: super-blocks of 256 as the K-quants: the eight-row driver of
 * kernels_x86_krows.h (rows far apart, one activation block loaded for all, the eight rows'
 * integer sums reduced together and the float step in one vector, lane k = row k); per row
 * the codebook values meet the activation with the sign trick (vpmaddubsw pairs <= 2 * 127 *
 * 128), and vpmaddwd (VNNI: vpdpwssd) applies the sub-block scale, an exact int32 sum.
 */
#ifndef MOEINF_QUANT_KERNELS_X86_IQROWS_H
#define MOEINF_QUANT_KERNELS_X86_IQROWS_H

/* ---- MXFP4 and IQ4_NL ---------------------------------------------------------------------- */

enum cbkind {
    CB_MXFP4,
    CB_IQ4_NL
};

#if defined(X86_VNNI)
#    define CB_IQ4NL_OFFSET 128
#else
#    define CB_IQ4NL_OFFSET 0 /* the sign trick */
#endif

INLINE int cb_offset(enum cbkind k) {
    return k == CB_MXFP4 ? 12 : CB_IQ4NL_OFFSET;
}

INLINE size_t cb_bytes(enum cbkind k) {
    return k == CB_MXFP4 ? MXFP4_BYTES : IQ4NL_BYTES;
}

/* Whether the pair sums come as int32 lanes (else int16: MXFP4 without VNNI). */
INLINE bool cb_int32(enum cbkind k) {
#if defined(X86_VNNI)
    (void)k;
    return true;
#else
    return k != CB_MXFP4;
#endif
}

/* The codebook plus the offset, in both 128-bit lanes (bytes wrap: -127 + 128 is 1). */
INLINE __m256i cb_table(enum cbkind k) {
    const __m256i t = iq_codebook(k == CB_MXFP4 ? moeinf_kvalues_mxfp4 : moeinf_kvalues_iq4nl);
    return _mm256_add_epi8(t, _mm256_set1_epi8((char)cb_offset(k)));
}

/* Blocks A and B (at wa, wa + bytes) against their prepared activation pair: [A | B] lanes,
 * 4 int32 each or (cb_int32 false) 8 int16 each, that sum to the two offset block dots. */
INLINE __m256i cb_pair(enum cbkind k, __m256i table, const uint8_t *wa, const uint8_t xq[2][32]) {
    const size_t bs = cb_bytes(k);
    const size_t qo = k == CB_MXFP4 ? 1 : 2; /* the indices follow the scale */
    const __m256i m4 = _mm256_set1_epi8(0x0f);
    const __m256i v = _mm256_inserti128_si256(
        _mm256_castsi128_si256(_mm_loadu_si128((const __m128i *)(const void *)(wa + qo))),
        _mm_loadu_si128((const __m128i *)(const void *)(wa + bs + qo)), 1);
    const __m256i lo = _mm256_shuffle_epi8(table, _mm256_and_si256(v, m4));
    const __m256i hi = _mm256_shuffle_epi8(table, _mm256_and_si256(_mm256_srli_epi16(v, 4), m4));
    const __m256i x0 = _mm256_load_si256((const __m256i *)(const void *)xq[0]);
    const __m256i x1 = _mm256_load_si256((const __m256i *)(const void *)xq[1]);
    if (cb_offset(k) == 0) return _mm256_add_epi32(dot_i8(lo, x0), dot_i8(hi, x1));
#if defined(X86_VNNI)
    return _mm256_dpbusd_epi32(_mm256_dpbusd_epi32(_mm256_setzero_si256(), lo, x0), hi, x1);
#else
    return _mm256_add_epi16(_mm256_maddubs_epi16(lo, x0), _mm256_maddubs_epi16(hi, x1));
#endif
}

/* acc + one group of 8 blocks of a row at wg against its prepared activation group. */
INLINE __m256 cb_group(enum cbkind k, const uint8_t *wg, const struct xq4_group *xg, __m256 acc) {
    const size_t bs = cb_bytes(k);
    const __m256i table = cb_table(k);
    const __m256i p01 = cb_pair(k, table, wg, xg->q[0]);
    const __m256i p23 = cb_pair(k, table, wg + 2 * bs, xg->q[1]);
    const __m256i p45 = cb_pair(k, table, wg + 4 * bs, xg->q[2]);
    const __m256i p67 = cb_pair(k, table, wg + 6 * bs, xg->q[3]);
    /* [b0 b0 b2 b2 | b1 b1 b3 b3] and [b4 b4 b6 b6 | b5 b5 b7 b7], then PERM4 order */
    __m256i h0;
    __m256i h1;
    if (cb_int32(k)) {
        h0 = _mm256_hadd_epi32(p01, p23);
        h1 = _mm256_hadd_epi32(p45, p67);
    } else {
        const __m256i ones = _mm256_set1_epi16(1);
        h0 = _mm256_madd_epi16(_mm256_hadd_epi16(p01, p23), ones);
        h1 = _mm256_madd_epi16(_mm256_hadd_epi16(p45, p67), ones);
    }
    __m256i isum = _mm256_hadd_epi32(h0, h1);
    if (cb_offset(k) != 0)
        isum = _mm256_sub_epi32(isum, _mm256_loadu_si256((const __m256i *)(const void *)xg->s8));
    const __m256 dw = k == CB_MXFP4
                          ? iq_e8m0_half8(wg, _mm256_setr_epi32(0, 34, 68, 102, 17, 51, 85, 119))
                          : load_scales8_perm4(wg, IQ4NL_BYTES);
    const __m256 d = _mm256_mul_ps(dw, _mm256_loadu_ps(xg->d));
    return _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(isum), acc);
}

/* acc + the nbk blocks of row w (a last partial group from a zero-padded copy: zero indices
 * and scales, against zero activation quants, sums and scales, add fma(0, 0, A) = A). */
INLINE __m256 cb_row(enum cbkind k, const uint8_t *w, const struct xq4_group *xg, int64_t nbk,
                     __m256 acc) {
    const size_t bs = cb_bytes(k);
    const int64_t ng = nbk / 8;
    for (int64_t g = 0; g < ng; g++)
        acc = cb_group(k, w + (size_t)g * 8 * bs, &xg[g], acc);
    if (nbk % 8) {
        uint8_t wt[8 * IQ4NL_BYTES] = {0};
        memcpy(wt, w + (size_t)ng * 8 * bs, (size_t)(nbk % 8) * bs);
        acc = cb_group(k, wt, &xg[ng], acc);
    }
    return acc;
}

/* Rows read side by side and the software prefetch distance of the decode driver: 3 and 4
 * streams measured within the noise of each other on MXFP4 rows of 2880 from DRAM, 8 slower;
 * the prefetch measured about 10 % faster than none (docs/PERFORMANCE.md, 2026-12-04, MXFP4,
 * IQ4_NL and IQ4_XS decode kernels). */
#define CB_STREAMS 4
#define CB_PF      K_PREFETCH

/* The driver: the activation row prepared once (in chunks of XCHUNK groups for long rows, as
 * ROWS_KERNEL), then CB_STREAMS rows far apart (k * q + i) side by side, group by group, with
 * software prefetch CB_PF bytes ahead in each (as the K-quant rows kernels). */
#define CB_ROWS_KERNEL(t, kind)                                                                    \
    static void vec_dot_rows_##t(int64_t n, int64_t nr, float *s, const void *w, size_t w_stride,  \
                                 const void *x) {                                                  \
        const uint8_t *wb = w;                                                                     \
        const uint8_t *xb = x;                                                                     \
        const size_t bs = cb_bytes(kind);                                                          \
        const int64_t nb = n / 32;                                                                 \
        const int64_t chunk = (int64_t)XCHUNK * 8; /* blocks */                                    \
        struct xq4_group xg[XCHUNK];                                                               \
        if (nb <= chunk) {                                                                         \
            prep_pairs(xg, xb, nb, cb_offset(kind));                                               \
            const int64_t q = nr / CB_STREAMS;                                                     \
            const int64_t ng = nb / 8;                                                             \
            for (int64_t i = 0; i < q; i++) {                                                      \
                __m256 acc[CB_STREAMS];                                                            \
                const uint8_t *wr[CB_STREAMS];                                                     \
                for (int k = 0; k < CB_STREAMS; k++) {                                             \
                    acc[k] = _mm256_setzero_ps();                                                  \
                    wr[k] = wb + (size_t)(k * q + i) * w_stride;                                   \
                }                                                                                  \
                for (int64_t g = 0; g < ng; g++)                                                   \
                    for (int k = 0; k < CB_STREAMS; k++) {                                         \
                        const uint8_t *wg = wr[k] + (size_t)g * 8 * bs;                            \
                        prefetch_block(wg, CB_PF, 8 * bs);                                         \
                        acc[k] = cb_group(kind, wg, &xg[g], acc[k]);                               \
                    }                                                                              \
                for (int k = 0; k < CB_STREAMS; k++) /* the partial group, if any */               \
                    s[k * q + i] = hsum8_perm4(                                                    \
                        cb_row(kind, wr[k] + (size_t)ng * 8 * bs, &xg[ng], nb % 8, acc[k]));       \
            }                                                                                      \
            for (int64_t r = CB_STREAMS * q; r < nr; r++)                                          \
                s[r] = hsum8_perm4(                                                                \
                    cb_row(kind, wb + (size_t)r * w_stride, xg, nb, _mm256_setzero_ps()));         \
            return;                                                                                \
        }                                                                                          \
        for (int64_t r0 = 0; r0 < nr; r0 += XCHUNK_ROWS) {                                         \
            const int64_t rn = nr - r0 < XCHUNK_ROWS ? nr - r0 : XCHUNK_ROWS;                      \
            __m256 acc[XCHUNK_ROWS];                                                               \
            for (int64_t r = 0; r < rn; r++)                                                       \
                acc[r] = _mm256_setzero_ps();                                                      \
            for (int64_t c0 = 0; c0 < nb; c0 += chunk) {                                           \
                const int64_t cb = nb - c0 < chunk ? nb - c0 : chunk;                              \
                prep_pairs(xg, xb + (size_t)c0 * Q8_BYTES, cb, cb_offset(kind));                   \
                for (int64_t r = 0; r < rn; r++)                                                   \
                    acc[r] = cb_row(kind, wb + (size_t)(r0 + r) * w_stride + (size_t)c0 * bs, xg,  \
                                    cb, acc[r]);                                                   \
            }                                                                                      \
            for (int64_t r = 0; r < rn; r++)                                                       \
                s[r0 + r] = hsum8_perm4(acc[r]);                                                   \
        }                                                                                          \
    }

CB_ROWS_KERNEL(mxfp4, CB_MXFP4)
CB_ROWS_KERNEL(iq4_nl, CB_IQ4_NL)

/* ---- IQ4_XS -------------------------------------------------------------------------------- */

/* One super-block of 8 rows into a (lane k = row k), as iq4_xs_step per row. */
INLINE void iqx_rows_step(const uint8_t *const wr[KR_ROWS], size_t boff, const uint8_t *xb,
                          __m256 *a) {
    __m256i acc[KR_ROWS];
    for (int k = 0; k < KR_ROWS; k++)
        acc[k] = iq4_xs_lanes(wr[k] + boff, xb);
    k_float_steps(kr_f16x8(wr, boff, 0), _mm256_setzero_ps(), _mm256_set1_ps(k_d_x(xb)),
                  sum_lanes8(acc), _mm256_setzero_si256(), false, a);
}

KR_ROWS_KERNEL(iq4_xs, IQ4XS_BYTES, iqx_rows_step)

#endif
