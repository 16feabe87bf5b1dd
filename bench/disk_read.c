/*
 * disk_read.c - the disk's read bandwidth as the expert store sees it: O_DIRECT reads of
 * `size` bytes (4 KiB-aligned windows) at random 4 KiB-aligned offsets of FILE, one at a
 * time, as many as fit in `seconds`. Prints GB/s (1e9 bytes/s). The file should not be in
 * the page cache (O_DIRECT bypasses it where the file system allows; otherwise the figure
 * is the page cache's and says so).
 *
 *   bench_disk_read FILE [size_bytes=6291456] [seconds=3]
 */
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "base/rng.h"

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: bench_disk_read FILE [size_bytes] [seconds]\n");
        return 2;
    }
    size_t size = argc > 2 ? (size_t)strtoull(argv[2], NULL, 10) : (size_t)6 << 20;
    double seconds = argc > 3 ? strtod(argv[3], NULL) : 3.0;
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
    void *buf = aligned_alloc(4096, size);
    if (!buf) return 1;
    uint64_t span = ((uint64_t)st.st_size - size) / 4096;
    uint64_t state = 12345;
    uint64_t bytes = 0;
    double t0 = now_s();
    double t = t0;
    while (t - t0 < seconds) {
        uint64_t off = (moeinf_splitmix64(&state) % span) * 4096;
        ssize_t r = pread(fd, buf, size, (off_t)off);
        if (r <= 0) {
            perror("pread");
            return 1;
        }
        bytes += (uint64_t)r;
        t = now_s();
    }
    printf("%.3f\n", (double)bytes / (t - t0) / 1e9);
    fprintf(stderr, "%s reads of %zu bytes: %.3f GB/s\n", direct ? "O_DIRECT" : "buffered", size,
            (double)bytes / (t - t0) / 1e9);
    free(buf);
    close(fd);
    return 0;
}
