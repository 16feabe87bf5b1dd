/* interrupt.h - the programs' signal handling (interrupt.c): a long write's temp file removed
 * when interrupted, and a run stopped in order. */
#ifndef MOEINF_APP_INTERRUPT_H
#define MOEINF_APP_INTERRUPT_H

#include <stdbool.h>

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

#endif
