/*
 * fit_probe.c - `moeinf fit`'s short probes of this machine (fit.h), under 2 s together, and
 * their cache in the cache folder (fit-probe.txt: one line per thread count, disk and weight
 * type, with the unix time of the probes):
 *   memory   the decode kernel (vec_dot_rows) of the model's expert type over a 256 MiB
 *            weight matrix, each thread its own rows, ROWS_PASSES passes, the median (on a shared
 *            machine the rate a run gets, not its best moment): where a core computes those
 *            blocks slower than its memory streams them (AMD Zen 1 with 4-bit blocks: about 60 %
 *            of the stream, docs/PERFORMANCE.md) decode runs at this rate, which a plain
 *            stream overstates; a scalar stream understated it there (10-15 GB/s against 24 by
 *            AVX2, docs/OFFLOAD.md). A type without a rows kernel falls back to a plain
 *            stream-read of the buffer (one sequential read and 8 interleaved streams, the
 *            better median; bench/bandwidth.c has the full set of patterns)
 *   disk     O_DIRECT reads of one expert part (a third of a slot, the expert loader's read)
 *            into huge pages (as the slots) at random 4 KiB-aligned offsets of the model's
 *            data, 4 at a time
 *            (MOEINF_EXPERT_IO_THREADS_DEFAULT threads), for 0.5 s (bench/disk_read.c is the
 *            longer probe); from a 64 MiB temporary file beside the cache when the model file
 *            holds less data than that
 *   compute  the best kernel table's prefill tile (gemm, else vec_dot_m) of the model's expert
 *            type, 8 rows x 64 tokens of 4096 weights in cache, on every thread: 0.05 s
 *            untimed (the first 40 ms ran at about half the rate on the AMD EPYC), then the
 *            median of 9 windows of 0.1 s (5 of 0.04 s until 2026-12-06: their figure moved
 *            by a quarter from probe to probe on a shared machine). Its weights and activations
 *            lie on huge pages: on 4 KiB pages the 278 KiB of activations landed on physical
 *            pages that shared L2 sets in some processes and not in others (11-16 against
 *            21-25 G/s on the AMD EPYC, process to process), on huge pages six processes agreed
 *            within 15 %
 *   attention the float kernels attention runs (compute/attention.c) on 64 F16 rows of 128 in
 *            cache, on one thread, times the threads: q.k of 4 rows against them and their
 *            weighted sum into 4 rows; each the median of 3 windows of 15 ms
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "app/default_model.h"
#include "app/fit.h"
#include "base/file.h"
#include "base/rng.h"
#include "base/status.h"
#include "base/tensor_type.h"
#include "compute/pool.h"
#include "offload/store.h"
#include "quant/quant.h"

#define MEM_BYTES   (256u << 20)
#define DISK_MIN    (64ull << 20)
#define DISK_SECS   0.5
#define MISS_SECS   1.0 /* the misses' probe, per budget and not cached (not tuned) */
#define IO_THREADS  MOEINF_EXPERT_IO_THREADS_DEFAULT
#define MAX_THREADS 256
#define MAX_AGE_S   (7ll * 24 * 3600)

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* The median of v[0..n) (sorted in place; the upper one of an even n). */
static double median(double *v, int n) {
    for (int i = 1; i < n; i++)
        for (int j = i; j > 0 && v[j] < v[j - 1]; j--) {
            const double t = v[j];
            v[j] = v[j - 1];
            v[j - 1] = t;
        }
    return v[n / 2];
}

/* ---- memory --------------------------------------------------------------------------- */

struct mem_part {
    const uint64_t *p;
    size_t n; /* a multiple of 64 */
    int streams;
    uint64_t sum;
};

