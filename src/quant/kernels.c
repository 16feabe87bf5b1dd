/*
 * kernels.c - the scalar kernel table and the run-time choice of the best table for this CPU.
 *
 * DESIGN: each ISA file (kernels_avx2.c, kernels_avx512.c, kernels_amx.c) is compiled with its
 * own -m flags and exports one raw table getter (on arm64 kernels_neon.c needs no flag, Advanced
 * SIMD being the baseline, and kernels_dotprod.c has -march=armv8.2-a+dotprod); nothing from those
 * files may run before the probe here has confirmed that the CPU and the OS support the
 * instructions (the probe itself is compiled without ISA flags). The probe reads CPUID and XCR0
 * directly rather than
 * __builtin_cpu_supports, whose feature names differ between gcc and clang (clang 14 knows
 * no "f16c"); it checks every -m flag the ISA file is compiled with, because the compiler may
 * use any of them anywhere in that file. Nothing is cached: callers keep the pointer they get
 * (no hidden globals). The AMX probe also asks Linux for the tile data state, a permission of
 * the process that asking again leaves as it is.
 */
#include "quant/kernels.h"

#include <assert.h>
#include <stdlib.h>
#include <string.h>

#include "base/status.h"
#include "quant/quant_ref.h"
#include "quant/softmax.h"

