/* inspect.c - moeinf_inspect: the public face of the GGUF reader (moeinf inspect). */
#include "gguf/gguf.h"

enum moeinf_status moeinf_inspect(const char *path, FILE *out, struct moeinf_error *err) {
    struct moeinf_gguf *g = NULL;
    enum moeinf_status st = moeinf_gguf_open(path, &g, err);
    if (st) return st;
    moeinf_gguf_print(g, out);
    moeinf_gguf_free(g);
    return MOEINF_OK;
}
