/*
 * kernels_neon.c - the arm64 Advanced SIMD kernel table (no compiler flag: every ARMv8-A core
 * has it). The bodies are in kernels_arm.h. Only call the getter after kernels.c's probe
 * (moeinf_kernels_neon()).
 */
#if defined(__aarch64__)
#    include "quant/kernels_arm.h"

static const struct moeinf_kernels table = ARM_TABLE("neon");

const struct moeinf_kernels *moeinf_kernels_neon_table(void) {
    return &table;
}
#endif
