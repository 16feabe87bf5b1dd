/*
 * kernels_x86_krows.h - the decode kernels (vec_dot_rows: many weight rows against one
 * activation row) for Q4_K, Q5_K and Q6_K: the eight-row driver, and its AVX-512 steps (the
 * AVX2 steps are in kernels_x86_kprefill.h, Q4_K's and Q6_K's used ones in kernels_x86_kdecode.h;
 * Q5_K's reuses the prefill tiles' unpacking).
 * Included by kernels_x86.h after its K-quant section, whose helpers it uses.
 *
 * DESIGN: decode streams every weight byte once, so the kernel must cost less than the memory
 * time of a block, with room to spare. The per-row kernel spends most of its instructions on
 * per-block bookkeeping (scales spread one by one, a horizontal sum, scalar float steps). Here
 * eight weight rows, far apart in the matrix (eight memory streams: DRAM needs several in
 * flight to reach its bandwidth, docs/PERFORMANCE.md), go through each super-block together:
 *   - the activation block is loaded once for the eight rows (AVX-512: four registers);
 *   - each row's quants are unpacked and multiplied with its sub-block scales applied (AVX-512:
 *     64 quants at a time, vpmaddubsw + vpdpwssd with the scales spread by one vpermw; Q5_K
 *     and Q6_K load 32 bytes broadcast to both halves, Q4_K loads 64 against a permuted
 *     activation block and does its per-row bookkeeping four rows at a time, see its section);
 *   - the eight rows' sums are reduced together (lane k = row k) and quant.h's float steps
 *     (d_w * d_x, one fma into A[b % 8]; the mins likewise) run with lane k = row k.
 * Integer sums are exact in any order and every float operation is the scalar code's, so
 * each row's result equals vec_dot's bit for bit.
 */
#ifndef MOEINF_QUANT_KERNELS_X86_KROWS_H
#define MOEINF_QUANT_KERNELS_X86_KROWS_H

#define KR_ROWS 8

/* The F16 field at byte `at` of the current super-block of each of the 8 rows, as floats
 * (lane k = row k). The driver's rows are equally spaced (k * q + i), so this is one strided
 * gather. */
INLINE __m256 kr_f16x8(const uint8_t *const wr[KR_ROWS], size_t boff, size_t at) {
    return load_scales8(wr[0] + boff + at, (size_t)(wr[1] - wr[0]));
}

/* Rows k * q + i (k < 8) go together; the nr % 8 rows left use the per-row kernel tail, whose
 * results are the same. STEP(wr, boff, xb, a): super-block b (byte offset boff in each row)
 * of the 8 rows wr against activation block xb, into a (lane k = row k). The function may go
 * unused: a table can take another type's step (kernels_x86_kdecode.h). */
#define KR_ROWS_KERNEL_NAMED(name, tail, wbytes, STEP)                                             \
    __attribute__((unused)) static void name(int64_t n, int64_t nr, float *s, const void *w,       \
                                             size_t w_stride, const void *x) {                     \
        const uint8_t *wb = w;                                                                     \
        const uint8_t *xb = x;                                                                     \
        const int64_t nb = n / 256;                                                                \
        const int64_t q = nr / KR_ROWS;                                                            \
        for (int64_t i = 0; i < q; i++) {                                                          \
            const uint8_t *wr[KR_ROWS];                                                            \
            for (int k = 0; k < KR_ROWS; k++)                                                      \
                wr[k] = wb + (size_t)(k * q + i) * w_stride;                                       \
            __m256 a[8];                                                                           \
            for (int k = 0; k < 8; k++)                                                            \
                a[k] = _mm256_setzero_ps();                                                        \
            for (int64_t b = 0; b < nb; b++) {                                                     \
                const size_t boff = (size_t)b * (wbytes);                                          \
                for (int k = 0; k < KR_ROWS; k++) {                                                \
                    prefetch_block(wr[k], boff + K_PREFETCH, wbytes);                              \
                }                                                                                  \
                STEP(wr, boff, xb + (size_t)b * QK_K_BYTES_X, &a[b & 7]);                          \
            }                                                                                      \
            float out[KR_ROWS];                                                                    \
            _mm256_storeu_ps(out, hsum8_lanes(a));                                                 \
            for (int k = 0; k < KR_ROWS; k++)                                                      \
                s[k * q + i] = out[k];                                                             \
        }                                                                                          \
        if (nr > KR_ROWS * q)                                                                      \
            tail(n, nr - KR_ROWS * q, s + KR_ROWS * q, wb + (size_t)(KR_ROWS * q) * w_stride,      \
                 w_stride, x);                                                                     \
    }
