/*
 * test_ops.c - gpt-oss's element-wise pieces against hand-computed cases and float64
 * references: the clamped SwiGLU (each clamp), YaRN's pair range and angles, attention with
 * sinks and a sliding window over a ring of rows; and attention in blocks of tokens, which must
 * give the bits of token-by-token attention (GQA, windows, MLA's layout). The goldens hold the
 * whole pass to llama.cpp; these pin each piece where the goldens' tiny model may not reach
 * (the clamp's branches, a ring that wraps within one micro-batch, blocks cut short).
 */
#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "base/rng.h"
#include "compute/attention.h"
#include "compute/ops.h"
#include "compute/pool.h"
#include "quant/quant.h"
#include "test.h"

/* min(g, 7) * sigmoid(1.702 min(g, 7)) * (clamp(u, -7, 7) + 1), each branch */
static void test_swiglu_oai(void) {
    const float g[5] = {-2.0f, 0.5f, 7.0f, 9.0f, 30.0f};
    const float u[5] = {-9.0f, 0.25f, 3.0f, 8.0f, -7.5f};
    float y[5];
    moeinf_swiglu_oai(y, g, u, 5, 1.702f, 7.0f);
    for (int i = 0; i < 5; i++) {
        double x = g[i] < 7.0 ? g[i] : 7.0;
        double v = u[i] < -7.0 ? -7.0 : (u[i] > 7.0 ? 7.0 : u[i]);
        double want = x / (1.0 + exp(-1.702 * x)) * (v + 1.0);
        CHECK_NEAR(y[i], want, 1e-5 * (1.0 + fabs(want)));
    }
    /* by hand: g 9 -> 7, u 8 -> 7: 7 * sigmoid(11.914) * 8 = 55.99963 */
    CHECK_NEAR(y[3], 55.99963, 1e-4);
    /* u -9 -> -7: -2 sigmoid(-3.404) * (-6) = 0.38605 */
    CHECK_NEAR(y[0], 0.38605, 1e-5);
}

/* YaRN with gpt-oss's settings (head 64, base 150000, original context 4096, betas 32 and 1):
 * the ramp runs over pairs 8..18; a pair below keeps its angle, a pair above is divided by the
 * factor, and every cos/sin is scaled by 1 + 0.1 ln 32. */
static void test_yarn(void) {
    float corr[2];
    moeinf_rope_yarn_corr(64, 4096, 150000.0f, 32.0f, 1.0f, corr);
    CHECK_NEAR(corr[0], 8.0, 0);
    CHECK_NEAR(corr[1], 18.0, 0);
    float cs[64];
    const int pos = 1000;
    moeinf_rope_yarn_angles(cs, 64, pos, 150000.0f, 1.0f / 32, corr, 1.0f);
    const double mscale = 1.0 + 0.1 * log(32.0);
    for (int i = 0; i < 32; i++) {
        double theta_extrap = pos * pow(150000.0, -2.0 * i / 64);
        double y = (i - 8.0) / 10.0;
        y = y < 0 ? 0 : (y > 1 ? 1 : y);
        double ramp = 1.0 - y;
        double theta = theta_extrap / 32 * (1 - ramp) + theta_extrap * ramp;
        /* float angles of up to 1000 radians: a relative error of 1e-6 in theta */
        double tol = 2e-6 * theta * mscale + 1e-6;
        CHECK_NEAR(cs[2 * (size_t)i], cos(theta) * mscale, tol);
        CHECK_NEAR(cs[2 * (size_t)i + 1], sin(theta) * mscale, tol);
    }
}

/* float64 attention of one query head (hd values) over positions t0..p, V rows of vd values,
 * with an optional sink */
static void reference(const float *q, const float *k, const float *v, int t0, int p, int hd, int vd,
                      const float *sink, double *out) {
    double s[64];
    double max = sink ? *sink : -INFINITY;
    for (int t = t0; t <= p; t++) {
        double d = 0;
        for (int i = 0; i < hd; i++) d += (double)q[i] * k[t * hd + i];
        s[t - t0] = d / sqrt((double)hd);
        max = s[t - t0] > max ? s[t - t0] : max;
    }
    double sum = sink ? exp(*sink - max) : 0.0;
    for (int t = t0; t <= p; t++) sum += (s[t - t0] = exp(s[t - t0] - max));
    for (int i = 0; i < vd; i++)
        out[i] = 0;
    for (int t = t0; t <= p; t++)
        for (int i = 0; i < vd; i++)
            out[i] += s[t - t0] / sum * v[t * vd + i];
}

/* Two query heads on one KV head, window 3, a ring of 5 rows: a micro-batch of 3 tokens at
 * positions 10..12 (rows 0, 1, 2 of the ring; 7, 8, 9 in rows 2, 3, 4 were stored earlier, 7
 * overwritten by 12 in row 2 being what the window leaves out). Head 0 has a sink. */
