/*
 * test_gguf_writer.c - the streaming GGUF writer, checked through the reader: every value
 * type and array kind round-trips, copied entries keep their exact bytes, tensor data lands
 * at aligned offsets whatever the write chunking, and misuse or failure leaves no file.
 */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "gguf/gguf.h"
#include "gguf/gguf_writer.h"
#include "test.h"

/* NOLINTNEXTLINE(readability-function-size): a flat list of checks on one written file */
static void test_round_trip(void) {
    char path[512];
    test_tmp_path("writer-rt.gguf", path, sizeof path);
    struct moeinf_error err = {0};
    struct moeinf_gguf_writer *w = NULL;
    CHECK_EQ_INT(moeinf_gguf_writer_open(path, 64, &w, &err), MOEINF_OK);
    if (!w) return;

    uint8_t u8 = 250;
    int8_t i8 = -7;
    uint16_t u16 = 65535;
    int16_t i16 = -32768;
    int64_t i64 = INT64_MIN + 1;
    double f64 = -2.5e-300;
    CHECK_EQ_INT(moeinf_gguf_writer_add_scalar(w, "s.u8", MOEINF_GGUF_TYPE_UINT8, &u8, &err), 0);
    CHECK_EQ_INT(moeinf_gguf_writer_add_scalar(w, "s.i8", MOEINF_GGUF_TYPE_INT8, &i8, &err), 0);
    CHECK_EQ_INT(moeinf_gguf_writer_add_scalar(w, "s.u16", MOEINF_GGUF_TYPE_UINT16, &u16, &err), 0);
    CHECK_EQ_INT(moeinf_gguf_writer_add_scalar(w, "s.i16", MOEINF_GGUF_TYPE_INT16, &i16, &err), 0);
    CHECK_EQ_INT(moeinf_gguf_writer_add_u32(w, "s.u32", 0xdeadbeefu, &err), 0);
    CHECK_EQ_INT(moeinf_gguf_writer_add_i32(w, "s.i32", -123456789, &err), 0);
    CHECK_EQ_INT(moeinf_gguf_writer_add_u64(w, "s.u64", UINT64_MAX - 1, &err), 0);
    CHECK_EQ_INT(moeinf_gguf_writer_add_scalar(w, "s.i64", MOEINF_GGUF_TYPE_INT64, &i64, &err), 0);
    CHECK_EQ_INT(moeinf_gguf_writer_add_f32(w, "s.f32", -0.1f, &err), 0);
    CHECK_EQ_INT(moeinf_gguf_writer_add_scalar(w, "s.f64", MOEINF_GGUF_TYPE_FLOAT64, &f64, &err),
                 0);
    CHECK_EQ_INT(moeinf_gguf_writer_add_bool(w, "s.yes", true, &err), 0);
    CHECK_EQ_INT(moeinf_gguf_writer_add_bool(w, "s.no", false, &err), 0);
    CHECK_EQ_INT(moeinf_gguf_writer_add_str(w, "s.str", "multi\nline \xe2\x96\x81", &err), 0);
    CHECK_EQ_INT(moeinf_gguf_writer_add_str(w, "s.empty", "", &err), 0);

    const float af[4] = {1.0f, -2.0f, 3.5f, 1e-20f};
    const int32_t ai[3] = {-1, 0, INT32_MAX};
    const uint16_t au[2] = {1, 65535};
    const double ad[2] = {0.5, -1e100};
    CHECK_EQ_INT(moeinf_gguf_writer_add_arr(w, "a.f32", MOEINF_GGUF_TYPE_FLOAT32, af, 4, &err), 0);
    CHECK_EQ_INT(moeinf_gguf_writer_add_arr(w, "a.i32", MOEINF_GGUF_TYPE_INT32, ai, 3, &err), 0);
    CHECK_EQ_INT(moeinf_gguf_writer_add_arr(w, "a.u16", MOEINF_GGUF_TYPE_UINT16, au, 2, &err), 0);
    CHECK_EQ_INT(moeinf_gguf_writer_add_arr(w, "a.f64", MOEINF_GGUF_TYPE_FLOAT64, ad, 2, &err), 0);
    CHECK_EQ_INT(moeinf_gguf_writer_add_arr(w, "a.none", MOEINF_GGUF_TYPE_UINT8, NULL, 0, &err), 0);
    const char *strs[3] = {"<s>", "", "a\0b"};
    const size_t lens[3] = {3, 0, 3}; /* with lens, a string may hold a NUL */
    CHECK_EQ_INT(moeinf_gguf_writer_add_arr_str(w, "a.str", strs, lens, 3, &err), 0);
    CHECK_EQ_INT(moeinf_gguf_writer_add_arr_str(w, "a.cstr", strs, NULL, 2, &err), 0);

    /* Tensors: sizes that are not multiples of the alignment, then data in odd chunks that
     * span tensor boundaries. */
    int64_t ne_a[2] = {3, 5};     /* f32, 60 bytes */
    int64_t ne_b[3] = {64, 1, 2}; /* q8_0: 2 x 2 blocks x 34 = 136 bytes */
    int64_t ne_c[1] = {7};        /* f16, 14 bytes */
    CHECK_EQ_INT(moeinf_gguf_writer_add_tensor(w, "a", 0, 2, ne_a, &err), 0);
    CHECK_EQ_INT(moeinf_gguf_writer_add_tensor(w, "b", 8, 3, ne_b, &err), 0);
    CHECK_EQ_INT(moeinf_gguf_writer_add_tensor(w, "c", 1, 1, ne_c, &err), 0);
    CHECK_EQ_INT(moeinf_gguf_writer_tensor_bytes(w, 0), 60);
    CHECK_EQ_INT(moeinf_gguf_writer_tensor_bytes(w, 1), 136);
    CHECK_EQ_INT(moeinf_gguf_writer_tensor_bytes(w, 2), 14);
    CHECK_EQ_INT(moeinf_gguf_writer_tensor_bytes(w, 3), 0);
    uint8_t data[210];
    for (int i = 0; i < 210; i++)
        data[i] = (uint8_t)(i * 7 + 3);
    size_t done = 0;
    size_t step = 1;
    while (done < sizeof data) {
        size_t n = sizeof data - done < step ? sizeof data - done : step;
        CHECK_EQ_INT(moeinf_gguf_writer_write(w, data + done, n, &err), 0);
        done += n;
        step = step * 3 + 1;
    }
    CHECK(!test_file_exists(path)); /* nothing at the path before finish */
    CHECK_EQ_INT(moeinf_gguf_writer_finish(w, &err), MOEINF_OK);
    moeinf_gguf_writer_free(w);
    CHECK(test_file_exists(path));
    CHECK_EQ_INT(test_temp_leftovers("writer-rt.gguf"), 0);

    struct moeinf_gguf *g = NULL;
    CHECK_EQ_INT(moeinf_gguf_open(path, &g, &err), MOEINF_OK);
    if (!g) {
        fprintf(stderr, "%s\n", err.msg);
        return;
    }
    CHECK_EQ_INT(g->alignment, 64);
    CHECK_EQ_INT(g->n_kv, 1 + 14 + 7);
    CHECK_EQ_INT(g->data_offset % 64, 0);
    uint32_t u = 0;
    CHECK_EQ_INT(moeinf_gguf_get_u32(g, "s.u8", &u, &err), 0);
    CHECK_EQ_INT(u, 250);
    CHECK_EQ_INT(moeinf_gguf_get_u32(g, "s.u16", &u, &err), 0);
    CHECK_EQ_INT(u, 65535);
    CHECK_EQ_INT(moeinf_gguf_get_u32(g, "s.u32", &u, &err), 0);
    CHECK_EQ_INT(u, 0xdeadbeefu);
    CHECK_EQ_INT(moeinf_gguf_get_u32(g, "general.alignment", &u, &err), 0);
    CHECK_EQ_INT(u, 64);
    /* Signed and 64-bit values, read back from their raw little-endian bytes. */
    int64_t k = moeinf_gguf_find_key(g, "s.i8");
    CHECK(k >= 0 && g->kv[k].type == MOEINF_GGUF_TYPE_INT8 && (int8_t)g->kv[k].data[0] == -7);
    k = moeinf_gguf_find_key(g, "s.i16");
    CHECK(k >= 0 && g->kv[k].type == MOEINF_GGUF_TYPE_INT16 && g->kv[k].data[0] == 0x00 &&
          g->kv[k].data[1] == 0x80);
    k = moeinf_gguf_find_key(g, "s.i32");
    CHECK(k >= 0 && g->kv[k].type == MOEINF_GGUF_TYPE_INT32);
    if (k >= 0) {
        uint32_t x = (uint32_t)g->kv[k].data[0] | (uint32_t)g->kv[k].data[1] << 8 |
                     (uint32_t)g->kv[k].data[2] << 16 | (uint32_t)g->kv[k].data[3] << 24;
        CHECK_EQ_INT((int32_t)x, -123456789);
    }
    k = moeinf_gguf_find_key(g, "s.u64");
    CHECK(k >= 0 && g->kv[k].type == MOEINF_GGUF_TYPE_UINT64 && g->kv[k].data[0] == 0xfe &&
          g->kv[k].data[7] == 0xff);
    k = moeinf_gguf_find_key(g, "s.i64");
    CHECK(k >= 0 && g->kv[k].type == MOEINF_GGUF_TYPE_INT64 && g->kv[k].data[0] == 0x01 &&
          g->kv[k].data[7] == 0x80);
    float f = 0;
    CHECK_EQ_INT(moeinf_gguf_get_f32(g, "s.f32", &f, &err), 0);
    CHECK(f == -0.1f);
    CHECK_EQ_INT(moeinf_gguf_get_f32(g, "s.f64", &f, &err), 0);
    CHECK(f == (float)-2.5e-300);
    bool b = false;
    CHECK_EQ_INT(moeinf_gguf_get_bool_opt(g, "s.yes", &b, &err), 0);
    CHECK(b);
    CHECK_EQ_INT(moeinf_gguf_get_bool_opt(g, "s.no", &b, &err), 0);
    CHECK(!b);
    struct moeinf_gguf_str s;
    CHECK_EQ_INT(moeinf_gguf_get_str(g, "s.str", &s, &err), 0);
    CHECK(moeinf_gguf_str_eq(s, "multi\nline \xe2\x96\x81"));
    CHECK_EQ_INT(moeinf_gguf_get_str(g, "s.empty", &s, &err), 0);
    CHECK_EQ_INT(s.len, 0);

    const struct moeinf_gguf_kv *kv = NULL;
    CHECK_EQ_INT(moeinf_gguf_get_arr(g, "a.f32", MOEINF_GGUF_TYPE_FLOAT32, &kv, &err), 0);
    for (int i = 0; kv && i < 4; i++)
        CHECK(moeinf_gguf_arr_f32(kv, (uint64_t)i) == af[i]);
    kv = NULL;
    CHECK_EQ_INT(moeinf_gguf_get_arr(g, "a.i32", MOEINF_GGUF_TYPE_INT32, &kv, &err), 0);
    for (int i = 0; kv && i < 3; i++)
        CHECK_EQ_INT(moeinf_gguf_arr_i32(kv, (uint64_t)i), ai[i]);
    kv = NULL;
    CHECK_EQ_INT(moeinf_gguf_get_arr(g, "a.u16", MOEINF_GGUF_TYPE_UINT16, &kv, &err), 0);
    CHECK(kv && kv->n_elem == 2 && moeinf_gguf_arr_i32(kv, 1) == 65535);
    kv = NULL;
    CHECK_EQ_INT(moeinf_gguf_get_arr(g, "a.f64", MOEINF_GGUF_TYPE_FLOAT64, &kv, &err), 0);
    CHECK(kv && moeinf_gguf_arr_f32(kv, 0) == 0.5f);
    kv = NULL;
    CHECK_EQ_INT(moeinf_gguf_get_arr(g, "a.none", MOEINF_GGUF_TYPE_UINT8, &kv, &err), 0);
    CHECK(kv && kv->n_elem == 0);
    kv = NULL;
    CHECK_EQ_INT(moeinf_gguf_get_arr(g, "a.str", MOEINF_GGUF_TYPE_STRING, &kv, &err), 0);
    if (kv) {
        CHECK_EQ_INT(kv->n_elem, 3);
        CHECK(moeinf_gguf_str_eq(moeinf_gguf_arr_str(kv, 0), "<s>"));
        CHECK_EQ_INT(moeinf_gguf_arr_str(kv, 1).len, 0);
        struct moeinf_gguf_str e = moeinf_gguf_arr_str(kv, 2);
        CHECK(e.len == 3 && memcmp(e.data, "a\0b", 3) == 0);
    }
    kv = NULL;
    CHECK_EQ_INT(moeinf_gguf_get_arr(g, "a.cstr", MOEINF_GGUF_TYPE_STRING, &kv, &err), 0);
    CHECK(kv && kv->n_elem == 2 && moeinf_gguf_arr_str(kv, 1).len == 0);

    CHECK_EQ_INT(g->n_tensors, 3);
    const uint8_t *src = data;
    for (uint64_t i = 0; i < g->n_tensors; i++) {
        const struct moeinf_gguf_tensor *t = &g->tensors[i];
        CHECK_EQ_INT(t->offset % 64, 0);
        CHECK(memcmp(t->data, src, (size_t)t->n_bytes) == 0);
        src += t->n_bytes;
    }
    const struct moeinf_gguf_tensor *tb = moeinf_gguf_find_tensor(g, "b");
    CHECK(tb && tb->n_dims == 3 && tb->ne[0] == 64 && tb->ne[1] == 1 && tb->ne[2] == 2 &&
          tb->type == 8);
    /* The file ends with the last tensor's padding, as ggml writes it. */
    CHECK_EQ_INT(g->map.size, g->tensors[2].offset + 64);
    moeinf_gguf_free(g);
    remove(path);
}

