/*
 * kernels_x86.h - the x86 kernel bodies, included by kernels_avx2.c, kernels_avx512.c and
 * kernels_amx.c, each compiled with its own ISA flags. Everything here is static; each
 * including file builds its table from these functions and exports only its getter.
 *
 * Switches (defined by the including file before the #include):
 *   X86_VNNI    int8 block dots with vpdpbusd (AVX512-VNNI) instead of vpmaddubsw +
 *               vpmaddwd: the 256-bit form, and the 512-bit one in the Q8_0-family prefill
 *               tile
 *   X86_AVX512  F32/F16/BF16 dots in 512-bit registers
 *   X86_AMX     the prefill tiles (gemm) of the Q8_0 family and the K-quants on AMX-INT8
 *               tile registers (kernels_x86_amx.h, kernels_x86_amxk.h)
 *
 * DESIGN: the results must equal the scalar twins (quant_ref.c) bit for bit, so every kernel
 * follows the summation order fixed in quant.h:
 *   - float dots keep the 32 partial sums P[k % 32] as 4 x 8 lanes (AVX2) or 2 x 16 lanes
 *     (AVX-512) and reduce them in the one fixed tree;
 *   - block dots work on groups of 8 blocks: the 8 exact integer block sums are gathered into
 *     one vector (lane b = block b of the group), scaled by d_w * d_x and added with one fma
 *     into an 8-lane accumulator, so lane l holds the blocks b with b % 8 == l.
 * A last partial chunk is copied into a zero-padded buffer: zero elements (and zero scales)
 * add fma(0, 0, acc) = acc, which leaves every accumulator as the scalar code leaves it.
 *
 * vec_dot_m (prefill) prepares each chunk of the weight row once (loads, Q4_0 nibble unpack,
 * scales) and applies it to up to 8 activation rows; the per-row arithmetic is the same
 * instruction sequence as vec_dot, so the results are identical.
 *
 * The int8 dot uses the sign trick: |w| (unsigned) times x with w's sign. It is exact for w
 * in [-128, 127] and x in [-127, 127] (pairs reach at most 2 * 128 * 127 = 32512 < 32767),
 * which from_float guarantees for finite activations.
 */
#ifndef MOEINF_QUANT_KERNELS_X86_H
#define MOEINF_QUANT_KERNELS_X86_H

#include <immintrin.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "quant/kernels.h"
#include "quant/quant_ref.h"
#include "quant/softmax.h"

#define INLINE static inline __attribute__((always_inline))

#define Q8_BYTES 34 /* sizeof(struct moeinf_block_q8_0) */
#define Q4_BYTES 18 /* sizeof(struct moeinf_block_q4_0) */

/* ---- small helpers ---------------------------------------------------------------------- */

INLINE uint16_t load_u16(const uint8_t *p) {
    uint16_t v;
    memcpy(&v, p, sizeof v);
    return v;
}

/* A prefetch hint for the byte `ahead` bytes past p. The kernels prefetch a fixed distance
 * ahead, which on the last rows lies past the end of the weight matrix: forming that address
 * by pointer arithmetic would be undefined behaviour, so it is computed as an integer (a
 * prefetch never faults, whatever the address). */
INLINE void prefetch_ahead(const void *p, size_t ahead) {
    /* NOLINTNEXTLINE(performance-no-int-to-ptr): the address may lie outside every object */
    _mm_prefetch((const char *)(uintptr_t)((uintptr_t)p + ahead), _MM_HINT_T0);
}

/* Prefetches the `bytes` bytes that start `ahead` bytes past p: one hint per 64 bytes, so that
 * the hints keep pace with the reads whatever the block size (each step's lines overlap the
 * next step's). A fixed three lines fell behind on Q6_K (210-byte blocks: 3.3 lines a step;
 * docs/PERFORMANCE.md, 2026-12-02, K-quant rows prefetch one line per 64 bytes of block); on
 * 18-24-byte blocks it is one hint a block, not three. */
INLINE void prefetch_block(const void *p, size_t ahead, size_t bytes) {
    for (size_t l = 0; l < bytes; l += 64)
        prefetch_ahead(p, ahead + l);
}

/* ((v0 + v4) + (v2 + v6)) + ((v1 + v5) + (v3 + v7)), as quant_ref.c's hsum8. */
INLINE float hsum8_ps(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

/* Eight F16 scales p, p + stride, ... as floats. */
INLINE __m256 load_scales8(const uint8_t *p, size_t stride) {
    __m128i h = _mm_cvtsi32_si128(load_u16(p));
    h = _mm_insert_epi16(h, load_u16(p + stride), 1);
    h = _mm_insert_epi16(h, load_u16(p + 2 * stride), 2);
    h = _mm_insert_epi16(h, load_u16(p + 3 * stride), 3);
    h = _mm_insert_epi16(h, load_u16(p + 4 * stride), 4);
    h = _mm_insert_epi16(h, load_u16(p + 5 * stride), 5);
    h = _mm_insert_epi16(h, load_u16(p + 6 * stride), 6);
    h = _mm_insert_epi16(h, load_u16(p + 7 * stride), 7);
    return _mm256_cvtph_ps(h);
}

/* ---- float dots (F32, F16, BF16) ------------------------------------------------------------ */

enum fkind {
    FK_F32,
    FK_F16,
    FK_BF16
};

INLINE size_t fk_size(enum fkind k) {
    return k == FK_F32 ? 4 : 2;
}

INLINE __m256 fload8(enum fkind k, const uint8_t *p) {
    if (k == FK_F32) return _mm256_loadu_ps((const float *)(const void *)p);
    __m128i h = _mm_loadu_si128((const __m128i *)(const void *)p);
    if (k == FK_F16) return _mm256_cvtph_ps(h);
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
}

/* Maximum rows per pass of the float dots (all accumulators stay in registers). */
#if defined(X86_AVX512)
#    define FROWS 4

INLINE __m512 fload16(enum fkind k, const uint8_t *p) {
    if (k == FK_F32) return _mm512_loadu_ps(p);
    __m256i h = _mm256_loadu_si256((const __m256i *)(const void *)p);
    if (k == FK_F16) return _mm512_cvtph_ps(h);
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
}

/* acc[r][0] holds P[0..15], acc[r][1] P[16..31] of row r. w's elements of kind k, x's of kx. */
INLINE void fdot_rows2(enum fkind k, enum fkind kx, int n_rows, int64_t n, float *s,
                       const uint8_t *w, const uint8_t *x, size_t stride) {
    const size_t es = fk_size(k);
    const size_t xs = fk_size(kx);
    __m512 acc[FROWS][2];
#    pragma GCC unroll 4
    for (int r = 0; r < n_rows; r++)
        acc[r][0] = acc[r][1] = _mm512_setzero_ps();
    int64_t i = 0;
    for (; i + 32 <= n; i += 32) {
        const uint8_t *wp = w + (size_t)i * es;
        __m512 w0 = fload16(k, wp);
        __m512 w1 = fload16(k, wp + 16 * es);
#    pragma GCC unroll 4
        for (int r = 0; r < n_rows; r++) {
            const uint8_t *xp = x + (size_t)r * stride + (size_t)i * xs;
            acc[r][0] = _mm512_fmadd_ps(w0, fload16(kx, xp), acc[r][0]);
            acc[r][1] = _mm512_fmadd_ps(w1, fload16(kx, xp + 16 * xs), acc[r][1]);
        }
    }
    if (i < n) {
        uint8_t wt[128] = {0};
        memcpy(wt, w + (size_t)i * es, (size_t)(n - i) * es);
        __m512 w0 = fload16(k, wt);
        __m512 w1 = fload16(k, wt + 16 * es);
#    pragma GCC unroll 4
        for (int r = 0; r < n_rows; r++) {
            uint8_t xt[128] = {0};
            memcpy(xt, x + (size_t)r * stride + (size_t)i * xs, (size_t)(n - i) * xs);
            acc[r][0] = _mm512_fmadd_ps(w0, fload16(kx, xt), acc[r][0]);
            acc[r][1] = _mm512_fmadd_ps(w1, fload16(kx, xt + 16 * xs), acc[r][1]);
        }
    }
#    pragma GCC unroll 4
    for (int r = 0; r < n_rows; r++) {
        /* (P[l] + P[l+8]) + (P[l+16] + P[l+24]) */
        __m256 a =
            _mm256_add_ps(_mm512_castps512_ps256(acc[r][0]), _mm512_extractf32x8_ps(acc[r][0], 1));
        __m256 b =
            _mm256_add_ps(_mm512_castps512_ps256(acc[r][1]), _mm512_extractf32x8_ps(acc[r][1], 1));
        s[r] = hsum8_ps(_mm256_add_ps(a, b));
    }
}
#else
#    define FROWS 2

/* acc[r][j] holds P[8j .. 8j+7] of row r. w's elements of kind k, x's of kx. */
INLINE void fdot_rows2(enum fkind k, enum fkind kx, int n_rows, int64_t n, float *s,
                       const uint8_t *w, const uint8_t *x, size_t stride) {
    const size_t es = fk_size(k);
    const size_t xs = fk_size(kx);
    __m256 acc[FROWS][4];
#    pragma GCC unroll 2
    for (int r = 0; r < n_rows; r++)
        acc[r][0] = acc[r][1] = acc[r][2] = acc[r][3] = _mm256_setzero_ps();
    int64_t i = 0;
    for (; i + 32 <= n; i += 32) {
#    pragma GCC unroll 4
        for (int j = 0; j < 4; j++) {
            __m256 wv = fload8(k, w + (size_t)(i + 8 * (int64_t)j) * es);
#    pragma GCC unroll 2
            for (int r = 0; r < n_rows; r++) {
                const uint8_t *xp = x + (size_t)r * stride + (size_t)(i + 8 * (int64_t)j) * xs;
                acc[r][j] = _mm256_fmadd_ps(wv, fload8(kx, xp), acc[r][j]);
            }
        }
    }
    if (i < n) {
        uint8_t wt[128] = {0};
        memcpy(wt, w + (size_t)i * es, (size_t)(n - i) * es);
#    pragma GCC unroll 2
        for (int r = 0; r < n_rows; r++) {
            uint8_t xt[128] = {0};
            memcpy(xt, x + (size_t)r * stride + (size_t)i * xs, (size_t)(n - i) * xs);
#    pragma GCC unroll 4
            for (int j = 0; j < 4; j++)
                acc[r][j] = _mm256_fmadd_ps(fload8(k, wt + 8 * (size_t)j * es),
                                            fload8(kx, xt + 8 * (size_t)j * xs), acc[r][j]);
        }
    }
#    pragma GCC unroll 2
    for (int r = 0; r < n_rows; r++) {
        __m256 q =
            _mm256_add_ps(_mm256_add_ps(acc[r][0], acc[r][1]), _mm256_add_ps(acc[r][2], acc[r][3]));
        s[r] = hsum8_ps(q);
    }
}
#endif

/* Both of kind k. */
INLINE void fdot_rows(enum fkind k, int n_rows, int64_t n, float *s, const uint8_t *w,
                      const uint8_t *x, size_t stride) {
    fdot_rows2(k, k, n_rows, n, s, w, x, stride);
}

INLINE void fdot_m(enum fkind k, int64_t n, int m, float *s, const void *w, const void *x,
                   size_t stride) {
    const uint8_t *xb = x;
    int r = 0;
    for (; r + FROWS <= m; r += FROWS)
        fdot_rows(k, FROWS, n, s + r, w, xb + (size_t)r * stride, stride);
    for (; r < m; r++)
        fdot_rows(k, 1, n, s + r, w, xb + (size_t)r * stride, stride);
}

static void vec_dot_f32(int64_t n, float *s, const void *w, const void *x) {
    fdot_rows(FK_F32, 1, n, s, w, x, 0);
}

static void vec_dot_f16(int64_t n, float *s, const void *w, const void *x) {
    fdot_rows(FK_F16, 1, n, s, w, x, 0);
}

static void vec_dot_bf16(int64_t n, float *s, const void *w, const void *x) {
    fdot_rows(FK_BF16, 1, n, s, w, x, 0);
}

static void vec_dot_m_f32(int64_t n, int m, float *s, const void *w, const void *x, size_t st) {
    fdot_m(FK_F32, n, m, s, w, x, st);
}

static void vec_dot_m_f16(int64_t n, int m, float *s, const void *w, const void *x, size_t st) {
    fdot_m(FK_F16, n, m, s, w, x, st);
}

static void vec_dot_m_bf16(int64_t n, int m, float *s, const void *w, const void *x, size_t st) {
    fdot_m(FK_BF16, n, m, s, w, x, st);
}

/* ---- codebook lookups (IQ4_NL, IQ4_XS, MXFP4; their kernels are further down) ------------- */

#define IQ4NL_BYTES 18  /* sizeof(struct moeinf_block_iq4_nl): d, qs[16] */
#define IQ4XS_BYTES 136 /* sizeof(struct moeinf_block_iq4_xs): d, scales_h, scales_l, qs */
#define MXFP4_BYTES 17  /* sizeof(struct moeinf_block_mxfp4): e, qs[16] */

/* A 16-entry int8 codebook in both 128-bit lanes, for vpshufb. */
INLINE __m256i iq_codebook(const int8_t table[16]) {
    return _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)(const void *)table));
}

