/*
 * kernels_x86_kprefill.h - vec_dot_m (prefill: one weight row against many activation rows)
 * for Q4_K, Q5_K and Q6_K weights x Q8_K activations. Included by kernels_x86.h after its
 * K-quant section, whose helpers it uses; everything here is static.
 *
 * DESIGN: prefill is bound by arithmetic, not memory, so the work per activation row is cut
 * to the multiply-adds themselves:
 *   - each weight super-block is unpacked once (kq_prep: 8 vectors of 32 unsigned quants, the
 *     int16 sub-block scale that multiplies each vector's vpmaddubsw pairs, the mins) and then
 *     applied to KQ_ROWS activation rows, each with its own int32 accumulator in a register;
 *   - with AVX-512 the quants go two vectors to a 512-bit register and vpdpwssd fuses the
 *     scale multiply with the add (AVX512-VNNI); the AVX2 table uses vpmaddwd + vpaddd;
 *   - the rows' exact integer sums are reduced together into one vector (lane j = row j), and
 *     quant.h's float part (d_w * d_x, then one fma into A[b % 8]; the same for the mins) runs
 *     with lane j = row j.
 * Integer sums are exact whatever their order, and every float operation is the scalar code's
 * (one rounding each, in the same order, lane by lane), so each row's result equals vec_dot's
 * bit for bit. A chunk of fewer than KQ_ROWS rows repeats its first row in the unused lanes.
 */
#ifndef MOEINF_QUANT_KERNELS_X86_KPREFILL_H
#define MOEINF_QUANT_KERNELS_X86_KPREFILL_H

#define KQ_ROWS 8 /* activation rows per pass over a weight row */

/* One unpacked weight super-block. AVX-512: kz_w's four 64-quant units. AVX2: vector i holds
 * quants 32i..32i+31, which meet activation quants 32i..32i+31 (Q4_K/Q5_K: the low then high
 * nibbles of each 32-byte group; Q6_K: the four 32-element quarters of each half). */
struct kq_prep {
#if defined(X86_AVX512)
    struct kz_w z; /* the 512-bit layout (kernels_x86_krows.h) */
#else
    __m256i q[8];
    __m256i sc[8]; /* int16 sub-block scales: the multipliers of kq_pair(q[2c], q[2c + 1])
                    * in sc[c], c < 4 (the prefill tiles); of q[i]'s vpmaddubsw pairs in sc[i]
                    * (kq_prep_45 with paired false: Q5_K's decode step) */
#endif
    __m256i bs_mul; /* int16 multipliers of the 16 activation bsums */
    float d;
    float dmin; /* Q4_K/Q5_K only */
};

#if !defined(X86_AVX512)
/* vpshufb indices that fill int16 lanes 0-3 with word a of the source's low 128-bit lane, 4-7
 * with word b, 8-11 with word c of its high lane and 12-15 with word d. */
INLINE __m256i kq_quad_idx(int a, int b, int c, int d) {
    const short wa = (short)(2 * a | (2 * a + 1) << 8);
    const short wb = (short)(2 * b | (2 * b + 1) << 8);
    const short wc = (short)(2 * c | (2 * c + 1) << 8);
    const short wd = (short)(2 * d | (2 * d + 1) << 8);
    return _mm256_setr_epi16(wa, wa, wa, wa, wb, wb, wb, wb, wc, wc, wc, wc, wd, wd, wd, wd);
}

/* The scaled sums of two quant vectors against their activation vectors, into int32 lanes,
 * with one vpmaddwd where each vector alone takes one: the two vpmaddubsw outputs are regrouped
 * by 64-bit halves (unpacklo/hi_epi64), which puts in each int16 lane of both regrouped vectors
 * quants of one sub-block (vector 0's in lanes 0-3 and 8-11, vector 1's in 4-7 and 12-15, as
 * each 128-bit lane of a quant vector holds quants of one sub-block), and are added in int16
 * before the scale multiply: s holds the matching scales (kq_quad_idx). Exact: a vpmaddubsw
 * lane of 6-bit quants is at most 2 x 63 x 128 = 16128 in magnitude, so two of them fit int16
 * (32256; three would not: tests/test_quant.c's K-quant extremes). */
