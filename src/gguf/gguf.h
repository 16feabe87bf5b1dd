/*
 * gguf.h - bounded reader of GGUF files (versions 2 and 3, little-endian).
 *
 * File layout (all integers little-endian):
 *   1. magic "GGUF" (4 bytes)
 *   2. version (uint32): 2 or 3
 *   3. tensor count (uint64), 4. metadata KV count (uint64)
 *   5. KV pairs: key (gguf string), value type (uint32), value
 *        gguf string = length (uint64) + bytes (no terminator)
 *        array       = element type (uint32) + count (uint64) + elements
 *   6. tensor infos: name (gguf string), n_dims (uint32), ne[n_dims] (uint64 each),
 *      type (uint32, ggml type id), offset (uint64, relative to the data section)
 *   7. padding to general.alignment (default 32; a power of two and, as the specification
 *      asks, a multiple of 8, so that tensor data is aligned for the kernels), then the
 *      data section
 *
 * The whole file is mapped read-only (see docs/ARCHITECTURE.md); every count, length,
 * offset and shape is checked against the file size and for overflow before use, and any
 * defect is a MOEINF_ERR_FORMAT (or _UNSUPPORTED) naming the file and the problem.
 * Strings returned by the accessors point into the mapping and live as long as the
 * struct moeinf_gguf; they are NOT NUL-terminated in the file, so every string comes
 * with its length (struct moeinf_gguf_str).
 */
#ifndef MOEINF_GGUF_H
#define MOEINF_GGUF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "base/file.h"
#include "moeinf.h"

enum moeinf_gguf_type {
    MOEINF_GGUF_TYPE_UINT8 = 0,
    MOEINF_GGUF_TYPE_INT8 = 1,
    MOEINF_GGUF_TYPE_UINT16 = 2,
    MOEINF_GGUF_TYPE_INT16 = 3,
    MOEINF_GGUF_TYPE_UINT32 = 4,
    MOEINF_GGUF_TYPE_INT32 = 5,
    MOEINF_GGUF_TYPE_FLOAT32 = 6,
    MOEINF_GGUF_TYPE_BOOL = 7,
    MOEINF_GGUF_TYPE_STRING = 8,
    MOEINF_GGUF_TYPE_ARRAY = 9,
    MOEINF_GGUF_TYPE_UINT64 = 10,
    MOEINF_GGUF_TYPE_INT64 = 11,
    MOEINF_GGUF_TYPE_FLOAT64 = 12,
    MOEINF_GGUF_TYPE_COUNT
};

#define MOEINF_GGUF_MAX_DIMS 4

struct moeinf_gguf_str {
    const char *data; /* into the mapping; not NUL-terminated */
    uint64_t len;
};

struct moeinf_gguf_kv {
    struct moeinf_gguf_str key;
    enum moeinf_gguf_type type;      /* ARRAY for arrays */
    enum moeinf_gguf_type elem_type; /* element type of an array (never ARRAY), else = type */
    uint64_t n_elem;                 /* 1 for scalars */
    const uint8_t *data;             /* first element (strings: a gguf string each) */
    uint64_t *str_off;               /* string arrays: offset of element i from data, else NULL */
    uint64_t n_bytes;                /* bytes of the value from data on (all elements) */
};

struct moeinf_gguf_tensor {
    char name[128];               /* NUL-terminated copy (GGUF limits names to 64 bytes) */
    int type;                     /* ggml type id (see quant/quant.h) */
    int n_dims;                   /* 1..4 */
    int64_t ne[MOEINF_GGUF_MAX_DIMS]; /* ne[0] innermost; unused dims are 1 */
    uint64_t offset;              /* absolute offset in the file */
    uint64_t n_bytes;             /* size of the data */
    const uint8_t *data;          /* into the mapping */
};

struct moeinf_gguf {
    char *path;
    struct moeinf_mapping map;
    uint32_t version;
    uint64_t alignment;
    uint64_t data_offset; /* absolute offset of the data section (without tensors it may
                             lie past the end: writers may omit the final padding) */
    uint64_t n_kv;
    struct moeinf_gguf_kv *kv;
    uint64_t n_tensors;
    struct moeinf_gguf_tensor *tensors;
    uint64_t data_bytes; /* the data section the tensor table describes (to its last byte) */
    bool header_only;    /* moeinf_gguf_open_header: tensor data views zeros, not the file */
    void *absent;        /* that zero-filled mapping (header_only), and its size */
    size_t absent_size;
    bool owns_map;                                 /* false for moeinf_gguf_open_buffer */
    const struct moeinf_gguf_kv **kv_by_key;       /* [n_kv] sorted by key, for lookups */
    const struct moeinf_gguf_tensor **tensor_by_name; /* [n_tensors] sorted by name */
};

/* Opens, maps and validates a file. */
enum moeinf_status moeinf_gguf_open(const char *path, struct moeinf_gguf **out,
                                    struct moeinf_error *err);
/* Same, choosing how the file is mapped (see base/file.h). */
enum moeinf_status moeinf_gguf_open_mode(const char *path, enum moeinf_map_mode mode,
                                         const struct moeinf_progress *progress,
                                         struct moeinf_gguf **out, struct moeinf_error *err);
