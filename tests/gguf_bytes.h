/*
 * gguf_bytes.h - a GGUF byte builder for tests: files written field by field, so that a test
 * can place exactly the defect it wants (a cut header, a lying count, an unknown type) where
 * the library's writer would refuse to. Values are little-endian whatever the host (base/le.h).
 *
 *   struct gguf_bytes b = {0};
 *   gguf_bytes_header(&b, 3, 0, 1);                 version, tensors, metadata entries
 *   gguf_bytes_kv_u32(&b, "general.alignment", 32);
 *   ... gguf_bytes_write(&b, path) or moeinf_gguf_open_buffer(b.p, b.n, ...) ...
 *   gguf_bytes_reset(&b);
 *
 * Out of memory aborts: it is not a test outcome.
 */
#ifndef MOEINF_TEST_GGUF_BYTES_H
#define MOEINF_TEST_GGUF_BYTES_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/le.h"
#include "gguf/gguf.h"

struct gguf_bytes {
    uint8_t *p;
    size_t n, cap;
};

static inline void gguf_bytes_put(struct gguf_bytes *b, const void *d, size_t n) {
    if (b->n + n > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->n + n)
            cap *= 2;
        uint8_t *p = realloc(b->p, cap);
        if (!p) abort();
        b->p = p;
        b->cap = cap;
    }
    if (n) memcpy(b->p + b->n, d, n);
    b->n += n;
}

static inline void gguf_bytes_u8(struct gguf_bytes *b, uint8_t v) {
    gguf_bytes_put(b, &v, 1);
}

/* The low n bytes of v, least significant first. */
static inline void gguf_bytes_le(struct gguf_bytes *b, uint64_t v, int n) {
    uint8_t le[8];
    moeinf_le_put(le, v, n);
    gguf_bytes_put(b, le, (size_t)n);
}

static inline void gguf_bytes_u32(struct gguf_bytes *b, uint32_t v) {
    gguf_bytes_le(b, v, 4);
}

static inline void gguf_bytes_u64(struct gguf_bytes *b, uint64_t v) {
    gguf_bytes_le(b, v, 8);
}

static inline void gguf_bytes_f32(struct gguf_bytes *b, float f) {
    uint8_t le[4];
    moeinf_le_put_f32(le, f);
    gguf_bytes_put(b, le, sizeof le);
}

static inline void gguf_bytes_f64(struct gguf_bytes *b, double d) {
    uint8_t le[8];
    moeinf_le_put_f64(le, d);
    gguf_bytes_put(b, le, sizeof le);
}

/* A GGUF string: u64 length, then the bytes (no terminator). */
static inline void gguf_bytes_str(struct gguf_bytes *b, const char *s) {
    gguf_bytes_u64(b, strlen(s));
    gguf_bytes_put(b, s, strlen(s));
}

static inline void gguf_bytes_header(struct gguf_bytes *b, uint32_t version, uint64_t n_tensors,
                                     uint64_t n_kv) {
    gguf_bytes_put(b, "GGUF", 4);
    gguf_bytes_u32(b, version);
    gguf_bytes_u64(b, n_tensors);
    gguf_bytes_u64(b, n_kv);
}

/* A metadata key and its value type (a GGUF value type id); the value follows. */
static inline void gguf_bytes_kv_head(struct gguf_bytes *b, const char *key, uint32_t type) {
    gguf_bytes_str(b, key);
    gguf_bytes_u32(b, type);
}

static inline void gguf_bytes_kv_u32(struct gguf_bytes *b, const char *key, uint32_t v) {
    gguf_bytes_kv_head(b, key, MOEINF_GGUF_TYPE_UINT32);
    gguf_bytes_u32(b, v);
}

/* A tensor info: name, n_dims, ne[0..n_dims-1], ggml type id, offset in the data section. */
static inline void gguf_bytes_tensor(struct gguf_bytes *b, const char *name, uint32_t n_dims,
                                     const int64_t *ne, uint32_t type, uint64_t offset) {
    gguf_bytes_str(b, name);
    gguf_bytes_u32(b, n_dims);
    for (uint32_t i = 0; i < n_dims; i++)
        gguf_bytes_u64(b, (uint64_t)ne[i]);
    gguf_bytes_u32(b, type);
    gguf_bytes_u64(b, offset);
}

static inline void gguf_bytes_zeros(struct gguf_bytes *b, size_t n) {
    for (size_t i = 0; i < n; i++)
        gguf_bytes_u8(b, 0);
}

/* Zeros up to the next multiple of align (the start of the data section). */
static inline void gguf_bytes_pad(struct gguf_bytes *b, size_t align) {
    gguf_bytes_zeros(b, (align - b->n % align) % align);
}

/* Writes the bytes to path (replacing it); false if that failed. */
static inline bool gguf_bytes_write(const struct gguf_bytes *b, const char *path) {
    FILE *f = fopen(path, "wb");
    if (!f) return false;
    bool ok = fwrite(b->p ? (const void *)b->p : "", 1, b->n, f) == b->n;
    return fclose(f) == 0 && ok;
}

/* Frees the bytes and starts empty again. */
static inline void gguf_bytes_reset(struct gguf_bytes *b) {
    free(b->p);
    memset(b, 0, sizeof *b);
}

#endif
