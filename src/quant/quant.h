/*
 * quant.h - the CPU side of the tensor types (block layouts, activation partners) and the
 * kernel tables. The ids and block sizes of all ggml types are base/tensor_type.h.
 *
 * A weight row of type T is multiplied by an activation row converted to T's partner type
 * moeinf_type_cpu_get(T)->vec_dot_type, exactly as llama.cpp does
 * (../shared/testdata/README.md, 2.4):
 *   F32  x F32       F16 x F16 (activation rounded to F16)    BF16 x BF16
 *   Q8_0, Q4_0, Q5_0 x Q8_0   (activation: d = max|x|/127 as F16, q = round-half-even)
 *   Q4_1, Q5_1       x Q8_1   (Q8_0's rounding, plus s = d * sum(q) as F16, d unrounded)
 *   Q2_K..Q6_K       x Q8_K   (blocks of 256: iscale = -127/m with m the signed element of
 *                              largest magnitude, q = min(127, round-half-even(iscale * x)),
 *                              d = 1/iscale in F32, bsums = sums of each 16 quants)
 *   IQ4_NL, MXFP4    x Q8_0;   IQ4_XS x Q8_K
 * Block dot products are exact integer sums scaled by d_w * d_x.
 *
 * Kernel tables: moeinf_kernels_scalar() is the reference (portable C); the AVX2, AVX-512, AMX
 * and arm64 (NEON, dot product) tables give bit-identical results: from_float and to_float are
 * bit-exact with the scalar twin, and every vec_dot follows the one summation order below, which
 * the SIMD kernels reproduce lane for lane (so a model computes the same logits on every x86 and
 * arm64 CPU and the scalar fallback). moeinf_kernels_best() picks at run time; the engine takes
 * moeinf_kernels_from_env(), which MOEINF_KERNELS can cap.
 *
 * Summation order of vec_dot (all tables; fma = fused multiply-add, rounded once):
 *   F32, F16, BF16 (products of two F16/BF16 values are exact in float):
 *     P[k % 32] = fma(w[k], x[k], P[k % 32]) for k = 0..n-1 in order, P[] starting at +0;
 *     Q[l] = (P[l] + P[l+8]) + (P[l+16] + P[l+24]) for l < 8;  s = hsum8(Q)
 *   Q8_0, Q4_0 (blocks of 32; isum_b = the exact integer dot of block b):
 *     A[b % 8] = fma(d_w[b] * d_x[b], (float)isum_b, A[b % 8]) for b in order;  s = hsum8(A)
 *   Q5_0: as Q4_0 (quants 0..31 minus 16).
 *   Q4_1, Q5_1 (blocks of 32, unsigned quants q_w, offset m_w):
 *     A[b % 8] = fma(d_w[b] * d_x[b], (float)isum_b, A[b % 8]);
 *     A[b % 8] = fma(m_w[b], s_x[b], A[b % 8]);  s = hsum8(A)
 *   K-quants (super-blocks of 256; isum_b = sum over sub-blocks of scale * exact quant dot,
 *   an int32; imin_b = sum over sub-blocks of min * activation sub-block sum, for the types
 *   with mins; Q3_K/Q6_K quants are signed, -4..3 and -32..31):
 *     A[b % 8] = fma(d_w[b] * d_x[b], (float)isum_b, A[b % 8]);
 *     A[b % 8] = fma(-(dmin_w[b] * d_x[b]), (float)imin_b, A[b % 8])   (Q2_K, Q4_K, Q5_K);
 *     s = hsum8(A)
 *   IQ4_NL, MXFP4 (blocks of 32; isum_b = the exact integer dot of the codebook values,
 *   int8, with the activation quants; MXFP4's d_w is its E8M0 scale halved, the codebook
 *   holding the doubled E2M1 values):
 *     A[b % 8] = fma(d_w[b] * d_x[b], (float)isum_b, A[b % 8]);  s = hsum8(A)
 *   IQ4_XS (super-blocks of 256; isum_b = sum over its 8 sub-blocks of 32 of (scale - 32) *
 *   the exact codebook dot, an int32):
 *     A[b % 8] = fma(d_w[b] * d_x[b], (float)isum_b, A[b % 8]);  s = hsum8(A)
 *   hsum8(v) = ((v0 + v4) + (v2 + v6)) + ((v1 + v5) + (v3 + v7))
 * (AVX2 keeps P in four 8-lane accumulators and A in one; AVX-512 in two 16-lane ones; the
 * K-quant kernels compute isum/imin in vectors and the two fmas per super-block in scalar
 * code, as the twin does; Q4_1 and Q5_1 likewise per block of 32.)
 *
 * Activation rounding (from_float): F16 and BF16 round to nearest even (NaN stays NaN, quiet);
 * Q8_0 is llama.cpp's x86 quantize_row_q8_0: amax = max|x| over the block,
 * d = amax / 127 stored as F16, id = amax ? 127 / amax : 0 (from amax, not from d),
 * q = x * id rounded half to even as cvtps2dq does (NaN or out of int32 range -> -128),
 * saturated to int8. For finite inputs q lies in [-127, 127]; the SIMD int8 dots rely on
 * that (activation quants of -128 give an unspecified, but memory-safe, result). Q8_1 rounds
 * as Q8_0 and sums its int8 quants for s. Q8_K is llama.cpp's quantize_row_q8_K_ref (which
 * its x86 build also uses), NaN/inf aside: a quant whose scaled value is NaN or beyond 2^22
 * becomes -128. The K-quant dots take the weights as unsigned quants (vpmaddubsw), so they
 * are exact for any activation quant.
 *
 * Weight dequantization (to_float) reproduces llama.cpp's dequantize_row_* float for float:
 * the same products in the same order, never fused (test_quant_dequant checks it against the
 * gguf Python package on real and random blocks).
 */
