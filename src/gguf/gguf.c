/*
 * gguf.c - the bounded GGUF reader (format in gguf.h).
 *
 * DESIGN. The file is mapped read-only and parsed once, front to back, through a cursor
 * that knows how many bytes are left. Every length, count and offset read from the file is
 * compared with what is left before it is used or before anything is allocated for it, and
 * every product (array sizes, tensor shapes, byte sizes) is checked for overflow first, so
 * a hostile file can neither read past the mapping nor make us allocate more than a small
 * multiple of its own size. Values are decoded with explicit little-endian byte loads
 * (base/le.h), which are alignment-safe (metadata values are packed with no alignment at all).
 * Lookups go through arrays sorted by key and by tensor name, which also find duplicates.
 */
#include "gguf/gguf.h"

#include <assert.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "base/escape.h"
#include "base/le.h"
#include "base/status.h"
#include "base/tensor_type.h"

#define DEFAULT_ALIGNMENT 32
#define MAX_TENSOR_NAME   127 /* bytes, so that the name fits in tensor.name[128] */
#define MAX_ABSENT_BYTES  (1ull << 46) /* header-only: the data a table may describe (64 TiB) */

/* Smallest encodings, used to bound counts before allocating for them. */
#define MIN_KV_BYTES     (8 + 4)         /* empty key + value type, value not counted */
#define MIN_TENSOR_BYTES (8 + 4 + 4 + 8) /* empty name, n_dims, type, offset */

const char *moeinf_gguf_type_str(enum moeinf_gguf_type type) {
    static const char *const names[MOEINF_GGUF_TYPE_COUNT] = {
        "u8",   "i8",     "u16",   "i16", "u32", "i32", "f32",
        "bool", "string", "array", "u64", "i64", "f64",
    };
    if ((int)type < 0 || type >= MOEINF_GGUF_TYPE_COUNT) return "?";
    return names[type];
}

static bool is_int_type(enum moeinf_gguf_type t) {
    return t == MOEINF_GGUF_TYPE_UINT8 || t == MOEINF_GGUF_TYPE_INT8 ||
           t == MOEINF_GGUF_TYPE_UINT16 || t == MOEINF_GGUF_TYPE_INT16 ||
           t == MOEINF_GGUF_TYPE_UINT32 || t == MOEINF_GGUF_TYPE_INT32 ||
           t == MOEINF_GGUF_TYPE_UINT64 || t == MOEINF_GGUF_TYPE_INT64;
}

bool moeinf_gguf_type_is_signed(enum moeinf_gguf_type t) {
    return t == MOEINF_GGUF_TYPE_INT8 || t == MOEINF_GGUF_TYPE_INT16 ||
           t == MOEINF_GGUF_TYPE_INT32 || t == MOEINF_GGUF_TYPE_INT64;
}

/* An integer element as a signed value (is_int_type(t)); u64 above INT64_MAX sets *big. */
int64_t moeinf_gguf_load_int(enum moeinf_gguf_type t, const uint8_t *p, bool *big) {
    *big = false;
    switch (t) {
    case MOEINF_GGUF_TYPE_UINT8:
        return p[0];
    case MOEINF_GGUF_TYPE_INT8:
        return (int8_t)p[0];
    case MOEINF_GGUF_TYPE_UINT16:
        return moeinf_le_u16(p);
    case MOEINF_GGUF_TYPE_INT16:
        return (int16_t)moeinf_le_u16(p);
    case MOEINF_GGUF_TYPE_UINT32:
        return moeinf_le_u32(p);
    case MOEINF_GGUF_TYPE_INT32:
        return (int32_t)moeinf_le_u32(p);
    case MOEINF_GGUF_TYPE_INT64:
        return (int64_t)moeinf_le_u64(p);
    case MOEINF_GGUF_TYPE_UINT64: {
        uint64_t u = moeinf_le_u64(p);
        if (u > INT64_MAX) {
            *big = true;
            return INT64_MAX;
        }
        return (int64_t)u;
    }
    default:
        return 0;
    }
}

/* ---- messages ------------------------------------------------------------------------- */

/* A bounded, escaped copy of file bytes for a one-line message (keys and names in a hostile
 * file may hold newlines, terminal escapes or anything else). */
const char *moeinf_gguf_shown(const char *s, uint64_t len, char *buf, size_t size) {
    return moeinf_escape(s, (size_t)len, buf, size);
}

struct cursor {
    const uint8_t *base;
    uint64_t size;
    uint64_t pos;
    const char *path;
    struct moeinf_error *err;
};