static void test_window_sinks(void) {
    enum { HD = 8, RING = 5, W = 3, M = 3 };
    float kpos[13 * HD];
    float vpos[13 * HD];
    for (int i = 0; i < 13 * HD; i++) {
        kpos[i] = sinf(0.37f * (float)i);
        vpos[i] = cosf(0.23f * (float)i);
    }
    float kring[RING * HD];
    float vring[RING * HD];
    for (int t = 8; t <= 12; t++) { /* the ring after storing 10..12 */
        memcpy(kring + (size_t)(t % RING) * HD, kpos + (size_t)t * HD, sizeof(float) * HD);
        memcpy(vring + (size_t)(t % RING) * HD, vpos + (size_t)t * HD, sizeof(float) * HD);
    }
    float q[M * 2 * HD];
    for (int i = 0; i < M * 2 * HD; i++) q[i] = cosf(0.11f * (float)i + 1.0f);
    const float sinks[2] = {1.5f, -INFINITY};
    float out[M * 2 * HD];
    struct moeinf_pool *pool = NULL;
    struct moeinf_error err = {0};
    CHECK(moeinf_pool_init(1, &pool, &err) == MOEINF_OK);
    float scratch[64];
    struct moeinf_attn_args a = {
        .q = q, .k = kring, .v = vring, .kv_f16 = false, .m = M, .pos0 = 10, .n_head = 2,
        .n_head_kv = 1, .head_dim = HD, .ring = RING, .window = W, .sinks = sinks, .out = out,
        .scratch = scratch, .scratch_stride = 64, .kern = moeinf_kernels_scalar(),
    };
    moeinf_attention(pool, &a);
    for (int j = 0; j < M; j++) {
        for (int h = 0; h < 2; h++) {
            double want[HD];
            const int p = 10 + j;
            const size_t row = (size_t)(j * 2 + h) * HD;
            reference(q + row, kpos, vpos, p - W + 1, p, HD, HD, h == 0 ? &sinks[0] : NULL, want);
            for (int i = 0; i < HD; i++) CHECK_NEAR(out[row + i], want[i], 1e-5);
        }
    }
    moeinf_pool_free(pool);
}

/* A micro-batch is attended in blocks of tokens that share each converted K and V row
 * (compute/attention.c); each token's output must have the bits it has when attended alone,
 * and match float64. Shapes: one query head per KV head, a group of 3 (GQA), a window over a
 * ring, and multi-head latent attention's layout (one KV head, V the first v_dim values of the
 * K row); F16 and F32 caches; the full scratch (blocks of 16), and the least one (one token
 * at a time). */
struct block_case {
    int n_head, n_head_kv, hd, v_dim, window;
    bool mla, f16;
};