static void *mem_reader(void *arg) {
    struct mem_part *pt = arg;
    uint64_t s[8] = {0};
    const size_t q = pt->n / (size_t)pt->streams / 8 * 8;
    for (size_t i = 0; i + 8 <= q; i += 8) {
        for (int k = 0; k < pt->streams; k++) {
            const uint64_t *ps = pt->p + (size_t)k * q + i;
            s[(2 * k) & 7] += ps[0] + ps[2] + ps[4] + ps[6];
            s[(2 * k + 1) & 7] += ps[1] + ps[3] + ps[5] + ps[7];
        }
    }
    pt->sum = s[0] + s[1] + s[2] + s[3] + s[4] + s[5] + s[6] + s[7];
    return NULL;
}

static double probe_stream(int threads) {
    const size_t n = MEM_BYTES / sizeof(uint64_t);
    uint64_t *buf = malloc(MEM_BYTES);
    if (!buf) return 0;
    for (size_t i = 0; i < n; i++)
        buf[i] = i;
    struct mem_part parts[MAX_THREADS];
    pthread_t th[MAX_THREADS];
    double rate[2][3] = {{0}}; /* per pattern, per pass */
    uint64_t check = 0;
    for (int pass = 0; pass < 6; pass++) {
        const int streams = pass % 2 ? 8 : 1;
        double t0 = now_s();
        int started = 0;
        for (int t = 0; t < threads; t++) {
            size_t a = n * (size_t)t / (size_t)threads / 64 * 64;
            size_t b = t + 1 == threads ? n : n * (size_t)(t + 1) / (size_t)threads / 64 * 64;
            parts[t] = (struct mem_part){buf + a, b - a, streams, 0};
            if (pthread_create(&th[t], NULL, mem_reader, &parts[t]) != 0) break;
            started++;
        }
        for (int t = 0; t < started; t++) {
            pthread_join(th[t], NULL);
            check += parts[t].sum;
        }
        double gbs = (double)MEM_BYTES / (now_s() - t0) / 1e9;
        rate[pass % 2][pass / 2] = started == threads ? gbs : 0;
    }
    free(buf);
    double best = 0;
    for (int p = 0; p < 2; p++) { /* the median pass of each pattern */
        const double *r = rate[p];
        const double lo = r[0] < r[1] ? r[0] : r[1];
        const double hi = r[0] < r[1] ? r[1] : r[0];
        const double med = r[2] < lo ? lo : r[2] > hi ? hi : r[2];
        if (med > best) best = med;
    }
    return check == 1 ? 0 : best; /* the sum is used, so the reads stay */
}

/* x: n floats in [-0.5, 0.5), seeded; rows copies of it quantized to type, wrow bytes apart
 * at w (the probes' weights: their rates do not depend on the values). */
static void random_rows(int type, float *x, int64_t n, int rows, uint8_t *w, size_t wrow) {
    uint64_t s = 7;
    for (int64_t i = 0; i < n; i++)
        x[i] = (float)(moeinf_splitmix64_unit(&s) - 0.5);
    for (int r = 0; r < rows; r++)
        moeinf_quantize_row_ref((enum moeinf_type)type, x, w + (size_t)r * wrow, n);
}

#define ROWS_N      4096 /* elements a row: a multiple of every block size */
#define ROWS_SOURCE 8    /* rows quantized; the matrix repeats them (the rate needs no more) */
/* passes over the matrix (about 20 ms each at 15 GB/s): on a shared virtual machine three
 * passes' median moved by a fifth from run to run (11-18 GB/s for one type) */
#define ROWS_PASSES 9

struct rows_part {
    moeinf_vec_dot_rows_fn rows;
    const uint8_t *w; /* this thread's first row */
    int64_t nr;
    size_t wrow;
    const void *x;
    float *y;
};

static void *rows_reader(void *arg) {
    struct rows_part *pt = arg;
    pt->rows(ROWS_N, pt->nr, pt->y, pt->w, pt->wrow, pt->x);
    return NULL;
}

/* GB/s of weight bytes the decode kernel of `type` reads on `threads` threads (the file's
 * top); 0 where the type has no rows kernel or memory runs out. */
