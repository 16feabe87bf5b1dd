/*
 * fuzz_gguf.c - the GGUF reader on arbitrary bytes (moeinf_gguf_open_buffer over the exact
 * input, so ASan sees any read past it). A refused file must come with a one-line message
 * naming the file; an accepted one must keep every promise of gguf.h: each key and tensor is
 * found again by name, every tensor lies inside the input, every array element can be read,
 * the typed getters and the printer run on every key.
 */
#include <string.h>

#include "app/inspect.h"
#include "fuzz.h"
#include "gguf/gguf.h"

#define PATH "fuzz.gguf"

/* The getters of every kind on one key (only "no crash, a named error" is checked). */
static void try_getters(const struct moeinf_gguf *g, const char *key, const uint8_t *data,
                        size_t size) {
    struct moeinf_error err;
    uint32_t u = 0;
    float f = 0.0f;
    bool b = false;
    struct moeinf_gguf_str s = {0};
    const struct moeinf_gguf_kv *kv = NULL;
    if (moeinf_gguf_get_u32(g, key, &u, &err) != MOEINF_OK) FUZZ_REQUIRE(strstr(err.msg, PATH));
    if (moeinf_gguf_get_u32_opt(g, key, &u, &err) != MOEINF_OK) FUZZ_REQUIRE(err.msg[0]);
    if (moeinf_gguf_get_f32(g, key, &f, &err) != MOEINF_OK) FUZZ_REQUIRE(err.msg[0]);
    if (moeinf_gguf_get_f32_opt(g, key, &f, &err) != MOEINF_OK) FUZZ_REQUIRE(err.msg[0]);
    if (moeinf_gguf_get_bool_opt(g, key, &b, &err) != MOEINF_OK) FUZZ_REQUIRE(err.msg[0]);
    if (moeinf_gguf_get_str(g, key, &s, &err) == MOEINF_OK) {
        FUZZ_REQUIRE((const uint8_t *)s.data >= data && s.len <= size &&
                     (const uint8_t *)s.data + s.len <= data + size);
    }
    if (moeinf_gguf_get_str_opt(g, key, &s, &err) != MOEINF_OK) FUZZ_REQUIRE(err.msg[0]);
    for (int t = 0; t < MOEINF_GGUF_TYPE_COUNT; t++) {
        if (moeinf_gguf_get_arr(g, key, (enum moeinf_gguf_type)t, &kv, &err) != MOEINF_OK) {
            FUZZ_REQUIRE(err.msg[0] && !strchr(err.msg, '\n'));
            continue;
        }
        FUZZ_REQUIRE(kv->type == MOEINF_GGUF_TYPE_ARRAY && (int)kv->elem_type == t);
    }
}

static void check_kv(const struct moeinf_gguf *g, uint64_t i, const uint8_t *data, size_t size) {
    const struct moeinf_gguf_kv *kv = &g->kv[i];
    FUZZ_REQUIRE(kv->key.len <= size);
    FUZZ_REQUIRE((const uint8_t *)kv->key.data >= data &&
                 (const uint8_t *)kv->key.data + kv->key.len <= data + size);
    FUZZ_REQUIRE(kv->data >= data && kv->n_bytes <= size && kv->data + kv->n_bytes <= data + size);
    /* A key without NUL bytes is found again, at its own index (duplicates are refused). */
    char key[512];
    if (kv->key.len < sizeof key && !memchr(kv->key.data, '\0', (size_t)kv->key.len)) {
        memcpy(key, kv->key.data, (size_t)kv->key.len);
        key[kv->key.len] = '\0';
        FUZZ_REQUIRE(moeinf_gguf_find_key(g, key) == (int64_t)i);
        try_getters(g, key, data, size);
    }
    if (kv->type != MOEINF_GGUF_TYPE_ARRAY) return;
    for (uint64_t e = 0; e < kv->n_elem && e < 64; e++) {
        if (kv->elem_type == MOEINF_GGUF_TYPE_STRING) {
            struct moeinf_gguf_str s = moeinf_gguf_arr_str(kv, e);
            FUZZ_REQUIRE((const uint8_t *)s.data >= data &&
                         (const uint8_t *)s.data + s.len <= data + size);
        } else {
            volatile float f = moeinf_gguf_arr_f32(kv, e);
            volatile int32_t v = moeinf_gguf_arr_i32(kv, e);
            (void)f;
            (void)v;
        }
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static FILE *devnull;
    if (!devnull) devnull = fopen("/dev/null", "w");
    struct moeinf_gguf *g = NULL;
    struct moeinf_error err = {0};
    enum moeinf_status st = moeinf_gguf_open_buffer(data, size, PATH, &g, &err);
    if (st != MOEINF_OK) {
        FUZZ_REQUIRE(g == NULL);
        FUZZ_REQUIRE(st == MOEINF_ERR_FORMAT || st == MOEINF_ERR_UNSUPPORTED ||
                     st == MOEINF_ERR_NOMEM);
        FUZZ_REQUIRE(strncmp(err.msg, PATH ": ", strlen(PATH) + 2) == 0);
        FUZZ_REQUIRE(!strchr(err.msg, '\n'));
        return 0;
    }
    FUZZ_REQUIRE(g->version == 2 || g->version == 3);
    FUZZ_REQUIRE(g->alignment > 0 && (g->alignment & (g->alignment - 1)) == 0);
    for (uint64_t i = 0; i < g->n_kv; i++)
        check_kv(g, i, data, size);
    for (uint64_t i = 0; i < g->n_tensors; i++) {
        const struct moeinf_gguf_tensor *t = &g->tensors[i];
        FUZZ_REQUIRE(moeinf_gguf_find_tensor(g, t->name) == t);
        FUZZ_REQUIRE(t->n_dims >= 1 && t->n_dims <= MOEINF_GGUF_MAX_DIMS);
        for (int d = 0; d < MOEINF_GGUF_MAX_DIMS; d++)
            FUZZ_REQUIRE(t->ne[d] >= 1);
        FUZZ_REQUIRE(t->offset >= g->data_offset && t->offset % g->alignment == 0);
        FUZZ_REQUIRE(t->offset <= size && t->n_bytes <= size - t->offset);
        FUZZ_REQUIRE(t->data == data + t->offset);
        /* Touch the first and last byte: ASan checks they are inside the input. */
        if (t->n_bytes) {
            volatile uint8_t first = t->data[0];
            volatile uint8_t last = t->data[t->n_bytes - 1];
            (void)first;
            (void)last;
        }
    }
    (void)moeinf_gguf_find_key(g, "general.architecture");
    if (devnull) moeinf_gguf_print(g, devnull);
    moeinf_gguf_free(g);
    return 0;
}
