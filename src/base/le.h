/*
 * le.h - the little-endian codec of every binary format moeinf reads or writes (GGUF, the
 * EAMC and policy-state files, and the tests' hand-made files): values go to and from bytes
 * least significant byte first, one byte at a time, so the result is the same on any host
 * and no pointer needs alignment. Floats travel as their IEEE-754 bit patterns.
 */
#ifndef MOEINF_BASE_LE_H
#define MOEINF_BASE_LE_H

#include <stdint.h>
#include <string.h>

/* The low n bytes (n <= 8) of v to p[0..n). */
static inline void moeinf_le_put(uint8_t *p, uint64_t v, int n) {
    for (int i = 0; i < n; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

/* The value of the n bytes (n <= 8) at p. */
static inline uint64_t moeinf_le_get(const uint8_t *p, int n) {
    uint64_t v = 0;
    for (int i = 0; i < n; i++)
        v |= (uint64_t)p[i] << (8 * i);
    return v;
}

static inline uint16_t moeinf_le_u16(const uint8_t *p) {
    return (uint16_t)moeinf_le_get(p, 2);
}

static inline uint32_t moeinf_le_u32(const uint8_t *p) {
    return (uint32_t)moeinf_le_get(p, 4);
}

static inline uint64_t moeinf_le_u64(const uint8_t *p) {
    return moeinf_le_get(p, 8);
}

static inline float moeinf_le_f32(const uint8_t *p) {
    uint32_t u = moeinf_le_u32(p);
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

static inline double moeinf_le_f64(const uint8_t *p) {
    uint64_t u = moeinf_le_u64(p);
    double d;
    memcpy(&d, &u, sizeof d);
    return d;
}

static inline void moeinf_le_put_u32(uint8_t *p, uint32_t v) {
    moeinf_le_put(p, v, 4);
}

static inline void moeinf_le_put_u64(uint8_t *p, uint64_t v) {
    moeinf_le_put(p, v, 8);
}

static inline void moeinf_le_put_f32(uint8_t *p, float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    moeinf_le_put(p, u, 4);
}

static inline void moeinf_le_put_f64(uint8_t *p, double d) {
    uint64_t u;
    memcpy(&u, &d, sizeof u);
    moeinf_le_put(p, u, 8);
}

#endif
