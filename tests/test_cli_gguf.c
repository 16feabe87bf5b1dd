/*
 * test_cli_gguf.c - the gguf subcommands as a user runs them: `moeinf inspect` and
 * `moeinf gen-model` through the built binary ($MOEINF_BIN), checking exit codes (0 ok,
 * 1 bad file, 2 bad option), --help, and what reaches stdout and stderr.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "gguf_bytes.h"
#include "test.h"

static char out_text[1 << 16];
static char err_text[1 << 14];

/* Runs "$MOEINF_BIN <args>" and returns its exit code; stdout and stderr go to out_text and
 * err_text. -1 if the binary is not known. */
static int run(const char *args) {
    const char *bin = getenv("MOEINF_BIN"); /* NOLINT(concurrency-mt-unsafe): main thread */
    if (!bin) {
        test_skip("MOEINF_BIN unset (run through ctest)");
        return -1;
    }
    return test_run_moeinf("cli-gguf", args, out_text, sizeof out_text, err_text, sizeof err_text);
}

static void test_inspect(void) {
    if (run("inspect --help") < 0) return;
    CHECK_EQ_INT(run("inspect --help"), 0);
    CHECK_STR_CONTAINS(out_text, "usage: moeinf inspect");
    CHECK_EQ_INT(run("inspect"), 2);
    CHECK_STR_CONTAINS(err_text, "missing MODEL");
    CHECK_EQ_INT(run("inspect --bogus x.gguf"), 2);
    CHECK_STR_CONTAINS(err_text, "unknown option '--bogus'");
    CHECK_EQ_INT(run("inspect a.gguf b.gguf"), 2);
    CHECK_EQ_INT(run("inspect /nonexistent/model.gguf"), 1);
    CHECK_STR_CONTAINS(err_text, "moeinf: /nonexistent/model.gguf:");
    CHECK(out_text[0] == '\0');

    char bad[512];
    test_tmp_path("cli-bad.gguf", bad, sizeof bad);
    struct gguf_bytes b = {0};
    gguf_bytes_header(&b, 4, 0, 0);
    CHECK(gguf_bytes_write(&b, bad));
    gguf_bytes_reset(&b);
    char args[1024];
    snprintf(args, sizeof args, "inspect '%s'", bad);
    CHECK_EQ_INT(run(args), 1);
    CHECK_STR_CONTAINS(err_text, "unsupported GGUF version 4");
    remove(bad);

    char model[1024];
    if (!test_shared_path("testdata/models/tiny-mixtral-Q8_0.gguf", model, sizeof model)) return;
    snprintf(args, sizeof args, "inspect '%s'", model);
    CHECK_EQ_INT(run(args), 0);
    CHECK_STR_CONTAINS(out_text, "llama.expert_count");
    CHECK_STR_CONTAINS(out_text, "tokenizer.ggml.tokens");
    CHECK_STR_CONTAINS(out_text, "string[32000]");
    CHECK_STR_CONTAINS(out_text, "blk.1.ffn_down_exps.weight");
    CHECK_STR_CONTAINS(out_text, "q8_0");
    CHECK_STR_CONTAINS(out_text, "[64, 256, 8]");
    CHECK(err_text[0] == '\0');
}

