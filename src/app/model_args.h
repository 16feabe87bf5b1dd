/* model_args.h - options shared by the subcommands that run a model (run, bench). */
#ifndef MOEINF_APP_MODEL_ARGS_H
#define MOEINF_APP_MODEL_ARGS_H

#include <stdbool.h>

#include "app/expert_args.h"
#include "moeinf.h"

struct model_args {
    const char *model_path; /* NULL: the embedded default */
    struct moeinf_context_params ctx;
    struct moeinf_model_params model;
    struct expert_args experts;
    const char *cmd; /* the subcommand, for messages */
    /* The command's own files (a NULL path: not given), checked by model_args_open with -m,
     * --stats-json and --eamc before the model loads: inputs (-f, --route-trace) and outputs
     * (--record-routing). */
    struct cli_file inputs[2];
    struct cli_file outputs[2];
};

/* Consumes argv[*i] if it is one of -m, -c, -t, -b, --kv-type, --mmap, --no-mmap or an expert-cache
 * option (expert_args.h) (advancing *i past its value). Returns 1 if consumed, 0 if not one of
 * them, -1 on a bad value (message printed). */
int model_args_parse(const char *cmd, struct model_args *a, int argc, char **argv, int *i);

/* The help lines of those options. */
extern const char model_args_help[];

/* Applies the expert options (expert_args_apply), checks the outputs (cli_check_outputs: each
 * writable, none an input or another output), loads the model (generating the default on
 * first use) and creates a context, announcing its expert cache and loading --eamc. Returns
 * CLI_EXIT_OK, or prints "moeinf: <msg>" and returns the exit code (CLI_EXIT_USAGE for a bad option
 * value). */
int model_args_open(struct model_args *a, struct moeinf_model **model, struct moeinf_context **ctx);

/* model_args_open in two steps, for a command that needs the model before its context (bench
 * -f sizes the context to the prompt's tokens): the options, the outputs and the model; then
 * the context, its expert cache announced and --eamc loaded. Each prints why it failed and
 * returns the exit code; model_args_context leaves the model to the caller. */
int model_args_load(struct model_args *a, struct moeinf_model **model);
int model_args_context(struct model_args *a, struct moeinf_model *model,
                       struct moeinf_context **ctx);

#endif
