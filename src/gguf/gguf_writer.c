/*
 * gguf_writer.c - streaming GGUF v3 writer (see gguf_writer.h for the use and guarantees).
 *
 * Metadata is encoded into one growing byte buffer as it is added; tensor infos are kept as
 * structs whose offsets are assigned at declaration (each tensor padded to the alignment).
 * The first data write emits header + metadata + tensor infos + padding; after that the
 * file grows only by tensor bytes and padding, so memory stays flat however large the file.
 */
#include "gguf/gguf_writer.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "base/file.h"
#include "base/grow.h"
#include "base/le.h"
#include "base/status.h"
#include "base/tensor_type.h"

#define DEFAULT_ALIGNMENT 32
#define MAX_TENSOR_NAME   127

struct wtensor {
    char name[MAX_TENSOR_NAME + 1];
    int type;
    int n_dims;
    int64_t ne[MOEINF_GGUF_MAX_DIMS];
    uint64_t offset;  /* relative to the data section */
    uint64_t n_bytes; /* without padding */
};

struct wkey {
    char *s;
    size_t len;
};

struct moeinf_gguf_writer {
    struct moeinf_atomic_file file;
    bool file_open; /* the temp file exists and is ours to commit or remove */
    uint32_t alignment;

    uint8_t *meta; /* encoded KV pairs */
    size_t meta_n, meta_cap;
    struct wkey *keys; /* for the duplicate check */
    uint64_t n_kv;
    size_t keys_cap;

    struct wtensor *tensors;
    uint64_t n_tensors;
    size_t tensors_cap;
    uint64_t data_size; /* data section size so far, padding included */

    bool header_written;
    uint64_t cur;      /* tensor whose bytes come next */
    uint64_t cur_done; /* bytes of it already written */

    enum moeinf_status status; /* first failure, sticky */
    struct moeinf_error error;
};

/* ---- errors --------------------------------------------------------------------------- */

__attribute__((format(printf, 4, 5))) static enum moeinf_status wfail(struct moeinf_gguf_writer *w,
                                                                      struct moeinf_error *err,
                                                                      enum moeinf_status status,
                                                                      const char *fmt, ...) {
    char msg[200];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    w->status = moeinf_fail(&w->error, status, "%s: %s",
                            w->file.path ? w->file.path : "(gguf writer)", msg);
    if (err) *err = w->error;
    return w->status;
}

/* The sticky error, copied to err; MOEINF_OK if none. */
static enum moeinf_status sticky(const struct moeinf_gguf_writer *w, struct moeinf_error *err) {
    if (w->status && err) *err = w->error;
    return w->status;
}

/* ---- metadata encoding ---------------------------------------------------------------- */

static bool meta_put(struct moeinf_gguf_writer *w, const void *p, size_t n) {
    if (n > SIZE_MAX - w->meta_n) return false;
    uint8_t *q = moeinf_grow(w->meta, &w->meta_cap, w->meta_n + n, 1);
    if (!q) return false;
    w->meta = q;
    if (n) memcpy(w->meta + w->meta_n, p, n);
    w->meta_n += n;
    return true;
}

static bool meta_le(struct moeinf_gguf_writer *w, uint64_t v, int n) {
    uint8_t b[8];
    moeinf_le_put(b, v, n);
    return meta_put(w, b, (size_t)n);
}

static bool meta_str(struct moeinf_gguf_writer *w, const char *s, size_t len) {
    return meta_le(w, len, 8) && meta_put(w, s, len);
}

/* One host value of a scalar type, little-endian (its bit pattern, floats included). */
static bool meta_scalar(struct moeinf_gguf_writer *w, enum moeinf_gguf_type t, const void *v) {
    size_t n = (size_t)moeinf_gguf_scalar_size(t);
    uint64_t u = 0;
    if (n == 1) {
        uint8_t x;
        memcpy(&x, v, 1);
        u = x;
    } else if (n == 2) {
        uint16_t x;
        memcpy(&x, v, 2);
        u = x;
    } else if (n == 4) {
        uint32_t x;
        memcpy(&x, v, 4);
        u = x;
    } else {
        memcpy(&u, v, 8);
    }
    return meta_le(w, u, (int)n);
}