/* add_kv copies every entry of a real file byte for byte. */
static void test_copy_kv(void) {
    char src_path[1024];
    char path[512];
    if (!test_shared_path("testdata/tokenizer/ggml-vocab-llama-spm.gguf", src_path,
                          sizeof src_path)) {
        return;
    }
    test_tmp_path("writer-copy.gguf", path, sizeof path);
    struct moeinf_error err = {0};
    struct moeinf_gguf *src = NULL;
    struct moeinf_gguf *g = NULL;
    CHECK_EQ_INT(moeinf_gguf_open(src_path, &src, &err), MOEINF_OK);
    if (!src) return;
    struct moeinf_gguf_writer *w = NULL;
    CHECK_EQ_INT(moeinf_gguf_writer_open(path, 0, &w, &err), MOEINF_OK);
    for (uint64_t i = 0; w && i < src->n_kv; i++) {
        CHECK_EQ_INT(moeinf_gguf_writer_add_kv(w, &src->kv[i], &err), MOEINF_OK);
    }
    CHECK_EQ_INT(moeinf_gguf_writer_add_kv(w, &src->kv[0], &err), MOEINF_ERR_ARG); /* again */
    moeinf_gguf_writer_free(w);
    CHECK(!test_file_exists(path)); /* the failed writer left nothing */

    CHECK_EQ_INT(moeinf_gguf_writer_open(path, 0, &w, &err), MOEINF_OK);
    for (uint64_t i = 0; w && i < src->n_kv; i++) {
        CHECK_EQ_INT(moeinf_gguf_writer_add_kv(w, &src->kv[i], &err), MOEINF_OK);
    }
    CHECK_EQ_INT(moeinf_gguf_writer_finish(w, &err), MOEINF_OK);
    moeinf_gguf_writer_free(w);
    CHECK_EQ_INT(moeinf_gguf_open(path, &g, &err), MOEINF_OK);
    if (g) {
        CHECK_EQ_INT(g->n_kv, src->n_kv);
        CHECK_EQ_INT(g->n_tensors, 0);
        for (uint64_t i = 0; i < src->n_kv && i < g->n_kv; i++) {
            const struct moeinf_gguf_kv *a = &src->kv[i];
            const struct moeinf_gguf_kv *b = &g->kv[i];
            CHECK(a->key.len == b->key.len && !memcmp(a->key.data, b->key.data, a->key.len));
            CHECK(a->type == b->type && a->elem_type == b->elem_type && a->n_elem == b->n_elem);
            CHECK(a->n_bytes == b->n_bytes && !memcmp(a->data, b->data, (size_t)a->n_bytes));
        }
    }
    moeinf_gguf_free(g);
    moeinf_gguf_free(src);
    remove(path);
}

