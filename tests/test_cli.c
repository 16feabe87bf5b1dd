/*
 * test_cli.c - the engine subcommands as other tools call them: exact output forms
 * (tokenize, logits, run --print-ids), exit codes (0 ok, 1 bad file, 2 bad option) and
 * one-line error messages. Expectations come from llama.cpp's goldens.
 */
#include <sys/wait.h>

#include "golden.h"
#include "test.h"

/* Runs a whole shell command line (several commands may be chained; the output of the
 * last is captured); stdout and stderr separately, and the exit code. */
static int run_cmd(const char *cmd, char *out, size_t out_size, char *errbuf, size_t err_size) {
    char tmp_out[512];
    char tmp_err[512];
    char full[4096];
    test_tmp_path("cli_stdout.txt", tmp_out, sizeof tmp_out);
    test_tmp_path("cli_stderr.txt", tmp_err, sizeof tmp_err);
    snprintf(full, sizeof full, "%s >%s 2>%s", cmd, tmp_out, tmp_err);
    int status = system(full); /* NOLINT(concurrency-mt-unsafe): main thread */
    test_read_text(tmp_out, out, out_size);
    test_read_text(tmp_err, errbuf, err_size);
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

static const char *bin(void) {
    const char *b = getenv("MOEINF_BIN"); /* NOLINT(concurrency-mt-unsafe): main thread */
    return b ? b : "./moeinf";
}

static void test_tokenize_output(void) {
    char model[1024];
    char cmd[2048];
    char out[4096];
    char err[4096];
    if (!test_shared_path("testdata/models/tiny-mixtral-F32.gguf", model, sizeof model)) return;
    snprintf(cmd, sizeof cmd, "%s tokenize -m %s 'Hello world'", bin(), model);
    CHECK_EQ_INT(run_cmd(cmd, out, sizeof out, err, sizeof err), 0);
    CHECK(strcmp(out, "1 15043 3186\n") == 0);
    /* text that spells a control token stays text; an empty text is just BOS */
    snprintf(cmd, sizeof cmd, "%s tokenize -m %s '</s>'", bin(), model);
    CHECK_EQ_INT(run_cmd(cmd, out, sizeof out, err, sizeof err), 0);
    CHECK(strncmp(out, "1 ", 2) == 0 && strcmp(out, "1 2\n") != 0);
    snprintf(cmd, sizeof cmd, "%s tokenize -m %s ''", bin(), model);
    CHECK_EQ_INT(run_cmd(cmd, out, sizeof out, err, sizeof err), 0);
    CHECK(strcmp(out, "1\n") == 0);
}

static void test_logits_file(void) {
    char model[1024];
    char golden[1024];
    char cmd[2048];
    char out[4096];
    char err[4096];
    char file[512];
    if (!test_shared_path("testdata/models/tiny-mixtral-F32.gguf", model, sizeof model)) return;
    test_shared_path("testdata/golden/tiny-mixtral-F32/hello-kvf32-nofa.logits.f32", golden,
                     sizeof golden);
    test_tmp_path("cli_logits.f32", file, sizeof file);
    snprintf(cmd, sizeof cmd, "%s logits -m %s --ids '1 15043 3186' -o %s --kv-type f32", bin(),
             model, file);
    CHECK_EQ_INT(run_cmd(cmd, out, sizeof out, err, sizeof err), 0);
    size_t n_ours = 0;
    size_t n_ref = 0;
    float *ours = (float *)golden_read_file(file, &n_ours);
    float *ref = (float *)golden_read_file(golden, &n_ref);
    CHECK_EQ_INT(n_ours, sizeof(float) * 3 * 32000);
    CHECK_EQ_INT(n_ours, n_ref);
    if (ours && ref && n_ours == n_ref) {
        double max = 0;
        for (size_t i = 0; i < n_ours / sizeof(float); i++) {
            double d = fabs((double)ours[i] - ref[i]);
            max = d > max ? d : max;
        }
        CHECK_MSG(max <= 1e-2, "max diff %g", max);
    }
    free(ours);
    free(ref);
}

static void test_run_greedy_ids(void) {
    char model[1024];
    char cmd[2048];
    char out[8192];
    char err[4096];
    if (!test_shared_path("testdata/models/tiny-mixtral-F32.gguf", model, sizeof model)) return;
    /* golden greedy of "Hello world" (hello-kvf32-nofa): margins of the first three steps
     * are 0.50, 3.05, 4.40, far above the F32 error bound of 2e-2 */
    snprintf(cmd, sizeof cmd,
             "%s run -m %s -p 'Hello world' -n 3 --temp 0 --print-ids -c 64 --kv-type f32",
             bin(), model);
    CHECK_EQ_INT(run_cmd(cmd, out, sizeof out, err, sizeof err), 0);
    CHECK_STR_CONTAINS(out, "\nids: 15635 8887 2807\n");
    CHECK(strncmp(out, "Hello world", 11) == 0);
    /* the recorded routing replays in the simulator: 3 prompt + 2 decoded tokens (the last
     * generated token is never evaluated) x 2 layers x top-2 = 20 accesses, 8 of them decode */
    char trace[512];
    test_tmp_path("cli_run.trace", trace, sizeof trace);
    snprintf(cmd, sizeof cmd,
             "%s run -m %s -p 'Hello world' -n 3 --temp 0 -c 64 --record-routing %s && "
             "%s sim --trace %s --cache 4 --json",
             bin(), model, trace, bin(), trace);
    CHECK_EQ_INT(run_cmd(cmd, out, sizeof out, err, sizeof err), 0);
    CHECK_STR_CONTAINS(out, "\"accesses\": 20,");
    CHECK_STR_CONTAINS(out, "\"decode_accesses\": 8,");
}

static void test_context_limits(void) {
    char model[1024];
    char cmd[2048];
    char out[8192];
    char err[4096];
    if (!test_shared_path("testdata/models/tiny-mixtral-F32.gguf", model, sizeof model)) return;
    /* generation that reaches the context end stops with a note, not a crash */
    snprintf(cmd, sizeof cmd, "%s run -m %s -p 'Hello world' -n 20 --temp 0 --print-ids -c 6",
             bin(), model);
    CHECK_EQ_INT(run_cmd(cmd, out, sizeof out, err, sizeof err), 0);
    CHECK_STR_CONTAINS(err, "context full");
    /* a prompt longer than the context is an error */
    snprintf(cmd, sizeof cmd, "%s run -m %s -p 'Hello world how are you' -n 2 -c 3", bin(), model);
    CHECK_EQ_INT(run_cmd(cmd, out, sizeof out, err, sizeof err), 1);
    CHECK_STR_CONTAINS(err, "moeinf: ");
    CHECK_STR_CONTAINS(err, "context");
}

static void test_bad_input(void) {
    char model[1024];
    char cmd[2048];
    char out[4096];
    char err[4096];
    snprintf(cmd, sizeof cmd, "%s run -m /nonexistent/model.gguf -p hi", bin());
    CHECK_EQ_INT(run_cmd(cmd, out, sizeof out, err, sizeof err), 1);
    CHECK_STR_CONTAINS(err, "/nonexistent/model.gguf");
    CHECK(strchr(err, '\n') == strrchr(err, '\n')); /* one line */
    snprintf(cmd, sizeof cmd, "%s run -p hi --temp -1", bin());
    CHECK_EQ_INT(run_cmd(cmd, out, sizeof out, err, sizeof err), 2);
    snprintf(cmd, sizeof cmd, "%s run -p hi --bogus", bin());
    CHECK_EQ_INT(run_cmd(cmd, out, sizeof out, err, sizeof err), 2);
    snprintf(cmd, sizeof cmd, "%s bench -n x", bin());
    CHECK_EQ_INT(run_cmd(cmd, out, sizeof out, err, sizeof err), 2);
    snprintf(cmd, sizeof cmd, "%s logits -m m.gguf --ids '1 x' -o /dev/null", bin());
    CHECK_EQ_INT(run_cmd(cmd, out, sizeof out, err, sizeof err), 2);
    const char *cmds[] = {"run", "bench", "tokenize", "logits", "inspect", "gen-model", "sim"};
    for (int i = 0; i < 7; i++) {
        snprintf(cmd, sizeof cmd, "%s %s --help", bin(), cmds[i]);
        CHECK_MSG(run_cmd(cmd, out, sizeof out, err, sizeof err) == 0, "%s --help", cmds[i]);
        CHECK_STR_CONTAINS(out, "usage: moeinf");
    }
    if (!test_shared_path("testdata/models/tiny-mixtral-F32.gguf", model, sizeof model)) return;
    snprintf(cmd, sizeof cmd, "%s logits -m %s --ids '1 99999' -o /dev/null", bin(), model);
    CHECK_EQ_INT(run_cmd(cmd, out, sizeof out, err, sizeof err), 1);
    CHECK_STR_CONTAINS(err, "99999");
}

int main(void) {
    RUN(test_tokenize_output);
    RUN(test_logits_file);
    RUN(test_run_greedy_ids);
    RUN(test_context_limits);
    RUN(test_bad_input);
    return test_report();
}
