/* args.c - strict option-value parsing, failure reports and timing shared by the
 * subcommands (args.h). */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "app/args.h"

int cli_fail(const struct moeinf_error *err) {
    fprintf(stderr, "moeinf: %s\n", err->msg[0] ? err->msg : moeinf_status_str(err->status));
    return CLI_EXIT_FAIL;
}

static void bad_value(const char *cmd, const char *opt, const char *s, const char *why) {
    fprintf(stderr, "moeinf %s: invalid value '%s' for %s: %s\n", cmd, s, opt, why);
}

bool cli_parse_long(const char *cmd, const char *opt, const char *s, long lo, long hi, long *out) {
    char *end = NULL;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (!*s || *end || errno == ERANGE) {
        bad_value(cmd, opt, s, "not an integer");
        return false;
    }
    if (v < lo || v > hi) {
        char why[96];
        snprintf(why, sizeof why, "must be in [%ld, %ld]", lo, hi);
        bad_value(cmd, opt, s, why);
        return false;
    }
    *out = v;
    return true;
}

bool cli_parse_u64(const char *cmd, const char *opt, const char *s, uint64_t *out) {
    char *end = NULL;
    errno = 0;
    if (!*s || *s == '-') {
        bad_value(cmd, opt, s, "not a non-negative integer");
        return false;
    }
    unsigned long long v = strtoull(s, &end, 10);
    if (*end || errno == ERANGE) {
        bad_value(cmd, opt, s, "not a non-negative integer");
        return false;
    }
    *out = (uint64_t)v;
    return true;
}

bool cli_parse_float(const char *cmd, const char *opt, const char *s, double lo, double hi,
                     float *out) {
    char *end = NULL;
    errno = 0;
    double v = strtod(s, &end);
    if (!*s || *end || errno == ERANGE || !isfinite(v)) {
        bad_value(cmd, opt, s, "not a number");
        return false;
    }
    if (v < lo || v > hi) {
        char why[96];
        snprintf(why, sizeof why, "must be in [%g, %g]", lo, hi);
        bad_value(cmd, opt, s, why);
        return false;
    }
    *out = (float)v;
    return true;
}

bool cli_is_one_of(const char *a, const char *const *names) {
    for (; *names; names++) {
        if (!strcmp(a, *names)) return true;
    }
    return false;
}

int cli_bad_argument(const char *cmd, const char *a, void (*usage)(FILE *out)) {
    if (a[0] == '-' && a[1] != '\0') {
        fprintf(stderr, "moeinf %s: unknown option '%s'\n", cmd, a);
    } else {
        fprintf(stderr, "moeinf %s: unexpected argument '%s'\n", cmd, a);
    }
    if (usage) usage(stderr);
    return CLI_EXIT_USAGE;
}

const char *cli_option_value(const char *cmd, int argc, char **argv, int *i) {
    if (*i + 1 >= argc) {
        fprintf(stderr, "moeinf %s: option %s needs a value\n", cmd, argv[*i]);
        return NULL;
    }
    (*i)++;
    return argv[*i];
}

double cli_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}