static double probe_rows(int type, int threads) {
    const struct moeinf_kernels *k = moeinf_kernels_best();
    const struct moeinf_type_cpu *cpu = moeinf_type_cpu_get(type);
    if (!k || !cpu || !k->vec_dot_rows[type] || !k->from_float[cpu->vec_dot_type]) return 0;
    const size_t wrow = moeinf_row_bytes((enum moeinf_type)type, ROWS_N);
    const int64_t nr = (int64_t)(MEM_BYTES / wrow);
    float *x = malloc(ROWS_N * sizeof *x);
    uint8_t *src = malloc(wrow * ROWS_SOURCE);
    uint8_t *w = moeinf_huge_alloc(wrow * (size_t)nr); /* as the engine holds its weights */
    void *xq = malloc(moeinf_row_bytes(cpu->vec_dot_type, ROWS_N));
    float *y = malloc((size_t)nr * sizeof *y);
    struct rows_part parts[MAX_THREADS];
    pthread_t th[MAX_THREADS];
    double rate[ROWS_PASSES] = {0};
    if (x && src && w && xq && y) {
        random_rows(type, x, ROWS_N, ROWS_SOURCE, src, wrow);
        for (int64_t r = 0; r < nr; r++)
            memcpy(w + (size_t)r * wrow, src + (size_t)(r % ROWS_SOURCE) * wrow, wrow);
        k->from_float[cpu->vec_dot_type](x, xq, ROWS_N);
        for (int pass = 0; pass < ROWS_PASSES; pass++) {
            const double t0 = now_s();
            int started = 0;
            for (int t = 0; t < threads; t++) {
                const int64_t a = nr * t / threads;
                const int64_t b = nr * (t + 1) / threads;
                parts[t] = (struct rows_part){
                    k->vec_dot_rows[type], w + (size_t)a * wrow, b - a, wrow, xq, y + a};
                if (pthread_create(&th[t], NULL, rows_reader, &parts[t]) != 0) break;
                started++;
            }
            for (int t = 0; t < started; t++)
                pthread_join(th[t], NULL);
            if (started == threads) rate[pass] = (double)wrow * (double)nr / (now_s() - t0) / 1e9;
        }
    }
    free(x);
    free(src);
    moeinf_huge_free(w, wrow * (size_t)nr);
    free(xq);
    free(y);
    return median(rate, ROWS_PASSES);
}

static double probe_memory(int type, int threads) {
    const double r = probe_rows(type, threads);
    return r > 0 ? r : probe_stream(threads);
}

/* ---- disk ----------------------------------------------------------------------------- */

/* A read the expert loader makes: one part's 4 KiB-aligned window. */
struct read_window {
    uint64_t off;
    uint64_t len;
};

/* One reader's reads: `block` bytes at 4 KiB-aligned offsets drawn uniformly from
 * [lo, lo + span - block], or, with windows, one of the n_win windows drawn by the weights
 * whose running sums are cdf (block then the largest window). */
struct disk_job {
    uint64_t lo;
    uint64_t span;
    uint64_t block;
    const struct read_window *win;
    const double *cdf;
    size_t n_win;
    double deadline;
    uint64_t seed;
    _Atomic uint64_t *bytes;
    int fd;
    bool failed;
};

