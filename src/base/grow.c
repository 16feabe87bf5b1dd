/* grow.c - room in a growing array (see grow.h). */
#include "base/grow.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

void *moeinf_grow(void *p, size_t *cap, size_t need, size_t elem) {
    if (p && need <= *cap) return p;
    if (elem == 0) elem = 1;
    size_t c = *cap ? *cap : MOEINF_GROW_FIRST;
    while (c < need) {
        if (c > SIZE_MAX / 2) return NULL;
        c *= 2;
    }
    if (c > SIZE_MAX / elem) return NULL;
    void *q = realloc(p, c * elem);
    if (q) *cap = c;
    return q;
}

bool moeinf_text_append(char **p, size_t *len, size_t *cap, const char *s, size_t n) {
    if (n > SIZE_MAX - 1 - *len) return false;
    char *t = moeinf_grow(*p, cap, *len + n + 1, 1);
    if (!t) return false;
    *p = t;
    if (n > 0) memcpy(t + *len, s, n);
    *len += n;
    t[*len] = '\0';
    return true;
}
