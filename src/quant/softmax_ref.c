/*
 * softmax_ref.c - the scalar softmax (softmax.h): the scalar table's, and the twin that the x86
 * tables' must match bit for bit.
 */
#include "quant/softmax.h"

void moeinf_ref_softmax_f32(float *s, int64_t n, const float *sink) {
    float max = sink ? *sink : -INFINITY;
    for (int64_t t = 0; t < n; t++)
        max = s[t] > max ? s[t] : max;
    double lane[SOFTMAX_LANES] = {0};
    for (int64_t t = 0; t < n; t++) {
        s[t] = softmax_exp(s[t] - max);
        lane[t % SOFTMAX_LANES] += (double)s[t];
    }
    const float inv = softmax_inverse(softmax_lanes_total(lane), max, sink);
    for (int64_t t = 0; t < n; t++)
        s[t] *= inv;
}