static struct read_window next_read(const struct disk_job *j, uint64_t *s) {
    if (!j->win) {
        const uint64_t slots = (j->span - j->block) / 4096 + 1;
        return (struct read_window){j->lo + moeinf_splitmix64(s) % slots * 4096, j->block};
    }
    const double u = moeinf_splitmix64_unit(s) * j->cdf[j->n_win - 1];
    size_t lo = 0;
    size_t hi = j->n_win - 1;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (j->cdf[mid] <= u) {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    return j->win[lo];
}

static void *disk_reader(void *arg) {
    struct disk_job *j = arg;
    /* on huge pages, as the expert cache's slots are (offload/fast_tier_ram.c): a read into
     * 4 KiB pages reaches the disk as more, smaller requests, which a virtual disk here served
     * at a third of the rate (docs/OFFLOAD.md) */
    void *buf = moeinf_huge_alloc((size_t)j->block);
    if (!buf) {
        j->failed = true;
        return NULL;
    }
    uint64_t s = j->seed;
    int n = 0;
    while (n < 2 || now_s() < j->deadline) {
        const struct read_window w = next_read(j, &s);
        ssize_t r = pread(j->fd, buf, (size_t)w.len, (off_t)w.off);
        if (r <= 0) {
            j->failed = true;
            break;
        }
        atomic_fetch_add(j->bytes, (uint64_t)r);
        n++;
    }
    moeinf_huge_free(buf, (size_t)j->block);
    return NULL;
}

/* GB/s of O_DIRECT reads of path as `how` draws them (its lo, span, block and windows), by
 * IO_THREADS readers for `secs`; 0 when O_DIRECT or a read fails. */
static double disk_rate(const char *path, const struct disk_job *how, double secs) {
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_DIRECT);
    if (fd < 0) return 0;
    _Atomic uint64_t bytes = 0;
    struct disk_job jobs[IO_THREADS];
    pthread_t th[IO_THREADS];
    double t0 = now_s();
    int started = 0;
    for (int t = 0; t < IO_THREADS; t++) {
        jobs[t] = *how;
        jobs[t].deadline = t0 + secs;
        jobs[t].seed = 0x9e37u + (uint64_t)t;
        jobs[t].bytes = &bytes;
        jobs[t].fd = fd;
        jobs[t].failed = false;
        if (pthread_create(&th[t], NULL, disk_reader, &jobs[t]) != 0) break;
        started++;
    }
    bool failed = started == 0;
    for (int t = 0; t < started; t++) {
        pthread_join(th[t], NULL);
        failed |= jobs[t].failed;
    }
    double dt = now_s() - t0;
    close(fd);
    return failed ? 0 : (double)atomic_load(&bytes) / dt / 1e9;
}

/* Uniform reads of `block` bytes from [lo, lo + span) of path for DISK_SECS. */
static double disk_rate_uniform(const char *path, uint64_t lo, uint64_t span, uint64_t block) {
    const struct disk_job how = {.lo = lo, .span = span, .block = block};
    return disk_rate(path, &how, DISK_SECS);
}

double cli_fit_probe_misses(const char *path, const struct cli_fit_model *m, const uint64_t *misses,
                            uint64_t *footprint) {
    *footprint = 0;
    if (!m->layout || m->header_only) return 0;
    const size_t n_ids = (size_t)m->n_moe_layers * (size_t)m->n_expert;
    size_t n = 0;
    for (size_t i = 0; i < n_ids; i++)
        n += misses[i] > 0 ? MOEINF_EXPERT_PARTS : 0;
    if (n == 0) return 0;
    struct read_window *win = malloc(n * sizeof *win);
    double *cdf = malloc(n * sizeof *cdf);
    if (!win || !cdf) {
        free(win);
        free(cdf);
        return 0;
    }
    size_t k = 0;
    uint64_t largest = 0;
    double sum = 0;
    for (size_t i = 0; i < n_ids; i++) {
        if (!misses[i]) continue;
        const struct moeinf_store_layer *l = &m->layout[i / (size_t)m->n_expert];
        const int e = (int)(i % (size_t)m->n_expert);
        for (int p = 0; p < MOEINF_EXPERT_PARTS; p++) {
            uint64_t len = 0;
            const uint64_t lo = moeinf_store_part_window(l, p, e, &len);
            win[k] = (struct read_window){lo, len};
            *footprint += len;
            if (len > largest) largest = len;
            sum += (double)misses[i];
            cdf[k++] = sum;
        }
    }
    const struct disk_job how = {.block = largest, .win = win, .cdf = cdf, .n_win = n};
    const double r = disk_rate(path, &how, MISS_SECS);
    free(win);
    free(cdf);
    return r;
}

