/* default_model.c - the embedded default: a small MoE generated on first use. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli/cli.h"

static bool make_dirs(char *path) {
    for (char *p = path + 1; *p; p++) {
        if (*p != '/') continue;
        *p = '\0';
        int rc = mkdir(path, 0755);
        *p = '/';
        if (rc != 0 && errno != EEXIST) return false;
    }
    return mkdir(path, 0755) == 0 || errno == EEXIST;
}

bool cli_default_model(char *buf, size_t size, struct moeinf_error *err) {
    /* NOLINTNEXTLINE(concurrency-mt-unsafe): moeinf never calls setenv */
    const char *env = getenv("MOEINF_DEFAULT_MODEL");
    if (env && *env) {
        snprintf(buf, size, "%s", env);
    } else {
        const char *home = getenv("HOME"); // NOLINT(concurrency-mt-unsafe): as above
        char dir[1024];
        snprintf(dir, sizeof dir, "%s/.cache/moeinf", home && *home ? home : "/tmp");
        if (!make_dirs(dir)) {
            /* NOLINTNEXTLINE(concurrency-mt-unsafe): only the main thread reports errors */
            snprintf(err->msg, sizeof err->msg, "%s: cannot create: %s", dir, strerror(errno));
            err->status = MOEINF_ERR_IO;
            return false;
        }
        snprintf(buf, size, "%s/default-moe.gguf", dir);
    }
    struct stat st;
    if (stat(buf, &st) == 0) return true;
    fprintf(stderr, "moeinf: writing the default model to %s (first use)\n", buf);
    struct moeinf_gen_params params = moeinf_gen_params_default();
    return moeinf_gen_model(&params, buf, err) == MOEINF_OK;
}
