/*
 * quant.h - tensor types (ggml ids and block layouts) and the CPU kernel table.
 *
 * A weight row of type T is multiplied by an activation row converted to T's partner type
 * traits->vec_dot_type, exactly as llama.cpp does (../shared/testdata/README.md, 2.4):
 *   F32  x F32       F16 x F16 (activation rounded to F16)    BF16 x BF16
 *   Q8_0 x Q8_0      Q4_0 x Q8_0   (activation: d = max|x|/127 as F16, q = round-half-even)
 * Block dot products are exact integer sums scaled by d_w * d_x.
 *
 * Kernel tables: moeinf_kernels_scalar() is the reference (portable C); the AVX2 and AVX-512
 * tables give the same results up to float summation order (integer parts bit-exact), and
 * from_float is bit-exact with the scalar twin. moeinf_kernels_best() picks at run time.
 */
#ifndef MOEINF_QUANT_H
#define MOEINF_QUANT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* ggml type ids, as stored in GGUF tensor infos. */
enum moeinf_type {
    MOEINF_TYPE_F32 = 0,
    MOEINF_TYPE_F16 = 1,
    MOEINF_TYPE_Q4_0 = 2,
    MOEINF_TYPE_Q4_1 = 3,
    MOEINF_TYPE_Q5_0 = 6,
    MOEINF_TYPE_Q5_1 = 7,
    MOEINF_TYPE_Q8_0 = 8,
    MOEINF_TYPE_Q8_1 = 9,
    MOEINF_TYPE_Q2_K = 10,
    MOEINF_TYPE_Q3_K = 11,
    MOEINF_TYPE_Q4_K = 12,
    MOEINF_TYPE_Q5_K = 13,
    MOEINF_TYPE_Q6_K = 14,
    MOEINF_TYPE_Q8_K = 15,
    MOEINF_TYPE_BF16 = 30,
    MOEINF_TYPE_COUNT = 42 /* table size; ids >= this are unknown */
};

struct moeinf_type_traits {
    const char *name;          /* "f32", "q4_0", ... (ggml's names); NULL = unknown id */
    int64_t block_size;        /* elements per block */
    size_t type_size;          /* bytes per block */
    bool supported;            /* moeinf can compute with it */
    enum moeinf_type vec_dot_type; /* activation partner type (supported types only) */
};

/* Traits of a ggml type id, or NULL if the id is not a known ggml type. */
const struct moeinf_type_traits *moeinf_type_traits_get(int type);

/* Bytes of a row of n elements (n must be a multiple of the block size). */
size_t moeinf_row_bytes(enum moeinf_type type, int64_t n);

/* F16 / BF16 scalar conversions (round to nearest even). */
uint16_t moeinf_fp32_to_fp16(float f);
float moeinf_fp16_to_fp32(uint16_t h);
uint16_t moeinf_fp32_to_bf16(float f);
float moeinf_bf16_to_fp32(uint16_t h);

/* Reference weight quantization (gen-model, tests): llama.cpp's quantize_row_*_ref. */
void moeinf_quantize_row_ref(enum moeinf_type type, const float *x, void *y, int64_t n);

typedef void (*moeinf_from_float_fn)(const float *x, void *y, int64_t n);
typedef void (*moeinf_to_float_fn)(const void *x, float *y, int64_t n);
/* s[0] = dot(w row, x row), n elements; w of the table's type, x of its vec_dot_type. */
typedef void (*moeinf_vec_dot_fn)(int64_t n, float *s, const void *w, const void *x);
/* s[j] = dot(w row, x row j) for j < m, x rows x_stride bytes apart: one weight row serves
 * m activation rows (prefill). Must equal m calls of vec_dot bit for bit. */
typedef void (*moeinf_vec_dot_m_fn)(int64_t n, int m, float *s, const void *w, const void *x,
                                    size_t x_stride);

struct moeinf_kernels {
    const char *name;                                 /* "scalar", "avx2", "avx512" */
    moeinf_from_float_fn from_float[MOEINF_TYPE_COUNT]; /* activation -> this type */
    moeinf_to_float_fn to_float[MOEINF_TYPE_COUNT];     /* dequantize */
    moeinf_vec_dot_fn vec_dot[MOEINF_TYPE_COUNT];       /* indexed by the WEIGHT type */
    moeinf_vec_dot_m_fn vec_dot_m[MOEINF_TYPE_COUNT];   /* indexed by the WEIGHT type */
};

const struct moeinf_kernels *moeinf_kernels_scalar(void);
const struct moeinf_kernels *moeinf_kernels_avx2(void);   /* NULL if the CPU lacks AVX2+FMA+F16C */
const struct moeinf_kernels *moeinf_kernels_avx512(void); /* NULL if the CPU lacks AVX-512 F/BW/VL */
/* The best table this CPU runs; MOEINF_KERNELS=scalar|avx2|avx512 in the environment caps it. */
const struct moeinf_kernels *moeinf_kernels_best(void);

#endif