#ifndef MOEINF_QUANT_H
#define MOEINF_QUANT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/tensor_type.h"
#include "moeinf.h"

/* Block layouts, as ggml's block_q8_0 and block_q4_0 (d is an IEEE half, little-endian). */
#define MOEINF_QK8_0 32
#define MOEINF_QK4_0 32

struct moeinf_block_q8_0 {
    uint16_t d;              /* scale, F16 bits */
    int8_t qs[MOEINF_QK8_0]; /* element j = qs[j] * d */
};

/* Element j < 16 is (qs[j] & 15) - 8, element j >= 16 is (qs[j-16] >> 4) - 8, times d. */
struct moeinf_block_q4_0 {
    uint16_t d;                   /* scale, F16 bits */
    uint8_t qs[MOEINF_QK4_0 / 2]; /* two 4-bit quants per byte */
};

/* Element j < 16 is (qs[j] & 15) * d + m, element j >= 16 is (qs[j-16] >> 4) * d + m. */
struct moeinf_block_q4_1 {
    uint16_t d;     /* scale, F16 bits */
    uint16_t m;     /* offset (the block minimum), F16 bits */
    uint8_t qs[16]; /* two 4-bit quants per byte */
};

/* As Q4_0 with a fifth bit: bit j of the little-endian word qh is bit 4 of quant j;
 * element j = (quant - 16) * d. */
struct moeinf_block_q5_0 {
    uint16_t d;
    uint8_t qh[4];
    uint8_t qs[16];
};

/* As Q4_1 with qh as in Q5_0: element j = quant * d + m. */
struct moeinf_block_q5_1 {
    uint16_t d;
    uint16_t m;
    uint8_t qh[4];
    uint8_t qs[16];
};

/* The activation partner of Q4_1 and Q5_1: Q8_0 plus s = d * sum(qs) as F16. */
struct moeinf_block_q8_1 {
    uint16_t d;
    uint16_t s;
    int8_t qs[32];
};

/* K-quants: super-blocks of 256 elements split into sub-blocks (16 of 16 or 8 of 32), each
 * with a small integer scale (and minimum) times the super-block's F16 d (and dmin). Element
 * order inside qs is ggml's (see quant_ref_k.c, which decodes each one). */
#define MOEINF_QK_K 256

struct moeinf_block_q2_k {
    uint8_t scales[16]; /* sub-block j: scale (low 4 bits) and min (high 4 bits) */
    uint8_t qs[64];     /* 2-bit quants */
    uint16_t d;         /* F16: super-block scale of the scales */
    uint16_t dmin;      /* F16: super-block scale of the mins */
};

