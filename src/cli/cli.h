/*
 * cli.h - the moeinf command line: one cmd_<name>.c per subcommand, table in main.c.
 * The CLI uses only the public headers moeinf.h and moeinf_sim.h (plus this file), except
 * bench_replay.c: routing replay is internal (engine_replay.h), a benchmark tool.
 *
 * Exit codes: 0 success; 1 bad file or runtime failure (one line "moeinf: <msg>" on stderr);
 * 2 bad option or value (usage on stderr).
 */
#ifndef MOEINF_CLI_H
#define MOEINF_CLI_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "moeinf.h"

#define CLI_EXIT_OK    0
#define CLI_EXIT_FAIL  1
#define CLI_EXIT_USAGE 2

int cmd_inspect(int argc, char **argv);
int cmd_gen_model(int argc, char **argv);
int cmd_tokenize(int argc, char **argv);
int cmd_logits(int argc, char **argv);
int cmd_run(int argc, char **argv);
int cmd_bench(int argc, char **argv);
int cmd_sim(int argc, char **argv);
int cmd_trace(int argc, char **argv);
int cmd_serve(int argc, char **argv);
int cmd_chat(int argc, char **argv);

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

/* While a long output is written to `path`, a SIGINT, SIGTERM or SIGHUP removes its temp
 * file (moeinf_file_temp_path) before the process dies of the signal. NULL restores the
 * previous handlers. */
void cli_remove_on_signal(const char *path);

/* A SIGTERM or SIGHUP (and SIGINT when with_sigint) from now on only sets a flag, which
 * cli_stop_signal returns (0: none yet); the loop that sees it stops, saves, and calls
 * cli_stop_finish, which dies of that signal (nothing when none came). Signals the caller
 * ignores stay ignored. */
void cli_stop_on_signal(bool with_sigint);
int cli_stop_signal(void);
void cli_stop_finish(void);

/* The progress line of long work on stderr (progress.c): redrawn in place, at most ten times
 * a second, and only when stderr is a terminal (nothing at all otherwise). */
struct cli_progress {
    bool on;    /* stderr is a terminal */
    bool drawn; /* a line is on screen */
    double last;
};

struct cli_progress cli_progress_start(void);
/* "loading model: 1.2/7.3 GB" (MB below a GB); user is the struct cli_progress
 * (moeinf_model_params.progress) */
void cli_progress_bytes(void *user, uint64_t done, uint64_t total);
/* "WHAT: 37/128 tokens, 12.30 tokens/s"; the last step (done >= total) is drawn, then cleared */
void cli_progress_tokens(struct cli_progress *p, const char *what, long done, long total,
                         double seconds);
/* Clears the line, so that what follows starts clean. */
void cli_progress_end(struct cli_progress *p);

/* The default model path, written into buf: $MOEINF_DEFAULT_MODEL, else
 * $XDG_CACHE_HOME/moeinf/default-moe-HASH.gguf, else $HOME/.cache/moeinf/default-moe-HASH.gguf
 * (HASH: of the embedded model; an unset or missing HOME is an error). A missing file (or a
 * cached one of the wrong size) is written from the model embedded in the binary. */
bool cli_default_model(char *buf, size_t size, struct moeinf_error *err);

#endif