static void test_misuse(void) {
    char path[512];
    test_tmp_path("writer-bad.gguf", path, sizeof path);
    remove(path);
    struct moeinf_error err = {0};
    struct moeinf_gguf_writer *w = NULL;
    int64_t ne[2] = {32, 2};

    CHECK_EQ_INT(moeinf_gguf_writer_open(path, 48, &w, &err), MOEINF_ERR_ARG);
    CHECK(w == NULL);
    CHECK_EQ_INT(moeinf_gguf_writer_open("/nonexistent-dir/x.gguf", 0, &w, &err), MOEINF_ERR_IO);
    CHECK(w == NULL);

    /* Errors stick: the first failure is what every later call reports. */
    CHECK_EQ_INT(moeinf_gguf_writer_open(path, 0, &w, &err), MOEINF_OK);
    CHECK_EQ_INT(moeinf_gguf_writer_add_u32(w, "k", 1, &err), MOEINF_OK);
    CHECK_EQ_INT(moeinf_gguf_writer_add_u32(w, "k", 2, &err), MOEINF_ERR_ARG);
    CHECK_STR_CONTAINS(err.msg, "duplicate key 'k'");
    CHECK_STR_CONTAINS(err.msg, "writer-bad.gguf");
    memset(&err, 0, sizeof err);
    CHECK_EQ_INT(moeinf_gguf_writer_add_u32(w, "other", 2, &err), MOEINF_ERR_ARG);
    CHECK_STR_CONTAINS(err.msg, "duplicate key 'k'");
    CHECK_EQ_INT(moeinf_gguf_writer_finish(w, &err), MOEINF_ERR_ARG);
    moeinf_gguf_writer_free(w);
    CHECK(!test_file_exists(path));

    struct {
        const char *name;
        int type, n_dims;
        int64_t ne0;
        const char *phrase;
    } bad[] = {
        {"t", 99, 2, 32, "unknown type 99"},
        {"t", 4, 2, 32, "unknown type 4"},
        {"t", 8, 2, 33, "not a multiple of the block size 32"},
        {"t", 0, 5, 32, "5 dimensions"},
        {"t", 0, 2, 0, "bad shape"},
        {"t", 0, 2, -1, "bad shape"},
    };

    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        CHECK_EQ_INT(moeinf_gguf_writer_open(path, 0, &w, &err), MOEINF_OK);
        int64_t shape[5] = {bad[i].ne0, 2, 1, 1, 1};
        CHECK_EQ_INT(
            moeinf_gguf_writer_add_tensor(w, bad[i].name, bad[i].type, bad[i].n_dims, shape, &err),
            MOEINF_ERR_ARG);
        CHECK_STR_CONTAINS(err.msg, bad[i].phrase);
        moeinf_gguf_writer_free(w);
    }
    char long_name[200];
    memset(long_name, 'x', 128);
    long_name[128] = '\0';
    CHECK_EQ_INT(moeinf_gguf_writer_open(path, 0, &w, &err), MOEINF_OK);
    CHECK_EQ_INT(moeinf_gguf_writer_add_tensor(w, long_name, 0, 2, ne, &err), MOEINF_ERR_ARG);
    CHECK_STR_CONTAINS(err.msg, "too long");
    moeinf_gguf_writer_free(w);

    CHECK_EQ_INT(moeinf_gguf_writer_open(path, 0, &w, &err), MOEINF_OK);
    CHECK_EQ_INT(moeinf_gguf_writer_add_tensor(w, "t", 0, 2, ne, &err), MOEINF_OK);
    CHECK_EQ_INT(moeinf_gguf_writer_add_tensor(w, "t", 0, 2, ne, &err), MOEINF_ERR_ARG);
    CHECK_STR_CONTAINS(err.msg, "duplicate tensor name 't'");
    moeinf_gguf_writer_free(w);

    /* Writing past the declared data, and finishing short of it. */
    uint8_t buf[300] = {0};
    CHECK_EQ_INT(moeinf_gguf_writer_open(path, 0, &w, &err), MOEINF_OK);
    CHECK_EQ_INT(moeinf_gguf_writer_add_tensor(w, "t", 0, 2, ne, &err), MOEINF_OK); /* 256 B */
    CHECK_EQ_INT(moeinf_gguf_writer_write(w, buf, 257, &err), MOEINF_ERR_ARG);
    CHECK_STR_CONTAINS(err.msg, "past the last tensor");
    moeinf_gguf_writer_free(w);
    CHECK(!test_file_exists(path));

    CHECK_EQ_INT(moeinf_gguf_writer_open(path, 0, &w, &err), MOEINF_OK);
    CHECK_EQ_INT(moeinf_gguf_writer_add_tensor(w, "t", 0, 2, ne, &err), MOEINF_OK);
    CHECK_EQ_INT(moeinf_gguf_writer_write(w, buf, 100, &err), MOEINF_OK);
    CHECK_EQ_INT(moeinf_gguf_writer_add_u32(w, "late", 1, &err), MOEINF_ERR_ARG);
    CHECK_STR_CONTAINS(err.msg, "after tensor data");
    moeinf_gguf_writer_free(w);

    CHECK_EQ_INT(moeinf_gguf_writer_open(path, 0, &w, &err), MOEINF_OK);
    CHECK_EQ_INT(moeinf_gguf_writer_add_tensor(w, "t", 0, 2, ne, &err), MOEINF_OK);
    CHECK_EQ_INT(moeinf_gguf_writer_write(w, buf, 100, &err), MOEINF_OK);
    CHECK_EQ_INT(moeinf_gguf_writer_finish(w, &err), MOEINF_ERR_ARG);
    CHECK_STR_CONTAINS(err.msg, "tensor 't' incomplete (100 of 256 bytes)");
    moeinf_gguf_writer_free(w);
    CHECK(!test_file_exists(path));

    /* Abandoned after writing data: the temp file goes too. */
    CHECK_EQ_INT(moeinf_gguf_writer_open(path, 0, &w, &err), MOEINF_OK);
    CHECK_EQ_INT(moeinf_gguf_writer_add_tensor(w, "t", 0, 2, ne, &err), MOEINF_OK);
    CHECK_EQ_INT(moeinf_gguf_writer_write(w, buf, 256, &err), MOEINF_OK);
    moeinf_gguf_writer_free(w);
    CHECK(!test_file_exists(path));
    CHECK_EQ_INT(test_temp_leftovers("writer-bad.gguf"), 0);
    moeinf_gguf_writer_free(NULL);
}

int main(void) {
    RUN(test_round_trip);
    RUN(test_copy_kv);
    RUN(test_misuse);
    return test_report();
}
