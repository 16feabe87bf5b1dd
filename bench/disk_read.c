/*
 * disk_read.c - the disk's read bandwidth as the expert store sees it: O_DIRECT reads of
 * `size` bytes (4 KiB-aligned windows) at random 4 KiB-aligned offsets of FILE, as many as
 * fit in `seconds`. Prints GB/s (1e9 bytes/s). The file should not be in the page cache
 * (O_DIRECT bypasses it where the file system allows; otherwise the figure is the page
 * cache's and says so).
 *
 *   bench_disk_read FILE [size_bytes=6291456] [seconds=3] [depth=4] [pread|uring] [huge|4k]
 *                   [rate_MB_s=0]
 *
 * depth reads in flight: `pread` runs depth threads, each reading one window at a time (what
 * the expert loader's I/O threads do: the default depth is the engine's default number of
 * them, MOEINF_EXPERT_IO_THREADS_DEFAULT; each reads one part of an expert, a third of a
 * slot, at a time, which is how bench/lib/disk_probe.sh calls this); `uring` (built when
 * liburing is found) keeps depth reads queued on one io_uring from one thread. Comparing the
 * two at the same depth says whether io_uring would read experts faster than pread threads on
 * this disk. The reads land in buffers on huge pages (`huge`, the default), as the expert
 * cache's slots are (base/file.h's moeinf_huge_alloc), or on 4 KiB pages (`4k`): a virtual
 * disk can serve the two at different rates, because a read into 4 KiB pages reaches it as
 * more, smaller requests (docs/OFFLOAD.md). The line on stderr says what was read: the read
 * size, how many at once and the pages.
 *
 * A rate above 0 (MB/s, 1e6 bytes; pread only) paces the reads to that rate instead of as
 * fast as possible, each thread its share: bench/io_tax.sh runs it beside a resident decode
 * to measure what reading from the disk at an offloaded run's rate costs the computation.
 */
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#if defined(MOEINF_HAVE_LIBURING)
#    include <liburing.h>
#endif

#include "base/file.h"
#include "base/rng.h"
#include "moeinf.h"

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

struct job {
    int fd;
    size_t size;
    bool huge; /* buffers on huge pages, else on 4 KiB pages */
    uint64_t span; /* 4 KiB windows a read may start at */
    double t0, seconds;
    double pace; /* seconds between one thread's reads; 0: as fast as possible */
    _Atomic uint64_t bytes;
    _Atomic int failed;
};

struct reader {
    struct job *job;
    uint64_t seed;
};

static void *buffer_alloc(const struct job *j) {
    return j->huge ? moeinf_huge_alloc(j->size) : aligned_alloc(4096, j->size);
}

static void buffer_free(const struct job *j, void *buf) {
    if (j->huge) {
        moeinf_huge_free(buf, j->size);
    } else {
        free(buf);
    }
}

static void *read_loop(void *arg) {
    struct reader *r = arg;
    struct job *j = r->job;
    void *buf = buffer_alloc(j);
    if (!buf) {
        atomic_store(&j->failed, 1);
        return NULL;
    }
    uint64_t state = r->seed;
    double next = j->t0;
    while (now_s() - j->t0 < j->seconds) {
        if (j->pace > 0) {
            next += j->pace;
            const double ahead = next - now_s();
            if (ahead > 0) {
                struct timespec ts = {(time_t)ahead, (long)((ahead - (double)(time_t)ahead) * 1e9)};
                nanosleep(&ts, NULL);
            }
        }
        uint64_t off = (moeinf_splitmix64(&state) % j->span) * 4096;
        ssize_t got = pread(j->fd, buf, j->size, (off_t)off);
        if (got <= 0) {
            atomic_store(&j->failed, 1);
            break;
        }
        atomic_fetch_add(&j->bytes, (uint64_t)got);
    }
    buffer_free(j, buf);
    return NULL;
}

static int run_pread(struct job *j, int depth) {
    pthread_t th[64];
    struct reader rd[64];
    for (int i = 0; i < depth; i++) {
        rd[i].job = j;
        rd[i].seed = 12345 + 7919 * (uint64_t)i;
        if (pthread_create(&th[i], NULL, read_loop, &rd[i]) != 0) return 1;
    }
    for (int i = 0; i < depth; i++)
        pthread_join(th[i], NULL);
    return atomic_load(&j->failed);
}

