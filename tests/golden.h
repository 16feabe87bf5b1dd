/*
 * golden.h - reading llama.cpp's golden outputs (../shared/testdata/golden, format in its
 * README, section 2): a minimal JSON walk that finds a key after a given point and reads
 * a (possibly nested) array of numbers flattened in order.
 */
#ifndef MOEINF_TEST_GOLDEN_H
#define MOEINF_TEST_GOLDEN_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Whole file into a NUL-terminated buffer (free()), or NULL. */
static inline char *golden_read_file(const char *path, size_t *size) {
    FILE *fp = fopen(path, "rb");
    if (!fp) return NULL;
    fseek(fp, 0, SEEK_END);
    long n = ftell(fp);
    fseek(fp, 0, SEEK_SET);
    char *buf = n >= 0 ? malloc((size_t)n + 1) : NULL;
    if (buf && fread(buf, 1, (size_t)n, fp) != (size_t)n) {
        free(buf);
        buf = NULL;
    }
    fclose(fp);
    if (buf) {
        buf[n] = '\0';
        if (size) *size = (size_t)n;
    }
    return buf;
}

/* Pointer just past `"key":` (whitespace skipped), searching from `from`, or NULL. */
static inline const char *golden_find(const char *from, const char *key) {
    if (!from) return NULL;
    char pat[128];
    snprintf(pat, sizeof pat, "\"%s\":", key);
    const char *p = strstr(from, pat);
    if (!p) return NULL;
    p += strlen(pat);
    while (*p == ' ' || *p == '\n' || *p == '\t') p++;
    return p;
}

/* Reads the numbers of the array starting at p (nested arrays flattened) into out (at most
 * max); returns how many, or -1 if p is not an array. */
static inline int golden_numbers(const char *p, double *out, int max) {
    if (!p || *p != '[') return -1;
    int depth = 0;
    int n = 0;
    while (*p) {
        if (*p == '[') {
            depth++;
            p++;
        } else if (*p == ']') {
            depth--;
            p++;
            if (depth == 0) break;
        } else if (*p == ',' || *p == ' ' || *p == '\n' || *p == '\t') {
            p++;
        } else {
            char *end;
            double v = strtod(p, &end);
            if (end == p) return -1;
            if (n < max) out[n] = v;
            n++;
            p = end;
        }
    }
    return n < max ? n : max;
}

/* The prompt bytes from "prompt_utf8_hex" into buf (NUL-terminated); length or -1. */
static inline int golden_prompt(const char *json, char *buf, int size) {
    const char *p = golden_find(json, "prompt_utf8_hex");
    if (!p || *p != '"') return -1;
    p++;
    int n = 0;
    while (p[0] && p[1] && p[0] != '"' && n + 1 < size) {
        const char hex[3] = {p[0], p[1], '\0'};
        char *end = NULL;
        unsigned long v = strtoul(hex, &end, 16);
        if (*end) return -1;
        buf[n++] = (char)v;
        p += 2;
    }
    buf[n] = '\0';
    return n;
}

#endif
