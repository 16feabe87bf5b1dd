/*
 * kernels_wanted.h - which kernel table a kernel test checks. ctest runs each test labelled
 * "kernels" once as it is (the best table this CPU runs) and once more per table with
 * MOEINF_KERNELS=scalar, avx2 and avx512 in the environment (CMakeLists.txt). When this CPU
 * lacks the named table, or the named table is its best (which the plain run checks), the
 * whole test is skipped with a message: the exit status TEST_EXIT_SKIP, which ctest counts as
 * skipped (SKIP_RETURN_CODE), not passed or failed.
 */
#ifndef MOEINF_TEST_KERNELS_WANTED_H
#define MOEINF_TEST_KERNELS_WANTED_H

#include "quant/quant.h"
#include "test.h"

#define TEST_EXIT_SKIP 77

/* Sets *out to the table MOEINF_KERNELS names (the best one when unset) and returns 0; or
 * leaves *out NULL and returns the exit status for main: TEST_EXIT_SKIP when this CPU does
 * not run that table, 1 when the value names no table. */
static inline int test_kernels_wanted(const struct moeinf_kernels **out) {
    const char *name = getenv("MOEINF_KERNELS"); /* NOLINT(concurrency-mt-unsafe): main thread */
    const struct moeinf_kernels *k = NULL;
    struct moeinf_error err = {0};
    *out = NULL;
    if (moeinf_kernels_choose(name, &k, &err) != MOEINF_OK) {
        fprintf(stderr, "%s\n", err.msg);
        return 1;
    }
    if (name && *name && strcmp(k->name, name) != 0) {
        printf("SKIP: MOEINF_KERNELS=%s: this CPU does not run the %s table (its best: %s)\n",
               name, name, moeinf_kernels_best()->name);
        return TEST_EXIT_SKIP;
    }
    if (name && *name && k == moeinf_kernels_best()) {
        printf("SKIP: MOEINF_KERNELS=%s: the %s table is this CPU's best, which the run without "
               "MOEINF_KERNELS checks\n",
               name, name);
        return TEST_EXIT_SKIP;
    }
    *out = k;
    return 0;
}

#endif
