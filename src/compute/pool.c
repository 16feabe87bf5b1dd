/* pool.c - persistent worker threads; see pool.h for the design. */
#include "compute/pool.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#if defined(__x86_64__) || defined(__i386__)
#    include <immintrin.h>
#endif

#include "base/status.h"

/* Spin iterations before sleeping: long enough to bridge the gap between two ops of one
 * token, short enough (tens of microseconds) not to burn a shared core while idle. */
#define SPIN_ITERS 20000

struct worker {
    struct moeinf_pool *pool;
    pthread_t thread;
    int ith;
};

struct moeinf_pool {
    int n_threads;
    struct worker *workers; /* n_threads - 1 of them */
    pthread_mutex_t mutex;
    pthread_cond_t wake;      /* workers wait here for a new generation */
    pthread_cond_t done_cond; /* the caller waits here for n_done */
    atomic_uint generation;
    atomic_int n_done;
    atomic_bool quit;
    int n_sleeping_workers;   /* under mutex */
    bool caller_sleeping;     /* under mutex */
    moeinf_pool_fn fn;        /* written before generation is bumped (release) */
    void *arg;
};

/* One step of a spin-wait. Every 256th step yields the CPU, so that with more threads than
 * cores (-t 7 on a 2-core machine) the thread being waited for gets to run. */
static inline void cpu_relax(int i) {
    if ((i & 255) == 255) {
        sched_yield();
        return;
    }
#if defined(__x86_64__) || defined(__i386__)
    _mm_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}

static void *worker_main(void *p) {
    struct worker *w = p;
    struct moeinf_pool *pool = w->pool;
    unsigned seen = 0;
    for (;;) {
        unsigned gen = atomic_load_explicit(&pool->generation, memory_order_acquire);
        for (int i = 0; gen == seen && i < SPIN_ITERS; i++) {
            cpu_relax(i);
            gen = atomic_load_explicit(&pool->generation, memory_order_acquire);
        }
        if (gen == seen) {
            pthread_mutex_lock(&pool->mutex);
            pool->n_sleeping_workers++;
            while ((gen = atomic_load_explicit(&pool->generation, memory_order_acquire)) == seen &&
                   !atomic_load(&pool->quit)) {
                pthread_cond_wait(&pool->wake, &pool->mutex);
            }
            pool->n_sleeping_workers--;
            pthread_mutex_unlock(&pool->mutex);
        }
        if (atomic_load(&pool->quit)) return NULL;
        seen = gen;
        pool->fn(pool->arg, w->ith, pool->n_threads);
        if (atomic_fetch_add_explicit(&pool->n_done, 1, memory_order_acq_rel) + 1 ==
            pool->n_threads - 1) {
            pthread_mutex_lock(&pool->mutex);
            if (pool->caller_sleeping) pthread_cond_signal(&pool->done_cond);
            pthread_mutex_unlock(&pool->mutex);
        }
    }
}

enum moeinf_status moeinf_pool_init(int n_threads, struct moeinf_pool **out,
                                    struct moeinf_error *err) {
    if (n_threads < 1 || n_threads > 1024) {
        return moeinf_fail(err, MOEINF_ERR_ARG, "thread count %d is out of range [1, 1024]",
                           n_threads);
    }
    struct moeinf_pool *pool = calloc(1, sizeof *pool);
    if (!pool) return moeinf_fail(err, MOEINF_ERR_NOMEM, "out of memory for the thread pool");
    pool->n_threads = n_threads;
    pthread_mutex_init(&pool->mutex, NULL);
    pthread_cond_init(&pool->wake, NULL);
    pthread_cond_init(&pool->done_cond, NULL);
    atomic_init(&pool->generation, 0);
    atomic_init(&pool->n_done, 0);
    atomic_init(&pool->quit, false);
    if (n_threads > 1) {
        pool->workers = calloc((size_t)n_threads - 1, sizeof *pool->workers);
        if (!pool->workers) {
            moeinf_pool_free(pool);
            return moeinf_fail(err, MOEINF_ERR_NOMEM, "out of memory for the thread pool");
        }
    }
    for (int i = 0; i < n_threads - 1; i++) {
        struct worker *w = &pool->workers[i];
        w->pool = pool;
        w->ith = i + 1;
        int e = pthread_create(&w->thread, NULL, worker_main, w);
        if (e != 0) {
            pool->n_threads = i + 1; /* free joins only the started ones */
            moeinf_pool_free(pool);
            char eb[64];
            return moeinf_fail(err, MOEINF_ERR_NOMEM, "cannot start worker thread %d: %s", i + 1,
                               moeinf_strerror(e, eb, sizeof eb));
        }
    }
    *out = pool;
    return MOEINF_OK;
}

void moeinf_pool_free(struct moeinf_pool *pool) {
    if (!pool) return;
    if (pool->workers) {
        pthread_mutex_lock(&pool->mutex);
        atomic_store(&pool->quit, true);
        pthread_cond_broadcast(&pool->wake);
        pthread_mutex_unlock(&pool->mutex);
        for (int i = 0; i < pool->n_threads - 1; i++) pthread_join(pool->workers[i].thread, NULL);
        free(pool->workers);
    }
    pthread_cond_destroy(&pool->wake);
    pthread_cond_destroy(&pool->done_cond);
    pthread_mutex_destroy(&pool->mutex);
    free(pool);
}

int moeinf_pool_size(const struct moeinf_pool *pool) {
    return pool->n_threads;
}

void moeinf_pool_run(struct moeinf_pool *pool, moeinf_pool_fn fn, void *arg) {
    int n_workers = pool->n_threads - 1;
    if (n_workers == 0) {
        fn(arg, 0, 1);
        return;
    }
    pool->fn = fn;
    pool->arg = arg;
    atomic_store_explicit(&pool->n_done, 0, memory_order_relaxed);
    pthread_mutex_lock(&pool->mutex);
    atomic_fetch_add_explicit(&pool->generation, 1, memory_order_release);
    if (pool->n_sleeping_workers > 0) pthread_cond_broadcast(&pool->wake);
    pthread_mutex_unlock(&pool->mutex);

    fn(arg, 0, pool->n_threads);

    for (int i = 0; i < SPIN_ITERS; i++) {
        if (atomic_load_explicit(&pool->n_done, memory_order_acquire) == n_workers) return;
        cpu_relax(i);
    }
    pthread_mutex_lock(&pool->mutex);
    pool->caller_sleeping = true;
    while (atomic_load_explicit(&pool->n_done, memory_order_acquire) != n_workers) {
        pthread_cond_wait(&pool->done_cond, &pool->mutex);
    }
    pool->caller_sleeping = false;
    pthread_mutex_unlock(&pool->mutex);
}

int moeinf_cpu_count(void) {
#ifdef CPU_COUNT
    cpu_set_t set;
    CPU_ZERO(&set);
    if (sched_getaffinity(0, sizeof set, &set) == 0) {
        int n = CPU_COUNT(&set);
        if (n > 0) return n;
    }
#endif
    return 1;
}
