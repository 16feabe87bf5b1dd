// ctest-labels: golden;kernels;every-table
/*
 * test_quant.c - tensor types and CPU kernels (src/quant).
 *
 * Independent expectations: hand-computed blocks, brute-force F16/BF16 rounding over sorted
 * value tables, float64 dot products with stated error bounds, integer block dots decoded
 * here (not by the library), and every SIMD table compared bit for bit with the scalar twin.
 * Real data: the llama-quantize outputs in ../shared/testdata are re-quantized from the F32
 * file and must come out byte-identical.
 */
#include <float.h>
#include <stdint.h>

#include "base/rng.h"
#include "gguf/gguf.h"
#include "kernels_wanted.h"
#include "quant/kernels.h"
#include "quant/quant.h"
#include "quant/quant_ref.h"
#include "test.h"

/* ---- helpers ------------------------------------------------------------------------------ */

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;

static uint64_t rng_u64(void) {
    return moeinf_splitmix64(&rng_state);
}

static double rng_uniform(void) { /* [0, 1) */
    return (double)(rng_u64() >> 11) * 0x1p-53;
}

static float rng_normal(void) {
    double u1 = rng_uniform() + 0x1p-60;
    double u2 = rng_uniform();
    return (float)(sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2));
}

static float bits_f(uint32_t u) {
    float f;
    memcpy(&f, &u, 4);
    return f;
}

