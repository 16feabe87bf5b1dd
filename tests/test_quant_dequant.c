// ctest-labels: golden;kernels;every-table
/*
 * test_quant_dequant.c - dequantization (to_float) bit for bit against the `gguf` Python
 * package's reference dequantizers (a numpy port of ggml's dequantize_row_*), through fixtures
 * made by tools/quant/make_dequant_fixtures.py (tests/data/dequant_*.txt):
 *   - every quantized tensor of the tiny Q4_K_M models (Q8_0, Q5_0, Q4_K, Q5_K, Q6_K): the
 *     FNV-1a 64 hash of the whole dequantized tensor;
 *   - random blocks of every block type (also the ones no tiny model holds: Q4_1, Q5_1, Q2_K,
 *     Q3_K, IQ4_NL, IQ4_XS, MXFP4): the expected floats themselves.
 * And quantization where moeinf's reference quantizer is the package's (MXFP4): float blocks
 * and the bytes gguf.quants.quantize() writes for them (tests/data/quantize_blocks.txt).
 * Checked for the scalar table and the table MOEINF_KERNELS names (every table when unset).
 */
#include <errno.h>
#include <stdint.h>

#include "gguf/gguf.h"
#include "kernels_wanted.h"
#include "quant/kernels.h"
#include "quant/quant.h"
#include "test.h"

static const struct moeinf_kernels *tables[4];
static int n_tables;

static uint64_t fnv1a64(const void *p, size_t n, uint64_t h) {
    const uint8_t *b = p;
    for (size_t i = 0; i < n; i++) {
        h ^= b[i];
        h *= 0x100000001b3ull;
    }
    return h;
}

/* The type id of a ggml name as gguf-py prints it ("q4_k"), or -1. */
static int type_by_name(const char *name) {
    for (int t = 0; t < MOEINF_TYPE_COUNT; t++) {
        const char *n = moeinf_type_name(t);
        if (strlen(n) != strlen(name)) continue;
        bool same = true;
        for (size_t i = 0; name[i]; i++)
            same = same && (n[i] | 0x20) == (name[i] | 0x20);
        if (same) return t;
    }
    return -1;
}

static int hex_digit(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1;
}

/* Decodes a line of hex into out (at most cap bytes); returns the byte count or -1. */
static long decode_hex(const char *line, uint8_t *out, size_t cap) {
    size_t n = 0;
    for (; hex_digit(line[0]) >= 0 && hex_digit(line[1]) >= 0; line += 2) {
        if (n == cap) return -1;
        out[n++] = (uint8_t)(hex_digit(line[0]) * 16 + hex_digit(line[1]));
    }
    return (long)n;
}

/* Splits a line into at most max space-separated fields (in place); returns their count. */
static int split_fields(char *line, char **fields, int max) {
    int n = 0;
    char *save = NULL;
    for (char *tok = strtok_r(line, " \n", &save); tok && n < max;
         tok = strtok_r(NULL, " \n", &save))
        fields[n++] = tok;
    return n;
}

/* A whole-field integer in base 10 or 16; false if the field is not one. */
static bool parse_int(const char *s, int base, unsigned long long *out) {
    char *end = NULL;
    errno = 0;
    *out = strtoull(s, &end, base);
    return errno == 0 && end != s && *end == '\0';
}

static FILE *open_fixture(const char *name) {
    char path[512];
    char rel[128];
    snprintf(rel, sizeof rel, "tests/data/%s", name);
    test_src_path(rel, path, sizeof path);
    FILE *f = fopen(path, "r");
    CHECK_MSG(f != NULL, "cannot open %s", path);
    return f;
}

