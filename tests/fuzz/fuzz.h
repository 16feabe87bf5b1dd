/*
 * fuzz.h - what every tests/fuzz/fuzz_<target>.c provides and may use.
 *
 * A target defines LLVMFuzzerTestOneInput. Built with the `fuzz` preset (clang, MOEINF_FUZZ)
 * it is a libFuzzer binary; in every other build it is linked with replay.c, whose main runs
 * it once over each file of the corpus folders named on the command line, so that ctest
 * (label fuzz) replays tests/fuzz/corpus/<target>/ under the dev and asan presets.
 *
 * A target checks its invariants with FUZZ_REQUIRE, which aborts: libFuzzer records the input
 * as a crash, the replay driver fails the test.
 */
#ifndef MOEINF_FUZZ_H
#define MOEINF_FUZZ_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

/* libFuzzer's entry point. */
// NOLINTNEXTLINE(readability-identifier-naming): the name is fixed by libFuzzer
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define FUZZ_REQUIRE(cond)                                                                         \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "%s:%d: invariant failed: %s\n", __FILE__, __LINE__, #cond);           \
            abort();                                                                               \
        }                                                                                          \
    } while (0)

/* The folder of the shared test data: $MOEINF_SHARED, else the build's default. */
static inline const char *fuzz_shared_dir(void) {
    const char *dir = getenv("MOEINF_SHARED"); // NOLINT(concurrency-mt-unsafe): no setenv
    return dir && dir[0] ? dir : MOEINF_SHARED_DEFAULT;
}

#endif
