/*
 * test_cli.c - the engine subcommands as other tools call them: exact output forms
 * (tokenize, logits, run --print-ids), exit codes (0 ok, 1 bad file, 2 bad option) and
 * one-line error messages. Expectations come from llama.cpp's goldens.
 */
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "golden.h"
#include "test.h"

static int run_cmd(const char *cmd, char *out, size_t out_size, char *errbuf, size_t err_size) {
    return test_run_shell("cli", cmd, out, out_size, errbuf, err_size);
}

static const char *bin(void) {
    return test_moeinf_bin();
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

static void test_tokenize_bpe(void) {
    /* Byte-level BPE: tiny-qwen2moe's golden prompt ids (BOS 32013 first), from the vocabulary
     * alone (the qwen2moe weights are not read); a vocabulary-only GGUF works too. */
    char model[1024];
    char cmd[2048];
    char out[4096];
    char err[4096];
    if (!test_shared_path("testdata/models/tiny-qwen2moe-F32.gguf", model, sizeof model)) return;
    snprintf(cmd, sizeof cmd, "%s tokenize -m %s 'Hello world'", bin(), model);
    CHECK_EQ_INT(run_cmd(cmd, out, sizeof out, err, sizeof err), 0);
    CHECK_MSG(strcmp(out, "32013 17535 1835\n") == 0, "got %s", out); /* golden hello */
    snprintf(cmd, sizeof cmd,
             "%s tokenize -m %s \"$(printf 'Caf\\303\\251 na\\303\\257ve "
             "\\346\\227\\245\\346\\234\\254\\350\\252\\236 "
             "\\360\\237\\232\\200\\360\\237\\224\\245!')\"",
             bin(), model);
    CHECK_EQ_INT(run_cmd(cmd, out, sizeof out, err, sizeof err), 0);
    /* golden unicode-kvf32-nofa.json */
    CHECK_MSG(strcmp(out, "32013 34 2623 584 10012 2854 312 207 10169 13099 239 12394 235 209 "
                          "10047 229 98 0\n") == 0,
              "got %s", out);
    if (!test_shared_path("testdata/tokenizer/ggml-vocab-gpt-2.gguf", model, sizeof model)) return;
    snprintf(cmd, sizeof cmd, "%s tokenize -m %s ' Hello World!'", bin(), model);
    CHECK_EQ_INT(run_cmd(cmd, out, sizeof out, err, sizeof err), 0);
    /* llama.cpp's vector for this string */
    CHECK_MSG(strcmp(out, "18435 2159 0\n") == 0, "got %s", out);
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
             "%s run -m %s -p 'Hello world' -n 3 --temp 0 --print-ids -c 64 --kv-type f32", bin(),
             model);
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

/* --record-tag names the request in the routing record (the trained model: no ../shared). */
static void test_record_tag(void) {
    char model[1024];
    char cmd[4096];
    char out[8192];
    char err[4096];
    char trace[512];
    char text[8192];
    test_src_path("models/trained-moe-Q8_0.gguf", model, sizeof model);
    test_tmp_path("cli_tag.trace", trace, sizeof trace);
    snprintf(cmd, sizeof cmd,
             "%s run -m %s -p 'The function' -n 2 --temp 0 --record-routing %s "
             "--record-tag library/os/7",
             bin(), model, trace);
    CHECK_EQ_INT(run_cmd(cmd, out, sizeof out, err, sizeof err), 0);
    test_read_text(trace, text, sizeof text);
    CHECK_STR_CONTAINS(text, "\n# req 0 library/os/7 prefill=");
    snprintf(cmd, sizeof cmd, "%s run -m %s -p x --record-routing %s --record-tag 'a b'", bin(),
             model, trace);
    CHECK_EQ_INT(run_cmd(cmd, out, sizeof out, err, sizeof err), 2);
    CHECK_STR_CONTAINS(err, "moeinf run: --record-tag 'a b' must be one word");
    snprintf(cmd, sizeof cmd, "%s run -m %s -p x --record-tag a", bin(), model);
    CHECK_EQ_INT(run_cmd(cmd, out, sizeof out, err, sizeof err), 2);
    CHECK_STR_CONTAINS(err, "--record-tag needs --record-routing FILE");
    remove(trace);
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

/* bench: the test lines and what each token computes (logits unless --no-logits). */
static void test_bench_output(void) {
    char model[1024];
    char cmd[2048];
    char out[4096];
    char err[4096];
    if (!test_shared_path("testdata/models/tiny-mixtral-Q8_0.gguf", model, sizeof model)) return;
    snprintf(cmd, sizeof cmd, "%s bench -m %s -p 5 -n 3 -r 1 -b 2 -t 2", bin(), model);
    CHECK_EQ_INT(run_cmd(cmd, out, sizeof out, err, sizeof err), 0);
    CHECK_STR_CONTAINS(out, "logits:   last position of every prefill micro-batch (-b 2)");
    CHECK_STR_CONTAINS(out, "\nprefill         5 ");
    CHECK_STR_CONTAINS(out, "\ndecode          3 ");
    CHECK_STR_CONTAINS(out, "decode weight traffic: ");
    snprintf(cmd, sizeof cmd, "%s bench -m %s -p 0 -n 2 -r 1 --no-logits", bin(), model);
    CHECK_EQ_INT(run_cmd(cmd, out, sizeof out, err, sizeof err), 0);
    CHECK_STR_CONTAINS(out, "logits:   none (--no-logits");
    /* a tiny model fits in memory: read, not mapped, unless --mmap */
    CHECK_STR_CONTAINS(out, "\nweights:  read into memory (--mmap maps the file)\n");
    CHECK(strstr(out, "prefill ") == NULL);
    CHECK_STR_CONTAINS(out, "not given with --no-logits");
    snprintf(cmd, sizeof cmd, "%s bench -m %s -p 0 -n 1 -r 1 --mmap", bin(), model);
    CHECK_EQ_INT(run_cmd(cmd, out, sizeof out, err, sizeof err), 0);
    CHECK_STR_CONTAINS(out, "\nweights:  mapped from the file (--no-mmap reads them");
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
    /* an id past the vocabulary and one past int32 are both bad values of --ids: exit 2 */
    const char *bad_ids[] = {"1 99999", "1 2147483647", "1 2147483648", "1 -1"};
    for (int i = 0; i < 4; i++) {
        snprintf(cmd, sizeof cmd, "%s logits -m %s --ids '%s' -o /dev/null", bin(), model,
                 bad_ids[i]);
        CHECK_MSG(run_cmd(cmd, out, sizeof out, err, sizeof err) == 2, "--ids '%s'", bad_ids[i]);
        CHECK_STR_CONTAINS(err, "moeinf logits: --ids: ");
        CHECK_STR_CONTAINS(err, bad_ids[i] + 2);
        CHECK(strchr(err, '\n') == err + strlen(err) - 1); /* one line */
    }
}

/* Output paths are checked before the work: a missing folder fails at once, nothing is
 * generated (stdout stays empty) and nothing is left behind. */
static void test_output_checked_first(void) {
    char model[1024];
    char cmd[2048];
    char out[4096];
    char err[4096];
    if (!test_shared_path("testdata/models/tiny-mixtral-F32.gguf", model, sizeof model)) return;
    snprintf(cmd, sizeof cmd, "%s run -m %s -p hi -n 4 --record-routing /nonexistent-dir/r.txt",
             bin(), model);
    CHECK_EQ_INT(run_cmd(cmd, out, sizeof out, err, sizeof err), 1);
    CHECK(strcmp(err, "moeinf: /nonexistent-dir/r.txt: folder /nonexistent-dir: No such file or "
                      "directory\n") == 0);
    CHECK(out[0] == '\0');
    snprintf(cmd, sizeof cmd, "%s logits -m %s --ids '1 2' -o /nonexistent-dir/l.f32", bin(),
             model);
    CHECK_EQ_INT(run_cmd(cmd, out, sizeof out, err, sizeof err), 1);
    CHECK_STR_CONTAINS(err, "moeinf: /nonexistent-dir/l.f32: folder /nonexistent-dir");
    CHECK(!test_file_exists("/nonexistent-dir"));
}

/* A FIFO (or a pipe) as the model is refused at once; a blocking open would hang waiting for
 * a writer before any check (`timeout` turns a hang into exit 124). */
static void test_fifo_model(void) {
    char fifo[512];
    char cmd[2048];
    char out[4096];
    char err[4096];
    test_tmp_path("cli_model.fifo", fifo, sizeof fifo);
    remove(fifo);
    CHECK(mkfifo(fifo, 0644) == 0);
    snprintf(cmd, sizeof cmd, "timeout 20 %s run -m %s -p hi -n 1", bin(), fifo);
    CHECK_EQ_INT(run_cmd(cmd, out, sizeof out, err, sizeof err), 1);
    CHECK_STR_CONTAINS(err, "a pipe or FIFO, not a regular file");
    snprintf(cmd, sizeof cmd, "timeout 20 %s inspect %s", bin(), fifo);
    CHECK_EQ_INT(run_cmd(cmd, out, sizeof out, err, sizeof err), 1);
    CHECK_STR_CONTAINS(err, "a pipe or FIFO");
    remove(fifo);
}

/* Weights holding NaN: generation stops with an error naming the first layer whose output is
 * not finite, instead of sampling token 0 forever. */
static void test_nan_weights(void) {
    char model[1024];
    char bad[512];
    char cmd[2048];
    char out[8192];
    char err[4096];
    if (!test_shared_path("testdata/models/tiny-mixtral-F32.gguf", model, sizeof model)) return;
    size_t size = 0;
    char *bytes = golden_read_file(model, &size);
    CHECK(bytes != NULL);
    if (!bytes) return;
    /* the first float of blk.1.attn_norm.weight: offset from `moeinf inspect` of this file */
    const size_t at = 6593728;
    CHECK(size > at + 4);
    const float nan = NAN;
    memcpy(bytes + at, &nan, sizeof nan);
    test_tmp_path("cli_nan.gguf", bad, sizeof bad);
    FILE *f = fopen(bad, "wb");
    CHECK(f && fwrite(bytes, 1, size, f) == size);
    if (f) fclose(f);
    free(bytes);
    snprintf(cmd, sizeof cmd, "%s inspect %s", bin(), bad);
    CHECK_EQ_INT(run_cmd(cmd, out, sizeof out, err, sizeof err), 0);
    CHECK_STR_CONTAINS(out, "blk.1.attn_norm.weight           f32      [64]                       "
                            "     6593728");
    snprintf(cmd, sizeof cmd, "%s run -m %s -p 'Hello world' -n 8 --temp 0 --print-ids", bin(),
             bad);
    CHECK_EQ_INT(run_cmd(cmd, out, sizeof out, err, sizeof err), 1);
    CHECK_STR_CONTAINS(err, "moeinf: NaN or infinity in the hidden state from layer 1 on");
    CHECK(strstr(out, "ids:") == NULL); /* nothing was sampled */
    remove(bad);
}

static void test_help(void) {
    char cmd[2048];
    char out[8192];
    char err[4096];
    snprintf(cmd, sizeof cmd, "%s help run", bin());
    CHECK_EQ_INT(run_cmd(cmd, out, sizeof out, err, sizeof err), 0);
    CHECK(strncmp(out, "usage: moeinf run ", 18) == 0);
    snprintf(cmd, sizeof cmd, "%s help nope", bin());
    CHECK_EQ_INT(run_cmd(cmd, out, sizeof out, err, sizeof err), 2);
    CHECK_STR_CONTAINS(err, "unknown command 'nope'");
    /* bench sizes its context to the test unless -c is given */
    snprintf(cmd, sizeof cmd, "%s bench --help", bin());
    CHECK_EQ_INT(run_cmd(cmd, out, sizeof out, err, sizeof err), 0);
    CHECK_STR_CONTAINS(out, "bench P + N + 1");
}

int main(void) {
    RUN(test_tokenize_output);
    RUN(test_tokenize_bpe);
    RUN(test_logits_file);
    RUN(test_run_greedy_ids);
    RUN(test_record_tag);
    RUN(test_context_limits);
    RUN(test_bench_output);
    RUN(test_bad_input);
    RUN(test_output_checked_first);
    RUN(test_fifo_model);
    RUN(test_nan_weights);
    RUN(test_help);
    return test_report();
}