/* The 32 codebook values of 16 bytes of indices, element order (low nibbles, then high). */
INLINE __m256i iq_values(__m256i table, const uint8_t *qs) {
    __m256i v = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)(const void *)qs));
    v = _mm256_srlv_epi64(v, _mm256_setr_epi64x(0, 0, 4, 4));
    return _mm256_shuffle_epi8(table, _mm256_and_si256(v, _mm256_set1_epi8(0x0f)));
}

/* The sum of 8 int32 lanes (exact, any order). */
INLINE int32_t iq_hsum_epi32(__m256i p) {
    __m128i r = _mm_add_epi32(_mm256_castsi256_si128(p), _mm256_extracti128_si256(p, 1));
    r = _mm_add_epi32(r, _mm_shuffle_epi32(r, 0x4e));
    r = _mm_add_epi32(r, _mm_shuffle_epi32(r, 0xb1));
    return _mm_cvtsi128_si32(r);
}

/* MXFP4's halved E8M0 scale, 2^(e-128), as moeinf_e8m0_to_fp32_half. */
INLINE float iq_e8m0_half(uint8_t e) {
    uint32_t bits = e < 2 ? 0x00200000u << e : (uint32_t)(e - 1) << 23;
    float f;
    memcpy(&f, &bits, sizeof f);
    return f;
}

/* iq_e8m0_half of the 8 E8M0 bytes of b (lane k: byte k), exact for every e. */
INLINE __m256 iq_e8m0_half8_u64(uint64_t b) {
    const __m256i e = _mm256_cvtepu8_epi32(_mm_cvtsi64_si128((long long)b));
    const __m256i normal = _mm256_slli_epi32(_mm256_sub_epi32(e, _mm256_set1_epi32(1)), 23);
    const __m256i sub = _mm256_sllv_epi32(_mm256_set1_epi32(0x00200000), e); /* e < 2 */
    const __m256i is_sub = _mm256_cmpgt_epi32(_mm256_set1_epi32(2), e);
    return _mm256_castsi256_ps(_mm256_blendv_epi8(normal, sub, is_sub));
}

/* iq_e8m0_half8_u64 of the 8 E8M0 bytes at p + idx[k] (lane k). The bytes are read one by one
 * into a 64-bit word (a vpgatherdd of the 8 measured no faster). */
INLINE __m256 iq_e8m0_half8(const uint8_t *p, __m256i idx) {
    int32_t o[8];
    _mm256_storeu_si256((__m256i *)(void *)o, idx);
    uint64_t b = (uint64_t)p[o[0]] | (uint64_t)p[o[1]] << 8 | (uint64_t)p[o[2]] << 16 |
                 (uint64_t)p[o[3]] << 24 | (uint64_t)p[o[4]] << 32 | (uint64_t)p[o[5]] << 40 |
                 (uint64_t)p[o[6]] << 48 | (uint64_t)p[o[7]] << 56;
    return iq_e8m0_half8_u64(b);
}

/* ---- block dots (Q8_0, Q4_0, Q5_0, IQ4_NL, MXFP4 weights x Q8_0 activations) --------------- */

enum qkind {
    QK_Q8_0,
    QK_Q4_0,
    QK_Q5_0,
    QK_IQ4_NL, /* codebook values (int8, |v| <= 127) in the same sign-trick dot */
    QK_MXFP4
};

#define Q5_BYTES 22 /* sizeof(struct moeinf_block_q5_0): d, qh[4], qs[16] */

INLINE size_t qk_bytes(enum qkind k) {
    return k == QK_Q8_0     ? Q8_BYTES
           : k == QK_Q4_0   ? Q4_BYTES
           : k == QK_Q5_0   ? Q5_BYTES
           : k == QK_IQ4_NL ? IQ4NL_BYTES
                            : MXFP4_BYTES;
}

/* dot_i8 with |w| (aw = _mm256_sign_epi8(w, w)) given: the prefill tiles compute it once per
 * weight block for all their activation rows. */
INLINE __m256i dot_i8_aw(__m256i aw, __m256i w, __m256i x) {
    __m256i sx = _mm256_sign_epi8(x, w); /* x with w's sign (0 where w = 0) */
#if defined(X86_VNNI)
    return _mm256_dpbusd_epi32(_mm256_setzero_si256(), aw, sx);
#else
    return _mm256_madd_epi16(_mm256_maddubs_epi16(aw, sx), _mm256_set1_epi16(1));
#endif
}

/* Eight int32 lanes whose sum is the exact dot of two 32 x int8 blocks. */
INLINE __m256i dot_i8(__m256i w, __m256i x) {
    /* |w|, read as unsigned (-128 -> 128) */
    return dot_i8_aw(_mm256_sign_epi8(w, w), w, x);
}

/* Lane b = the sum of the 8 int32 lanes of p[b]: the 8 block sums of a group, in block order
 * (the K-quant kernels: the 8 rows' sums, in row order). */
INLINE __m256i sum_lanes8(const __m256i p[8]) {
    __m256i h01 = _mm256_hadd_epi32(p[0], p[1]);
    __m256i h23 = _mm256_hadd_epi32(p[2], p[3]);
    __m256i h45 = _mm256_hadd_epi32(p[4], p[5]);
    __m256i h67 = _mm256_hadd_epi32(p[6], p[7]);
    __m256i h0123 = _mm256_hadd_epi32(h01, h23); /* [b0..b3 lanes 0-3 | b0..b3 lanes 4-7] */
    __m256i h4567 = _mm256_hadd_epi32(h45, h67);
    /* the halves regrouped by insert/extract, not vperm2i128 (8 uops on Zen 1, 1 on Intel) */
    __m256i lo = _mm256_inserti128_si256(h0123, _mm256_castsi256_si128(h4567), 1);
    __m256i hi = _mm256_inserti128_si256(h4567, _mm256_extracti128_si256(h0123, 1), 0);
    return _mm256_add_epi32(lo, hi);
}

/* The 32 quants of a Q4_0 block as int8 in [-8, 7], element order. */
INLINE __m256i unpack_q4_0(const uint8_t *qs) {
    /* Both halves get the 16 bytes (a load, no shuffle); the upper half is shifted by 4. */
    __m256i v = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)(const void *)qs));
    v = _mm256_srlv_epi64(v, _mm256_setr_epi64x(0, 0, 4, 4));
    v = _mm256_and_si256(v, _mm256_set1_epi8(0x0f));
    return _mm256_sub_epi8(v, _mm256_set1_epi8(8));
}

/* The 32 quants of a Q5_0 block as int8 in [-16, 15]: Q4_0's nibbles plus bit 4 from qh
 * (byte j of the vector takes bit j of the 32-bit word: each byte gets byte j / 8 of the word,
 * then all bits but bit j % 8 are set and the byte compared with 0xff). */
INLINE __m256i hbits_x10(const uint8_t *qh) {
    uint32_t h;
    memcpy(&h, qh, sizeof h);
    __m256i v = _mm256_shuffle_epi8(
        _mm256_set1_epi32((int)h),
        _mm256_setr_epi64x(0, 0x0101010101010101LL, 0x0202020202020202LL, 0x0303030303030303LL));
    v = _mm256_or_si256(v, _mm256_set1_epi64x(0x7fbfdfeff7fbfdfeLL));
    return _mm256_and_si256(_mm256_cmpeq_epi8(v, _mm256_set1_epi8(-1)), _mm256_set1_epi8(0x10));
}

/* The 32 unsigned nibbles of a block's qs[16], element order. */
INLINE __m256i nibbles_u8(const uint8_t *qs) {
    return _mm256_add_epi8(unpack_q4_0(qs), _mm256_set1_epi8(8));
}

INLINE __m256i unpack_q5_0(const uint8_t *blk) {
    __m256i q = _mm256_or_si256(nibbles_u8(blk + 6), hbits_x10(blk + 2)); /* 0..31 */
    return _mm256_sub_epi8(q, _mm256_set1_epi8(16));
}

/* The 32 weights of one block of kind k as int8, element order (table: k's codebook). */
INLINE __m256i qvalues(enum qkind k, __m256i table, const uint8_t *blk) {
    return k == QK_Q8_0     ? _mm256_loadu_si256((const __m256i *)(const void *)(blk + 2))
           : k == QK_Q4_0   ? unpack_q4_0(blk + 2)
           : k == QK_Q5_0   ? unpack_q5_0(blk)
           : k == QK_IQ4_NL ? iq_values(table, blk + 2)
                            : iq_values(table, blk + 1);
}

INLINE __m256i qcodebook(enum qkind k) {
    return iq_codebook(k == QK_MXFP4 ? moeinf_kvalues_mxfp4 : moeinf_kvalues_iq4nl);
}

/* The weight side of a group of 8 blocks at wg: quants (or codebook values), their magnitudes
 * (the sign trick's unsigned operand, once for every activation row) and scales. */
INLINE void qprep(enum qkind k, const uint8_t *wg, __m256i wq[8], __m256i aw[8], __m256 *dw) {
    const size_t bs = qk_bytes(k);
    const __m256i table = qcodebook(k);
    for (int b = 0; b < 8; b++) {
        wq[b] = qvalues(k, table, wg + (size_t)b * bs);
        aw[b] = _mm256_sign_epi8(wq[b], wq[b]);
    }
    if (k == QK_MXFP4)
        *dw = iq_e8m0_half8(wg, _mm256_setr_epi32(0, 17, 34, 51, 68, 85, 102, 119));
    else
        *dw = load_scales8(wg, bs);
}

/* acc + (d_w * d_x) * isum for the group of 8 Q8_0 activation blocks at xg, whose scales
 * d_x are given (the prefill tiles load them once for all their weight rows). */
INLINE __m256 qgroup_dx(const __m256i wq[8], const __m256i aw[8], __m256 dw, const uint8_t *xg,
                        __m256 dx, __m256 acc) {
    __m256i p[8];
    for (int b = 0; b < 8; b++) {
        const uint8_t *qs = xg + (size_t)b * Q8_BYTES + 2;
        p[b] = dot_i8_aw(aw[b], wq[b], _mm256_loadu_si256((const __m256i *)(const void *)qs));
    }
    return _mm256_fmadd_ps(_mm256_mul_ps(dw, dx), _mm256_cvtepi32_ps(sum_lanes8(p)), acc);
}

#if !defined(X86_VNNI)
/* qgroup_dx for weights of magnitude at most 16 (Q4_0: 8, Q5_0: 16, MXFP4: 12) with half the
 * vpmaddwd and a third of the vphaddd: a vpmaddubsw lane of the sign-trick dot is then at most
 * 2 x 16 x 127 = 4064 in magnitude, so the lanes of two blocks are regrouped by 64-bit halves
 * (unpacklo/hi_epi64: block 2c's lanes in int16 lanes 0-3 and 8-11, block 2c + 1's in 4-7 and
 * 12-15) and added in int16 (8128 at most), and one vpmaddwd against ones widens both blocks;
 * the same exact block sums as sum_lanes8's, in the same lanes. */
