// ctest-labels: kernels
/*
 * test_matmul.c - moeinf_matmul_run splits the rows of a batch of jobs among the pool's
 * threads in chunks, and in decode (one activation row) moves each chunk edge to a multiple
 * of 8 rows of its job (compute/matmul.c, DECODE_ROW_GROUP). Every output element must still
 * be written, once, with the bits of the scalar vec_dot of its row: jobs of row counts that
 * are no multiple of 8, long enough for several chunks per job, at 2 and 3 threads,
 * decode and prefill. The kernel table is MOEINF_KERNELS's (ctest runs this once per table).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "compute/matmul.h"
#include "compute/pool.h"
#include "quant/quant.h"
#include "test.h"

static uint32_t f_bits(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

static float next_float(uint64_t *s) {
    *s = *s * 6364136223846793005ull + 1442695040888963407ull;
    return (float)((double)(*s >> 11) * 0x1p-53 - 0.5);
}

enum { N_JOBS = 4, N_IN = 512, M_MAX = 3 };

static void check_split(const struct moeinf_kernels *k, enum moeinf_type type, int n_threads,
                        int m) {
    const int64_t n_out[N_JOBS] = {203, 37, 13, 150};
    const enum moeinf_type vt = moeinf_type_cpu_get((int)type)->vec_dot_type;
    const size_t rb = moeinf_row_bytes(type, N_IN);
    const size_t xb = moeinf_row_bytes(vt, N_IN);
    struct moeinf_error err = {0};
    struct moeinf_pool *pool = NULL;
    CHECK(moeinf_pool_init(n_threads, &pool, &err) == MOEINF_OK);
    if (!pool) return;
    struct moeinf_mm_job jobs[N_JOBS];
    uint8_t *w[N_JOBS];
    float *y[N_JOBS];
    uint8_t *x = malloc((size_t)M_MAX * xb);
    float *f = malloc(N_IN * sizeof(float));
    uint64_t seed = 12345;
    for (int j = 0; j < M_MAX; j++) {
        for (int i = 0; i < N_IN; i++)
            f[i] = next_float(&seed);
        moeinf_kernels_scalar()->from_float[vt](f, x + (size_t)j * xb, N_IN);
    }
    for (int b = 0; b < N_JOBS; b++) {
        w[b] = malloc((size_t)n_out[b] * rb);
        for (int64_t r = 0; r < n_out[b]; r++) {
            for (int i = 0; i < N_IN; i++)
                f[i] = next_float(&seed);
            moeinf_quantize_row_ref(type, f, w[b] + (size_t)r * rb, N_IN);
        }
        y[b] = malloc((size_t)m * (size_t)n_out[b] * sizeof(float));
        for (int64_t c = 0; c < m * n_out[b]; c++)
            y[b][c] = NAN; /* an element no chunk wrote stays NaN */
        jobs[b] = (struct moeinf_mm_job){.w = w[b], .w_row_bytes = rb, .n_in = N_IN,
                                         .n_out = n_out[b], .x = x, .x_stride = xb, .y = y[b],
                                         .y_stride = (size_t)n_out[b], .type = type, .m = m};
    }
    moeinf_matmul_run(pool, k, jobs, N_JOBS);
    int bad = 0;
    for (int b = 0; b < N_JOBS; b++)
        for (int j = 0; j < m; j++)
            for (int64_t r = 0; r < n_out[b]; r++) {
                float want = NAN;
                moeinf_kernels_scalar()->vec_dot[type](N_IN, &want, w[b] + (size_t)r * rb,
                                                       x + (size_t)j * xb);
                bad += f_bits(want) != f_bits(y[b][(size_t)j * (size_t)n_out[b] + (size_t)r]);
            }
    CHECK_MSG(bad == 0, "%s %s -t %d m=%d: %d outputs differ from vec_dot or were not written",
              k->name, moeinf_type_name((int)type), n_threads, m, bad);
    for (int b = 0; b < N_JOBS; b++) {
        free(w[b]);
        free(y[b]);
    }
    free(x);
    free(f);
    moeinf_pool_free(pool);
}

static void test_split_rows(void) {
    const struct moeinf_kernels *k = NULL;
    struct moeinf_error err = {0};
    CHECK(moeinf_kernels_from_env(&k, &err) == MOEINF_OK);
    if (!k) return;
    const enum moeinf_type types[] = {MOEINF_TYPE_Q4_K, MOEINF_TYPE_Q6_K, MOEINF_TYPE_Q8_0};
    const int threads[] = {2, 3};
    for (size_t t = 0; t < sizeof types / sizeof types[0]; t++)
        for (size_t h = 0; h < sizeof threads / sizeof threads[0]; h++)
            for (int m = 1; m <= M_MAX; m += 2)
                check_split(k, types[t], threads[h], m);
}

int main(void) {
    RUN(test_split_rows);
    return test_report();
}