#define KR_ROWS_KERNEL(t, wbytes, STEP)                                                            \
    KR_ROWS_KERNEL_NAMED(vec_dot_rows8_##t, vec_dot_rows_##t, wbytes, STEP)

#if defined(X86_AVX512)

/* vpermw indices: lanes 0-15 take int16 lane a, lanes 16-31 lane b. */
INLINE __m512i kr_pair_idx(int a, int b) {
    return _mm512_inserti64x4(_mm512_set1_epi16((short)a), _mm256_set1_epi16((short)b), 1);
}

/* lanes 8j..8j+7 take int16 lane 4u + j (j < 4): the four Q6_K scales of 64 quants. */
INLINE __m512i kr_quad_idx(int u) {
    const long long lane = 0x0001000100010001LL;
    const long long j0 = lane * (long long)(4 * u);
    return _mm512_setr_epi64(j0, j0, j0 + lane, j0 + lane, j0 + 2 * lane, j0 + 2 * lane,
                             j0 + 3 * lane, j0 + 3 * lane);
}

/* The activation block: quants 64u..64u+63 in xq[u], the 16 bsums, d_x. */
struct kr_x {
    __m512i xq[4];
    __m256i bs;
    __m256 dx;
};

INLINE void kr_load_x(const uint8_t *xb, struct kr_x *x) {
    for (size_t u = 0; u < 4; u++)
        x->xq[u] = _mm512_loadu_si512((const void *)(xb + 4 + 64 * u));
    x->bs = _mm256_loadu_si256((const __m256i *)(const void *)(xb + 260));
    x->dx = _mm256_set1_ps(k_d_x(xb));
}

/* One weight super-block unpacked for 512-bit products: q[u] holds the quants that meet
 * activation quants 64u..64u+63, sc[u] the int16 sub-block scale of each of its vpmaddubsw
 * pairs. */
struct kz_w {
    __m512i q[4];
    __m512i sc[4];
};

/* k4_scales_mins of four blocks at once, one per 128-bit lane: the same byte steps on a
 * 512-bit register, a third of the instructions per block. */
INLINE void k4_scales_mins_x4(const uint8_t *p0, const uint8_t *p1, const uint8_t *p2,
                              const uint8_t *p3, __m128i out[4]) {
    __m512i v = _mm512_castsi128_si512(_mm_loadu_si128((const __m128i *)(const void *)p0));
    v = _mm512_inserti32x4(v, _mm_loadu_si128((const __m128i *)(const void *)p1), 1);
    v = _mm512_inserti32x4(v, _mm_loadu_si128((const __m128i *)(const void *)p2), 2);
    v = _mm512_inserti32x4(v, _mm_loadu_si128((const __m128i *)(const void *)p3), 3);
    const struct k4_sm_lane c = k4_sm_lane();
    const __m512i a = _mm512_shuffle_epi8(v, _mm512_broadcast_i32x4(c.src_low));
    const __m512i b = _mm512_shuffle_epi8(v, _mm512_broadcast_i32x4(c.src_top));
    const __m512i low6 = _mm512_and_si512(a, _mm512_broadcast_i32x4(c.low6));
    const __m512i nib_lo = _mm512_and_si512(a, _mm512_broadcast_i32x4(c.nib_lo));
    const __m512i nib_hi =
        _mm512_and_si512(_mm512_srli_epi16(a, 4), _mm512_broadcast_i32x4(c.nib_hi));
    const __m512i top = _mm512_and_si512(_mm512_srli_epi16(b, 2), _mm512_broadcast_i32x4(c.top));
    const __m512i r = _mm512_or_si512(_mm512_or_si512(low6, nib_lo), _mm512_or_si512(nib_hi, top));
    out[0] = _mm512_castsi512_si128(r);
    out[1] = _mm512_extracti32x4_epi32(r, 1);
    out[2] = _mm512_extracti32x4_epi32(r, 2);
    out[3] = _mm512_extracti32x4_epi32(r, 3);
}

/* Q4_K (five = false) or Q5_K: unit u is the low then the high nibbles of quant bytes
 * 32u..32u+31 (sub-blocks 2u, 2u + 1), with sm = k4_scales_mins of the block. */
INLINE void kz_unpack_45_sm(const uint8_t *wb, bool five, __m128i sm, struct kz_w *o) {
    const __m512i m4 = _mm512_set1_epi8(0x0f);
    const __m512i s16 = _mm512_castsi256_si512(_mm256_cvtepu8_epi16(sm)); /* 0-7: scales */
    const uint8_t *qs = wb + (five ? 48 : 16);
    __m512i qh = _mm512_setzero_si512();
    if (five)
        qh = _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)(const void *)(wb + 16)));
    for (size_t u = 0; u < 4; u++) {
        const int iu = (int)u;
        __m512i q = _mm512_broadcast_i64x4(
            _mm256_loadu_si256((const __m256i *)(const void *)(qs + 32 * u)));
        q = _mm512_and_si512(_mm512_mask_srli_epi16(q, 0xFFFF0000u, q, 4), m4);
        if (five) {
            /* bit 2u (low half) or 2u + 1 (high half) of each qh byte, as bit 4 */
            const __m512i sh = kr_pair_idx(2 * iu, 2 * iu + 1);
            __m512i hb = _mm512_and_si512(_mm512_srlv_epi16(qh, sh), _mm512_set1_epi8(1));
            q = _mm512_or_si512(q, _mm512_slli_epi16(hb, 4));
        }
        o->q[u] = q;
        o->sc[u] = _mm512_permutexvar_epi16(kr_pair_idx(2 * iu, 2 * iu + 1), s16);
    }
}