/* A temporary file of DISK_MIN bytes in dir, written and synced (so that its pages are on the
 * disk, and O_DIRECT reads them from there); its path in buf, or false. */
static bool temp_file(const char *dir, char *buf, size_t size) {
    snprintf(buf, size, "%s/fit-probe-XXXXXX", dir);
    int fd = mkstemp(buf);
    if (fd < 0) return false;
    const size_t chunk = 4u << 20;
    uint8_t *data = malloc(chunk);
    bool ok = data != NULL;
    uint64_t s = 1;
    for (size_t i = 0; ok && i < chunk / 8; i++) {
        uint64_t v = moeinf_splitmix64(&s);
        memcpy(data + 8 * i, &v, 8);
    }
    for (uint64_t done = 0; ok && done < DISK_MIN; done += chunk)
        ok = write(fd, data, chunk) == (ssize_t)chunk;
    free(data);
    ok = ok && fsync(fd) == 0;
    close(fd);
    if (!ok) unlink(buf);
    return ok;
}

static double probe_disk(const char *model_path, uint64_t block, const char *dir,
                         struct cli_fit_machine *mc) {
    struct stat sb;
    block = (block + 4095) / 4096 * 4096;
    if (block < 65536) block = 65536;
    if (block > (16u << 20)) block = 16u << 20;
    if (model_path && stat(model_path, &sb) == 0 && (uint64_t)sb.st_size >= DISK_MIN) {
        uint64_t size = (uint64_t)sb.st_size / 4096 * 4096;
        double r = disk_rate_uniform(model_path, 0, size, block < size ? block : size);
        if (r > 0) {
            mc->disk_from_model = true;
            snprintf(mc->disk_note, sizeof mc->disk_note,
                     "O_DIRECT reads of %" PRIu64 " KiB, %d at a time, from the model file",
                     block >> 10, IO_THREADS);
            return r;
        }
    }
    char tmp[1200];
    if (!temp_file(dir, tmp, sizeof tmp)) return 0;
    if (block > DISK_MIN / 4) block = DISK_MIN / 4;
    double r = disk_rate_uniform(tmp, 0, DISK_MIN, block);
    unlink(tmp);
    snprintf(mc->disk_note, sizeof mc->disk_note,
             "O_DIRECT reads of %" PRIu64 " KiB, %d at a time, from a temporary file in %s",
             block >> 10, IO_THREADS, dir);
    return r;
}

/* ---- compute -------------------------------------------------------------------------- */

#define TILE_N       4096
#define TILE_ROWS    8
#define TILE_M       64
#define TILE_WARM    0.05 /* seconds untimed first: the first 40 ms ran at half the rate */
/* 9 windows of 100 ms: six probes in a row on the Intel Xeon (family 6 model 207) gave
 * 135-153 G/s, where 5 windows of 40 ms gave 98-157 alternated with them */
#define TILE_WINDOWS 9
#define TILE_SECS    0.1 /* each window's */

struct tile_job {
    const struct moeinf_kernels *k;
    int type;
    const uint8_t *w, *xa;
    size_t wrow, xrow;
    double start; /* the first window's start: the warm-up runs before it */
    long reps[TILE_WINDOWS];
    bool gemm;
};

static void *tile_worker(void *arg) {
    struct tile_job *j = arg;
    float y[TILE_ROWS * TILE_M];
    const double end = j->start + TILE_WINDOWS * TILE_SECS;
    while (now_s() < end) {
        if (j->gemm) {
            j->k->gemm[j->type](TILE_N, TILE_ROWS, TILE_M, y, TILE_ROWS, j->w, j->wrow, j->xa,
                                j->xrow);
        } else {
            for (int r = 0; r < TILE_ROWS; r++)
                j->k->vec_dot_m[j->type](TILE_N, TILE_M, y + (size_t)r * TILE_M,
                                         j->w + (size_t)r * j->wrow, j->xa, j->xrow);
        }
        const double t = now_s();
        if (t >= j->start && t < end) j->reps[(int)((t - j->start) / TILE_SECS)]++;
    }
    return NULL;
}

