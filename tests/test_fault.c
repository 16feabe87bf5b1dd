// ctest-labels: fault
/*
 * test_fault.c - fault injection, as SQLite's malloc and I/O error tests do: the N-th
 * allocation, or the N-th read of the model file, is made to fail, for N = 1, 2, ... over model
 * load (its allocations and its reads), context init (with and without an expert cache, whose
 * init makes the tier: fast tier, store, loader threads) and an offloaded decode (its expert
 * reads). Each failure must come back as a named one-line error (MOEINF_ERR_NOMEM for an
 * allocation or a thread, MOEINF_ERR_IO for a read), with nothing leaked (LeakSanitizer, in the
 * asan preset) and no crash; a context whose decode failed must stay usable: reset, it decodes
 * the same logits as a context that never failed. The decode also must allocate nothing.
 *
 * The hooks are the linker's: this test alone is linked with -Wl,--wrap for the allocation
 * functions, pthread_create and pread (CMakeLists.txt), so every call the library's objects
 * make to them comes here first; the library itself has no hook and no global. An armed
 * counter fails the call whose number it reaches (as if the allocator or the disk gave up)
 * and only that one. Threads: the loader's I/O threads read, so the counters are atomic.
 * Calls that libc makes internally (fopen's buffer) are not seen, so not failed.
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "moeinf.h"
#include "test.h"

/* ---- the wrapped calls -------------------------------------------------------------------- */

enum fault_kind {
    FAULT_ALLOC,
    FAULT_READ,
    FAULT_KINDS
};

static _Atomic long fault_calls[FAULT_KINDS]; /* calls of the kind since armed */
static _Atomic long fault_at[FAULT_KINDS];    /* the call number that fails; 0: none */
static _Atomic long fault_failed[FAULT_KINDS];

static void fault_arm(enum fault_kind k, long n) {
    atomic_store(&fault_calls[k], 0);
    atomic_store(&fault_failed[k], 0);
    atomic_store(&fault_at[k], n);
}

static void fault_disarm(void) {
    for (int k = 0; k < FAULT_KINDS; k++)
        atomic_store(&fault_at[k], 0);
}

/* True when this call is the one to fail. Calls are counted only while armed. */
static bool fault_now(enum fault_kind k) {
    long at = atomic_load(&fault_at[k]);
    if (at == 0) return false;
    long n = atomic_fetch_add(&fault_calls[k], 1) + 1;
    if (n != at) return false;
    atomic_fetch_add(&fault_failed[k], 1);
    return true;
}

// NOLINTBEGIN(bugprone-reserved-identifier,readability-identifier-naming): the linker's names
/* Declarations for the linker's names (-Wl,--wrap=f: calls to f go to __wrap_f, and __real_f
 * is the original); the prototypes are the C library's own. */
void *__real_malloc(size_t size);
void *__real_calloc(size_t n, size_t size);
void *__real_realloc(void *p, size_t size);
char *__real_strdup(const char *s);
void *__real_aligned_alloc(size_t align, size_t size);
int __real_posix_memalign(void **p, size_t align, size_t size);
void *__real_mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off);
int __real_pthread_create(pthread_t *t, const pthread_attr_t *a, void *(*fn)(void *), void *arg);
ssize_t __real_pread(int fd, void *buf, size_t n, off_t off);
void *__wrap_malloc(size_t size);
void *__wrap_calloc(size_t n, size_t size);
void *__wrap_realloc(void *p, size_t size);
char *__wrap_strdup(const char *s);
void *__wrap_aligned_alloc(size_t align, size_t size);
int __wrap_posix_memalign(void **p, size_t align, size_t size);
void *__wrap_mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off);
int __wrap_pthread_create(pthread_t *t, const pthread_attr_t *a, void *(*fn)(void *), void *arg);
ssize_t __wrap_pread(int fd, void *buf, size_t n, off_t off);

void *__wrap_malloc(size_t size) {
    if (fault_now(FAULT_ALLOC)) return NULL;
    return __real_malloc(size);
}

void *__wrap_calloc(size_t n, size_t size) {
    if (fault_now(FAULT_ALLOC)) return NULL;
    return __real_calloc(n, size);
}

void *__wrap_realloc(void *p, size_t size) {
    if (fault_now(FAULT_ALLOC)) return NULL;
    return __real_realloc(p, size);
}

char *__wrap_strdup(const char *s) {
    if (fault_now(FAULT_ALLOC)) return NULL;
    return __real_strdup(s);
}

void *__wrap_aligned_alloc(size_t align, size_t size) {
    if (fault_now(FAULT_ALLOC)) return NULL;
    return __real_aligned_alloc(align, size);
}