INLINE __m256 qgroup_dx_small(const __m256i wq[8], const __m256i aw[8], __m256 dw,
                              const uint8_t *xg, __m256 dx, __m256 acc) {
    const __m256i ones = _mm256_set1_epi16(1);
    __m256i u[4];
    for (int c = 0; c < 4; c++) {
        __m256i m[2];
        for (int i = 0; i < 2; i++) {
            const int b = 2 * c + i;
            const __m256i x =
                _mm256_loadu_si256((const __m256i *)(const void *)(xg + (size_t)b * Q8_BYTES + 2));
            m[i] = _mm256_maddubs_epi16(aw[b], _mm256_sign_epi8(x, wq[b]));
        }
        u[c] = _mm256_madd_epi16(
            _mm256_add_epi16(_mm256_unpacklo_epi64(m[0], m[1]), _mm256_unpackhi_epi64(m[0], m[1])),
            ones); /* int32 lanes [2c 2c 2c+1 2c+1 | the same] */
    }
    const __m256i h0123 = _mm256_hadd_epi32(u[0], u[1]); /* [b0 b1 b2 b3 | b0 b1 b2 b3] */
    const __m256i h4567 = _mm256_hadd_epi32(u[2], u[3]);
    const __m256i lo = _mm256_inserti128_si256(h0123, _mm256_castsi256_si128(h4567), 1);
    const __m256i hi = _mm256_inserti128_si256(h4567, _mm256_extracti128_si256(h0123, 1), 0);
    return _mm256_fmadd_ps(_mm256_mul_ps(dw, dx), _mm256_cvtepi32_ps(_mm256_add_epi32(lo, hi)),
                           acc);
}

#    define QGROUP_DX(k, wq, aw, dw, xg, dx, acc)                                                  \
        ((k) == QK_Q4_0 || (k) == QK_Q5_0 || (k) == QK_MXFP4                                       \
             ? qgroup_dx_small((wq), (aw), (dw), (xg), (dx), (acc))                                \
             : qgroup_dx((wq), (aw), (dw), (xg), (dx), (acc)))
#else
#    define QGROUP_DX(k, wq, aw, dw, xg, dx, acc) qgroup_dx((wq), (aw), (dw), (xg), (dx), (acc))
#endif

INLINE __m256 qgroup(const __m256i wq[8], const __m256i aw[8], __m256 dw, const uint8_t *xg,
                     __m256 acc) {
    return qgroup_dx(wq, aw, dw, xg, load_scales8(xg, Q8_BYTES), acc);
}

/* s[r] for m rows (m <= 8 per pass; more in passes). */
INLINE void qdot_rows(enum qkind k, int64_t n, int m, float *s, const uint8_t *w, const uint8_t *x,
                      size_t stride) {
    const size_t bs = qk_bytes(k);
    const int64_t nb = n / 32;
    const int64_t ng = nb / 8;
    const int64_t rem = nb % 8;
    for (int r0 = 0; r0 < m; r0 += 8) {
        const int mm = m - r0 < 8 ? m - r0 : 8;
        const uint8_t *xr = x + (size_t)r0 * stride;
        __m256 acc[8];
        for (int r = 0; r < mm; r++)
            acc[r] = _mm256_setzero_ps();
        __m256i wq[8];
        __m256i aw[8];
        __m256 dw;
        for (int64_t g = 0; g < ng; g++) {
            qprep(k, w + (size_t)g * 8 * bs, wq, aw, &dw);
            for (int r = 0; r < mm; r++)
                acc[r] =
                    qgroup(wq, aw, dw, xr + (size_t)r * stride + (size_t)g * 8 * Q8_BYTES, acc[r]);
        }
        if (rem) {
            uint8_t wt[8 * Q8_BYTES] = {0};
            uint8_t xt[8 * Q8_BYTES];
            memcpy(wt, w + (size_t)ng * 8 * bs, (size_t)rem * bs);
            qprep(k, wt, wq, aw, &dw);
            for (int r = 0; r < mm; r++) {
                memset(xt, 0, sizeof xt);
                memcpy(xt, xr + (size_t)r * stride + (size_t)ng * 8 * Q8_BYTES,
                       (size_t)rem * Q8_BYTES);
                acc[r] = qgroup(wq, aw, dw, xt, acc[r]);
            }
        }
        for (int r = 0; r < mm; r++)
            s[r0 + r] = hsum8_ps(acc[r]);
    }
}

static void vec_dot_q8_0(int64_t n, float *s, const void *w, const void *x) {
    qdot_rows(QK_Q8_0, n, 1, s, w, x, 0);
}

static void vec_dot_q4_0(int64_t n, float *s, const void *w, const void *x) {
    qdot_rows(QK_Q4_0, n, 1, s, w, x, 0);
}

static void vec_dot_m_q8_0(int64_t n, int m, float *s, const void *w, const void *x, size_t st) {
    qdot_rows(QK_Q8_0, n, m, s, w, x, st);
}

static void vec_dot_m_q4_0(int64_t n, int m, float *s, const void *w, const void *x, size_t st) {
    qdot_rows(QK_Q4_0, n, m, s, w, x, st);
}

static void vec_dot_q5_0(int64_t n, float *s, const void *w, const void *x) {
    qdot_rows(QK_Q5_0, n, 1, s, w, x, 0);
}

static void vec_dot_m_q5_0(int64_t n, int m, float *s, const void *w, const void *x, size_t st) {
    qdot_rows(QK_Q5_0, n, m, s, w, x, st);
}

#include "quant/kernels_x86_qprefill.h" /* gemm_q8_0, gemm_q4_0, gemm_q5_0 */

/* Decode of Q5_0 (a fallback type of the Q4_K_M mix, for rows that are not whole super-blocks):
 * vec_dot per row, not yet the prepared-activation streaming of Q4_0/Q8_0. */
static void vec_dot_rows_q5_0(int64_t n, int64_t nr, float *s, const void *w, size_t w_stride,
                              const void *x) {
    for (int64_t r = 0; r < nr; r++)
        qdot_rows(QK_Q5_0, n, 1, s + r, (const uint8_t *)w + (size_t)r * w_stride, x, 0);
}

/* ---- decode: many weight rows x one activation row (vec_dot_rows) ---------------------------
 *
 * DESIGN: vec_dot_rows prepares the activation row once per call ("x side", in a stack buffer)
 * and then streams the weight rows through it, so per weight row only the weight side costs:
 *   - Q4_0: dot(w - 8, x) = dot(w, x) - 8 * sum(x) with w the unsigned nibbles 0..15, so
 *     vpmaddubsw takes the nibbles as they are (no sign tricks) and 8 * sum(x) per block is
 *     computed once. The x side holds, per group of 8 blocks, the quants of block pairs
 *     rearranged to match a pair of weight blocks loaded side by side ([low halves of blocks
 *     2k, 2k+1][high halves]), the scales as floats and 8 * sum(x). Each pair gives 16 int16
 *     lanes (8 per block, 4 products each, |lane| <= 4 * 15 * 128); two vphaddw levels and one
 *     vpmaddwd finish the 8 block sums exactly (|lane| <= 30720 before the vpmaddwd). They come
 *     out in lane order PERM4 = blocks 0 2 4 6 1 3 5 7, so the x scales and sums are stored in
 *     that order, the weight scales are gathered in it, and the 8 accumulators A[b % 8] sit in
 *     permuted lanes; hsum8_perm adds them in quant.h's order.
 *   - Q8_0: the same block dot as vec_dot; the x side is the quants copied to aligned rows
 *     and the scales as floats.
 * The x side of a group is one contiguous struct, so the prepared row is one stream for the
 * hardware prefetcher (separate arrays for quants, scales and sums measured slower when the
 * weights stream from DRAM). Rows longer than XCHUNK groups are done in chunks of columns for
 * a few rows at a time, each row's accumulator carried across chunks; the arithmetic per lane
 * is the same, so the result is too. Shorter rows are read Q_STREAMS at a time from far
 * apart (below); each row's own sequence of operations does not change with that either.
 * The instruction sequence is the same in the AVX2 and the AVX-512 table: a 512-bit vpdpbusd
 * Q8_0 version (two blocks a register, weights made unsigned by w ^ 0x80) ran no faster from
 * L2 on an AVX-512 machine, as the loop is bound by its shuffles, not its dot products.
 */

/* Software prefetch distance (bytes ahead in each weight row) of the rows kernels (K-quants,
 * Q4_0, Q8_0, the codebook types): without it the K-quant rows kernels fell well short of the
 * streaming read, with it they reach it; 512 and 2048 measured about the same
 * (docs/PERFORMANCE.md, 2026-12-01, K-quant decode kernels against the streaming read).
 * Prefetches past the last row are hints and never fault. */
#define K_PREFETCH 1024

#define XCHUNK      64 /* groups of 8 blocks prepared at once: 16384 elements, about 20 KiB */
#define XCHUNK_ROWS 4  /* rows per pass when a row needs more than one chunk */

/* Weight rows read side by side by the per-block rows driver (BLOCK_KERNELS, below): rows
 * i, i + q and i + 2q of a call's nr rows (q = nr / 3, the last nr % 3 rows alone), block by
 * block. Three streams far apart keep more DRAM requests in flight than one stream and its
 * hardware prefetch (docs/PERFORMANCE.md, 2026-12-01, Q8_0 and Q4_0 decode rows read far
 * apart). */
#define ROW_STREAMS 3

/* The same for the Q4_0/Q8_0 single-chunk path (ROWS_KERNEL), group by group, with a software
 * prefetch K_PREFETCH bytes ahead in each row, one hint per 64 bytes of group. With the
 * prefetch both read faster from DRAM than 3 rows without it (best of 1 to 4 without one);
 * 3, 4 and 8 rows with it measured within each other's noise, and 4 is what the codebook
 * types' driver reads (docs/PERFORMANCE.md, 2026-12-04, Q8_0 and Q4_0 decode rows with a
 * software prefetch). */
#define Q_STREAMS 4

struct xq4_group {
    _Alignas(32) uint8_t q[4][2][32]; /* pair k: [0] x[0..15] of blocks 2k, 2k+1; [1] x[16..31] */
    float d[8];                       /* scales, lanes in PERM4 order */
    int32_t s8[8];                    /* 8 (or prep_pairs's mul) * sum of the quants, PERM4 */
};

struct xq8_group {
    _Alignas(32) int8_t q[8][32]; /* the quants of the 8 blocks */
    float d[8];                   /* scales, block order */
};

/* Lane j of a PERM4-ordered vector holds block PERM4[j] of the group. */
#define PERM4_EPI32() _mm256_setr_epi32(0, 2, 4, 6, 1, 3, 5, 7)

/* Eight F16 scales at p, p + stride, ... in PERM4 order. */
INLINE __m256 load_scales8_perm4(const uint8_t *p, size_t stride) {
    __m128i h = _mm_cvtsi32_si128(load_u16(p));
    h = _mm_insert_epi16(h, load_u16(p + 2 * stride), 1);
    h = _mm_insert_epi16(h, load_u16(p + 4 * stride), 2);
    h = _mm_insert_epi16(h, load_u16(p + 6 * stride), 3);
    h = _mm_insert_epi16(h, load_u16(p + 1 * stride), 4);
    h = _mm_insert_epi16(h, load_u16(p + 3 * stride), 5);
    h = _mm_insert_epi16(h, load_u16(p + 5 * stride), 6);
    h = _mm_insert_epi16(h, load_u16(p + 7 * stride), 7);
    return _mm256_cvtph_ps(h);
}

/* hsum8 of A where lane j of v holds A[PERM4[j]]: ((A0 + A4) + (A2 + A6)) + ((A1 + A5) + (A3 +
 * A7)) is ((v0 + v2) + (v1 + v3)) + ((v4 + v6) + (v5 + v7)). */
