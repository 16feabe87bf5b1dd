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
};

/* Consumes argv[*i] if it is one of -m, -c, -t, -b, --kv-type, --mmap, --no-mmap or an expert-cache
 * option (expert_args.h) (advancing *i past its value). Returns 1 if consumed, 0 if not one of
 * them, -1 on a bad value (message printed). */
int model_args_parse(const char *cmd, struct model_args *a, int argc, char **argv, int *i);

/* The help lines of those options. */
extern const char model_args_help[];

/* Applies the expert options (expert_args_apply), loads the model (generating the default on
 * first use) and creates a context, announcing its expert cache and loading --eamc. Returns
 * CLI_EXIT_OK, or prints "moeinf: <msg>" and returns the exit code (CLI_EXIT_USAGE for a bad option
 * value). */
int model_args_open(struct model_args *a, struct moeinf_model **model, struct moeinf_context **ctx);

#endif
