/*
 * interrupt.c - signals of the programs (interrupt.h). (1) Removes the temp file of a long write
 * (gen-model, the default model) when the process is interrupted. The library writes
 * "<path>.tmp.<pid>" and renames it only when complete; a SIGINT, SIGTERM or SIGHUP in between
 * would leave the partial temp file (hundreds of MB for a large model). The handler unlinks it and
 * dies of the same signal, so the shell still sees the interrupt. (2) Stops a run in order
 * (cli_stop_on_signal): the handler only notes the signal; the main loop sees it, saves what must
 * survive (--record-routing, --stats-json, --eamc) and then dies of the same signal
 * (cli_stop_finish).
 */
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "app/interrupt.h"
#include "app/output.h"
#include "moeinf.h"

static const int signals[] = {SIGINT, SIGTERM, SIGHUP};
#define N_SIGNALS (sizeof signals / sizeof signals[0])

/* Written only while no handler is installed; the handler reads it (and calls only
 * async-signal-safe functions: unlink, sigaction, raise). */
static char temp_path[4096];
static struct sigaction previous[N_SIGNALS];
static bool installed;

static void on_signal(int sig) {
    unlink(temp_path);
    for (size_t i = 0; i < N_SIGNALS; i++) {
        if (signals[i] == sig) sigaction(sig, &previous[i], NULL);
    }
    raise(sig); /* blocked until the handler returns, then the previous disposition acts */
}

void cli_remove_on_signal(const char *path) {
    if (installed) {
        for (size_t i = 0; i < N_SIGNALS; i++)
            sigaction(signals[i], &previous[i], NULL);
        installed = false;
    }
    if (!path) return;
    if (moeinf_file_temp_path(path, temp_path, sizeof temp_path) >= sizeof temp_path) return;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    for (size_t i = 0; i < N_SIGNALS; i++)
        sigaddset(&sa.sa_mask, signals[i]);
    for (size_t i = 0; i < N_SIGNALS; i++) {
        sigaction(signals[i], NULL, &previous[i]);
        /* a signal the caller ignores (nohup, a background job's SIGINT) stays ignored */
        if (previous[i].sa_handler != SIG_IGN) sigaction(signals[i], &sa, NULL);
    }
    installed = true;
}

static volatile sig_atomic_t stop_sig;

static void on_stop(int sig) {
    stop_sig = sig;
}

void cli_stop_on_signal(bool with_sigint) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_stop; /* no SA_RESTART: a blocking read returns EINTR */
    sigemptyset(&sa.sa_mask);
    for (size_t i = 0; i < N_SIGNALS; i++) {
        if (signals[i] == SIGINT && !with_sigint) continue;
        struct sigaction old;
        sigaction(signals[i], NULL, &old);
        if (old.sa_handler != SIG_IGN) sigaction(signals[i], &sa, NULL);
    }
}

int cli_stop_signal(void) {
    return stop_sig;
}

void cli_stop_finish(void) {
    int sig = stop_sig;
    if (!sig) return;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = SIG_DFL;
    sigemptyset(&sa.sa_mask);
    sigaction(sig, &sa, NULL);
    fflush(NULL);
    raise(sig);
}