/* The same, unpacking the scales too. Returns k4_scales_mins (the mins in bytes 8-15). */
INLINE __m128i kz_unpack_45(const uint8_t *wb, bool five, struct kz_w *o) {
    const __m128i sm = k4_scales_mins(wb + 4);
    kz_unpack_45_sm(wb, five, sm, o);
    return sm;
}

/* Q6_K: unit 2h + k' (h the half, k' = 0, 1) is quarters 2k', 2k' + 1 of half h (sub-blocks
 * 8h + 4k' .. 8h + 4k' + 3). Returns the 16 scales as int16. */
INLINE __m256i kz_unpack_6(const uint8_t *wb, struct kz_w *o) {
    const __m512i m4 = _mm512_set1_epi8(0x0f);
    const __m512i m30 = _mm512_set1_epi8(0x30);
    const __m512i sh01 = _mm512_inserti64x4(_mm512_set1_epi16(4), _mm256_set1_epi16(2), 1);
    const __m512i sh23 = _mm512_inserti64x4(_mm512_setzero_si512(), _mm256_set1_epi16(2), 1);
    const __m256i sc16 =
        _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)(const void *)(wb + 192)));
    const __m512i s16 = _mm512_castsi256_si512(sc16);
    for (size_t h = 0; h < 2; h++) {
        /* l = [ql 64h..64h+31 | ql 64h+32..64h+63]; qh bytes 32h..32h+31 in both halves */
        const __m512i l = _mm512_loadu_si512((const void *)(wb + 64 * h));
        const __m512i qh = _mm512_broadcast_i64x4(
            _mm256_loadu_si256((const __m256i *)(const void *)(wb + 128 + 32 * h)));
        o->q[2 * h] = _mm512_or_si512(_mm512_and_si512(l, m4),
                                      _mm512_and_si512(_mm512_sllv_epi16(qh, sh01), m30));
        o->q[2 * h + 1] = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(l, 4), m4),
                                          _mm512_and_si512(_mm512_srlv_epi16(qh, sh23), m30));
    }
    for (int u = 0; u < 4; u++)
        o->sc[u] = _mm512_permutexvar_epi16(kr_quad_idx(u), s16);
    return sc16;
}