static uint64_t left(const struct cursor *c) {
    return c->size - c->pos;
}

/* Fails with "<path>: <message>" as a format error. */
__attribute__((format(printf, 2, 3))) static enum moeinf_status bad(struct cursor *c,
                                                                    const char *fmt, ...) {
    char msg[224];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return moeinf_fail(c->err, MOEINF_ERR_FORMAT, "%s: %s", c->path, msg);
}

/* Fails unless n more bytes are there; `what` names the field for the message. */
static enum moeinf_status need(struct cursor *c, uint64_t n, const char *what, const char *who) {
    if (n <= left(c)) return MOEINF_OK;
    return bad(
        c, "truncated %s%s%s at offset %" PRIu64 " (%" PRIu64 " bytes needed, %" PRIu64 " left)",
        what, who[0] ? " of " : "", who, c->pos, n, left(c));
}

static enum moeinf_status rd32(struct cursor *c, uint32_t *v, const char *what, const char *who) {
    enum moeinf_status st = need(c, 4, what, who);
    if (st) return st;
    *v = moeinf_le_u32(c->base + c->pos);
    c->pos += 4;
    return MOEINF_OK;
}

static enum moeinf_status rd64(struct cursor *c, uint64_t *v, const char *what, const char *who) {
    enum moeinf_status st = need(c, 8, what, who);
    if (st) return st;
    *v = moeinf_le_u64(c->base + c->pos);
    c->pos += 8;
    return MOEINF_OK;
}

/* A gguf string: length, then that many bytes, which must all be in the file. */
static enum moeinf_status rdstr(struct cursor *c, struct moeinf_gguf_str *s, const char *what,
                                const char *who) {
    uint64_t len;
    enum moeinf_status st = rd64(c, &len, what, who);
    if (st) return st;
    if (len > left(c)) {
        return bad(c, "%s%s%s: string length %" PRIu64 " exceeds the remaining %" PRIu64 " bytes",
                   what, who[0] ? " of " : "", who, len, left(c));
    }
    s->data = (const char *)c->base + c->pos;
    s->len = len;
    c->pos += len;
    return MOEINF_OK;
}

/* ---- metadata ------------------------------------------------------------------------- */

/* key: the key for messages; qkey: the same in quotes. */
static enum moeinf_status read_value(struct cursor *c, struct moeinf_gguf_kv *kv, const char *key,
                                     const char *qkey) {
    enum moeinf_status st;
    uint32_t t;
    if ((st = rd32(c, &t, "value type", qkey))) return st;
    if (t >= MOEINF_GGUF_TYPE_COUNT) return bad(c, "key '%s' has unknown value type %u", key, t);
    kv->type = (enum moeinf_gguf_type)t;
    kv->elem_type = kv->type;
    kv->n_elem = 1;
    kv->data = c->base + c->pos;
    uint64_t start = c->pos;

    if (kv->type == MOEINF_GGUF_TYPE_STRING) {
        struct moeinf_gguf_str s;
        if ((st = rdstr(c, &s, "value", qkey))) return st;
    } else if (kv->type != MOEINF_GGUF_TYPE_ARRAY) {
        uint64_t n = moeinf_gguf_scalar_size(kv->type);
        if ((st = need(c, n, "value", qkey))) return st;
        c->pos += n;
    } else {
        uint32_t et;
        uint64_t count;
        if ((st = rd32(c, &et, "array type", qkey))) return st;
        if (et == MOEINF_GGUF_TYPE_ARRAY) {
            return bad(c, "key '%s': arrays of arrays are not supported", key);
        }
        if (et >= MOEINF_GGUF_TYPE_COUNT) {
            return bad(c, "key '%s' is an array of unknown value type %u", key, et);
        }
        if ((st = rd64(c, &count, "array length", qkey))) return st;
        kv->elem_type = (enum moeinf_gguf_type)et;
        kv->n_elem = count;
        kv->data = c->base + c->pos;
        start = c->pos;
        /* A string element takes at least its 8-byte length. */
        uint64_t min_elem =
            et == MOEINF_GGUF_TYPE_STRING ? 8 : moeinf_gguf_scalar_size(kv->elem_type);
        if (count > left(c) / min_elem) {
            return bad(
                c, "array '%s' of %" PRIu64 " %s elements exceeds the remaining %" PRIu64 " bytes",
                key, count, moeinf_gguf_type_str(kv->elem_type), left(c));
        }
        if (et != MOEINF_GGUF_TYPE_STRING) {
            c->pos += count * min_elem;
        } else {
            /* count <= left/8, so this allocation is bounded by the file size. */
            kv->str_off = malloc((size_t)(count ? count : 1) * sizeof *kv->str_off);
            if (!kv->str_off) {
                return moeinf_fail(c->err, MOEINF_ERR_NOMEM, "%s: out of memory for array '%s'",
                                   c->path, key);
            }
            for (uint64_t i = 0; i < count; i++) {
                kv->str_off[i] = c->pos - start;
                struct moeinf_gguf_str s;
                if ((st = rdstr(c, &s, "array element", qkey))) return st;
            }
        }
    }
    kv->n_bytes = c->pos - start;
    return MOEINF_OK;
}

