/*
 * kernels_x86_kdecode.h - the AVX2 steps of the eight-row K-quant decode driver
 * (kernels_x86_krows.h) for Q4_K and Q6_K, the ones the AVX2 table uses. Included by
 * kernels_x86.h after kernels_x86_kprefill.h, whose row-pair helpers (ky2_heads,
 * ky2_scales_mins) it uses; everything here is static.
 *
 * DESIGN: on a core that splits each 256-bit operation into two 128-bit halves and has one
 * integer multiply pipe (AMD Zen 1), decode of these types was bound by its multiplies: per
 * row and super-block, eight vpmaddubsw (quants x activations) and eight vpmaddwd (the pair
 * sums x the sub-block scale), at two multiply-pipe cycles each. Here the vpmaddubsw outputs
 * of different sub-blocks are regrouped (vpunpck*, on the shuffle pipes) and added in int16 so
 * that each int16 lane holds quants of one sub-block, and fewer vpmaddwd apply the scales:
 *   - Q4_K: the eight outputs fold to one vector (lane 8h + j: sub-block j, h the 128-bit half),
 *     each lane a sum of 8 vpmaddubsw lanes, at most 8 x 2 x 15 x 128 = 30720 < 32767 in
 *     magnitude; one vpmaddwd with the row's 8 scales: 9 multiplies a row instead of 16;
 *   - Q6_K: a vpmaddubsw lane of 6-bit quants reaches 2 x 63 x 128 = 16128, so only two fit
 *     int16 (32256): the outputs go in pairs (the prefill tiles' kq_pair: unpacklo/hi_epi64),
 *     four vpmaddwd instead of eight: 13 multiplies a row (the -32 offset's one included)
 *     instead of 17.
 * The integer sums are exact in any order and the float steps are k_float_steps', so each
 * row's result still equals vec_dot's bit for bit (tests/test_quant.c's extreme blocks hold
 * the bounds above).
 */
#ifndef MOEINF_QUANT_KERNELS_X86_KDECODE_H
#define MOEINF_QUANT_KERNELS_X86_KDECODE_H

#if !defined(X86_AVX512)

/* The fold steps: a and b interleaved by 16-, 32- or 64-bit elements, the two halves added
 * in int16. */
INLINE __m256i kd_fold16(__m256i a, __m256i b) {
    return _mm256_add_epi16(_mm256_unpacklo_epi16(a, b), _mm256_unpackhi_epi16(a, b));
}

INLINE __m256i kd_fold32(__m256i a, __m256i b) {
    return _mm256_add_epi16(_mm256_unpacklo_epi32(a, b), _mm256_unpackhi_epi32(a, b));
}

INLINE __m256i kd_fold64(__m256i a, __m256i b) {
    return _mm256_add_epi16(_mm256_unpacklo_epi64(a, b), _mm256_unpackhi_epi64(a, b));
}

/* The int32 lanes of one Q4_K row's block against activation block xb, its 8 scales as int16
 * in both 128-bit lanes of s16. p[j]: the vpmaddubsw of sub-block j (the low nibbles of quant
 * bytes 32c..32c+31 for j = 2c, the high for 2c + 1); after the three folds int16 lane i of
 * each half holds sub-block i. */
INLINE __m256i kd4_row(const uint8_t *wb, const uint8_t *xb, __m256i s16) {
    const __m256i m4 = _mm256_set1_epi8(0x0f);
    __m256i p[8];
#    pragma GCC unroll 4
    for (size_t c = 0; c < 4; c++) {
        const __m256i q = _mm256_loadu_si256((const __m256i *)(const void *)(wb + 16 + 32 * c));
        const __m256i x0 = _mm256_loadu_si256((const __m256i *)(const void *)(xb + 4 + 64 * c));
        const __m256i x1 = _mm256_loadu_si256((const __m256i *)(const void *)(xb + 36 + 64 * c));
        p[2 * c] = _mm256_maddubs_epi16(_mm256_and_si256(q, m4), x0);
        p[2 * c + 1] = _mm256_maddubs_epi16(_mm256_and_si256(_mm256_srli_epi16(q, 4), m4), x1);
    }
    const __m256i v03 = kd_fold32(kd_fold16(p[0], p[1]), kd_fold16(p[2], p[3]));
    const __m256i v47 = kd_fold32(kd_fold16(p[4], p[5]), kd_fold16(p[6], p[7]));
    return _mm256_madd_epi16(kd_fold64(v03, v47), s16);
}