/* The prefill tile on every thread at once (so that the figure has the share of the CPUs a run
 * of that many threads gets now), after TILE_WARM, multiply-adds per second: the median of
 * TILE_WINDOWS windows (on a shared machine a window now and then runs at half the rate). */
static double probe_compute(int type, int threads) {
    const struct moeinf_kernels *k = moeinf_kernels_best();
    const struct moeinf_type_cpu *cpu = moeinf_type_cpu_get(type);
    if (!k || !cpu || !k->vec_dot_m[type]) return 0;
    const enum moeinf_type vt = cpu->vec_dot_type;
    const int64_t n = TILE_N;
    const size_t wrow = (size_t)moeinf_row_bytes((enum moeinf_type)type, n);
    const size_t xrow = (size_t)moeinf_row_bytes(vt, n);
    float *x = malloc((size_t)n * sizeof *x);
    uint8_t *w = moeinf_huge_alloc(wrow * TILE_ROWS);
    uint8_t *xa = moeinf_huge_alloc(xrow * TILE_M);
    struct tile_job *jobs = calloc((size_t)threads, sizeof *jobs);
    pthread_t *th = calloc((size_t)threads, sizeof *th);
    double rate = 0;
    if (x && w && xa && jobs && th && k->from_float[vt]) {
        random_rows(type, x, n, TILE_ROWS, w, wrow);
        for (int j = 0; j < TILE_M; j++)
            k->from_float[vt](x, xa + (size_t)j * xrow, n);
        const double start = now_s() + TILE_WARM;
        int started = 0;
        for (int t = 0; t < threads; t++) {
            jobs[t] = (struct tile_job){.k = k,
                                        .type = type,
                                        .w = w,
                                        .xa = xa,
                                        .wrow = wrow,
                                        .xrow = xrow,
                                        .start = start,
                                        .gemm = k->gemm[type] != NULL};
            if (pthread_create(&th[t], NULL, tile_worker, &jobs[t]) != 0) break;
            started++;
        }
        double win[TILE_WINDOWS] = {0};
        for (int t = 0; t < started; t++) {
            pthread_join(th[t], NULL);
            for (int i = 0; i < TILE_WINDOWS; i++)
                win[i] +=
                    (double)jobs[t].reps[i] * (double)(n * TILE_ROWS * TILE_M) / TILE_SECS / 1e9;
        }
        if (started == threads) rate = median(win, TILE_WINDOWS);
    }
    free(x);
    moeinf_huge_free(w, wrow * TILE_ROWS);
    moeinf_huge_free(xa, xrow * TILE_M);
    free(jobs);
    free(th);
    return rate;
}

/* The attention's kernels, q.k and the weighted sum of V, multiply-adds 1e9/s (times the
 * threads), each timed for ATTN_SECS on ATTN_ROWS F16 rows of ATTN_N in cache, as attention
 * runs them on an F16 cache. */
#define ATTN_N       128
#define ATTN_ROWS    64
#define ATTN_SECS    0.015
#define ATTN_WINDOWS 3 /* the median of them */

/* One window of ATTN_SECS of attention kernel `kind` (0 q.k, 1 the weighted sum) on one thread,
 * 1e9 multiply-adds per second: 4 rows against the ATTN_ROWS rows of h, as attention's 4-row
 * passes. f: 8 rows of ATTN_N floats (q rows or weights, then scores or outputs). */