INLINE __m256i kq_pair(__m256i q0, __m256i q1, __m256i x0, __m256i x1, __m256i s) {
    const __m256i m0 = _mm256_maddubs_epi16(q0, x0);
    const __m256i m1 = _mm256_maddubs_epi16(q1, x1);
    return _mm256_madd_epi16(
        _mm256_add_epi16(_mm256_unpacklo_epi64(m0, m1), _mm256_unpackhi_epi64(m0, m1)), s);
}
#endif

/* The 256 unsigned quants of a Q4_K (five = false) or Q5_K block: q[i] holds elements 32i ..
 * 32i + 31 (the low, then the high nibbles of each 32-byte group; Q5_K's fifth bit from qh). */
INLINE void k45_unpack(const uint8_t *wb, bool five, __m256i q[8]) {
    const __m256i m4 = _mm256_set1_epi8(0x0f);
    const __m256i one = _mm256_set1_epi8(1);
    const uint8_t *qs = wb + (five ? 48 : 16);
    const __m256i qhv = five ? _mm256_loadu_si256((const __m256i *)(const void *)(wb + 16))
                             : _mm256_setzero_si256();
    for (size_t c = 0; c < 4; c++) {
        __m256i v = _mm256_loadu_si256((const __m256i *)(const void *)(qs + 32 * c));
        __m256i lo = _mm256_and_si256(v, m4);
        __m256i hi = _mm256_and_si256(_mm256_srli_epi16(v, 4), m4);
        if (five) {
            __m128i sh_lo = _mm_cvtsi32_si128((int)(2 * c));
            __m128i sh_hi = _mm_cvtsi32_si128((int)(2 * c + 1));
            lo = _mm256_or_si256(
                lo, _mm256_slli_epi16(_mm256_and_si256(_mm256_srl_epi16(qhv, sh_lo), one), 4));
            hi = _mm256_or_si256(
                hi, _mm256_slli_epi16(_mm256_and_si256(_mm256_srl_epi16(qhv, sh_hi), one), 4));
        }
        q[2 * c] = lo;
        q[2 * c + 1] = hi;
    }
}

/* Q4_K (five = false) or Q5_K: as k45_block. bs_mul: the mins as [m0 m0 m1 m1 ...]. paired:
 * the scales as kq_pair takes them, else one multiplier per quant vector (AVX2). */
INLINE void kq_prep_45(const uint8_t *wb, bool five, bool paired, struct kq_prep *p) {
    (void)paired; /* AVX-512: one layout */
#if defined(X86_AVX512)
    const __m128i sm = kz_unpack_45(wb, five, &p->z);
#else
    const __m128i sm = k4_scales_mins(wb + 4);
    k45_unpack(wb, five, p->q);
    if (paired) {
        /* vectors 2c (sub-block 2c) and 2c + 1 (2c + 1) go together in kq_pair */
        const __m256i s16 = _mm256_broadcastsi128_si256(_mm_cvtepu8_epi16(sm));
        for (int c = 0; c < 4; c++)
            p->sc[c] = _mm256_shuffle_epi8(s16, kq_quad_idx(2 * c, 2 * c + 1, 2 * c, 2 * c + 1));
    } else {
        uint8_t sc[16];
        _mm_storeu_si128((__m128i *)(void *)sc, sm);
        for (int i = 0; i < 8; i++)
            p->sc[i] = _mm256_set1_epi16((short)sc[i]);
    }
#endif
    p->bs_mul = _mm256_cvtepu8_epi16(_mm_unpackhi_epi8(sm, sm));
    p->d = _cvtsh_ss(load_u16(wb));
    p->dmin = _cvtsh_ss(load_u16(wb + 2));
}

/* Q6_K: as k6_block. bs_mul: -32 x the 16 scales, which folds the quants' -32 offset into the
 * same sum (|32 x scale| <= 4096 fits int16; the pair sums stay far inside int32). */
INLINE void kq_prep_6(const uint8_t *wb, struct kq_prep *p) {
#if defined(X86_AVX512)
    kz_unpack_6(wb, &p->z);
#else
    for (size_t h = 0; h < 2; h++)
        k6_unpack_half(wb, h, &p->q[4 * h]);
#endif
    const __m256i scales =
        _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)(const void *)(wb + 192)));