static void test_gen_model(void) {
    if (run("gen-model --help") < 0) return;
    CHECK_EQ_INT(run("gen-model --help"), 0);
    CHECK_STR_CONTAINS(out_text, "usage: moeinf gen-model");
    CHECK_STR_CONTAINS(out_text, "--preset");
    CHECK_EQ_INT(run("gen-model"), 2);
    CHECK_STR_CONTAINS(err_text, "missing -o FILE");

    char path[512];
    char args[1024];
    test_tmp_path("cli-gen.gguf", path, sizeof path);
    remove(path);

    struct {
        const char *opts, *phrase;
    } bad[] = {
        {"--heads 7", "7 heads do not divide n_embd 256"},
        {"--kv-heads 3", "3 kv heads do not divide 8 heads"},
        {"--top-k 9", "top-k 9"},
        {"--embd 208 --heads 8", "n_embd = 208 is not a multiple of 32"},
        {"--type q4_k_s", "unknown type 'q4_k_s'"},
        {"--embd 128 --heads 4 --kv-heads 2 --type q4_k", "n_embd = 128 is not a multiple of 256"},
        {"--preset llama-70b", "unknown preset 'llama-70b'"},
        {"--layers 0", "invalid value '0' for --layers"},
        {"--layers x", "invalid value 'x' for --layers"},
        {"--seed -1", "invalid value '-1' for --seed"},
        {"--arch mistral4", "arch 'mistral4' is not supported"},
        {"--preset deepseek-v3 --layers 2", "3 dense layers not in [0, layers = 2]"},
        {"--arch qwen2moe", "arch 'qwen2moe' needs 1 to 64 shared experts (got 0)"},
        {"--shared-experts 1", "no shared experts"},
        {"--frobnicate", "unknown option '--frobnicate'"},
        {"--layers", "needs a value"},
    };

    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        snprintf(args, sizeof args, "gen-model -o '%s' %s", path, bad[i].opts);
        CHECK_MSG(run(args) == 2, "%s", bad[i].opts);
        CHECK_STR_CONTAINS(err_text, bad[i].phrase);
        /* exit 2 is an option's problem, said as such (not as a failed file's "moeinf: ") */
        CHECK_MSG(!strncmp(err_text, "moeinf gen-model: ", 18), "%s: %s", bad[i].opts, err_text);
    }
    FILE *f = fopen(path, "rb");
    CHECK(f == NULL); /* no option error wrote anything */
    if (f) fclose(f);

    CHECK_EQ_INT(run("gen-model -o /nonexistent-dir/m.gguf --layers 1"), 1);
    CHECK_STR_CONTAINS(err_text, "moeinf: /nonexistent-dir/m.gguf");
    char dir[512];
    test_tmp_path("", dir, sizeof dir);
    snprintf(args, sizeof args, "gen-model -o '%s' --layers 1", dir);
    CHECK_EQ_INT(run(args), 1);
    CHECK_STR_CONTAINS(err_text, "a directory, not a regular file: cannot write there");

    /* A preset with later overrides, then inspect reads it back. */
    snprintf(args, sizeof args,
             "gen-model --layers 1 -o '%s' --preset mixtral-8x7b --embd 64 --ff 64 --heads 4 "
             "--kv-heads 2 --type f16 --seed 9",
             path);
    CHECK_EQ_INT(run(args), 0);
    CHECK_STR_CONTAINS(out_text, "wrote");
    snprintf(args, sizeof args, "inspect '%s'", path);
    CHECK_EQ_INT(run(args), 0);
    CHECK_STR_CONTAINS(out_text, "llama.block_count                        u32            = 1");
    CHECK_STR_CONTAINS(out_text, "llama.expert_count                       u32            = 8");
    CHECK_STR_CONTAINS(out_text, "llama.context_length                     u32            = 32768");
    CHECK_STR_CONTAINS(out_text, "blk.0.ffn_up_exps.weight");
    CHECK_STR_CONTAINS(out_text, "[64, 64, 8]");
    CHECK_STR_CONTAINS(out_text, "f16");

    /* --experts 0 alone gives a dense model (top-k follows). */
    snprintf(args, sizeof args, "gen-model -o '%s' --experts 0 --layers 1 --type q4_0", path);
    CHECK_EQ_INT(run(args), 0);
    snprintf(args, sizeof args, "inspect '%s'", path);
    CHECK_EQ_INT(run(args), 0);
    CHECK_STR_CONTAINS(out_text, "blk.0.ffn_down.weight");
    CHECK(strstr(out_text, "expert_count") == NULL);
    remove(path);
}

/* The line `moeinf inspect` prints for a metadata key. */
static bool has_kv(const char *key, const char *type, const char *value) {
    char line[256];
    snprintf(line, sizeof line, "  %-40s %-14s = %s\n", key, type, value);
    return strstr(out_text, line) != NULL;
}

/* The presets of the hybrid archs keep their real geometry where no option overrides it:
 * here everything but the layers, experts and widths (so that the files stay small, with a
 * tied lm_head; the vocabulary keeps its real size, padded: the largest part of the time, a
 * few seconds under ASan). Expected values: the models' config.json. */
