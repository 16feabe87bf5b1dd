/*
 * kernels_amx.c - the AMX kernel table: the AVX-512 table (compiled with the same flags, plus
 * -mamx-tile -mamx-int8) whose prefill tiles for the Q8_0 family (kernels_x86_amx.h) and the
 * K-quants Q4_K, Q5_K, Q6_K (kernels_x86_amxk.h) multiply on AMX-INT8 tile registers. Only
 * call the getter after kernels.c's probe (moeinf_kernels_amx()), which also asks Linux for
 * the tile data state.
 */
#if defined(__x86_64__)
#    define X86_VNNI   1
#    define X86_AVX512 1
#    define X86_AMX    1
#    include "quant/kernels_x86.h"

static const struct moeinf_kernels table = X86_TABLE("amx");

const struct moeinf_kernels *moeinf_kernels_amx_table(void) {
    return &table;
}
#endif
