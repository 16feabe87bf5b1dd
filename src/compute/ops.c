/* ops.c - rmsnorm, softmax, SwiGLU, RoPE and top-k; see ops.h. */
#include "compute/ops.h"

#include <math.h>
#include <stddef.h>
#include <string.h>

#ifndef M_PI
#define M_PI 3.14159265358979323846
#endif

void moeinf_rmsnorm(float *y, const float *x, const float *w, int n, float eps) {
    double sum = 0.0;
    for (int i = 0; i < n; i++) sum += (double)x[i] * (double)x[i];
    const float mean = (float)(sum / n);
    const float scale = 1.0f / sqrtf(mean + eps);
    for (int i = 0; i < n; i++) y[i] = x[i] * scale * w[i];
}

void moeinf_softmax(float *x, int n) {
    float max = -INFINITY;
    for (int i = 0; i < n; i++) max = x[i] > max ? x[i] : max;
    double sum = 0.0;
    for (int i = 0; i < n; i++) {
        x[i] = expf(x[i] - max);
        sum += x[i];
    }
    const float inv = (float)(1.0 / sum);
    for (int i = 0; i < n; i++) x[i] *= inv;
}

void moeinf_swiglu(float *y, const float *g, const float *u, int n) {
    for (int i = 0; i < n; i++) {
        float v = g[i];
        y[i] = v / (1.0f + expf(-v)) * u[i];
    }
}

void moeinf_swiglu_oai(float *y, const float *g, const float *u, int n, float alpha, float limit) {
    for (int i = 0; i < n; i++) {
        const float x = g[i] < limit ? g[i] : limit;
        const float v = u[i] < -limit ? -limit : (u[i] > limit ? limit : u[i]);
        y[i] = x / (1.0f + expf(alpha * -x)) * (v + 1.0f);
    }
}

/* The pair index whose wavelength fits n_turns times into orig_ctx positions. */
static float yarn_corr_dim(int n_rot, int orig_ctx, float n_turns, float base) {
    return (float)n_rot * logf((float)orig_ctx / (n_turns * 2.0f * (float)M_PI)) /
           (2.0f * logf(base));
}

void moeinf_rope_yarn_corr(int n_rot, int orig_ctx, float base, float beta_fast, float beta_slow,
                           float corr[2]) {
    const float lo = floorf(yarn_corr_dim(n_rot, orig_ctx, beta_fast, base));
    const float hi = ceilf(yarn_corr_dim(n_rot, orig_ctx, beta_slow, base));
    corr[0] = lo > 0.0f ? lo : 0.0f;
    corr[1] = hi < (float)(n_rot - 1) ? hi : (float)(n_rot - 1);
}

void moeinf_rope_yarn_angles(float *cs, int n_rot, int pos, float base, float freq_scale,
                             const float corr[2], float mscale) {
    const float theta_scale = powf(base, -2.0f / (float)n_rot);
    const float span = corr[1] - corr[0] > 0.001f ? corr[1] - corr[0] : 0.001f;
    const float scale = mscale * (1.0f + 0.1f * logf(1.0f / freq_scale));
    float theta_extrap = (float)pos;
    for (int i = 0; i < n_rot / 2; i++) {
        float y = ((float)i - corr[0]) / span;
        y = y < 0.0f ? 0.0f : (y > 1.0f ? 1.0f : y);
        const float ramp = 1.0f - y; /* 1: unscaled, 0: scaled */
        const float theta_interp = freq_scale * theta_extrap;
        const float theta = theta_interp * (1.0f - ramp) + theta_extrap * ramp;
        cs[2 * (size_t)i] = cosf(theta) * scale;
        cs[2 * (size_t)i + 1] = sinf(theta) * scale;
        theta_extrap *= theta_scale;
    }
}

void moeinf_rope_cs(float *x, int n_heads, int head_dim, int n_rot, const float *cs, bool neox) {
    const int half = n_rot / 2;
    for (int h = 0; h < n_heads; h++) {
        float *v = x + (size_t)h * head_dim;
        for (int i = 0; i < half; i++) {
            const int i0 = neox ? i : 2 * i;
            const int i1 = neox ? i + half : 2 * i + 1;
            const float x0 = v[i0];
            const float x1 = v[i1];
            const float c = cs[2 * (size_t)i];
            const float sn = cs[2 * (size_t)i + 1];
            v[i0] = x0 * c - x1 * sn;
            v[i1] = x0 * sn + x1 * c;
        }
    }
}

