/* text.c - stop strings held back while they may still match, OpenAI's penalties and
 * logit_bias, and the log-probabilities of a row of logits. */
#include <math.h>
#include <string.h>

#include "serve/serve.h"

size_t serve_stop_scan(const char *text, size_t len, size_t shown, char *const *stops, int n_stops,
                       bool *stopped) {
    *stopped = false;
    size_t first = len;
    for (int s = 0; s < n_stops; s++) {
        size_t n = strlen(stops[s]);
        if (n == 0 || n > len - shown) continue;
        for (size_t i = shown; i + n <= len && i < first; i++) {
            if (!memcmp(text + i, stops[s], n)) {
                first = i;
                break;
            }
        }
    }
    if (first < len) {
        *stopped = true;
        return first;
    }
    /* Hold back the longest tail of the unshown text that is a proper prefix of a stop. */
    size_t hold = 0;
    for (int s = 0; s < n_stops; s++) {
        size_t n = strlen(stops[s]);
        for (size_t k = n > 0 ? n - 1 : 0; k > hold; k--) {
            if (k <= len - shown && !memcmp(text + len - k, stops[s], k)) {
                hold = k;
                break;
            }
        }
    }
    return len - hold;
}

void serve_apply_penalties(float *logits, const int32_t *counts, int n_vocab, float frequency,
                           float presence) {
    for (int t = 0; t < n_vocab; t++) {
        if (counts[t] > 0) logits[t] -= (float)counts[t] * frequency + presence;
    }
}

void serve_apply_logit_bias(float *logits, const struct serve_logit_bias *bias, int n) {
    for (int i = 0; i < n; i++)
        logits[bias[i].id] += bias[i].bias;
}

/* x ranks before y: higher logit, then lower id. */
static bool ranks_before(double x, int32_t xi, double y, int32_t yi) {
    return x > y || (x == y && xi < yi);
}

static double finite_lp(double lp) {
    return isfinite(lp) ? lp : -9999.0;
}

double serve_logprobs(const float *logits, int n_vocab, int32_t id, int n_top, int32_t *top_id,
                      double *top_lp) {
    double max = -INFINITY;
    for (int i = 0; i < n_vocab; i++) {
        double x = isnan(logits[i]) ? -INFINITY : (double)logits[i];
        if (x > max) max = x;
    }
    /* log-sum-exp around the maximum; a row of -inf (or +inf) has no distribution */
    double sum = 0.0;
    if (isfinite(max)) {
        for (int i = 0; i < n_vocab; i++) {
            if (!isnan(logits[i])) sum += exp((double)logits[i] - max);
        }
    }
    const double lse = isfinite(max) ? max + log(sum) : INFINITY;
    int n = 0; /* the best n_top so far, in order (insertion: n_top is at most 20) */
    for (int i = 0; i < n_vocab && n_top > 0; i++) {
        double x = isnan(logits[i]) ? -INFINITY : (double)logits[i];
        if (n == n_top && !ranks_before(x, i, top_lp[n - 1], top_id[n - 1])) continue;
        int at = n < n_top ? n++ : n - 1;
        while (at > 0 && ranks_before(x, i, top_lp[at - 1], top_id[at - 1])) {
            top_lp[at] = top_lp[at - 1];
            top_id[at] = top_id[at - 1];
            at--;
        }
        top_lp[at] = x;
        top_id[at] = i;
    }
    for (int k = 0; k < n; k++)
        top_lp[k] = finite_lp(top_lp[k] - lse);
    double x = isnan(logits[id]) ? -INFINITY : (double)logits[id];
    return finite_lp(x - lse);
}
