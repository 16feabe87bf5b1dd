/*
 * pool.h - a persistent pool of worker threads that run one function at a time, split by
 * thread index (ggml's ith/nth rule): moeinf_pool_run(pool, fn, arg) calls fn(arg, ith, nth)
 * once for every ith in [0, nth) - the caller itself runs ith 0 - and returns when all are
 * done. Work is never split by a scheduler, so results depend only on how fn divides work,
 * and a fn that gives every output element to exactly one ith is bit-identical for any nth.
 *
 * DESIGN: workers wait for a new generation number. They spin briefly (consecutive ops of a
 * forward pass follow each other within microseconds) and then sleep on a condition
 * variable, so that idle workers never starve other threads of a small machine. The caller
 * waits for the done counter the same way.
 */
#ifndef MOEINF_POOL_H
#define MOEINF_POOL_H

#include "moeinf.h"

struct moeinf_pool;

typedef void (*moeinf_pool_fn)(void *arg, int ith, int nth);

/* n_threads >= 1 (the caller counts as one). */
enum moeinf_status moeinf_pool_init(int n_threads, struct moeinf_pool **out,
                                    struct moeinf_error *err);
void moeinf_pool_free(struct moeinf_pool *pool);
int moeinf_pool_size(const struct moeinf_pool *pool);
void moeinf_pool_run(struct moeinf_pool *pool, moeinf_pool_fn fn, void *arg);

/* The CPUs this process may run on (its affinity mask), at least 1. */
int moeinf_cpu_count(void);

#endif