/* One super-block of 8 Q4_K rows, two rows to a register for the bookkeeping (as the AVX-512
 * kr_4_step does four): the scales and mins of two rows unpacked in one pass, the eight rows'
 * mins sums from four vpmaddwd against the activation's 32-element sums, d and dmin of the
 * eight rows from the 16-byte heads with a few shuffles; each row's sums from kd4_row. */
INLINE void kd_4_step(const uint8_t *const wr[KR_ROWS], size_t boff, const uint8_t *xb, __m256 *a) {
    const __m256i bs = _mm256_loadu_si256((const __m256i *)(const void *)(xb + 260));
    const __m256i sc_idx = _mm256_broadcastsi128_si256(
        _mm_setr_epi8(0, -1, 1, -1, 2, -1, 3, -1, 4, -1, 5, -1, 6, -1, 7, -1));
    const __m256i mn_idx = _mm256_broadcastsi128_si256(
        _mm_setr_epi8(8, -1, 9, -1, 10, -1, 11, -1, 12, -1, 13, -1, 14, -1, 15, -1));
    /* B_j = bsums[2j] + bsums[2j + 1] as int16 (|B_j| <= 32 * 128), [B0..B7] in both lanes */
    const __m256i bp = _mm256_madd_epi16(bs, _mm256_set1_epi16(1));
    const __m256i b16 = _mm256_permute4x64_epi64(_mm256_packs_epi32(bp, bp), 0x88);
    __m256i h[4];
    __m256i acc[KR_ROWS];
    __m256i t[4];
#    pragma GCC unroll 4
    for (size_t p = 0; p < 4; p++) {
        h[p] = ky2_heads(wr[2 * p] + boff, wr[2 * p + 1] + boff);
        const __m256i r = ky2_scales_mins(h[p]);
        const __m256i s = _mm256_shuffle_epi8(r, sc_idx); /* each lane: its row's scales */
        /* each row's scales in both lanes, by insert/extract (vperm2i128: 8 uops on Zen 1) */
        acc[2 * p] = kd4_row(wr[2 * p] + boff, xb,
                             _mm256_inserti128_si256(s, _mm256_castsi256_si128(s), 1));
        acc[2 * p + 1] = kd4_row(wr[2 * p + 1] + boff, xb,
                                 _mm256_inserti128_si256(s, _mm256_extracti128_si256(s, 1), 0));
        t[p] = _mm256_madd_epi16(_mm256_shuffle_epi8(r, mn_idx), b16);
    }
    /* t[p]: row 2p's four partial sums in the low lane, row 2p + 1's in the high; after the
     * hadds the low lane holds rows 0, 2, 4, 6 and the high lane rows 1, 3, 5, 7 */
    const __m256i rows_order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
    const __m256i imin = _mm256_permutevar8x32_epi32(
        _mm256_hadd_epi32(_mm256_hadd_epi32(t[0], t[1]), _mm256_hadd_epi32(t[2], t[3])),
        rows_order);
    /* d | dmin << 16 of rows 0, 2, 4, 6 (low lane) and 1, 3, 5, 7 (high lane); the words
     * split into d (bytes 0-7 of a lane) and dmin (8-15), then interleaved into row order */
    const __m256i dd = _mm256_shuffle_epi8(
        _mm256_unpacklo_epi64(_mm256_unpacklo_epi32(h[0], h[1]), _mm256_unpacklo_epi32(h[2], h[3])),
        _mm256_broadcastsi128_si256(
            _mm_setr_epi8(0, 1, 4, 5, 8, 9, 12, 13, 2, 3, 6, 7, 10, 11, 14, 15)));
    const __m256i sw = _mm256_permute4x64_epi64(dd, 0x4e); /* the halves swapped */
    const __m256 d = _mm256_cvtph_ps(_mm256_castsi256_si128(_mm256_unpacklo_epi16(dd, sw)));
    const __m256 dmin = _mm256_cvtph_ps(_mm256_castsi256_si128(_mm256_unpackhi_epi16(dd, sw)));
    k_float_steps(d, dmin, _mm256_set1_ps(k_d_x(xb)), sum_lanes8(acc), imin, true, a);
}

