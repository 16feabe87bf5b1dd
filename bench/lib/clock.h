/*
 * clock.h - the kernel benchmarks' clocks (bench_kernels, bench_gemm, bench_attention): header
 * only, each bench is one executable.
 */
#ifndef MOEINF_BENCH_CLOCK_H
#define MOEINF_BENCH_CLOCK_H

#include <stdint.h>
#include <time.h>

#if defined(__x86_64__)
#    include <x86intrin.h>
#endif

/* Time-stamp counter ticks (0 where there is none). */
static inline uint64_t bench_ticks(void) {
#if defined(__x86_64__)
    return __rdtsc();
#else
    return 0;
#endif
}

/* Thread CPU time, not wall time: on a shared machine the wall clock also counts the time
 * other processes hold the core. */
static inline double bench_cpu_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

#endif
