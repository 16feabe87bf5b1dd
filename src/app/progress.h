/* progress.h - the progress line of long work on stderr (progress.c): redrawn in place, at
 * most ten times a second, and only when stderr is a terminal (nothing at all otherwise). */
#ifndef MOEINF_APP_PROGRESS_H
#define MOEINF_APP_PROGRESS_H

#include <stdbool.h>
#include <stdint.h>

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

#endif
