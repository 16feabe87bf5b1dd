/*
 * test_cli_files.c - the files the CLI reads and writes, as a user meets them: outputs written
 * atomically at the end and left as they were by a failed run, written with what was measured
 * when SIGTERM stops a run; an output that is an input (or another output), or that the user
 * may not write, refused before the work; exit 2 for an expert cache too small for the model;
 * the text of tokenize, run, logits and bench from a file or standard input (-f). The model is
 * the trained default model of this tree (no ../shared needed).
 */
#include <fcntl.h>
#include <grp.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "golden.h"
#include "moeinf.h"
#include "test.h"

static char model[512]; /* a copy in the scratch folder: tests check it stays as it was */

static int run_cmd(const char *cmd, char *out, size_t out_size, char *err, size_t err_size) {
    return test_run_shell("cli_files", cmd, out, out_size, err, err_size);
}

static const char *bin(void) {
    return test_moeinf_bin();
}

static bool write_file(const char *path, const void *data, size_t n) {
    FILE *f = fopen(path, "wb");
    if (!f) return false;
    bool ok = fwrite(data, 1, n, f) == n;
    return (fclose(f) == 0) && ok;
}

/* True when the file at path holds exactly n bytes equal to data. */
static bool file_is(const char *path, const void *data, size_t n) {
    size_t size = 0;
    char *got = golden_read_file(path, &size);
    bool same = got && size == n && memcmp(got, data, n) == 0;
    free(got);
    return same;
}

/* The ids of text from the library itself (the CLI's -f and arguments must give these). */
static int lib_tokenize(const char *text, size_t len, int32_t **ids) {
    struct moeinf_model_params mp = moeinf_model_params_default();
    mp.vocab_only = true;
    struct moeinf_model *m = NULL;
    struct moeinf_error err = {0};
    size_t n = 0;
    *ids = NULL;
    if (moeinf_model_load(model, &mp, &m, &err) != MOEINF_OK ||
        moeinf_tokenize(m, text, len, true, false, ids, &n, &err) != MOEINF_OK) {
        CHECK_MSG(false, "%s", err.msg);
        n = 0;
    }
    moeinf_model_free(m);
    return (int)n;
}

/* "1 2 3\n" as the CLI prints ids. */
static void ids_line(const int32_t *ids, int n, char *buf, size_t size) {
    size_t at = 0;
    buf[0] = '\0';
    for (int i = 0; i < n && at < size; i++)
        at += (size_t)snprintf(buf + at, size - at, i ? " %d" : "%d", ids[i]);
    if (at < size) snprintf(buf + at, size - at, "\n");
}

/* tmpl with each "{X}" replaced by vals[X - 'A'] (X in A..E), into out. */
static void expand(const char *tmpl, const char *const vals[5], char *out, size_t size) {
    size_t at = 0;
    for (const char *p = tmpl; *p && at + 1 < size; p++) {
        if (p[0] == '{' && p[1] >= 'A' && p[1] <= 'E' && p[2] == '}') {
            at += (size_t)snprintf(out + at, size - at, "%s", vals[p[1] - 'A']);
            if (at >= size) at = size - 1;
            p += 2;
        } else {
            out[at++] = *p;
        }
    }
    out[at] = '\0';
}

/* Item 8: a run that fails after the model loaded leaves --stats-json and --record-routing as
 * they were (they were emptied at the start, and the trace replaced by an empty one); a run
 * that succeeds replaces them. */