static void test_tiny_models(void) {
    char root[512];
    if (!test_shared_path("testdata/models", root, sizeof root)) return;
    FILE *f = open_fixture("dequant_tiny.txt");
    if (!f) return;
    char line[512];
    char open_name[128] = "";
    struct moeinf_gguf *g = NULL;
    int n_tensors = 0;
    int n_k = 0;
    while (fgets(line, sizeof line, f)) {
        if (line[0] == '#') continue;
        char *fld[5];
        unsigned long long n_elem;
        unsigned long long want;
        if (split_fields(line, fld, 5) != 5 || !parse_int(fld[3], 10, &n_elem) ||
            !parse_int(fld[4], 16, &want)) {
            CHECK_MSG(0, "bad fixture line: %s", line);
            continue;
        }
        const char *file = fld[0];
        const char *tensor = fld[1];
        const char *type = fld[2];
        if (strcmp(file, open_name) != 0) {
            moeinf_gguf_free(g);
            g = NULL;
            char path[768];
            snprintf(path, sizeof path, "%s/%s", root, file);
            struct moeinf_error err;
            CHECK_MSG(moeinf_gguf_open(path, &g, &err) == MOEINF_OK, "%s", err.msg);
            snprintf(open_name, sizeof open_name, "%s", file);
        }
        if (!g) continue;
        const struct moeinf_gguf_tensor *t = moeinf_gguf_find_tensor(g, tensor);
        CHECK_MSG(t != NULL, "%s: no tensor %s", file, tensor);
        if (!t) continue;
        CHECK_EQ_INT(t->type, type_by_name(type));
        int64_t n = t->ne[0];
        int64_t rows = t->ne[1] * t->ne[2] * t->ne[3];
        CHECK_EQ_INT(n * rows, (long long)n_elem);
        size_t rb = moeinf_row_bytes((enum moeinf_type)t->type, n);
        float *y = malloc((size_t)n * sizeof(float));
        for (int ti = 0; ti < n_tables; ti++) {
            uint64_t h = 0xcbf29ce484222325ull;
            for (int64_t r = 0; r < rows; r++) {
                tables[ti]->to_float[t->type](t->data + (size_t)r * rb, y, n);
                h = fnv1a64(y, (size_t)n * sizeof(float), h);
            }
            CHECK_MSG(h == want, "%s %s %s (%s): dequantized hash %016llx, gguf-py %016llx",
                      tables[ti]->name, file, tensor, type, (unsigned long long)h, want);
        }
        free(y);
        n_tensors++;
        n_k += t->type >= MOEINF_TYPE_Q2_K && t->type <= MOEINF_TYPE_Q6_K;
    }
    fclose(f);
    moeinf_gguf_free(g);
    fprintf(stderr, "%d tensors (%d K-quant) dequantized as gguf-py does\n", n_tensors, n_k);
    CHECK_EQ_INT(n_tensors, 37); /* every quantized tensor of both files */
    CHECK(n_k >= 6);
}

enum {
    CAP = 1 << 16
};

/* One fixture entry: a header "type n" and two lines of hex, decoded into a and b (CAP bytes
 * each; line holds 4 * CAP). Returns false at the end of the file or on a bad entry (which
 * it reports); *type is the type id. */
static bool read_entry(FILE *f, char *line, int *type, long long *n, uint8_t *a, long *na,
                       uint8_t *b, long *nb) {
    while (fgets(line, 4 * CAP, f) && line[0] == '#')
        continue;
    if (feof(f)) return false;
    char *fld[2];
    unsigned long long nu;
    if (split_fields(line, fld, 2) != 2 || !parse_int(fld[1], 10, &nu) || nu > CAP / 4) {
        CHECK_MSG(0, "bad fixture header: %.60s", line);
        return false;
    }
    *n = (long long)nu;
    *type = type_by_name(fld[0]);
    CHECK_MSG(*type >= 0, "unknown type %s", fld[0]);
    *na = fgets(line, 4 * CAP, f) ? decode_hex(line, a, CAP) : -1;
    *nb = fgets(line, 4 * CAP, f) ? decode_hex(line, b, CAP) : -1;
    CHECK_MSG(*na >= 0 && *nb >= 0, "%s: bad fixture lines", moeinf_type_name(*type));
    return *type >= 0 && *na >= 0 && *nb >= 0;
}

