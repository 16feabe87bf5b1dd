/*
 * progress.c - the progress line of long work (a model load, many tokens) on stderr, redrawn
 * in place with \r, only when stderr is a terminal: in a file or a pipe nothing is written
 * (progress.h).
 */
#include <stdio.h>
#include <unistd.h>

#include "app/args.h"
#include "app/progress.h"

#define REDRAW_S 0.1 /* at most ten redraws a second */

struct cli_progress cli_progress_start(void) {
    struct cli_progress p = {.on = isatty(STDERR_FILENO) != 0, .drawn = false, .last = 0.0};
    return p;
}

/* True when a redraw is due (always for the last step). */
static bool due(struct cli_progress *p, bool last) {
    if (!p->on) return false;
    double t = cli_now();
    if (!last && p->drawn && t - p->last < REDRAW_S) return false;
    p->last = t;
    p->drawn = true;
    return true;
}

void cli_progress_bytes(void *user, uint64_t done, uint64_t total) {
    struct cli_progress *p = user;
    if (!due(p, done >= total)) return;
    /* \033[K clears what a longer previous line left */
    bool gb = total >= 1000000000u;
    double unit = gb ? 1e9 : 1e6;
    fprintf(stderr, "\rloading model: %.1f/%.1f %s\033[K", (double)done / unit,
            (double)total / unit, gb ? "GB" : "MB");
    fflush(stderr);
}

void cli_progress_tokens(struct cli_progress *p, const char *what, long done, long total,
                         double seconds) {
    if (!due(p, done >= total)) return;
    fprintf(stderr, "\r%s: %ld/%ld tokens, %.2f tokens/s\033[K", what, done, total,
            seconds > 0 ? (double)done / seconds : 0.0);
    fflush(stderr);
    if (done >= total) cli_progress_end(p);
}

void cli_progress_end(struct cli_progress *p) {
    if (!p->drawn) return;
    fprintf(stderr, "\r\033[K");
    fflush(stderr);
    p->drawn = false;
}
