/*
 * test_serve_load.c - `moeinf serve` under 64 clients at once on the embedded default model
 * (tests/scripts/serve_load.py, which says what it asserts: every answer 200, 503 or the
 * client's own disconnect, mixed prompt lengths, clients leaving queued and mid-stream, the
 * peak RSS within idle RSS + 1 MiB per client, the queue drained and the same greedy answer
 * afterwards, exit 0 on SIGTERM). The default model is written to a scratch
 * $XDG_CACHE_HOME, not the user's. Sanitizer builds (unoptimized, several times slower) send
 * one request per client with prompts of at most 24 words, a few seconds there, and skip the
 * RSS bound (their shadow memory and quarantine are not the server's).
 */
// ctest-labels: threads
#include <stdlib.h>

#include "test.h"

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#    define SANITIZED 1
#elif defined(__has_feature)
#    if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#        define SANITIZED 1
#    endif
#endif
#ifndef SANITIZED
#    define SANITIZED 0
#endif

/* The count before `label` in the script's summary line (-1 when absent). */
static long count_before(const char *text, const char *label) {
    const char *p = strstr(text, label);
    if (!p) return -1;
    while (p > text && p[-1] == ' ')
        p--;
    while (p > text && p[-1] >= '0' && p[-1] <= '9')
        p--;
    return strtol(p, NULL, 10);
}

static void test_load_64_clients(void) {
    char cache[512];
    char cmd[4096];
    char out[4096];
    char err[16384];
    const char *src = getenv("MOEINF_SRC"); // NOLINT(concurrency-mt-unsafe): main thread
    test_tmp_path("serve-load-cache", cache, sizeof cache);
    snprintf(cmd, sizeof cmd,
             "XDG_CACHE_HOME='%s' python3 '%s/tests/scripts/serve_load.py' --bin '%s' "
             "--clients 64 --seed 5 %s",
             cache, src ? src : ".", test_moeinf_bin(),
             SANITIZED ? "--requests 1 --long-words 24 --no-rss-check" : "--requests 3");
    int rc = test_run_shell("serve-load", cmd, out, sizeof out, err, sizeof err);
    if (rc == 127) {
        test_skip("python3 missing");
        return;
    }
    fprintf(stderr, "%s", out);
    CHECK_MSG(rc == 0, "serve_load.py exit %d: %s%s", rc, out, err);
    CHECK_STR_CONTAINS(out,
                       SANITIZED ? "64 requests from 64 clients" : "192 requests from 64 clients");
    /* the load did what it is for: answers, clients leaving, nothing else */
    CHECK(count_before(out, "answered 200") > 0);
    CHECK(count_before(out, "left by their client") > 0);
    CHECK_EQ_INT((int)count_before(out, "bad;"), 0);
}

int main(void) {
    RUN(test_load_64_clients);
    return test_report();
}
