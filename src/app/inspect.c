/*
 * inspect.c - `moeinf inspect` (inspect.h): a GGUF file's header, metadata and tensor table as
 * text, from the reader's parse (gguf/gguf.h). In src/app: only the programs and tests print it.
 */
#include "app/inspect.h"

#include <inttypes.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "base/escape.h"
#include "base/le.h"
#include "base/tensor_type.h"
#include "gguf/gguf.h"

#define PRINT_STR_MAX 64 /* bytes of a string value shown before "..." */
#define PRINT_ARR_MAX 6  /* array elements shown */

static void print_str(FILE *out, const char *s, uint64_t len) {
    uint64_t n = len;
    if (n > PRINT_STR_MAX) {
        n = PRINT_STR_MAX;
        /* Do not cut a UTF-8 sequence in two. */
        while (n > 0 && ((unsigned char)s[n] & 0xc0) == 0x80)
            n--;
    }
    fputc('"', out);
    for (uint64_t i = 0; i < n; i++) {
        char e[4];
        fwrite(e, 1, moeinf_escape_byte((unsigned char)s[i], e), out);
    }
    fputc('"', out);
    if (n < len) fprintf(out, "...(%" PRIu64 " bytes)", len);
}

static void print_scalar(FILE *out, enum moeinf_gguf_type t, const uint8_t *p) {
    bool big;
    switch (t) {
    case MOEINF_GGUF_TYPE_FLOAT32:
        fprintf(out, "%.9g", (double)moeinf_le_f32(p));
        break;
    case MOEINF_GGUF_TYPE_FLOAT64:
        fprintf(out, "%.17g", moeinf_le_f64(p));
        break;
    case MOEINF_GGUF_TYPE_BOOL:
        fputs(p[0] ? "true" : "false", out);
        break;
    case MOEINF_GGUF_TYPE_UINT64:
        fprintf(out, "%" PRIu64, moeinf_le_u64(p));
        break;
    case MOEINF_GGUF_TYPE_STRING:
        print_str(out, (const char *)p + 8, moeinf_le_u64(p));
        break;
    default:
        if (moeinf_gguf_type_is_signed(t)) {
            fprintf(out, "%" PRId64, moeinf_gguf_load_int(t, p, &big));
        } else {
            fprintf(out, "%" PRIu64, (uint64_t)moeinf_gguf_load_int(t, p, &big));
        }
        break;
    }
}

static void print_kv(FILE *out, const struct moeinf_gguf_kv *kv) {
    char type[40];
    if (kv->type == MOEINF_GGUF_TYPE_ARRAY) {
        snprintf(type, sizeof type, "%s[%" PRIu64 "]", moeinf_gguf_type_str(kv->elem_type),
                 kv->n_elem);
    } else {
        snprintf(type, sizeof type, "%s", moeinf_gguf_type_str(kv->type));
    }
    char key[72];
    fprintf(out, "  %-40s %-14s = ", moeinf_gguf_shown(kv->key.data, kv->key.len, key, sizeof key),
            type);
    if (kv->type != MOEINF_GGUF_TYPE_ARRAY) {
        print_scalar(out, kv->type, kv->data);
    } else {
        fputc('[', out);
        uint64_t n = kv->n_elem < PRINT_ARR_MAX ? kv->n_elem : PRINT_ARR_MAX;
        for (uint64_t i = 0; i < n; i++) {
            if (i) fputs(", ", out);
            const uint8_t *p = kv->elem_type == MOEINF_GGUF_TYPE_STRING
                                   ? kv->data + kv->str_off[i]
                                   : kv->data + i * moeinf_gguf_scalar_size(kv->elem_type);
            print_scalar(out, kv->elem_type, p);
        }
        if (n < kv->n_elem) fputs(", ...", out);
        fputc(']', out);
    }
    fputc('\n', out);
}

void moeinf_gguf_print(const struct moeinf_gguf *g, FILE *out) {
    uint64_t total = 0;
    for (uint64_t i = 0; i < g->n_tensors; i++)
        total += g->tensors[i].n_bytes;
    fprintf(out,
            "%s: GGUF v%u, %" PRIu64 " bytes, %" PRIu64 " metadata keys, %" PRIu64
            " tensors (%" PRIu64 " bytes), alignment %" PRIu64 ", data at offset %" PRIu64 "\n",
            g->path, g->version, g->map.size, g->n_kv, g->n_tensors, total, g->alignment,
            g->data_offset);
    fprintf(out, "metadata:\n");
    for (uint64_t i = 0; i < g->n_kv; i++)
        print_kv(out, &g->kv[i]);
    fprintf(out, "tensors:\n");
    fprintf(out, "  %-5s %-32s %-8s %-24s %14s %14s\n", "#", "name", "type", "shape", "offset",
            "bytes");
    for (uint64_t i = 0; i < g->n_tensors; i++) {
        const struct moeinf_gguf_tensor *t = &g->tensors[i];
        char shape[96];
        int n = snprintf(shape, sizeof shape, "[");
        for (int d = 0; d < t->n_dims; d++) {
            n += snprintf(shape + n, sizeof shape - (size_t)n, "%s%" PRId64, d ? ", " : "",
                          t->ne[d]);
        }
        snprintf(shape + n, sizeof shape - (size_t)n, "]");
        char name[sizeof t->name + 4];
        fprintf(out, "  %-5" PRIu64 " %-32s %-8s %-24s %14" PRIu64 " %14" PRIu64 "\n", i,
                moeinf_gguf_shown(t->name, strlen(t->name), name, sizeof name),
                moeinf_type_name(t->type), shape, t->offset, t->n_bytes);
    }
}

enum moeinf_status moeinf_inspect(const char *path, FILE *out, struct moeinf_error *err) {
    struct moeinf_gguf *g = NULL;
    enum moeinf_status st = moeinf_gguf_open(path, &g, err);
    if (st) return st;
    moeinf_gguf_print(g, out);
    moeinf_gguf_free(g);
    return MOEINF_OK;
}