int __wrap_posix_memalign(void **p, size_t align, size_t size) {
    if (fault_now(FAULT_ALLOC)) return ENOMEM;
    return __real_posix_memalign(p, align, size);
}

/* Anonymous mappings are allocations (huge-page memory); a file's mapping is not. */
void *__wrap_mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off) {
    if ((flags & MAP_ANONYMOUS) && fault_now(FAULT_ALLOC)) {
        errno = ENOMEM;
        return MAP_FAILED;
    }
    return __real_mmap(addr, len, prot, flags, fd, off);
}

/* A thread the system will not start (RLIMIT_NPROC) is a resource like memory. */
int __wrap_pthread_create(pthread_t *t, const pthread_attr_t *a, void *(*fn)(void *), void *arg) {
    if (fault_now(FAULT_ALLOC)) return EAGAIN;
    return __real_pthread_create(t, a, fn, arg);
}

ssize_t __wrap_pread(int fd, void *buf, size_t n, off_t off) {
    if (fault_now(FAULT_READ)) {
        errno = EIO;
        return -1;
    }
    return __real_pread(fd, buf, n, off);
}

// NOLINTEND(bugprone-reserved-identifier,readability-identifier-naming)

/* ---- the walks ----------------------------------------------------------------------------- */

/* The N to try of a walk over `total` calls: every one up to 300, then about 150 spread
 * evenly over the rest (the early calls are the most varied: headers, tables, first layers;
 * the later ones repeat per layer or per tensor), and the last one. */
static long next_n(long n, long total) {
    if (n < 300 || n >= total) return n + 1;
    long step = (total - 300) / 150 + 1;
    return n + step < total ? n + step : total;
}

static char model_path[512];

static bool gen_model(void) {
    char name[64];
    snprintf(name, sizeof name, "fault-%d.gguf", (int)getpid());
    test_tmp_path(name, model_path, sizeof model_path);
    struct moeinf_gen_params p = moeinf_gen_params_default();
    p.arch = "qwen2moe"; /* a shared expert and q/k/v biases: more tensors to bind */
    p.n_layer = 3;
    p.n_expert = 8;
    p.n_expert_used = 2;
    p.n_expert_shared = 1;
    p.n_embd = 64;
    p.n_ff = 64;
    p.n_head = 4;
    p.n_head_kv = 2;
    p.n_threads = 1;
    struct moeinf_error err = {0};
    CHECK_MSG(moeinf_gen_model(&p, model_path, &err) == MOEINF_OK, "%s", err.msg);
    return err.status == MOEINF_OK;
}

/* A failed call's error: the status expected, one line naming something. */
static void check_error(const char *what, long n, enum moeinf_status st, enum moeinf_status want,
                        const struct moeinf_error *err) {
    CHECK_MSG(st == want, "%s, call %ld failed: status %d (%s), expected %d", what, n, (int)st,
              err->msg, (int)want);
    CHECK_MSG(err->msg[0] != '\0' && strchr(err->msg, '\n') == NULL, "%s, call %ld: message '%s'",
              what, n, err->msg);
}

static struct moeinf_model_params model_params(bool offload) {
    struct moeinf_model_params mp = moeinf_model_params_default();
    mp.offload_experts = offload;
    mp.load_mode = MOEINF_LOAD_READ; /* the load mode that allocates (MAP only maps) */
    return mp;
}

/* Loads the model with the N-th allocation failing, for every N up to the load's total. */
static void walk_model_load(bool offload) {
    struct moeinf_model_params mp = model_params(offload);
    struct moeinf_model *m = NULL;
    struct moeinf_error err = {0};
    fault_arm(FAULT_ALLOC, -1); /* count only */
    CHECK_MSG(moeinf_model_load(model_path, &mp, &m, &err) == MOEINF_OK, "%s", err.msg);
    const long total = atomic_load(&fault_calls[FAULT_ALLOC]);
    fault_disarm();
    moeinf_model_free(m);
    CHECK(total > 10);
    long tried = 0;
    for (long n = 1; n <= total; n = next_n(n, total), tried++) {
        m = NULL;
        memset(&err, 0, sizeof err);
        fault_arm(FAULT_ALLOC, n);
        enum moeinf_status st = moeinf_model_load(model_path, &mp, &m, &err);
        fault_disarm();
        CHECK_EQ_INT(atomic_load(&fault_failed[FAULT_ALLOC]), 1);
        check_error(offload ? "model load (offload)" : "model load", n, st, MOEINF_ERR_NOMEM, &err);
        CHECK(m == NULL);
        moeinf_model_free(m);
    }
    fprintf(stderr, "  model load%s: %ld allocations, %ld failed one at a time\n",
            offload ? " (offload)" : "", total, tried);
}

