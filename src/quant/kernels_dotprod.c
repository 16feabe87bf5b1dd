/*
 * kernels_dotprod.c - the arm64 table with the dot product extension (compiled with
 * -march=armv8.2-a+dotprod; Neoverse N1 and later, Cortex-A76 and later, Apple M1 and later):
 * kernels_arm.h's bodies with their int8 block dots as SDOT instructions. Only call the getter
 * after kernels.c's probe (moeinf_kernels_dotprod()).
 */
#if defined(__aarch64__)
#    include "quant/kernels_arm.h"

static const struct moeinf_kernels table = ARM_TABLE("dotprod");

const struct moeinf_kernels *moeinf_kernels_dotprod_table(void) {
    return &table;
}
#endif
