/*
 * test_bench_probe.c - the disk probe of the benchmarks' "limit no cache can beat"
 * (bench/lib/disk_probe.sh over bench_disk_read) reads as the engine's expert loader does:
 * one expert part (a third of a slot, in 4 KiB) per read, as many reads at once as the runs'
 * --io-threads (one for 0), which bench_disk_read's own line confirms; bench/offload.sh and
 * bench/trace_replay.sh measure the disk through it. A probe of one read at a time (what they
 * did before) under-stated the disk, and one run beat its "limit".
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "moeinf.h"
#include "test.h"

/* bench_disk_read beside the moeinf binary under test (both in the build folder). */
static bool probe_bin(char *buf, size_t size) {
    const char *bin = getenv("MOEINF_BIN"); /* NOLINT(concurrency-mt-unsafe): main thread */
    if (!bin) return false;
    snprintf(buf, size, "%s", bin);
    char *slash = strrchr(buf, '/');
    if (!slash) return false;
    snprintf(slash + 1, size - (size_t)(slash + 1 - buf), "bench_disk_read");
    return access(buf, X_OK) == 0;
}

/* Runs `body` in bash after sourcing bench/lib/disk_probe.sh; stdout into out, stderr into
 * err. Returns the exit code. */
static int probe_shell(const char *body, char *out, size_t out_size, char *err, size_t err_size) {
    char lib[1024];
    char bin[1024];
    test_src_path("bench/lib/disk_probe.sh", lib, sizeof lib);
    if (!probe_bin(bin, sizeof bin)) return -2;
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "BENCH_DISK_READ='%s' bash -c '. \"%s\"; %s'", bin, lib, body);
    return test_run_shell("bench-probe", cmd, out, out_size, err, err_size);
}

static void test_probe_reads_parts_at_the_engines_depth(void) {
    char file[512];
    char name[64];
    snprintf(name, sizeof name, "bench-probe-%d.bin", (int)getpid());
    test_tmp_path(name, file, sizeof file);
    int fd = open(file, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    CHECK(fd >= 0);
    if (fd < 0) return;
    CHECK(ftruncate(fd, 1 << 20) == 0);
    close(fd);
    /* a slot of three 64 KiB windows and a little more: parts of 68 KiB (17 pages) */
    const long slot = 3 * 65536 + 100;
    const long part = 69632;
    const int depths[][2] = {{3, 3}, {1, 1}, {0, 1}}; /* --io-threads, reads at once */
    for (size_t i = 0; i < sizeof depths / sizeof depths[0]; i++) {
        char body[1024];
        snprintf(body, sizeof body, "disk_probe \"%s\" %ld %d 0.2", file, slot, depths[i][0]);
        char out[512];
        char err[512];
        int rc = probe_shell(body, out, sizeof out, err, sizeof err);
        if (rc == -2) {
            test_skip("bench_disk_read is not beside MOEINF_BIN (run under ctest)");
            break;
        }
        CHECK_MSG(rc == 0, "%s: %s", body, err);
        /* "GB/s depth part_bytes" */
        char *end = NULL;
        double gbps = strtod(out, &end);
        long depth = strtol(end, &end, 10);
        long bytes = strtol(end, &end, 10);
        CHECK_MSG(gbps > 0 && (*end == '\n' || *end == '\0'), "probe printed '%s'", out);
        CHECK_EQ_INT(depth, depths[i][1]);
        CHECK_EQ_INT(bytes, part);
        /* what bench_disk_read itself says it did */
        char did[128];
        snprintf(did, sizeof did, "reads of %ld bytes, %d in flight", part, depths[i][1]);
        CHECK_STR_CONTAINS(err, did);
    }
    remove(file);
}

/* The scripts' --io-threads, read from their extra options; the engine's default without. */
static void test_io_threads_of_the_runs(void) {
    const struct {
        const char *args;
        int want;
    } cases[] = {
        {"", MOEINF_EXPERT_IO_THREADS_DEFAULT},
        {"--policy lru --prefetch 2", MOEINF_EXPERT_IO_THREADS_DEFAULT},
        {"--io-threads 2 --lookahead 1", 2},
        {"--io-threads=7", 7},
        {"--io-threads 0", 0},
    };

    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char body[256];
        snprintf(body, sizeof body, "disk_probe_io_threads %s", cases[i].args);
        char out[64];
        char err[512];
        int rc = probe_shell(body, out, sizeof out, err, sizeof err);
        if (rc == -2) {
            test_skip("bench_disk_read is not beside MOEINF_BIN (run under ctest)");
            return;
        }
        CHECK_MSG(rc == 0 && strtol(out, NULL, 10) == cases[i].want, "'%s': '%s', want %d",
                  cases[i].args, out, cases[i].want);
    }
}

/* Both scripts that print the limit measure the disk through the probe, not bench_disk_read
 * at its own settings. */
static void test_scripts_use_the_probe(void) {
    const char *scripts[] = {"bench/offload.sh", "bench/trace_replay.sh"};
    for (size_t i = 0; i < 2; i++) {
        char path[1024];
        test_src_path(scripts[i], path, sizeof path);
        static char text[65536];
        test_read_text(path, text, sizeof text);
        CHECK_MSG(text[0] != '\0', "%s is missing", path);
        CHECK_STR_CONTAINS(text, ". bench/lib/disk_probe.sh");
        CHECK_STR_CONTAINS(text, "disk_probe \"$model\" \"$slot\" \"$io_threads\"");
        CHECK_MSG(strstr(text, "bench_disk_read \"") == NULL,
                  "%s runs bench_disk_read itself, not through disk_probe", scripts[i]);
    }
}

int main(void) {
    RUN(test_probe_reads_parts_at_the_engines_depth);
    RUN(test_io_threads_of_the_runs);
    RUN(test_scripts_use_the_probe);
    return test_report();
}
