/*
 * kernels.h - the raw per-ISA kernel tables, internal to src/quant. Each is defined in its ISA
 * file (kernels_avx2.c, kernels_avx512.c) and must only be used after kernels.c has probed
 * the CPU: call moeinf_kernels_avx2() / moeinf_kernels_avx512() / moeinf_kernels_best()
 * (quant.h) instead. Tests use these directly only to check that the probe answered.
 */
#ifndef MOEINF_QUANT_KERNELS_H
#define MOEINF_QUANT_KERNELS_H

#include "quant/quant.h"

#if defined(__x86_64__)
const struct moeinf_kernels *moeinf_kernels_avx2_table(void);
const struct moeinf_kernels *moeinf_kernels_avx512_table(void);
#endif

#endif