struct moeinf_block_q3_k {
    uint8_t hmask[32];  /* bit 2 of each quant (set: no -4 offset) */
    uint8_t qs[64];     /* bits 0-1 of each quant */
    uint8_t scales[12]; /* 16 6-bit scales (biased by 32) */
    uint16_t d;
};

struct moeinf_block_q4_k {
    uint16_t d;
    uint16_t dmin;
    uint8_t scales[12]; /* 8 6-bit scales and 8 6-bit mins */
    uint8_t qs[128];    /* 4-bit quants */
};

struct moeinf_block_q5_k {
    uint16_t d;
    uint16_t dmin;
    uint8_t scales[12];
    uint8_t qh[32];  /* bit 4 of each quant */
    uint8_t qs[128]; /* bits 0-3 */
};

struct moeinf_block_q6_k {
    uint8_t ql[128];   /* bits 0-3 */
    uint8_t qh[64];    /* bits 4-5 */
    int8_t scales[16]; /* signed 8-bit scales of the 16 sub-blocks */
    uint16_t d;
};

/* Codebook types: each 4-bit quant indexes a table of 16 int8 values (moeinf_kvalues_iq4nl,
 * moeinf_kvalues_mxfp4). Element j < 16 of a block of 32 is table[qs[j] & 15] * d, element
 * j >= 16 is table[qs[j-16] >> 4] * d. */
#define MOEINF_QK4_NL   32
#define MOEINF_QK_MXFP4 32

/* IQ4_NL: a non-linear 4-bit grid with one F16 scale per 32 elements. */
struct moeinf_block_iq4_nl {
    uint16_t d;                    /* scale, F16 bits */
    uint8_t qs[MOEINF_QK4_NL / 2]; /* two 4-bit indices per byte */
};

/* IQ4_XS: IQ4_NL's grid in super-blocks of 256 with a 6-bit scale per sub-block of 32:
 * sub-block j's scale is ((scales_l[j / 2] >> 4 * (j % 2)) & 15) | (((scales_h >> 2j) & 3) << 4),
 * minus 32, times d; its 16 bytes of indices are qs[16j .. 16j + 15], ordered as IQ4_NL's. */
struct moeinf_block_iq4_xs {
    uint16_t d;                         /* F16: super-block scale */
    uint16_t scales_h;                  /* bits 4-5 of the 8 sub-block scales */
    uint8_t scales_l[MOEINF_QK_K / 64]; /* bits 0-3, two scales per byte */
    uint8_t qs[MOEINF_QK_K / 2];        /* two 4-bit indices per byte */
};

/* MXFP4 (OCP microscaling): 4-bit E2M1 values with one E8M0 scale (a power of two, 2^(e-127))
 * per 32 elements. The codebook holds the E2M1 values doubled (so that they are integers),
 * and d is the E8M0 value halved: 2^(e-128), a subnormal float for e < 2. */
struct moeinf_block_mxfp4 {
    uint8_t e;                       /* E8M0 exponent */
    uint8_t qs[MOEINF_QK_MXFP4 / 2]; /* two 4-bit E2M1 codes per byte */
};

/* The codebooks (facts from ggml): IQ4_NL's grid and MXFP4's doubled E2M1 values (sign in
 * bit 3, so code 8 is -0). */
extern const int8_t moeinf_kvalues_iq4nl[16];
extern const int8_t moeinf_kvalues_mxfp4[16];

/* The float of MXFP4's halved E8M0 scale, 2^(e-128) (exact for every e). */
float moeinf_e8m0_to_fp32_half(uint8_t e);

/* The activation partner of the K-quants: d in F32, int8 quants, and the sums of each 16
 * quants (which the kernels use for the mins and offsets). */
struct moeinf_block_q8_k {
    float d;
    int8_t qs[MOEINF_QK_K];
    int16_t bsums[MOEINF_QK_K / 16];
};