#if !defined(X86_AVX512)
    /* vector i: sub-block 2i in its low 128 bits, 2i + 1 in its high; kq_pair c takes vectors
     * 2c and 2c + 1, sub-blocks 4c, 4c + 2 (low lane) and 4c + 1, 4c + 3 (high lane), from
     * scales 0-7 in both lanes of s_lo or 8-15 in both of s_hi */
    const __m256i s_lo = k6_scales_half(wb, 0);
    const __m256i s_hi = k6_scales_half(wb, 1);
    for (int c = 0; c < 4; c++) {
        const int b = 4 * (c & 1);
        p->sc[c] = _mm256_shuffle_epi8(c < 2 ? s_lo : s_hi, kq_quad_idx(b, b + 2, b + 1, b + 3));
    }
#endif
    p->bs_mul = _mm256_sub_epi16(_mm256_setzero_si256(), _mm256_slli_epi16(scales, 5));
    p->d = _cvtsh_ss(load_u16(wb + 208));
    p->dmin = 0;
}

/* acc + the int16 pair products of a and b, summed into int32 lanes. */
#if defined(X86_VNNI)
#    define KQ_DPWSSD(acc, a, b) _mm256_dpwssd_epi32((acc), (a), (b))
#else
#    define KQ_DPWSSD(acc, a, b) _mm256_add_epi32((acc), _mm256_madd_epi16((a), (b)))
#endif

/* The exact integer sums of one super-block against the activation blocks x[j], j < rows
 * (rows: 1 to KQ_ROWS, a constant after inlining): isum (lane j; for Q6_K with the offset
 * term folded in) and, with mins, imin. Lanes from rows on are 0. */
INLINE void kq_block_rows(const struct kq_prep *p, const uint8_t *const x[KQ_ROWS], int rows,
                          bool mins, __m256i *isum, __m256i *imin) {
    __m256i acc[KQ_ROWS];
    __m256i bsum[KQ_ROWS];
    for (int j = 0; j < KQ_ROWS; j++) {
        acc[j] = _mm256_setzero_si256();
        bsum[j] = _mm256_setzero_si256();
    }
#if defined(X86_AVX512)
    __m512i acc5[KQ_ROWS];
    for (int j = 0; j < rows; j++)
        acc5[j] = _mm512_setzero_si512();
    for (size_t u = 0; u < 4; u++) {
        const __m512i q = p->z.q[u];
        const __m512i s = p->z.sc[u];
        for (int j = 0; j < rows; j++) {
            __m512i xv = _mm512_loadu_si512((const void *)(x[j] + 4 + 64 * u));
            acc5[j] = _mm512_dpwssd_epi32(acc5[j], _mm512_maddubs_epi16(q, xv), s);
        }
    }
    for (int j = 0; j < rows; j++)
        acc[j] = _mm256_add_epi32(_mm512_castsi512_si256(acc5[j]),
                                  _mm512_extracti64x4_epi64(acc5[j], 1));
#else
    for (size_t c = 0; c < 4; c++) {
        const __m256i q0 = p->q[2 * c];
        const __m256i q1 = p->q[2 * c + 1];
        const __m256i s = p->sc[c];
        for (int j = 0; j < rows; j++) {
            const uint8_t *xc = x[j] + 4 + 64 * c;
            const __m256i x0 = _mm256_loadu_si256((const __m256i *)(const void *)xc);
            const __m256i x1 = _mm256_loadu_si256((const __m256i *)(const void *)(xc + 32));
            acc[j] = _mm256_add_epi32(acc[j], kq_pair(q0, q1, x0, x1, s));
        }
    }
#endif
    for (int j = 0; j < rows; j++) {
        __m256i bs = _mm256_loadu_si256((const __m256i *)(const void *)(x[j] + 260));
        if (mins)
            bsum[j] = _mm256_madd_epi16(bs, p->bs_mul);
        else
            acc[j] = KQ_DPWSSD(acc[j], bs, p->bs_mul);
    }
    *isum = sum_lanes8(acc);
    if (mins) *imin = sum_lanes8(bsum);
}

/* d_x of the activation blocks x[j], lane j = row j (rows up to KQ_ROWS, the rest 0). */
INLINE __m256 kq_dx(const uint8_t *const x[KQ_ROWS]) {
    float d[KQ_ROWS];
    for (int j = 0; j < KQ_ROWS; j++)
        memcpy(&d[j], x[j], sizeof d[j]);
    return _mm256_loadu_ps(d);
}

/* One super-block's terms for a chunk of `rows` activation rows (x[j]: their blocks), added
 * to a[k] as quant.h adds them to A[b % 8] (lane j = row j). */