static double attention_window(const struct moeinf_kernels *k, int kind, float *f,
                               const uint16_t *h) {
    float *rows_out[4];
    const float *rows_in[4];
    for (int r = 0; r < 4; r++) {
        rows_in[r] = f + (size_t)r * ATTN_N; /* ATTN_N >= ATTN_ROWS weights each */
        rows_out[r] = f + (size_t)(4 + r) * ATTN_N;
    }
    double t0 = now_s();
    double dt = 0;
    long reps = 0;
    while (dt < ATTN_SECS) {
        if (kind == 0)
            k->qk_f32(ATTN_N, ATTN_ROWS, 4, rows_out[0], ATTN_N, rows_in[0], ATTN_N, h, ATTN_N,
                      true, 0.125f);
        else
            k->wsum_f32(ATTN_N, ATTN_ROWS, 4, rows_out, rows_in, h, ATTN_N, true);
        reps++;
        dt = now_s() - t0;
    }
    return (double)reps * ATTN_ROWS * 4.0 * ATTN_N / dt / 1e9;
}

static void probe_attention(int threads, struct cli_fit_machine *mc) {
    const struct moeinf_kernels *k = moeinf_kernels_best();
    float *f = calloc((size_t)ATTN_N * 8, sizeof(float));
    uint16_t *h = malloc(sizeof(uint16_t) * ATTN_N * ATTN_ROWS);
    if (!k || !f || !h || !k->qk_f32 || !k->wsum_f32) {
        free(f);
        free(h);
        return;
    }
    uint64_t s = 11;
    for (int i = 0; i < ATTN_N * 4; i++)
        f[i] = (float)(moeinf_splitmix64_unit(&s) - 0.5) * 0.01f;
    for (int i = 0; i < ATTN_N * ATTN_ROWS; i++)
        h[i] = moeinf_fp32_to_fp16((float)(moeinf_splitmix64_unit(&s) - 0.5));
    for (int kind = 0; kind < 2; kind++) {
        double win[ATTN_WINDOWS];
        for (int i = 0; i < ATTN_WINDOWS; i++)
            win[i] = attention_window(k, kind, f, h) * threads;
        const double rate = median(win, ATTN_WINDOWS);
        if (kind == 0) mc->fdot_gops = rate;
        if (kind == 1) mc->wsum_gops = rate;
    }
    free(f);
    free(h);
}

/* ---- cache ---------------------------------------------------------------------------- */

bool cli_fit_cache_path(char *buf, size_t size, struct moeinf_error *err) {
    char dir[1024];
    if (!cli_cache_dir(dir, sizeof dir, err)) return false;
    snprintf(buf, size, "%s/fit-probe.txt", dir);
    return true;
}

/* Line format: "when threads dev type mem_gbps disk_gbps dot_gops from_model fdot_gops
 * wsum_gops version". A line's fields in v (as doubles: every integer field is far
 * below 2^53), false for a malformed one (or one of an older format, with fewer fields).
 * version: PROBES_VERSION, raised when a probe measures something else (2: memory is the
 * decode kernel's rate; 3: the disk reads into huge pages, the prefill tile is timed after a
 * warm-up; 5: attention's q.k and weighted sum kernels on F16 rows, in place of a conversion,
 * a dot and an axpy), so that older figures are probed again. */
#define FIELDS         11
#define PROBES_VERSION 5

static bool parse_line(const char *line, double v[FIELDS]) {
    const char *p = line;
    for (int i = 0; i < FIELDS; i++) {
        char *end = NULL;
        v[i] = strtod(p, &end);
        if (end == p) return false;
        p = end;
    }
    return *p == '\n' || *p == '\0';
}

static bool cache_find(const char *path, int threads, uint64_t dev, int type,
                       struct cli_fit_machine *mc) {
    FILE *f = fopen(path, "r");
    if (!f) return false;
    char line[512];
    bool found = false;
    const double now = (double)time(NULL);
    while (fgets(line, sizeof line, f)) {
        double v[FIELDS];
        if (!parse_line(line, v)) continue;
        if (v[1] != threads || v[2] != (double)dev || v[3] != type || !(v[4] > 0) || !(v[5] > 0) ||
            !(v[6] > 0) || !(v[8] > 0) || !(v[9] > 0) || v[10] != PROBES_VERSION ||
            now - v[0] > (double)MAX_AGE_S || v[0] > now) {
            continue;
        }
        mc->when = (int64_t)v[0];
        mc->mem_gbps = v[4];
        mc->disk_gbps = v[5];
        mc->dot_gops = v[6];
        mc->disk_from_model = v[7] != 0;
        mc->fdot_gops = v[8];
        mc->wsum_gops = v[9];
        found = true;
    }
    fclose(f);
    return found;
}

