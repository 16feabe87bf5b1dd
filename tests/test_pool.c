// ctest-labels: threads
/* test_pool.c - the worker pool runs every thread index exactly once per run, for many
 * consecutive runs (the spin and the sleep paths both), and frees cleanly. */
#include <stdatomic.h>
#include <unistd.h>

#include "compute/pool.h"
#include "test.h"

#define MAX_T 8

struct counts {
    atomic_int calls[MAX_T];
    atomic_int bad_nth;
    int expect_nth;
    long sums[MAX_T]; /* each ith writes only its own slot */
};

static void count_fn(void *arg, int ith, int nth) {
    struct counts *c = arg;
    if (nth != c->expect_nth) atomic_fetch_add(&c->bad_nth, 1);
    atomic_fetch_add(&c->calls[ith], 1);
    long s = 0;
    for (int i = ith; i < 1000; i += nth) s += i;
    c->sums[ith] += s;
}

static void check_pool(int n_threads, int n_runs, int sleep_every) {
    struct moeinf_pool *pool = NULL;
    struct moeinf_error err;
    CHECK_EQ_INT(moeinf_pool_init(n_threads, &pool, &err), MOEINF_OK);
    if (!pool) return;
    CHECK_EQ_INT(moeinf_pool_size(pool), n_threads);
    struct counts c;
    memset(&c, 0, sizeof c);
    c.expect_nth = n_threads;
    for (int r = 0; r < n_runs; r++) {
        moeinf_pool_run(pool, count_fn, &c);
        if (sleep_every && r % sleep_every == 0) usleep(2000); /* let workers fall asleep */
    }
    long total = 0;
    for (int i = 0; i < n_threads; i++) {
        CHECK_EQ_INT(atomic_load(&c.calls[i]), n_runs);
        total += c.sums[i];
    }
    CHECK_EQ_INT(total, (long)n_runs * 999 * 1000 / 2);
    CHECK_EQ_INT(atomic_load(&c.bad_nth), 0);
    moeinf_pool_free(pool);
}

static void test_pool_sizes(void) {
    int sizes[] = {1, 2, 3, 7};
    for (int i = 0; i < 4; i++) check_pool(sizes[i], 500, 0);
}

static void test_pool_sleep_wake(void) {
    check_pool(3, 40, 1);
}

static void test_pool_rejects_bad_size(void) {
    struct moeinf_pool *pool = NULL;
    struct moeinf_error err;
    CHECK_EQ_INT(moeinf_pool_init(0, &pool, &err), MOEINF_ERR_ARG);
    CHECK(pool == NULL);
    CHECK(moeinf_cpu_count() >= 1);
    moeinf_pool_free(NULL);
}

int main(void) {
    RUN(test_pool_sizes);
    RUN(test_pool_sleep_wake);
    RUN(test_pool_rejects_bad_size);
    return test_report();
}
