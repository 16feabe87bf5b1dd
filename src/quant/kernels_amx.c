/*
 * kernels_amx.c - the AMX kernel table: the AVX-512 table (compiled with the same flags, plus
 * -mamx-tile -mamx-int8) whose Q8_0-family prefill tile multiplies on AMX-INT8 tile
 * registers (kernels_x86_amx.h). Only call the getter after kernels.c's probe
 * (moeinf_kernels_amx()), which also asks Linux for the tile data state.
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