static void test_failed_run_keeps_outputs(void) {
    char cmd[4096];
    char out[8192];
    char err[4096];
    char json[512];
    char trace[512];
    test_tmp_path("files_keep.json", json, sizeof json);
    test_tmp_path("files_keep.trace", trace, sizeof trace);
    const char old_json[] = "OLD JSON\n";
    const char old_trace[] = "OLD TRACE\n";
    CHECK(write_file(json, old_json, strlen(old_json)));
    CHECK(write_file(trace, old_trace, strlen(old_trace)));
    /* the prompt does not fit the context: a failure after the model loaded */
    snprintf(cmd, sizeof cmd,
             "%s run -m %s -p 'The function of the river is long' -n 3 -c 3 --expert-cache 50%% "
             "--stats-json %s --record-routing %s",
             bin(), model, json, trace);
    CHECK_EQ_INT(run_cmd(cmd, out, sizeof out, err, sizeof err), 1);
    CHECK_STR_CONTAINS(err, "more than the context (-c 3)");
    CHECK_MSG(file_is(json, old_json, strlen(old_json)), "--stats-json was changed");
    CHECK_MSG(file_is(trace, old_trace, strlen(old_trace)), "--record-routing was changed");
    CHECK_EQ_INT(test_temp_leftovers("files_keep.json"), 0);
    CHECK_EQ_INT(test_temp_leftovers("files_keep.trace"), 0);
    /* the same options with a prompt that fits: both replaced */
    snprintf(cmd, sizeof cmd,
             "%s run -m %s -p 'The function' -n 3 --expert-cache 50%% --stats-json %s "
             "--record-routing %s",
             bin(), model, json, trace);
    CHECK_EQ_INT(run_cmd(cmd, out, sizeof out, err, sizeof err), 0);
    char text[8192];
    test_read_text(json, text, sizeof text);
    CHECK(strncmp(text, "{\"policy\": ", 11) == 0);
    test_read_text(trace, text, sizeof text);
    CHECK(strncmp(text, "# moe-trace v1\n", 15) == 0);
    remove(json);
    remove(trace);
}

/* Item 8: SIGTERM during a run writes what was measured (--stats-json, the routing record)
 * and the process still dies of the signal. The run is held at a known point: its stdout is a
 * pipe of one page and the prompt it echoes before decoding is twice that, so it blocks in
 * that write until this test reads; the signal comes then, the prompt is decoded and no token
 * is generated. */
