/* model_args.c - the -m/-c/-t/-b/--parallel/--kv-type options and opening a model with them. */
#include "app/model_args.h"

#include <limits.h>
#include <stdio.h>
#include <string.h>

#include "app/args.h"
#include "app/default_model.h"
#include "app/param_flags.h"
#include "app/progress.h"

const char model_args_help[] =
    "  -m MODEL        GGUF model file (default: the embedded default model, written on\n"
    "                  first use to $XDG_CACHE_HOME/moeinf or ~/.cache/moeinf)\n"
    "  -c N            context size in tokens (default: run 4096, bench P + N + 1)\n"
    "  -t N            threads (default: the CPUs this process may use)\n"
    "  -b N            micro-batch: tokens of one forward pass (default 512)\n"
    "  --parallel N    sequences the context holds, sharing the -c positions (default:\n"
    "                  serve 4, the other commands 1)\n"
    "  --kv-type T     KV cache type f16|f32 (default f16)\n"
    "  --no-mmap       read the model into memory (default when it fits with room to\n"
    "                  spare: faster decode, on huge pages)\n"
    "  --mmap          map the model file instead (default when it does not fit: no\n"
    "                  copy, pages shared with other processes)\n" EXPERT_ARGS_HELP;

int model_args_parse(const char *cmd, struct model_args *a, int argc, char **argv, int *i) {
    const char *opt = argv[*i];
    long v;
    a->cmd = cmd;
    int er = expert_args_parse(cmd, &a->experts, argc, argv, i);
    if (er != 0) return er;
    if (!strcmp(opt, "--no-mmap") || !strcmp(opt, "--mmap")) {
        a->model.load_mode = !strcmp(opt, "--mmap") ? MOEINF_LOAD_MAP : MOEINF_LOAD_READ;
        return 1;
    }
    if (strcmp(opt, "-m") != 0 && strcmp(opt, "--model") != 0 && strcmp(opt, "-c") != 0 &&
        strcmp(opt, "-t") != 0 && strcmp(opt, "-b") != 0 && strcmp(opt, "--kv-type") != 0 &&
        strcmp(opt, "--parallel") != 0) {
        return 0;
    }
    const char *val = cli_option_value(cmd, argc, argv, i);
    if (!val) return -1;
    if (!strcmp(opt, "-m") || !strcmp(opt, "--model")) {
        a->model_path = val;
    } else if (!strcmp(opt, "-c")) {
        if (!cli_parse_long(cmd, opt, val, INT_MIN, INT_MAX, &v)) return -1;
        a->ctx.n_ctx = (int)v;
    } else if (!strcmp(opt, "-t")) {
        if (!cli_parse_long(cmd, opt, val, INT_MIN, INT_MAX, &v)) return -1;
        a->ctx.n_threads = (int)v;
    } else if (!strcmp(opt, "-b")) {
        if (!cli_parse_long(cmd, opt, val, INT_MIN, INT_MAX, &v)) return -1;
        a->ctx.n_batch = (int)v;
    } else if (!strcmp(opt, "--parallel")) {
        if (!cli_parse_long(cmd, opt, val, INT_MIN, INT_MAX, &v)) return -1;
        a->ctx.n_seq = (int)v;
    } else if (!strcmp(val, "f16")) {
        a->ctx.kv_type = MOEINF_KV_F16;
    } else if (!strcmp(val, "f32")) {
        a->ctx.kv_type = MOEINF_KV_F32;
    } else {
        fprintf(stderr, "moeinf %s: --kv-type must be f16 or f32, not '%s'\n", cmd, val);
        return -1;
    }
    return 1;
}

int model_args_load(struct model_args *a, struct moeinf_model **model) {
    struct moeinf_error err = {0};
    const char *cmd = a->cmd ? a->cmd : "run";
    *model = NULL;
    /* the options first: a bad value writes nothing, not even the default model */
    int rc = expert_args_apply(cmd, &a->experts, &a->model, &a->ctx);
    if (rc != CLI_EXIT_OK) return rc;
    /* the outputs are written after the work: one that cannot be, or that would replace an
     * input, is refused before the model loads */
    struct cli_file outputs[4] = {a->outputs[0], a->outputs[1]};
    expert_args_outputs(&a->experts, outputs + 2);
    const struct cli_file inputs[3] = {{"-m", a->model_path}, a->inputs[0], a->inputs[1]};
    rc = cli_check_outputs(cmd, outputs, 4, inputs, 3);
    if (rc != CLI_EXIT_OK) return rc;
    char default_path[1024];
    const char *path = a->model_path;
    if (!path) {
        if (!cli_default_model(default_path, sizeof default_path, &err)) return cli_fail(&err);
        path = default_path;
    }
    /* a cache too small for the file's geometry, from its header: before the load */
    rc = expert_args_check_cache(cmd, path, &a->ctx);
    if (rc != CLI_EXIT_OK) return rc;
    struct cli_progress progress = cli_progress_start();
    a->model.progress = cli_progress_bytes;
    a->model.progress_user = &progress;
    enum moeinf_status lst = moeinf_model_load(path, &a->model, model, &err);
    cli_progress_end(&progress);
    a->model.progress = NULL;
    a->model.progress_user = NULL;
    if (lst != MOEINF_OK) {
        *model = NULL;
        /* a parameter the loaded model refuses is named by its option */
        return cli_param_fail(cmd, &err, CLI_EXIT_FAIL);
    }
    return CLI_EXIT_OK;
}

int model_args_context(struct model_args *a, struct moeinf_model *model,
                       struct moeinf_context **ctx) {
    struct moeinf_error err = {0};
    const char *cmd = a->cmd ? a->cmd : "run";
    *ctx = NULL;
    if (moeinf_context_init(model, &a->ctx, ctx, &err) != MOEINF_OK) {
        *ctx = NULL;
        return cli_param_fail(cmd, &err, CLI_EXIT_FAIL);
    }
    if (a->experts.cache) expert_args_announce(*ctx);
    int rc = expert_args_warm_start(&a->experts, *ctx);
    if (rc != CLI_EXIT_OK) {
        moeinf_context_free(*ctx);
        *ctx = NULL;
    }
    return rc;
}

int model_args_open(struct model_args *a, struct moeinf_model **model,
                    struct moeinf_context **ctx) {
    *ctx = NULL;
    int rc = model_args_load(a, model);
    if (rc == CLI_EXIT_OK) rc = model_args_context(a, *model, ctx);
    if (rc != CLI_EXIT_OK) {
        moeinf_model_free(*model);
        *model = NULL;
    }
    return rc;
}
