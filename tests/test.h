/*
 * test.h - the test harness: one executable per test_*.c, each running its cases with RUN and
 * ending with the line "N passed, N failed, N skipped".
 *
 *   static void test_something(void) { CHECK(x == 1); CHECK_NEAR(y, 0.5, 1e-6); }
 *   int main(void) { RUN(test_something); return test_report(); }
 *
 * Skips. A case that cannot run says why, then returns:
 *   - test_skip(why): something about this machine or this run (a tool not installed, a CPU
 *     without the kernel table asked for, MOEINF_BIN unset outside ctest). Always a skip.
 *   - test_skip_data(what): test data that is not here. test_shared_path() calls it when the
 *     shared test data (../shared, found through $MOEINF_SHARED, which ctest sets) is absent.
 *     Its line reads "SKIP (missing data): ...". A skip on a fresh clone; a failure when
 *     MOEINF_REQUIRE_SHARED=1, which .ci/run sets: CI keeps ../shared, so no case may lose
 *     its data there unnoticed. (CI=true alone does not make it a failure: hosted CI sets
 *     that on fresh clones too.)
 *
 * Exit status (test_report); ctest runs every test with SKIP_RETURN_CODE 77:
 *   1   a case failed, a CHECK outside any case failed, or no case ran at all;
 *   77  no case passed and at least one skipped: ctest lists the binary as skipped, so a
 *       binary whose data is missing never reads "Passed" having checked nothing;
 *   0   at least one case passed and none failed. Cases that skipped are named on stdout
 *       ("skipped test_x: why") but ctest shows Passed: the cases that ran needed none of
 *       the missing data (each binary's shared-data cases were audited for that).
 */
#ifndef MOEINF_TEST_H
#define MOEINF_TEST_H

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <stdbool.h>
#include <sys/stat.h>
#include <sys/wait.h>

/* The exit status ctest reads as "skipped" (SKIP_RETURN_CODE in CMakeLists.txt). */
#define TEST_EXIT_SKIP 77

static int test_n_checks_failed;
static int test_n_passed;
static int test_n_failed;
static int test_n_skipped;
static int test_n_skipped_data;  /* of test_n_skipped: for missing data */
static int test_current_skipped; /* 0, or 1 (this machine) or 2 (missing data) */
static char test_current_why[200];

/* The skipped cases, named again by test_report. */
#define TEST_MAX_SKIPS 64

static struct {
    const char *name;
    char why[200];
} test_skips[TEST_MAX_SKIPS];

#define CHECK(cond)                                                                            \
    do {                                                                                       \
        if (!(cond)) {                                                                         \
            fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond);          \
            test_n_checks_failed++;                                                            \
        }                                                                                      \
    } while (0)

