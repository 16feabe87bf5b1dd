/*
 * kernels.c - the scalar kernel table and the run-time choice of the best table for this CPU.
 *
 * DESIGN: each ISA file (kernels_avx2.c, kernels_avx512.c) is compiled with its own -m flags
 * and exports one raw table getter; nothing from those files may run before the probe here
 * has confirmed that the CPU and the OS support the instructions (the probe itself is
 * compiled without ISA flags). The probe reads CPUID and XCR0 directly rather than
 * __builtin_cpu_supports, whose feature names differ between gcc and clang (clang 14 knows
 * no "f16c"). Nothing is cached: callers keep the pointer they get (no hidden globals).
 */
#include "quant/kernels.h"

#include <assert.h>
#include <stdlib.h>
#include <string.h>

#include "quant/quant_ref.h"

static const struct moeinf_kernels scalar_table = {
    .name = "scalar",
    .from_float =
        {
            [MOEINF_TYPE_F32] = moeinf_ref_from_float_f32,
            [MOEINF_TYPE_F16] = moeinf_ref_from_float_f16,
            [MOEINF_TYPE_BF16] = moeinf_ref_from_float_bf16,
            [MOEINF_TYPE_Q8_0] = moeinf_ref_from_float_q8_0,
        },
    .to_float =
        {
            [MOEINF_TYPE_F32] = moeinf_ref_to_float_f32,
            [MOEINF_TYPE_F16] = moeinf_ref_to_float_f16,
            [MOEINF_TYPE_BF16] = moeinf_ref_to_float_bf16,
            [MOEINF_TYPE_Q8_0] = moeinf_ref_to_float_q8_0,
            [MOEINF_TYPE_Q4_0] = moeinf_ref_to_float_q4_0,
        },
    .vec_dot =
        {
            [MOEINF_TYPE_F32] = moeinf_ref_vec_dot_f32,
            [MOEINF_TYPE_F16] = moeinf_ref_vec_dot_f16,
            [MOEINF_TYPE_BF16] = moeinf_ref_vec_dot_bf16,
            [MOEINF_TYPE_Q8_0] = moeinf_ref_vec_dot_q8_0,
            [MOEINF_TYPE_Q4_0] = moeinf_ref_vec_dot_q4_0,
        },
    .vec_dot_m =
        {
            [MOEINF_TYPE_F32] = moeinf_ref_vec_dot_m_f32,
            [MOEINF_TYPE_F16] = moeinf_ref_vec_dot_m_f16,
            [MOEINF_TYPE_BF16] = moeinf_ref_vec_dot_m_bf16,
            [MOEINF_TYPE_Q8_0] = moeinf_ref_vec_dot_m_q8_0,
            [MOEINF_TYPE_Q4_0] = moeinf_ref_vec_dot_m_q4_0,
        },
    .vec_dot_rows =
        {
            [MOEINF_TYPE_F32] = moeinf_ref_vec_dot_rows_f32,
            [MOEINF_TYPE_F16] = moeinf_ref_vec_dot_rows_f16,
            [MOEINF_TYPE_BF16] = moeinf_ref_vec_dot_rows_bf16,
            [MOEINF_TYPE_Q8_0] = moeinf_ref_vec_dot_rows_q8_0,
            [MOEINF_TYPE_Q4_0] = moeinf_ref_vec_dot_rows_q4_0,
        },
    .axpy_f32 = moeinf_ref_axpy_f32,
};

const struct moeinf_kernels *moeinf_kernels_scalar(void) {
    return &scalar_table;
}

void moeinf_dequantize_row(enum moeinf_type type, const void *x, float *y, int64_t n) {
    moeinf_to_float_fn to_float =
        (unsigned)type < MOEINF_TYPE_COUNT ? scalar_table.to_float[type] : NULL;
    assert(to_float && "moeinf_dequantize_row: unsupported type");
    if (to_float) to_float(x, y, n);
}

#if defined(__x86_64__)
#    include <cpuid.h>

/* XCR0: which register states the OS saves (bit 1 SSE, 2 AVX, 5-7 AVX-512). */
static uint64_t read_xcr0(void) {
    uint32_t lo;
    uint32_t hi;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    return ((uint64_t)hi << 32) | lo;
}

struct x86_features {
    bool avx2_fma_f16c; /* and the OS saves YMM state */
    bool avx512_vnni;   /* F, BW, VL, DQ, VNNI, and the OS saves ZMM state */
};

static struct x86_features probe_x86(void) {
    struct x86_features f = {false, false};
    unsigned a;
    unsigned b;
    unsigned c;
    unsigned d;
    if (!__get_cpuid(1, &a, &b, &c, &d)) return f;
    bool fma = c & (1u << 12), osxsave = c & (1u << 27), avx = c & (1u << 28);
    bool f16c = c & (1u << 29);
    if (!osxsave || !avx) return f;
    uint64_t xcr0 = read_xcr0();
    if ((xcr0 & 0x6) != 0x6) return f;
    if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return f;
    bool avx2 = b & (1u << 5);
    f.avx2_fma_f16c = avx2 && fma && f16c;
    bool avx512f = b & (1u << 16), avx512dq = b & (1u << 17);
    bool avx512bw = b & (1u << 30), avx512vl = b & (1u << 31);
    bool avx512vnni = c & (1u << 11);
    f.avx512_vnni = f.avx2_fma_f16c && (xcr0 & 0xe0) == 0xe0 && avx512f && avx512dq && avx512bw &&
                    avx512vl && avx512vnni;
    return f;
}

const struct moeinf_kernels *moeinf_kernels_avx2(void) {
    return probe_x86().avx2_fma_f16c ? moeinf_kernels_avx2_table() : NULL;
}

const struct moeinf_kernels *moeinf_kernels_avx512(void) {
    return probe_x86().avx512_vnni ? moeinf_kernels_avx512_table() : NULL;
}
#else
const struct moeinf_kernels *moeinf_kernels_avx2(void) {
    return NULL;
}

const struct moeinf_kernels *moeinf_kernels_avx512(void) {
    return NULL;
}
#endif

const struct moeinf_kernels *moeinf_kernels_best(void) {
    /* The cap ranks the tables; an unknown value caps nothing. */
    /* NOLINTNEXTLINE(concurrency-mt-unsafe): moeinf never calls setenv */
    const char *cap = getenv("MOEINF_KERNELS");
    int level = 2;
    if (cap && strcmp(cap, "scalar") == 0)
        level = 0;
    else if (cap && strcmp(cap, "avx2") == 0)
        level = 1;
    const struct moeinf_kernels *k = NULL;
    if (level >= 2) k = moeinf_kernels_avx512();
    if (!k && level >= 1) k = moeinf_kernels_avx2();
    return k ? k : moeinf_kernels_scalar();
}
