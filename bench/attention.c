/*
 * attention.c - compute cost of prefill's attention (compute/attention.c): a prompt of m tokens
 * from position 0 against an F16 KV cache, on one thread, with the best kernel table.
 *
 * CMake builds it with every preset (build/release/bench_attention):
 *   bench_attention n_head n_head_kv head_dim [m [v_dim [reps]]]
 *     m      prompt tokens (default 512)
 *     v_dim  values per V head (default head_dim)
 *     reps   timed calls, the best of them is printed (default 5)
 * Shapes of the models here: OLMoE 16 16 128, Qwen3-30B-A3B 32 4 128, Mixtral 32 8 128,
 * gpt-oss 64 8 64; multi-head latent attention as the engine runs it (model/layer_mla.c) is
 * 16 1 576 with v_dim 512 for DeepSeek-V2-Lite (its V heads are then read from the K rows'
 * layout here: the cost is the same, the values differ).
 *
 * It prints thread CPU milliseconds per call and the multiply-adds per second of q.k and of V
 * together. It uses nothing newer than compute/attention.h's first interface, so that it builds
 * in older trees too: compare two builds on the same machine in one sitting, alternated.
 */
#include <stdio.h>
#include <stdlib.h>

#include "base/rng.h"
#include "compute/attention.h"
#include "compute/pool.h"
#include "lib/clock.h"
#include "quant/quant.h"

static int arg(int argc, char **argv, int i, int fallback) {
    return argc > i ? (int)strtol(argv[i], NULL, 10) : fallback;
}

int main(int argc, char **argv) {
    if (argc < 4) {
        fprintf(stderr, "usage: %s n_head n_head_kv head_dim [m [v_dim [reps]]]\n", argv[0]);
        return 2;
    }
    const int n_head = arg(argc, argv, 1, 0);
    const int n_head_kv = arg(argc, argv, 2, 0);
    const int hd = arg(argc, argv, 3, 0);
    const int m = arg(argc, argv, 4, 512);
    const int vd = arg(argc, argv, 5, hd);
    const int reps = arg(argc, argv, 6, 5);
    if (n_head < 1 || n_head_kv < 1 || n_head % n_head_kv != 0 || hd < 1 || m < 1 || vd < 1 ||
        vd > hd || reps < 1) {
        fprintf(stderr, "bench_attention: need n_head a multiple of n_head_kv, and 0 < v_dim "
                        "<= head_dim, m, reps\n");
        return 2;
    }
    const size_t row = (size_t)n_head_kv * (size_t)hd; /* K and V rows alike */
    const size_t stride = moeinf_attn_scratch_floats(m, n_head, n_head_kv, hd);
    uint16_t *k = malloc((size_t)m * row * sizeof *k);
    uint16_t *v = malloc((size_t)m * row * sizeof *v);
    float *q = malloc((size_t)m * (size_t)n_head * (size_t)hd * sizeof *q);
    float *out = malloc((size_t)m * (size_t)n_head * (size_t)vd * sizeof *out);
    float *scratch = malloc(stride * sizeof *scratch);
    struct moeinf_pool *pool = NULL;
    struct moeinf_error err = {0};
    int rc = 1;
    if (!k || !v || !q || !out || !scratch || moeinf_pool_init(1, &pool, &err) != MOEINF_OK) {
        fprintf(stderr, "bench_attention: out of memory\n");
        goto done;
    }
    uint64_t seed = 1;
    for (size_t i = 0; i < (size_t)m * row; i++) {
        k[i] = moeinf_fp32_to_fp16((float)(moeinf_splitmix64_unit(&seed) - 0.5));
        v[i] = moeinf_fp32_to_fp16((float)(moeinf_splitmix64_unit(&seed) - 0.5));
    }
    for (size_t i = 0; i < (size_t)m * (size_t)n_head * (size_t)hd; i++)
        q[i] = (float)(moeinf_splitmix64_unit(&seed) - 0.5);
    const struct moeinf_attn_args a = {
        .q = q,
        .k = k,
        .v = v,
        .kv_f16 = true,
        .m = m,
        .pos0 = 0,
        .n_head = n_head,
        .n_head_kv = n_head_kv,
        .head_dim = hd,
        .v_dim = vd,
        .v_row = n_head_kv * hd, /* V heads laid out as K's, the first v_dim of each */
        .ring = m,
        .out = out,
        .scratch = scratch,
        .scratch_stride = stride,
        .kern = moeinf_kernels_best(),
    };
    double best = 0;
    for (int r = 0; r < reps; r++) {
        const double t0 = bench_cpu_s();
        moeinf_attention(pool, &a);
        const double t = bench_cpu_s() - t0;
        if (r == 0 || t < best) best = t;
    }
    const double pairs = (double)m * (m + 1) / 2;
    const double madds = pairs * n_head * (hd + vd);
    printf("attention %d x %d heads of %d (v %d), %d tokens, table %s: %.2f ms, %.2f G "
           "multiply-adds/s\n",
           n_head_kv, n_head / n_head_kv, hd, vd, m, a.kern->name, best * 1e3, madds / best / 1e9);
    rc = 0;
done:
    moeinf_pool_free(pool);
    free(k);
    free(v);
    free(q);
    free(out);
    free(scratch);
    return rc;
}