INLINE float hsum8_perm4(__m256 v) {
    __m128 lo = _mm256_castps256_ps128(v);
    __m128 hi = _mm256_extractf128_ps(v, 1);
    lo = _mm_add_ps(lo, _mm_movehl_ps(lo, lo)); /* v0 + v2, v1 + v3 */
    hi = _mm_add_ps(hi, _mm_movehl_ps(hi, hi));
    lo = _mm_add_ss(lo, _mm_movehdup_ps(lo));
    hi = _mm_add_ss(hi, _mm_movehdup_ps(hi));
    return _mm_cvtss_f32(_mm_add_ss(lo, hi));
}

/* A group of 8 activation blocks at x (nbk <= 8 of them; the rest is zero: zero quants, sums
 * and scales, which leave the accumulators as they are). */
INLINE const uint8_t *group_src(const uint8_t *x, int nbk, uint8_t tmp[8 * Q8_BYTES]) {
    if (nbk == 8) return x;
    memset(tmp, 0, (size_t)8 * Q8_BYTES);
    memcpy(tmp, x, (size_t)nbk * Q8_BYTES);
    return tmp;
}

/* The Q4_0 x side with s8 = mul * (sum of the quants) (Q4_0: 8; the codebook rows kernels,
 * kernels_x86_iqrows.h, their codebook offsets). */
INLINE void prep_pairs(struct xq4_group *xg, const uint8_t *x, int64_t nb, int mul) {
    const __m256i ones8 = _mm256_set1_epi8(1);
    const __m256i ones16 = _mm256_set1_epi16(1);
    for (int64_t g = 0; g * 8 < nb; g++) {
        uint8_t tmp[8 * Q8_BYTES];
        const uint8_t *xb =
            group_src(x + (size_t)g * 8 * Q8_BYTES, nb - g * 8 < 8 ? (int)(nb - g * 8) : 8, tmp);
        __m256i v[8];
        __m256i sums[8];
        for (int b = 0; b < 8; b++) {
            v[b] =
                _mm256_loadu_si256((const __m256i *)(const void *)(xb + (size_t)b * Q8_BYTES + 2));
            sums[b] = _mm256_madd_epi16(_mm256_maddubs_epi16(ones8, v[b]), ones16);
        }
        for (size_t k = 0; k < 4; k++) {
            _mm256_store_si256((__m256i *)(void *)xg[g].q[k][0],
                               _mm256_permute2x128_si256(v[2 * k], v[2 * k + 1], 0x20));
            _mm256_store_si256((__m256i *)(void *)xg[g].q[k][1],
                               _mm256_permute2x128_si256(v[2 * k], v[2 * k + 1], 0x31));
        }
        __m256i s8 = _mm256_mullo_epi32(sum_lanes8(sums), _mm256_set1_epi32(mul));
        _mm256_storeu_si256((__m256i *)(void *)xg[g].s8,
                            _mm256_permutevar8x32_epi32(s8, PERM4_EPI32()));
        _mm256_storeu_ps(xg[g].d,
                         _mm256_permutevar8x32_ps(load_scales8(xb, Q8_BYTES), PERM4_EPI32()));
    }
}

static void prep_q4(struct xq4_group *xg, const uint8_t *x, int64_t nb) {
    prep_pairs(xg, x, nb, 8);
}

/* 16 int16 lanes: [8 lanes of block A | 8 lanes of block B], the unsigned nibbles of the two
 * Q4_0 blocks at wa times the prepared quants of the pair. */
INLINE __m256i q4_pair(const uint8_t *wa, const uint8_t xq[2][32]) {
    const __m256i m4 = _mm256_set1_epi8(0x0f);
    __m256i v = _mm256_inserti128_si256(
        _mm256_castsi128_si256(_mm_loadu_si128((const __m128i *)(const void *)(wa + 2))),
        _mm_loadu_si128((const __m128i *)(const void *)(wa + Q4_BYTES + 2)), 1);
    __m256i lo = _mm256_and_si256(v, m4);
    __m256i hi = _mm256_and_si256(_mm256_srli_epi16(v, 4), m4);
    return _mm256_add_epi16(
        _mm256_maddubs_epi16(lo, _mm256_load_si256((const __m256i *)(const void *)xq[0])),
        _mm256_maddubs_epi16(hi, _mm256_load_si256((const __m256i *)(const void *)xq[1])));
}

INLINE __m256 q4_group(const uint8_t *wg, const struct xq4_group *xg, __m256 acc) {
    __m256i p01 = q4_pair(wg, xg->q[0]);
    __m256i p23 = q4_pair(wg + (size_t)2 * Q4_BYTES, xg->q[1]);
    __m256i p45 = q4_pair(wg + (size_t)4 * Q4_BYTES, xg->q[2]);
    __m256i p67 = q4_pair(wg + (size_t)6 * Q4_BYTES, xg->q[3]);
    /* [b0 b0 b2 b2 b4 b4 b6 b6 | b1 b1 b3 b3 b5 b5 b7 b7], then one int32 per block */
    __m256i h = _mm256_hadd_epi16(_mm256_hadd_epi16(p01, p23), _mm256_hadd_epi16(p45, p67));
    __m256i isum = _mm256_sub_epi32(_mm256_madd_epi16(h, _mm256_set1_epi16(1)),
                                    _mm256_loadu_si256((const __m256i *)(const void *)xg->s8));
    __m256 d = _mm256_mul_ps(load_scales8_perm4(wg, Q4_BYTES), _mm256_loadu_ps(xg->d));
    return _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(isum), acc);
}

/* acc + the nbk blocks of the Q4_0 row w against the prepared groups (a last partial group
 * reads a zero-padded copy of the weights: nothing past the row is touched). */
INLINE __m256 q4_row(const uint8_t *w, const struct xq4_group *xg, int64_t nbk, __m256 acc) {
    const int64_t ng = nbk / 8;
    for (int64_t g = 0; g < ng; g++)
        acc = q4_group(w + (size_t)g * 8 * Q4_BYTES, &xg[g], acc);
    if (nbk % 8) {
        uint8_t wt[8 * Q4_BYTES] = {0};
        memcpy(wt, w + (size_t)ng * 8 * Q4_BYTES, (size_t)(nbk % 8) * Q4_BYTES);
        acc = q4_group(wt, &xg[ng], acc);
    }
    return acc;
}

static void prep_q8(struct xq8_group *xg, const uint8_t *x, int64_t nb) {
    for (int64_t g = 0; g * 8 < nb; g++) {
        uint8_t tmp[8 * Q8_BYTES];
        const uint8_t *xb =
            group_src(x + (size_t)g * 8 * Q8_BYTES, nb - g * 8 < 8 ? (int)(nb - g * 8) : 8, tmp);
        for (int b = 0; b < 8; b++)
            _mm256_store_si256(
                (__m256i *)(void *)xg[g].q[b],
                _mm256_loadu_si256((const __m256i *)(const void *)(xb + (size_t)b * Q8_BYTES + 2)));
        _mm256_storeu_ps(xg[g].d, load_scales8(xb, Q8_BYTES));
    }
}

INLINE __m256 q8_group(const uint8_t *wg, const struct xq8_group *xg, __m256 acc) {
    __m256i p[8];
    for (int b = 0; b < 8; b++)
        p[b] = dot_i8(
            _mm256_loadu_si256((const __m256i *)(const void *)(wg + (size_t)b * Q8_BYTES + 2)),
            _mm256_load_si256((const __m256i *)(const void *)xg->q[b]));
    __m256 d = _mm256_mul_ps(load_scales8(wg, Q8_BYTES), _mm256_loadu_ps(xg->d));
    return _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(sum_lanes8(p)), acc);
}

INLINE __m256 q8_row(const uint8_t *w, const struct xq8_group *xg, int64_t nbk, __m256 acc) {
    const int64_t ng = nbk / 8;
    for (int64_t g = 0; g < ng; g++)
        acc = q8_group(w + (size_t)g * 8 * Q8_BYTES, &xg[g], acc);
    if (nbk % 8) {
        uint8_t wt[8 * Q8_BYTES] = {0};
        memcpy(wt, w + (size_t)ng * 8 * Q8_BYTES, (size_t)(nbk % 8) * Q8_BYTES);
        acc = q8_group(wt, &xg[ng], acc);
    }
    return acc;
}

/* The driver, one copy per block type: prepare, stream the rows (in chunks of columns when a
 * row is longer than XCHUNK groups), reduce. */
#define ROWS_KERNEL(fn, group_t, prep, row, group, wbytes, hsum)                                   \
    static void fn(int64_t n, int64_t nr, float *s, const void *w, size_t w_stride,                \
                   const void *x) {                                                                \
        const uint8_t *wb = w;                                                                     \
        const uint8_t *xb = x;                                                                     \
        const int64_t nb = n / 32;                                                                 \
        const int64_t chunk = (int64_t)XCHUNK * 8; /* blocks */                                    \
        group_t xg[XCHUNK];                                                                        \
        if (nb <= chunk) {                                                                         \
            prep(xg, xb, nb);                                                                      \
            const int64_t q = nr / Q_STREAMS;                                                      \
            const int64_t ng = nb / 8;                                                             \
            for (int64_t i = 0; i < q; i++) {                                                      \
                __m256 acc[Q_STREAMS];                                                             \
                const uint8_t *wr[Q_STREAMS];                                                      \
                for (int k = 0; k < Q_STREAMS; k++) {                                              \
                    acc[k] = _mm256_setzero_ps();                                                  \
                    wr[k] = wb + (size_t)(k * q + i) * w_stride;                                   \
                }                                                                                  \
                for (int64_t g = 0; g < ng; g++)                                                   \
                    for (int k = 0; k < Q_STREAMS; k++) {                                          \
                        const uint8_t *wg = wr[k] + (size_t)g * 8 * (wbytes);                      \
                        prefetch_block(wg, K_PREFETCH, (size_t)8 * (wbytes));                      \
                        acc[k] = group(wg, &xg[g], acc[k]);                                        \
                    }                                                                              \
                for (int k = 0; k < Q_STREAMS; k++) /* the partial group, if any */                \
                    s[k * q + i] =                                                                 \
                        hsum(row(wr[k] + (size_t)ng * 8 * (wbytes), &xg[ng], nb % 8, acc[k]));     \
            }                                                                                      \
            for (int64_t r = Q_STREAMS * q; r < nr; r++)                                           \
                s[r] = hsum(row(wb + (size_t)r * w_stride, xg, nb, _mm256_setzero_ps()));          \
            return;                                                                                \
        }                                                                                          \
        for (int64_t r0 = 0; r0 < nr; r0 += XCHUNK_ROWS) {                                         \
            const int64_t rn = nr - r0 < XCHUNK_ROWS ? nr - r0 : XCHUNK_ROWS;                      \
            __m256 acc[XCHUNK_ROWS];                                                               \
            for (int64_t r = 0; r < rn; r++)                                                       \
                acc[r] = _mm256_setzero_ps();                                                      \
            for (int64_t c0 = 0; c0 < nb; c0 += chunk) {                                           \
                const int64_t cb = nb - c0 < chunk ? nb - c0 : chunk;                              \
                prep(xg, xb + (size_t)c0 * Q8_BYTES, cb);                                          \
                for (int64_t r = 0; r < rn; r++)                                                   \
                    acc[r] = row(wb + (size_t)(r0 + r) * w_stride + (size_t)c0 * (wbytes), xg, cb, \
                                 acc[r]);                                                          \
            }                                                                                      \
            for (int64_t r = 0; r < rn; r++)                                                       \
                s[r0 + r] = hsum(acc[r]);                                                          \
        }                                                                                          \
    }

ROWS_KERNEL(vec_dot_rows_q4_0, struct xq4_group, prep_q4, q4_row, q4_group, Q4_BYTES, hsum8_perm4)
ROWS_KERNEL(vec_dot_rows_q8_0, struct xq8_group, prep_q8, q8_row, q8_group, Q8_BYTES, hsum8_ps)