_Static_assert(sizeof(struct moeinf_block_q8_0) == 34, "block_q8_0 must be 34 bytes as in ggml");
_Static_assert(sizeof(struct moeinf_block_q4_0) == 18, "block_q4_0 must be 18 bytes as in ggml");
_Static_assert(sizeof(struct moeinf_block_q4_1) == 20, "block_q4_1 must be 20 bytes as in ggml");
_Static_assert(sizeof(struct moeinf_block_q5_0) == 22, "block_q5_0 must be 22 bytes as in ggml");
_Static_assert(sizeof(struct moeinf_block_q5_1) == 24, "block_q5_1 must be 24 bytes as in ggml");
_Static_assert(sizeof(struct moeinf_block_q8_1) == 36, "block_q8_1 must be 36 bytes as in ggml");
_Static_assert(sizeof(struct moeinf_block_q2_k) == 84, "block_q2_k must be 84 bytes as in ggml");
_Static_assert(sizeof(struct moeinf_block_q3_k) == 110, "block_q3_k must be 110 bytes as in ggml");
_Static_assert(sizeof(struct moeinf_block_q4_k) == 144, "block_q4_k must be 144 bytes as in ggml");
_Static_assert(sizeof(struct moeinf_block_q5_k) == 176, "block_q5_k must be 176 bytes as in ggml");
_Static_assert(sizeof(struct moeinf_block_q6_k) == 210, "block_q6_k must be 210 bytes as in ggml");
_Static_assert(sizeof(struct moeinf_block_q8_k) == 292, "block_q8_k must be 292 bytes as in ggml");
_Static_assert(sizeof(struct moeinf_block_iq4_nl) == 18,
               "block_iq4_nl must be 18 bytes as in ggml");
_Static_assert(sizeof(struct moeinf_block_iq4_xs) == 136,
               "block_iq4_xs must be 136 bytes as in ggml");
_Static_assert(sizeof(struct moeinf_block_mxfp4) == 17, "block_mxfp4 must be 17 bytes as in ggml");

/* F16 / BF16 scalar conversions (round to nearest even). */
uint16_t moeinf_fp32_to_fp16(float f);
float moeinf_fp16_to_fp32(uint16_t h);
uint16_t moeinf_fp32_to_bf16(float f);
float moeinf_bf16_to_fp32(uint16_t h);

/* Dequantizes a row of a supported type (the scalar table's to_float). */
void moeinf_dequantize_row(enum moeinf_type type, const void *x, float *y, int64_t n);

typedef void (*moeinf_from_float_fn)(const float *x, void *y, int64_t n);
typedef void (*moeinf_to_float_fn)(const void *x, float *y, int64_t n);

/* What the CPU side adds to a type's facts (base/tensor_type.h), as ggml-cpu's type_traits_cpu
 * extends ggml's type_traits: its activation partner and its reference weight quantizer.
 * Only the weight types moeinf computes with have an entry (the activation-only types Q8_1
 * and Q8_K have none: no tensor of those types can be multiplied). */
struct moeinf_type_cpu {
    enum moeinf_type vec_dot_type; /* activation partner type */
    moeinf_from_float_fn quantize; /* reference weight quantizer (moeinf_quantize_row_ref) */
};

/* The CPU traits of a type id, or NULL if moeinf cannot compute with it (unknown ids, known
 * types without kernels, activation-only types). */
const struct moeinf_type_cpu *moeinf_type_cpu_get(int type);

/* Reference weight quantization (gen-model, tests): llama.cpp's quantize_row_*_ref, which
 * is also what llama-quantize uses without an imatrix (Q8_0: d = amax/127, q = roundf(x/d);
 * Q4_0: d = -max/8 with max the signed element of largest magnitude, q = min(15,
 * (int)(x/d + 8.5)); Q5_0 likewise with 16; Q4_1/Q5_1: d = (max - min)/(2^bits - 1), m = min;
 * the K-quants: llama.cpp's scale searches, quant_ref_k.c; MXFP4: ggml's reference); IQ4_NL
 * and IQ4_XS are simpler than llama.cpp's (which search over scales): the nearest codebook
 * value per element for a scale set by the block's largest element (quant_ref_iq.c); F32
 * copies, F16/BF16 round to nearest even. `type` must have CPU traits and n be a multiple of its
 * block size; y holds moeinf_row_bytes(type, n). */
void moeinf_quantize_row_ref(enum moeinf_type type, const float *x, void *y, int64_t n);