static int str_cmp(struct moeinf_gguf_str a, struct moeinf_gguf_str b) {
    uint64_t n = a.len < b.len ? a.len : b.len;
    int r = n ? memcmp(a.data, b.data, (size_t)n) : 0;
    if (r) return r;
    return (a.len > b.len) - (a.len < b.len);
}

static int kv_ptr_cmp(const void *a, const void *b) {
    const struct moeinf_gguf_kv *x = *(const struct moeinf_gguf_kv *const *)a;
    const struct moeinf_gguf_kv *y = *(const struct moeinf_gguf_kv *const *)b;
    int r = str_cmp(x->key, y->key);
    /* Equal keys keep file order, so the first occurrence is found and reported. */
    return r ? r : (x > y) - (x < y);
}

static int tensor_ptr_cmp(const void *a, const void *b) {
    const struct moeinf_gguf_tensor *x = *(const struct moeinf_gguf_tensor *const *)a;
    const struct moeinf_gguf_tensor *y = *(const struct moeinf_gguf_tensor *const *)b;
    int r = strcmp(x->name, y->name);
    return r ? r : (x > y) - (x < y);
}

static enum moeinf_status read_metadata(struct cursor *c, struct moeinf_gguf *g) {
    enum moeinf_status st;
    if (g->n_kv > left(c) / MIN_KV_BYTES) {
        return bad(c,
                   "truncated metadata: %" PRIu64 " entries cannot fit in the remaining %" PRIu64
                   " bytes",
                   g->n_kv, left(c));
    }
    g->kv = calloc((size_t)(g->n_kv ? g->n_kv : 1), sizeof *g->kv);
    g->kv_by_key = malloc((size_t)(g->n_kv ? g->n_kv : 1) * sizeof(const struct moeinf_gguf_kv *));
    if (!g->kv || !g->kv_by_key) {
        return moeinf_fail(c->err, MOEINF_ERR_NOMEM, "%s: out of memory", c->path);
    }
    for (uint64_t i = 0; i < g->n_kv; i++) {
        struct moeinf_gguf_kv *kv = &g->kv[i];
        char who[40];
        snprintf(who, sizeof who, "metadata entry %" PRIu64, i);
        if ((st = rdstr(c, &kv->key, "key", who))) return st;
        char key[72];
        char qkey[76];
        moeinf_gguf_shown(kv->key.data, kv->key.len, key, sizeof key);
        snprintf(qkey, sizeof qkey, "'%s'", key);
        if ((st = read_value(c, kv, key, qkey))) return st;
        g->kv_by_key[i] = kv;
    }
    if (g->n_kv > 1)
        qsort(g->kv_by_key, (size_t)g->n_kv, sizeof(const struct moeinf_gguf_kv *), kv_ptr_cmp);
    for (uint64_t i = 1; i < g->n_kv; i++) {
        if (str_cmp(g->kv_by_key[i - 1]->key, g->kv_by_key[i]->key) == 0) {
            char key[72];
            const struct moeinf_gguf_str *k = &g->kv_by_key[i]->key;
            return bad(c, "duplicate key '%s'",
                       moeinf_gguf_shown(k->data, k->len, key, sizeof key));
        }
    }
    return MOEINF_OK;
}

static enum moeinf_status read_alignment(struct cursor *c, struct moeinf_gguf *g) {
    g->alignment = DEFAULT_ALIGNMENT;
    int64_t i = moeinf_gguf_find_key(g, "general.alignment");
    if (i < 0) return MOEINF_OK;
    const struct moeinf_gguf_kv *kv = &g->kv[i];
    if (!is_int_type(kv->type)) {
        return bad(c, "general.alignment has type %s, expected an integer",
                   moeinf_gguf_type_str(kv->type));
    }
    bool big;
    int64_t a = moeinf_gguf_load_int(kv->type, kv->data, &big);
    /* The GGUF specification asks for a multiple of 8: smaller ones would put tensor data
     * (floats, halves, quant blocks) at addresses the kernels cannot load from. */
    if (big || a < 8 || (a & (a - 1)) != 0) {
        return bad(c, "general.alignment %" PRId64 " is not a power of two and a multiple of 8", a);
    }
    g->alignment = (uint64_t)a;
    return MOEINF_OK;
}