/* ---- K-quants (Q2_K..Q6_K weights x Q8_K activations) -------------------------------------------
 *
 * DESIGN: one super-block of 256 elements at a time. The vector code computes quant.h's exact
 * integers isum (and imin, for the types with mins): unsigned weight quants times the int8
 * activations with vpmaddubsw (|pair| <= 2 * 63 * 128 < 32767, exact), times the sub-block
 * scale with vpmaddwd, summed in int32 lanes; the mins (and Q6_K's -32 offset) come from the
 * activation's 16-element sums (bsums). The float part, two fmas into A[b % 8] per
 * super-block, is the scalar code of quant_ref_k.c (fmaf is one rounding on every target),
 * so the results are the scalar twin's bit for bit. Decode reads ROW_STREAMS weight rows
 * side by side, as the Q4_0/Q8_0 rows kernels do; the activation row (292 bytes a block)
 * stays in L1/L2.
 */

#define QK_K_BYTES_X 292 /* sizeof(struct moeinf_block_q8_k): d (f32), qs[256], bsums[16] */

struct k4_sm_lane {
    __m128i src_low, src_top;          /* the byte holding each output's low bits / top 2 bits */
    __m128i low6, nib_lo, nib_hi, top; /* which bits of them each output takes */
};

/* k4_scales_mins' shuffles and masks for one 128-bit lane (kernels_x86_krows.h broadcasts
 * them to do four blocks at once). */
INLINE struct k4_sm_lane k4_sm_lane(void) {
    struct k4_sm_lane c;
    c.src_low = _mm_setr_epi8(0, 1, 2, 3, 8, 9, 10, 11, 4, 5, 6, 7, 8, 9, 10, 11);
    c.src_top = _mm_setr_epi8(-1, -1, -1, -1, 0, 1, 2, 3, -1, -1, -1, -1, 4, 5, 6, 7);
    c.low6 = _mm_setr_epi32(0x3f3f3f3f, 0, 0x3f3f3f3f, 0);
    c.nib_lo = _mm_setr_epi32(0, 0x0f0f0f0f, 0, 0);
    c.nib_hi = _mm_setr_epi32(0, 0, 0, 0x0f0f0f0f);
    c.top = _mm_setr_epi32(0, 0x30303030, 0, 0x30303030);
    return c;
}

/* The 8 scales (bytes 0-7) and 8 mins (bytes 8-15) of a Q4_K/Q5_K block, 6 bits each, from
 * the 12 packed bytes: scales 0-3 and mins 0-3 are the low 6 bits of bytes 0-3 and 4-7;
 * scale/min 4-7 take their low 4 bits from the low/high nibbles of bytes 8-11 and their top 2
 * bits from the top 2 bits of bytes 0-3 (scales) and 4-7 (mins). In vector registers (two
 * byte shuffles put each output byte's sources in place): AVX2 decode runs this once per block
 * and row, AVX-512 decode four rows at a time (k4_scales_mins_x4). The 16-byte load reads 4
 * bytes of the block's quants, which are masked off. */
INLINE __m128i k4_scales_mins(const uint8_t *packed) {
    const struct k4_sm_lane c = k4_sm_lane();
    const __m128i v = _mm_loadu_si128((const __m128i *)(const void *)packed);
    const __m128i a = _mm_shuffle_epi8(v, c.src_low);
    const __m128i b = _mm_shuffle_epi8(v, c.src_top);
    const __m128i low6 = _mm_and_si128(a, c.low6);
    const __m128i nib_lo = _mm_and_si128(a, c.nib_lo);
    const __m128i nib_hi = _mm_and_si128(_mm_srli_epi16(a, 4), c.nib_hi);
    const __m128i top = _mm_and_si128(_mm_srli_epi16(b, 2), c.top);
    return _mm_or_si128(_mm_or_si128(low6, nib_lo), _mm_or_si128(nib_hi, top));
}

/* Q8_K activations (the K-quants' partner), as moeinf_ref_from_float_q8_k: d = max / -127
 * with max the first element of largest magnitude (NaNs skipped), q = round-to-nearest-even
 * of (-127 / max) * x. vcvtps2dq rounds as the reference's magic-number add does for every
 * |v| < 2^22, and gives INT_MIN for NaN and the infinities (which an infinite max makes),
 * which the saturating packs turn into the reference's -128. */
static void from_float_q8_k(const float *x, void *y, int64_t n) {
    uint8_t *out = y;
    const __m256 sign = _mm256_set1_ps(-0.0f);
    for (int64_t i = 0; i < n / 256; i++, x += 256, out += 292) {
        struct moeinf_block_q8_k b;
        __m256 am = _mm256_setzero_ps();
        for (int k = 0; k < 256; k += 8) /* a NaN lane keeps the running max (2nd operand) */
            am = _mm256_max_ps(_mm256_andnot_ps(sign, _mm256_loadu_ps(x + k)), am);
        __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(am), _mm256_extractf128_ps(am, 1));
        m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
        m4 = _mm_max_ss(m4, _mm_movehdup_ps(m4));
        const float amax = _mm_cvtss_f32(m4);
        if (!(amax > 0.0f)) {
            memset(&b, 0, sizeof b);
            memcpy(out, &b, sizeof b);
            continue;
        }
        float max = 0.0f;
        const __m256 av = _mm256_set1_ps(amax);
        for (int k = 0; k < 256; k += 8) {
            int hit = _mm256_movemask_ps(
                _mm256_cmp_ps(_mm256_andnot_ps(sign, _mm256_loadu_ps(x + k)), av, _CMP_EQ_OQ));
            if (hit) {
                max = x[k + __builtin_ctz((unsigned)hit)];
                break;
            }
        }
        const float iscale = -127.0f / max;
        const __m256 is = _mm256_set1_ps(iscale);
        for (int k = 0; k < 256; k += 32) {
            __m256i q[4];
            for (int t = 0; t < 4; t++)
                q[t] =
                    _mm256_cvtps_epi32(_mm256_mul_ps(is, _mm256_loadu_ps(x + (size_t)(k + 8 * t))));
            /* packs work per 128-bit lane: restore element order with one dword permute */
            __m256i p =
                _mm256_packs_epi16(_mm256_packs_epi32(q[0], q[1]), _mm256_packs_epi32(q[2], q[3]));
            p = _mm256_permutevar8x32_epi32(p, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
            _mm256_storeu_si256((__m256i *)(void *)(b.qs + k), p);
        }
        for (int j = 0; j < 16; j++) {
            int sum = 0;
            for (int k = 0; k < 16; k++)
                sum += b.qs[16 * j + k];
            b.bsums[j] = (int16_t)sum;
        }
        b.d = 1.0f / iscale;
        memcpy(out, &b, sizeof b);
    }
}

/* Two int16 scales as a vpmaddwd multiplier: a for lanes 0-7, b for lanes 8-15. */
INLINE __m256i scale_pair(int a, int b) {
    return _mm256_setr_m128i(_mm_set1_epi16((short)a), _mm_set1_epi16((short)b));
}

/* (sum of the 8 lanes of a, sum of the 8 lanes of b). */
INLINE void hsum2_epi32(__m256i a, __m256i b, int32_t *sa, int32_t *sb) {
    __m256i h = _mm256_hadd_epi32(a, b); /* a01 a23 b01 b23 | a45 a67 b45 b67 */
    h = _mm256_hadd_epi32(h, h);         /* A_lo B_lo A_lo B_lo | A_hi B_hi ... */
    __m128i r = _mm_add_epi32(_mm256_castsi256_si128(h), _mm256_extracti128_si256(h, 1));
    *sa = _mm_cvtsi128_si32(r);
    *sb = _mm_extract_epi32(r, 1);
}

INLINE float k_d_x(const uint8_t *xb) {
    float d;
    memcpy(&d, xb, sizeof d);
    return d;
}

/* isum, imin of a Q4_K block (144 bytes: d, dmin, scales[12], qs[128]) or, with qh, a Q5_K
 * block (176 bytes: d, dmin, scales[12], qh[32], qs[128]) against a Q8_K block. */
INLINE void k45_block(const uint8_t *wb, bool five, const uint8_t *xb, int32_t *isum,
                      int32_t *imn) {
    const __m256i m4 = _mm256_set1_epi8(0x0f);
    const __m128i sm = k4_scales_mins(wb + 4);
    uint8_t sc[16];
    _mm_storeu_si128((__m128i *)(void *)sc, sm);
    const uint8_t *qs = wb + (five ? 48 : 16);
    const uint8_t *xq = xb + 4;
    __m256i qhv = five ? _mm256_loadu_si256((const __m256i *)(const void *)(wb + 16))
                       : _mm256_setzero_si256();
    __m256i acc = _mm256_setzero_si256();
    for (size_t c = 0; c < 4; c++) {
        __m256i q = _mm256_loadu_si256((const __m256i *)(const void *)(qs + 32 * c));
        __m256i lo = _mm256_and_si256(q, m4);
        __m256i hi = _mm256_and_si256(_mm256_srli_epi16(q, 4), m4);
        if (five) {
            const __m256i one = _mm256_set1_epi8(1);
            __m128i sh_lo = _mm_cvtsi32_si128(2 * (int)c);
            __m128i sh_hi = _mm_cvtsi32_si128(2 * (int)c + 1);
            lo = _mm256_or_si256(
                lo, _mm256_slli_epi16(_mm256_and_si256(_mm256_srl_epi16(qhv, sh_lo), one), 4));
            hi = _mm256_or_si256(
                hi, _mm256_slli_epi16(_mm256_and_si256(_mm256_srl_epi16(qhv, sh_hi), one), 4));
        }
        __m256i x0 = _mm256_loadu_si256((const __m256i *)(const void *)(xq + 64 * c));
        __m256i x1 = _mm256_loadu_si256((const __m256i *)(const void *)(xq + 64 * c + 32));
        __m256i p0 =
            _mm256_madd_epi16(_mm256_maddubs_epi16(lo, x0), _mm256_set1_epi16((short)sc[2 * c]));
        __m256i p1 = _mm256_madd_epi16(_mm256_maddubs_epi16(hi, x1),
                                       _mm256_set1_epi16((short)sc[2 * c + 1]));
        acc = _mm256_add_epi32(acc, _mm256_add_epi32(p0, p1));
    }
    /* imin = sum_j m_j * (bsums[2j] + bsums[2j+1]): the mins widened to [m0 m0 m1 m1 ...]. */
    __m256i mins = _mm256_cvtepu8_epi16(_mm_unpackhi_epi8(sm, sm));
    __m256i bs = _mm256_loadu_si256((const __m256i *)(const void *)(xb + 260));
    hsum2_epi32(acc, _mm256_madd_epi16(bs, mins), isum, imn);
}

/* Scales 8h..8h+7 of a Q6_K block (int8 at wb + 192) as int16, in both 128-bit lanes: one
 * broadcast load and a widening, where the 16 scales widened once and spread by vperm2i128
 * cost 8 uops a vperm2i128 on Zen 1. */
INLINE __m256i k6_scales_half(const uint8_t *wb, size_t h) {
    int64_t eight;
    memcpy(&eight, wb + 192 + 8 * h, sizeof eight);
    return _mm256_cvtepi8_epi16(_mm_set1_epi64x(eight));
}

/* The 128 unsigned 6-bit quants of half h of a Q6_K block: q[k] holds elements 128h + 32k ..
 * 128h + 32k + 31 (low nibbles from ql, the top 2 bits from qh). */
