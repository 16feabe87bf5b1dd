/*
 * ops.h - the small element-wise operations of a transformer layer, in the arithmetic
 * llama.cpp uses (../shared/testdata/README.md, 1.7): sums of squares and softmax
 * normalisers in double, everything else in float.
 */
#ifndef MOEINF_OPS_H
#define MOEINF_OPS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* y = x / sqrt(mean(x^2) + eps) * w  (y may alias x) */
void moeinf_rmsnorm(float *y, const float *x, const float *w, int n, float eps);

/* In-place softmax over n values. */
void moeinf_softmax(float *x, int n);

/* y[i] = silu(g[i]) * u[i]  (y may alias g) */
void moeinf_swiglu(float *y, const float *g, const float *u, int n);

/*
 * RoPE in "NORM" mode (arch llama: adjacent pairs x[2i], x[2i+1]) on the first n_rot of
 * each of n_heads heads of size head_dim, at position pos:
 * theta_i = pos * freq_scale * base^(-2i/n_rot).
 */
void moeinf_rope_norm(float *x, int n_heads, int head_dim, int n_rot, int pos, float base,
                      float freq_scale);

/* RoPE in "NEOX" mode (qwen2moe, qwen3moe, olmoe: pairs x[i], x[i + n_rot/2]), otherwise as
 * moeinf_rope_norm. */
void moeinf_rope_neox(float *x, int n_heads, int head_dim, int n_rot, int pos, float base,
                      float freq_scale);

/* Interleaved multi-section RoPE (IMRoPE: Qwen3.5, Qwen3-VL; ggml's rope_multi, interleaved):
 * whether pair i rotates with a text token's position. Pair i is in sector
 * i % (s0 + s1 + s2 + s3); sectors 3j, 3j + 1, 3j + 2 take the time, height and width positions
 * while j is below s0, s1, s2, all the token's position for text; the rest take the fourth
 * position, which is 0 for text: those pairs keep their values (angle 0). */
bool moeinf_imrope_positioned(const int sections[4], int i);

/* IMRoPE of a text token: NEOX pairs, those moeinf_imrope_positioned rotated as
 * moeinf_rope_neox rotates them, the others left as they are. */
void moeinf_rope_imrope_text(float *x, int n_heads, int head_dim, int n_rot, int pos, float base,
                             float freq_scale, const int sections[4]);

/* The gated linear unit of an FFN. */
enum moeinf_glu {
    MOEINF_GLU_SWIGLU, /* silu(gate) * up */
    /* gpt-oss's clamped variant: g = min(gate, 7), u = clamp(up, -7, 7),
     * g * sigmoid(1.702 g) * (u + 1) (moeinf_swiglu_oai) */
    MOEINF_GLU_SWIGLU_OAI,
};

/* y[i] = min(g, limit) * sigmoid(alpha * min(g, limit)) * (clamp(u, -limit, limit) + 1): the
 * clamped SwiGLU of gpt-oss (alpha 1.702, limit 7), y may alias g */
void moeinf_swiglu_oai(float *y, const float *g, const float *u, int n, float alpha, float limit);

/* YaRN's pair range: pairs below corr[0] keep their unscaled angle, pairs above corr[1] take
 * the scaled one, those between a linear blend (llama.cpp's ggml_rope_yarn_corr_dims). */
void moeinf_rope_yarn_corr(int n_rot, int orig_ctx, float base, float beta_fast, float beta_slow,
                           float corr[2]);

/* The n_rot / 2 (cos, sin) pairs of RoPE at position pos with YaRN: pair i's unscaled angle
 * pos * base^(-2i/n_rot) blended with it times freq_scale by the ramp over corr, both
 * multiplied by mscale * (1 + 0.1 ln(1 / freq_scale)). */
void moeinf_rope_yarn_angles(float *cs, int n_rot, int pos, float base, float freq_scale,
                             const float corr[2], float mscale);

/* RoPE of n_heads heads with precomputed (cos, sin) pairs: NEOX pairs (x[i], x[i + n_rot/2])
 * when neox, else adjacent ones (x[2i], x[2i + 1]). */
void moeinf_rope_cs(float *x, int n_heads, int head_dim, int n_rot, const float *cs, bool neox);

/* True when none of x[0..n) is NaN or infinity. Tests the exponent bits as integers, so the
 * answer does not depend on floating-point flags, at about the cost of one read of x. */
bool moeinf_all_finite(const float *x, size_t n);

/* Indices of the k largest of x[0..n) in descending order (lower index first on ties). */
void moeinf_top_k(const float *x, int n, int k, int *idx);

#endif
