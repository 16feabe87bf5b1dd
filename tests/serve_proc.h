/*
 * serve_proc.h - `moeinf serve` as a child process, for the server's tests (test_serve.c,
 * test_serve_conn.c, test_serve_fields.c): start it on port 0, read the port it prints, send it
 * requests through curl, stop it with SIGTERM and read its exit code.
 */
#ifndef MOEINF_TEST_SERVE_PROC_H
#define MOEINF_TEST_SERVE_PROC_H

#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "test.h"

struct server {
    pid_t pid;
    int port;
};

static inline double serve_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Starts `ENV moeinf serve -m MODEL --host HOST --port 0 ARGS` (ENV: NULL or variable
 * assignments) and reads the port from the line it prints ("listening on http://HOST:" or,
 * with a ':' in HOST, "http://[HOST]:"). False when it exits first (its stderr then in err,
 * when err is not NULL) or prints no port within 60 s. TAG names its output files. */
static inline bool serve_proc_start(struct server *s, const char *tag, const char *env,
                                    const char *host, const char *model, const char *args,
                                    char *err, size_t err_size) {
    char out[512];
    char err_path[512];
    char name[128];
    char cmd[4096];
    char want[128];
    snprintf(name, sizeof name, "%s-serve.out", tag);
    test_tmp_path(name, out, sizeof out);
    snprintf(name, sizeof name, "%s-serve.err", tag);
    test_tmp_path(name, err_path, sizeof err_path);
    remove(out);
    bool v6 = strchr(host, ':') != NULL;
    snprintf(want, sizeof want, "listening on http://%s%s%s:", v6 ? "[" : "", host, v6 ? "]" : "");
    snprintf(cmd, sizeof cmd, "%s exec '%s' serve -m '%s' --host %s --port 0 %s >'%s' 2>'%s'",
             env ? env : "", test_moeinf_bin(), model, host, args, out, err_path);
    if (err) err[0] = '\0';
    s->pid = fork();
    if (s->pid == 0) {
        execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
        _exit(127);
    }
    for (double t0 = serve_now(); serve_now() - t0 < 60;) {
        char text[512];
        test_read_text(out, text, sizeof text);
        const char *p = strstr(text, want);
        if (p) {
            s->port = (int)strtol(p + strlen(want), NULL, 10);
            return s->port > 0;
        }
        int st;
        if (waitpid(s->pid, &st, WNOHANG) == s->pid) {
            if (err) test_read_text(err_path, err, err_size);
            return false;
        }
        usleep(20000);
    }
    return false;
}

/* SIGTERM, then the exit code (-1 when it did not exit by itself within 60 s). */
static inline int serve_proc_stop(struct server *s) {
    kill(s->pid, SIGTERM);
    for (double t0 = serve_now(); serve_now() - t0 < 60;) {
        int st;
        if (waitpid(s->pid, &st, WNOHANG) == s->pid) return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
        usleep(20000);
    }
    kill(s->pid, SIGKILL);
    waitpid(s->pid, NULL, 0);
    return -1;
}

/* One request through curl to the server s: METHOD PATH with the JSON body (NULL: none) and
 * EXTRA curl options (NULL: none). Returns the HTTP status (0: no answer), the body into out. */
static inline int serve_http(const struct server *s, const char *method, const char *path,
                             const char *body, const char *extra, char *out, size_t out_size) {
    static int n; /* the pid too: the server tests run side by side in one folder */
    char body_path[512];
    char resp_path[512];
    char name[64];
    char cmd[4096];
    char status[64];
    char err[1024];
    snprintf(name, sizeof name, "serve-body-%d-%d", (int)getpid(), n);
    test_tmp_path(name, body_path, sizeof body_path);
    snprintf(name, sizeof name, "serve-resp-%d-%d", (int)getpid(), n++);
    test_tmp_path(name, resp_path, sizeof resp_path);
    if (body) {
        FILE *f = fopen(body_path, "w");
        if (f) {
            fputs(body, f);
            fclose(f);
        }
    }
    snprintf(cmd, sizeof cmd,
             "curl -s -N --max-time 120 -X %s %s %s%s%s -o '%s' -w '%%{http_code}' "
             "http://127.0.0.1:%d%s",
             method, extra ? extra : "",
             body ? "-H 'Content-Type: application/json' "
                    "--data-binary @'"
                  : "",
             body ? body_path : "", body ? "'" : "", resp_path, s->port, path);
    snprintf(name, sizeof name, "serve-curl-%d", (int)getpid());
    test_run_shell(name, cmd, status, sizeof status, err, sizeof err);
    test_read_text(resp_path, out, out_size);
    remove(body_path);
    remove(resp_path);
    return (int)strtol(status, NULL, 10);
}

/* A metric's value in /metrics text (-1 when absent); name may hold labels. */
static inline double serve_metric(const char *text, const char *name) {
    char key[160];
    snprintf(key, sizeof key, "\n%s ", name);
    const char *p = strstr(text, key);
    return p ? strtod(p + strlen(key), NULL) : -1;
}

#endif
