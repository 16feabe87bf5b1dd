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

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

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

/*
 * The vocabulary file a tokenizer target loads instead of its own: $MOEINF_FUZZ_VOCAB (the
 * ctest entries <target>:shared name a real one from ../shared there), or NULL when unset.
 * When the file is missing: exit status 77 (ctest: skipped, as in tests/test.h) if the
 * shared folder $MOEINF_SHARED is absent too; otherwise, or under MOEINF_REQUIRE_SHARED=1
 * (.ci/run), a failure. _Exit, not exit: libFuzzer reports an exit() as a crash.
 */
static inline const char *fuzz_vocab_path(void) {
    // NOLINTBEGIN(concurrency-mt-unsafe): read once, before any thread
    const char *path = getenv("MOEINF_FUZZ_VOCAB");
    const char *shared = getenv("MOEINF_SHARED");
    const char *req = getenv("MOEINF_REQUIRE_SHARED");
    // NOLINTEND(concurrency-mt-unsafe)
    struct stat st;
    if (!path || !path[0] || stat(path, &st) == 0) return path && path[0] ? path : NULL;
    bool shared_here = shared && stat(shared, &st) == 0 && S_ISDIR(st.st_mode);
    if (shared_here || (req && strcmp(req, "1") == 0)) {
        fprintf(stderr, "MOEINF_FUZZ_VOCAB=%s is missing (MOEINF_SHARED=%s)\n", path,
                shared ? shared : "(unset)");
        abort();
    }
    printf("SKIP (missing data): ../shared is absent (MOEINF_SHARED=%s); needed: %s\n",
           shared ? shared : "(unset)", path);
    fflush(stdout);
    _Exit(77);
}

#endif