/* Loads the model (read into memory, or its resident part read with offload) with the N-th
 * read of the file failing: MOEINF_ERR_IO naming the file. */
static void walk_model_reads(bool offload) {
    struct moeinf_model_params mp = model_params(offload);
    struct moeinf_model *m = NULL;
    struct moeinf_error err = {0};
    fault_arm(FAULT_READ, -1);
    CHECK_MSG(moeinf_model_load(model_path, &mp, &m, &err) == MOEINF_OK, "%s", err.msg);
    const long total = atomic_load(&fault_calls[FAULT_READ]);
    fault_disarm();
    moeinf_model_free(m);
    CHECK(total >= 1);
    for (long n = 1; n <= total; n = next_n(n, total)) {
        m = NULL;
        memset(&err, 0, sizeof err);
        fault_arm(FAULT_READ, n);
        enum moeinf_status st = moeinf_model_load(model_path, &mp, &m, &err);
        fault_disarm();
        check_error(offload ? "model read (offload)" : "model read", n, st, MOEINF_ERR_IO, &err);
        CHECK_MSG(strstr(err.msg, model_path) != NULL, "read %ld: '%s'", n, err.msg);
        CHECK(m == NULL);
    }
    fprintf(stderr, "  model load%s: %ld reads, each failed once\n", offload ? " (offload)" : "",
            total);
}

static struct moeinf_context_params context_params(bool cache) {
    struct moeinf_context_params cp = moeinf_context_params_default();
    cp.n_ctx = 32;
    cp.n_batch = 8;
    cp.n_threads = 2;
    if (cache) {
        cp.expert_cache.kind = MOEINF_EXPERT_CACHE_PERCENT;
        cp.expert_cache.percent = 50;
        cp.expert_io = MOEINF_EXPERT_IO_CACHED;
        cp.expert_io_threads = 2;
        cp.expert_prefetch = 2;
        cp.expert_lookahead = 1;
    }
    return cp;
}

/* Makes a context with the N-th allocation failing, for every N; the model stays usable. */
static void walk_context_init(bool cache) {
    struct moeinf_model_params mp = model_params(cache);
    struct moeinf_model *m = NULL;
    struct moeinf_error err = {0};
    CHECK_MSG(moeinf_model_load(model_path, &mp, &m, &err) == MOEINF_OK, "%s", err.msg);
    if (!m) return;
    struct moeinf_context_params cp = context_params(cache);
    struct moeinf_context *ctx = NULL;
    fault_arm(FAULT_ALLOC, -1);
    CHECK_MSG(moeinf_context_init(m, &cp, &ctx, &err) == MOEINF_OK, "%s", err.msg);
    const long total = atomic_load(&fault_calls[FAULT_ALLOC]);
    fault_disarm();
    moeinf_context_free(ctx);
    CHECK(total > 10);
    for (long n = 1; n <= total; n = next_n(n, total)) {
        ctx = NULL;
        memset(&err, 0, sizeof err);
        fault_arm(FAULT_ALLOC, n);
        enum moeinf_status st = moeinf_context_init(m, &cp, &ctx, &err);
        fault_disarm();
        check_error(cache ? "context init (expert cache)" : "context init", n, st, MOEINF_ERR_NOMEM,
                    &err);
        CHECK(ctx == NULL);
    }
    /* the model is untouched: a context made after all that works */
    CHECK_MSG(moeinf_context_init(m, &cp, &ctx, &err) == MOEINF_OK, "%s", err.msg);
    const int32_t ids[3] = {1, 2, 3};
    CHECK(ctx && moeinf_decode(ctx, ids, 3, NULL, false, &err) == MOEINF_OK);
    moeinf_context_free(ctx);
    moeinf_model_free(m);
    fprintf(stderr, "  context init%s: %ld allocations, each failed once\n",
            cache ? " (expert cache)" : "", total);
}

#define N_PROMPT 12
#define N_GEN    6

/* A prompt and greedy steps; every position's logits into out (n_vocab each). Returns the
 * first failing status. */
static enum moeinf_status generate(struct moeinf_context *ctx, int n_vocab, float *out,
                                   struct moeinf_error *err) {
    int32_t ids[N_PROMPT];
    for (int i = 0; i < N_PROMPT; i++)
        ids[i] = (int32_t)(1 + (i * 37) % (n_vocab - 1));
    enum moeinf_status st = moeinf_decode(ctx, ids, N_PROMPT, out, true, err);
    for (int s = 0; s < N_GEN && st == MOEINF_OK; s++) {
        const float *last = out + (size_t)(N_PROMPT - 1 + s) * n_vocab;
        int32_t best = 0;
        for (int v = 1; v < n_vocab; v++)
            if (last[v] > last[best]) best = v;
        st = moeinf_decode(ctx, &best, 1, out + (size_t)(N_PROMPT + s) * n_vocab, false, err);
    }
    return st;
}

