/*
 * bandwidth.c - the memory-bandwidth limit of decode on this machine: N threads stream-read
 * a buffer much larger than the caches (each thread its own contiguous part, as the matmul
 * split does), best of several passes. Prints GB/s on stdout.
 *
 *   bench_bandwidth [-t THREADS] [-s MIB]
 */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

struct part {
    const uint64_t *p;
    size_t n;
    uint64_t sum;
};

static void *reader(void *arg) {
    struct part *pt = arg;
    /* four independent accumulators so the loop is bound by loads, not by the adds */
    uint64_t s0 = 0;
    uint64_t s1 = 0;
    uint64_t s2 = 0;
    uint64_t s3 = 0;
    for (size_t i = 0; i + 4 <= pt->n; i += 4) {
        s0 += pt->p[i];
        s1 += pt->p[i + 1];
        s2 += pt->p[i + 2];
        s3 += pt->p[i + 3];
    }
    pt->sum = s0 + s1 + s2 + s3;
    return NULL;
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

int main(int argc, char **argv) {
    int n_threads = 1;
    size_t mib = 1024;
    for (int i = 1; i + 1 < argc; i += 2) {
        char *end = NULL;
        long v = strtol(argv[i + 1], &end, 10);
        if (*end) v = -1; /* not a number: rejected below */
        if (!strcmp(argv[i], "-t")) n_threads = v < 1 || v > 256 ? 0 : (int)v;
        if (!strcmp(argv[i], "-s")) mib = v < 16 ? 0 : (size_t)v;
    }
    if (n_threads < 1 || n_threads > 256 || mib < 16) {
        fprintf(stderr, "usage: bench_bandwidth [-t THREADS] [-s MIB>=16]\n");
        return 2;
    }
    size_t n = mib * 1024 * 1024 / sizeof(uint64_t);
    uint64_t *buf = malloc(n * sizeof *buf);
    if (!buf) {
        fprintf(stderr, "bench_bandwidth: out of memory\n");
        return 1;
    }
    for (size_t i = 0; i < n; i++) buf[i] = i;
    struct part parts[256];
    pthread_t th[256];
    double best = 0;
    uint64_t check = 0;
    for (int pass = 0; pass < 5; pass++) {
        double t0 = now_s();
        for (int t = 0; t < n_threads; t++) {
            size_t a = n * (size_t)t / (size_t)n_threads;
            size_t b = n * (size_t)(t + 1) / (size_t)n_threads;
            parts[t] = (struct part){buf + a, b - a, 0};
            pthread_create(&th[t], NULL, reader, &parts[t]);
        }
        for (int t = 0; t < n_threads; t++) {
            pthread_join(th[t], NULL);
            check += parts[t].sum;
        }
        double gbs = (double)(n * sizeof *buf) / (now_s() - t0) / 1e9;
        best = gbs > best ? gbs : best;
    }
    printf("%.2f\n", best);
    fprintf(stderr, "bandwidth: %d threads, %zu MiB, best of 5: %.2f GB/s (checksum %llu)\n",
            n_threads, mib, best, (unsigned long long)(check & 0xff));
    free(buf);
    return 0;
}