static uint32_t f_bits(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

/* Random activations: normal values with a scale that varies per block of 32, some zeros and
 * an occasional all-zero block (d = 0), as real hidden states have. */
static void fill_activations(float *x, int64_t n) {
    for (int64_t i = 0; i < n; i += 32) {
        float scale = (float)pow(10.0, 3.0 * rng_uniform() - 1.5);
        bool zero_block = rng_u64() % 23 == 0;
        for (int64_t j = i; j < i + 32 && j < n; j++) {
            x[j] = zero_block ? 0.0f : rng_normal() * scale;
            if (rng_u64() % 50 == 0) x[j] = 0.0f;
        }
    }
}

/* Bytes of a row and whether the type is block-quantized. */
static size_t row_bytes(enum moeinf_type t, int64_t n) {
    return moeinf_row_bytes(t, n);
}

static const enum moeinf_type supported[] = {
    MOEINF_TYPE_F32,  MOEINF_TYPE_F16,    MOEINF_TYPE_BF16,   MOEINF_TYPE_Q8_0,
    MOEINF_TYPE_Q4_0, MOEINF_TYPE_Q4_1,   MOEINF_TYPE_Q5_0,   MOEINF_TYPE_Q5_1,
    MOEINF_TYPE_Q2_K, MOEINF_TYPE_Q3_K,   MOEINF_TYPE_Q4_K,   MOEINF_TYPE_Q5_K,
    MOEINF_TYPE_Q6_K, MOEINF_TYPE_IQ4_NL, MOEINF_TYPE_IQ4_XS, MOEINF_TYPE_MXFP4};

#define N_SUPPORTED ((int)(sizeof supported / sizeof supported[0]))

static bool is_block_type(enum moeinf_type t) {
    return t != MOEINF_TYPE_F32 && t != MOEINF_TYPE_F16 && t != MOEINF_TYPE_BF16;
}

static int64_t block_size(enum moeinf_type t) {
    return moeinf_type_traits_get((int)t)->block_size;
}

/* A length for type t from one chosen for 32-element blocks: K-quants (256) scale it by 8
 * (the same count of blocks) up to 288, longer ones are rounded up to whole super-blocks. */
static int64_t len_for(enum moeinf_type t, int64_t n32) {
    int64_t bs = block_size(t);
    if (bs <= 32) return n32;
    if (n32 <= 288) return n32 * (bs / 32);
    return (n32 + bs - 1) / bs * bs;
}

/* Byte offsets of the F16 fields (scales, mins) inside a block of type t; -1 ends the list. */
static const int *half_fields(enum moeinf_type t) {
    static const int d0[] = {0, -1};
    static const int dm[] = {0, 2, -1};
    static const int q2k[] = {80, 82, -1};
    static const int q3k[] = {108, -1};
    static const int q6k[] = {208, -1};
    static const int none[] = {-1};
    switch (t) {
    case MOEINF_TYPE_Q4_1:
    case MOEINF_TYPE_Q5_1:
    case MOEINF_TYPE_Q4_K:
    case MOEINF_TYPE_Q5_K:
        return dm;
    case MOEINF_TYPE_Q2_K:
        return q2k;
    case MOEINF_TYPE_Q3_K:
        return q3k;
    case MOEINF_TYPE_Q6_K:
        return q6k;
    case MOEINF_TYPE_MXFP4: /* its scale is an E8M0 byte (make_weights) */
        return none;
    default:
        return d0;
    }
}

/* The tables this CPU can run: scalar first. */
static const struct moeinf_kernels *tables[6];
static int n_tables;

/* A weight row of type t: quantized from random data by the reference quantizer, or (for
 * block types with `raw`) random bytes with random finite F16 scales, which reaches quants
 * the quantizer never writes (q8_0 -128, every q4_0 nibble). */
static void make_weights(enum moeinf_type t, void *w, int64_t n, bool raw) {
    float *tmp = malloc((size_t)(n > 0 ? n : 1) * sizeof(float)); /* n = 0: no malloc(0) */
    fill_activations(tmp, n);
    moeinf_quantize_row_ref(t, tmp, w, n);
    free(tmp);
    if (raw && is_block_type(t)) {
        size_t bs = moeinf_type_traits_get((int)t)->type_size;
        uint8_t *p = w;
        for (int64_t b = 0; b < n / block_size(t); b++) {
            for (size_t k = 0; k < bs; k++)
                p[b * (int64_t)bs + (int64_t)k] = (uint8_t)rng_u64();
            for (const int *f = half_fields(t); *f >= 0; f++) {
                uint16_t h;
                do
                    h = (uint16_t)rng_u64();
                while (((h >> 10) & 0x1f) > 24); /* finite, < 2^10 */
                memcpy(p + b * (int64_t)bs + *f, &h, 2);
            }
            /* MXFP4's E8M0 scale 2^(e-128): mostly 2^-28..2^11, sometimes the subnormal
             * floats of e < 2 and their neighbours (large e would make inf weights). */
            if (t == MOEINF_TYPE_MXFP4)
                p[b * (int64_t)bs] =
                    (uint8_t)(rng_u64() % 8 ? 100 + rng_u64() % 40 : rng_u64() % 4);
        }
    }
}

/* The activation row for weight type t, made by the scalar from_float. */
static void make_activation(enum moeinf_type t, void *x, int64_t n) {
    enum moeinf_type vt = moeinf_type_cpu_get((int)t)->vec_dot_type;
    float *tmp = malloc((size_t)(n > 0 ? n : 1) * sizeof(float)); /* n = 0: no malloc(0) */
    fill_activations(tmp, n);
    moeinf_kernels_scalar()->from_float[vt](tmp, x, n);
    free(tmp);
}

/* A byte read as a two's complement int8 quant. */
static int quant_s8(uint8_t b) {
    return b < 128 ? b : b - 256;
}

static float half_at(const uint8_t *p) {
    uint16_t h;
    memcpy(&h, p, 2);
    return moeinf_fp16_to_fp32(h);
}

/* Independent decoding of block b of a quantized row: 32 integers and the scale. */
static float decode_block(enum moeinf_type t, const void *row, int64_t b, int q[32]) {
    if (t == MOEINF_TYPE_Q8_0) {
        const uint8_t *p = (const uint8_t *)row + b * 34;
        for (int j = 0; j < 32; j++)
            q[j] = quant_s8(p[2 + j]);
        return half_at(p);
    }
    const uint8_t *p = (const uint8_t *)row + b * 18;
    for (int j = 0; j < 16; j++) {
        q[j] = (int)(p[2 + j] % 16) - 8;
        q[j + 16] = (int)(p[2 + j] / 16) - 8;
    }
    return half_at(p);
}

/* Element i of a float-like row as double. */
static double elem(enum moeinf_type t, const void *row, int64_t i) {
    if (t == MOEINF_TYPE_F32) return ((const float *)row)[i];
    if (t == MOEINF_TYPE_F16) return moeinf_fp16_to_fp32(((const uint16_t *)row)[i]);
    return bits_f((uint32_t)((const uint16_t *)row)[i] << 16);
}

/* ---- traits ------------------------------------------------------------------------------ */

static void test_traits(void) {
    /* The CPU side: exactly the weight types with kernels, with llama.cpp's partner types,
     * which are activation types every table converts to. */
    int n_supported = 0;
    for (int id = -3; id < MOEINF_TYPE_COUNT + 3; id++) {
        const struct moeinf_type_cpu *c = moeinf_type_cpu_get(id);
        if (!c) continue;
        n_supported++;
        CHECK_MSG(moeinf_type_traits_get(id) != NULL, "type %d has kernels but no facts", id);
        CHECK_MSG(moeinf_kernels_scalar()->from_float[c->vec_dot_type] != NULL,
                  "partner of type %d", id);
        CHECK_MSG(c->quantize != NULL, "quantizer of type %d", id);
    }
    CHECK_EQ_INT(n_supported, N_SUPPORTED);
    for (int i = 0; i < N_SUPPORTED; i++)
        CHECK(moeinf_type_cpu_get((int)supported[i]) != NULL);
    CHECK(moeinf_type_cpu_get(MOEINF_TYPE_IQ2_XXS) == NULL); /* known, no kernels yet */
    CHECK(moeinf_type_cpu_get(MOEINF_TYPE_Q8_K) == NULL);    /* activation only */
    CHECK(moeinf_type_cpu_get(MOEINF_TYPE_Q8_1) == NULL);
    CHECK(moeinf_type_cpu_get(4) == NULL); /* removed id */
    CHECK(moeinf_type_cpu_get(MOEINF_TYPE_F32)->vec_dot_type == MOEINF_TYPE_F32);
    CHECK(moeinf_type_cpu_get(MOEINF_TYPE_F16)->vec_dot_type == MOEINF_TYPE_F16);
    CHECK(moeinf_type_cpu_get(MOEINF_TYPE_BF16)->vec_dot_type == MOEINF_TYPE_BF16);
    CHECK(moeinf_type_cpu_get(MOEINF_TYPE_Q8_0)->vec_dot_type == MOEINF_TYPE_Q8_0);
    CHECK(moeinf_type_cpu_get(MOEINF_TYPE_Q4_0)->vec_dot_type == MOEINF_TYPE_Q8_0);
    CHECK(moeinf_type_cpu_get(MOEINF_TYPE_Q5_0)->vec_dot_type == MOEINF_TYPE_Q8_0);
    CHECK(moeinf_type_cpu_get(MOEINF_TYPE_Q4_1)->vec_dot_type == MOEINF_TYPE_Q8_1);
    CHECK(moeinf_type_cpu_get(MOEINF_TYPE_Q5_1)->vec_dot_type == MOEINF_TYPE_Q8_1);
    CHECK(moeinf_type_cpu_get(MOEINF_TYPE_IQ4_NL)->vec_dot_type == MOEINF_TYPE_Q8_0);
    CHECK(moeinf_type_cpu_get(MOEINF_TYPE_MXFP4)->vec_dot_type == MOEINF_TYPE_Q8_0);
    CHECK(moeinf_type_cpu_get(MOEINF_TYPE_IQ4_XS)->vec_dot_type == MOEINF_TYPE_Q8_K);

    const enum moeinf_type k_types[] = {MOEINF_TYPE_Q2_K, MOEINF_TYPE_Q3_K, MOEINF_TYPE_Q4_K,
                                        MOEINF_TYPE_Q5_K, MOEINF_TYPE_Q6_K};

    for (int i = 0; i < 5; i++)
        CHECK(moeinf_type_cpu_get((int)k_types[i])->vec_dot_type == MOEINF_TYPE_Q8_K);

    /* Every block struct has the size of the shared table's block (ggml's). */
    const struct {
        enum moeinf_type t;
        size_t size;
    } blocks[] = {{MOEINF_TYPE_Q4_1, sizeof(struct moeinf_block_q4_1)},
                  {MOEINF_TYPE_Q5_0, sizeof(struct moeinf_block_q5_0)},
                  {MOEINF_TYPE_Q5_1, sizeof(struct moeinf_block_q5_1)},
                  {MOEINF_TYPE_Q8_1, sizeof(struct moeinf_block_q8_1)},
                  {MOEINF_TYPE_Q2_K, sizeof(struct moeinf_block_q2_k)},
                  {MOEINF_TYPE_Q3_K, sizeof(struct moeinf_block_q3_k)},
                  {MOEINF_TYPE_Q4_K, sizeof(struct moeinf_block_q4_k)},
                  {MOEINF_TYPE_Q5_K, sizeof(struct moeinf_block_q5_k)},
                  {MOEINF_TYPE_Q6_K, sizeof(struct moeinf_block_q6_k)},
                  {MOEINF_TYPE_Q8_K, sizeof(struct moeinf_block_q8_k)},
                  {MOEINF_TYPE_IQ4_NL, sizeof(struct moeinf_block_iq4_nl)},
                  {MOEINF_TYPE_IQ4_XS, sizeof(struct moeinf_block_iq4_xs)},
                  {MOEINF_TYPE_MXFP4, sizeof(struct moeinf_block_mxfp4)}};

    for (size_t i = 0; i < sizeof blocks / sizeof blocks[0]; i++)
        CHECK_EQ_INT(moeinf_type_traits_get((int)blocks[i].t)->type_size, blocks[i].size);
    /* The block structs the kernels use match the shared table's layouts. */
    CHECK_EQ_INT(moeinf_type_traits_get(MOEINF_TYPE_Q8_0)->type_size,
                 sizeof(struct moeinf_block_q8_0));
    CHECK_EQ_INT(moeinf_type_traits_get(MOEINF_TYPE_Q8_0)->block_size, MOEINF_QK8_0);
    CHECK_EQ_INT(moeinf_type_traits_get(MOEINF_TYPE_Q4_0)->type_size,
                 sizeof(struct moeinf_block_q4_0));
    CHECK_EQ_INT(moeinf_type_traits_get(MOEINF_TYPE_Q4_0)->block_size, MOEINF_QK4_0);
    /* Row sizes: whole blocks times bytes per block; unknown types have none. */
    CHECK_EQ_INT(moeinf_row_bytes(MOEINF_TYPE_Q8_0, 4096), 4096 / 32 * 34);
    CHECK_EQ_INT(moeinf_row_bytes(MOEINF_TYPE_Q4_0, 4096), 4096 / 32 * 18);
    CHECK_EQ_INT(moeinf_row_bytes(MOEINF_TYPE_F16, 7), 14);
    CHECK_EQ_INT(moeinf_row_bytes(MOEINF_TYPE_F32, 7), 28);
    CHECK_EQ_INT(moeinf_row_bytes(MOEINF_TYPE_Q4_K, 512), 288);
    CHECK_EQ_INT(moeinf_row_bytes((enum moeinf_type)4, 32), 0);
}

/* ---- F16 / BF16 conversions ----------------------------------------------------------------- */

/* Value of a half from its fields, computed in double without the library. */
static double half_value(uint16_t h) {
    int e = (h >> 10) & 31;
    int m = h & 1023;
    double v = e == 0 ? ldexp(m, -24) : ldexp(1024 + m, e - 25);
    return (h & 0x8000) ? -v : v;
}

static void test_fp16_exhaustive(void) {
    int bad_value = 0;
    int bad_trip = 0;
    int bad_nan = 0;
    for (uint32_t h = 0; h < 65536; h++) {
        float f = moeinf_fp16_to_fp32((uint16_t)h);
        bool is_nan = ((h >> 10) & 31) == 31 && (h & 1023);
        bool is_inf = ((h >> 10) & 31) == 31 && !(h & 1023);
        if (is_nan) {
            /* NaN stays NaN with its sign, quiet, keeping the payload bits. */
            uint32_t u = f_bits(f);
            bad_nan += !isnan(f) || (u >> 31) != (h >> 15) || !(u & 0x400000u) ||
                       ((u >> 13) & 0x1ff) != (h & 0x1ff);
            uint16_t back = moeinf_fp32_to_fp16(f);
            bad_nan += back != (h | 0x200);
            continue;
        }
        double want = is_inf ? ((h & 0x8000) ? -INFINITY : INFINITY) : half_value((uint16_t)h);
        bad_value += (double)f != want || (signbit(f) != 0) != ((h & 0x8000) != 0);
        bad_trip += moeinf_fp32_to_fp16(f) != h;
    }
    CHECK_EQ_INT(bad_value, 0);
    CHECK_EQ_INT(bad_trip, 0);
    CHECK_EQ_INT(bad_nan, 0);
}

static void test_fp16_rounding_cases(void) {
    CHECK_EQ_INT(moeinf_fp32_to_fp16(1.0f), 0x3c00);
    CHECK_EQ_INT(moeinf_fp32_to_fp16(1.0f + 0x1p-11f), 0x3c00);            /* tie -> even (down) */
    CHECK_EQ_INT(moeinf_fp32_to_fp16(1.0f + 3 * 0x1p-11f), 0x3c02);        /* tie -> even (up) */
    CHECK_EQ_INT(moeinf_fp32_to_fp16(1.0f + 0x1p-11f + 0x1p-20f), 0x3c01); /* above the tie */
    CHECK_EQ_INT(moeinf_fp32_to_fp16(-2.0f), 0xc000);
    CHECK_EQ_INT(moeinf_fp32_to_fp16(65504.0f), 0x7bff); /* largest half */
    CHECK_EQ_INT(moeinf_fp32_to_fp16(65519.99f), 0x7bff);
    CHECK_EQ_INT(moeinf_fp32_to_fp16(65520.0f), 0x7c00); /* tie with 2^16 -> even = inf */
    CHECK_EQ_INT(moeinf_fp32_to_fp16(1e10f), 0x7c00);
    CHECK_EQ_INT(moeinf_fp32_to_fp16(-INFINITY), 0xfc00);
    CHECK_EQ_INT(moeinf_fp32_to_fp16(0x1p-14f), 0x0400);            /* smallest normal */
    CHECK_EQ_INT(moeinf_fp32_to_fp16(0x1p-14f - 0x1p-25f), 0x0400); /* tie, rounds up */
    CHECK_EQ_INT(moeinf_fp32_to_fp16(0x1p-24f), 0x0001);            /* smallest subnormal */
    CHECK_EQ_INT(moeinf_fp32_to_fp16(0x1p-25f), 0x0000);            /* tie -> even 0 */
    CHECK_EQ_INT(moeinf_fp32_to_fp16(0x1p-25f + 0x1p-40f), 0x0001);
    CHECK_EQ_INT(moeinf_fp32_to_fp16(3 * 0x1p-25f), 0x0002); /* 1.5 units -> 2 */
    CHECK_EQ_INT(moeinf_fp32_to_fp16(5 * 0x1p-25f), 0x0002); /* 2.5 units -> 2 */
    CHECK_EQ_INT(moeinf_fp32_to_fp16(-0.0f), 0x8000);
    CHECK_EQ_INT(moeinf_fp32_to_fp16(1e-30f), 0x0000);
    CHECK_EQ_INT(moeinf_fp32_to_fp16(FLT_MIN / 4), 0x0000); /* float subnormal */
    CHECK_EQ_INT(moeinf_fp32_to_fp16(bits_f(0x7fc00000u)), 0x7e00);
    CHECK_EQ_INT(moeinf_fp32_to_fp16(bits_f(0xff800001u)), 0xfe00); /* signalling -> quiet */
    CHECK(moeinf_fp16_to_fp32(0x7c00) == INFINITY);
    CHECK(moeinf_fp16_to_fp32(0x0001) == 0x1p-24f);
    CHECK(moeinf_fp16_to_fp32(0x3555) == 0x1.554p-2f);
}

/* Brute force: the nearest half by value (ties to the even bit pattern), found by binary
 * search over the 31744 finite non-negative halves, which are sorted by value. */
static uint16_t fp16_bruteforce(float f) {
    double a = fabs((double)f);
    uint16_t sign = signbit(f) ? 0x8000 : 0;
    if (a >= 65520.0) return sign | 0x7c00;
    int lo = 0;
    int hi = 0x7bff; /* half_value(lo) <= a < half_value(hi+1) */
    while (lo < hi) {
        int mid = (lo + hi + 1) / 2;
        if (half_value((uint16_t)mid) <= a)
            lo = mid;
        else
            hi = mid - 1;
    }
    double below = half_value((uint16_t)lo);
    if (below == a) return sign | (uint16_t)lo;
    double above = lo == 0x7bff ? 65536.0 : half_value((uint16_t)(lo + 1));
    uint16_t pick;
    if (a - below < above - a)
        pick = (uint16_t)lo;
    else if (a - below > above - a)
        pick = (uint16_t)(lo + 1);
    else
        pick = (uint16_t)((lo & 1) ? lo + 1 : lo);
    if (pick == 0x7c00) return sign | 0x7c00;
    return sign | pick;
}

static void test_fp16_random_vs_bruteforce(void) {
    int bad = 0;
    for (int i = 0; i < 200000; i++) {
        /* Exponents around the half range, all mantissas. */
        uint32_t e = 100 + (uint32_t)(rng_u64() % 45);
        uint32_t u = (uint32_t)(rng_u64() & 0x807fffffu) | (e << 23);
        if (i % 4 == 0) u = (u & 0xffffe000u) | 0x1000u; /* exact ties */
        float f = bits_f(u);
        if (moeinf_fp32_to_fp16(f) != fp16_bruteforce(f)) {
            if (bad++ < 5)
                fprintf(stderr, "fp16(%a): got %04x want %04x\n", (double)f, moeinf_fp32_to_fp16(f),
                        fp16_bruteforce(f));
        }
    }
    CHECK_EQ_INT(bad, 0);
}

static void test_bf16(void) {
    int bad = 0;
    for (uint32_t h = 0; h < 65536; h++) {
        float f = moeinf_bf16_to_fp32((uint16_t)h);
        CHECK(f_bits(f) == h << 16 || (bad++, 0));
        if (isnan(f))
            bad += moeinf_fp32_to_bf16(f) != (h | 64);
        else
            bad += moeinf_fp32_to_bf16(f) != h;
    }
    CHECK_EQ_INT(bad, 0);
    CHECK_EQ_INT(moeinf_fp32_to_bf16(1.0f), 0x3f80);
    CHECK_EQ_INT(moeinf_fp32_to_bf16(1.0f + 0x1p-8f), 0x3f80);     /* tie -> even (down) */
    CHECK_EQ_INT(moeinf_fp32_to_bf16(1.0f + 3 * 0x1p-8f), 0x3f82); /* tie -> even (up) */
    CHECK_EQ_INT(moeinf_fp32_to_bf16(1.0f + 0x1p-8f + 0x1p-20f), 0x3f81);
    CHECK_EQ_INT(moeinf_fp32_to_bf16(FLT_MAX), 0x7f80);             /* rounds up to inf */
    CHECK_EQ_INT(moeinf_fp32_to_bf16(bits_f(0x7f800001u)), 0x7fc0); /* quiet NaN */
    CHECK_EQ_INT(moeinf_fp32_to_bf16(bits_f(0x00018000u)), 0x0002); /* subnormal tie -> even */
    /* Random floats against the nearest of the two truncation neighbours, in double. */
    int bad_rand = 0;
    for (int i = 0; i < 200000; i++) {
        uint32_t u = (uint32_t)rng_u64();
        if ((u & 0x7f800000u) == 0x7f800000u) continue;
        if (i % 4 == 0) u = (u & 0xffff0000u) | 0x8000u;
        float f = bits_f(u);
        uint32_t lo = u & 0xffff0000u;
        double dlo = bits_f(lo);
        double dhi = (lo & 0x7fffffffu) == 0x7f7f0000u ? ((u >> 31) ? -0x1p128 : 0x1p128)
                                                       : (double)bits_f(lo + 0x10000u);
        double dlo_err = fabs((double)f - dlo);
        double dhi_err = fabs(dhi - (double)f);
        uint16_t want = (uint16_t)(lo >> 16);
        if (dhi_err < dlo_err || (dhi_err == dlo_err && (want & 1))) want++;
        bad_rand += moeinf_fp32_to_bf16(f) != want;
    }
    CHECK_EQ_INT(bad_rand, 0);
}

/* ---- known answers ----------------------------------------------------------------------------
 */

static void test_known_q8_0(void) {
    /* amax = 127 makes d = 1 and 1/d = 127/amax = 1: the quants are the rounded inputs, so
     * the rounding rule shows: ggml's weight ref uses roundf (half away from zero), the x86
     * activation quantizer rounds half to even. */
    float x[32];
    x[0] = -127.0f;
    for (int j = 1; j < 32; j++)
        x[j] = (float)j - 15.5f; /* -14.5 ... 15.5 */
    struct moeinf_block_q8_0 w;
    struct moeinf_block_q8_0 a;
    moeinf_quantize_row_ref(MOEINF_TYPE_Q8_0, x, &w, 32);
    moeinf_kernels_scalar()->from_float[MOEINF_TYPE_Q8_0](x, &a, 32);
    CHECK_EQ_INT(w.d, 0x3c00);
    CHECK_EQ_INT(a.d, 0x3c00);
    CHECK_EQ_INT(w.qs[0], -127);
    CHECK_EQ_INT(a.qs[0], -127);
    CHECK_EQ_INT(w.qs[1], -15); /* -14.5 */
    CHECK_EQ_INT(a.qs[1], -14);
    CHECK_EQ_INT(w.qs[15], -1); /* -0.5 */
    CHECK_EQ_INT(a.qs[15], 0);
    CHECK_EQ_INT(w.qs[16], 1); /* 0.5 */
    CHECK_EQ_INT(a.qs[16], 0);
    CHECK_EQ_INT(w.qs[17], 2); /* 1.5 */
    CHECK_EQ_INT(a.qs[17], 2);
    CHECK_EQ_INT(w.qs[18], 3); /* 2.5 */
    CHECK_EQ_INT(a.qs[18], 2);
    CHECK_EQ_INT(w.qs[31], 16); /* 15.5 */
    CHECK_EQ_INT(a.qs[31], 16);

    /* amax = 2: d = 2/127 -> F16 0x2408 (1.0078p-6), both scales give x * 63.5 exactly. */
    float y[32] = {0};
    y[3] = 2.0f;
    y[4] = -1.0f; /* -63.5: ref -64, activation -64 (even) */
    y[5] = 0.25f; /* 15.875 -> 16 */
    moeinf_quantize_row_ref(MOEINF_TYPE_Q8_0, y, &w, 32);
    moeinf_kernels_scalar()->from_float[MOEINF_TYPE_Q8_0](y, &a, 32);
    CHECK_EQ_INT(w.d, 0x2408);
    CHECK_EQ_INT(a.d, 0x2408);
    CHECK_EQ_INT(w.qs[3], 127);
    CHECK_EQ_INT(a.qs[3], 127);
    CHECK_EQ_INT(w.qs[4], -64);
    CHECK_EQ_INT(a.qs[4], -64);
    CHECK_EQ_INT(w.qs[5], 16);
    CHECK_EQ_INT(a.qs[5], 16);
    CHECK_EQ_INT(a.qs[0], 0);

    /* All zero: d = 0 and zero quants (no division by zero). */
    float z[32] = {0};
    moeinf_quantize_row_ref(MOEINF_TYPE_Q8_0, z, &w, 32);
    moeinf_kernels_scalar()->from_float[MOEINF_TYPE_Q8_0](z, &a, 32);
    CHECK_EQ_INT(w.d, 0);
    CHECK_EQ_INT(a.d, 0);
    int nz = 0;
    for (int j = 0; j < 32; j++)
        nz += w.qs[j] != 0 || a.qs[j] != 0;
    CHECK_EQ_INT(nz, 0);

    /* Dequantization: d = 0.5 (0x3800). */
    struct moeinf_block_q8_0 b = {0x3800, {0}};
    b.qs[0] = -128;
    b.qs[1] = 127;
    b.qs[2] = 1;
    b.qs[31] = -3;
    float out[32];
    moeinf_dequantize_row(MOEINF_TYPE_Q8_0, &b, out, 32);
    CHECK(out[0] == -64.0f && out[1] == 63.5f && out[2] == 0.5f && out[3] == 0.0f &&
          out[31] == -1.5f);
}

/* llama.cpp scales activations by 127/amax, not by 1/d with d = amax/127: find blocks where
 * the two differ after rounding and check that every table follows 127/amax. Also the
 * defined results for non-finite input (inf: d = inf, the inf element -128). */
static void test_q8_0_activation_scale_rule(void) {
    int found = 0;
    for (int i = 0; i < 100000 && found < 20; i++) {
        float amax = (float)(0.5 + rng_uniform());
        volatile float d = amax / 127.0f; /* volatile: keep both formulas as written */
        float id1 = 127.0f / amax;
        float id2 = 1.0f / d;
        if (id1 == id2) continue;
        for (int j = 0; j < 127 && found < 20; j++) {
            float v = ((float)j + 0.5f) / id1;
            float a = v * id1;
            float b = v * id2;
            if (nearbyintf(a) == nearbyintf(b)) continue;
            found++;
            float x[32] = {0};
            x[0] = amax;
            x[5] = v;
            x[9] = -v;
            for (int t = 0; t < n_tables; t++) {
                struct moeinf_block_q8_0 q;
                tables[t]->from_float[MOEINF_TYPE_Q8_0](x, &q, 32);
                CHECK_MSG(q.qs[5] == (int)nearbyintf(a) && q.qs[9] == -(int)nearbyintf(a),
                          "%s: amax %a x %a: q %d, want %d", tables[t]->name, (double)amax,
                          (double)v, q.qs[5], (int)nearbyintf(a));
                CHECK(q.qs[0] == 127);
            }
        }
    }
    CHECK(found == 20);
    float x[32] = {0};
    x[3] = INFINITY;
    x[4] = 1.0f;
    for (int t = 0; t < n_tables; t++) {
        struct moeinf_block_q8_0 q;
        tables[t]->from_float[MOEINF_TYPE_Q8_0](x, &q, 32);
        CHECK(q.d == 0x7c00 && q.qs[3] == -128 && q.qs[4] == 0 && q.qs[0] == 0);
    }
}

static void test_known_q4_0(void) {
    /* x[j] = j/2 - 8: the signed max is -8, so d = -8/-8 = 1 and q = min(15, (int)(x + 8.5))
     * = min(15, (j+1)/2). */
    float x[32];
    for (int j = 0; j < 32; j++)
        x[j] = (float)j * 0.5f - 8.0f;
    struct moeinf_block_q4_0 w;
    moeinf_quantize_row_ref(MOEINF_TYPE_Q4_0, x, &w, 32);
    CHECK_EQ_INT(w.d, 0x3c00);
    CHECK_EQ_INT(w.qs[0], 0x80);  /* q0 = 0, q16 = 8 */
    CHECK_EQ_INT(w.qs[1], 0x91);  /* q1 = 1, q17 = 9 */
    CHECK_EQ_INT(w.qs[2], 0x91);  /* q2 = 1, q18 = 9 */
    CHECK_EQ_INT(w.qs[15], 0xf8); /* q15 = 8, q31 = (int)16 -> 15 */
    /* Largest magnitude positive: d = -1 (0xbc00), and the quants mirror. */
    for (int j = 0; j < 32; j++)
        x[j] = 8.0f - (float)j * 0.5f;
    moeinf_quantize_row_ref(MOEINF_TYPE_Q4_0, x, &w, 32);
    CHECK_EQ_INT(w.d, 0xbc00);
    CHECK_EQ_INT(w.qs[0], 0x80);
    CHECK_EQ_INT(w.qs[15], 0xf8);
    /* All zero: d = 0 / -8 = -0 (F16 0x8000, as ggml writes it), id = 0, every quant
     * (int)8.5 = 8. */
    float z[32] = {0};
    moeinf_quantize_row_ref(MOEINF_TYPE_Q4_0, z, &w, 32);
    CHECK_EQ_INT(w.d, 0x8000);
    int n88 = 0;
    for (int j = 0; j < 16; j++)
        n88 += w.qs[j] == 0x88;
    CHECK_EQ_INT(n88, 16);
    /* Dequantization: d = 2; byte 0x1f holds element 0 (15 - 8 = 7) and 16 (1 - 8 = -7). */
    struct moeinf_block_q4_0 b = {0x4000, {0}};
    b.qs[0] = 0x1f;
    b.qs[5] = 0x80;
    float out[32];
    moeinf_dequantize_row(MOEINF_TYPE_Q4_0, &b, out, 32);
    CHECK(out[0] == 14.0f && out[16] == -14.0f && out[5] == -16.0f && out[21] == 0.0f &&
          out[1] == -16.0f);
}

static void test_known_dots(void) {
    for (int t = 0; t < n_tables; t++) {
        const struct moeinf_kernels *k = tables[t];
        /* Q8_0: block 0: (0.5 * 2) . (0.25 * j) = 0.25 * 496 = 124; block 1: (1 * -1) . (2 * 1)
         * summed over 32 = -64. Total 60. */
        struct moeinf_block_q8_0 w[2];
        struct moeinf_block_q8_0 x[2];
        w[0].d = 0x3800;
        x[0].d = 0x3400;
        w[1].d = 0x3c00;
        x[1].d = 0x4000;
        for (int j = 0; j < 32; j++) {
            w[0].qs[j] = 2;
            x[0].qs[j] = (int8_t)j;
            w[1].qs[j] = -1;
            x[1].qs[j] = 1;
        }
        float s = -1;
        k->vec_dot[MOEINF_TYPE_Q8_0](64, &s, w, x);
        CHECK_MSG(s == 60.0f, "%s: q8_0 dot %g", k->name, (double)s);
        /* Q4_0: nibble 9 (= +1) everywhere, d = 1; x as block 0 above (0.25 * j): 124 / 2. */
        struct moeinf_block_q4_0 q = {0x3c00, {0}};
        memset(q.qs, 0x99, sizeof q.qs);
        k->vec_dot[MOEINF_TYPE_Q4_0](32, &s, &q, x);
        CHECK_MSG(s == 124.0f, "%s: q4_0 dot %g", k->name, (double)s);
        /* F32, F16, BF16: [1, 2, 3] . [0.5, 0.25, -1] = -2. */
        float a[3] = {1, 2, 3};
        float b[3] = {0.5f, 0.25f, -1};
        uint16_t ah[3];
        uint16_t bh[3];
        k->vec_dot[MOEINF_TYPE_F32](3, &s, a, b);
        CHECK(s == -2.0f);
        for (int i = 0; i < 3; i++) {
            ah[i] = moeinf_fp32_to_fp16(a[i]);
            bh[i] = moeinf_fp32_to_fp16(b[i]);
        }
        k->vec_dot[MOEINF_TYPE_F16](3, &s, ah, bh);
        CHECK(s == -2.0f);
        for (int i = 0; i < 3; i++) {
            ah[i] = moeinf_fp32_to_bf16(a[i]);
            bh[i] = moeinf_fp32_to_bf16(b[i]);
        }
        k->vec_dot[MOEINF_TYPE_BF16](3, &s, ah, bh);
        CHECK(s == -2.0f);
        k->vec_dot[MOEINF_TYPE_F32](0, &s, a, b);
        CHECK(s == 0.0f);
    }
}

/* ---- reference quantizer error bounds ----------------------------------------------------- */

/* The largest |x[j]| of a 32-element block. A compare, not fmax: GCC 12's aarch64 vectorizer
 * stops with an internal compiler error (vect_transform_reduction) on that fmax reduction. */
static double block_amax(const float *x) {
    double amax = 0;
    for (int j = 0; j < 32; j++) {
        const double a = fabs((double)x[j]);
        if (a > amax) amax = a;
    }
    return amax;
}

static void test_ref_roundtrip_bounds(void) {
    const int64_t n = (int64_t)32 * 257;
    float *x = malloc((size_t)n * sizeof(float));
    float *y = malloc((size_t)n * sizeof(float));
    uint8_t *q = malloc(row_bytes(MOEINF_TYPE_Q8_0, n));
    fill_activations(x, n);
    int bad8 = 0;
    int bad4 = 0;
    int bad_int = 0;
    moeinf_quantize_row_ref(MOEINF_TYPE_Q8_0, x, q, n);
    moeinf_dequantize_row(MOEINF_TYPE_Q8_0, q, y, n);
    for (int64_t b = 0; b < n / 32; b++) {
        const double amax = block_amax(x + b * 32);
        double d32 = amax / 127.0; /* the scale the quants were made with */
        for (int j = 0; j < 32; j++) {
            int qi = quant_s8(q[b * 34 + 2 + j]);
            /* Integer part: the nearest integer to x/d32 (float rounding aside). */
            bad_int += d32 > 0 && fabs(x[b * 32 + j] / d32 - qi) > 0.5 + 1e-5;
            /* Dequantized: d/2 plus the F16 rounding of d (relative 2^-11) times |q| <= 127. */
            double err = fabs((double)y[b * 32 + j] - x[b * 32 + j]);
            bad8 += err > 0.5 * d32 * (1 + 1e-5) + 127.0 * d32 * 0x1p-11;
        }
    }
    moeinf_quantize_row_ref(MOEINF_TYPE_Q4_0, x, q, n);
    moeinf_dequantize_row(MOEINF_TYPE_Q4_0, q, y, n);
    for (int64_t b = 0; b < n / 32; b++) {
        const double amax = block_amax(x + b * 32);
        double d32 = amax / 8.0; /* |d| */
        for (int j = 0; j < 32; j++) {
            /* <= |d|/2 by rounding, except the clamp at +8|d| (q = 15 means 7|d|): <= |d|. */
            double err = fabs((double)y[b * 32 + j] - x[b * 32 + j]);
            bad4 += err > d32 * (1 + 1e-5) + 8.0 * d32 * 0x1p-11;
            /* And exactly: interior points are within |d|/2. */
            double r = x[b * 32 + j] / d32;
            if (fabs(r) < 7.0) bad4 += err > 0.5 * d32 * (1 + 1e-5) + 8.0 * d32 * 0x1p-11;
        }
    }
    CHECK_EQ_INT(bad_int, 0);
    CHECK_EQ_INT(bad8, 0);
    CHECK_EQ_INT(bad4, 0);
    free(x);
    free(y);
    free(q);
}

/* The codebook quantizers (IQ4_NL, IQ4_XS, MXFP4) on random blocks, decoded here: every
 * element gets the codebook value nearest to it for its block's scale (up to float rounding
 * of x / d), and the scales are as quant.h states: IQ4_NL's |d| = amax / 127 (F16),
 * IQ4_XS's sub-block scale within half a step of the super-block scale of max_j / -127, MXFP4's
 * 2^(e-128) with amax in [4, 8) times 2^(e-127). Then each element is within half the largest
 * gap of its grid (IQ4_NL: 23 / 2, or 127 - 113 at the clipped end) times the scale. */
static int check_nearest(const int8_t table[16], const float *x, const float *y, double d) {
    int bad = 0;
    for (int j = 0; j < 32; j++) {
        double best = INFINITY;
        for (int k = 0; k < 16; k++)
            best = fmin(best, fabs((double)x[j] - d * table[k]));
        bad += fabs((double)y[j] - x[j]) > best + fabs(d) * 1e-5 + 1e-30;
    }
    return bad;
}

static void test_codebook_quantizers(void) {
    static const int8_t nl[16] = {-127, -104, -83, -65, -49, -35, -22, -10,
                                  1,    13,   25,  38,  53,  69,  89,  113};
    static const int8_t fp4[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};
    const int64_t n = (int64_t)256 * 33;
    float *x = malloc((size_t)n * sizeof(float));
    float *y = malloc((size_t)n * sizeof(float));
    uint8_t *q = malloc(row_bytes(MOEINF_TYPE_IQ4_XS, n) + row_bytes(MOEINF_TYPE_IQ4_NL, n));
    fill_activations(x, n);
    int bad_near = 0;
    int bad_scale = 0;
    int bad_err = 0;
    moeinf_quantize_row_ref(MOEINF_TYPE_IQ4_NL, x, q, n);
    moeinf_dequantize_row(MOEINF_TYPE_IQ4_NL, q, y, n);
    for (int64_t b = 0; b < n / 32; b++) {
        double d = half_at(q + b * 18);
        const double amax = block_amax(x + b * 32);
        bad_scale += fabs(127 * fabs(d) - amax) > amax * 0x1p-11;
        bad_near += check_nearest(nl, x + b * 32, y + b * 32, d);
        for (int j = 0; j < 32; j++)
            bad_err += fabs((double)y[b * 32 + j] - x[b * 32 + j]) > 14.1 * fabs(d);
    }
    moeinf_quantize_row_ref(MOEINF_TYPE_IQ4_XS, x, q, n);
    moeinf_dequantize_row(MOEINF_TYPE_IQ4_XS, q, y, n);
    for (int64_t b = 0; b < n / 256; b++) {
        const uint8_t *blk = q + b * 136;
        double d = half_at(blk);
        uint16_t sh;
        memcpy(&sh, blk + 2, 2);
        for (int j = 0; j < 8; j++) {
            int ls = ((blk[4 + j / 2] >> (4 * (j % 2))) & 15) | (((sh >> (2 * j)) & 3) << 4);
            double dl = d * (ls - 32);
            const float *xs = x + b * 256 + (int64_t)j * 32;
            double max = 0;
            for (int k = 0; k < 32; k++)
                max = fabs((double)xs[k]) > fabs(max) ? xs[k] : max;
            bad_scale += fabs(dl - max / -127) > 0.5 * fabs(d) * (1 + 1e-6) + fabs(max) * 0x1p-10;
            bad_near += check_nearest(nl, xs, y + b * 256 + (int64_t)j * 32, dl);
        }
    }
    moeinf_quantize_row_ref(MOEINF_TYPE_MXFP4, x, q, n);
    moeinf_dequantize_row(MOEINF_TYPE_MXFP4, q, y, n);
    for (int64_t b = 0; b < n / 32; b++) {
        double d = ldexp(1.0, q[b * 17] - 128);
        const double amax = block_amax(x + b * 32);
        bad_scale += amax > 0 && !(amax >= 8 * d && amax < 16 * d);
        bad_near += check_nearest(fp4, x + b * 32, y + b * 32, d);
        for (int j = 0; j < 32; j++) /* gaps of 2d up to 8d, 4d to 12d; clipped past 12d */
            bad_err += fabs((double)y[b * 32 + j] - x[b * 32 + j]) > fmax(2 * d, amax - 12 * d);
    }
    CHECK_EQ_INT(bad_near, 0);
    CHECK_EQ_INT(bad_scale, 0);
    CHECK_EQ_INT(bad_err, 0);
    free(x);
    free(y);
    free(q);
}

/* ---- scalar dot products against float64 ---------------------------------------------------- */

static const int64_t block_lengths[] = {32, 64, 96, 224, 256, 288, 416, 544, 4096 + 32};
static const int64_t float_lengths[] = {0, 1, 7, 8, 31, 32, 33, 64, 100, 255, 256, 1000, 4097};

static void check_dot_vs_double(const struct moeinf_kernels *k, enum moeinf_type t, int64_t n,
                                bool raw) {
    void *w = malloc(row_bytes(t, n) + 1);
    void *x = malloc(row_bytes(MOEINF_TYPE_F32, n) + 64);
    make_weights(t, w, n, raw);
    make_activation(t, x, n);
    double want = 0;
    double mag = 0;
    double bound;
    if (is_block_type(t) && t != MOEINF_TYPE_Q8_0 && t != MOEINF_TYPE_Q4_0) {
        /* The weights as the library dequantizes them (checked bit for bit against gguf-py
         * by test_quant_dequant) and the activations decoded here, in float64. Each weight
         * element is at most two roundings from its exact value d*sc*q (- dmin*m); mag bounds
         * every partial sum, including the min terms before they cancel. */
        float *wf = malloc((size_t)n * sizeof(float));
        moeinf_dequantize_row(t, w, wf, n);
        enum moeinf_type vt = moeinf_type_cpu_get((int)t)->vec_dot_type;
        const uint8_t *xb = x;
        double min_mag = 0; /* |m| * |d_x sum(q)| rounding of Q8_1's s field */
        for (int64_t i = 0; i < n; i++) {
            double xv;
            double mterm = 0;
            if (vt == MOEINF_TYPE_Q8_K) {
                float dx;
                memcpy(&dx, xb + (i / 256) * 292, 4);
                xv = (double)dx * quant_s8(xb[(i / 256) * 292 + 4 + i % 256]);
            } else { /* Q8_0 or Q8_1 */
                size_t xs = vt == MOEINF_TYPE_Q8_0 ? 34 : 36;
                const uint8_t *blk = xb + (size_t)(i / 32) * xs;
                xv = (double)half_at(blk) * quant_s8(blk[xs - 32 + (size_t)(i % 32)]);
            }
            /* The largest min term an element can carry: dmin times the largest 6-bit (Q4_K,
             * Q5_K) or 4-bit (Q2_K) min, or Q4_1/Q5_1's m. */
            size_t tb = moeinf_type_traits_get((int)t)->type_size;
            const uint8_t *wb = (const uint8_t *)w + (size_t)(i / block_size(t)) * tb;
            if (t == MOEINF_TYPE_Q4_K || t == MOEINF_TYPE_Q5_K)
                mterm = fabs((double)half_at(wb + 2)) * 63;
            if (t == MOEINF_TYPE_Q2_K) mterm = fabs((double)half_at(wb + 82)) * 15;
            if (t == MOEINF_TYPE_Q4_1 || t == MOEINF_TYPE_Q5_1) {
                mterm = fabs((double)half_at(wb + 2));
                min_mag += mterm * fabs(xv) * 0x1p-11;
            }
            want += (double)wf[i] * xv;
            mag += (fabs((double)wf[i]) + 2 * mterm) * fabs(xv);
        }
        free(wf);
        /* Two roundings per weight element, d_w*d_x and (float)isum rounded, fmas into 8
         * lanes over n / bs blocks, 3 reduction levels. */
        bound = ((double)n / (double)block_size(t) / 8 + 12) * 0x1p-24 * mag + 2 * min_mag;
    } else if (is_block_type(t)) {
        for (int64_t b = 0; b < n / 32; b++) {
            int qw[32];
            int qx[32];
            double dw = decode_block(t, w, b, qw);
            double dx = decode_block(MOEINF_TYPE_Q8_0, x, b, qx);
            long isum = 0;
            for (int j = 0; j < 32; j++)
                isum += (long)qw[j] * qx[j];
            want += dw * dx * (double)isum;
            mag += fabs(dw * dx * (double)isum);
        }
        /* d_w*d_x rounded once, one fma per block into 8 lanes, 3 reduction levels. */
        bound = ((double)n / 256 + 6) * 0x1p-24 * mag; /* n / 32 blocks, 8 lanes */
    } else {
        for (int64_t i = 0; i < n; i++) {
            want += elem(t, w, i) * elem(t, x, i);
            mag += fabs(elem(t, w, i) * elem(t, x, i));
        }
        /* Products exact, chains of n/32 fmas, then 5 levels of additions. */
        bound = ((double)n / 32 + 7) * 0x1p-24 * mag;
    }
    float s = NAN;
    k->vec_dot[t](n, &s, w, x);
    CHECK_MSG(fabs((double)s - want) <= bound + 1e-30, "%s %s n=%lld: %.9g vs %.9g (bound %g)",
              k->name, moeinf_type_name((int)t), (long long)n, (double)s, want, bound);
    free(w);
    free(x);
}

static void test_dot_vs_double(void) {
    for (int ti = 0; ti < n_tables; ti++) {
        for (int i = 0; i < N_SUPPORTED; i++) {
            enum moeinf_type t = supported[i];
            const int64_t *lens = is_block_type(t) ? block_lengths : float_lengths;
            int n_lens = is_block_type(t) ? (int)(sizeof block_lengths / sizeof(int64_t))
                                          : (int)(sizeof float_lengths / sizeof(int64_t));
            for (int l = 0; l < n_lens; l++) {
                int64_t n = is_block_type(t) ? len_for(t, lens[l]) : lens[l];
                check_dot_vs_double(tables[ti], t, n, false);
                if (is_block_type(t)) check_dot_vs_double(tables[ti], t, n, true);
            }
        }
    }
}

/* ---- SIMD tables against the scalar twins -------------------------------------------------- */

static void test_simd_from_float(void) {
    const struct moeinf_kernels *ref = moeinf_kernels_scalar();

    const enum moeinf_type acts[] = {MOEINF_TYPE_F32,  MOEINF_TYPE_F16,  MOEINF_TYPE_BF16,
                                     MOEINF_TYPE_Q8_0, MOEINF_TYPE_Q8_1, MOEINF_TYPE_Q8_K};

    const int64_t lens[] = {32, 64, 96, 256, 288, 4096 + 32, (int64_t)32 * 13};
    const int64_t odd_lens[] = {1, 7, 9, 15, 17, 33, 100, 4097};
    for (int ti = 1; ti < n_tables; ti++) {
        const struct moeinf_kernels *k = tables[ti];
        for (int a = 0; a < 6; a++) {
            enum moeinf_type t = acts[a];
            CHECK(k->from_float[t] != NULL);
            for (int pass = 0; pass < 2; pass++) {
                const int64_t *ls = pass == 0 ? lens : odd_lens;
                int nl = pass == 0 ? 7 : 8;
                if (pass == 1 && is_block_type(t)) continue;
                for (int l = 0; l < nl; l++) {
                    int64_t n = is_block_type(t) ? len_for(t, ls[l]) : ls[l];
                    float *x = malloc((size_t)n * sizeof(float));
                    size_t nb = row_bytes(t, n);
                    uint8_t *y0 = malloc(nb + 16);
                    uint8_t *y1 = malloc(nb + 16);
                    fill_activations(x, n);
                    /* F16/BF16 see every float class: random bit patterns (NaN, inf,
                     * subnormals, overflow, ties). */
                    if (t == MOEINF_TYPE_F16 || t == MOEINF_TYPE_BF16)
                        for (int64_t i = 0; i < n; i += 3) {
                            uint32_t u = (uint32_t)rng_u64();
                            if (i % 2) u = (u & 0x8fffe000u) | 0x1000u | (112u << 23);
                            x[i] = bits_f(u);
                        }
                    memset(y0, 0xa5, nb + 16);
                    memset(y1, 0xa5, nb + 16);
                    ref->from_float[t](x, y0, n);
                    k->from_float[t](x, y1, n);
                    CHECK_MSG(memcmp(y0, y1, nb + 16) == 0, "%s from_float %s n=%lld", k->name,
                              moeinf_type_name((int)t), (long long)n);
                    free(x);
                    free(y0);
                    free(y1);
                }
            }
        }
        /* Q8_0 activation rounding ties: values that are exact halves after scaling. */
        float x[64];
        for (int j = 0; j < 64; j++)
            x[j] = (float)(j % 32) - 15.5f;
        x[0] = -127.0f;
        x[32] = 127.0f;
        uint8_t y0[68];
        uint8_t y1[68];
        ref->from_float[MOEINF_TYPE_Q8_0](x, y0, 64);
        k->from_float[MOEINF_TYPE_Q8_0](x, y1, 64);
        CHECK(memcmp(y0, y1, 68) == 0);
    }
}

/* Q8_K activation quantization, every table against the scalar reference byte for byte, on
 * the blocks where a vector version can go wrong: rounding ties, the sign of the largest
 * element when +a and -a both occur (the first wins), NaN and infinite elements, an all-zero
 * block, a subnormal maximum (the scale overflows to infinity) and random bit patterns. */
static void test_q8_k_activation_cases(void) {
    const struct moeinf_kernels *ref = moeinf_kernels_scalar();

    enum {
        NB = 9
    };

    float x[NB * 256];
    for (int j = 0; j < 256; j++) /* ties: max -127 makes the scale 1 */
        x[j] = (float)(j % 64) - 31.5f;
    x[0] = -127.0f;
    for (int j = 0; j < 256; j++) /* +3 before -3 */
        x[256 + j] = 0.01f * (float)(j % 7);
    x[256 + 2] = 3.0f; /* the same 8-element group, and also across groups */
    x[256 + 5] = -3.0f;
    x[256 + 9] = -3.0f;
    for (int j = 0; j < 256; j++) /* -3 before +3 */
        x[512 + j] = x[256 + j];
    x[512 + 2] = -3.0f;
    x[512 + 5] = 3.0f;
    x[512 + 9] = 3.0f;
    for (int j = 0; j < 256; j++) /* NaNs around a finite max */
        x[768 + j] = j % 17 == 0 ? NAN : 0.5f * sinf((float)j);
    for (int j = 0; j < 256; j++) /* an infinite element */
        x[1024 + j] = j == 77 ? -INFINITY : 0.25f * (float)(j % 5);
    for (int j = 0; j < 256; j++) /* zeros, some negative */
        x[1280 + j] = j % 2 ? -0.0f : 0.0f;
    for (int j = 0; j < 256; j++) /* subnormal maximum */
        x[1536 + j] = j % 3 ? bits_f(1u) : 0.0f;
    for (int j = 0; j < 512; j++) /* random bit patterns: every float class */
        x[1792 + j] = bits_f((uint32_t)rng_u64());
    uint8_t y0[NB * 292];
    uint8_t y1[NB * 292];
    ref->from_float[MOEINF_TYPE_Q8_K](x, y0, (int64_t)NB * 256);
    for (int ti = 1; ti < n_tables; ti++) {
        memset(y1, 0xa5, sizeof y1);
        tables[ti]->from_float[MOEINF_TYPE_Q8_K](x, y1, (int64_t)NB * 256);
        for (size_t b = 0; b < NB; b++)
            CHECK_MSG(memcmp(y0 + 292 * b, y1 + 292 * b, 292) == 0, "%s q8_K block %zu",
                      tables[ti]->name, b);
    }
    /* the reference itself, by hand: ties round to even, +3 wins the first block's sign */
    int8_t q;
    memcpy(&q, y0 + 4 + 1, 1); /* x = -30.5, scale 1 -> -30 */
    CHECK(q == -30);
    memcpy(&q, y0 + 4 + 2, 1); /* -29.5 -> -30 */
    CHECK(q == -30);
    float d;
    memcpy(&d, y0 + 292, sizeof d);
    CHECK(d == 3.0f / -127.0f);
}

static void test_simd_to_float(void) {
    const struct moeinf_kernels *ref = moeinf_kernels_scalar();
    uint16_t *all = malloc(65536 * sizeof(uint16_t));
    float *f0 = malloc(65537 * sizeof(float));
    float *f1 = malloc(65537 * sizeof(float));
    for (uint32_t h = 0; h < 65536; h++)
        all[h] = (uint16_t)h;
    for (int ti = 1; ti < n_tables; ti++) {
        const struct moeinf_kernels *k = tables[ti];

        /* Every half and every bf16, odd counts too. */
        enum moeinf_type half_types[] = {MOEINF_TYPE_F16, MOEINF_TYPE_BF16};

        for (int h = 0; h < 2; h++) {
            int64_t counts[] = {65536, 65535, 13, 1};
            for (int c = 0; c < 4; c++) {
                memset(f0, 0, 65537 * sizeof(float));
                memset(f1, 0, 65537 * sizeof(float));
                ref->to_float[half_types[h]](all + (65536 - counts[c]), f0, counts[c]);
                k->to_float[half_types[h]](all + (65536 - counts[c]), f1, counts[c]);
                CHECK_MSG(test_same_bytes(f0, f1, 65537 * sizeof(float)), "%s to_float %s n=%lld",
                          k->name, h ? "bf16" : "f16", (long long)counts[c]);
            }
        }
        for (int i = 0; i < N_SUPPORTED; i++) {
            enum moeinf_type t = supported[i];
            int64_t n = 4096 + 256 * 3;
            void *w = malloc(row_bytes(t, n));
            make_weights(t, w, n, true);
            ref->to_float[t](w, f0, n);
            k->to_float[t](w, f1, n);
            CHECK_MSG(memcmp(f0, f1, (size_t)n * sizeof(float)) == 0, "%s to_float %s", k->name,
                      moeinf_type_name((int)t));
            free(w);
        }
    }
    free(all);
    free(f0);
    free(f1);
}

static void test_simd_vec_dot(void) {
    const struct moeinf_kernels *ref = moeinf_kernels_scalar();
    for (int ti = 1; ti < n_tables; ti++) {
        const struct moeinf_kernels *k = tables[ti];
        for (int i = 0; i < N_SUPPORTED; i++) {
            enum moeinf_type t = supported[i];
            bool blk = is_block_type(t);
            const int64_t *lens = blk ? block_lengths : float_lengths;
            int n_lens = blk ? (int)(sizeof block_lengths / sizeof(int64_t))
                             : (int)(sizeof float_lengths / sizeof(int64_t));
            for (int l = 0; l < n_lens; l++) {
                for (int raw = 0; raw < 2; raw++) {
                    int64_t n = blk ? len_for(t, lens[l]) : lens[l];
                    /* Block rows at an odd address: no alignment is assumed. */
                    size_t off = blk ? 1 : 0;
                    uint8_t *wbuf = malloc(row_bytes(t, n) + 8);
                    uint8_t *xbuf = malloc(4 * (size_t)n + 72);
                    make_weights(t, wbuf + off, n, raw);
                    make_activation(t, xbuf + off, n);
                    float s0 = NAN;
                    float s1 = NAN;
                    ref->vec_dot[t](n, &s0, wbuf + off, xbuf + off);
                    k->vec_dot[t](n, &s1, wbuf + off, xbuf + off);
                    CHECK_MSG(f_bits(s0) == f_bits(s1), "%s vec_dot %s n=%lld raw=%d: %a vs %a",
                              k->name, moeinf_type_name((int)t), (long long)n, raw, (double)s1,
                              (double)s0);
                    free(wbuf);
                    free(xbuf);
                }
            }
        }
    }
}

static void test_vec_dot_m(void) {
    const int ms[] = {1, 2, 3, 4, 5, 7, 8, 9, 16, 17};
    for (int ti = 0; ti < n_tables; ti++) {
        const struct moeinf_kernels *k = tables[ti];
        for (int i = 0; i < N_SUPPORTED; i++) {
            enum moeinf_type t = supported[i];
            const int64_t ns[] = {is_block_type(t) ? 32 : 33, 256, 4096 + 32, (int64_t)32 * 9};
            for (int a = 0; a < 4; a++) {
                int64_t n = is_block_type(t) ? len_for(t, ns[a]) : ns[a];
                for (int mi = 0; mi < 10; mi++) {
                    int m = ms[mi];
                    size_t stride = row_bytes(MOEINF_TYPE_F32, n) + 12; /* not the row size */
                    uint8_t *w = malloc(row_bytes(t, n));
                    uint8_t *x = malloc(stride * (size_t)m);
                    make_weights(t, w, n, mi % 2);
                    for (int r = 0; r < m; r++)
                        make_activation(t, x + stride * (size_t)r, n);
                    float s[17];
                    float one;
                    k->vec_dot_m[t](n, m, s, w, x, stride);
                    int bad = 0;
                    for (int r = 0; r < m; r++) {
                        k->vec_dot[t](n, &one, w, x + stride * (size_t)r);
                        bad += f_bits(one) != f_bits(s[r]);
                    }
                    CHECK_MSG(bad == 0, "%s vec_dot_m %s n=%lld m=%d: %d rows differ", k->name,
                              moeinf_type_name((int)t), (long long)n, m, bad);
                    free(w);
                    free(x);
                }
            }
        }
    }
}

/* vec_dot_rows against the scalar table's vec_dot, bit for bit: every table, every type, rows
 * at odd addresses with a stride that is not the row size, lengths that end in a partial
 * group of 8 blocks, and lengths past one prepared chunk (16384 elements) for the chunked
 * path. Buffers are sized exactly, so ASan sees any read past the last row or the activation;
 * a canary checks that nothing is written past s[nr - 1]. */
/* gemm (where a table has one) against the scalar vec_dot of every (weight row, activation
 * row) pair: tiles of every shape around the kernels' blockings (8 and 16 weight rows; chunks
 * of 8 and 4 activation rows, tiles of 16, passes of 32 and 64; whole and partial groups of 8
 * blocks), odd strides, and output cells it must not touch. */
static void test_gemm(void) {
    const struct moeinf_kernels *ref = moeinf_kernels_scalar();
    const int64_t nrs[] = {1, 3, 8, 9, 17, 33};
    const int ms[] = {2, 3, 4, 5, 8, 12, 17, 64, 65, 70, 40, 19};
    int n_checked = 0;
    for (int ti = 0; ti < n_tables; ti++) {
        const struct moeinf_kernels *k = tables[ti];
        for (int i = 0; i < N_SUPPORTED; i++) {
            enum moeinf_type t = supported[i];
            if (!k->gemm[t]) continue;
            for (int a = 0; a < 12; a++) {
                const int64_t n = len_for(t, a % 3 == 0 ? 288 : a % 3 == 1 ? 32 * 3 : 256);
                const int64_t nr = nrs[a % 6];
                const int m = ms[a];
                const size_t rb = row_bytes(t, n);
                const size_t w_stride = rb + 7;
                uint8_t *w = malloc(1 + (size_t)nr * w_stride);
                for (int64_t r = 0; r < nr; r++)
                    make_weights(t, w + 1 + (size_t)r * w_stride, n, (r + a) % 2);
                const size_t xb = row_bytes(moeinf_type_cpu_get((int)t)->vec_dot_type, n);
                const size_t x_stride = xb + 12;
                uint8_t *x = malloc(3 + (size_t)m * x_stride);
                for (int j = 0; j < m; j++)
                    make_activation(t, x + 3 + (size_t)j * x_stride, n);
                const size_t y_stride = (size_t)nr + 2;
                float *y = malloc((size_t)m * y_stride * sizeof(float));
                for (size_t c = 0; c < (size_t)m * y_stride; c++)
                    y[c] = -7.0f;
                k->gemm[t](n, nr, m, y, y_stride, w + 1, w_stride, x + 3, x_stride);
                int bad = 0;
                int touched = 0;
                for (int j = 0; j < m; j++) {
                    for (int64_t r = 0; r < nr; r++) {
                        float one = NAN;
                        ref->vec_dot[t](n, &one, w + 1 + (size_t)r * w_stride,
                                        x + 3 + (size_t)j * x_stride);
                        bad += f_bits(one) != f_bits(y[(size_t)j * y_stride + (size_t)r]);
                    }
                    touched += y[(size_t)j * y_stride + (size_t)nr] != -7.0f;
                    touched += y[(size_t)j * y_stride + (size_t)nr + 1] != -7.0f;
                }
                CHECK_MSG(bad == 0 && touched == 0,
                          "%s gemm %s n=%lld nr=%lld m=%d: %d cells differ, %d written outside",
                          k->name, moeinf_type_name((int)t), (long long)n, (long long)nr, m, bad,
                          touched);
                n_checked++;
                free(w);
                free(x);
                free(y);
            }
        }
    }
    /* Every x86 table that this CPU runs has the K-quant and codebook tiles (the arm64
     * tables have no tile yet: their vec_dot_m serves prefill). */
    for (int ti = 0; ti < n_tables; ti++) {
        if (tables[ti] == ref || tables[ti] == moeinf_kernels_neon() ||
            tables[ti] == moeinf_kernels_dotprod())
            continue;
        CHECK(tables[ti]->gemm[MOEINF_TYPE_Q4_K] != NULL);
        CHECK(tables[ti]->gemm[MOEINF_TYPE_MXFP4] != NULL);
        CHECK(tables[ti]->gemm[MOEINF_TYPE_IQ4_NL] != NULL);
    }
    fprintf(stderr, "gemm: %d tiles checked\n", n_checked);
}

static void test_vec_dot_rows(void) {
    const struct moeinf_kernels *ref = moeinf_kernels_scalar();
    const int64_t nrs[] = {1, 2, 3, 5, 8, 13};
    for (int ti = 0; ti < n_tables; ti++) {
        const struct moeinf_kernels *k = tables[ti];
        for (int i = 0; i < N_SUPPORTED; i++) {
            enum moeinf_type t = supported[i];
            bool blk = is_block_type(t);
            const int64_t ns[] = {blk ? 32 : 33,    blk ? 96 : 7,       256,
                                  blk ? 288 : 1000, 2048 + 32 * 3,      16384,
                                  16384 + 32 * 9,   32768 + 32 * 8 + 64};
            for (int a = 0; a < 8; a++) {
                int64_t n = blk ? len_for(t, ns[a]) : ns[a];
                int64_t nr = nrs[(a + ti) % 6];
                /* the types with a chunked path for long rows keep their nr */
                if (n > 16384 && t != MOEINF_TYPE_Q8_0 && t != MOEINF_TYPE_Q4_0 &&
                    t != MOEINF_TYPE_MXFP4 && t != MOEINF_TYPE_IQ4_NL)
                    nr = 2;
                size_t rb = row_bytes(t, n);
                /* F32/F16/BF16 rows must stay aligned to their element. */
                size_t stride = rb + (blk ? 5 : 12);
                size_t off = blk ? 1 : 0;
                size_t wsize = off + (size_t)(nr - 1) * stride + rb;
                uint8_t *w = malloc(wsize);
                uint8_t *row = malloc(rb);
                memset(w, 0x5a, wsize);
                for (int64_t r = 0; r < nr; r++) {
                    make_weights(t, row, n, r % 2);
                    memcpy(w + off + (size_t)r * stride, row, rb);
                }
                size_t xb = row_bytes(moeinf_type_cpu_get((int)t)->vec_dot_type, n);
                uint8_t *xbuf = malloc(xb + off);
                make_activation(t, xbuf + off, n);
                float s[14];
                for (int r = 0; r < 14; r++)
                    s[r] = -7.0f;
                k->vec_dot_rows[t](n, nr, s, w + off, stride, xbuf + off);
                int bad = 0;
                for (int64_t r = 0; r < nr; r++) {
                    float one = NAN;
                    ref->vec_dot[t](n, &one, w + off + (size_t)r * stride, xbuf + off);
                    bad += f_bits(one) != f_bits(s[r]);
                }
                CHECK_MSG(bad == 0, "%s vec_dot_rows %s n=%lld nr=%lld: %d rows differ", k->name,
                          moeinf_type_name((int)t), (long long)n, (long long)nr, bad);
                CHECK(s[nr] == -7.0f);
                free(w);
                free(row);
                free(xbuf);
            }
        }
    }
}

/* Rows with quants at the extremes of the int16 range of the Q4_0 rows kernel: all nibbles 15
 * against activations of one sign with |q| = 127 (the largest finite activations), in every
 * block and position, with exact expected values (all scales 1). */
static void test_vec_dot_rows_extremes(void) {
    const int64_t n = (int64_t)32 * 24;
    uint8_t w4[24 * 18];
    uint8_t w8[24 * 34];
    uint8_t x[24 * 34];
    for (int64_t b = 0; b < 24; b++) {
        uint16_t one = 0x3c00;
        memcpy(w4 + b * 18, &one, 2);
        memset(w4 + b * 18 + 2, 0xff, 16); /* nibbles 15: w - 8 = 7 */
        memcpy(w8 + b * 34, &one, 2);
        memset(w8 + b * 34 + 2, 0x80, 32); /* -128 */
        memcpy(x + b * 34, &one, 2);
        memset(x + b * 34 + 2, b % 2 ? 0x81 : 0x7f, 32); /* -127 or 127 */
    }
    /* 24 blocks: 12 of +127 and 12 of -127, so the totals cancel; per block 7 * 127 * 32. */
    for (int ti = 0; ti < n_tables; ti++) {
        const struct moeinf_kernels *k = tables[ti];
        float s = NAN;
        float one = NAN;
        k->vec_dot_rows[MOEINF_TYPE_Q4_0](n, 1, &s, w4, sizeof w4, x);
        CHECK_MSG(s == 0.0f, "%s q4_0 extremes: %g", k->name, (double)s);
        k->vec_dot_rows[MOEINF_TYPE_Q4_0]((int64_t)32 * 3, 1, &s, w4, sizeof w4, x);
        CHECK_MSG(s == 7.0f * 127 * 32, "%s q4_0 extremes: %g", k->name, (double)s);
        k->vec_dot_rows[MOEINF_TYPE_Q8_0]((int64_t)32 * 3, 1, &s, w8, sizeof w8, x);
        CHECK_MSG(s == -128.0f * 127 * 32, "%s q8_0 extremes: %g", k->name, (double)s);
        moeinf_kernels_scalar()->vec_dot[MOEINF_TYPE_Q8_0](n, &one, w8, x);
        k->vec_dot_rows[MOEINF_TYPE_Q8_0](n, 1, &s, w8, sizeof w8, x);
        CHECK(f_bits(s) == f_bits(one));
    }
}

/* The Q4_K and Q6_K rows kernels at the ends of the int16 range their sums pass through
 * (kernels_x86_kdecode.h adds vpmaddubsw outputs of several sub-blocks in int16 before the
 * scales): every quant at its largest (Q4_K 15, Q6_K 63), the largest scales (Q4_K 63, mins
 * 63; Q6_K 127 and -128), against activations of -127 or +127 in every position of a block,
 * 9 rows (the eight-row pass and one row left over) of 3 super-blocks. Each row must equal
 * the scalar vec_dot bit for bit; a kernel that added more lanes in int16 than fit, or
 * saturated in vpmaddubsw, gives other values. */
static void test_vec_dot_rows_k_extremes(void) {
    enum {
        NB = 3,
        NR = 9
    };

    const int64_t n = (int64_t)256 * NB;
    static uint8_t w4[NR * NB * 144];
    static uint8_t w6[NR * NB * 210];
    static uint8_t x[NB * 292];
    const uint16_t one = 0x3c00;
    for (int64_t b = 0; b < (int64_t)NR * NB; b++) {
        uint8_t *p4 = w4 + b * 144;
        memcpy(p4, &one, 2);
        memcpy(p4 + 2, &one, 2);
        memset(p4 + 4, 0xff, 12);   /* scales and mins 63 */
        memset(p4 + 16, 0xff, 128); /* nibbles 15 */
        uint8_t *p6 = w6 + b * 210;
        memset(p6, 0xff, 192); /* ql, qh: quants 63 */
        for (int j = 0; j < 16; j++)
            p6[192 + j] = (uint8_t)((j + b) % 3 ? 0x7f : 0x80); /* 127 or -128 */
        memcpy(p6 + 208, &one, 2);
    }
    for (int64_t b = 0; b < NB; b++) {
        uint8_t *p = x + b * 292;
        const float d = 1.0f;
        const int8_t q = b % 2 ? 127 : -127;
        const int16_t bsum = (int16_t)(16 * q);
        memcpy(p, &d, 4);
        memset(p + 4, (uint8_t)q, 256);
        for (int j = 0; j < 16; j++)
            memcpy(p + 260 + 2 * (size_t)j, &bsum, 2);
    }
    const struct moeinf_kernels *ref = moeinf_kernels_scalar();
    for (int ti = 0; ti < n_tables; ti++) {
        const struct moeinf_kernels *k = tables[ti];
        float s[NR];
        int bad = 0;
        k->vec_dot_rows[MOEINF_TYPE_Q4_K](n, NR, s, w4, (size_t)NB * 144, x);
        for (int r = 0; r < NR; r++) {
            float e = NAN;
            ref->vec_dot[MOEINF_TYPE_Q4_K](n, &e, w4 + (size_t)r * NB * 144, x);
            bad += f_bits(s[r]) != f_bits(e);
        }
        k->vec_dot_rows[MOEINF_TYPE_Q6_K](n, NR, s, w6, (size_t)NB * 210, x);
        for (int r = 0; r < NR; r++) {
            float e = NAN;
            ref->vec_dot[MOEINF_TYPE_Q6_K](n, &e, w6 + (size_t)r * NB * 210, x);
            bad += f_bits(s[r]) != f_bits(e);
        }
        CHECK_MSG(bad == 0, "%s q4_K/q6_K rows extremes: %d rows differ", k->name, bad);
    }
}

/* The Q8_0 tiles at the ends of the int16 range of vpmaddubsw (2 x 128 x 127 = 32512 per pair
 * of bytes): weights of -128 or 127 in every position (by weight row) against activations of
 * -127 or 127 (by activation row), scales 1, 17 weight rows (two vectors of eight or one AMX
 * tile of sixteen, and one left over), 33 activation rows (a pass of 32 and one more) and 9
 * blocks (a prepared chunk of 8 and one more). Every dot is 9 x 32 x w x x, an integer that a float
 * holds exactly; the scalar vec_dot and every table's gemm must give it. */
static void test_gemm_q8_0_extremes(void) {
    enum {
        NB = 9,
        NR = 17,
        M = 33
    };

    const int64_t n = (int64_t)32 * NB;
    static uint8_t w[NR][NB * 34];
    static uint8_t x[M][NB * 34];
    const uint16_t one = 0x3c00;
    for (size_t b = 0; b < NB; b++) {
        for (int r = 0; r < NR; r++) {
            memcpy(w[r] + b * 34, &one, 2);
            memset(w[r] + b * 34 + 2, r % 2 ? 0x7f : 0x80, 32); /* 127 or -128 */
        }
        for (int j = 0; j < M; j++) {
            memcpy(x[j] + b * 34, &one, 2);
            memset(x[j] + b * 34 + 2, j % 3 == 1 ? 0x7f : 0x81, 32); /* 127 or -127 */
        }
    }
    static float want[M][NR];
    for (int j = 0; j < M; j++)
        for (int r = 0; r < NR; r++)
            want[j][r] =
                (float)NB * 32.0f * (r % 2 ? 127.0f : -128.0f) * (j % 3 == 1 ? 127.0f : -127.0f);
    static float y[M][NR];
    for (int ti = 0; ti < n_tables; ti++) {
        const struct moeinf_kernels *k = tables[ti];
        int bad = 0;
        for (int j = 0; j < M; j++) {
            for (int r = 0; r < NR; r++) {
                float one_dot = NAN;
                k->vec_dot[MOEINF_TYPE_Q8_0](n, &one_dot, w[r], x[j]);
                bad += one_dot != want[j][r];
                y[j][r] = NAN;
            }
        }
        if (k->gemm[MOEINF_TYPE_Q8_0]) {
            k->gemm[MOEINF_TYPE_Q8_0](n, NR, M, &y[0][0], NR, w[0], sizeof w[0], x[0], sizeof x[0]);
            for (int j = 0; j < M; j++)
                for (int r = 0; r < NR; r++)
                    bad += y[j][r] != want[j][r];
        }
        CHECK_MSG(bad == 0, "%s q8_0 gemm extremes: %d cells differ", k->name, bad);
    }
}

/* The K-quant kernels at the ends of their integer ranges: every quant at its largest value
 * (Q4_K 15, Q5_K 31, Q6_K 63), every scale and min at its largest magnitude (Q4_K/Q5_K 63,
 * Q6_K -128 or 127 by weight row), against Q8_K activations of -128 or 127 in every position
 * (by activation row): gemm, vec_dot_m and vec_dot_rows of every table against the scalar
 * vec_dot, bit for bit, with 17 weight rows and 17 activation rows (tiles or chunks of 8, or
 * one AMX tile of 16, and one left over). The prefill tiles add two
 * vpmaddubsw outputs in int16 (2 x 16128 for Q6_K); a kernel that added a third, or otherwise
 * reduced past int16, gives other values. */
static void test_kquant_extremes(void) {
    enum {
        NB = 3,
        NR = 17,
        M = 17
    };
    const int64_t n = (int64_t)256 * NB;
    static uint8_t x[M][NB * 292];
    for (int j = 0; j < M; j++) {
        for (int b = 0; b < NB; b++) {
            uint8_t *xb = x[j] + (size_t)b * 292;
            const float d = 1.0f;
            const int8_t q = j % 3 == 1 ? 127 : -128;
            memcpy(xb, &d, sizeof d);
            memset(xb + 4, (uint8_t)q, 256);
            for (int g = 0; g < 16; g++) {
                const int16_t bs = (int16_t)(16 * q);
                memcpy(xb + 260 + 2 * (size_t)g, &bs, sizeof bs);
            }
        }
    }
    const enum moeinf_type types[] = {MOEINF_TYPE_Q4_K, MOEINF_TYPE_Q5_K, MOEINF_TYPE_Q6_K};
    const struct moeinf_kernels *ref = moeinf_kernels_scalar();
    for (size_t ti = 0; ti < sizeof types / sizeof types[0]; ti++) {
        const enum moeinf_type t = types[ti];
        const size_t bb = t == MOEINF_TYPE_Q4_K ? 144 : t == MOEINF_TYPE_Q5_K ? 176 : 210;
        const size_t rb = bb * NB;
        uint8_t *w = malloc((size_t)NR * rb);
        const uint16_t one = 0x3c00;
        for (int r = 0; r < NR; r++) {
            for (int b = 0; b < NB; b++) {
                uint8_t *wb = w + (size_t)r * rb + (size_t)b * bb;
                memset(wb, 0xff, bb); /* every quant at its largest, K4 scales and mins 63 */
                if (t == MOEINF_TYPE_Q6_K) {
                    memset(wb + 192, r % 2 ? 0x80 : 0x7f, 16); /* scales -128 or 127 */
                    memcpy(wb + 208, &one, 2);
                } else {
                    memcpy(wb, &one, 2);
                    memcpy(wb + 2, &one, 2);
                }
            }
        }
        float want[M][NR];
        for (int j = 0; j < M; j++)
            for (int r = 0; r < NR; r++)
                ref->vec_dot[t](n, &want[j][r], w + (size_t)r * rb, x[j]);
        for (int tt = 0; tt < n_tables; tt++) {
            const struct moeinf_kernels *k = tables[tt];
            float got[M][NR];
            int bad = 0;
            if (k->gemm[t]) {
                k->gemm[t](n, NR, M, &got[0][0], NR, w, rb, x[0], sizeof x[0]);
                for (int j = 0; j < M; j++)
                    for (int r = 0; r < NR; r++)
                        bad += f_bits(got[j][r]) != f_bits(want[j][r]);
            }
            for (int r = 0; r < NR; r++) {
                float col[M];
                k->vec_dot_m[t](n, M, col, w + (size_t)r * rb, x[0], sizeof x[0]);
                for (int j = 0; j < M; j++)
                    bad += f_bits(col[j]) != f_bits(want[j][r]);
            }
            for (int j = 0; j < M; j++) {
                float row[NR];
                k->vec_dot_rows[t](n, NR, row, w, rb, x[j]);
                for (int r = 0; r < NR; r++)
                    bad += f_bits(row[r]) != f_bits(want[j][r]);
            }
            CHECK_MSG(bad == 0, "%s %s extremes: %d results differ", k->name,
                      moeinf_type_name((int)t), bad);
        }
        free(w);
    }
}

/* The codebook rows kernels at the ends of their integer ranges, with exact expected values
 * (all scales 1): every MXFP4 code +-12 (the offset codebook's largest unsigned value, 24, and
 * its smallest, 0) and every IQ4_NL code -127 (its largest magnitude) or 113, against
 * activations of +-127 in every position, 9 rows (every stream and the rows left over) of 24
 * blocks (3 whole groups) and 27 blocks (a partial group). A kernel that reduced in int16 past
 * its bound, or saturated in vpmaddubsw, gives other values. */
static void test_vec_dot_rows_codebook_extremes(void) {
    enum {
        NB = 27,
        NR = 9
    };

    uint8_t wm[NR][NB * 17];
    uint8_t wn[NR][NB * 18];
    uint8_t x[NB * 34];
    const uint16_t one = 0x3c00;
    for (size_t b = 0; b < NB; b++) {
        memcpy(x + b * 34, &one, 2);
        memset(x + b * 34 + 2, b % 3 ? 0x7f : 0x81, 32); /* 127, or -127 in every third block */
    }
    for (int r = 0; r < NR; r++) {
        for (size_t b = 0; b < NB; b++) {
            wm[r][b * 17] = 128; /* E8M0 2^1, halved: 1 */
            memset(&wm[r][b * 17 + 1], (r + (int)b) % 2 ? 0x77 : 0xff,
                   16); /* codes 7 (+12), 15 (-12) */
            memcpy(&wn[r][b * 18], &one, 2);
            memset(&wn[r][b * 18 + 2], (r + (int)b) % 2 ? 0x00 : 0xff, 16); /* -127 or 113 */
        }
    }
    for (int ti = 0; ti < n_tables; ti++) {
        const struct moeinf_kernels *k = tables[ti];
        for (int nb = 24; nb <= NB; nb += NB - 24) {
            float sm[NR];
            float sn[NR];
            k->vec_dot_rows[MOEINF_TYPE_MXFP4]((int64_t)32 * nb, NR, sm, wm, sizeof wm[0], x);
            k->vec_dot_rows[MOEINF_TYPE_IQ4_NL]((int64_t)32 * nb, NR, sn, wn, sizeof wn[0], x);
            for (int r = 0; r < NR; r++) {
                double em = 0;
                double en = 0;
                for (int b = 0; b < nb; b++) {
                    const double xs = b % 3 ? 127.0 * 32 : -127.0 * 32;
                    em += ((r + b) % 2 ? 12.0 : -12.0) * xs;
                    en += ((r + b) % 2 ? -127.0 : 113.0) * xs;
                }
                CHECK_MSG(sm[r] == (float)em, "%s mxfp4 extremes nb=%d row %d: %g, want %g",
                          k->name, nb, r, (double)sm[r], em);
                CHECK_MSG(sn[r] == (float)en, "%s iq4_nl extremes nb=%d row %d: %g, want %g",
                          k->name, nb, r, (double)sn[r], en);
            }
        }
    }
}

/* MXFP4 rows whose E8M0 scales are all 0..3 (2^-128 and 2^-127 are subnormal floats, the
 * vector decoding takes another branch for them) against large activations, so that the
 * products d_w * d_x are normal and these blocks alone make the result: vec_dot, vec_dot_rows,
 * vec_dot_m and gemm of every table against the scalar vec_dot, bit for bit. (The random rows
 * of the other tests have such blocks too, but beside blocks 2^100 larger.) */
static void test_mxfp4_small_scales(void) {
    enum {
        NB = 27,
        NR = 9,
        M = 3
    };

    const int64_t n = (int64_t)32 * NB;
    uint8_t w[NR][NB * 17];
    uint8_t x[M][NB * 34];
    float xf[32 * NB];
    for (int r = 0; r < NR; r++)
        for (size_t b = 0; b < NB; b++) {
            for (size_t k = 0; k < 17; k++)
                w[r][b * 17 + k] = (uint8_t)rng_u64();
            w[r][b * 17] = (uint8_t)(((size_t)r + b) % 4);
        }
    for (int j = 0; j < M; j++) {
        for (int i = 0; i < 32 * NB; i++)
            xf[i] = (float)((double)(rng_u64() % 2001) - 1000.0) * 30.0f;
        moeinf_kernels_scalar()->from_float[MOEINF_TYPE_Q8_0](xf, x[j], n);
    }
    const struct moeinf_kernels *ref = moeinf_kernels_scalar();
    for (int ti = 0; ti < n_tables; ti++) {
        const struct moeinf_kernels *k = tables[ti];
        float rows[NR];
        float y[M * NR];
        int bad = 0;
        int nonzero = 0;
        for (int j = 0; j < M; j++) {
            k->vec_dot_rows[MOEINF_TYPE_MXFP4](n, NR, rows, w, sizeof w[0], x[j]);
            if (k->gemm[MOEINF_TYPE_MXFP4])
                k->gemm[MOEINF_TYPE_MXFP4](n, NR, M, y, NR, w, sizeof w[0], x, sizeof x[0]);
            for (int r = 0; r < NR; r++) {
                float want = NAN;
                float one = NAN;
                float m1[M];
                ref->vec_dot[MOEINF_TYPE_MXFP4](n, &want, w[r], x[j]);
                k->vec_dot[MOEINF_TYPE_MXFP4](n, &one, w[r], x[j]);
                k->vec_dot_m[MOEINF_TYPE_MXFP4](n, M, m1, w[r], x, sizeof x[0]);
                nonzero += want != 0.0f;
                bad += f_bits(rows[r]) != f_bits(want);
                bad += f_bits(one) != f_bits(want);
                bad += f_bits(m1[j]) != f_bits(want);
                if (k->gemm[MOEINF_TYPE_MXFP4]) bad += f_bits(y[j * NR + r]) != f_bits(want);
            }
        }
        CHECK_MSG(bad == 0, "%s mxfp4 small scales: %d results differ", k->name, bad);
        CHECK(nonzero == M * NR);
    }
}

/* axpy_f32: the product rounded, then the sum, on every table (odd lengths for the tails);
 * values where a fused multiply-add would round differently show that none is used. */
static void test_axpy(void) {
    const int64_t n = 67;
    float x[67];
    float y0[67];
    float want[67];
    float y[67];
    int n_fma_differs = 0;
    for (int64_t i = 0; i < n; i++) {
        x[i] = 1.0f + (float)i * 0x1p-12f + 0x1p-23f;
        y0[i] = -1.0f - (float)i * 0x1p-12f;
    }
    x[5] = INFINITY;
    x[6] = NAN;
    x[7] = -0.0f;
    y0[7] = 0.0f;
    const float a = 1.0f + 0x1p-22f;
    for (int64_t i = 0; i < n; i++) {
        volatile float p = a * x[i]; /* volatile: rounded to float before the add */
        want[i] = y0[i] + p;
        if (i > 7) n_fma_differs += fmaf(a, x[i], y0[i]) != want[i];
    }
    CHECK(n_fma_differs > 20);
    for (int ti = 0; ti < n_tables; ti++) {
        for (int64_t len = 0; len <= n; len += 1 + len / 4) {
            memcpy(y, y0, sizeof y);
            tables[ti]->axpy_f32(len, a, x, y);
            int bad = 0;
            for (int64_t i = 0; i < n; i++) {
                float w = i < len ? want[i] : y0[i];
                bad += f_bits(y[i]) != f_bits(w) && !(isnan(y[i]) && isnan(w));
            }
            CHECK_MSG(bad == 0, "%s axpy_f32 n=%lld: %d differ", tables[ti]->name, (long long)len,
                      bad);
        }
    }
}

/* delta_rule_f32 on every table against a float64 computation of the same rule (sizes with
 * and without a tail of 8), to a bound of rounding: the tables differ only in the order of
 * the dot products' sums. */
static void test_delta_rule(void) {
    static const int sizes[] = {5, 16, 37, 128};
    for (size_t si = 0; si < sizeof sizes / sizeof sizes[0]; si++) {
        const int n = sizes[si];
        float *s0 = malloc((size_t)n * n * sizeof(float));
        float *s = malloc((size_t)n * n * sizeof(float));
        double *sd = malloc((size_t)n * n * sizeof(double));
        CHECK(s0 && s && sd);
        if (!s0 || !s || !sd) {
            free(s0);
            free(s);
            free(sd);
            return;
        }
        float q[128];
        float k[128];
        float v[128];
        float out[128];
        double want[128];
        for (int i = 0; i < n * n; i++)
            s0[i] = (float)(rng_uniform() - 0.5);
        for (int i = 0; i < n; i++) {
            q[i] = (float)(rng_uniform() - 0.5);
            k[i] = (float)(rng_uniform() - 0.5);
            v[i] = (float)(rng_uniform() - 0.5);
        }
        const float decay = 0.9f;
        const float beta = 0.7f;
        const float scale = 0.125f;
        for (int i = 0; i < n * n; i++)
            sd[i] = s0[i];
        for (int r = 0; r < n; r++) {
            double *row = sd + (size_t)r * n;
            double sk = 0;
            for (int i = 0; i < n; i++) {
                row[i] *= decay;
                sk += row[i] * k[i];
            }
            double d = (v[r] - sk) * beta;
            double sq = 0;
            for (int i = 0; i < n; i++) {
                row[i] += k[i] * d;
                sq += row[i] * q[i];
            }
            want[r] = sq * scale;
        }
        for (int ti = 0; ti < n_tables; ti++) {
            memcpy(s, s0, (size_t)n * n * sizeof(float));
            tables[ti]->delta_rule_f32(s, n, q, k, v, decay, beta, scale, out);
            double worst = 0;
            for (int r = 0; r < n; r++)
                worst = fmax(worst, fabs(out[r] - want[r]));
            for (int i = 0; i < n * n; i++)
                worst = fmax(worst, fabs(s[i] - sd[i]));
            /* values of order 1, n-term sums: float rounding is n * 2^-24 at most */
            CHECK_MSG(worst < 1e-6 * n, "%s delta_rule_f32 n=%d: off by %g", tables[ti]->name, n,
                      worst);
        }
        free(s0);
        free(s);
        free(sd);
    }
}

/* ---- real data: llama-quantize's outputs ------------------------------------------------------
 */

/* Every Q8_0 / Q4_0 tensor of a quantized tiny-mixtral file, re-quantized here from the
 * F32 file (F16 tensors through F32), must equal llama-quantize's bytes, and dequantizes to
 * within the bound of test_ref_roundtrip_bounds. */
static void check_requantize(const char *qfile) {
    char p32[512];
    char pq[512];
    if (!test_shared_path("testdata/models/tiny-mixtral-F32.gguf", p32, sizeof p32)) return;
    test_shared_path(qfile, pq, sizeof pq);
    struct moeinf_gguf *g32 = NULL;
    struct moeinf_gguf *gq = NULL;
    struct moeinf_error err;
    if (moeinf_gguf_open(p32, &g32, &err) != MOEINF_OK ||
        moeinf_gguf_open(pq, &gq, &err) != MOEINF_OK) {
        CHECK_MSG(0, "%s", err.msg);
        moeinf_gguf_free(g32);
        return;
    }
    int n_checked = 0;
    int n_by_type[MOEINF_TYPE_COUNT] = {0};
    int n_rows_bad = 0;
    int n_elem_bad = 0;
    for (uint64_t i = 0; i < gq->n_tensors; i++) {
        const struct moeinf_gguf_tensor *tq = &gq->tensors[i];
        if (!is_block_type((enum moeinf_type)tq->type)) continue;
        n_by_type[tq->type]++;
        const struct moeinf_gguf_tensor *t32 = moeinf_gguf_find_tensor(g32, tq->name);
        CHECK(t32 != NULL);
        if (!t32) continue;
        CHECK(t32->type == MOEINF_TYPE_F32 || t32->type == MOEINF_TYPE_F16);
        int64_t n = tq->ne[0];
        int64_t rows = tq->ne[1] * tq->ne[2] * tq->ne[3];
        CHECK_EQ_INT(t32->ne[0], n);
        size_t qb = moeinf_row_bytes((enum moeinf_type)tq->type, n);
        size_t fb = moeinf_row_bytes((enum moeinf_type)t32->type, n);
        CHECK_EQ_INT(tq->n_bytes, qb * (size_t)rows);
        float *x = malloc((size_t)n * sizeof(float));
        float *y = malloc((size_t)n * sizeof(float));
        uint8_t *q = malloc(qb);
        for (int64_t r = 0; r < rows; r++) {
            moeinf_dequantize_row((enum moeinf_type)t32->type, t32->data + (size_t)r * fb, x, n);
            moeinf_quantize_row_ref((enum moeinf_type)tq->type, x, q, n);
            const uint8_t *file_row = tq->data + (size_t)r * qb;
            n_rows_bad += memcmp(q, file_row, qb) != 0;
            moeinf_dequantize_row((enum moeinf_type)tq->type, file_row, y, n);
            /* The element bound below is stated for Q8_0 and Q4_0 only. */
            if (tq->type != MOEINF_TYPE_Q8_0 && tq->type != MOEINF_TYPE_Q4_0) continue;
            for (int64_t b = 0; b < n / 32; b++) {
                const double amax = block_amax(x + b * 32);
                double d = tq->type == MOEINF_TYPE_Q8_0 ? amax / 127 : amax / 8;
                double tol = tq->type == MOEINF_TYPE_Q8_0 ? d * (0.5 + 127 * 0x1p-11)
                                                          : d * (1 + 8 * 0x1p-11);
                for (int j = 0; j < 32; j++)
                    n_elem_bad += fabs((double)y[b * 32 + j] - x[b * 32 + j]) > tol * (1 + 1e-5);
            }
        }
        free(x);
        free(y);
        free(q);
        n_checked++;
    }
    CHECK_MSG(n_checked >= 7, "%s: only %d quantized tensors", qfile, n_checked);
    CHECK_MSG(n_rows_bad == 0, "%s: %d rows differ from llama-quantize", qfile, n_rows_bad);
    for (int t = 0; t < MOEINF_TYPE_COUNT; t++)
        if (n_by_type[t])
            fprintf(stderr, "%s: %d %s tensors\n", qfile, n_by_type[t], moeinf_type_name(t));
    CHECK_EQ_INT(n_elem_bad, 0);
    moeinf_gguf_free(g32);
    moeinf_gguf_free(gq);
}

static void test_real_data(void) {
    check_requantize("testdata/models/tiny-mixtral-Q8_0.gguf");
    check_requantize("testdata/models/tiny-mixtral-Q4_0.gguf");
    /* Q4_K_M: Q8_0, Q5_0, Q4_K, Q5_K and Q6_K tensors (testdata README, 1.5). */
    check_requantize("testdata/models/tiny-mixtral-Q4_K_M.gguf");
}

/* ---- table selection ---------------------------------------------------------------------------
 */

/* Every table this CPU runs, scalar first (independent of MOEINF_KERNELS). */
static int cpu_tables(const struct moeinf_kernels **all) {
    int n = 0;
    all[n++] = moeinf_kernels_scalar();
    if (moeinf_kernels_avx2()) all[n++] = moeinf_kernels_avx2();
    if (moeinf_kernels_avx512()) all[n++] = moeinf_kernels_avx512();
    if (moeinf_kernels_amx()) all[n++] = moeinf_kernels_amx();
    if (moeinf_kernels_neon()) all[n++] = moeinf_kernels_neon();
    if (moeinf_kernels_dotprod()) all[n++] = moeinf_kernels_dotprod();
    return n;
}

static void test_kernels_best(void) {
    const struct moeinf_kernels *all[6];
    int n_all = cpu_tables(all);
    const struct moeinf_kernels *best = moeinf_kernels_best();
    const struct moeinf_kernels *scalar = moeinf_kernels_scalar();
    const struct moeinf_kernels *avx2 = moeinf_kernels_avx2();
    const struct moeinf_kernels *avx512 = moeinf_kernels_avx512();
    const struct moeinf_kernels *neon = moeinf_kernels_neon();
    const struct moeinf_kernels *dotprod = moeinf_kernels_dotprod();
    CHECK(best == all[n_all - 1]);
    CHECK(!avx512 || avx2);                 /* the AVX-512 probe implies the AVX2 one */
    CHECK(!moeinf_kernels_amx() || avx512); /* and the AMX probe the AVX-512 one */
    CHECK(!dotprod || neon);                /* the dot product probe implies the NEON one */
    CHECK(!neon || !avx2);                  /* one architecture's tables or the other's */
    /* Names cap the choice; unset or empty is the best table; on arm64 the x86 names, and on
     * x86-64 the arm64 ones, cap at scalar. */
    const struct moeinf_kernels *up_to_avx2 = avx2 ? avx2 : scalar;
    const struct moeinf_kernels *up_to_avx512 = avx512 ? avx512 : up_to_avx2;
    const struct moeinf_kernels *up_to_neon = neon ? neon : scalar;
    const char *caps[] = {NULL, "", "scalar", "avx2", "avx512", "amx", "neon", "dotprod"};
    const struct moeinf_kernels *want[] = {best,         best,
                                           scalar,       up_to_avx2,
                                           up_to_avx512, neon ? scalar : best,
                                           up_to_neon,   dotprod ? dotprod : up_to_neon};
    for (int i = 0; i < 8; i++) {
        const struct moeinf_kernels *k = NULL;
        struct moeinf_error err = {0};
        CHECK(moeinf_kernels_choose(caps[i], &k, &err) == MOEINF_OK);
        CHECK_MSG(k == want[i], "MOEINF_KERNELS=%s", caps[i] ? caps[i] : "(unset)");
    }
    /* Anything else is an error naming the value and the choices; *out stays untouched. */
    const char *bad[] = {"no-such-table", "AVX2", "avx2 ", "avx512f", "sse",
                         "amx-int8",      "NEON", "sve",   "asimddp", "i8mm"};
    for (int i = 0; i < 10; i++) {
        const struct moeinf_kernels *k = NULL;
        struct moeinf_error err = {0};
        CHECK(moeinf_kernels_choose(bad[i], &k, &err) == MOEINF_ERR_ARG);
        CHECK(k == NULL);
        char want_msg[64];
        snprintf(want_msg, sizeof want_msg, "MOEINF_KERNELS=%s ", bad[i]);
        CHECK_STR_CONTAINS(err.msg, want_msg);
        CHECK_STR_CONTAINS(err.msg, "scalar, avx2, avx512, amx, neon or dotprod");
    }
    /* The environment path reads the variable this test runs under (ctest sets it). */
    const struct moeinf_kernels *from_env = NULL;
    const struct moeinf_kernels *chosen = NULL;
    CHECK(moeinf_kernels_from_env(&from_env, NULL) == MOEINF_OK);
    /* NOLINTNEXTLINE(concurrency-mt-unsafe): main thread */
    CHECK(moeinf_kernels_choose(getenv("MOEINF_KERNELS"), &chosen, NULL) == MOEINF_OK);
    CHECK(from_env && from_env == chosen);
    CHECK(strcmp(moeinf_kernels_scalar()->name, "scalar") == 0);
    if (avx2) CHECK(strcmp(avx2->name, "avx2") == 0);
    if (avx512) CHECK(strcmp(avx512->name, "avx512") == 0);
    if (moeinf_kernels_amx()) CHECK(strcmp(moeinf_kernels_amx()->name, "amx") == 0);
    if (neon) CHECK(strcmp(neon->name, "neon") == 0);
    if (dotprod) CHECK(strcmp(dotprod->name, "dotprod") == 0);
    /* Every table fills every supported slot (from_float where the type is an activation). */
    for (int ti = 0; ti < n_all; ti++) {
        for (int i = 0; i < N_SUPPORTED; i++) {
            enum moeinf_type t = supported[i];
            CHECK(all[ti]->to_float[t] && all[ti]->vec_dot[t] && all[ti]->vec_dot_m[t] &&
                  all[ti]->vec_dot_rows[t] && all[ti]->axpy_f32);
            CHECK(all[ti]->from_float[moeinf_type_cpu_get((int)t)->vec_dot_type]);
        }
    }
}

/* The probe against Linux's own: /proc/cpuinfo lists an ISA extension only when the CPU has
 * it and the kernel saves its registers. A table is offered exactly when every extension
 * its file is compiled with is listed. */
#if (defined(__x86_64__) || defined(__aarch64__)) && defined(__linux__)
static bool cpuinfo_has(const char *flags, const char *name) {
    size_t len = strlen(name);
    for (const char *p = flags; (p = strstr(p, name)) != NULL; p += len) {
        bool starts = p == flags || p[-1] == ' ' || p[-1] == '\t' || p[-1] == ':';
        bool ends = p[len] == ' ' || p[len] == '\n' || p[len] == '\0';
        if (starts && ends) return true;
    }
    return false;
}
#endif

static void test_probe_matches_cpuinfo(void) {
#if (defined(__x86_64__) || defined(__aarch64__)) && defined(__linux__)
#    if defined(__x86_64__)
    const char *key = "flags";
#    else
    const char *key = "Features"; /* qemu-user shows the host's file, without this line */
#    endif
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (!f) {
        test_skip("/proc/cpuinfo is not readable");
        return;
    }
    char line[8192];
    bool found = false;
    while (!found && fgets(line, sizeof line, f))
        found = strncmp(line, key, strlen(key)) == 0;
    fclose(f);
    if (!found) {
        test_skip("/proc/cpuinfo has no flags or Features line");
        return;
    }
#endif
#if defined(__aarch64__) && defined(__linux__)
    CHECK_EQ_INT(moeinf_kernels_neon() != NULL, cpuinfo_has(line, "asimd"));
    CHECK_EQ_INT(moeinf_kernels_dotprod() != NULL,
                 cpuinfo_has(line, "asimd") && cpuinfo_has(line, "asimddp"));
#elif defined(__x86_64__) && defined(__linux__)
    const char *avx2_needs[] = {"avx", "avx2", "fma", "f16c"};
    const char *avx512_needs[] = {"avx512f",  "avx512bw",    "avx512vl",
                                  "avx512dq", "avx512_vnni", "avx512_bf16"};
    /* Linux lists amx_tile only where it supports the tile state, which it grants on request */
    const char *amx_needs[] = {"amx_tile", "amx_int8"};
    bool avx2 = true;
    bool avx512 = true;
    bool amx = true;
    for (int i = 0; i < 4; i++)
        avx2 = avx2 && cpuinfo_has(line, avx2_needs[i]);
    for (int i = 0; i < 6; i++)
        avx512 = avx512 && cpuinfo_has(line, avx512_needs[i]);
    for (int i = 0; i < 2; i++)
        amx = amx && cpuinfo_has(line, amx_needs[i]);
    CHECK_EQ_INT(moeinf_kernels_avx2() != NULL, avx2);
    CHECK_EQ_INT(moeinf_kernels_avx512() != NULL, avx2 && avx512);
    CHECK_EQ_INT(moeinf_kernels_amx() != NULL, avx2 && avx512 && amx);
#else
    test_skip("the probe is checked against /proc/cpuinfo on x86-64 and arm64 Linux only");
#endif
}

int main(void) {
    /* Unset, MOEINF_KERNELS checks every table this CPU runs; set, the scalar table and
     * the one it names. */
    const struct moeinf_kernels *wanted = NULL;
    int rc = test_kernels_wanted(&wanted);
    if (!wanted) return rc;
    if (getenv("MOEINF_KERNELS")) { /* NOLINT(concurrency-mt-unsafe): main thread */
        tables[n_tables++] = moeinf_kernels_scalar();
        if (wanted != tables[0]) tables[n_tables++] = wanted;
    } else {
        n_tables = cpu_tables(tables);
    }
    fprintf(stderr, "tables:");
    for (int i = 0; i < n_tables; i++)
        fprintf(stderr, " %s", tables[i]->name);
    fprintf(stderr, "\n");

    RUN(test_traits);
    RUN(test_fp16_exhaustive);
    RUN(test_fp16_rounding_cases);
    RUN(test_fp16_random_vs_bruteforce);
    RUN(test_bf16);
    RUN(test_known_q8_0);
    RUN(test_known_q4_0);
    RUN(test_q8_0_activation_scale_rule);
    RUN(test_known_dots);
    RUN(test_ref_roundtrip_bounds);
    RUN(test_codebook_quantizers);
    RUN(test_dot_vs_double);
    RUN(test_simd_from_float);
    RUN(test_q8_k_activation_cases);
    RUN(test_simd_to_float);
    RUN(test_simd_vec_dot);
    RUN(test_vec_dot_m);
    RUN(test_gemm);
    RUN(test_gemm_q8_0_extremes);
    RUN(test_vec_dot_rows);
    RUN(test_vec_dot_rows_extremes);
    RUN(test_vec_dot_rows_codebook_extremes);
    RUN(test_vec_dot_rows_k_extremes);
    RUN(test_kquant_extremes);
    RUN(test_mxfp4_small_scales);
    RUN(test_axpy);
    RUN(test_delta_rule);
    RUN(test_kernels_best);
    RUN(test_probe_matches_cpuinfo);
    RUN(test_real_data);
    return test_report();
}