/* Checks the writer state and the key, records the key, and writes key + value type. */
static enum moeinf_status begin_kv(struct moeinf_gguf_writer *w, const char *key, size_t len,
                                   enum moeinf_gguf_type type, struct moeinf_error *err) {
    enum moeinf_status st = sticky(w, err);
    if (st) return st;
    if (w->header_written) {
        return wfail(w, err, MOEINF_ERR_ARG, "metadata '%.*s' added after tensor data",
                     (int)(len > 64 ? 64 : len), key);
    }
    for (uint64_t i = 0; i < w->n_kv; i++) {
        if (w->keys[i].len == len && memcmp(w->keys[i].s, key, len) == 0) {
            return wfail(w, err, MOEINF_ERR_ARG, "duplicate key '%.*s'", (int)(len > 64 ? 64 : len),
                         key);
        }
    }
    struct wkey *k = moeinf_grow(w->keys, &w->keys_cap, (size_t)w->n_kv + 1, sizeof *k);
    if (!k) return wfail(w, err, MOEINF_ERR_NOMEM, "out of memory");
    w->keys = k;
    char *copy = malloc(len ? len : 1);
    if (!copy) return wfail(w, err, MOEINF_ERR_NOMEM, "out of memory");
    memcpy(copy, key, len);
    w->keys[w->n_kv].s = copy;
    w->keys[w->n_kv].len = len;
    w->n_kv++;
    if (!meta_str(w, key, len) || !meta_le(w, (uint64_t)type, 4)) {
        return wfail(w, err, MOEINF_ERR_NOMEM, "out of memory");
    }
    return MOEINF_OK;
}

static enum moeinf_status nomem_unless(struct moeinf_gguf_writer *w, bool ok,
                                       struct moeinf_error *err) {
    return ok ? MOEINF_OK : wfail(w, err, MOEINF_ERR_NOMEM, "out of memory");
}

enum moeinf_status moeinf_gguf_writer_add_scalar(struct moeinf_gguf_writer *w, const char *key,
                                                 enum moeinf_gguf_type type, const void *v,
                                                 struct moeinf_error *err) {
    if (!sticky(w, err) && moeinf_gguf_scalar_size(type) == 0) {
        return wfail(w, err, MOEINF_ERR_ARG, "key '%s': %s is not a scalar type", key,
                     moeinf_gguf_type_str(type));
    }
    enum moeinf_status st = begin_kv(w, key, strlen(key), type, err);
    if (st) return st;
    return nomem_unless(w, meta_scalar(w, type, v), err);
}

enum moeinf_status moeinf_gguf_writer_add_u32(struct moeinf_gguf_writer *w, const char *key,
                                              uint32_t v, struct moeinf_error *err) {
    return moeinf_gguf_writer_add_scalar(w, key, MOEINF_GGUF_TYPE_UINT32, &v, err);
}

enum moeinf_status moeinf_gguf_writer_add_i32(struct moeinf_gguf_writer *w, const char *key,
                                              int32_t v, struct moeinf_error *err) {
    return moeinf_gguf_writer_add_scalar(w, key, MOEINF_GGUF_TYPE_INT32, &v, err);
}

enum moeinf_status moeinf_gguf_writer_add_u64(struct moeinf_gguf_writer *w, const char *key,
                                              uint64_t v, struct moeinf_error *err) {
    return moeinf_gguf_writer_add_scalar(w, key, MOEINF_GGUF_TYPE_UINT64, &v, err);
}

enum moeinf_status moeinf_gguf_writer_add_f32(struct moeinf_gguf_writer *w, const char *key,
                                              float v, struct moeinf_error *err) {
    return moeinf_gguf_writer_add_scalar(w, key, MOEINF_GGUF_TYPE_FLOAT32, &v, err);
}

enum moeinf_status moeinf_gguf_writer_add_bool(struct moeinf_gguf_writer *w, const char *key,
                                               bool v, struct moeinf_error *err) {
    uint8_t b = v ? 1 : 0;
    return moeinf_gguf_writer_add_scalar(w, key, MOEINF_GGUF_TYPE_BOOL, &b, err);
}

enum moeinf_status moeinf_gguf_writer_add_str(struct moeinf_gguf_writer *w, const char *key,
                                              const char *v, struct moeinf_error *err) {
    enum moeinf_status st = begin_kv(w, key, strlen(key), MOEINF_GGUF_TYPE_STRING, err);
    if (st) return st;
    return nomem_unless(w, meta_str(w, v, strlen(v)), err);
}