static void test_gen_model_hybrid_presets(void) {
    char path[512];
    char args[1024];
    test_tmp_path("cli-hybrid.gguf", path, sizeof path);
    for (int next = 0; next < 2; next++) {
        const char *arch = next ? "qwen3next" : "qwen35moe";
        snprintf(args, sizeof args,
                 "gen-model -o '%s' --preset %s --layers 4 --experts 4 --top-k 2 --embd 32 "
                 "--ff 32 --type f16 --tied",
                 path, next ? "qwen3-next-80b-a3b" : "qwen3.6-35b-a3b");
        if (run(args) < 0) return;
        CHECK_EQ_INT(run(args), 0);
        snprintf(args, sizeof args, "inspect '%s'", path);
        CHECK_EQ_INT(run(args), 0);

        static const struct {
            const char *key, *type, *value;
        } kv[] = {{"attention.head_count", "u32", "16"},
                  {"attention.head_count_kv", "u32", "2"},
                  {"attention.key_length", "u32", "256"},
                  {"rope.dimension_count", "u32", "64"},
                  {"rope.freq_base", "f32", "10000000"},
                  {"ssm.conv_kernel", "u32", "4"},
                  {"ssm.state_size", "u32", "128"},
                  {"ssm.group_count", "u32", "16"},
                  {"ssm.time_step_rank", "u32", "32"},
                  {"ssm.inner_size", "u32", "4096"},
                  {"full_attention_interval", "u32", "4"},
                  {"context_length", "u32", "262144"},
                  {"expert_shared_feed_forward_length", "u32", "32"}};

        char key[96];
        snprintf(key, sizeof key, "\"%s\"", arch);
        CHECK_MSG(has_kv("general.architecture", "string", key), "%s", arch);
        for (size_t i = 0; i < sizeof kv / sizeof kv[0]; i++) {
            snprintf(key, sizeof key, "%s.%s", arch, kv[i].key);
            CHECK_MSG(has_kv(key, kv[i].type, kv[i].value), "%s = %s", key, kv[i].value);
        }
        snprintf(key, sizeof key, "%s.vocab_size", arch);
        CHECK_MSG(has_kv(key, "u32", next ? "151936" : "248320"), "%s", key);
        snprintf(key, sizeof key, "%s.rope.dimension_sections", arch);
        if (next) {
            CHECK(strstr(out_text, key) == NULL);
        } else {
            CHECK(has_kv(key, "i32[4]", "[11, 11, 10, 0]"));
        }
        CHECK_STR_CONTAINS(out_text, next ? "blk.0.ssm_ba.weight" : "blk.0.ssm_alpha.weight");
        CHECK_STR_CONTAINS(out_text, "blk.3.attn_q_norm.weight");
    }
    remove(path);
}

/* SIGINT while gen-model streams a large file: the partial "<out>.tmp.<pid>" is removed and
 * the process still dies of SIGINT (as a shell expects). The model is 2 GB, so generating
 * takes seconds; the signal comes as soon as the temp file appears. */
static void test_interrupt_removes_temp(void) {
    const char *bin = getenv("MOEINF_BIN"); // NOLINT(concurrency-mt-unsafe): main thread
    if (!bin) {
        test_skip("MOEINF_BIN unset (run through ctest)");
        return;
    }
    char out[512];
    test_tmp_path("cli-int.gguf", out, sizeof out);
    remove(out);
    CHECK_EQ_INT(test_temp_leftovers("cli-int.gguf"), 0);
    pid_t pid = fork();
    if (pid == 0) {
        signal(SIGINT, SIG_DFL); /* whatever the test runner's disposition */
        execl(bin, bin, "gen-model", "-o", out, "--layers", "8", "--embd", "1024", "--ff", "4096",
              "--type", "f32", "--threads", "1", (char *)NULL);
        _exit(127);
    }
    CHECK(pid > 0);
    if (pid <= 0) return;
    bool seen = false;
    for (int i = 0; i < 2000 && !seen; i++) { /* up to 20 s */
        seen = test_temp_leftovers("cli-int.gguf") > 0;
        if (!seen) usleep(10000);
    }
    CHECK(seen);
    kill(pid, SIGINT);
    int status = 0;
    waitpid(pid, &status, 0);
    CHECK_MSG(WIFSIGNALED(status) && WTERMSIG(status) == SIGINT, "status %d", status);
    CHECK_EQ_INT(test_temp_leftovers("cli-int.gguf"), 0);
    CHECK(!test_file_exists(out));
    remove(out);
}

int main(void) {
    RUN(test_inspect);
    RUN(test_gen_model);
    RUN(test_gen_model_hybrid_presets);
    RUN(test_interrupt_removes_temp);
    return test_report();
}
