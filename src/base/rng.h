/*
 * rng.h - the project's seeded pseudo-random generators, with their state held by the caller
 * (no hidden globals): splitmix64 to expand a seed, xoshiro256** for streams. Used by the
 * sampler (draws), gen-model (weights) and the trace tools (Monte Carlo expectations); the
 * same seed gives the same numbers everywhere.
 */
#ifndef MOEINF_BASE_RNG_H
#define MOEINF_BASE_RNG_H

#include <stdint.h>

/* Advances *x and returns the next splitmix64 output. */
static inline uint64_t moeinf_splitmix64(uint64_t *x) {
    uint64_t z = (*x += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* Advances *x and returns a double uniform in [0, 1): the top 53 bits of the next splitmix64
 * output, over 2^53. */
static inline double moeinf_splitmix64_unit(uint64_t *x) {
    return (double)(moeinf_splitmix64(x) >> 11) / 9007199254740992.0;
}

static inline uint64_t moeinf_rotl64(uint64_t x, int k) {
    return (x << k) | (x >> (64 - k));
}

/* Next xoshiro256** output of state s (which must not be all zero). */
static inline uint64_t moeinf_xoshiro256ss(uint64_t s[4]) {
    uint64_t result = moeinf_rotl64(s[1] * 5, 7) * 9;
    uint64_t t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = moeinf_rotl64(s[3], 45);
    return result;
}

#endif