/* Rewrites the cache with this line in place of any of the same key (best effort: a cache
 * that cannot be written only means the next run probes again). */
static void cache_store(const char *path, uint64_t dev, int type,
                        const struct cli_fit_machine *mc) {
    char tmp[1200];
    snprintf(tmp, sizeof tmp, "%s.tmp%ld", path, (long)getpid());
    FILE *out = fopen(tmp, "w");
    if (!out) return;
    FILE *in = fopen(path, "r");
    char line[512];
    while (in && fgets(line, sizeof line, in)) {
        double v[FIELDS];
        if (parse_line(line, v) && !(v[1] == mc->threads && v[2] == (double)dev && v[3] == type)) {
            fputs(line, out);
        }
    }
    if (in) fclose(in);
    fprintf(out, "%lld %d %llu %d %.3f %.3f %.3f %d %.3f %.3f %d\n", (long long)mc->when,
            mc->threads, (unsigned long long)dev, type, mc->mem_gbps, mc->disk_gbps, mc->dot_gops,
            mc->disk_from_model ? 1 : 0, mc->fdot_gops, mc->wsum_gops, PROBES_VERSION);
    if (fclose(out) != 0 || rename(tmp, path) != 0) unlink(tmp);
}

enum moeinf_status cli_fit_probe(const char *model_path, uint64_t block, int threads, bool reprobe,
                                 int expert_type, struct cli_fit_machine *out,
                                 struct moeinf_error *err) {
    memset(out, 0, sizeof *out);
    if (threads < 1) threads = moeinf_cpu_count();
    if (threads < 1) threads = 1;
    if (threads > MAX_THREADS) threads = MAX_THREADS;
    out->threads = threads;
    char path[1200];
    if (!cli_fit_cache_path(path, sizeof path, err)) return err->status;
    char dir[1200];
    snprintf(dir, sizeof dir, "%s", path);
    char *slash = strrchr(dir, '/');
    if (slash) *slash = '\0';
    /* the disk the probe reads: the model's, or the cache folder's for the temporary file */
    struct stat sb;
    uint64_t dev = 0;
    const bool big = model_path && stat(model_path, &sb) == 0 && (uint64_t)sb.st_size >= DISK_MIN;
    if (big || stat(dir, &sb) == 0) dev = (uint64_t)sb.st_dev;
    if (!reprobe && cache_find(path, threads, dev, expert_type, out)) {
        out->cached = true;
        snprintf(out->disk_note, sizeof out->disk_note, "cached in %s", path);
        return MOEINF_OK;
    }
    out->mem_gbps = probe_memory(expert_type, threads);
    out->disk_gbps = probe_disk(model_path, block, dir, out);
    out->dot_gops = probe_compute(expert_type, threads);
    probe_attention(threads, out);
    out->when = (int64_t)time(NULL);
    if (!(out->mem_gbps > 0) || !(out->disk_gbps > 0) || !(out->dot_gops > 0) ||
        !(out->fdot_gops > 0) || !(out->wsum_gops > 0)) {
        return moeinf_fail(err, MOEINF_ERR_IO,
                           "the probes failed (memory %.2f GB/s, disk %.2f GB/s, compute %.2f "
                           "G/s, attention %.2f G/s): O_DIRECT refused on %s?",
                           out->mem_gbps, out->disk_gbps, out->dot_gops, out->fdot_gops, dir);
    }
    cache_store(path, dev, expert_type, out);
    return MOEINF_OK;
}