#define CHECK_MSG(cond, ...)                                                                   \
    do {                                                                                       \
        if (!(cond)) {                                                                         \
            fprintf(stderr, "%s:%d: CHECK failed: %s: ", __FILE__, __LINE__, #cond);           \
            fprintf(stderr, __VA_ARGS__);                                                      \
            fputc('\n', stderr);                                                               \
            test_n_checks_failed++;                                                            \
        }                                                                                      \
    } while (0)

#define CHECK_EQ_INT(a, b)                                                                     \
    do {                                                                                       \
        long long va_ = (long long)(a);                                                        \
        long long vb_ = (long long)(b);                                                        \
        if (va_ != vb_) {                                                                      \
            fprintf(stderr, "%s:%d: CHECK_EQ_INT failed: %s = %lld, %s = %lld\n", __FILE__,   \
                    __LINE__, #a, va_, #b, vb_);                                               \
            test_n_checks_failed++;                                                            \
        }                                                                                      \
    } while (0)

#define CHECK_NEAR(a, b, tol)                                                                  \
    do {                                                                                       \
        double va_ = (double)(a);                                                              \
        double vb_ = (double)(b);                                                              \
        if (!(fabs(va_ - vb_) <= (tol))) {                                                     \
            fprintf(stderr, "%s:%d: CHECK_NEAR failed: %s = %.9g, %s = %.9g, tol %g\n",        \
                    __FILE__, __LINE__, #a, va_, #b, vb_, (double)(tol));                      \
            test_n_checks_failed++;                                                            \
        }                                                                                      \
    } while (0)

#define CHECK_STR_CONTAINS(hay, needle)                                                        \
    do {                                                                                       \
        const char *h_ = (hay);                                                                \
        const char *n_ = (needle);                                                             \
        if (!h_ || !strstr(h_, n_)) {                                                          \
            fprintf(stderr, "%s:%d: expected \"%s\" to contain \"%s\"\n", __FILE__, __LINE__, \
                    h_ ? h_ : "(null)", n_);                                                   \
            test_n_checks_failed++;                                                            \
        }                                                                                      \
    } while (0)

#define RUN(fn)                                                                                \
    do {                                                                                       \
        int before_ = test_n_checks_failed;                                                    \
        test_current_skipped = 0;                                                              \
        fn();                                                                                  \
        if (test_n_checks_failed != before_) {                                                 \
            fprintf(stderr, "FAIL %s\n", #fn);                                                 \
            test_n_failed++;                                                                   \
        } else if (test_current_skipped) {                                                     \
            fprintf(stderr, "skip %s\n", #fn);                                                 \
            test_note_skip(#fn);                                                               \
        } else {                                                                               \
            fprintf(stderr, "ok   %s\n", #fn);                                                 \
            test_n_passed++;                                                                   \
        }                                                                                      \
    } while (0)

/* Whether two buffers hold the same bytes. For float arrays that is bit identity, the promise
 * of the tests that use it: stricter than ==, which equates +0 and -0 and fails on NaN. */
static inline bool test_same_bytes(const void *a, const void *b, size_t n) {
    return memcmp(a, b, n) == 0;
}

/* Marks the running case as skipped for something about this machine or run (call, then
 * return). */
static inline void test_skip(const char *why) {
    fprintf(stderr, "SKIP: %s\n", why);
    if (!test_current_skipped) snprintf(test_current_why, sizeof test_current_why, "%s", why);
    if (test_current_skipped != 2) test_current_skipped = 1;
}

/* Marks the running case as skipped for missing test data (call, then return); a failure
 * instead under MOEINF_REQUIRE_SHARED=1 (see the top of this file). */
static inline void test_skip_data(const char *what) {
    const char *req = getenv("MOEINF_REQUIRE_SHARED"); /* NOLINT(concurrency-mt-unsafe) */
    if (req && strcmp(req, "1") == 0) {
        fprintf(stderr, "missing test data under MOEINF_REQUIRE_SHARED=1 (a failure): %s\n", what);
        test_n_checks_failed++;
        return;
    }
    fprintf(stderr, "SKIP (missing data): %s\n", what);
    if (test_current_skipped != 2) snprintf(test_current_why, sizeof test_current_why, "%s", what);
    test_current_skipped = 2;
}

/* Counts the skipped case `name` (RUN, or test_report for a main that stopped early). */
static inline void test_note_skip(const char *name) {
    if (test_n_skipped < TEST_MAX_SKIPS) {
        test_skips[test_n_skipped].name = name;
        snprintf(test_skips[test_n_skipped].why, sizeof test_skips[0].why, "%s%s",
                 test_current_skipped == 2 ? "missing data: " : "", test_current_why);
    }
    test_n_skipped++;
    test_n_skipped_data += test_current_skipped == 2;
}

/* The summary line, the skipped cases, and the exit status (the rule at the top). */
static inline int test_report(void) {
    /* A skip outside RUN: main stopped before its cases. */
    if (test_current_skipped && test_n_passed + test_n_failed + test_n_skipped == 0)
        test_note_skip("main");
    printf("%d passed, %d failed, %d skipped", test_n_passed, test_n_failed, test_n_skipped);
    if (test_n_skipped_data) printf(" (%d for missing data)", test_n_skipped_data);
    printf("\n");
    for (int i = 0; i < test_n_skipped && i < TEST_MAX_SKIPS; i++)
        printf("skipped %s: %s\n", test_skips[i].name, test_skips[i].why);
    if (test_n_failed || test_n_checks_failed) return 1;
    if (test_n_passed == 0 && test_n_skipped == 0) {
        printf("no case ran: a test that checks nothing fails\n");
        return 1;
    }
    return test_n_passed == 0 ? TEST_EXIT_SKIP : 0;
}

/* Full path of a file under ../shared into buf, or NULL when the shared folder is absent
 * (test_skip_data: a skip, or a failure under MOEINF_REQUIRE_SHARED=1). A present folder
 * without the file is not a skip: the caller's open fails, and so does the case. */
static inline const char *test_shared_path(const char *rel, char *buf, size_t size) {
    const char *dir = getenv("MOEINF_SHARED"); /* NOLINT(concurrency-mt-unsafe): main thread */
    struct stat st;
    if (dir && stat(dir, &st) == 0 && S_ISDIR(st.st_mode)) {
        snprintf(buf, size, "%s/%s", dir, rel);
        return buf;
    }
    char what[512];
    snprintf(what, sizeof what, "../shared is absent (MOEINF_SHARED=%s); needed: %s",
             dir ? dir : "(unset)", rel);
    test_skip_data(what);
    return NULL;
}

/* Full path of a file of this source tree ($MOEINF_SRC, set by ctest) into buf. */
static inline const char *test_src_path(const char *rel, char *buf, size_t size) {
    const char *dir = getenv("MOEINF_SRC"); // NOLINT(concurrency-mt-unsafe): main thread
    snprintf(buf, size, "%s/%s", dir ? dir : ".", rel);
    return buf;
}

/* A scratch path under the build tree: $MOEINF_TMP/<name>. */
static inline const char *test_tmp_path(const char *name, char *buf, size_t size) {
    const char *dir = getenv("MOEINF_TMP"); /* NOLINT(concurrency-mt-unsafe): main thread */
    snprintf(buf, size, "%s/%s", dir ? dir : "/tmp", name);
    return buf;
}

static inline bool test_file_exists(const char *path) {
    struct stat st;
    return stat(path, &st) == 0;
}

/* Number of "<base>.tmp.*" files (atomic writes not committed) left in the scratch folder. */
static inline int test_temp_leftovers(const char *base) {
    char dir[512];
    test_tmp_path("", dir, sizeof dir);
    DIR *d = opendir(dir);
    if (!d) return 0;
    char prefix[256];
    snprintf(prefix, sizeof prefix, "%s.tmp.", base);
    int n = 0;
    for (struct dirent *e; (e = readdir(d));) /* NOLINT(concurrency-mt-unsafe): main thread */
        n += strncmp(e->d_name, prefix, strlen(prefix)) == 0;
    closedir(d);
    return n;
}

/* Reads a text file into buf (truncated to size - 1 bytes, NUL-terminated; "" if absent). */
static inline void test_read_text(const char *path, char *buf, size_t size) {
    buf[0] = '\0';
    FILE *f = fopen(path, "r");
    if (!f) return;
    size_t n = fread(buf, 1, size - 1, f);
    buf[n] = '\0';
    fclose(f);
}

/* Writes text to a file (replacing it); false when that fails. */
static inline bool test_write_text(const char *path, const char *text) {
    FILE *f = fopen(path, "w");
    if (!f) return false;
    bool ok = fputs(text, f) >= 0;
    return fclose(f) == 0 && ok;
}

/* Runs a whole shell command line (several commands may be chained; the output of the last is
 * captured): stdout into out and stderr into err (as test_read_text); `tag` names the scratch
 * files of this caller, so that tests running at once do not share them. Returns the exit
 * code, or -1 when the command did not exit normally. */
static inline int test_run_shell(const char *tag, const char *cmd, char *out, size_t out_size,
                                 char *err, size_t err_size) {
    char out_path[512];
    char err_path[512];
    char name[128];
    char full[8192];
    snprintf(name, sizeof name, "%s-stdout.txt", tag);
    test_tmp_path(name, out_path, sizeof out_path);
    snprintf(name, sizeof name, "%s-stderr.txt", tag);
    test_tmp_path(name, err_path, sizeof err_path);
    snprintf(full, sizeof full, "%s >'%s' 2>'%s'", cmd, out_path, err_path);
    int status = system(full); // NOLINT(concurrency-mt-unsafe): main thread
    test_read_text(out_path, out, out_size);
    test_read_text(err_path, err, err_size);
    remove(out_path);
    remove(err_path);
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

/* The moeinf binary under test ($MOEINF_BIN, set by ctest). */
static inline const char *test_moeinf_bin(void) {
    const char *b = getenv("MOEINF_BIN"); // NOLINT(concurrency-mt-unsafe): main thread
    return b ? b : "./moeinf";
}

/*
 * Runs "$MOEINF_BIN ARGS" through the shell, stdout into out and stderr into err (as
 * test_read_text). `tag` names the scratch files of this caller. Returns the exit code, or -1
 * when MOEINF_BIN is unset (outside ctest) or the command did not exit normally.
 */
static inline int test_run_moeinf(const char *tag, const char *args, char *out, size_t out_size,
                                  char *err, size_t err_size) {
    const char *bin = getenv("MOEINF_BIN"); /* NOLINT(concurrency-mt-unsafe): main thread */
    out[0] = err[0] = '\0';
    if (!bin) return -1;
    char cmd[8192];
    snprintf(cmd, sizeof cmd, "'%s' %s", bin, args);
    return test_run_shell(tag, cmd, out, out_size, err, err_size);
}

#endif