INLINE void k6_unpack_half(const uint8_t *wb, size_t h, __m256i q[4]) {
    const __m256i m4 = _mm256_set1_epi8(0x0f);
    const __m256i m30 = _mm256_set1_epi8(0x30);
    const uint8_t *ql = wb + 64 * h;
    __m256i qh = _mm256_loadu_si256((const __m256i *)(const void *)(wb + 128 + 32 * h));
    __m256i l0 = _mm256_loadu_si256((const __m256i *)(const void *)ql);
    __m256i l1 = _mm256_loadu_si256((const __m256i *)(const void *)(ql + 32));
    q[0] =
        _mm256_or_si256(_mm256_and_si256(l0, m4), _mm256_and_si256(_mm256_slli_epi16(qh, 4), m30));
    q[1] =
        _mm256_or_si256(_mm256_and_si256(l1, m4), _mm256_and_si256(_mm256_slli_epi16(qh, 2), m30));
    q[2] =
        _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l0, 4), m4), _mm256_and_si256(qh, m30));
    q[3] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l1, 4), m4),
                           _mm256_and_si256(_mm256_srli_epi16(qh, 2), m30));
}

/* isum of a Q6_K block (210 bytes: ql[128], qh[64], scales[16] int8, d) against a Q8_K
 * block: sum_j sc_j * (sum of q * x) - 32 * sum_j sc_j * bsums_j, q the unsigned 6-bit quants. */
INLINE int32_t k6_block(const uint8_t *wb, const uint8_t *xb) {
    const int8_t *sc = (const int8_t *)(wb + 192);
    const uint8_t *xq = xb + 4;
    __m256i acc = _mm256_setzero_si256();
    for (size_t h = 0; h < 2; h++) {
        __m256i q[4];
        k6_unpack_half(wb, h, q);
        for (size_t k = 0; k < 4; k++) {
            const size_t j = 8 * h + 2 * k; /* sub-blocks j, j + 1 */
            __m256i x = _mm256_loadu_si256((const __m256i *)(const void *)(xq + 128 * h + 32 * k));
            acc = _mm256_add_epi32(acc, _mm256_madd_epi16(_mm256_maddubs_epi16(q[k], x),
                                                          scale_pair(sc[j], sc[j + 1])));
        }
    }
    __m256i scales = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)(const void *)sc));
    __m256i bs = _mm256_loadu_si256((const __m256i *)(const void *)(xb + 260));
    int32_t dot;
    int32_t off;
    hsum2_epi32(acc, _mm256_madd_epi16(bs, scales), &dot, &off);
    return dot - 32 * off;
}

/* acc[b % 8] updates of quant.h for super-block b (as quant_ref_k.c). */
INLINE void k45_step(const uint8_t *wb, bool five, const uint8_t *xb, float *a) {
    int32_t isum;
    int32_t imn;
    k45_block(wb, five, xb, &isum, &imn);
    const float dx = k_d_x(xb);
    *a = fmaf(_cvtsh_ss(load_u16(wb)) * dx, (float)isum, *a); /* vcvtph2ps: the scalar's bits */
    *a = fmaf(-(_cvtsh_ss(load_u16(wb + 2)) * dx), (float)imn, *a);
}

INLINE void k6_step(const uint8_t *wb, const uint8_t *xb, float *a) {
    int32_t isum = k6_block(wb, xb);
    *a = fmaf(_cvtsh_ss(load_u16(wb + 208)) * k_d_x(xb), (float)isum, *a);
}

/* The 16 signed 6-bit scales of a Q3_K block (minus 32), as quant_ref_k.c decodes them. */
INLINE void k3_scales(const uint8_t *s, int out[16]) {
    for (int j = 0; j < 16; j++) {
        int lo = j < 8 ? s[j] & 0xF : s[j - 8] >> 4;
        int hi = (s[8 + j % 4] >> (2 * (j / 4))) & 3;
        out[j] = (lo | (hi << 4)) - 32;
    }
}

/* isum, imin of a Q2_K block (84 bytes: scales[16], qs[64], d, dmin) against a Q8_K block:
 * element 128h + 32s + l is bits 2s..2s+1 of qs[32h + l]; sub-block j has the 4-bit scale
 * scales[j] & 15 and min scales[j] >> 4. */
INLINE void k2_block(const uint8_t *wb, const uint8_t *xb, int32_t *isum, int32_t *imn) {
    const __m256i m3 = _mm256_set1_epi8(3);
    const uint8_t *xq = xb + 4;
    __m256i acc = _mm256_setzero_si256();
    for (size_t h = 0; h < 2; h++) {
        __m256i v = _mm256_loadu_si256((const __m256i *)(const void *)(wb + 16 + 32 * h));
        for (size_t s = 0; s < 4; s++) {
            const size_t j = 8 * h + 2 * s; /* sub-blocks j, j + 1 */
            __m256i q = _mm256_and_si256(_mm256_srl_epi16(v, _mm_cvtsi32_si128(2 * (int)s)), m3);
            __m256i x = _mm256_loadu_si256((const __m256i *)(const void *)(xq + 128 * h + 32 * s));
            acc = _mm256_add_epi32(acc, _mm256_madd_epi16(_mm256_maddubs_epi16(q, x),
                                                          scale_pair(wb[j] & 15, wb[j + 1] & 15)));
        }
    }
    __m128i sc = _mm_loadu_si128((const __m128i *)(const void *)wb);
    __m256i mins = _mm256_cvtepu8_epi16(_mm_and_si128(_mm_srli_epi16(sc, 4), _mm_set1_epi8(15)));
    __m256i bs = _mm256_loadu_si256((const __m256i *)(const void *)(xb + 260));
    hsum2_epi32(acc, _mm256_madd_epi16(bs, mins), isum, imn);
}

/* isum of a Q3_K block (110 bytes: hmask[32], qs[64], scales[12], d) against a Q8_K block:
 * with u = low 2 bits + 4 * hmask bit (0..7) the quant is u - 4, so the sum is
 * sum_j sc_j * (sum of u * x) - 4 * sum_j sc_j * bsums_j. */
INLINE int32_t k3_block(const uint8_t *wb, const uint8_t *xb) {
    const __m256i m3 = _mm256_set1_epi8(3);
    const __m256i one = _mm256_set1_epi8(1);
    const uint8_t *xq = xb + 4;
    int sc[16];
    k3_scales(wb + 96, sc);
    __m256i hm = _mm256_loadu_si256((const __m256i *)(const void *)wb);
    __m256i acc = _mm256_setzero_si256();
    for (size_t h = 0; h < 2; h++) {
        __m256i v = _mm256_loadu_si256((const __m256i *)(const void *)(wb + 32 + 32 * h));
        for (size_t s = 0; s < 4; s++) {
            const size_t j = 8 * h + 2 * s;
            __m256i lo = _mm256_and_si256(_mm256_srl_epi16(v, _mm_cvtsi32_si128(2 * (int)s)), m3);
            __m256i hb =
                _mm256_and_si256(_mm256_srl_epi16(hm, _mm_cvtsi32_si128(4 * (int)h + (int)s)), one);
            __m256i u = _mm256_or_si256(lo, _mm256_slli_epi16(hb, 2));
            __m256i x = _mm256_loadu_si256((const __m256i *)(const void *)(xq + 128 * h + 32 * s));
            acc = _mm256_add_epi32(
                acc, _mm256_madd_epi16(_mm256_maddubs_epi16(u, x), scale_pair(sc[j], sc[j + 1])));
        }
    }
    __m256i scales = _mm256_setr_epi16((short)sc[0], (short)sc[1], (short)sc[2], (short)sc[3],
                                       (short)sc[4], (short)sc[5], (short)sc[6], (short)sc[7],
                                       (short)sc[8], (short)sc[9], (short)sc[10], (short)sc[11],
                                       (short)sc[12], (short)sc[13], (short)sc[14], (short)sc[15]);
    __m256i bs = _mm256_loadu_si256((const __m256i *)(const void *)(xb + 260));
    int32_t dot;
    int32_t off;
    hsum2_epi32(acc, _mm256_madd_epi16(bs, scales), &dot, &off);
    return dot - 4 * off;
}

INLINE void k2_step(const uint8_t *wb, const uint8_t *xb, float *a) {
    int32_t isum;
    int32_t imn;
    k2_block(wb, xb, &isum, &imn);
    const float dx = k_d_x(xb);
    *a = fmaf(_cvtsh_ss(load_u16(wb + 80)) * dx, (float)isum, *a);
    *a = fmaf(-(_cvtsh_ss(load_u16(wb + 82)) * dx), (float)imn, *a);
}

INLINE void k3_step(const uint8_t *wb, const uint8_t *xb, float *a) {
    int32_t isum = k3_block(wb, xb);
    *a = fmaf(_cvtsh_ss(load_u16(wb + 108)) * k_d_x(xb), (float)isum, *a);
}

/* quant_ref.c's hsum8 on an array. */
INLINE float hsum8_arr(const float v[8]) {
    float a = v[0] + v[4];
    float b = v[2] + v[6];
    float c = v[1] + v[5];
    float d = v[3] + v[7];
    return (a + b) + (c + d);
}

/* hsum8_arr lane by lane: lane k of the result is hsum8_arr of lane k of v[0..7]. */
INLINE __m256 hsum8_lanes(const __m256 v[8]) {
    return _mm256_add_ps(_mm256_add_ps(_mm256_add_ps(v[0], v[4]), _mm256_add_ps(v[2], v[6])),
                         _mm256_add_ps(_mm256_add_ps(v[1], v[5]), _mm256_add_ps(v[3], v[7])));
}

/* quant.h's float steps of one super-block for 8 dots at once (lane k = dot k), as the
 * scalar code does them per dot: a = fma(d_w * d_x, isum, a), then, for the types with mins,
 * a = fma(-(dmin_w * d_x), imin, a). */
INLINE void k_float_steps(__m256 dw, __m256 dmin, __m256 dx, __m256i isum, __m256i imin, bool mins,
                          __m256 *a) {
    *a = _mm256_fmadd_ps(_mm256_mul_ps(dw, dx), _mm256_cvtepi32_ps(isum), *a);
    if (mins) {
        const __m256 dm = _mm256_xor_ps(_mm256_mul_ps(dmin, dx), _mm256_set1_ps(-0.0f));
        *a = _mm256_fmadd_ps(dm, _mm256_cvtepi32_ps(imin), *a);
    }
}

/* K_STEP(wb, xb, a): one super-block of weight row wb against activation block xb into *a. */
#define K_KERNELS(t, wbytes, K_STEP) BLOCK_KERNELS(t, 256, wbytes, QK_K_BYTES_X, K_STEP)

/* The rows driver for weight blocks of qk elements (wbytes each) against activation blocks of
 * xbytes; K_STEP(wb, xb, a) adds one block's terms to *a (= A[b % 8]). */
#define BLOCK_KERNELS(t, qk, wbytes, xbytes, K_STEP)                                               \
    static void vec_dot_rows_##t(int64_t n, int64_t nr, float *s, const void *w, size_t w_stride,  \
                                 const void *x) {                                                  \
        const uint8_t *wb = w;                                                                     \
        const uint8_t *xb = x;                                                                     \
        const int64_t nb = n / (qk);                                                               \
        const int64_t q = nr / ROW_STREAMS;                                                        \
        for (int64_t i = 0; i < q; i++) {                                                          \
            float a[ROW_STREAMS][8] = {{0}};                                                       \
            const uint8_t *wr[ROW_STREAMS];                                                        \
            for (int k = 0; k < ROW_STREAMS; k++)                                                  \
                wr[k] = wb + (size_t)(k * q + i) * w_stride;                                       \
            for (int64_t b = 0; b < nb; b++)                                                       \
                for (int k = 0; k < ROW_STREAMS; k++) {                                            \
                    prefetch_block(wr[k], K_PREFETCH + (wbytes) * (size_t)b, wbytes);              \
                    K_STEP(wr[k] + (size_t)b * (wbytes), xb + (size_t)b * (xbytes), &a[k][b & 7]); \
                }                                                                                  \
            for (int k = 0; k < ROW_STREAMS; k++)                                                  \
                s[k * q + i] = hsum8_arr(a[k]);                                                    \
        }                                                                                          \
        for (int64_t r = ROW_STREAMS * q; r < nr; r++) {                                           \
            float a[8] = {0};                                                                      \
            const uint8_t *row = wb + (size_t)r * w_stride;                                        \
            for (int64_t b = 0; b < nb; b++)                                                       \
                K_STEP(row + (size_t)b * (wbytes), xb + (size_t)b * (xbytes), &a[b & 7]);          \
            s[r] = hsum8_arr(a);                                                                   \
        }                                                                                          \
    }                                                                                              \
    static void vec_dot_##t(int64_t n, float *s, const void *w, const void *x) {                   \
        vec_dot_rows_##t(n, 1, s, w, 0, x);                                                        \
    }