static void test_interrupted_run_writes(void) {
    char json[512];
    char trace[512];
    char errfile[512];
    char prompt[8500];
    test_tmp_path("files_sig.json", json, sizeof json);
    test_tmp_path("files_sig.trace", trace, sizeof trace);
    test_tmp_path("files_sig.err", errfile, sizeof errfile);
    remove(json);
    remove(trace);
    const char word[] = " representation implementation"; /* 30 bytes, 2 tokens */
    for (int i = 0; i < 280; i++)                         /* 8400 bytes, some 560 tokens */
        memcpy(prompt + (size_t)i * 30, word, 30);
    prompt[(size_t)280 * 30] = 0;
    int32_t *ids = NULL;
    const int n_prompt = lib_tokenize(prompt, strlen(prompt), &ids);
    free(ids);
    CHECK(n_prompt > 100 && n_prompt < 1000);
    int fds[2];
    CHECK(pipe(fds) == 0);
    if (fcntl(fds[1], F_SETPIPE_SZ, 4096) != 4096) {
        close(fds[0]);
        close(fds[1]);
        test_skip("the pipe cannot be made one page long");
        return;
    }
    pid_t pid = fork();
    if (pid == 0) {
        dup2(fds[1], STDOUT_FILENO);
        int e = open(errfile, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (e >= 0) dup2(e, STDERR_FILENO);
        close(fds[0]);
        close(fds[1]);
        execl(bin(), bin(), "run", "-m", model, "-p", prompt, "-n", "50", "-c", "1024", "-t", "1",
              "--expert-cache", "50%", "--stats-json", json, "--record-routing", trace,
              (char *)NULL);
        _exit(127);
    }
    close(fds[1]);
    char c;
    CHECK(read(fds[0], &c, 1) == 1); /* the echo began: the options are read, the model open */
    kill(pid, SIGTERM);
    char buf[4096];
    while (read(fds[0], buf, sizeof buf) > 0) {
    }
    close(fds[0]);
    int status = 0;
    waitpid(pid, &status, 0);
    CHECK_MSG(WIFSIGNALED(status) && WTERMSIG(status) == SIGTERM, "status %d", status);
    char text[16384];
    char want[128];
    test_read_text(json, text, sizeof text);
    snprintf(want, sizeof want, "\"tokens\": %d, \"decode_tokens\": 0,", n_prompt);
    CHECK_MSG(strstr(text, want) != NULL, "--stats-json lacks '%s': %.200s", want, text);
    test_read_text(trace, text, sizeof text);
    snprintf(want, sizeof want, "\n# req 0 moeinf/run prefill=%d decode=0\n", n_prompt);
    CHECK_MSG(strstr(text, want) != NULL, "the trace lacks '%s'", want);
    CHECK_EQ_INT(test_temp_leftovers("files_sig.json"), 0);
    CHECK_EQ_INT(test_temp_leftovers("files_sig.trace"), 0);
    remove(json);
    remove(trace);
    remove(errfile);
}

/* Item 9: an output that is one of the run's inputs (or another output) is refused before
 * any work, whatever path names it; the input stays as it was. */
static void test_output_is_input(void) {
    char cmd[4096];
    char out[8192];
    char err[4096];
    char link[512];
    char text[512];
    char trace[512];
    char newf[512];
    test_tmp_path("files_link.gguf", link, sizeof link);
    test_tmp_path("files_prompt.txt", text, sizeof text);
    test_tmp_path("files_in.trace", trace, sizeof trace);
    test_tmp_path("files_new.json", newf, sizeof newf);
    remove(link);
    remove(newf);
    CHECK(symlink(model, link) == 0);
    const char prompt[] = "The function\n";
    CHECK(write_file(text, prompt, strlen(prompt)));
    size_t model_size = 0;
    char *model_bytes = golden_read_file(model, &model_size);
    CHECK(model_bytes != NULL);
    snprintf(cmd, sizeof cmd, "%s run -m %s -p 'The function' -n 2 --record-routing %s", bin(),
             model, trace);
    CHECK_EQ_INT(run_cmd(cmd, out, sizeof out, err, sizeof err), 0);
    /* {A} the model, {B} its link, {C} the text, {D} the trace, {E} a new file */
    const char *const vals[5] = {model, link, text, trace, newf};

    struct {
        const char *args;
        const char *msg;
    } cases[] = {
        {"logits -m {A} --ids '1 2' -o {A}", "-o {A} is the file of -m {A}"},
        {"logits -m {B} --ids '1 2' -o {A}", "is the file of -m"},
        {"logits -m {A} -f {C} -o {C}", "-o {C} is the file of -f {C}"},
        {"run -m {A} -p hi --record-routing {A}", "--record-routing {A} is the file of -m"},
        {"run -m {A} -p hi --record-routing {B}", "is the file of -m"},
        {"run -m {A} -p hi --expert-cache 50% --eamc {B}", "--eamc {B} is the file of -m"},
        {"run -m {A} -p hi --expert-cache 50% --stats-json {A}", "--stats-json"},
        {"run -m {A} -f {C} --record-routing {C}", "is the file of -f {C}"},
        {"run -m {A} -p hi --expert-cache 50% --stats-json {E} --record-routing {E}",
         "are one file"},
        {"bench -m {A} -f {C} -n 1 -r 1 --record-routing {C}", "is the file of -f"},
        {"bench -m {A} --route-trace {D} --expert-cache 50% --stats-json {D}",
         "--stats-json {D} is the file of --route-trace {D}"},
        {"bench -m {A} -n 1 -r 1 --expert-cache 50% --eamc {A}", "is the file of -m"},
        {"trace filter --trace {D} -o {D}", "trace filter: -o {D} is the file of --trace {D}"},
        {"trace concat {E} {D} -o {D}", "trace concat: -o {D} is the file of the input {D}"},
        {"trace heatmap --trace {D} --index 0 -o {D}", "-o {D} is the file of --trace {D}"},
        {"sim --trace {D} --cache 4 --eamc {D}", "sim: --eamc {D} is the file of --trace {D}"},
    };

    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char args[2048];
        char msg[1024];
        expand(cases[i].args, vals, args, sizeof args);
        expand(cases[i].msg, vals, msg, sizeof msg);
        snprintf(cmd, sizeof cmd, "%s %s", bin(), args);
        int rc = run_cmd(cmd, out, sizeof out, err, sizeof err);
        CHECK_MSG(rc == 2, "%s: exit %d: %s", args, rc, err);
        CHECK_MSG(strstr(err, msg) != NULL, "%s: '%s' lacks '%s'", args, err, msg);
        CHECK_MSG(strchr(err, '\n') == err + strlen(err) - 1, "%s: not one line: %s", args, err);
    }
    CHECK_MSG(model_bytes && file_is(model, model_bytes, model_size), "the model was changed");
    CHECK_MSG(file_is(text, prompt, strlen(prompt)), "the prompt file was changed");
    char head[64];
    test_read_text(trace, head, sizeof head);
    CHECK_MSG(strncmp(head, "# moe-trace v1\n", 15) == 0, "the trace was changed");
    CHECK(!test_file_exists(newf));
    free(model_bytes);
    remove(link);
    remove(text);
    remove(trace);
}

