/* text.c - stop strings held back while they may still match, and OpenAI's penalties. */
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
