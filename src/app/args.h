/*
 * args.h - what every subcommand of the programs (the moeinf CLI, its server) uses to read
 * its options and report: exit codes, strict number parsing, option values, timing. In
 * src/app, the internal library the programs and tests link and libmoeinf.so does not
 * export.
 *
 * Exit codes: 0 success; 1 bad file or runtime failure (one line "moeinf: <msg>" on stderr);
 * 2 bad option or value (usage on stderr).
 */
#ifndef MOEINF_APP_ARGS_H
#define MOEINF_APP_ARGS_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "moeinf.h"

#define CLI_EXIT_OK    0
#define CLI_EXIT_FAIL  1
#define CLI_EXIT_USAGE 2

/* Monotonic seconds, for timing what a command did. */
double cli_now(void);

/* Prints "moeinf: <msg>" for a failed call; returns CLI_EXIT_FAIL. */
int cli_fail(const struct moeinf_error *err);

/*
 * Strict number parsing for option values: the whole string must be a number within
 * [lo, hi]. On a bad value prints "moeinf <cmd>: invalid value 'v' for opt: why" to stderr
 * and returns false.
 */
bool cli_parse_long(const char *cmd, const char *opt, const char *s, long lo, long hi, long *out);
bool cli_parse_u64(const char *cmd, const char *opt, const char *s, uint64_t *out);
bool cli_parse_float(const char *cmd, const char *opt, const char *s, double lo, double hi,
                     float *out);

/* True if a is one of the NULL-terminated names. */
bool cli_is_one_of(const char *a, const char *const *names);

/* Prints "moeinf CMD: unknown option 'a'" (or "unexpected argument 'a'" when a is not an
 * option) and the usage (when not NULL) on stderr; returns CLI_EXIT_USAGE. */
int cli_bad_argument(const char *cmd, const char *a, void (*usage)(FILE *out));

/* Value of option argv[*i] (advances *i); prints an error and returns NULL if missing. */
const char *cli_option_value(const char *cmd, int argc, char **argv, int *i);

#endif