/* Header only: a file whose header, metadata and tensor table are complete but whose tensor
 * data may be missing (a download cut short). The table is validated as by moeinf_gguf_open
 * but for the data's end; every tensor's data then points into a zero-filled mapping as large
 * as the data section the table describes (address space only), never into the file. A file
 * cut inside the header or the tensor table is the same error as for moeinf_gguf_open. */
enum moeinf_status moeinf_gguf_open_header(const char *path, struct moeinf_gguf **out,
                                           struct moeinf_error *err);
/* Same, over a caller-owned buffer (tests, fuzzing). path is only used in messages. */
enum moeinf_status moeinf_gguf_open_buffer(const void *data, uint64_t size, const char *path,
                                           struct moeinf_gguf **out, struct moeinf_error *err);
void moeinf_gguf_free(struct moeinf_gguf *g);

/* Index of a key, or -1. */
int64_t moeinf_gguf_find_key(const struct moeinf_gguf *g, const char *key);
const struct moeinf_gguf_tensor *moeinf_gguf_find_tensor(const struct moeinf_gguf *g,
                                                         const char *name);

/*
 * Typed getters. They return MOEINF_ERR_FORMAT naming the key if it is absent (unless the
 * _opt variant, which returns MOEINF_OK and leaves *out untouched when absent) or of an
 * incompatible type. Integer getters accept any integer type whose value fits; float getters
 * accept float32/float64.
 */
enum moeinf_status moeinf_gguf_get_u32(const struct moeinf_gguf *g, const char *key,
                                       uint32_t *out, struct moeinf_error *err);
enum moeinf_status moeinf_gguf_get_u32_opt(const struct moeinf_gguf *g, const char *key,
                                           uint32_t *out, struct moeinf_error *err);
enum moeinf_status moeinf_gguf_get_f32(const struct moeinf_gguf *g, const char *key, float *out,
                                       struct moeinf_error *err);
enum moeinf_status moeinf_gguf_get_f32_opt(const struct moeinf_gguf *g, const char *key,
                                           float *out, struct moeinf_error *err);
enum moeinf_status moeinf_gguf_get_bool_opt(const struct moeinf_gguf *g, const char *key,
                                            bool *out, struct moeinf_error *err);
enum moeinf_status moeinf_gguf_get_str(const struct moeinf_gguf *g, const char *key,
                                       struct moeinf_gguf_str *out, struct moeinf_error *err);
enum moeinf_status moeinf_gguf_get_str_opt(const struct moeinf_gguf *g, const char *key,
                                           struct moeinf_gguf_str *out, struct moeinf_error *err);
/* An array of the given element type (absent: MOEINF_ERR_FORMAT). */
enum moeinf_status moeinf_gguf_get_arr(const struct moeinf_gguf *g, const char *key,
                                       enum moeinf_gguf_type elem_type,
                                       const struct moeinf_gguf_kv **out,
                                       struct moeinf_error *err);

/* Element i of an array kv (bounds were checked at open; i < kv->n_elem is the caller's). */
struct moeinf_gguf_str moeinf_gguf_arr_str(const struct moeinf_gguf_kv *kv, uint64_t i);
float moeinf_gguf_arr_f32(const struct moeinf_gguf_kv *kv, uint64_t i);
int32_t moeinf_gguf_arr_i32(const struct moeinf_gguf_kv *kv, uint64_t i);

/* True if a gguf string equals a C string. */
bool moeinf_gguf_str_eq(struct moeinf_gguf_str s, const char *c);

/* Name of a metadata value type ("u32", "string", ...; "?" if out of range). */
const char *moeinf_gguf_type_str(enum moeinf_gguf_type type);
/* Bytes of one scalar of a value type; 0 for STRING and ARRAY (variable) and unknown types.
 * Inline, so that callers' compilers see the size of each type they write. */
static inline uint64_t moeinf_gguf_scalar_size(enum moeinf_gguf_type t) {
    switch (t) {
    case MOEINF_GGUF_TYPE_UINT8:
    case MOEINF_GGUF_TYPE_INT8:
    case MOEINF_GGUF_TYPE_BOOL:
        return 1;
    case MOEINF_GGUF_TYPE_UINT16:
    case MOEINF_GGUF_TYPE_INT16:
        return 2;
    case MOEINF_GGUF_TYPE_UINT32:
    case MOEINF_GGUF_TYPE_INT32:
    case MOEINF_GGUF_TYPE_FLOAT32:
        return 4;
    case MOEINF_GGUF_TYPE_UINT64:
    case MOEINF_GGUF_TYPE_INT64:
    case MOEINF_GGUF_TYPE_FLOAT64:
        return 8;
    default:
        return 0;
    }
}

/* For readers of raw values and for messages (the inspect printer, src/app/inspect.c): */
/* True for the signed integer types. */
bool moeinf_gguf_type_is_signed(enum moeinf_gguf_type t);
/* An integer value of type t at p as a signed value (0 for a non-integer type); a u64 above
 * INT64_MAX gives INT64_MAX and sets *big. */
int64_t moeinf_gguf_load_int(enum moeinf_gguf_type t, const uint8_t *p, bool *big);
/* A bounded, escaped copy of len file bytes in buf (size >= 8 bytes), as moeinf_escape
 * (base/escape.h) writes it: control bytes as \n, \t or \xNN, '"' and '\\' with a backslash;
 * a text cut to fit ends in "...". */
const char *moeinf_gguf_shown(const char *s, uint64_t len, char *buf, size_t size);

#endif