INLINE void kq_chunk(const struct kq_prep *p, const uint8_t *const x[KQ_ROWS], __m256 dx, int rows,
                     bool mins, __m256 *a) {
    __m256i isum;
    __m256i imin = _mm256_setzero_si256();
    kq_block_rows(p, x, rows, mins, &isum, &imin);
    k_float_steps(_mm256_set1_ps(p->d), _mm256_set1_ps(p->dmin), dx, isum, imin, mins, a);
}

/* kq_chunk with the row count a constant in each case: experts in a prompt often get only a
 * few tokens, and a chunk then does only their work. */
INLINE void kq_chunk_n(const struct kq_prep *p, const uint8_t *const x[KQ_ROWS], __m256 dx,
                       int rows, bool mins, __m256 *a) {
    switch (rows) {
    case 1:
        kq_chunk(p, x, dx, 1, mins, a);
        break;
    case 2:
        kq_chunk(p, x, dx, 2, mins, a);
        break;
    case 3:
        kq_chunk(p, x, dx, 3, mins, a);
        break;
    case 4:
        kq_chunk(p, x, dx, 4, mins, a);
        break;
    case 5:
        kq_chunk(p, x, dx, 5, mins, a);
        break;
    case 6:
        kq_chunk(p, x, dx, 6, mins, a);
        break;
    case 7:
        kq_chunk(p, x, dx, 7, mins, a);
        break;
    default:
        kq_chunk(p, x, dx, KQ_ROWS, mins, a);
        break;
    }
}

/* A tile of the product: up to KQ_WROWS weight rows x KQ_PASS activation rows. For each
 * super-block, the activation blocks of the pass (KQ_PASS x 292 bytes, 18 KiB) serve all the
 * tile's weight rows while they are in L1, and each weight block is unpacked once for the
 * pass; the float accumulators (KQ_WROWS x KQ_PASS x 8 floats, 16 KiB) stay on the stack. */
#define KQ_WROWS 8
#define KQ_PASS  64

struct kq_tile {
    __m256 a[KQ_WROWS][KQ_PASS / KQ_ROWS][8];      /* [weight row][chunk][b % 8], lane = act row */
    const uint8_t *xb[KQ_PASS / KQ_ROWS][KQ_ROWS]; /* the current super-block's activation blocks */
    __m256 dx[KQ_PASS / KQ_ROWS];                  /* and their d_x, per chunk */
};

/* The activation blocks b of chunk c's rows (the unused lanes of a short chunk repeat its
 * first row). */
INLINE void kq_chunk_rows(const uint8_t *x, size_t x_stride, int j0, int rows, int64_t b,
                          const uint8_t *xb[KQ_ROWS]) {
    for (int j = 0; j < KQ_ROWS; j++)
        xb[j] = x + (size_t)(j0 + (j < rows ? j : 0)) * x_stride + (size_t)b * QK_K_BYTES_X;
}

/* hsum8_lanes, and the first `rows` lanes stored y_stride floats apart. */
INLINE void kq_store(const __m256 v[8], int rows, float *y, size_t y_stride) {
    float out[KQ_ROWS];
    _mm256_storeu_ps(out, hsum8_lanes(v));
    for (int j = 0; j < rows; j++)
        y[(size_t)j * y_stride] = out[j];
}