#if defined(MOEINF_HAVE_LIBURING)
static int run_uring(struct job *j, int depth) {
    struct io_uring ring;
    if (io_uring_queue_init((unsigned)depth, &ring, 0) != 0) return 1;
    void *bufs[64];
    for (int i = 0; i < depth; i++) {
        bufs[i] = buffer_alloc(j);
        if (!bufs[i]) return 1;
    }
    uint64_t state = 12345;
    for (int i = 0; i < depth; i++) {
        struct io_uring_sqe *sqe = io_uring_get_sqe(&ring);
        uint64_t off = (moeinf_splitmix64(&state) % j->span) * 4096;
        io_uring_prep_read(sqe, j->fd, bufs[i], (unsigned)j->size, off);
        io_uring_sqe_set_data(sqe, bufs[i]);
    }
    io_uring_submit(&ring);
    int rc = 0;
    while (now_s() - j->t0 < j->seconds) {
        struct io_uring_cqe *cqe;
        if (io_uring_wait_cqe(&ring, &cqe) != 0 || cqe->res <= 0) {
            rc = 1;
            break;
        }
        atomic_fetch_add(&j->bytes, (uint64_t)cqe->res);
        void *buf = io_uring_cqe_get_data(cqe);
        io_uring_cqe_seen(&ring, cqe);
        struct io_uring_sqe *sqe = io_uring_get_sqe(&ring);
        uint64_t off = (moeinf_splitmix64(&state) % j->span) * 4096;
        io_uring_prep_read(sqe, j->fd, buf, (unsigned)j->size, off);
        io_uring_sqe_set_data(sqe, buf);
        io_uring_submit(&ring);
    }
    io_uring_queue_exit(&ring); /* waits for nothing: the reads in flight are abandoned */
    for (int i = 0; i < depth; i++)
        buffer_free(j, bufs[i]);
    return rc;
}
#endif

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: bench_disk_read FILE [size_bytes] [seconds] [depth] [pread|uring] "
                        "[huge|4k] [rate_MB_s]\n");
        return 2;
    }
    size_t size = argc > 2 ? (size_t)strtoull(argv[2], NULL, 10) : (size_t)6 << 20;
    double seconds = argc > 3 ? strtod(argv[3], NULL) : 3.0;
    int depth = argc > 4 ? (int)strtol(argv[4], NULL, 10) : MOEINF_EXPERT_IO_THREADS_DEFAULT;
    const char *how = argc > 5 ? argv[5] : "pread";
    const char *pages = argc > 6 ? argv[6] : "huge";
    double rate = argc > 7 ? strtod(argv[7], NULL) : 0.0;
    if (depth < 1 || depth > 64 || (strcmp(how, "pread") != 0 && strcmp(how, "uring") != 0) ||
        (strcmp(pages, "huge") != 0 && strcmp(pages, "4k") != 0) || !(rate >= 0.0) ||
        (rate > 0.0 && strcmp(how, "pread") != 0)) {
        fprintf(stderr, "bench_disk_read: depth 1-64, pread or uring, huge or 4k, a rate of 0 "
                        "or more MB/s (pread only)\n");
        return 2;
    }
#if !defined(MOEINF_HAVE_LIBURING)
    if (!strcmp(how, "uring")) {
        fprintf(stderr, "bench_disk_read: built without liburing (install liburing-dev)\n");
        return 2;
    }
#endif
    size = (size + 4095) & ~(size_t)4095;
    int direct = 1;
    int fd = open(argv[1], O_RDONLY | O_DIRECT);
    if (fd < 0) {
        direct = 0;
        fd = open(argv[1], O_RDONLY);
    }
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0 || (uint64_t)st.st_size < size + 4096) {
        fprintf(stderr, "bench_disk_read: cannot read %s\n", argv[1]);
        return 1;
    }
    struct job j = {.fd = fd,
                    .size = size,
                    .huge = !strcmp(pages, "huge"),
                    .span = ((uint64_t)st.st_size - size) / 4096,
                    .seconds = seconds,
                    .pace = rate > 0.0 ? (double)size * depth / (rate * 1e6) : 0.0};
    atomic_init(&j.bytes, 0);
    atomic_init(&j.failed, 0);
    j.t0 = now_s();
    int rc = 1;
    if (!strcmp(how, "pread")) rc = run_pread(&j, depth);
#if defined(MOEINF_HAVE_LIBURING)
    else rc = run_uring(&j, depth);
#endif
    double t = now_s() - j.t0;
    close(fd);
    if (rc != 0) {
        fprintf(stderr, "bench_disk_read: a read failed\n");
        return 1;
    }
    double gbps = (double)atomic_load(&j.bytes) / t / 1e9;
    printf("%.3f\n", gbps);
    char paced[48] = "";
    if (rate > 0.0) snprintf(paced, sizeof paced, ", paced to %.0f MB/s", rate);
    fprintf(stderr, "%s %s reads of %zu bytes, %d in flight%s, into %s pages: %.3f GB/s\n",
            direct ? "O_DIRECT" : "buffered", how, size, depth, paced, j.huge ? "huge" : "4 KiB",
            gbps);
    return 0;
}