/* vec_dot_m as one vec_dot per activation row (the types without a prefill kernel of their
 * own in kernels_x86_kprefill.h). */
#define DOT_M_BY_ROWS(t)                                                                           \
    static void vec_dot_m_##t(int64_t n, int m, float *s, const void *w, const void *x,            \
                              size_t x_stride) {                                                   \
        for (int j = 0; j < m; j++)                                                                \
            vec_dot_rows_##t(n, 1, s + j, w, 0, (const uint8_t *)x + (size_t)j * x_stride);        \
    }

#define Q4K_STEP(wb, xb, a) k45_step((wb), false, (xb), (a))
#define Q5K_STEP(wb, xb, a) k45_step((wb), true, (xb), (a))
#define Q6K_STEP(wb, xb, a) k6_step((wb), (xb), (a))
K_KERNELS(q4_k, 144, Q4K_STEP)
K_KERNELS(q5_k, 176, Q5K_STEP)
K_KERNELS(q6_k, 210, Q6K_STEP)
#include "quant/kernels_x86_krows.h" /* their vec_dot_rows (vec_dot_rows8_*) */
/* after krows.h, whose unpacking it shares */
#include "quant/kernels_x86_kprefill.h" /* their vec_dot_m and gemm */
/* after kprefill.h, whose row-pair helpers it uses */
#include "quant/kernels_x86_kdecode.h" /* the AVX2 Q4_K, Q6_K decode steps */

/* Q4_1 / Q5_1 x Q8_1 (blocks of 32): the exact dot of the unsigned quants with the int8
 * activations, then quant.h's two fmas (d_w * d_x, isum) and (m_w, s_x), in scalar code. */
INLINE void affine_step(const uint8_t *wb, bool five, const uint8_t *xb, float *a) {
    __m256i q = five ? _mm256_or_si256(nibbles_u8(wb + 8), hbits_x10(wb + 4)) : nibbles_u8(wb + 4);
    __m256i x = _mm256_loadu_si256((const __m256i *)(const void *)(xb + 4));
    __m256i p = _mm256_madd_epi16(_mm256_maddubs_epi16(q, x), _mm256_set1_epi16(1));
    __m128i r = _mm_add_epi32(_mm256_castsi256_si128(p), _mm256_extracti128_si256(p, 1));
    r = _mm_add_epi32(r, _mm_shuffle_epi32(r, 0x4e));
    r = _mm_add_epi32(r, _mm_shuffle_epi32(r, 0xb1));
    const int32_t isum = _mm_cvtsi128_si32(r);
    *a = fmaf(_cvtsh_ss(load_u16(wb)) * _cvtsh_ss(load_u16(xb)), (float)isum, *a);
    *a = fmaf(_cvtsh_ss(load_u16(wb + 2)), _cvtsh_ss(load_u16(xb + 2)), *a);
}

#define Q41_STEP(wb, xb, a) affine_step((wb), false, (xb), (a))
#define Q51_STEP(wb, xb, a) affine_step((wb), true, (xb), (a))
BLOCK_KERNELS(q4_1, 32, 20, 36, Q41_STEP)
DOT_M_BY_ROWS(q4_1)
BLOCK_KERNELS(q5_1, 32, 24, 36, Q51_STEP)
DOT_M_BY_ROWS(q5_1)

#define Q2K_STEP(wb, xb, a) k2_step((wb), (xb), (a))
#define Q3K_STEP(wb, xb, a) k3_step((wb), (xb), (a))
K_KERNELS(q2_k, 84, Q2K_STEP)
DOT_M_BY_ROWS(q2_k)
K_KERNELS(q3_k, 110, Q3K_STEP)
DOT_M_BY_ROWS(q3_k)

/* Float types: memory-bound at one activation row, so simply vec_dot per row. */
#define FLOAT_ROWS_KERNEL(fn, kind)                                                                \
    static void fn(int64_t n, int64_t nr, float *s, const void *w, size_t w_stride,                \
                   const void *x) {                                                                \
        for (int64_t r = 0; r < nr; r++)                                                           \
            fdot_rows(kind, 1, n, s + r, (const uint8_t *)w + (size_t)r * w_stride, x, 0);         \
    }

FLOAT_ROWS_KERNEL(vec_dot_rows_f32, FK_F32)
FLOAT_ROWS_KERNEL(vec_dot_rows_f16, FK_F16)
FLOAT_ROWS_KERNEL(vec_dot_rows_bf16, FK_BF16)

/* ---- float helpers ------------------------------------------------------------------------- */

/* Multiply, then add, in separate instructions: the bits of moeinf_ref_axpy_f32. */
static void axpy_f32(int64_t n, float a, const float *x, float *y) {
    const __m256 va = _mm256_set1_ps(a);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(y + i, _mm256_add_ps(_mm256_loadu_ps(y + i),
                                              _mm256_mul_ps(va, _mm256_loadu_ps(x + i))));
    for (; i < n; i++) {
        float p = a * x[i]; /* separate statements: never contracted to an fma */
        y[i] = y[i] + p;
    }
}

#include "quant/kernels_x86_attn.h" /* qk_f32, wsum_f32 */

/* ---- activation conversion (from_float) --------------------------------------------------------
 */

static void from_float_f32(const float *x, void *y, int64_t n) {
    memcpy(y, x, (size_t)n * sizeof(float));
}

static void from_float_f16(const float *x, void *y, int64_t n) {
    uint16_t *h = y;
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm_storeu_si128((__m128i *)(void *)(h + i),
                         _mm256_cvtps_ph(_mm256_loadu_ps(x + i), _MM_FROUND_TO_NEAREST_INT));
    for (; i < n; i++)
        h[i] = moeinf_fp32_to_fp16(x[i]);
}

static void from_float_bf16(const float *x, void *y, int64_t n) {
    uint16_t *h = y;
    const __m256i abs_mask = _mm256_set1_epi32(0x7fffffff);
    const __m256i inf = _mm256_set1_epi32(0x7f800000);
    const __m256i one = _mm256_set1_epi32(1);
    const __m256i bias = _mm256_set1_epi32(0x7fff);
    const __m256i quiet = _mm256_set1_epi32(64);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256i u = _mm256_castps_si256(_mm256_loadu_ps(x + i));
        __m256i nan = _mm256_cmpgt_epi32(_mm256_and_si256(u, abs_mask), inf);
        __m256i hi = _mm256_srli_epi32(u, 16);
        __m256i rnd = _mm256_add_epi32(bias, _mm256_and_si256(hi, one));
        __m256i r = _mm256_srli_epi32(_mm256_add_epi32(u, rnd), 16);
        r = _mm256_blendv_epi8(r, _mm256_or_si256(hi, quiet), nan);
        __m256i p = _mm256_permute4x64_epi64(_mm256_packus_epi32(r, r), 0xd8);
        _mm_storeu_si128((__m128i *)(void *)(h + i), _mm256_castsi256_si128(p));
    }
    for (; i < n; i++)
        h[i] = moeinf_fp32_to_bf16(x[i]);
}

/* llama.cpp's x86 quantize_row_q8_0, step for step (see quant.h). */
static void from_float_q8_0(const float *x, void *y, int64_t n) {
    uint8_t *out = y;
    const __m256 sign = _mm256_set1_ps(-0.0f);
    const __m256i perm = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
    for (int64_t b = 0; b < n / 32; b++, x += 32) {
        uint8_t *blk = out + (size_t)b * Q8_BYTES;
        __m256 v0 = _mm256_loadu_ps(x);
        __m256 v1 = _mm256_loadu_ps(x + 8);
        __m256 v2 = _mm256_loadu_ps(x + 16);
        __m256 v3 = _mm256_loadu_ps(x + 24);
        __m256 m = _mm256_max_ps(_mm256_andnot_ps(sign, v0), _mm256_andnot_ps(sign, v1));
        m = _mm256_max_ps(m, _mm256_andnot_ps(sign, v2));
        m = _mm256_max_ps(m, _mm256_andnot_ps(sign, v3));
        __m128 m4 = _mm_max_ps(_mm256_extractf128_ps(m, 1), _mm256_castps256_ps128(m));
        m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
        m4 = _mm_max_ss(m4, _mm_movehdup_ps(m4));
        const float amax = _mm_cvtss_f32(m4);
        uint16_t d = moeinf_fp32_to_fp16(amax / 127.0f);
        memcpy(blk, &d, sizeof d);
        const __m256 id = _mm256_set1_ps(amax != 0.0f ? 127.0f / amax : 0.0f);
        __m256i i0 = _mm256_cvtps_epi32(_mm256_round_ps(_mm256_mul_ps(v0, id), _MM_ROUND_NEAREST));
        __m256i i1 = _mm256_cvtps_epi32(_mm256_round_ps(_mm256_mul_ps(v1, id), _MM_ROUND_NEAREST));
        __m256i i2 = _mm256_cvtps_epi32(_mm256_round_ps(_mm256_mul_ps(v2, id), _MM_ROUND_NEAREST));
        __m256i i3 = _mm256_cvtps_epi32(_mm256_round_ps(_mm256_mul_ps(v3, id), _MM_ROUND_NEAREST));
        i0 = _mm256_packs_epi32(i0, i1); /* 0-3 8-11 | 4-7 12-15 */
        i2 = _mm256_packs_epi32(i2, i3); /* 16-19 24-27 | 20-23 28-31 */
        i0 = _mm256_packs_epi16(i0, i2); /* 0-3 8-11 16-19 24-27 | 4-7 12-15 20-23 28-31 */
        i0 = _mm256_permutevar8x32_epi32(i0, perm);
        _mm256_storeu_si256((__m256i *)(void *)(blk + 2), i0);
    }
}

/* ---- dequantization (to_float) ------------------------------------------------------------------
 */

static void to_float_f32(const void *x, float *y, int64_t n) {
    memcpy(y, x, (size_t)n * sizeof(float));
}

static void to_float_f16(const void *x, float *y, int64_t n) {
    const uint16_t *h = x;
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(y + i,
                         _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(const void *)(h + i))));
    for (; i < n; i++)
        y[i] = moeinf_fp16_to_fp32(h[i]);
}

static void to_float_bf16(const void *x, float *y, int64_t n) {
    const uint16_t *h = x;
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(y + i, fload8(FK_BF16, (const uint8_t *)(h + i)));
    for (; i < n; i++)
        y[i] = moeinf_bf16_to_fp32(h[i]);
}

/* y[0..31] = q * d for a block's 32 int8 quants. */
INLINE void store_scaled_i8(float *y, __m256i q, float d) {
    const __m256 vd = _mm256_set1_ps(d);
    __m128i lo = _mm256_castsi256_si128(q);
    __m128i hi = _mm256_extracti128_si256(q, 1);
    _mm256_storeu_ps(y, _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(lo)), vd));
    _mm256_storeu_ps(
        y + 8, _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(lo, 8))), vd));
    _mm256_storeu_ps(y + 16, _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(hi)), vd));
    _mm256_storeu_ps(
        y + 24, _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(hi, 8))), vd));
}

static void to_float_q8_0(const void *x, float *y, int64_t n) {
    const uint8_t *in = x;
    for (int64_t b = 0; b < n / 32; b++, y += 32) {
        const uint8_t *blk = in + (size_t)b * Q8_BYTES;
        store_scaled_i8(y, _mm256_loadu_si256((const __m256i *)(const void *)(blk + 2)),
                        moeinf_fp16_to_fp32(load_u16(blk)));
    }
}

