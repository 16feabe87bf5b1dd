/*
 * escape.h - a file's strings made safe to print: the escaping `moeinf inspect` uses for
 * string values, shared by the library's error messages (a crafted GGUF must not write
 * terminal escapes or a second line through a message naming its architecture, a key or a
 * tensor).
 */
#ifndef MOEINF_BASE_ESCAPE_H
#define MOEINF_BASE_ESCAPE_H

#include <stddef.h>

/* Bytes of the original string an escaped name shows before "..." is appended. */
#define MOEINF_ESC_SHOWN 64

/* The escaped form of one byte into out (at most 4 bytes, not NUL-terminated); returns its
 * length. '"' and '\\' get a backslash, newline and tab become \n and \t, the other control
 * bytes (below 0x20, and 0x7f) \xNN; every other byte (UTF-8 included) stands for itself. */
size_t moeinf_escape_byte(unsigned char c, char out[4]);

/* The escaped form of s[0, len) into buf (size bytes, NUL-terminated, at least 8): at most
 * MOEINF_ESC_SHOWN bytes of s, and fewer where buf is short, never cutting an escape or a
 * UTF-8 sequence in two; "..." where s was cut. Returns buf. */
const char *moeinf_escape(const char *s, size_t len, char *buf, size_t size);

/* An escaped name held by value, for a message argument:
 *     moeinf_fail(err, st, "architecture '%s'", moeinf_esc(name.data, name.len).s);
 * (C11: the returned struct lives until the end of the full expression). */
struct moeinf_esc {
    char s[4 * MOEINF_ESC_SHOWN + 4];
};
struct moeinf_esc moeinf_esc(const char *s, size_t len);

/* The same for a NUL-terminated string (NULL shows as "(null)"). */
struct moeinf_esc moeinf_esc_str(const char *s);

#endif