/* PREP(wb, &prep) unpacks one weight super-block of wbytes; mins: the type has dmin. */
#define KQ_GEMM(t, wbytes, PREP, mins)                                                             \
    static void gemm_tile_##t(int64_t n, int nw, int mp, float *y, size_t y_stride,                \
                              const uint8_t *w, size_t w_stride, const uint8_t *x,                 \
                              size_t x_stride, struct kq_tile *tile) {                             \
        const int n_chunks = (mp + KQ_ROWS - 1) / KQ_ROWS;                                         \
        for (int r = 0; r < nw; r++)                                                               \
            for (int c = 0; c < n_chunks; c++)                                                     \
                for (int k = 0; k < 8; k++)                                                        \
                    tile->a[r][c][k] = _mm256_setzero_ps();                                        \
        for (int64_t b = 0; b < n / 256; b++) {                                                    \
            for (int c = 0; c < n_chunks; c++) {                                                   \
                const int rows = mp - KQ_ROWS * c < KQ_ROWS ? mp - KQ_ROWS * c : KQ_ROWS;          \
                kq_chunk_rows(x, x_stride, KQ_ROWS *c, rows, b, tile->xb[c]);                      \
                tile->dx[c] = kq_dx(tile->xb[c]);                                                  \
            }                                                                                      \
            for (int r = 0; r < nw; r++) {                                                         \
                const uint8_t *wrb = w + (size_t)r * w_stride + (size_t)b * (wbytes);              \
                /* the next tile's block: a prompt's expert weights come from DRAM once */         \
                prefetch_block(wrb, KQ_WROWS *w_stride, wbytes);                                   \
                struct kq_prep p;                                                                  \
                PREP(wrb, &p);                                                                     \
                for (int c = 0; c < n_chunks; c++) {                                               \
                    const int rows = mp - KQ_ROWS * c < KQ_ROWS ? mp - KQ_ROWS * c : KQ_ROWS;      \
                    kq_chunk_n(&p, tile->xb[c], tile->dx[c], rows, (mins), &tile->a[r][c][b & 7]); \
                }                                                                                  \
            }                                                                                      \
        }                                                                                          \
        for (int r = 0; r < nw; r++)                                                               \
            for (int c = 0; c < n_chunks; c++) {                                                   \
                const int rows = mp - KQ_ROWS * c < KQ_ROWS ? mp - KQ_ROWS * c : KQ_ROWS;          \
                kq_store(tile->a[r][c], rows, y + (size_t)(KQ_ROWS * c) * y_stride + r, y_stride); \
            }                                                                                      \
    }                                                                                              \
    static void kq_gemm_##t(int64_t n, int64_t nr, int m, float *y, size_t y_stride,               \
                            const void *w, size_t w_stride, const void *x, size_t x_stride) {      \
        struct kq_tile tile;                                                                       \
        for (int64_t r0 = 0; r0 < nr; r0 += KQ_WROWS)                                              \
            for (int j0 = 0; j0 < m; j0 += KQ_PASS)                                                \
                gemm_tile_##t(n, nr - r0 < KQ_WROWS ? (int)(nr - r0) : KQ_WROWS,                   \
                              m - j0 < KQ_PASS ? m - j0 : KQ_PASS, y + (size_t)j0 * y_stride + r0, \
                              y_stride, (const uint8_t *)w + (size_t)r0 * w_stride, w_stride,      \
                              (const uint8_t *)x + (size_t)j0 * x_stride, x_stride, &tile);        \
    }                                                                                              \
    static void vec_dot_m_##t(int64_t n, int m, float *s, const void *w, const void *x,            \
                              size_t x_stride) {                                                   \
        kq_gemm_##t(n, 1, m, s, 1, w, 0, x, x_stride);                                             \
    }

#define KQ_PREP_4(wb, p) kq_prep_45((wb), false, true, (p))
#define KQ_PREP_5(wb, p) kq_prep_45((wb), true, true, (p))
#define KQ_PREP_6(wb, p) kq_prep_6((wb), (p))
KQ_GEMM(q4_k, 144, KQ_PREP_4, true)
KQ_GEMM(q5_k, 176, KQ_PREP_5, true)
KQ_GEMM(q6_k, 210, KQ_PREP_6, false)

/* The tables' K-quant gemm: the amx table's AMX-INT8 tile, which leaves calls of few
 * activation rows and a call's last rows (fewer than 16) to the tile above; the others' the
 * tile above. */
#if defined(X86_AMX)
#    include "quant/kernels_x86_amxk.h" /* amxk_gemm */
#    define KQ_ENTRY(t, kind, wbytes)                                                              \
        static void gemm_##t(int64_t n, int64_t nr, int m, float *y, size_t y_stride,              \
                             const void *w, size_t w_stride, const void *x, size_t x_stride) {     \
            amxk_gemm((kind), (wbytes), n, nr, m, y, y_stride, w, w_stride, x, x_stride,           \
                      kq_gemm_##t);                                                                \
        }
#else
#    define KQ_ENTRY(t, kind, wbytes)                                                              \
        static void gemm_##t(int64_t n, int64_t nr, int m, float *y, size_t y_stride,              \
                             const void *w, size_t w_stride, const void *x, size_t x_stride) {     \
            kq_gemm_##t(n, nr, m, y, y_stride, w, w_stride, x, x_stride);                          \
        }