void moeinf_rope_norm(float *x, int n_heads, int head_dim, int n_rot, int pos, float base,
                      float freq_scale) {
    const float theta_scale = powf(base, -2.0f / (float)n_rot);
    for (int h = 0; h < n_heads; h++) {
        float *v = x + (size_t)h * head_dim;
        float theta = (float)pos * freq_scale;
        for (int i = 0; i < n_rot; i += 2) {
            const float c = cosf(theta);
            const float s = sinf(theta);
            const float x0 = v[i];
            const float x1 = v[i + 1];
            v[i] = x0 * c - x1 * s;
            v[i + 1] = x0 * s + x1 * c;
            theta *= theta_scale;
        }
    }
}

bool moeinf_imrope_positioned(const int sections[4], int i) {
    const int total = sections[0] + sections[1] + sections[2] + sections[3];
    const int sector = total > 0 ? i % total : 0;
    return (sector % 3 == 0 && sector < 3 * sections[0]) ||
           (sector % 3 == 1 && sector < 3 * sections[1]) ||
           (sector % 3 == 2 && sector < 3 * sections[2]);
}

/* NEOX pairs rotated by pos * freq_scale * base^(-2i/n_rot); with sections (IMRoPE, text),
 * the pairs moeinf_imrope_positioned does not name keep their values (angle 0). */
static void rope_neox_pairs(float *x, int n_heads, int head_dim, int n_rot, int pos, float base,
                            float freq_scale, const int *sections) {
    const float theta_scale = powf(base, -2.0f / (float)n_rot);
    const int half = n_rot / 2;
    for (int h = 0; h < n_heads; h++) {
        float *v = x + (size_t)h * head_dim;
        float theta = (float)pos * freq_scale;
        for (int i = 0; i < half; i++) {
            if (!sections || moeinf_imrope_positioned(sections, i)) {
                const float c = cosf(theta);
                const float s = sinf(theta);
                const float x0 = v[i];
                const float x1 = v[i + half];
                v[i] = x0 * c - x1 * s;
                v[i + half] = x0 * s + x1 * c;
            }
            theta *= theta_scale;
        }
    }
}

void moeinf_rope_neox(float *x, int n_heads, int head_dim, int n_rot, int pos, float base,
                      float freq_scale) {
    rope_neox_pairs(x, n_heads, head_dim, n_rot, pos, base, freq_scale, NULL);
}

void moeinf_rope_imrope_text(float *x, int n_heads, int head_dim, int n_rot, int pos, float base,
                             float freq_scale, const int sections[4]) {
    rope_neox_pairs(x, n_heads, head_dim, n_rot, pos, base, freq_scale, sections);
}

void moeinf_top_k(const float *x, int n, int k, int *idx) {
    /* k is small (<= 64): insertion into a sorted prefix. */
    int filled = 0;
    for (int i = 0; i < n; i++) {
        if (filled == k && !(x[i] > x[idx[k - 1]])) continue;
        int p = filled < k ? filled++ : k - 1;
        while (p > 0 && x[i] > x[idx[p - 1]]) {
            idx[p] = idx[p - 1];
            p--;
        }
        idx[p] = i;
    }
}

/* An exponent of all ones is NaN or infinity. A block's tests are ORed without a branch per
 * element, so the loop runs at memory speed. */
bool moeinf_all_finite(const float *x, size_t n) {
    const uint32_t exp = 0x7f800000u;
    size_t i = 0;
    for (; i + 16 <= n; i += 16) {
        uint32_t bad = 0;
        for (size_t j = 0; j < 16; j++) {
            uint32_t bits;
            memcpy(&bits, x + i + j, sizeof bits);
            bad |= (uint32_t)((bits & exp) == exp);
        }
        if (bad) return false;
    }
    for (; i < n; i++) {
        uint32_t bits;
        memcpy(&bits, x + i, sizeof bits);
        if ((bits & exp) == exp) return false;
    }
    return true;
}