/* The 16 int32 lanes of sum_u q[u] x xq[u] (sub-block scales applied), folded to 8. */
INLINE __m256i kz_dot(const struct kz_w *w, const __m512i xq[4]) {
    __m512i a = _mm512_setzero_si512();
    for (int u = 0; u < 4; u++)
        a = _mm512_dpwssd_epi32(a, _mm512_maddubs_epi16(w->q[u], xq[u]), w->sc[u]);
    return _mm256_add_epi32(_mm512_castsi512_si256(a), _mm512_extracti64x4_epi64(a, 1));
}

/* Row sums of a Q4_K (five = false) or Q5_K block: acc (int32 lanes summing to isum) and
 * the mins' int32 lanes (summing to imin). */
INLINE void kr_45_row(const uint8_t *wb, bool five, __m128i sm, const struct kr_x *x, __m256i *acc,
                      __m256i *mins) {
    struct kz_w w;
    kz_unpack_45_sm(wb, five, sm, &w);
    *acc = kz_dot(&w, x->xq);
    *mins = _mm256_madd_epi16(x->bs, _mm256_cvtepu8_epi16(_mm_unpackhi_epi8(sm, sm)));
}

/* Row sum lanes of a Q6_K block, the -32 offset folded in (as kq_prep_6). */
INLINE __m256i kr_6_row(const uint8_t *wb, const struct kr_x *x) {
    struct kz_w w;
    const __m256i sc16 = kz_unpack_6(wb, &w);
    const __m256i off = _mm256_sub_epi16(_mm256_setzero_si256(), _mm256_slli_epi16(sc16, 5));
    return _mm256_dpwssd_epi32(kz_dot(&w, x->xq), x->bs, off);
}

/* One super-block of 8 Q4_K/Q5_K rows into a (lane k = row k), as k45_step per row. */
INLINE void kr_45_step(const uint8_t *const wr[KR_ROWS], size_t boff, bool five, const uint8_t *xb,
                       __m256 *a) {
    struct kr_x xv;
    kr_load_x(xb, &xv);
    const struct kr_x *x = &xv;
    __m256i acc[KR_ROWS];
    __m256i mins[KR_ROWS];
    __m128i sm[KR_ROWS];
    for (int k = 0; k < KR_ROWS; k += 4)
        k4_scales_mins_x4(wr[k] + boff + 4, wr[k + 1] + boff + 4, wr[k + 2] + boff + 4,
                          wr[k + 3] + boff + 4, sm + k);
    for (int k = 0; k < KR_ROWS; k++)
        kr_45_row(wr[k] + boff, five, sm[k], x, &acc[k], &mins[k]);
    k_float_steps(kr_f16x8(wr, boff, 0), kr_f16x8(wr, boff, 2), x->dx, sum_lanes8(acc),
                  sum_lanes8(mins), true, a);
}

INLINE void kr_6_step(const uint8_t *const wr[KR_ROWS], size_t boff, const uint8_t *xb, __m256 *a) {
    struct kr_x xv;
    kr_load_x(xb, &xv);
    const struct kr_x *x = &xv;
    __m256i acc[KR_ROWS];
#    pragma GCC unroll 8
    for (int k = 0; k < KR_ROWS; k++)
        acc[k] = kr_6_row(wr[k] + boff, x);
    k_float_steps(kr_f16x8(wr, boff, 208), _mm256_setzero_ps(), x->dx, sum_lanes8(acc),
                  _mm256_setzero_si256(), false, a);
}

