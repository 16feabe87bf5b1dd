/*
 * bandwidth.c - the memory-bandwidth limit of decode on this machine: N threads stream-read
 * a buffer much larger than the caches (each thread its own contiguous part, as the matmul
 * split does). Prints GB/s on stdout: the best pass of several read patterns, since the
 * limit is what the memory system can deliver at all; a single plain loop leaves bandwidth
 * unused on some CPUs (one core's outstanding misses cap it), and a "limit" below what an
 * engine reaches would be no limit. The patterns, each on stderr with its best pass:
 *   linear    one sequential read per thread (the hardware prefetcher alone)
 *   prefetch  the same with software prefetches PREFETCH_BYTES ahead
 *   streamsK  each thread's part read as K = 2, 4, 8 interleaved sequential streams (the
 *             decode kernels read 3 or 8 weight rows far apart at once: docs/PERFORMANCE.md)
 * The buffer is ordinary anonymous memory (4 KiB pages unless the system forces huge pages),
 * as a mapped model file is.
 *
 *   bench_bandwidth [-t THREADS] [-s MIB] [-v]     (-v: every pattern's passes on stderr)
 */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define PASSES         5
#define PREFETCH_BYTES 1024

enum pattern {
    PAT_LINEAR,
    PAT_PREFETCH,
    PAT_STREAMS2,
    PAT_STREAMS4,
    PAT_STREAMS8,
    PAT_COUNT
};

static const char *const pattern_names[PAT_COUNT] = {"linear", "prefetch", "streams2",
                                                         "streams4", "streams8"};

struct part {
    const uint64_t *p;
    size_t n; /* a multiple of 32 */
    enum pattern pat;
    uint64_t sum;
};

/* Eight independent accumulators over a cache line per step: bound by loads, not by adds. */
static uint64_t sum_linear(const uint64_t *p, size_t n, int prefetch) {
    uint64_t s[8] = {0};
    for (size_t i = 0; i + 8 <= n; i += 8) {
        if (prefetch) __builtin_prefetch(p + i + PREFETCH_BYTES / 8, 0, 3);
        for (int k = 0; k < 8; k++)
            s[k] += p[i + (size_t)k];
    }
    return s[0] + s[1] + s[2] + s[3] + s[4] + s[5] + s[6] + s[7];
}

/* The part as k interleaved sequential streams: k cache lines, one from each k-th of it, per
 * step (the k-th rounded down to whole lines; the rest is read after them). */
static uint64_t sum_streams(const uint64_t *p, size_t n, int k) {
    const size_t q = n / (size_t)k / 8 * 8;
    uint64_t s[8] = {0};
    for (size_t i = 0; i + 8 <= q; i += 8) {
        for (int st = 0; st < k; st++) {
            const uint64_t *ps = p + (size_t)st * q + i;
            s[(2 * st) & 7] += ps[0] + ps[2] + ps[4] + ps[6];
            s[(2 * st + 1) & 7] += ps[1] + ps[3] + ps[5] + ps[7];
        }
    }
    uint64_t t = sum_linear(p + (size_t)k * q, n - (size_t)k * q, 0);
    for (int i = 0; i < 8; i++)
        t += s[i];
    return t;
}

static void *reader(void *arg) {
    struct part *pt = arg;
    switch (pt->pat) {
    case PAT_LINEAR: pt->sum = sum_linear(pt->p, pt->n, 0); break;
    case PAT_PREFETCH: pt->sum = sum_linear(pt->p, pt->n, 1); break;
    case PAT_STREAMS2: pt->sum = sum_streams(pt->p, pt->n, 2); break;
    case PAT_STREAMS4: pt->sum = sum_streams(pt->p, pt->n, 4); break;
    default: pt->sum = sum_streams(pt->p, pt->n, 8); break;
    }
    return NULL;
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

int main(int argc, char **argv) {
    int n_threads = 1;
    long mib = 1024;
    int verbose = 0;
    for (int i = 1; i < argc; i++) {
        char *end = NULL;
        if (!strcmp(argv[i], "-v")) {
            verbose = 1;
        } else if (i + 1 < argc && !strcmp(argv[i], "-t")) {
            n_threads = (int)strtol(argv[++i], &end, 10);
        } else if (i + 1 < argc && !strcmp(argv[i], "-s")) {
            mib = strtol(argv[++i], &end, 10);
        } else {
            n_threads = 0; /* usage */
        }
        if (end && *end) n_threads = 0; /* not a number */
    }
    if (n_threads < 1 || n_threads > 256 || mib < 16 || mib > (1L << 20)) {
        fprintf(stderr, "usage: bench_bandwidth [-t THREADS] [-s MIB>=16] [-v]\n");
        return 2;
    }
    size_t n = (size_t)mib * 1024 * 1024 / sizeof(uint64_t);
    uint64_t *buf = malloc(n * sizeof *buf + PREFETCH_BYTES); /* prefetches may look past n */
    if (!buf) {
        fprintf(stderr, "bench_bandwidth: out of memory\n");
        return 1;
    }
    for (size_t i = 0; i < n; i++)
        buf[i] = i;
    struct part parts[256];
    pthread_t th[256];
    double best[PAT_COUNT] = {0};
    uint64_t check = 0;
    /* patterns interleaved pass by pass, so that a noisy spell does not hit only one */
    for (int pass = 0; pass < PASSES; pass++) {
        for (int pat = 0; pat < PAT_COUNT; pat++) {
            double t0 = now_s();
            for (int t = 0; t < n_threads; t++) {
                size_t a = n * (size_t)t / (size_t)n_threads / 32 * 32;
                size_t b = t + 1 == n_threads ? n : n * (size_t)(t + 1) / (size_t)n_threads / 32 * 32;
                parts[t] = (struct part){buf + a, b - a, (enum pattern)pat, 0};
                pthread_create(&th[t], NULL, reader, &parts[t]);
            }
            for (int t = 0; t < n_threads; t++) {
                pthread_join(th[t], NULL);
                check += parts[t].sum;
            }
            double gbs = (double)(n * sizeof *buf) / (now_s() - t0) / 1e9;
            if (verbose) fprintf(stderr, "pass %d %-9s %.2f GB/s\n", pass, pattern_names[pat], gbs);
            best[pat] = gbs > best[pat] ? gbs : best[pat];
        }
    }
    double all = 0;
    for (int pat = 0; pat < PAT_COUNT; pat++)
        all = best[pat] > all ? best[pat] : all;
    printf("%.2f\n", all);
    fprintf(stderr, "bandwidth: %d threads, %ld MiB, best of %d passes, GB/s:", n_threads, mib,
            PASSES);
    for (int pat = 0; pat < PAT_COUNT; pat++)
        fprintf(stderr, " %s %.2f", pattern_names[pat], best[pat]);
    fprintf(stderr, " (checksum %llu)\n", (unsigned long long)(check & 0xff));
    free(buf);
    return 0;
}