/* moeinf_quantize_row_ref writes gguf-py's bytes for its float blocks. */
static void test_quantize_blocks(void) {
    FILE *f = open_fixture("quantize_blocks.txt");
    if (!f) return;
    char *line = malloc((size_t)4 * CAP);
    uint8_t *x = malloc(CAP);
    uint8_t *want = malloc(CAP);
    uint8_t *got = malloc(CAP);
    int t;
    long long n;
    long nx;
    long nq;
    int n_types = 0;
    while (read_entry(f, line, &t, &n, x, &nx, want, &nq)) {
        CHECK_EQ_INT(nx, n * 4);
        CHECK_EQ_INT((size_t)nq, moeinf_row_bytes((enum moeinf_type)t, n));
        float *xf = malloc((size_t)n * sizeof(float));
        memcpy(xf, x, (size_t)n * sizeof(float));
        memset(got, 0xa5, (size_t)nq);
        moeinf_quantize_row_ref((enum moeinf_type)t, xf, got, n);
        size_t bs = moeinf_type_traits_get(t)->type_size;
        int bad = 0;
        for (long i = 0; i < nq; i += (long)bs)
            bad += memcmp(got + i, want + i, bs) != 0;
        CHECK_MSG(bad == 0, "%s: %d of %lld blocks differ from gguf-py's", moeinf_type_name(t), bad,
                  n / moeinf_type_traits_get(t)->block_size);
        free(xf);
        n_types++;
    }
    fclose(f);
    free(line);
    free(x);
    free(want);
    free(got);
    CHECK_EQ_INT(n_types, 1);
}

static void test_random_blocks(void) {
    FILE *f = open_fixture("dequant_blocks.txt");
    if (!f) return;
    char *line = malloc((size_t)4 * CAP);
    uint8_t *blocks = malloc(CAP);
    uint8_t *want = malloc(CAP);
    float *got = malloc(CAP);
    int n_types = 0;
    bool seen[MOEINF_TYPE_COUNT] = {false};
    int t;
    long long n;
    long nb;
    long nf;
    while (read_entry(f, line, &t, &n, blocks, &nb, want, &nf)) {
        const char *type = moeinf_type_name(t);
        CHECK_EQ_INT((size_t)nb, moeinf_row_bytes((enum moeinf_type)t, n));
        CHECK_EQ_INT(nf, n * 4);
        for (int ti = 0; ti < n_tables; ti++) {
            memset(got, 0xa5, (size_t)nf);
            tables[ti]->to_float[t](blocks, got, n);
            int bad = 0;
            for (long long i = 0; i < n; i++) {
                uint32_t a; /* bit patterns: NaN payloads and -0 count */
                uint32_t b;
                memcpy(&a, got + i, 4);
                memcpy(&b, want + 4 * i, 4);
                bad += a != b;
            }
            CHECK_MSG(bad == 0, "%s %s: %d of %lld floats differ from gguf-py", tables[ti]->name,
                      type, bad, n);
        }
        seen[t] = true;
        n_types++;
    }
    fclose(f);
    free(line);
    free(blocks);
    free(want);
    free(got);
    CHECK_EQ_INT(n_types, 13);

    const enum moeinf_type need[] = {MOEINF_TYPE_Q4_1, MOEINF_TYPE_Q5_1,   MOEINF_TYPE_Q2_K,
                                     MOEINF_TYPE_Q3_K, MOEINF_TYPE_IQ4_NL, MOEINF_TYPE_IQ4_XS,
                                     MOEINF_TYPE_MXFP4};

    for (int i = 0; i < 7; i++)
        CHECK_MSG(seen[need[i]], "no blocks of %s", moeinf_type_name((int)need[i]));
}

int main(void) {
    const struct moeinf_kernels *wanted = NULL;
    int rc = test_kernels_wanted(&wanted);
    if (!wanted) return rc;
    if (getenv("MOEINF_KERNELS")) { /* NOLINT(concurrency-mt-unsafe): main thread */
        tables[n_tables++] = moeinf_kernels_scalar();
        if (wanted != tables[0]) tables[n_tables++] = wanted;
    } else {
        tables[n_tables++] = moeinf_kernels_scalar();
        if (moeinf_kernels_avx2()) tables[n_tables++] = moeinf_kernels_avx2();
        if (moeinf_kernels_avx512()) tables[n_tables++] = moeinf_kernels_avx512();
        if (moeinf_kernels_amx()) tables[n_tables++] = moeinf_kernels_amx();
    }
    RUN(test_random_blocks);
    RUN(test_quantize_blocks);
    RUN(test_tiny_models);
    return test_report();
}