/* ---- Q4_K, eight rows jointly (AVX-512) -----------------------------------------------------
 *
 * Decode of Q4_K ran at about 24 timestamp ticks a block in L2 (bench_kernels 0.5 q4_K),
 * above a block's memory time at one core's DRAM rate, while its multiply-adds need only
 * eight 512-bit instructions. The rest was bookkeeping, mostly on the shuffle port: per row,
 * a broadcast and a masked shift per 64 quants, the scales and mins moved out of the
 * four-row register one row at a time and widened, an eight-lane fold of the sums, the mins'
 * own vpmaddwd; per eight rows, two eight-vector hadd reductions and sixteen F16 inserts for
 * d and dmin. Here:
 *   - the activation block is permuted once for the eight rows so that a row's quant bytes
 *     load 64 at a time: register u pairs the low nibbles of bytes 0-63 (sub-blocks 0 and 2)
 *     or 64-127 (4 and 6), or the high nibbles (1 and 3, 5 and 7) with the activations that
 *     meet them;
 *   - the 16 bytes at the start of each row's block (d, dmin, the 12 packed scale bytes) load
 *     four rows to a register; one pass unpacks the scales and mins of the four, one vpshufb
 *     widens the four rows' scales, and each row's vpermw indices pick its own 128-bit lane;
 *   - the mins' sums of all eight rows come from two vpmaddwd against the activation's
 *     32-element sums and one small reduction, and d, dmin of the eight rows from one vpermt2d;
 *   - the eight rows' 16-lane sums are reduced in 512-bit registers without a per-row fold.
 * The integer sums are exact whatever the order, and the float steps are k_float_steps', so
 * each row still equals vec_dot bit for bit. */

/* The activation block with quant registers in the pair layout above (bsums and d_x as
 * kr_load_x). */
INLINE void kr_load_x_pairs(const uint8_t *xb, struct kr_x *x) {
    const __m512i a = _mm512_loadu_si512((const void *)(xb + 4));
    const __m512i b = _mm512_loadu_si512((const void *)(xb + 68));
    const __m512i c = _mm512_loadu_si512((const void *)(xb + 132));
    const __m512i d = _mm512_loadu_si512((const void *)(xb + 196));
    x->xq[0] = _mm512_shuffle_i64x2(a, b, 0x44); /* quants 0-31 | 64-95 */
    x->xq[1] = _mm512_shuffle_i64x2(a, b, 0xEE); /* 32-63 | 96-127 */
    x->xq[2] = _mm512_shuffle_i64x2(c, d, 0x44);
    x->xq[3] = _mm512_shuffle_i64x2(c, d, 0xEE);
    x->bs = _mm256_loadu_si256((const __m256i *)(const void *)(xb + 260));
    x->dx = _mm256_set1_ps(k_d_x(xb));
}

/* Bytes 0-15 of four rows' blocks, row k in 128-bit lane k: d, dmin, the 12 scale bytes. */
INLINE __m512i kr4_heads(const uint8_t *p0, const uint8_t *p1, const uint8_t *p2,
                         const uint8_t *p3) {
    __m512i v = _mm512_castsi128_si512(_mm_loadu_si128((const __m128i *)(const void *)p0));
    v = _mm512_inserti32x4(v, _mm_loadu_si128((const __m128i *)(const void *)p1), 1);
    v = _mm512_inserti32x4(v, _mm_loadu_si128((const __m128i *)(const void *)p2), 2);
    return _mm512_inserti32x4(v, _mm_loadu_si128((const __m128i *)(const void *)p3), 3);
}

/* k4_scales_mins of the four rows of kr4_heads (each lane: 8 scales, 8 mins), its shuffles
 * moved 4 bytes on for the head's d and dmin. */