/* One super-block of 8 Q6_K rows. k6_unpack_half's vector k of half h holds sub-block
 * 8h + 2k in its low 128 bits and 8h + 2k + 1 in its high; vectors 2c' and 2c' + 1 of a half
 * (sub-blocks b, b + 1 and b + 2, b + 3 with b = 8h + 4c') fold by 64-bit halves into one
 * vector whose int16 lanes 0-3 hold sub-block b, 4-7 b + 2, 8-11 b + 1, 12-15 b + 3. */
INLINE void kd_6_step(const uint8_t *const wr[KR_ROWS], size_t boff, const uint8_t *xb, __m256 *a) {
    const __m256i bs = _mm256_loadu_si256((const __m256i *)(const void *)(xb + 260));
    __m256i acc[KR_ROWS];
#    pragma GCC unroll 8
    for (int k = 0; k < KR_ROWS; k++) {
        const uint8_t *wb = wr[k] + boff;
        const __m256i sc16 =
            _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)(const void *)(wb + 192)));
        __m256i sum =
            KQ_DPWSSD(_mm256_setzero_si256(), bs,
                      _mm256_sub_epi16(_mm256_setzero_si256(), _mm256_slli_epi16(sc16, 5)));
#    pragma GCC unroll 2
        for (size_t h = 0; h < 2; h++) {
            const __m256i sh = k6_scales_half(wb, h); /* scales 8h..8h+7 in both lanes */
            __m256i q[4];
            k6_unpack_half(wb, h, q);
#    pragma GCC unroll 2
            for (size_t c = 0; c < 2; c++) {
                const uint8_t *xc = xb + 4 + 128 * h + 64 * c;
                const int b = 4 * (int)c;
                sum = _mm256_add_epi32(
                    sum, kq_pair(q[2 * c], q[2 * c + 1],
                                 _mm256_loadu_si256((const __m256i *)(const void *)xc),
                                 _mm256_loadu_si256((const __m256i *)(const void *)(xc + 32)),
                                 _mm256_shuffle_epi8(sh, kq_quad_idx(b, b + 2, b + 1, b + 3))));
            }
        }
        acc[k] = sum;
    }
    k_float_steps(kr_f16x8(wr, boff, 208), _mm256_setzero_ps(), _mm256_set1_ps(k_d_x(xb)),
                  sum_lanes8(acc), _mm256_setzero_si256(), false, a);
}

#    define KD_Q4K_STEP(wr, boff, xb, a) kd_4_step((wr), (boff), (xb), (a))
#    define KD_Q6K_STEP(wr, boff, xb, a) kd_6_step((wr), (boff), (xb), (a))
KR_ROWS_KERNEL_NAMED(vec_dot_rows8_q4_kd, vec_dot_rows_q4_k, 144, KD_Q4K_STEP)
KR_ROWS_KERNEL_NAMED(vec_dot_rows8_q6_kd, vec_dot_rows_q6_k, 210, KD_Q6K_STEP)
/* the table's Q4_K and Q6_K decode entries (kernels_x86.h's X86_TABLE) */
#    define KR_ROWS_Q4_K vec_dot_rows8_q4_kd
#    define KR_ROWS_Q6_K vec_dot_rows8_q6_kd
#else
#    define KR_ROWS_Q4_K vec_dot_rows8_q4_k
#    define KR_ROWS_Q6_K vec_dot_rows8_q6_k
#endif

#endif