enum moeinf_status moeinf_gguf_writer_add_arr(struct moeinf_gguf_writer *w, const char *key,
                                              enum moeinf_gguf_type elem_type, const void *data,
                                              uint64_t n, struct moeinf_error *err) {
    size_t es = (size_t)moeinf_gguf_scalar_size(elem_type);
    if (!sticky(w, err) && es == 0) {
        return wfail(w, err, MOEINF_ERR_ARG, "key '%s': arrays of %s go through add_arr_str", key,
                     moeinf_gguf_type_str(elem_type));
    }
    enum moeinf_status st = begin_kv(w, key, strlen(key), MOEINF_GGUF_TYPE_ARRAY, err);
    if (st) return st;
    bool ok = meta_le(w, (uint64_t)elem_type, 4) && meta_le(w, n, 8);
    const uint8_t *p = data;
    for (uint64_t i = 0; ok && i < n; i++)
        ok = meta_scalar(w, elem_type, p + i * es);
    return nomem_unless(w, ok, err);
}

enum moeinf_status moeinf_gguf_writer_add_arr_str(struct moeinf_gguf_writer *w, const char *key,
                                                  const char *const *strs, const size_t *lens,
                                                  uint64_t n, struct moeinf_error *err) {
    enum moeinf_status st = begin_kv(w, key, strlen(key), MOEINF_GGUF_TYPE_ARRAY, err);
    if (st) return st;
    bool ok = meta_le(w, MOEINF_GGUF_TYPE_STRING, 4) && meta_le(w, n, 8);
    for (uint64_t i = 0; ok && i < n; i++) {
        ok = meta_str(w, strs[i], lens ? lens[i] : strlen(strs[i]));
    }
    return nomem_unless(w, ok, err);
}

enum moeinf_status moeinf_gguf_writer_add_kv(struct moeinf_gguf_writer *w,
                                             const struct moeinf_gguf_kv *kv,
                                             struct moeinf_error *err) {
    enum moeinf_status st = begin_kv(w, kv->key.data, (size_t)kv->key.len, kv->type, err);
    if (st) return st;
    bool ok = true;
    if (kv->type == MOEINF_GGUF_TYPE_ARRAY) {
        ok = meta_le(w, (uint64_t)kv->elem_type, 4) && meta_le(w, kv->n_elem, 8);
    }
    /* The reader checked the value's bytes; they are already in GGUF's encoding. */
    ok = ok && meta_put(w, kv->data, (size_t)kv->n_bytes);
    return nomem_unless(w, ok, err);
}

/* ---- tensors -------------------------------------------------------------------------- */

enum moeinf_status moeinf_gguf_writer_add_tensor(struct moeinf_gguf_writer *w, const char *name,
                                                 int type, int n_dims, const int64_t *ne,
                                                 struct moeinf_error *err) {
    enum moeinf_status st = sticky(w, err);
    if (st) return st;
    if (w->header_written) {
        return wfail(w, err, MOEINF_ERR_ARG, "tensor '%s' declared after tensor data", name);
    }
    size_t len = strlen(name);
    if (len > MAX_TENSOR_NAME) {
        return wfail(w, err, MOEINF_ERR_ARG, "tensor name of %zu bytes is too long (max %d)", len,
                     MAX_TENSOR_NAME);
    }
    const struct moeinf_type_traits *ti = moeinf_type_traits_get(type);
    if (!ti) return wfail(w, err, MOEINF_ERR_ARG, "tensor '%s': unknown type %d", name, type);
    if (n_dims < 1 || n_dims > MOEINF_GGUF_MAX_DIMS) {
        return wfail(w, err, MOEINF_ERR_ARG, "tensor '%s': %d dimensions", name, n_dims);
    }
    int64_t n_elem = 1;
    for (int d = 0; d < n_dims; d++) {
        if (ne[d] <= 0 || n_elem > INT64_MAX / ne[d]) {
            return wfail(w, err, MOEINF_ERR_ARG, "tensor '%s': bad shape", name);
        }
        n_elem *= ne[d];
    }
    if (ne[0] % ti->block_size != 0) {
        return wfail(w, err, MOEINF_ERR_ARG,
                     "tensor '%s': ne[0] = %" PRId64 " is not a multiple of the block size %" PRId64
                     " of %s",
                     name, ne[0], ti->block_size, ti->name);
    }
    uint64_t n_blocks = (uint64_t)(n_elem / ti->block_size);
    if (n_blocks > UINT64_MAX / 2 / ti->type_size) {
        return wfail(w, err, MOEINF_ERR_ARG, "tensor '%s': too large", name);
    }
    for (uint64_t i = 0; i < w->n_tensors; i++) {
        if (!strcmp(w->tensors[i].name, name)) {
            return wfail(w, err, MOEINF_ERR_ARG, "duplicate tensor name '%s'", name);
        }
    }
    struct wtensor *grown =
        moeinf_grow(w->tensors, &w->tensors_cap, (size_t)w->n_tensors + 1, sizeof *grown);
    if (!grown) return wfail(w, err, MOEINF_ERR_NOMEM, "out of memory");
    w->tensors = grown;
    struct wtensor *t = &w->tensors[w->n_tensors];
    memset(t, 0, sizeof *t);
    memcpy(t->name, name, len + 1);
    t->type = type;
    t->n_dims = n_dims;
    for (int d = 0; d < MOEINF_GGUF_MAX_DIMS; d++)
        t->ne[d] = d < n_dims ? ne[d] : 1;
    t->n_bytes = n_blocks * ti->type_size;
    t->offset = w->data_size;
    uint64_t padded = t->n_bytes + (w->alignment - t->n_bytes % w->alignment) % w->alignment;
    if (padded > UINT64_MAX / 2 - w->data_size) {
        return wfail(w, err, MOEINF_ERR_ARG, "tensor '%s': file too large", name);
    }
    w->data_size += padded;
    w->n_tensors++;
    return MOEINF_OK;
}

