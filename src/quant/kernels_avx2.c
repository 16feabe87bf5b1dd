/*
 * kernels_avx2.c - the AVX2 + FMA + F16C kernel table (compiled with -mavx2 -mfma -mf16c).
 * The bodies are in kernels_x86.h; int8 block dots use vpmaddubsw + vpmaddwd. Only call the
 * getter after kernels.c's probe (moeinf_kernels_avx2()).
 */
#if defined(__x86_64__)
#    include "quant/kernels_x86.h"

static const struct moeinf_kernels table = X86_TABLE("avx2");

const struct moeinf_kernels *moeinf_kernels_avx2_table(void) {
    return &table;
}
#endif