static void to_float_q4_0(const void *x, float *y, int64_t n) {
    const uint8_t *in = x;
    for (int64_t b = 0; b < n / 32; b++, y += 32) {
        const uint8_t *blk = in + (size_t)b * Q4_BYTES;
        store_scaled_i8(y, unpack_q4_0(blk + 2), moeinf_fp16_to_fp32(load_u16(blk)));
    }
}

/* ---- codebook types (IQ4_NL, MXFP4 x Q8_0; IQ4_XS x Q8_K) ---------------------------------------
 *
 * DESIGN: each 4-bit index becomes its int8 codebook value with one vpshufb (the 16-entry
 * table in both 128-bit lanes), and the values meet the activation quants in the sign trick
 * of dot_i8 (|value| <= 127, so it is exact for activations in [-127, 127], which from_float
 * gives for finite input). IQ4_XS multiplies each sub-block's int16 pair sums by its scale
 * with vpmaddwd (|pair| <= 2 * 127 * 127, times 32: exact in int32). The float part, one fma
 * into A[b % 8] per block, is the scalar code of quant_ref_iq.c, so the results are the
 * scalar twin's bit for bit. IQ4_NL and MXFP4 use the Q4_0/Q8_0 machinery: vec_dot, vec_dot_m
 * and the prefill tiles are qdot_rows / qgemm with the codebook values unpacked by qprep
 * (groups of 8 blocks), decode is kernels_x86_iqrows.h (the prepared-activation rows kernel
 * with an offset codebook). IQ4_XS decodes eight rows at a time (kernels_x86_iqrows.h, the
 * K-quant driver); its prefill is still one vec_dot per activation row (DOT_M_BY_ROWS).
 */

/* The 6-bit stored scale of sub-block j of an IQ4_XS block (the factor is this minus 32). */
INLINE int iq4_xs_scale_at(const uint8_t *wb, int j) {
    return ((wb[4 + j / 2] >> (4 * (j % 2))) & 15) | (((load_u16(wb + 2) >> (2 * j)) & 3) << 4);
}

/* Int32 lanes that sum to isum of one IQ4_XS super-block against a Q8_K block (d f32,
 * qs[256], bsums): per sub-block the sign-trick pairs (|pair| <= 2 * 127 * 128) times its
 * scale minus 32 (vpmaddwd, VNNI: vpdpwssd), exact in int32. */
INLINE __m256i iq4_xs_lanes(const uint8_t *wb, const uint8_t *xb) {
    const __m256i table = iq_codebook(moeinf_kvalues_iq4nl);
    __m256i acc = _mm256_setzero_si256();
    for (int j = 0; j < 8; j++) {
        __m256i w = iq_values(table, wb + 8 + 16 * (size_t)j);
        __m256i x = _mm256_loadu_si256((const __m256i *)(const void *)(xb + 4 + 32 * (size_t)j));
        __m256i p = _mm256_maddubs_epi16(_mm256_sign_epi8(w, w), _mm256_sign_epi8(x, w));
        __m256i sc = _mm256_set1_epi16((short)(iq4_xs_scale_at(wb, j) - 32));
        acc = KQ_DPWSSD(acc, p, sc);
    }
    return acc;
}

/* One IQ4_XS super-block into *a, as the scalar twin. */
INLINE void iq4_xs_step(const uint8_t *wb, const uint8_t *xb, float *a) {
    const __m256i acc = iq4_xs_lanes(wb, xb);
    float dx;
    memcpy(&dx, xb, sizeof dx);
    *a = fmaf(_cvtsh_ss(load_u16(wb)) * dx, (float)iq_hsum_epi32(acc), *a);
}

#define IQ4XS_STEP(wb, xb, a) iq4_xs_step((wb), (xb), (a))
BLOCK_KERNELS(iq4_xs, 256, IQ4XS_BYTES, (int)sizeof(struct moeinf_block_q8_k), IQ4XS_STEP)
DOT_M_BY_ROWS(iq4_xs)

/* IQ4_NL and MXFP4 single dots and prefill rows: the Q8_0/Q4_0 block dots (qdot_rows), with
 * the codebook values unpacked by qprep; their tiles are in kernels_x86_qprefill.h. */
static void vec_dot_iq4_nl(int64_t n, float *s, const void *w, const void *x) {
    qdot_rows(QK_IQ4_NL, n, 1, s, w, x, 0);
}

static void vec_dot_m_iq4_nl(int64_t n, int m, float *s, const void *w, const void *x, size_t st) {
    qdot_rows(QK_IQ4_NL, n, m, s, w, x, st);
}

static void vec_dot_mxfp4(int64_t n, float *s, const void *w, const void *x) {
    qdot_rows(QK_MXFP4, n, 1, s, w, x, 0);
}

static void vec_dot_m_mxfp4(int64_t n, int m, float *s, const void *w, const void *x, size_t st) {
    qdot_rows(QK_MXFP4, n, m, s, w, x, st);
}

#include "quant/kernels_x86_iqrows.h" /* their vec_dot_rows */

/* Dequantization: the codebook values times the (sub-)block's scale, as the scalar twin. */
static void to_float_iq4_nl(const void *x, float *y, int64_t n) {
    const __m256i table = iq_codebook(moeinf_kvalues_iq4nl);
    const uint8_t *in = x;
    for (int64_t b = 0; b < n / 32; b++, y += 32) {
        const uint8_t *blk = in + (size_t)b * IQ4NL_BYTES;
        store_scaled_i8(y, iq_values(table, blk + 2), _cvtsh_ss(load_u16(blk)));
    }
}

static void to_float_mxfp4(const void *x, float *y, int64_t n) {
    const __m256i table = iq_codebook(moeinf_kvalues_mxfp4);
    const uint8_t *in = x;
    for (int64_t b = 0; b < n / 32; b++, y += 32) {
        const uint8_t *blk = in + (size_t)b * MXFP4_BYTES;
        store_scaled_i8(y, iq_values(table, blk + 1), iq_e8m0_half(blk[0]));
    }
}

static void to_float_iq4_xs(const void *x, float *y, int64_t n) {
    const __m256i table = iq_codebook(moeinf_kvalues_iq4nl);
    const uint8_t *in = x;
    for (int64_t b = 0; b < n / 256; b++) {
        const uint8_t *blk = in + (size_t)b * IQ4XS_BYTES;
        const float d = _cvtsh_ss(load_u16(blk));
        for (int j = 0; j < 8; j++, y += 32) {
            const float dl = d * (float)(iq4_xs_scale_at(blk, j) - 32);
            store_scaled_i8(y, iq_values(table, blk + 8 + 16 * (size_t)j), dl);
        }
    }
}

#define X86_TABLE(table_name)                                                                      \
    {                                                                                              \
        .name = (table_name),                                                                      \
        MOEINF_KERNELS_ENTRY(MOEINF_TYPE_F32, from_float_f32, to_float_f32, vec_dot_f32,           \
                             vec_dot_m_f32, vec_dot_rows_f32),                                     \
        MOEINF_KERNELS_ENTRY(MOEINF_TYPE_F16, from_float_f16, to_float_f16, vec_dot_f16,           \
                             vec_dot_m_f16, vec_dot_rows_f16),                                     \
        MOEINF_KERNELS_ENTRY(MOEINF_TYPE_BF16, from_float_bf16, to_float_bf16, vec_dot_bf16,       \
                             vec_dot_m_bf16, vec_dot_rows_bf16),                                   \
        MOEINF_KERNELS_ENTRY(MOEINF_TYPE_Q8_0, from_float_q8_0, to_float_q8_0, vec_dot_q8_0,       \
                             vec_dot_m_q8_0, vec_dot_rows_q8_0),                                   \
        MOEINF_KERNELS_ENTRY(MOEINF_TYPE_Q4_0, NULL, to_float_q4_0, vec_dot_q4_0, vec_dot_m_q4_0,  \
                             vec_dot_rows_q4_0),                                                   \
        MOEINF_KERNELS_ENTRY(MOEINF_TYPE_Q8_1, moeinf_ref_from_float_q8_1,                         \
                             moeinf_ref_to_float_q8_1, NULL, NULL, NULL),                          \
        MOEINF_KERNELS_ENTRY(MOEINF_TYPE_Q8_K, from_float_q8_k, moeinf_ref_to_float_q8_k, NULL,    \
                             NULL, NULL),                                                          \
        MOEINF_KERNELS_ENTRY(MOEINF_TYPE_Q4_1, NULL, moeinf_ref_to_float_q4_1, vec_dot_q4_1,       \
                             vec_dot_m_q4_1, vec_dot_rows_q4_1),                                   \
        MOEINF_KERNELS_ENTRY(MOEINF_TYPE_Q5_0, NULL, moeinf_ref_to_float_q5_0, vec_dot_q5_0,       \
                             vec_dot_m_q5_0, vec_dot_rows_q5_0),                                   \
        MOEINF_KERNELS_ENTRY(MOEINF_TYPE_Q5_1, NULL, moeinf_ref_to_float_q5_1, vec_dot_q5_1,       \
                             vec_dot_m_q5_1, vec_dot_rows_q5_1),                                   \
        MOEINF_KERNELS_ENTRY(MOEINF_TYPE_Q2_K, NULL, moeinf_ref_to_float_q2_k, vec_dot_q2_k,       \
                             vec_dot_m_q2_k, vec_dot_rows_q2_k),                                   \
        MOEINF_KERNELS_ENTRY(MOEINF_TYPE_Q3_K, NULL, moeinf_ref_to_float_q3_k, vec_dot_q3_k,       \
                             vec_dot_m_q3_k, vec_dot_rows_q3_k),                                   \
        MOEINF_KERNELS_ENTRY(MOEINF_TYPE_Q4_K, NULL, moeinf_ref_to_float_q4_k, vec_dot_q4_k,       \
                             vec_dot_m_q4_k, KR_ROWS_Q4_K),                                        \
        MOEINF_KERNELS_ENTRY(MOEINF_TYPE_Q5_K, NULL, moeinf_ref_to_float_q5_k, vec_dot_q5_k,       \
                             vec_dot_m_q5_k, vec_dot_rows8_q5_k),                                  \
        MOEINF_KERNELS_ENTRY(MOEINF_TYPE_Q6_K, NULL, moeinf_ref_to_float_q6_k, vec_dot_q6_k,       \
                             vec_dot_m_q6_k, KR_ROWS_Q6_K),                                        \
        MOEINF_KERNELS_ENTRY(MOEINF_TYPE_IQ4_NL, NULL, to_float_iq4_nl, vec_dot_iq4_nl,            \
                             vec_dot_m_iq4_nl, vec_dot_rows_iq4_nl),                               \
        MOEINF_KERNELS_ENTRY(MOEINF_TYPE_IQ4_XS, NULL, to_float_iq4_xs, vec_dot_iq4_xs,            \
                             vec_dot_m_iq4_xs, vec_dot_rows8_iq4_xs),                              \
        MOEINF_KERNELS_ENTRY(MOEINF_TYPE_MXFP4, NULL, to_float_mxfp4, vec_dot_mxfp4,               \
                             vec_dot_m_mxfp4, vec_dot_rows_mxfp4),                                 \
        .gemm[MOEINF_TYPE_Q8_0] = gemm_q8_0, .gemm[MOEINF_TYPE_Q4_0] = gemm_q4_0,                  \
        .gemm[MOEINF_TYPE_Q5_0] = gemm_q5_0, .gemm[MOEINF_TYPE_Q4_K] = gemm_q4_k,                  \
        .gemm[MOEINF_TYPE_IQ4_NL] = gemm_iq4_nl, .gemm[MOEINF_TYPE_MXFP4] = gemm_mxfp4,            \
        .gemm[MOEINF_TYPE_Q5_K] = gemm_q5_k, .gemm[MOEINF_TYPE_Q6_K] = gemm_q6_k,                  \
        .axpy_f32 = axpy_f32, .delta_rule_f32 = moeinf_delta_rule_f32_avx2,                        \
        .softmax_f32 = moeinf_softmax_f32_avx2, .qk_f32 = qk_f32, .wsum_f32 = wsum_f32,            \
    }

#endif