/* An offloaded generation with the N-th expert read failing, in a new context (a cold cache:
 * every round reads what the reference run read), and no allocation at all while decoding:
 * a named I/O error, unless the read was a prefetch that no step waited for; then the same
 * context, reset, decodes the reference logits. */
static void walk_expert_reads(int io_threads) {
    struct moeinf_model_params mp = model_params(true);
    struct moeinf_model *m = NULL;
    struct moeinf_error err = {0};
    CHECK_MSG(moeinf_model_load(model_path, &mp, &m, &err) == MOEINF_OK, "%s", err.msg);
    if (!m) return;
    const int n_vocab = moeinf_model_n_vocab(m);
    const size_t bytes = (size_t)(N_PROMPT + N_GEN) * (size_t)n_vocab * sizeof(float);
    float *want = malloc(bytes);
    float *got = malloc(bytes);
    struct moeinf_context_params cp = context_params(true);
    cp.expert_io_threads = io_threads;
    if (io_threads == 0) cp.expert_prefetch = cp.expert_lookahead = 0;
    struct moeinf_context *ctx = NULL;
    CHECK_MSG(moeinf_context_init(m, &cp, &ctx, &err) == MOEINF_OK, "%s", err.msg);
    if (!ctx || !want || !got) goto done;
    fault_arm(FAULT_READ, -1);
    fault_arm(FAULT_ALLOC, -1);
    CHECK_MSG(generate(ctx, n_vocab, want, &err) == MOEINF_OK, "%s", err.msg);
    const long total = atomic_load(&fault_calls[FAULT_READ]);
    CHECK_EQ_INT(atomic_load(&fault_calls[FAULT_ALLOC]), 0); /* decode allocates nothing */
    fault_disarm();
    moeinf_context_free(ctx);
    ctx = NULL;
    CHECK(total > 10);
    long seen = 0;
    for (long n = 1; n <= total; n = next_n(n, total)) {
        CHECK_MSG(moeinf_context_init(m, &cp, &ctx, &err) == MOEINF_OK, "%s", err.msg);
        if (!ctx) break;
        memset(&err, 0, sizeof err);
        fault_arm(FAULT_READ, n);
        enum moeinf_status st = generate(ctx, n_vocab, got, &err);
        /* reads still in flight finish before the counters are read */
        moeinf_context_expert_stats_reset(ctx);
        const bool failed = atomic_load(&fault_failed[FAULT_READ]) > 0;
        fault_disarm();
        if (st != MOEINF_OK) {
            check_error("offloaded decode", n, st, MOEINF_ERR_IO, &err);
            seen++;
        }
        CHECK_MSG(!(st != MOEINF_OK && !failed), "read %ld: decode failed with no read failed", n);
        /* without I/O threads every read is a demand read: its failure is the decode's */
        if (io_threads == 0) CHECK_MSG(failed == (st != MOEINF_OK), "read %ld failed unseen", n);
        moeinf_context_reset(ctx);
        memset(&err, 0, sizeof err);
        st = generate(ctx, n_vocab, got, &err);
        CHECK_MSG(st == MOEINF_OK, "after read %ld failed: %s", n, err.msg);
        CHECK_MSG(st != MOEINF_OK || !memcmp(got, want, bytes),
                  "after read %ld failed, the logits differ", n);
        moeinf_context_free(ctx);
        ctx = NULL;
    }
    CHECK(seen > 0);
    fprintf(stderr,
            "  offloaded decode, %d I/O threads: %ld reads, each failed once; %ld failed the "
            "decode\n",
            io_threads, total, seen);
done:
    free(want);
    free(got);
    moeinf_context_free(ctx);
    moeinf_model_free(m);
}

static void test_model_load(void) {
    walk_model_load(false);
    walk_model_load(true);
    walk_model_reads(false);
    walk_model_reads(true);
}

static void test_context_init(void) {
    walk_context_init(false);
    walk_context_init(true);
}

static void test_expert_reads(void) {
    walk_expert_reads(0);
    walk_expert_reads(2);
}

int main(void) {
    if (!gen_model()) return test_report();
    RUN(test_model_load);
    RUN(test_context_init);
    RUN(test_expert_reads);
    remove(model_path);
    return test_report();
}