/* s[0] = dot(w row, x row), n elements; w of the table's type, x of its vec_dot_type (as
 * a from_float wrote it). n is a multiple of the block size (any n >= 0 for F32, F16, BF16).
 * Block rows need no alignment; F32 rows must be 4-byte and F16/BF16 rows 2-byte aligned
 * (the scalar table reads them as arrays). */
typedef void (*moeinf_vec_dot_fn)(int64_t n, float *s, const void *w, const void *x);
/* s[j] = dot(w row, x row j) for j < m, x rows x_stride bytes apart: one weight row serves
 * m activation rows (prefill). Must equal m calls of vec_dot bit for bit. */
typedef void (*moeinf_vec_dot_m_fn)(int64_t n, int m, float *s, const void *w, const void *x,
                                    size_t x_stride);

/* s[r] = dot(w row r, x row) for r < nr, weight rows w_stride bytes apart (any stride; block
 * rows need no alignment): many weight rows against one activation row (decode). The
 * activation side is prepared once per call and shared by all nr rows, so callers should pass
 * as many rows as they have. Must equal nr calls of vec_dot bit for bit. */
typedef void (*moeinf_vec_dot_rows_fn)(int64_t n, int64_t nr, float *s, const void *w,
                                       size_t w_stride, const void *x);

/* y[j * y_stride + r] = dot(w row r, x row j) for r < nr and j < m: a tile of a matrix
 * product (prefill), weight rows w_stride and activation rows x_stride bytes apart. Each
 * weight block is prepared once for all m rows, and each activation block serves several
 * weight rows while it is in L1. Must equal the vec_dot calls bit for bit. */
typedef void (*moeinf_gemm_fn)(int64_t n, int64_t nr, int m, float *y, size_t y_stride,
                               const void *w, size_t w_stride, const void *x, size_t x_stride);

/* y[i] = y[i] + a * x[i] for i < n: the product rounded, then the sum (never a fused
 * multiply-add), so every table gives the bits of the plain C loop. Float helper of attention
 * (the weighted sum of V rows); x and y must not overlap. */
typedef void (*moeinf_axpy_fn)(int64_t n, float a, const float *x, float *y);

/* Attention's scores of `rows` q rows against a run of n K rows:
 *   s[r * s_stride + t] = dot(k_t, q_r) * scale   for t < n, r < rows,
 * the dot over d values in vec_dot's summation order (above), k_t's values (F32, or F16 where
 * k_f16, converted exactly) k_stride values after k_{t-1}, q_r q_stride floats after q_{r-1};
 * the product with scale rounded once more. Every table gives the same bits: those of
 * vec_dot_m[F32] on the converted row. Float helper of compute/attention.c. */
typedef void (*moeinf_qk_fn)(int64_t d, int64_t n, int rows, float *s, size_t s_stride,
                             const float *q, size_t q_stride, const void *k, size_t k_stride,
                             bool k_f16, float scale);

/* The weighted sum of attention's value rows, for `rows` output rows at once:
 *   out[r][i] = fma(p[r][t], v_t[i], out[r][i])   for t = 0, 1, ... n - 1 in order,
 * r < rows, i < d; v_t the row of d values (F32, or F16 where v_f16) v_stride values after
 * v_{t-1}. One fused multiply-add per step (C's fmaf), so every table gives the same bits, and
 * whatever rows share a call. The outputs stay in registers across the n rows of v, and each
 * v row is read (and F16 converted) once per 4 rows of a call. Float helper of
 * compute/attention.c; out rows must not overlap p, v or each other. */
typedef void (*moeinf_wsum_fn)(int64_t d, int64_t n, int rows, float *const *out,
                               const float *const *p, const void *v, size_t v_stride, bool v_f16);

/* In place, a row of n attention scores becomes their softmax: s[t] = exp(s[t] - max) / sum,
 * max the largest of the scores and *sink, sum the exponentials' and exp(*sink - max) (a sink
 * takes weight from every position and gives it to none; NULL: no sink). The exponential and
 * the order of the sum are src/quant/softmax.h's on every table, so all give the same bits;
 * the exponential is within an ulp of exp's. Float helper of compute/attention.c. */
typedef void (*moeinf_softmax_fn)(float *s, int64_t n, const float *sink);

