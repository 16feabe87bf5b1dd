/* escape.c - a file's strings made safe to print (escape.h). */
#include "base/escape.h"

#include <string.h>

size_t moeinf_escape_byte(unsigned char c, char out[4]) {
    static const char hex[] = "0123456789abcdef";
    if (c == '"' || c == '\\') {
        out[0] = '\\';
        out[1] = (char)c;
        return 2;
    }
    if (c == '\n' || c == '\t') {
        out[0] = '\\';
        out[1] = c == '\n' ? 'n' : 't';
        return 2;
    }
    if (c < 0x20 || c == 0x7f) {
        out[0] = '\\';
        out[1] = 'x';
        out[2] = hex[c >> 4];
        out[3] = hex[c & 15];
        return 4;
    }
    out[0] = (char)c;
    return 1;
}

/* Bytes of the unit starting at s[0]: a UTF-8 lead byte with the continuation bytes after it
 * (at most 4 in all), else one byte. */
static size_t unit_len(const unsigned char *s, size_t n) {
    size_t k = 1;
    if (s[0] >= 0xC0) {
        while (k < n && k < 4 && (s[k] & 0xC0) == 0x80)
            k++;
    }
    return k;
}

const char *moeinf_escape(const char *s, size_t len, char *buf, size_t size) {
    const unsigned char *u = (const unsigned char *)s;
    size_t shown = len < MOEINF_ESC_SHOWN ? len : MOEINF_ESC_SHOWN;
    size_t o = 0;
    size_t i = 0;
    while (i < shown) {
        size_t k = unit_len(u + i, len - i);
        if (i + k > shown) break; /* a character the cut would split */
        char tmp[16];
        size_t t = 0;
        for (size_t j = 0; j < k; j++)
            t += moeinf_escape_byte(u[i + j], tmp + t);
        if (o + t + 4 > size) break; /* keep room for "..." and the NUL */
        memcpy(buf + o, tmp, t);
        o += t;
        i += k;
    }
    if (i < len) {
        memcpy(buf + o, "...", 3);
        o += 3;
    }
    buf[o] = '\0';
    return buf;
}

struct moeinf_esc moeinf_esc(const char *s, size_t len) {
    struct moeinf_esc e;
    moeinf_escape(s, len, e.s, sizeof e.s);
    return e;
}

struct moeinf_esc moeinf_esc_str(const char *s) {
    return s ? moeinf_esc(s, strlen(s)) : moeinf_esc("(null)", 6);
}