#endif
KQ_ENTRY(q4_k, AMXK_Q4_K, 144)
KQ_ENTRY(q5_k, AMXK_Q5_K, 176)
KQ_ENTRY(q6_k, AMXK_Q6_K, 210)

#if !defined(X86_AVX512)
/* The AVX2 steps of the eight-row decode driver (kernels_x86_krows.h), Q4_K (five = false) or
 * Q5_K: each row's block is unpacked as a prefill tile unpacks it, with one scale multiplier
 * per quant vector (in decode each unpacked block meets one activation block, and kq_pair's
 * regrouping would cost more instructions than the multiplies it saves), and the activation
 * block's 32-byte groups are read from L1 for each row. */
INLINE void ky_step(const uint8_t *const wr[KR_ROWS], size_t boff, bool five, const uint8_t *xb,
                    __m256 *a) {
    const __m256i bs = _mm256_loadu_si256((const __m256i *)(const void *)(xb + 260));
    __m256i acc[KR_ROWS];
    __m256i mn[KR_ROWS];
    for (int k = 0; k < KR_ROWS; k++) {
        struct kq_prep p;
        kq_prep_45(wr[k] + boff, five, false, &p);
        __m256i sum = _mm256_setzero_si256();
        for (size_t i = 0; i < 8; i++) {
            __m256i xv = _mm256_loadu_si256((const __m256i *)(const void *)(xb + 4 + 32 * i));
            sum = KQ_DPWSSD(sum, _mm256_maddubs_epi16(p.q[i], xv), p.sc[i]);
        }
        mn[k] = _mm256_madd_epi16(bs, p.bs_mul);
        acc[k] = sum;
    }
    k_float_steps(kr_f16x8(wr, boff, 0), kr_f16x8(wr, boff, 2), _mm256_set1_ps(k_d_x(xb)),
                  sum_lanes8(acc), sum_lanes8(mn), true, a);
}

/* Q4_K and Q6_K have AVX2 decode steps of their own (kernels_x86_kdecode.h) that unpack each
 * row's quants next to the multiply-adds that use them: kq_prep's sixteen vectors (quants and
 * scale multipliers) are all of AVX2's registers, and the compiler spilled them. Same sums,
 * same order of float steps as ky_step. Two helpers of theirs: */
/* Bytes 0-15 (d, dmin, the 12 scale bytes) of two rows' blocks, row 0 in the low 128 bits. */
INLINE __m256i ky2_heads(const uint8_t *p0, const uint8_t *p1) {
    return _mm256_inserti128_si256(
        _mm256_castsi128_si256(_mm_loadu_si128((const __m128i *)(const void *)p0)),
        _mm_loadu_si128((const __m128i *)(const void *)p1), 1);
}

/* k4_scales_mins of both rows of ky2_heads (each lane: 8 scales, 8 mins), its shuffles moved
 * 4 bytes on for the head's d and dmin. */
INLINE __m256i ky2_scales_mins(__m256i v) {
    const struct k4_sm_lane c = k4_sm_lane();
    const __m256i a = _mm256_shuffle_epi8(
        v, _mm256_broadcastsi128_si256(
               _mm_setr_epi8(4, 5, 6, 7, 12, 13, 14, 15, 8, 9, 10, 11, 12, 13, 14, 15)));
    const __m256i b = _mm256_shuffle_epi8(
        v, _mm256_broadcastsi128_si256(
               _mm_setr_epi8(-1, -1, -1, -1, 4, 5, 6, 7, -1, -1, -1, -1, 8, 9, 10, 11)));
    const __m256i low6 = _mm256_and_si256(a, _mm256_broadcastsi128_si256(c.low6));
    const __m256i nib_lo = _mm256_and_si256(a, _mm256_broadcastsi128_si256(c.nib_lo));
    const __m256i nib_hi =
        _mm256_and_si256(_mm256_srli_epi16(a, 4), _mm256_broadcastsi128_si256(c.nib_hi));
    const __m256i top =
        _mm256_and_si256(_mm256_srli_epi16(b, 2), _mm256_broadcastsi128_si256(c.top));
    return _mm256_or_si256(_mm256_or_si256(low6, nib_lo), _mm256_or_si256(nib_hi, top));
}

#    define KY_Q5K_STEP(wr, boff, xb, a) ky_step((wr), (boff), true, (xb), (a))
KR_ROWS_KERNEL(q5_k, 176, KY_Q5K_STEP)
#endif

#endif
