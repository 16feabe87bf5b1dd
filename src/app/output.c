/* output.c - a command's outputs checked against each other and against its inputs (output.h). */
#include "app/output.h"

#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "app/args.h"

/* The identity of the file an output path names: the file's own device and inode when it
 * exists, else its folder's and its name. */
struct identity {
    dev_t dev;
    ino_t ino;
    const char *name; /* NULL for an existing file */
    size_t name_len;
    bool regular; /* false for a device or FIFO: written in place, shared freely */
};

static bool identify(const char *path, struct identity *id) {
    struct stat st;
    memset(id, 0, sizeof *id);
    if (stat(path, &st) == 0) { /* through symbolic links: the file a link names is replaced */
        id->dev = st.st_dev;
        id->ino = st.st_ino;
        id->regular = S_ISREG(st.st_mode);
        return true;
    }
    /* not there yet (or a dangling link): the folder it would be created in, and its name */
    const char *slash = strrchr(path, '/');
    id->name = slash ? slash + 1 : path;
    id->name_len = strlen(id->name);
    id->regular = true;
    char *dir = NULL;
    if (!slash) {
        dir = strdup(".");
    } else {
        size_t n = slash == path ? 1 : (size_t)(slash - path);
        dir = malloc(n + 1);
        if (dir) {
            memcpy(dir, path, n);
            dir[n] = '\0';
        }
    }
    bool ok = dir && stat(dir, &st) == 0;
    free(dir);
    if (!ok) return false;
    id->dev = st.st_dev;
    id->ino = st.st_ino;
    return true;
}

bool cli_same_file(const char *a, const char *b) {
    struct identity x;
    struct identity y;
    if (!identify(a, &x) || !identify(b, &y) || !x.regular || !y.regular) return false;
    if (x.dev != y.dev || x.ino != y.ino) return false;
    if (!x.name || !y.name) return !x.name && !y.name;
    return x.name_len == y.name_len && !memcmp(x.name, y.name, x.name_len);
}

int cli_check_outputs(const char *cmd, const struct cli_file *outputs, int n_outputs,
                      const struct cli_file *inputs, int n_inputs) {
    for (int i = 0; i < n_outputs; i++) {
        const struct cli_file *o = &outputs[i];
        if (!o->path) continue;
        for (int j = 0; j < n_inputs; j++) {
            if (inputs[j].path && cli_same_file(o->path, inputs[j].path)) {
                fprintf(stderr,
                        "moeinf %s: %s %s is the file of %s %s: an output would replace an "
                        "input\n",
                        cmd, o->opt, o->path, inputs[j].opt, inputs[j].path);
                return CLI_EXIT_USAGE;
            }
        }
        for (int j = 0; j < i; j++) {
            if (outputs[j].path && cli_same_file(o->path, outputs[j].path)) {
                fprintf(stderr, "moeinf %s: %s %s and %s %s are one file: two outputs\n", cmd,
                        outputs[j].opt, outputs[j].path, o->opt, o->path);
                return CLI_EXIT_USAGE;
            }
        }
    }
    for (int i = 0; i < n_outputs; i++) {
        struct moeinf_error err = {0};
        if (outputs[i].path && moeinf_file_check_output(outputs[i].path, &err) != MOEINF_OK) {
            return cli_fail(&err);
        }
    }
    return CLI_EXIT_OK;
}