/* Runs cmd through sh as user `uid` (when not 0; else as this process), stdout and stderr into
 * the files out_path and err_path, opened before the user changes. Returns the exit code. */
static int run_as(uid_t uid, const char *cmd, const char *out_path, const char *err_path) {
    pid_t pid = fork();
    if (pid == 0) {
        int o = open(out_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        int e = open(err_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (o < 0 || e < 0) _exit(126);
        dup2(o, STDOUT_FILENO);
        dup2(e, STDERR_FILENO);
        if (uid != 0 && (setgroups(0, NULL) != 0 || setgid(uid) != 0 || setuid(uid) != 0)) {
            _exit(126);
        }
        execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
        _exit(127);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

/* Item 9: an existing output the user may not write is refused by every output option before
 * the work, though its folder would let a rename replace it: as root, the file is root's and
 * the runs are another user's (nobody) in a folder everyone may write; otherwise the file is
 * the user's own, read-only. The file stays as it was. */
static void test_read_only_output(void) {
    char dir[512];
    char ro[512];
    char eamc[512];
    char out_path[512];
    char err_path[512];
    char cmd[4096];
    char err[4096];
    char exe[512];
    char mdl[512];
    /* under /tmp, with copies of the binary and the model: the build tree may be out of the
     * other user's reach */
    snprintf(dir, sizeof dir, "/tmp/moeinf-files-ro-XXXXXX");
    CHECK(mkdtemp(dir) != NULL);
    CHECK(chmod(dir, 0777) == 0); /* whatever the umask */
    snprintf(exe, sizeof exe, "%s/moeinf", dir);
    snprintf(mdl, sizeof mdl, "%s/model.gguf", dir);
    size_t n = 0;
    char *bytes = golden_read_file(bin(), &n);
    CHECK(bytes && write_file(exe, bytes, n) && chmod(exe, 0755) == 0);
    free(bytes);
    bytes = golden_read_file(model, &n);
    CHECK(bytes && write_file(mdl, bytes, n) && chmod(mdl, 0644) == 0);
    free(bytes);
    const uid_t as = geteuid() == 0 ? 65534 : 0; /* nobody, or this user */
    snprintf(out_path, sizeof out_path, "%s/stdout.txt", dir);
    snprintf(err_path, sizeof err_path, "%s/stderr.txt", dir);
    snprintf(cmd, sizeof cmd, "%s --version", exe);
    if (run_as(as, cmd, out_path, err_path) != 0) {
        test_skip("the binary does not run as the other user here (/tmp noexec?)");
        remove(exe);
        remove(mdl);
        remove(out_path);
        remove(err_path);
        rmdir(dir);
        return;
    }
    snprintf(ro, sizeof ro, "%s/ro.out", dir);
    snprintf(eamc, sizeof eamc, "%s/ro.eamc", dir);
    /* a valid state file, so that --eamc gets as far as saving it */
    snprintf(cmd, sizeof cmd, "%s run -m %s -p 'The function' -n 2 --expert-cache 50%% --eamc %s",
             exe, mdl, eamc);
    CHECK_EQ_INT(run_as(0, cmd, out_path, err_path), 0);
    size_t eamc_size = 0;
    char *eamc_bytes = golden_read_file(eamc, &eamc_size);
    CHECK(eamc_bytes != NULL);
    const char keep[] = "KEEP\n";
    CHECK(write_file(ro, keep, strlen(keep)));
    const mode_t mode = as ? 0644 : 0444;
    CHECK(chmod(ro, mode) == 0 && chmod(eamc, mode) == 0);
    const char *const vals[5] = {mdl, ro, "", "", ""};
    const char *cases[] = {
        "run -m {A} -p 'The function' -n 2 --record-routing {B}",
        "run -m {A} -p 'The function' -n 2 --expert-cache 50% --stats-json {B}",
        "bench -m {A} -p 2 -n 1 -r 1 --record-routing {B}",
        "logits -m {A} --ids '1 2' -o {B}",
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char args[2048];
        expand(cases[i], vals, args, sizeof args);
        snprintf(cmd, sizeof cmd, "%s %s", exe, args);
        int rc = run_as(as, cmd, out_path, err_path);
        test_read_text(err_path, err, sizeof err);
        CHECK_MSG(rc == 1, "%s: exit %d: %s", args, rc, err);
        CHECK_MSG(strstr(err, ": cannot write: Permission denied") != NULL, "%s: %s", args, err);
        CHECK_MSG(strstr(err, "expert cache:") == NULL, "%s: refused after the work", args);
        CHECK_MSG(file_is(ro, keep, strlen(keep)), "%s: the file was changed", args);
    }
    snprintf(cmd, sizeof cmd, "%s run -m %s -p 'The function' -n 2 --expert-cache 50%% --eamc %s",
             exe, mdl, eamc);
    int rc = run_as(as, cmd, out_path, err_path);
    test_read_text(err_path, err, sizeof err);
    CHECK_MSG(rc == 1, "--eamc: exit %d: %s", rc, err);
    CHECK_STR_CONTAINS(err, ": cannot write: Permission denied");
    CHECK_MSG(eamc_bytes && file_is(eamc, eamc_bytes, eamc_size), "--eamc: the file was changed");
    free(eamc_bytes);
    remove(ro);
    remove(eamc);
    remove(exe);
    remove(mdl);
    remove(out_path);
    remove(err_path);
    rmdir(dir);
}

/* Item 10: bad cache options are usage errors (exit 2) before the model loads. */
static void test_cache_option_exits(void) {
    char cmd[4096];
    char out[8192];
    char err[4096];
    /* a policy the engine cannot run: refused before the model is even opened */
    const char *policies[] = {"nosuch", "", "belady"};
    for (int i = 0; i < 3; i++) {
        snprintf(cmd, sizeof cmd,
                 "%s run -m /nonexistent/m.gguf -p hi --expert-cache 50%% --policy '%s'", bin(),
                 policies[i]);
        CHECK_MSG(run_cmd(cmd, out, sizeof out, err, sizeof err) == 2, "--policy '%s': %s",
                  policies[i], err);
        CHECK_STR_CONTAINS(err, "moeinf run: --policy: unknown cache policy");
    }
    /* fewer slots than top-k (2): one slot of 60 KiB, or 1% of 64 experts */
    const char *sizes[] = {"60K", "1%", "1"};
    const char *cmds[] = {"run -m {A} -p hi", "bench -m {A} -p 2 -n 1 -r 1",
                          "logits -m {A} --ids '1 2' -o /dev/null"};
    const char *const vals[5] = {model, "", "", "", ""};
    for (int i = 0; i < 3; i++) {
        char args[1024];
        expand(cmds[i], vals, args, sizeof args);
        snprintf(cmd, sizeof cmd, "%s %s --expert-cache %s", bin(), args, sizes[i]);
        CHECK_MSG(run_cmd(cmd, out, sizeof out, err, sizeof err) == 2, "%s: %s", cmd, err);
        CHECK_MSG(strstr(err, i < 2 ? ": --expert-cache: 1 slot of 0.06 MiB, too small: one token "
                                      "uses 2 experts per layer, so at least 2 slots"
                                    : ": --expert-cache: 0 slots of 0.06 MiB") != NULL,
                  "%s: %s", sizes[i], err);
        CHECK(strstr(err, "expert cache:") == NULL); /* no cache was made */
    }
    /* the library's own message (a model whose header is not read first), singular too */
    struct moeinf_model_params mp = moeinf_model_params_default();
    mp.offload_experts = true;
    struct moeinf_model *m = NULL;
    struct moeinf_context *ctx = NULL;
    struct moeinf_error e = {0};
    CHECK_MSG(moeinf_model_load(model, &mp, &m, &e) == MOEINF_OK, "%s", e.msg);
    struct moeinf_context_params cp = moeinf_context_params_default();
    cp.n_ctx = 16;
    CHECK(moeinf_expert_cache_parse("60K", &cp.expert_cache, &e) == MOEINF_OK);
    CHECK(m && moeinf_context_init(m, &cp, &ctx, &e) == MOEINF_ERR_ARG);
    CHECK_MSG(strstr(e.msg, "MiB hold 1 slot of 0.06 MiB") != NULL, "%s", e.msg);
    moeinf_context_free(ctx);
    moeinf_model_free(m);
    /* spaces around a size parse alike on both sides */
    const char *spaced[] = {"50%", "50% ", " 50%", " 50% "};
    for (int i = 0; i < 4; i++) {
        snprintf(cmd, sizeof cmd, "%s run -m %s -p hi -n 1 --expert-cache '%s'", bin(), model,
                 spaced[i]);
        CHECK_MSG(run_cmd(cmd, out, sizeof out, err, sizeof err) == 0, "'%s': %s", spaced[i], err);
        CHECK_STR_CONTAINS(err, "expert cache: 32 of 64 experts (50.0%)");
    }
}

/* Item 14: text from a file or standard input (-f), text that starts with '-' after --, text
 * larger than an argument may be; -p (or TEXT, --ids) together with -f is refused. */
static void test_text_from_file(void) {
    char cmd[4096];
    char out[16384];
    char err[4096];
    char file[512];
    char want[16384];
    test_tmp_path("files_text.txt", file, sizeof file);
    int32_t *ids = NULL;
    /* text that starts with '-': after --, or from a file (one final newline dropped) */
    int n = lib_tokenize("-5 apples", 9, &ids);
    ids_line(ids, n, want, sizeof want);
    free(ids);
    snprintf(cmd, sizeof cmd, "%s tokenize -m %s -- '-5 apples'", bin(), model);
    CHECK_EQ_INT(run_cmd(cmd, out, sizeof out, err, sizeof err), 0);
    CHECK_MSG(strcmp(out, want) == 0, "got %s want %s", out, want);
    CHECK(write_file(file, "-5 apples\n", 10));
    snprintf(cmd, sizeof cmd, "%s tokenize -m %s -f %s", bin(), model, file);
    CHECK_EQ_INT(run_cmd(cmd, out, sizeof out, err, sizeof err), 0);
    CHECK_MSG(strcmp(out, want) == 0, "got %s want %s", out, want);
    snprintf(cmd, sizeof cmd, "%s tokenize -m %s --file - < %s", bin(), model, file);
    CHECK_EQ_INT(run_cmd(cmd, out, sizeof out, err, sizeof err), 0);
    CHECK_MSG(strcmp(out, want) == 0, "got %s want %s", out, want);
    /* a lone - is standard input now (it was the text "-"); -- - is the text "-" */
    snprintf(cmd, sizeof cmd, "%s tokenize -m %s - < %s", bin(), model, file);
    CHECK_EQ_INT(run_cmd(cmd, out, sizeof out, err, sizeof err), 0);
    CHECK_MSG(strcmp(out, want) == 0, "got %s want %s", out, want);
    n = lib_tokenize("-", 1, &ids);
    ids_line(ids, n, want, sizeof want);
    free(ids);
    snprintf(cmd, sizeof cmd, "%s tokenize -m %s -- -", bin(), model);
    CHECK_EQ_INT(run_cmd(cmd, out, sizeof out, err, sizeof err), 0);
    CHECK_MSG(strcmp(out, want) == 0, "got %s want %s", out, want);
    /* an unknown option names the way out; two texts are refused */
    snprintf(cmd, sizeof cmd, "%s tokenize -m %s -5", bin(), model);
    CHECK_EQ_INT(run_cmd(cmd, out, sizeof out, err, sizeof err), 2);
    CHECK_STR_CONTAINS(err, "unknown option '-5' (write -- before a TEXT that starts with -)");
    snprintf(cmd, sizeof cmd, "%s tokenize -m %s hello -f %s", bin(), model, file);
    CHECK_EQ_INT(run_cmd(cmd, out, sizeof out, err, sizeof err), 2);
    CHECK_STR_CONTAINS(err, "give the text once");
    /* 200 KiB of text: more than one argument may hold */
    const size_t big_n = (size_t)200 * 1024;
    char *big = malloc(big_n);
    CHECK(big != NULL);
    if (!big) return;
    for (size_t i = 0; i < big_n; i++)
        big[i] = "implementation of the "[i % 23];
    CHECK(write_file(file, big, big_n));
    n = lib_tokenize(big, big_n, &ids);
    free(ids);
    free(big);
    snprintf(cmd, sizeof cmd, "%s tokenize -m %s -f %s | wc -w", bin(), model, file);
    CHECK_EQ_INT(run_cmd(cmd, out, sizeof out, err, sizeof err), 0);
    CHECK_MSG(strtol(out, NULL, 10) == n && n > 10000, "%s ids, the library %d", out, n);
    /* run: -f gives the same text as -p */
    CHECK(write_file(file, "The function\n", 13));
    char want_run[16384];
    snprintf(cmd, sizeof cmd, "%s run -m %s -p 'The function' -n 4 --temp 0 --print-ids", bin(),
             model);
    CHECK_EQ_INT(run_cmd(cmd, want_run, sizeof want_run, err, sizeof err), 0);
    snprintf(cmd, sizeof cmd, "%s run -m %s -f %s -n 4 --temp 0 --print-ids", bin(), model, file);
    CHECK_EQ_INT(run_cmd(cmd, out, sizeof out, err, sizeof err), 0);
    CHECK_MSG(strcmp(out, want_run) == 0, "got %s want %s", out, want_run);
    CHECK_STR_CONTAINS(out, "\nids: ");
    snprintf(cmd, sizeof cmd, "%s run -m %s -p x -f %s", bin(), model, file);
    CHECK_EQ_INT(run_cmd(cmd, out, sizeof out, err, sizeof err), 2);
    CHECK_STR_CONTAINS(err, "moeinf run: -p and -f both give the prompt");
    /* logits: -f gives the logits of the text's ids */
    n = lib_tokenize("The function", 12, &ids);
    char ids_arg[256];
    ids_line(ids, n, ids_arg, sizeof ids_arg);
    ids_arg[strlen(ids_arg) - 1] = '\0';
    free(ids);
    char l1[512];
    char l2[512];
    test_tmp_path("files_l1.f32", l1, sizeof l1);
    test_tmp_path("files_l2.f32", l2, sizeof l2);
    snprintf(cmd, sizeof cmd, "%s logits -m %s --ids '%s' -o %s && %s logits -m %s -f - -o %s < %s",
             bin(), model, ids_arg, l1, bin(), model, l2, file);
    CHECK_EQ_INT(run_cmd(cmd, out, sizeof out, err, sizeof err), 0);
    size_t s1 = 0;
    size_t s2 = 0;
    char *b1 = golden_read_file(l1, &s1);
    char *b2 = golden_read_file(l2, &s2);
    CHECK(b1 && b2 && s1 == (size_t)n * 2048 * sizeof(float) && s1 == s2 && !memcmp(b1, b2, s1));
    free(b1);
    free(b2);
    snprintf(cmd, sizeof cmd, "%s logits -m %s --ids 1 -f %s -o %s", bin(), model, file, l1);
    CHECK_EQ_INT(run_cmd(cmd, out, sizeof out, err, sizeof err), 2);
    CHECK_STR_CONTAINS(err, "--ids and -f both give the prompt");
    /* bench: the prompt is the file's tokens */
    snprintf(cmd, sizeof cmd, "%s bench -m %s -f %s -n 1 -r 1", bin(), model, file);
    CHECK_EQ_INT(run_cmd(cmd, out, sizeof out, err, sizeof err), 0);
    char row[64];
    snprintf(row, sizeof row, "\nprefill  %8d ", n);
    CHECK_MSG(strstr(out, row) != NULL, "no '%s' in %s", row, out);
    snprintf(cmd, sizeof cmd, "%s bench -m %s -p 4 -f %s", bin(), model, file);
    CHECK_EQ_INT(run_cmd(cmd, out, sizeof out, err, sizeof err), 2);
    CHECK_STR_CONTAINS(err, "moeinf bench: -p and -f both give the prompt");
    remove(l1);
    remove(l2);
    remove(file);
}

int main(void) {
    char src[512];
    test_src_path("models/trained-moe-Q8_0.gguf", src, sizeof src);
    test_tmp_path("files_model.gguf", model, sizeof model);
    size_t n = 0;
    char *bytes = golden_read_file(src, &n);
    CHECK(bytes && write_file(model, bytes, n) && chmod(model, 0644) == 0);
    free(bytes);
    RUN(test_failed_run_keeps_outputs);
    RUN(test_interrupted_run_writes);
    RUN(test_output_is_input);
    RUN(test_read_only_output);
    RUN(test_cache_option_exits);
    RUN(test_text_from_file);
    remove(model);
    return test_report();
}