uint64_t moeinf_gguf_writer_tensor_bytes(const struct moeinf_gguf_writer *w, uint64_t index) {
    return index < w->n_tensors ? w->tensors[index].n_bytes : 0;
}

/* ---- file output ---------------------------------------------------------------------- */

static enum moeinf_status out(struct moeinf_gguf_writer *w, const void *p, size_t n,
                              struct moeinf_error *err) {
    if (n && fwrite(p, 1, n, w->file.fp) != n) {
        int e = errno;
        char eb[64];
        return wfail(w, err, MOEINF_ERR_IO, "write failed: %s",
                     moeinf_strerror(e ? e : EIO, eb, sizeof eb));
    }
    return MOEINF_OK;
}

static enum moeinf_status out_le(struct moeinf_gguf_writer *w, uint64_t v, int n,
                                 struct moeinf_error *err) {
    uint8_t b[8];
    moeinf_le_put(b, v, n);
    return out(w, b, (size_t)n, err);
}

static enum moeinf_status out_zeros(struct moeinf_gguf_writer *w, uint64_t n,
                                    struct moeinf_error *err) {
    static const uint8_t zeros[256];
    enum moeinf_status st = MOEINF_OK;
    while (n && !st) {
        size_t k = n < sizeof zeros ? (size_t)n : sizeof zeros;
        st = out(w, zeros, k, err);
        n -= k;
    }
    return st;
}

static enum moeinf_status write_header(struct moeinf_gguf_writer *w, struct moeinf_error *err) {
    enum moeinf_status st;
    if ((st = out(w, "GGUF", 4, err))) return st;
    if ((st = out_le(w, 3, 4, err))) return st;
    if ((st = out_le(w, w->n_tensors, 8, err))) return st;
    if ((st = out_le(w, w->n_kv, 8, err))) return st;
    if ((st = out(w, w->meta, w->meta_n, err))) return st;
    uint64_t pos = 24 + w->meta_n;
    for (uint64_t i = 0; i < w->n_tensors; i++) {
        const struct wtensor *t = &w->tensors[i];
        size_t len = strlen(t->name);
        if ((st = out_le(w, len, 8, err))) return st;
        if ((st = out(w, t->name, len, err))) return st;
        if ((st = out_le(w, (uint64_t)t->n_dims, 4, err))) return st;
        for (int d = 0; d < t->n_dims; d++) {
            if ((st = out_le(w, (uint64_t)t->ne[d], 8, err))) return st;
        }
        if ((st = out_le(w, (uint64_t)t->type, 4, err))) return st;
        if ((st = out_le(w, t->offset, 8, err))) return st;
        pos += 8 + len + 4 + 8 * (uint64_t)t->n_dims + 4 + 8;
    }
    if ((st = out_zeros(w, (w->alignment - pos % w->alignment) % w->alignment, err))) return st;
    w->header_written = true;
    return MOEINF_OK;
}

