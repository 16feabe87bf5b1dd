/*
 * test_cli_progress.c - the progress line (model load, bench, run) appears only when stderr
 * is a terminal: with stderr in a file, the output is exactly what it is without the line
 * (no carriage return, no escape sequence, no "loading model"); under a pseudo-terminal
 * (script(1), skipped where it is missing) the line is drawn and then cleared.
 */
#include "test.h"

#define TINY "testdata/models/tiny-mixtral-Q8_0.gguf"

static int shell(const char *cmd, char *out, size_t out_size, char *err, size_t err_size) {
    return test_run_shell("cli-progress", cmd, out, out_size, err, err_size);
}

static void no_line(const char *what, const char *err) {
    CHECK_MSG(!strchr(err, '\r'), "%s: a carriage return in stderr:\n%s", what, err);
    CHECK_MSG(!strchr(err, '\033'), "%s: an escape sequence in stderr:\n%s", what, err);
    CHECK_MSG(!strstr(err, "loading model"), "%s: a load line in stderr:\n%s", what, err);
    CHECK_MSG(!strstr(err, "tokens/s"), "%s: a token line in stderr:\n%s", what, err);
}

static void test_nothing_when_not_a_terminal(void) {
    char model[1024];
    if (!test_shared_path(TINY, model, sizeof model)) return;
    char cmd[4096];
    static char out[65536];
    static char err[65536];
    const char *bin = test_moeinf_bin();
    /* offloaded (the load reads), no-mmap (the load reads the file), bench and run */
    snprintf(cmd, sizeof cmd,
             "%s bench -m %s -p 16 -n 64 -r 2 --expert-cache 50%% --expert-io cached", bin, model);
    CHECK_EQ_INT(shell(cmd, out, sizeof out, err, sizeof err), 0);
    no_line("bench", err);
    /* the one line it writes: the cache's announcement */
    CHECK(!strncmp(err, "moeinf: expert cache: ", 22) &&
          strchr(err, '\n') == err + strlen(err) - 1);
    snprintf(cmd, sizeof cmd, "%s bench -m %s -p 16 -n 64 -r 2 --no-mmap", bin, model);
    CHECK_EQ_INT(shell(cmd, out, sizeof out, err, sizeof err), 0);
    no_line("bench --no-mmap", err);
    CHECK_EQ_INT(strlen(err), 0);
    snprintf(cmd, sizeof cmd,
             "%s run -m %s -p 'Once' -n 200 --expert-cache 50%% --expert-io cached", bin, model);
    CHECK_EQ_INT(shell(cmd, out, sizeof out, err, sizeof err), 0);
    no_line("run", err);
}

static void test_drawn_on_a_terminal(void) {
    char model[1024];
    if (!test_shared_path(TINY, model, sizeof model)) return;
    if (system("command -v script >/dev/null 2>&1") != 0) { // NOLINT(concurrency-mt-unsafe)
        test_skip("script(1) is not installed");
        return;
    }
    char cmd[4096];
    static char out[65536];
    static char err[65536];
    /* stdout to /dev/null; what script records is the terminal: stderr */
    snprintf(cmd, sizeof cmd,
             "script -qec \"%s bench -m %s -p 16 -n 64 -r 1 --no-mmap >/dev/null\" /dev/null",
             test_moeinf_bin(), model);
    CHECK_EQ_INT(shell(cmd, out, sizeof out, err, sizeof err), 0);
    CHECK_STR_CONTAINS(out, "\rloading model: ");
    CHECK_STR_CONTAINS(out, " MB\033[K");
    CHECK_STR_CONTAINS(out, "\rbench run 2/2, decode: 64/64 tokens, ");
    /* the line is cleared at the end */
    size_t n = strlen(out);
    CHECK(n >= 4 && !strcmp(out + n - 4, "\r\033[K"));
}

int main(void) {
    RUN(test_nothing_when_not_a_terminal);
    RUN(test_drawn_on_a_terminal);
    return test_report();
}