/* ---- tensors -------------------------------------------------------------------------- */

static enum moeinf_status read_tensor_info(struct cursor *c, struct moeinf_gguf_tensor *t,
                                           uint64_t index) {
    enum moeinf_status st;
    char who[40];
    snprintf(who, sizeof who, "tensor info %" PRIu64, index);
    struct moeinf_gguf_str name;
    uint64_t len;
    /* The length is checked against the name limit before the file size, so that an absurd
     * length is reported as what it is. */
    if ((st = need(c, 8, "tensor name", who))) return st;
    len = moeinf_le_u64(c->base + c->pos);
    if (len > MAX_TENSOR_NAME) {
        return bad(c,
                   "tensor info %" PRIu64 ": tensor name of %" PRIu64 " bytes is too long (max %d)",
                   index, len, MAX_TENSOR_NAME);
    }
    if ((st = rdstr(c, &name, "tensor name", who))) return st;
    if (memchr(name.data, '\0', (size_t)name.len)) {
        return bad(c, "tensor info %" PRIu64 ": tensor name contains a NUL byte", index);
    }
    memcpy(t->name, name.data, (size_t)name.len);
    t->name[name.len] = '\0';
    char nm[72];
    char qnm[76];
    moeinf_gguf_shown(name.data, name.len, nm, sizeof nm);
    snprintf(qnm, sizeof qnm, "'%s'", nm);

    uint32_t n_dims;
    if ((st = rd32(c, &n_dims, "dimension count", qnm))) return st;
    if (n_dims < 1 || n_dims > MOEINF_GGUF_MAX_DIMS) {
        return bad(c, "tensor '%s' has %u dimensions (1 to %d allowed)", nm, n_dims,
                   MOEINF_GGUF_MAX_DIMS);
    }
    t->n_dims = (int)n_dims;
    int64_t n_elem = 1;
    for (int d = 0; d < MOEINF_GGUF_MAX_DIMS; d++)
        t->ne[d] = 1;
    for (uint32_t d = 0; d < n_dims; d++) {
        uint64_t u;
        if ((st = rd64(c, &u, "shape", qnm))) return st;
        int64_t ne = (int64_t)u;
        if (u > INT64_MAX || ne <= 0) {
            return bad(c, "tensor '%s' has a non-positive dimension ne[%u] = %" PRId64, nm, d, ne);
        }
        if (n_elem > INT64_MAX / ne) {
            return bad(c, "tensor '%s': shape overflows (element count past 2^63)", nm);
        }
        n_elem *= ne;
        t->ne[d] = ne;
    }
    uint32_t type;
    if ((st = rd32(c, &type, "type", qnm))) return st;
    const struct moeinf_type_traits *ti = moeinf_type_traits_get((int)type);
    if (type > INT32_MAX || !ti) return bad(c, "tensor '%s' has unknown type %u", nm, type);
    t->type = (int)type;
    if (t->ne[0] % ti->block_size != 0) {
        return bad(c,
                   "tensor '%s': ne[0] = %" PRId64 " is not a multiple of the block size %" PRId64
                   " of %s",
                   nm, t->ne[0], ti->block_size, ti->name);
    }
    uint64_t n_blocks = (uint64_t)(n_elem / ti->block_size);
    if (n_blocks > UINT64_MAX / ti->type_size) {
        return bad(c, "tensor '%s': byte size overflows", nm);
    }
    t->n_bytes = n_blocks * ti->type_size;
    if ((st = rd64(c, &t->offset, "data offset", qnm))) return st;
    return MOEINF_OK;
}

static enum moeinf_status read_tensors(struct cursor *c, struct moeinf_gguf *g) {
    enum moeinf_status st;
    if (g->n_tensors > left(c) / MIN_TENSOR_BYTES) {
        return bad(c,
                   "truncated tensor infos: %" PRIu64
                   " tensors cannot fit in the remaining %" PRIu64 " bytes",
                   g->n_tensors, left(c));
    }
    size_t n = (size_t)(g->n_tensors ? g->n_tensors : 1);
    g->tensors = calloc(n, sizeof *g->tensors);
    g->tensor_by_name = malloc(n * sizeof(const struct moeinf_gguf_tensor *));
    if (!g->tensors || !g->tensor_by_name) {
        return moeinf_fail(c->err, MOEINF_ERR_NOMEM, "%s: out of memory", c->path);
    }
    for (uint64_t i = 0; i < g->n_tensors; i++) {
        if ((st = read_tensor_info(c, &g->tensors[i], i))) return st;
        g->tensor_by_name[i] = &g->tensors[i];
    }

