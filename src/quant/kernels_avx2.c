/* kernels_avx2.c - placeholder until the avx2 kernels land: no table yet. */
#if defined(__x86_64__)
#    include "quant/kernels.h"

const struct moeinf_kernels *moeinf_kernels_avx2_table(void) {
    return (const struct moeinf_kernels *)0;
}
#endif