static void check_blocks(const struct block_case *c, size_t stride_floats) {
    enum {
        POS0 = 3,
        M = 37,
        N_CTX = 64,
        MAXF = 64 * 4 * 24
    };

    const int group = c->n_head / c->n_head_kv;
    const int vd = c->v_dim > 0 ? c->v_dim : c->hd;
    const int k_row = c->mla ? c->hd : c->n_head_kv * c->hd;
    const int v_row = c->mla ? c->hd : c->n_head_kv * vd;
    const int ring = c->window > 0 ? c->window - 1 + M : N_CTX;
    /* per position: K and V rows as floats and as F16; then the ring of rows the cache holds */
    static float kf[MAXF];
    static float vf[MAXF];
    static uint16_t kh[MAXF];
    static uint16_t vh[MAXF];
    static float kring[MAXF];
    static float vring[MAXF];
    static uint16_t khr[MAXF];
    static uint16_t vhr[MAXF];
    static float q[MAXF];
    static float out[MAXF];  /* the micro-batch attended at once */
    static float one[MAXF];  /* token by token */
    static float want[MAXF]; /* float64 */
    uint64_t seed = 5;
    for (int i = 0; i < N_CTX * k_row; i++)
        kf[i] = (float)(moeinf_splitmix64_unit(&seed) - 0.5);
    for (int i = 0; i < N_CTX * v_row; i++)
        vf[i] = (float)(moeinf_splitmix64_unit(&seed) - 0.5);
    for (int i = 0; i < M * c->n_head * c->hd; i++)
        q[i] = (float)(2.0 * moeinf_splitmix64_unit(&seed) - 1.0);
    /* the ring after storing positions up to POS0 + M - 1; each value as the cache holds it */
    for (int i = 0; i < N_CTX * k_row; i++) {
        kh[i] = moeinf_fp32_to_fp16(kf[i]);
        if (c->f16) kf[i] = moeinf_fp16_to_fp32(kh[i]);
    }
    for (int i = 0; i < N_CTX * v_row; i++) {
        vh[i] = moeinf_fp32_to_fp16(c->mla ? kf[i] : vf[i]);
        if (c->mla)
            vf[i] = kf[i];
        else if (c->f16)
            vf[i] = moeinf_fp16_to_fp32(vh[i]);
    }
    for (int t = 0; t < POS0 + M; t++) {
        if (t + ring < POS0 + M) continue;
        const size_t r = (size_t)(t % ring);
        memcpy(kring + r * k_row, kf + (size_t)t * k_row, sizeof(float) * (size_t)k_row);
        memcpy(vring + r * v_row, vf + (size_t)t * v_row, sizeof(float) * (size_t)v_row);
        memcpy(khr + r * k_row, kh + (size_t)t * k_row, sizeof(uint16_t) * (size_t)k_row);
        memcpy(vhr + r * v_row, vh + (size_t)t * v_row, sizeof(uint16_t) * (size_t)v_row);
    }
    struct moeinf_pool *pool = NULL;
    struct moeinf_error err = {0};
    CHECK(moeinf_pool_init(2, &pool, &err) == MOEINF_OK);
    float *scratch = malloc(2 * stride_floats * sizeof(float));
    CHECK(scratch != NULL);
    const void *k_cache = c->f16 ? (const void *)khr : (const void *)kring;
    const void *v_cache = c->f16 ? (const void *)vhr : (const void *)vring;
    struct moeinf_attn_args a = {
        .k = k_cache,
        .v = c->mla ? k_cache : v_cache,
        .kv_f16 = c->f16,
        .n_head = c->n_head,
        .n_head_kv = c->n_head_kv,
        .head_dim = c->hd,
        .v_dim = c->v_dim,
        .k_row = c->mla ? k_row : 0,
        .v_row = c->mla ? v_row : 0,
        .ring = ring,
        .window = c->window,
        .scratch = scratch,
        .scratch_stride = stride_floats,
        .kern = moeinf_kernels_best(),
    };
    a.q = q;
    a.out = out;
    a.m = M;
    a.pos0 = POS0;
    moeinf_attention(pool, &a);
    const size_t q_row = (size_t)c->n_head * c->hd;
    const size_t o_row = (size_t)c->n_head * vd;
    for (int j = 0; j < M; j++) { /* token by token */
        a.q = q + (size_t)j * q_row;
        a.out = one + (size_t)j * o_row;
        a.m = 1;
        a.pos0 = POS0 + j;
        moeinf_attention(pool, &a);
    }
    CHECK(memcmp(out, one, sizeof(float) * (size_t)M * o_row) == 0);
    double ref[64];
    static float fk[N_CTX * 64]; /* one KV head's rows, as reference() reads them */
    static float fv[N_CTX * 64];
    for (int j = 0; j < M; j++) {
        const int p = POS0 + j;
        const int t0 = c->window > 0 && p >= c->window ? p - c->window + 1 : 0;
        for (int h = 0; h < c->n_head; h++) {
            const int kv = h / group;
            for (int t = 0; t <= p; t++) {
                memcpy(fk + (size_t)t * c->hd, kf + (size_t)t * k_row + (size_t)kv * c->hd,
                       sizeof(float) * (size_t)c->hd);
                memcpy(fv + (size_t)t * vd, vf + (size_t)t * v_row + (size_t)kv * vd,
                       sizeof(float) * (size_t)vd);
            }
            reference(q + (size_t)j * q_row + (size_t)h * c->hd, fk, fv, t0, p, c->hd, vd, NULL,
                      ref);
            for (int i = 0; i < vd; i++)
                want[(size_t)j * o_row + (size_t)h * vd + i] = (float)ref[i];
        }
    }
    for (size_t i = 0; i < (size_t)M * o_row; i++)
        CHECK_NEAR(out[i], want[i], 2e-5);
    free(scratch);
    moeinf_pool_free(pool);
}

static void test_blocks_match_tokens(void) {
    const struct block_case cases[] = {
        {4, 4, 16, 0, 0, false, true},  /* one query head per KV head, F16 */
        {6, 2, 16, 0, 0, false, false}, /* a group of 3, F32 */
        {6, 2, 16, 0, 5, false, true},  /* with a window of 5 over a ring */
        {4, 1, 24, 16, 0, true, true},  /* MLA: one KV head, V the K row's first 16 */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const struct block_case *c = &cases[i];
        const int width = c->hd > c->v_dim ? c->hd : c->v_dim;
        check_blocks(c, moeinf_attn_scratch_floats(64, c->n_head, c->n_head_kv, width));
        /* the least scratch a call may get: one token's scores and one row (of room) */
        check_blocks(c, (size_t)(c->n_head / c->n_head_kv) * (3 + 37) + (size_t)width);
    }
}

int main(void) {
    RUN(test_swiglu_oai);
    RUN(test_yarn);
    RUN(test_window_sinks);
    RUN(test_blocks_match_tokens);
    return test_report();
}