INLINE __m512i kr4_scales_mins(__m512i v) {
    const struct k4_sm_lane c = k4_sm_lane();
    const __m512i a =
        _mm512_shuffle_epi8(v, _mm512_broadcast_i32x4(_mm_setr_epi8(4, 5, 6, 7, 12, 13, 14, 15, 8,
                                                                    9, 10, 11, 12, 13, 14, 15)));
    const __m512i b =
        _mm512_shuffle_epi8(v, _mm512_broadcast_i32x4(_mm_setr_epi8(-1, -1, -1, -1, 4, 5, 6, 7, -1,
                                                                    -1, -1, -1, 8, 9, 10, 11)));
    const __m512i low6 = _mm512_and_si512(a, _mm512_broadcast_i32x4(c.low6));
    const __m512i nib_lo = _mm512_and_si512(a, _mm512_broadcast_i32x4(c.nib_lo));
    const __m512i nib_hi =
        _mm512_and_si512(_mm512_srli_epi16(a, 4), _mm512_broadcast_i32x4(c.nib_hi));
    const __m512i top = _mm512_and_si512(_mm512_srli_epi16(b, 2), _mm512_broadcast_i32x4(c.top));
    return _mm512_or_si512(_mm512_or_si512(low6, nib_lo), _mm512_or_si512(nib_hi, top));
}

/* The 16 int32 lanes of one Q4_K row's block (row k of the four whose scales, as int16, are
 * sc16's words 8k..8k+7) against the pair-layout activations xq. */
INLINE __m512i kr4_row(const uint8_t *wb, const __m512i xq[4], __m512i sc16, int k) {
    const __m512i m4 = _mm512_set1_epi8(0x0f);
    const __m512i q0 = _mm512_loadu_si512((const void *)(wb + 16));
    const __m512i q1 = _mm512_loadu_si512((const void *)(wb + 80));
    const int o = 8 * k;
    __m512i a = _mm512_dpwssd_epi32(_mm512_setzero_si512(),
                                    _mm512_maddubs_epi16(_mm512_and_si512(q0, m4), xq[0]),
                                    _mm512_permutexvar_epi16(kr_pair_idx(o, o + 2), sc16));
    a = _mm512_dpwssd_epi32(
        a, _mm512_maddubs_epi16(_mm512_and_si512(_mm512_srli_epi16(q0, 4), m4), xq[1]),
        _mm512_permutexvar_epi16(kr_pair_idx(o + 1, o + 3), sc16));
    a = _mm512_dpwssd_epi32(a, _mm512_maddubs_epi16(_mm512_and_si512(q1, m4), xq[2]),
                            _mm512_permutexvar_epi16(kr_pair_idx(o + 4, o + 6), sc16));
    return _mm512_dpwssd_epi32(
        a, _mm512_maddubs_epi16(_mm512_and_si512(_mm512_srli_epi16(q1, 4), m4), xq[3]),
        _mm512_permutexvar_epi16(kr_pair_idx(o + 5, o + 7), sc16));
}

/* Lane k of the result: the sum of the 16 int32 lanes of a[k]. */
INLINE __m256i kr_reduce8z(const __m512i a[KR_ROWS]) {
    __m512i t[4];
#    pragma GCC unroll 4
    for (size_t p = 0; p < 4; p++)
        t[p] = _mm512_add_epi32(_mm512_unpacklo_epi32(a[2 * p], a[2 * p + 1]),
                                _mm512_unpackhi_epi32(a[2 * p], a[2 * p + 1]));
    /* each 128-bit lane of u0: rows 0-3's partial sums; of u1: rows 4-7's */
    const __m512i u0 =
        _mm512_add_epi32(_mm512_unpacklo_epi64(t[0], t[1]), _mm512_unpackhi_epi64(t[0], t[1]));
    const __m512i u1 =
        _mm512_add_epi32(_mm512_unpacklo_epi64(t[2], t[3]), _mm512_unpackhi_epi64(t[2], t[3]));
    /* [rows 0-3, rows 0-3, rows 4-7, rows 4-7], then [0-3, 4-7, 0-3, 4-7] */
    __m512i p =
        _mm512_add_epi32(_mm512_shuffle_i64x2(u0, u1, 0x44), _mm512_shuffle_i64x2(u0, u1, 0xEE));
    p = _mm512_shuffle_i64x2(p, p, 0xD8);
    return _mm256_add_epi32(_mm512_castsi512_si256(p), _mm512_extracti64x4_epi64(p, 1));
}

/* imin of the eight rows (lane k = row k): sum_j m_j * (bsums[2j] + bsums[2j + 1]), from the
 * mins bytes (8-15 of each lane) of kr4_scales_mins' r03 (rows 0-3) and r47. */
