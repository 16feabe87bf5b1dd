/*
 * test_ops.c - gpt-oss's element-wise pieces against hand-computed cases and float64
 * references: the clamped SwiGLU (each clamp), YaRN's pair range and angles, and attention
 * with sinks and a sliding window over a ring of rows. The goldens hold the whole pass to
 * llama.cpp; these pin each piece where the goldens' tiny model may not reach (the clamp's
 * branches, a ring that wraps within one micro-batch).
 */
#include <math.h>
#include <string.h>

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

/* float64 attention of one query head over positions t0..p with an optional sink */
static void reference(const float *q, const float *k, const float *v, int t0, int p, int hd,
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
    for (int i = 0; i < hd; i++) out[i] = 0;
    for (int t = t0; t <= p; t++)
        for (int i = 0; i < hd; i++) out[i] += s[t - t0] / sum * v[t * hd + i];
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
            reference(q + row, kpos, vpos, p - W + 1, p, HD, h == 0 ? &sinks[0] : NULL, want);
            for (int i = 0; i < HD; i++) CHECK_NEAR(out[row + i], want[i], 1e-5);
        }
    }
    moeinf_pool_free(pool);
}

int main(void) {
    RUN(test_swiglu_oai);
    RUN(test_yarn);
    RUN(test_window_sinks);
    return test_report();
}
