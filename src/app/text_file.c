/* text_file.c - -f/--file FILE read whole (text_file.h). */
#include "app/text_file.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/grow.h"

enum moeinf_status cli_read_text_file(const char *path, char **text, size_t *len,
                                      struct moeinf_error *err) {
    const bool is_stdin = !strcmp(path, "-");
    const char *name = is_stdin ? "standard input" : path;
    FILE *f = is_stdin ? stdin : fopen(path, "rb");
    if (!f) {
        /* NOLINTNEXTLINE(concurrency-mt-unsafe): only the main thread reads options */
        snprintf(err->msg, sizeof err->msg, "%s: cannot open: %s", path, strerror(errno));
        err->status = MOEINF_ERR_IO;
        return MOEINF_ERR_IO;
    }
    size_t cap = 4096;
    size_t n = 0;
    char *buf = malloc(cap);
    enum moeinf_status st = MOEINF_OK;
    while (buf) {
        if (n + 1 == cap) {
            char *grown = moeinf_grow(buf, &cap, cap + 1, 1); /* doubles it */
            if (!grown) {
                free(buf);
                buf = NULL;
                break;
            }
            buf = grown;
        }
        size_t got = fread(buf + n, 1, cap - 1 - n, f);
        n += got;
        if (got == 0) break;
    }
    if (!buf) {
        snprintf(err->msg, sizeof err->msg, "%s: out of memory reading it", name);
        st = err->status = MOEINF_ERR_NOMEM;
    } else if (ferror(f)) {
        /* NOLINTNEXTLINE(concurrency-mt-unsafe): only the main thread reads options */
        snprintf(err->msg, sizeof err->msg, "%s: read failed: %s", name, strerror(errno));
        st = err->status = MOEINF_ERR_IO;
    }
    if (!is_stdin) fclose(f);
    if (st != MOEINF_OK) {
        free(buf);
        return st;
    }
    if (n > 0 && buf[n - 1] == '\n') n--;
    buf[n] = '\0';
    *text = buf;
    *len = n;
    return MOEINF_OK;
}
