/* cmd_inspect.c - moeinf inspect MODEL: print a GGUF file's metadata and tensor table. */
#include <stdio.h>
#include <string.h>

#include "app/inspect.h"
#include "cli/cli.h"

static void usage(FILE *out) {
    fprintf(out, "usage: moeinf inspect MODEL.gguf\n"
                 "\n"
                 "Prints the file's metadata (key, type, value; arrays as type[count] with their\n"
                 "first elements) and its tensor table (name, type, shape, offset, bytes).\n"
                 "The file is validated as it is read: a malformed file is an error (exit 1).\n"
                 "\n"
                 "  -h, --help   this help\n");
}

int cmd_inspect(int argc, char **argv) {
    const char *path = NULL;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage(stdout);
            return CLI_EXIT_OK;
        }
        if (a[0] == '-' && a[1] != '\0') {
            fprintf(stderr, "moeinf inspect: unknown option '%s'\n", a);
            usage(stderr);
            return CLI_EXIT_USAGE;
        }
        if (path) {
            fprintf(stderr, "moeinf inspect: one MODEL expected, got '%s' and '%s'\n", path, a);
            usage(stderr);
            return CLI_EXIT_USAGE;
        }
        path = a;
    }
    if (!path) {
        fprintf(stderr, "moeinf inspect: missing MODEL\n");
        usage(stderr);
        return CLI_EXIT_USAGE;
    }
    struct moeinf_error err = {0};
    if (moeinf_inspect(path, stdout, &err) != MOEINF_OK) return cli_fail(&err);
    if (fflush(stdout) != 0) {
        fprintf(stderr, "moeinf: writing the output failed\n");
        return CLI_EXIT_FAIL;
    }
    return CLI_EXIT_OK;
}
