// ctest-labels: threads
/*
 * test_offload_io.c - how the expert cache reads the model file, seen from outside the engine:
 *   - the page cache: after an offloaded decode with expert_io nocache (what direct falls back
 *     to where the file system refuses O_DIRECT) or direct, the pages of the file's routed
 *     experts are no more resident than before the decode (mincore over a mapping of the
 *     file); with cached they are (the control: where it fails, this file system cannot show
 *     residency, and the case is a skip, not a pass); the CLI takes --expert-io nocache;
 *   - stall time: with the reads on the compute thread (expert_io_threads 0) every read happens
 *     while the forward pass waits for it, so the stall is at least the read time (the waits
 *     contain the reads), at most the decode's wall time (the decode contains the waits), and
 *     close to the read time.
 */
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "gguf/gguf.h"
#include "moeinf.h"
#include "test.h"

#define PAGE     4096u
#define N_LAYER  2
#define N_EXPERT 16
#define TOP_K    4
#define N_PROMPT 32 /* tokens of the longest prompt */
#define N_PARTS  3

static char model_path[512];

/* A generated model whose expert parts (Q8_0, 34816 bytes) straddle 4 KiB pages. */
static const char *model_file(void) {
    if (model_path[0]) return model_path;
    char name[64];
    snprintf(name, sizeof name, "offload-io-%d.gguf", (int)getpid());
    test_tmp_path(name, model_path, sizeof model_path);
    struct moeinf_gen_params gp = moeinf_gen_params_default();
    gp.n_layer = N_LAYER;
    gp.n_expert = N_EXPERT;
    gp.n_expert_used = TOP_K;
    gp.n_embd = 128;
    gp.n_ff = 256;
    gp.n_head = 4;
    gp.n_head_kv = 2;
    gp.type = 8; /* Q8_0 */
    gp.seed = 5;
    gp.n_threads = 1;
    struct moeinf_error err = {0};
    enum moeinf_status st = moeinf_gen_model(&gp, model_path, &err);
    CHECK_MSG(st == MOEINF_OK, "%s", err.msg);
    if (st != MOEINF_OK) model_path[0] = '\0';
    return model_path[0] ? model_path : NULL;
}

/* The byte ranges of the routed experts' tensors (gate, up, down of every layer). */
struct extents {
    uint64_t off[N_LAYER * N_PARTS], end[N_LAYER * N_PARTS];
    int n;
};

static bool expert_extents(const char *path, struct extents *x) {
    struct moeinf_gguf *g = NULL;
    struct moeinf_error err = {0};
    CHECK_MSG(moeinf_gguf_open(path, &g, &err) == MOEINF_OK, "%s", err.msg);
    if (!g) return false;
    const char *parts[N_PARTS] = {"ffn_gate_exps", "ffn_up_exps", "ffn_down_exps"};
    x->n = 0;
    for (int il = 0; il < N_LAYER; il++) {
        for (int p = 0; p < N_PARTS; p++) {
            char name[64];
            snprintf(name, sizeof name, "blk.%d.%s.weight", il, parts[p]);
            const struct moeinf_gguf_tensor *t = moeinf_gguf_find_tensor(g, name);
            CHECK_MSG(t != NULL, "no tensor %s", name);
            if (!t) continue;
            x->off[x->n] = t->offset;
            x->end[x->n] = t->offset + t->n_bytes;
            x->n++;
        }
    }
    moeinf_gguf_free(g);
    return x->n == N_LAYER * N_PARTS;
}

/* Pages of the experts' tensors that are in the page cache now (mincore over a mapping of the
 * file: mincore needs one, and reports the page cache's pages of a shared file mapping whether
 * or not this mapping touched them); *total gets the pages of those tensors. -1 on error. */
