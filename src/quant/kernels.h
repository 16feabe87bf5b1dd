/*
 * kernels.h - the raw per-ISA kernel tables, internal to src/quant. Each is defined in its ISA
 * file (kernels_avx2.c, kernels_avx512.c, kernels_amx.c, kernels_neon.c, kernels_dotprod.c) and
 * must only be used after kernels.c has probed the CPU: call moeinf_kernels_avx2() / _avx512() /
 * _amx() / _neon() / _dotprod() / moeinf_kernels_best() (quant.h) instead. Tests use these directly
 * only to check that the probe answered.
 */
#ifndef MOEINF_QUANT_KERNELS_H
#define MOEINF_QUANT_KERNELS_H

#include "quant/quant.h"

/* All kernels of type T in one entry of a struct moeinf_kernels initializer (designators into
 * the per-kind arrays), so a table adds a type in one place. NULL where a type has no such
 * kernel (from_float of weight-only types, the dots of activation-only types). */
#define MOEINF_KERNELS_ENTRY(T, from, to, dot, dot_m, dot_rows)                                    \
    .from_float[T] = (from), .to_float[T] = (to), .vec_dot[T] = (dot), .vec_dot_m[T] = (dot_m),    \
    .vec_dot_rows[T] = (dot_rows)

#if defined(__x86_64__)
const struct moeinf_kernels *moeinf_kernels_avx2_table(void);
const struct moeinf_kernels *moeinf_kernels_avx512_table(void);
const struct moeinf_kernels *moeinf_kernels_amx_table(void);
/* The delta rule (quant.h's moeinf_delta_rule_fn) in 8 lanes with FMA, for both x86 tables
 * (delta_rule_avx2.c). */
void moeinf_delta_rule_f32_avx2(float *s, int n, const float *q, const float *k, const float *v,
                                float decay, float beta, float scale, float *out);
#endif

#if defined(__aarch64__)
const struct moeinf_kernels *moeinf_kernels_neon_table(void);
const struct moeinf_kernels *moeinf_kernels_dotprod_table(void);
#endif

#endif