/* One entry per type (kernels.h, MOEINF_KERNELS_ENTRY). */
#define REF_BLOCK(T, t)                                                                            \
    MOEINF_KERNELS_ENTRY(T, NULL, moeinf_ref_to_float_##t, moeinf_ref_vec_dot_##t,                 \
                         moeinf_ref_vec_dot_m_##t, moeinf_ref_vec_dot_rows_##t)

static const struct moeinf_kernels scalar_table = {
    .name = "scalar",
    MOEINF_KERNELS_ENTRY(MOEINF_TYPE_F32, moeinf_ref_from_float_f32, moeinf_ref_to_float_f32,
                         moeinf_ref_vec_dot_f32, moeinf_ref_vec_dot_m_f32,
                         moeinf_ref_vec_dot_rows_f32),
    MOEINF_KERNELS_ENTRY(MOEINF_TYPE_F16, moeinf_ref_from_float_f16, moeinf_ref_to_float_f16,
                         moeinf_ref_vec_dot_f16, moeinf_ref_vec_dot_m_f16,
                         moeinf_ref_vec_dot_rows_f16),
    MOEINF_KERNELS_ENTRY(MOEINF_TYPE_BF16, moeinf_ref_from_float_bf16, moeinf_ref_to_float_bf16,
                         moeinf_ref_vec_dot_bf16, moeinf_ref_vec_dot_m_bf16,
                         moeinf_ref_vec_dot_rows_bf16),
    MOEINF_KERNELS_ENTRY(MOEINF_TYPE_Q8_0, moeinf_ref_from_float_q8_0, moeinf_ref_to_float_q8_0,
                         moeinf_ref_vec_dot_q8_0, moeinf_ref_vec_dot_m_q8_0,
                         moeinf_ref_vec_dot_rows_q8_0),
    MOEINF_KERNELS_ENTRY(MOEINF_TYPE_Q8_1, moeinf_ref_from_float_q8_1, moeinf_ref_to_float_q8_1,
                         NULL, NULL, NULL),
    MOEINF_KERNELS_ENTRY(MOEINF_TYPE_Q8_K, moeinf_ref_from_float_q8_k, moeinf_ref_to_float_q8_k,
                         NULL, NULL, NULL),
    REF_BLOCK(MOEINF_TYPE_Q4_0, q4_0),
    REF_BLOCK(MOEINF_TYPE_Q4_1, q4_1),
    REF_BLOCK(MOEINF_TYPE_Q5_0, q5_0),
    REF_BLOCK(MOEINF_TYPE_Q5_1, q5_1),
    REF_BLOCK(MOEINF_TYPE_Q2_K, q2_k),
    REF_BLOCK(MOEINF_TYPE_Q3_K, q3_k),
    REF_BLOCK(MOEINF_TYPE_Q4_K, q4_k),
    REF_BLOCK(MOEINF_TYPE_Q5_K, q5_k),
    REF_BLOCK(MOEINF_TYPE_Q6_K, q6_k),
    REF_BLOCK(MOEINF_TYPE_IQ4_NL, iq4_nl),
    REF_BLOCK(MOEINF_TYPE_IQ4_XS, iq4_xs),
    REF_BLOCK(MOEINF_TYPE_MXFP4, mxfp4),
    .axpy_f32 = moeinf_ref_axpy_f32,
    .softmax_f32 = moeinf_ref_softmax_f32,
    .qk_f32 = moeinf_ref_qk_f32,
    .wsum_f32 = moeinf_ref_wsum_f32,
    .delta_rule_f32 = moeinf_ref_delta_rule_f32,
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
#    if defined(__linux__)
#        include <sys/syscall.h>
#        include <unistd.h>
#    endif

/* XCR0: which register states the OS saves (bit 1 SSE, 2 AVX, 5-7 AVX-512 opmask and ZMM). */
static uint64_t read_xcr0(void) {
    uint32_t lo;
    uint32_t hi;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    return ((uint64_t)hi << 32) | lo;
}

#    define XCR0_YMM  0x06u    /* SSE + AVX state */
#    define XCR0_ZMM  0xe0u    /* opmask, ZMM0-15 upper halves, ZMM16-31 */
#    define XCR0_TILE 0x60000u /* AMX tile configuration and tile data */

/* Linux (5.16 and later) enables the AMX tile data state per process, on request: until the
 * request, a tile instruction faults even where XCR0 has the bits. */
#    define ARCH_REQ_XCOMP_PERM 0x1023
#    define XFEATURE_XTILEDATA  18

static bool request_tile_state(void) {
#    if defined(__linux__)
    /* Granting is idempotent: asking again after a grant succeeds at once. */
    return syscall(SYS_arch_prctl, ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA) == 0;
#    else
    return false;
#    endif
}

/* One flag per table: the CPU has every instruction set its file is compiled with
 * (CMakeLists.txt: -mavx2 -mfma -mf16c; AVX-512 adds -mavx512f/bw/vl/dq/vnni/bf16, AMX adds
 * -mamx-tile/int8) and the OS saves the registers those use. */
struct x86_features {
    bool avx2;   /* AVX, AVX2, FMA, F16C; YMM state saved */
    bool avx512; /* all of avx2, AVX-512 F, BW, VL, DQ, VNNI, BF16; opmask and ZMM state saved */
    bool amx;    /* all of avx512, AMX-TILE and AMX-INT8; tile state saved (granted on request) */
};

static bool bit(unsigned reg, unsigned n) {
    return (reg >> n) & 1u;
}

static struct x86_features probe_x86(void) {
    struct x86_features f = {false, false, false};
    unsigned a;
    unsigned b;
    unsigned c;
    unsigned d;
    if (!__get_cpuid(1, &a, &b, &c, &d)) return f;
    bool fma = bit(c, 12);
    bool osxsave = bit(c, 27);
    bool avx = bit(c, 28);
    bool f16c = bit(c, 29);
    if (!osxsave || !avx) return f; /* without OSXSAVE, xgetbv itself is undefined */
    uint64_t xcr0 = read_xcr0();
    if ((xcr0 & XCR0_YMM) != XCR0_YMM) return f;
    if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return f;
    unsigned max_subleaf = a;
    unsigned leaf7_d = d; /* AMX bits; subleaf 1 overwrites d */
    f.avx2 = bit(b, 5) && fma && f16c;
    bool avx512 = bit(b, 16) /* F */ && bit(b, 17) /* DQ */ && bit(b, 30) /* BW */ &&
                  bit(b, 31) /* VL */ && bit(c, 11) /* VNNI */;
    bool bf16 = false;
    if (max_subleaf >= 1 && __get_cpuid_count(7, 1, &a, &b, &c, &d)) bf16 = bit(a, 5);
    f.avx512 = f.avx2 && avx512 && bf16 && (xcr0 & XCR0_ZMM) == XCR0_ZMM;
    f.amx = f.avx512 && bit(leaf7_d, 24) /* AMX-TILE */ && bit(leaf7_d, 25) /* AMX-INT8 */ &&
            (xcr0 & XCR0_TILE) == XCR0_TILE;
    return f;
}

const struct moeinf_kernels *moeinf_kernels_avx2(void) {
    return probe_x86().avx2 ? moeinf_kernels_avx2_table() : NULL;
}

const struct moeinf_kernels *moeinf_kernels_avx512(void) {
    return probe_x86().avx512 ? moeinf_kernels_avx512_table() : NULL;
}

const struct moeinf_kernels *moeinf_kernels_amx(void) {
    /* only here, so that choosing another table leaves the process's permissions alone */
    return probe_x86().amx && request_tile_state() ? moeinf_kernels_amx_table() : NULL;
}
#else
const struct moeinf_kernels *moeinf_kernels_avx2(void) {
    return NULL;
}

const struct moeinf_kernels *moeinf_kernels_avx512(void) {
    return NULL;
}

const struct moeinf_kernels *moeinf_kernels_amx(void) {
    return NULL;
}
#endif

#if defined(__aarch64__) && defined(__linux__)
#    include <sys/auxv.h>

/* Advanced SIMD is part of every ARMv8-A core that Linux runs on; the kernel says so in
 * HWCAP_ASIMD, which is asked all the same. The dot product extension (SDOT) is HWCAP_ASIMDDP. */
const struct moeinf_kernels *moeinf_kernels_neon(void) {
    return (getauxval(AT_HWCAP) & HWCAP_ASIMD) ? moeinf_kernels_neon_table() : NULL;
}

const struct moeinf_kernels *moeinf_kernels_dotprod(void) {
    const unsigned long want = HWCAP_ASIMD | HWCAP_ASIMDDP;
    return (getauxval(AT_HWCAP) & want) == want ? moeinf_kernels_dotprod_table() : NULL;
}
#else
const struct moeinf_kernels *moeinf_kernels_neon(void) {
    return NULL;
}

const struct moeinf_kernels *moeinf_kernels_dotprod(void) {
    return NULL;
}
#endif

/* The best table at or below a level that this CPU runs: on x86-64 0 scalar, 1 avx2,
 * 2 avx512, 3 amx; on arm64 0 scalar, 1 neon, 2 dotprod. */
static const struct moeinf_kernels *best_up_to(int level) {
    const struct moeinf_kernels *k = NULL;
    if (level >= 3) k = moeinf_kernels_amx();
    if (!k && level >= 2) k = moeinf_kernels_avx512();
    if (!k && level >= 2) k = moeinf_kernels_dotprod();
    if (!k && level >= 1) k = moeinf_kernels_avx2();
    if (!k && level >= 1) k = moeinf_kernels_neon();
    return k ? k : moeinf_kernels_scalar();
}

const struct moeinf_kernels *moeinf_kernels_best(void) {
    return best_up_to(3);
}

enum moeinf_status moeinf_kernels_choose(const char *cap, const struct moeinf_kernels **out,
                                         struct moeinf_error *err) {
    /* Each name's level on its own architecture; a name of the other one caps at scalar. */
#if defined(__aarch64__)
    static const int x86_level = 0;
    static const int arm_level = 1;
#else
    static const int x86_level = 1;
    static const int arm_level = 0;
#endif
    const struct {
        const char *name;
        int level;
    } caps[] = {{"scalar", 0},          {"avx2", x86_level}, {"avx512", 2 * x86_level},
                {"amx", 3 * x86_level}, {"neon", arm_level}, {"dotprod", 2 * arm_level}};
    if (!cap || !*cap) {
        *out = moeinf_kernels_best();
        return MOEINF_OK;
    }
    for (size_t i = 0; i < sizeof caps / sizeof caps[0]; i++) {
        if (strcmp(cap, caps[i].name) == 0) {
            *out = best_up_to(caps[i].level);
            return MOEINF_OK;
        }
    }
    return moeinf_fail(
        err, MOEINF_ERR_ARG,
        "MOEINF_KERNELS=%s names no kernel table (scalar, avx2, avx512, amx, neon or dotprod)",
        cap);
}

enum moeinf_status moeinf_kernels_from_env(const struct moeinf_kernels **out,
                                           struct moeinf_error *err) {
    /* NOLINTNEXTLINE(concurrency-mt-unsafe): moeinf never calls setenv */
    return moeinf_kernels_choose(getenv("MOEINF_KERNELS"), out, err);
}
