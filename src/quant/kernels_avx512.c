/*
 * kernels_avx512.c - the AVX-512 kernel table (compiled with -mavx512f/bw/vl/dq/vnni and the
 * AVX2 flags). The bodies are in kernels_x86.h: F32/F16/BF16 dots in 512-bit registers, int8
 * block dots with the 256-bit vpdpbusd (as llama.cpp does on AVX512-VNNI machines; decode's
 * block dots are bound by memory, not by vector width), and the Q8_0-family prefill tile
 * with the 512-bit one (prefill is bound by compute). Only call the getter after kernels.c's
 * probe (moeinf_kernels_avx512()).
 */
#if defined(__x86_64__)
#    define X86_VNNI   1
#    define X86_AVX512 1
#    include "quant/kernels_x86.h"

static const struct moeinf_kernels table = X86_TABLE("avx512");

const struct moeinf_kernels *moeinf_kernels_avx512_table(void) {
    return &table;
}
#endif