INLINE __m256i kr4_imin8(__m512i r03, __m512i r47, __m256i bs) {
    const __m512i mn_idx = _mm512_broadcast_i32x4(
        _mm_setr_epi8(8, -1, 9, -1, 10, -1, 11, -1, 12, -1, 13, -1, 14, -1, 15, -1));
    /* the pair sums fit int16: |bsum| <= 16 * 128 */
    const __m128i b16 = _mm256_cvtepi32_epi16(_mm256_madd_epi16(bs, _mm256_set1_epi16(1)));
    const __m512i b = _mm512_broadcast_i32x4(b16);
    const __m512i t03 = _mm512_madd_epi16(_mm512_shuffle_epi8(r03, mn_idx), b);
    const __m512i t47 = _mm512_madd_epi16(_mm512_shuffle_epi8(r47, mn_idx), b);
    /* lane i: [row i, row 4+i, row i, row 4+i] partial pairs, then each pair summed */
    __m512i u = _mm512_add_epi32(_mm512_unpacklo_epi32(t03, t47), _mm512_unpackhi_epi32(t03, t47));
    u = _mm512_add_epi32(u, _mm512_shuffle_epi32(u, _MM_PERM_BADC));
    return _mm512_castsi512_si256(_mm512_permutexvar_epi32(
        _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 0, 0, 0, 0, 0, 0, 0, 0), u));
}

INLINE void kr_4_step(const uint8_t *const wr[KR_ROWS], size_t boff, const uint8_t *xb, __m256 *a) {
    struct kr_x x;
    kr_load_x_pairs(xb, &x);
    const __m512i h03 = kr4_heads(wr[0] + boff, wr[1] + boff, wr[2] + boff, wr[3] + boff);
    const __m512i h47 = kr4_heads(wr[4] + boff, wr[5] + boff, wr[6] + boff, wr[7] + boff);
    const __m512i r03 = kr4_scales_mins(h03);
    const __m512i r47 = kr4_scales_mins(h47);
    const __m512i sc_idx = _mm512_broadcast_i32x4(
        _mm_setr_epi8(0, -1, 1, -1, 2, -1, 3, -1, 4, -1, 5, -1, 6, -1, 7, -1));
    const __m512i sc03 = _mm512_shuffle_epi8(r03, sc_idx);
    const __m512i sc47 = _mm512_shuffle_epi8(r47, sc_idx);
    __m512i acc[KR_ROWS];
#    pragma GCC unroll 4
    for (int k = 0; k < 4; k++) {
        acc[k] = kr4_row(wr[k] + boff, x.xq, sc03, k);
        acc[4 + k] = kr4_row(wr[4 + k] + boff, x.xq, sc47, k);
    }
    /* d | dmin << 16 of each row: dword 0 of each lane of the heads */
    const __m256i dd = _mm512_castsi512_si256(_mm512_permutex2var_epi32(
        h03, _mm512_setr_epi32(0, 4, 8, 12, 16, 20, 24, 28, 0, 0, 0, 0, 0, 0, 0, 0), h47));
    const __m256 d = _mm256_cvtph_ps(_mm256_cvtepi32_epi16(dd));
    const __m256 dmin = _mm256_cvtph_ps(_mm256_cvtepi32_epi16(_mm256_srli_epi32(dd, 16)));
    k_float_steps(d, dmin, x.dx, kr_reduce8z(acc), kr4_imin8(r03, r47, x.bs), true, a);
}

#    define KR_Q4K_STEP(wr, boff, x, a) kr_4_step((wr), (boff), (x), (a))
#    define KR_Q5K_STEP(wr, boff, x, a) kr_45_step((wr), (boff), true, (x), (a))
#    define KR_Q6K_STEP(wr, boff, x, a) kr_6_step((wr), (boff), (x), (a))

KR_ROWS_KERNEL(q4_k, 144, KR_Q4K_STEP)
KR_ROWS_KERNEL(q5_k, 176, KR_Q5K_STEP)
KR_ROWS_KERNEL(q6_k, 210, KR_Q6K_STEP)

#endif

#endif
