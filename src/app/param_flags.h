/*
 * param_flags.h - the library names a parameter in its messages ("expert_prefetch: -1 is not
 * in [0, 64]"); the command line says the option the user wrote ("--prefetch: -1 is not in
 * [0, 64]"). This is the one table between the two.
 */
#ifndef MOEINF_APP_PARAM_FLAGS_H
#define MOEINF_APP_PARAM_FLAGS_H

#include <stddef.h>

#include "moeinf.h"

/* msg with every parameter name of the table (a whole word) replaced by its option, into out
 * (truncated to size, always terminated). */
void cli_param_flags(const char *msg, char *out, size_t size);

/* Prints err's message with the options named on stderr, as "moeinf CMD: ..." for
 * CLI_EXIT_USAGE and "moeinf: ..." for a failure (app/args.h); returns code. */
int cli_param_fail(const char *cmd, const struct moeinf_error *err, int code);

#endif