static long resident_pages(const char *path, const struct extents *x, long *total) {
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return -1;
    off_t size = lseek(fd, 0, SEEK_END);
    void *map = size > 0 ? mmap(NULL, (size_t)size, PROT_READ, MAP_SHARED, fd, 0) : MAP_FAILED;
    close(fd);
    if (map == MAP_FAILED) return -1;
    long n = 0;
    *total = 0;
    for (int i = 0; i < x->n; i++) {
        uint64_t lo = x->off[i] & ~(uint64_t)(PAGE - 1);
        uint64_t hi = (x->end[i] + PAGE - 1) & ~(uint64_t)(PAGE - 1);
        size_t pages = (size_t)((hi - lo) / PAGE);
        unsigned char *vec = malloc(pages);
        if (!vec || mincore((uint8_t *)map + lo, (size_t)(hi - lo), vec) != 0) {
            free(vec);
            munmap(map, (size_t)size);
            return -1;
        }
        for (size_t k = 0; k < pages; k++)
            n += vec[k] & 1;
        *total += (long)pages;
        free(vec);
    }
    munmap(map, (size_t)size);
    return n;
}

/* Writes the file's dirty pages back and asks the kernel to drop all of its pages. */
static void drop_file(const char *path) {
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return;
    (void)fdatasync(fd);
    (void)posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
    close(fd);
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

struct io_run {
    enum moeinf_expert_io io;
    int io_threads;
    int slots;          /* cache size in experts */
    int n_prompt;       /* the request: a prompt (<= N_PROMPT tokens) */
    int n_decode;       /* then greedy tokens */
    long before, after; /* resident expert pages after context init, after the decode */
    long total;         /* pages of the experts' tensors */
    double wall;        /* seconds inside moeinf_decode */
    bool direct;        /* the store read with O_DIRECT */
    char note[200];     /* how the store read */
    struct moeinf_expert_stats stats;
    bool ok;
};

/* One request through an expert cache, the file's pages dropped before the model loads. */
static void run_io(const char *path, const struct extents *x, struct io_run *r) {
    r->ok = false;
    drop_file(path);
    struct moeinf_error err = {0};
    struct moeinf_model_params mp = moeinf_model_params_default();
    mp.offload_experts = true;
    struct moeinf_model *model = NULL;
    struct moeinf_context *ctx = NULL;
    float *logits = NULL;
    enum moeinf_status st = moeinf_model_load(path, &mp, &model, &err);
    CHECK_MSG(st == MOEINF_OK, "%s", err.msg);
    if (st != MOEINF_OK) return;
    struct moeinf_context_params cp = moeinf_context_params_default();
    cp.n_ctx = 64;
    cp.n_threads = 1;
    cp.expert_cache.kind = MOEINF_EXPERT_CACHE_PERCENT;
    cp.expert_cache.percent = 100.0 * r->slots / (N_LAYER * N_EXPERT);
    cp.expert_io = r->io;
    cp.expert_io_threads = r->io_threads;
    cp.expert_prefetch = 0;
    cp.expert_lookahead = 0;
    st = moeinf_context_init(model, &cp, &ctx, &err);
    CHECK_MSG(st == MOEINF_OK, "%s", err.msg);
    if (st != MOEINF_OK) goto done;
    struct moeinf_expert_cache_info info;
    CHECK(moeinf_context_expert_cache(ctx, &info, &err) == MOEINF_OK);
    r->direct = info.direct_io;
    snprintf(r->note, sizeof r->note, "%s", info.io_note ? info.io_note : "");
    CHECK_EQ_INT(info.slots, r->slots);
    r->before = resident_pages(path, x, &r->total);
    const int n_vocab = moeinf_model_n_vocab(model);
    logits = malloc((size_t)n_vocab * sizeof *logits);
    if (!logits) goto done;
    int32_t ids[N_PROMPT];
    for (int i = 0; i < r->n_prompt; i++)
        ids[i] = (int32_t)((7 + 131 * i) % n_vocab);
    double t0 = now_s();
    st = moeinf_decode(ctx, ids, r->n_prompt, logits, false, &err);
    r->wall = now_s() - t0;
    CHECK_MSG(st == MOEINF_OK, "%s", err.msg);
    for (int g = 0; g < r->n_decode && st == MOEINF_OK; g++) {
        int32_t id = 0;
        for (int v = 1; v < n_vocab; v++)
            if (logits[v] > logits[id]) id = v;
        t0 = now_s();
        st = moeinf_decode(ctx, &id, 1, logits, false, &err);
        r->wall += now_s() - t0;
        CHECK_MSG(st == MOEINF_OK, "%s", err.msg);
    }
    if (st != MOEINF_OK) goto done;
    /* the stats first: with I/O threads they wait for every read in flight */
    CHECK(moeinf_context_expert_stats(ctx, -1, &r->stats, &err) == MOEINF_OK);
    r->after = resident_pages(path, x, &r->total);
    r->ok = r->before >= 0 && r->after >= 0;
done:
    free(logits);
    moeinf_context_free(ctx);
    moeinf_model_free(model);
}

/*
 * nocache (the fallback of direct) and direct leave no page of the experts in the page cache.
 * Before each run the file is written back and dropped; the pages resident once the context
 * is made are the baseline, which the decode's reads may not raise, and after the decode at
 * most the first and last page of each expert tensor may be resident (pages it may share with
 * a neighbour that something else keeps; none here). Before the fix a buffered read kept the
 * first and last pages of each part and what the kernel's readahead pulled in around it, and
 * the load's own readahead (of the metadata through the mapping, of the resident weights by
 * pread) landed expert pages after the load had dropped the file: here 68-145 and about 400
 * of the 822 expert pages.
 */
static void test_reads_leave_no_expert_pages_cached(void) {
    const char *path = model_file();
    struct extents x;
    if (!path || !expert_extents(path, &x)) return;

    /* The control: cached reads must show up as resident, else this file system cannot
     * show residency (tmpfs keeps every page whatever the drop; some FUSE file systems
     * report nothing). */
    struct io_run c = {.io = MOEINF_EXPERT_IO_CACHED,
                       .io_threads = 2,
                       .slots = N_LAYER * N_EXPERT,
                       .n_prompt = 1,
                       .n_decode = 1};
    run_io(path, &x, &c);
    if (!c.ok) return;
    long read_pages = (long)(c.stats.expert_bytes / PAGE);
    fprintf(stderr,
            "cached: %ld of %ld expert pages resident before the decode, %ld after; "
            "%ld pages' worth read\n",
            c.before, c.total, c.after, read_pages);
    CHECK(c.stats.misses > 0);
    if (c.before > c.total / 2) {
        test_skip("the file's pages stay in memory after a drop (tmpfs?): the page cache's "
                  "residency cannot be shown here");
        return;
    }
    if (c.after - c.before < read_pages) {
        test_skip("mincore does not show the pages that cached reads brought in: the page "
                  "cache's residency cannot be shown on this file system");
        return;
    }

    /* at most the first and last page of each expert tensor, which it may share with a
     * neighbouring tensor that something else keeps (none here, where the load reads the
     * resident weights by pread and drops them) */
    const long edges = 2L * x.n;

    const enum moeinf_expert_io modes[] = {MOEINF_EXPERT_IO_NOCACHE, MOEINF_EXPERT_IO_DIRECT};

    const char *names[] = {"nocache", "direct"};
    for (int m = 0; m < 2; m++) {
        for (int threads = 0; threads <= 2; threads += 2) {
            struct io_run r = {.io = modes[m],
                               .io_threads = threads,
                               .slots = N_LAYER * N_EXPERT,
                               .n_prompt = 1,
                               .n_decode = 1};
            run_io(path, &x, &r);
            if (!r.ok) continue;
            fprintf(stderr,
                    "%s, %d I/O threads (%s): %ld of %ld expert pages resident before the "
                    "decode, %ld after; %llu misses, %llu bytes read\n",
                    names[m], threads, r.note, r.before, r.total, r.after,
                    (unsigned long long)r.stats.misses, (unsigned long long)r.stats.bytes_read);
            if (modes[m] == MOEINF_EXPERT_IO_NOCACHE) CHECK(!r.direct);
            CHECK(r.stats.expert_bytes / PAGE >= (uint64_t)read_pages); /* the same reads */
            CHECK_MSG(r.after <= r.before,
                      "%s, %d I/O threads: the decode left %ld expert pages in the page cache "
                      "(%ld before it, %ld after, of %ld)",
                      names[m], threads, r.after - r.before, r.before, r.after, r.total);
            CHECK_MSG(r.after <= edges,
                      "%s, %d I/O threads: %ld expert pages in the page cache after the decode "
                      "(%ld before it) of %ld",
                      names[m], threads, r.after, r.before, r.total);
        }
    }
}

/*
 * Stall time with reads on the compute thread (no I/O threads): a miss is read inside the
 * forward pass's wait for it, so stall >= read time exactly (nested intervals of one
 * monotonic clock), stall <= the decode's wall time (likewise), and stall - read is the
 * wait's own bookkeeping (a lock, a state change), small next to a read.
 */
static void test_stall_is_the_read_time_without_io_threads(void) {
    const char *path = model_file();
    struct extents x;
    if (!path || !expert_extents(path, &x)) return;
    /* the fewest slots: many misses, each read on the compute thread */
    struct io_run r = {.io = MOEINF_EXPERT_IO_DIRECT,
                       .io_threads = 0,
                       .slots = TOP_K,
                       .n_prompt = N_PROMPT,
                       .n_decode = 8};
    run_io(path, &x, &r);
    if (!r.ok) return;
    const double stall = r.stats.stall_seconds;
    const double read = r.stats.read_seconds;
    fprintf(stderr,
            "no I/O threads (%s): %llu misses, %llu bytes read in %.6f s, stall %.6f s "
            "(%.3f of the read time), decode %.6f s\n",
            r.note, (unsigned long long)r.stats.misses, (unsigned long long)r.stats.bytes_read,
            read, stall, read > 0 ? stall / read : 0.0, r.wall);
    CHECK(r.stats.misses > 0);
    CHECK(r.stats.bytes_read > 0);
    CHECK(read > 0);
    CHECK_MSG(stall >= read, "stall %.9f s < read time %.9f s", stall, read);
    CHECK_MSG(stall <= r.wall, "stall %.9f s > the decode's %.9f s", stall, r.wall);
    /* The rest is bookkeeping: measured at 1.002-1.004x of the read time in the dev build,
     * 1.002-1.05x under ASan and 1.006-1.12x under TSan (ext4 and tmpfs; reads of 2-250 ms
     * in all). 1.5x, and 5 ms for a preemption outside a read, leave room for a loaded
     * machine; a stall counted twice (2x) still fails where the reads take more than 10 ms
     * (and the bound above where they are most of the decode). */
    CHECK_MSG(stall <= 1.5 * read + 5e-3, "stall %.6f s against %.6f s of reads", stall, read);
}

/* The CLI takes --expert-io nocache and says how it reads. */
static void test_cli_nocache(void) {
    const char *path = model_file();
    if (!path) return;
    char args[1024];
    snprintf(args, sizeof args,
             "run -m '%s' --expert-cache 50%% --expert-io nocache -p 'Once' -n 2 -t 1", path);
    char out[4096];
    char err[4096];
    int rc = test_run_moeinf("offload-io-cli", args, out, sizeof out, err, sizeof err);
    if (rc == -1) {
        test_skip("MOEINF_BIN is not set (run under ctest)");
        return;
    }
    CHECK_MSG(rc == 0, "%s: %s", args, err);
    CHECK_STR_CONTAINS(err, "buffered reads without readahead, dropped from the page cache");
}

int main(void) {
    RUN(test_reads_leave_no_expert_pages_cached);
    RUN(test_cli_nocache);
    RUN(test_stall_is_the_read_time_without_io_threads);
    if (model_path[0]) unlink(model_path);
    return test_report();
}