enum moeinf_status moeinf_gguf_writer_write(struct moeinf_gguf_writer *w, const void *data,
                                            size_t n, struct moeinf_error *err) {
    enum moeinf_status st = sticky(w, err);
    if (st) return st;
    if (!w->header_written && (st = write_header(w, err))) return st;
    const uint8_t *p = data;
    while (n > 0) {
        if (w->cur >= w->n_tensors) {
            return wfail(w, err, MOEINF_ERR_ARG, "%zu bytes of data past the last tensor", n);
        }
        const struct wtensor *t = &w->tensors[w->cur];
        uint64_t want = t->n_bytes - w->cur_done;
        size_t k = want < n ? (size_t)want : n;
        if ((st = out(w, p, k, err))) return st;
        p += k;
        n -= k;
        w->cur_done += k;
        if (w->cur_done == t->n_bytes) {
            uint64_t pad = (w->alignment - t->n_bytes % w->alignment) % w->alignment;
            if ((st = out_zeros(w, pad, err))) return st;
            w->cur++;
            w->cur_done = 0;
        }
    }
    return MOEINF_OK;
}

static enum moeinf_status finish(struct moeinf_gguf_writer *w, bool header_only,
                                 struct moeinf_error *err) {
    enum moeinf_status st = sticky(w, err);
    if (st) return st;
    if (!w->header_written && (st = write_header(w, err))) return st;
    if (w->cur < w->n_tensors && !(header_only && w->cur == 0 && w->cur_done == 0)) {
        return wfail(w, err, MOEINF_ERR_ARG,
                     "finished with tensor '%s' incomplete (%" PRIu64 " of %" PRIu64 " bytes)",
                     w->tensors[w->cur].name, w->cur_done, w->tensors[w->cur].n_bytes);
    }
    w->file_open = false; /* commit consumes the temp file, whatever happens */
    st = moeinf_atomic_commit(&w->file, &w->error);
    if (st) {
        w->status = st;
        if (err) *err = w->error;
        return st;
    }
    /* Any later call is a misuse; make it fail rather than write to a closed file. */
    w->status = MOEINF_ERR_ARG;
    moeinf_fail(&w->error, MOEINF_ERR_ARG, "GGUF writer used after finish");
    return MOEINF_OK;
}

enum moeinf_status moeinf_gguf_writer_finish(struct moeinf_gguf_writer *w,
                                             struct moeinf_error *err) {
    return finish(w, false, err);
}

enum moeinf_status moeinf_gguf_writer_finish_header(struct moeinf_gguf_writer *w,
                                                    struct moeinf_error *err) {
    return finish(w, true, err);
}

/* ---- lifetime ------------------------------------------------------------------------- */

enum moeinf_status moeinf_gguf_writer_open(const char *path, uint32_t alignment,
                                           struct moeinf_gguf_writer **out_w,
                                           struct moeinf_error *err) {
    if (alignment != 0 && (alignment & (alignment - 1)) != 0) {
        return moeinf_fail(err, MOEINF_ERR_ARG, "%s: alignment %u is not a power of two", path,
                           alignment);
    }
    struct moeinf_gguf_writer *w = calloc(1, sizeof *w);
    if (!w) return moeinf_fail(err, MOEINF_ERR_NOMEM, "%s: out of memory", path);
    w->alignment = alignment ? alignment : DEFAULT_ALIGNMENT;
    enum moeinf_status st = moeinf_atomic_open(path, &w->file, err);
    if (st) {
        free(w);
        return st;
    }
    w->file_open = true;
    if (alignment != 0 &&
        (st = moeinf_gguf_writer_add_u32(w, "general.alignment", alignment, err))) {
        moeinf_gguf_writer_free(w);
        return st;
    }
    *out_w = w;
    return MOEINF_OK;
}

void moeinf_gguf_writer_free(struct moeinf_gguf_writer *w) {
    if (!w) return;
    if (w->file_open) moeinf_atomic_abort(&w->file);
    for (uint64_t i = 0; i < w->n_kv; i++)
        free(w->keys[i].s);
    free(w->keys);
    free(w->meta);
    free(w->tensors);
    free(w);
}