/* One token of the Gated DeltaNet delta rule on one value head's state s (n rows of n
 * floats, row r for value element r), in place: for each row,
 *   row *= decay;  d = (v[r] - row . k) * beta;  row += d k;  out[r] = (row . q) * scale
 * Float helper of model/layer_deltanet.c. The tables sum the dot products in different
 * orders: they agree to rounding, not to the bit. */
typedef void (*moeinf_delta_rule_fn)(float *s, int n, const float *q, const float *k,
                                     const float *v, float decay, float beta, float scale,
                                     float *out);

/* A kernel table: static constant data, valid for the life of the process; every function
 * is pure (no state), so any number of threads may call them at once. Unsupported types
 * have NULL entries, and from_float is NULL for types that are never activations (Q4_0). */
struct moeinf_kernels {
    const char *name; /* "scalar", "avx2", "avx512", "amx", "neon", "dotprod" */
    moeinf_from_float_fn from_float[MOEINF_TYPE_COUNT];     /* activation -> this type */
    moeinf_to_float_fn to_float[MOEINF_TYPE_COUNT];         /* dequantize */
    moeinf_vec_dot_fn vec_dot[MOEINF_TYPE_COUNT];           /* indexed by the WEIGHT type */
    moeinf_vec_dot_m_fn vec_dot_m[MOEINF_TYPE_COUNT];       /* indexed by the WEIGHT type */
    moeinf_vec_dot_rows_fn vec_dot_rows[MOEINF_TYPE_COUNT]; /* indexed by the WEIGHT type */
    moeinf_gemm_fn gemm[MOEINF_TYPE_COUNT]; /* by WEIGHT type; NULL: vec_dot_m row by row */
    moeinf_axpy_fn axpy_f32;                /* float helper, all tables */
    moeinf_softmax_fn softmax_f32;          /* float helper, all tables */
    moeinf_qk_fn qk_f32;                    /* float helper, all tables */
    moeinf_wsum_fn wsum_f32;                /* float helper, all tables */
    moeinf_delta_rule_fn delta_rule_f32;    /* float helper, all tables */
};

const struct moeinf_kernels *moeinf_kernels_scalar(void);
/* NULL unless the CPU has AVX2+FMA+F16C and the OS saves the YMM registers. */
const struct moeinf_kernels *moeinf_kernels_avx2(void);
/* NULL unless the CPU also has AVX-512 F/BW/VL/DQ/VNNI/BF16 (the file's -m flags; Cooper
 * Lake, Sapphire Rapids, Zen 4 and later) and the OS saves the opmask and ZMM registers. */
const struct moeinf_kernels *moeinf_kernels_avx512(void);
/* NULL unless the CPU also has AMX-TILE and AMX-INT8 (Sapphire Rapids and later Xeons), the
 * OS saves the tile state and Linux grants it to this process (asked for here: a process-wide
 * permission, which only lets the process use the tile registers). */
const struct moeinf_kernels *moeinf_kernels_amx(void);
/* NULL unless this is arm64 Linux with Advanced SIMD (every ARMv8-A core). */
const struct moeinf_kernels *moeinf_kernels_neon(void);
/* NULL unless it also has the dot product extension (HWCAP_ASIMDDP: Neoverse N1, Cortex-A76,
 * Apple M1 and later). */
const struct moeinf_kernels *moeinf_kernels_dotprod(void);
/* The best table this CPU runs. Probes the CPU on every call: call it once and keep the
 * pointer. */
const struct moeinf_kernels *moeinf_kernels_best(void);
/* The best table this CPU runs at or below `cap`: "scalar", "avx2", "avx512" or "amx" on x86-64
 * (so "avx512" on an AVX2-only CPU gives the AVX2 table), "scalar", "neon" or "dotprod" on
 * arm64; a name of the other architecture gives the scalar table. NULL or "" gives the best.
 * Any other name is MOEINF_ERR_ARG with a message naming the choices. */
enum moeinf_status moeinf_kernels_choose(const char *cap, const struct moeinf_kernels **out,
                                         struct moeinf_error *err);
/* moeinf_kernels_choose with the environment variable MOEINF_KERNELS (read on every call). */
enum moeinf_status moeinf_kernels_from_env(const struct moeinf_kernels **out,
                                           struct moeinf_error *err);

#endif