    /* The data section starts at the next multiple of the alignment. A file without tensors
     * may end before that padding (ggml writes none then). */
    uint64_t a = g->alignment;
    uint64_t pad = (a - c->pos % a) % a;
    if (c->pos > UINT64_MAX - pad) return bad(c, "data offset overflows");
    g->data_offset = c->pos + pad;
    if (g->n_tensors > 0 && g->data_offset > c->size && !g->header_only) {
        return bad(
            c, "truncated before the data section (file is %" PRIu64 " bytes, data at %" PRIu64 ")",
            c->size, g->data_offset);
    }
    /* header-only: the data section may be missing; every tensor views a zero-filled mapping
     * as large as the data the table describes, so that no view reads past anything */
    const uint64_t room = g->header_only                ? MAX_ABSENT_BYTES
                          : g->data_offset <= c->size ? c->size - g->data_offset
                                                      : 0;
    uint64_t data_end = 0;
    for (uint64_t i = 0; i < g->n_tensors; i++) {
        struct moeinf_gguf_tensor *t = &g->tensors[i];
        char nm[72];
        moeinf_gguf_shown(t->name, strlen(t->name), nm, sizeof nm);
        if (t->offset % a != 0) {
            return bad(c,
                       "tensor '%s' offset %" PRIu64 " is not a multiple of the alignment %" PRIu64,
                       nm, t->offset, a);
        }
        uint64_t rel = t->offset;
        if ((rel > room || t->n_bytes > room - rel) && g->header_only) {
            return bad(c, "tensor '%s' data (offset %" PRIu64 ", %" PRIu64 " bytes) is too large",
                       nm, rel, t->n_bytes);
        }
        if (rel > room || t->n_bytes > room - rel) {
            return bad(c,
                       "tensor '%s' data (offset %" PRIu64 ", %" PRIu64
                       " bytes) ends past the end of the file (%" PRIu64 " bytes)",
                       nm, rel, t->n_bytes, c->size);
        }
        if (rel + t->n_bytes > data_end) data_end = rel + t->n_bytes;
        if (g->header_only) continue;
        t->offset = g->data_offset + rel;
        t->data = c->base + t->offset;
    }
    g->data_bytes = data_end;
    if (g->header_only) {
        size_t len = (size_t)(data_end ? data_end : 1);
        void *zero = mmap(NULL, len, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        if (zero == MAP_FAILED) {
            return moeinf_fail(c->err, MOEINF_ERR_NOMEM,
                               "%s: cannot reserve %" PRIu64 " bytes of address space", c->path,
                               data_end);
        }
        g->absent = zero;
        g->absent_size = len;
        for (uint64_t i = 0; i < g->n_tensors; i++) {
            struct moeinf_gguf_tensor *t = &g->tensors[i];
            t->data = (const uint8_t *)zero + t->offset;
            t->offset += g->data_offset;
        }
    }
    if (g->n_tensors > 1) {
        qsort(g->tensor_by_name, (size_t)g->n_tensors, sizeof(const struct moeinf_gguf_tensor *),
              tensor_ptr_cmp);
    }
    for (uint64_t i = 1; i < g->n_tensors; i++) {
        if (strcmp(g->tensor_by_name[i - 1]->name, g->tensor_by_name[i]->name) == 0) {
            char nm[72];
            const char *s = g->tensor_by_name[i]->name;
            return bad(c, "duplicate tensor name '%s'",
                       moeinf_gguf_shown(s, strlen(s), nm, sizeof nm));
        }
    }
    return MOEINF_OK;
}

/* ---- open ----------------------------------------------------------------------------- */

static enum moeinf_status parse(struct moeinf_gguf *g, struct moeinf_error *err) {
    struct cursor c = {g->map.data, g->map.size, 0, g->path, err};
    enum moeinf_status st;
    if (c.size < 4) return bad(&c, "truncated header (%" PRIu64 " bytes; not a GGUF file)", c.size);
    if (memcmp(c.base, "GGUF", 4) != 0) return bad(&c, "bad magic (not a GGUF file)");
    c.pos = 4;
    if ((st = rd32(&c, &g->version, "header", ""))) return st;
    if (g->version != 2 && g->version != 3) {
        uint32_t v = g->version;
        uint32_t swapped = (v >> 24) | (v >> 8 & 0xff00) | (v << 8 & 0xff0000) | (v << 24);
        /* A big-endian writer stores version 3 as 00 00 00 03, which reads as 0x03000000. */
        if ((v & 0xffff) == 0 && swapped >= 1 && swapped <= 3) {
            return bad(&c, "big-endian GGUF files are not supported");
        }
        return bad(&c, "unsupported GGUF version %u (2 and 3 are read)", v);
    }
    if ((st = rd64(&c, &g->n_tensors, "header", ""))) return st;
    if ((st = rd64(&c, &g->n_kv, "header", ""))) return st;
    if ((st = read_metadata(&c, g))) return st;
    if ((st = read_alignment(&c, g))) return st;
    return read_tensors(&c, g);
}

static enum moeinf_status finish_open(struct moeinf_gguf *g, struct moeinf_gguf **out,
                                      struct moeinf_error *err) {
    enum moeinf_status st = parse(g, err);
    if (st) {
        moeinf_gguf_free(g);
        return st;
    }
    *out = g;
    return MOEINF_OK;
}

static struct moeinf_gguf *alloc_gguf(const char *path) {
    struct moeinf_gguf *g = calloc(1, sizeof *g);
    if (!g) return NULL;
    g->path = strdup(path);
    g->map.fd = -1;
    if (!g->path) {
        free(g);
        return NULL;
    }
    return g;
}

enum moeinf_status moeinf_gguf_open(const char *path, struct moeinf_gguf **out,
                                    struct moeinf_error *err) {
    return moeinf_gguf_open_mode(path, MOEINF_MAP_FILE, NULL, out, err);
}

enum moeinf_status moeinf_gguf_open_mode(const char *path, enum moeinf_map_mode mode,
                                         const struct moeinf_progress *progress,
                                         struct moeinf_gguf **out, struct moeinf_error *err) {
    struct moeinf_gguf *g = alloc_gguf(path);
    if (!g) return moeinf_fail(err, MOEINF_ERR_NOMEM, "%s: out of memory", path);
    enum moeinf_status st = moeinf_file_map_mode(path, mode, progress, &g->map, err);
    if (st) {
        moeinf_gguf_free(g);
        return st;
    }
    g->owns_map = true;
    return finish_open(g, out, err);
}

enum moeinf_status moeinf_gguf_open_header(const char *path, struct moeinf_gguf **out,
                                           struct moeinf_error *err) {
    struct moeinf_gguf *g = alloc_gguf(path);
    if (!g) return moeinf_fail(err, MOEINF_ERR_NOMEM, "%s: out of memory", path);
    g->header_only = true;
    enum moeinf_status st = moeinf_file_map_mode(path, MOEINF_MAP_FILE, NULL, &g->map, err);
    if (st) {
        moeinf_gguf_free(g);
        return st;
    }
    g->owns_map = true;
    return finish_open(g, out, err);
}

enum moeinf_status moeinf_gguf_open_buffer(const void *data, uint64_t size, const char *path,
                                           struct moeinf_gguf **out, struct moeinf_error *err) {
    struct moeinf_gguf *g = alloc_gguf(path);
    if (!g) return moeinf_fail(err, MOEINF_ERR_NOMEM, "%s: out of memory", path);
    g->map.data = size ? data : NULL;
    g->map.size = size;
    return finish_open(g, out, err);
}

void moeinf_gguf_free(struct moeinf_gguf *g) {
    if (!g) return;
    if (g->kv) {
        for (uint64_t i = 0; i < g->n_kv; i++)
            free(g->kv[i].str_off);
    }
    free(g->kv);
    free(g->kv_by_key);
    free(g->tensors);
    free(g->tensor_by_name);
    if (g->owns_map) moeinf_file_unmap(&g->map);
    if (g->absent) munmap(g->absent, g->absent_size);
    free(g->path);
    free(g);
}

/* ---- lookups and getters -------------------------------------------------------------- */

static int key_search_cmp(const void *key, const void *elem) {
    const struct moeinf_gguf_str *k = key;
    const struct moeinf_gguf_kv *kv = *(const struct moeinf_gguf_kv *const *)elem;
    return str_cmp(*k, kv->key);
}

int64_t moeinf_gguf_find_key(const struct moeinf_gguf *g, const char *key) {
    if (!g->n_kv || !g->kv_by_key) return -1; /* none, or called while parsing failed */
    struct moeinf_gguf_str k = {key, strlen(key)};
    const struct moeinf_gguf_kv *const *p = bsearch(
        &k, g->kv_by_key, (size_t)g->n_kv, sizeof(const struct moeinf_gguf_kv *), key_search_cmp);
    return p ? (int64_t)(*p - g->kv) : -1;
}

static int name_search_cmp(const void *key, const void *elem) {
    const struct moeinf_gguf_tensor *t = *(const struct moeinf_gguf_tensor *const *)elem;
    return strcmp(key, t->name);
}

const struct moeinf_gguf_tensor *moeinf_gguf_find_tensor(const struct moeinf_gguf *g,
                                                         const char *name) {
    if (!g->n_tensors) return NULL;
    const struct moeinf_gguf_tensor *const *p =
        bsearch(name, g->tensor_by_name, (size_t)g->n_tensors,
                sizeof(const struct moeinf_gguf_tensor *), name_search_cmp);
    return p ? *p : NULL;
}

/* The kv of a key; absent: NULL, and an error unless optional. */
static const struct moeinf_gguf_kv *lookup(const struct moeinf_gguf *g, const char *key,
                                           bool optional, enum moeinf_status *st,
                                           struct moeinf_error *err) {
    int64_t i = moeinf_gguf_find_key(g, key);
    *st = MOEINF_OK;
    if (i >= 0) return &g->kv[i];
    if (!optional) *st = moeinf_fail(err, MOEINF_ERR_FORMAT, "%s: missing key '%s'", g->path, key);
    return NULL;
}

static enum moeinf_status wrong_type(const struct moeinf_gguf *g, const char *key,
                                     const struct moeinf_gguf_kv *kv, const char *expected,
                                     struct moeinf_error *err) {
    if (kv->type == MOEINF_GGUF_TYPE_ARRAY) {
        return moeinf_fail(err, MOEINF_ERR_FORMAT, "%s: key '%s' is an array of %s, expected %s",
                           g->path, key, moeinf_gguf_type_str(kv->elem_type), expected);
    }
    return moeinf_fail(err, MOEINF_ERR_FORMAT, "%s: key '%s' has type %s, expected %s", g->path,
                       key, moeinf_gguf_type_str(kv->type), expected);
}

static enum moeinf_status get_u32(const struct moeinf_gguf *g, const char *key, uint32_t *out,
                                  bool optional, struct moeinf_error *err) {
    enum moeinf_status st;
    const struct moeinf_gguf_kv *kv = lookup(g, key, optional, &st, err);
    if (!kv) return st;
    if (!is_int_type(kv->type)) return wrong_type(g, key, kv, "an integer", err);
    bool big;
    int64_t v = moeinf_gguf_load_int(kv->type, kv->data, &big);
    if (big || v < 0 || v > UINT32_MAX) {
        if (big) v = INT64_MAX;
        return moeinf_fail(err, MOEINF_ERR_FORMAT, "%s: key '%s' = %" PRId64 "%s is out of range",
                           g->path, key, v, big ? "+" : "");
    }
    *out = (uint32_t)v;
    return MOEINF_OK;
}

enum moeinf_status moeinf_gguf_get_u32(const struct moeinf_gguf *g, const char *key, uint32_t *out,
                                       struct moeinf_error *err) {
    return get_u32(g, key, out, false, err);
}

enum moeinf_status moeinf_gguf_get_u32_opt(const struct moeinf_gguf *g, const char *key,
                                           uint32_t *out, struct moeinf_error *err) {
    return get_u32(g, key, out, true, err);
}

static enum moeinf_status get_f32(const struct moeinf_gguf *g, const char *key, float *out,
                                  bool optional, struct moeinf_error *err) {
    enum moeinf_status st;
    const struct moeinf_gguf_kv *kv = lookup(g, key, optional, &st, err);
    if (!kv) return st;
    if (kv->type == MOEINF_GGUF_TYPE_FLOAT32) {
        *out = moeinf_le_f32(kv->data);
    } else if (kv->type == MOEINF_GGUF_TYPE_FLOAT64) {
        *out = (float)moeinf_le_f64(kv->data);
    } else {
        return wrong_type(g, key, kv, "a float", err);
    }
    return MOEINF_OK;
}

enum moeinf_status moeinf_gguf_get_f32(const struct moeinf_gguf *g, const char *key, float *out,
                                       struct moeinf_error *err) {
    return get_f32(g, key, out, false, err);
}

enum moeinf_status moeinf_gguf_get_f32_opt(const struct moeinf_gguf *g, const char *key, float *out,
                                           struct moeinf_error *err) {
    return get_f32(g, key, out, true, err);
}

enum moeinf_status moeinf_gguf_get_bool_opt(const struct moeinf_gguf *g, const char *key, bool *out,
                                            struct moeinf_error *err) {
    enum moeinf_status st;
    const struct moeinf_gguf_kv *kv = lookup(g, key, true, &st, err);
    if (!kv) return st;
    if (kv->type != MOEINF_GGUF_TYPE_BOOL) return wrong_type(g, key, kv, "bool", err);
    *out = kv->data[0] != 0;
    return MOEINF_OK;
}

static enum moeinf_status get_str(const struct moeinf_gguf *g, const char *key,
                                  struct moeinf_gguf_str *out, bool optional,
                                  struct moeinf_error *err) {
    enum moeinf_status st;
    const struct moeinf_gguf_kv *kv = lookup(g, key, optional, &st, err);
    if (!kv) return st;
    if (kv->type != MOEINF_GGUF_TYPE_STRING) return wrong_type(g, key, kv, "string", err);
    out->len = moeinf_le_u64(kv->data);
    out->data = (const char *)kv->data + 8;
    return MOEINF_OK;
}

enum moeinf_status moeinf_gguf_get_str(const struct moeinf_gguf *g, const char *key,
                                       struct moeinf_gguf_str *out, struct moeinf_error *err) {
    return get_str(g, key, out, false, err);
}

enum moeinf_status moeinf_gguf_get_str_opt(const struct moeinf_gguf *g, const char *key,
                                           struct moeinf_gguf_str *out, struct moeinf_error *err) {
    return get_str(g, key, out, true, err);
}

enum moeinf_status moeinf_gguf_get_arr(const struct moeinf_gguf *g, const char *key,
                                       enum moeinf_gguf_type elem_type,
                                       const struct moeinf_gguf_kv **out,
                                       struct moeinf_error *err) {
    enum moeinf_status st;
    const struct moeinf_gguf_kv *kv = lookup(g, key, false, &st, err);
    if (!kv) return st;
    if (kv->type != MOEINF_GGUF_TYPE_ARRAY || kv->elem_type != elem_type) {
        char expected[32];
        snprintf(expected, sizeof expected, "an array of %s", moeinf_gguf_type_str(elem_type));
        return wrong_type(g, key, kv, expected, err);
    }
    *out = kv;
    return MOEINF_OK;
}

struct moeinf_gguf_str moeinf_gguf_arr_str(const struct moeinf_gguf_kv *kv, uint64_t i) {
    assert(kv->str_off && i < kv->n_elem);
    const uint8_t *p = kv->data + kv->str_off[i];
    struct moeinf_gguf_str s = {(const char *)p + 8, moeinf_le_u64(p)};
    return s;
}

float moeinf_gguf_arr_f32(const struct moeinf_gguf_kv *kv, uint64_t i) {
    assert(i < kv->n_elem && kv->elem_type != MOEINF_GGUF_TYPE_STRING);
    const uint8_t *p = kv->data + i * moeinf_gguf_scalar_size(kv->elem_type);
    if (kv->elem_type == MOEINF_GGUF_TYPE_FLOAT32) return moeinf_le_f32(p);
    if (kv->elem_type == MOEINF_GGUF_TYPE_FLOAT64) return (float)moeinf_le_f64(p);
    bool big;
    return (float)moeinf_gguf_load_int(kv->elem_type, p, &big);
}

int32_t moeinf_gguf_arr_i32(const struct moeinf_gguf_kv *kv, uint64_t i) {
    assert(i < kv->n_elem && kv->elem_type != MOEINF_GGUF_TYPE_STRING);
    const uint8_t *p = kv->data + i * moeinf_gguf_scalar_size(kv->elem_type);
    if (kv->elem_type == MOEINF_GGUF_TYPE_INT32) return (int32_t)moeinf_le_u32(p);
    if (kv->elem_type == MOEINF_GGUF_TYPE_FLOAT32 || kv->elem_type == MOEINF_GGUF_TYPE_FLOAT64) {
        double d = kv->elem_type == MOEINF_GGUF_TYPE_FLOAT32 ? moeinf_le_f32(p) : moeinf_le_f64(p);
        return d >= INT32_MIN && d <= INT32_MAX ? (int32_t)d : 0;
    }
    bool big;
    int64_t v = moeinf_gguf_load_int(kv->elem_type, p, &big);
    return v >= INT32_MIN && v <= INT32_MAX ? (int32_t)v : 0;
}

bool moeinf_gguf_str_eq(struct moeinf_gguf_str s, const char *c) {
    size_t n = strlen(c);
    return s.len == n && (n == 0 || memcmp(s.data, c, n) == 0);
}
