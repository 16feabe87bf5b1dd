/*
 * grow.h - room in a growing array: the one doubling rule behind the project's buffers whose
 * length is not known in advance (text built piece by piece, lists read from input). The
 * caller keeps the pointer, the length and the capacity; these functions only make room.
 */
#ifndef MOEINF_BASE_GROW_H
#define MOEINF_BASE_GROW_H

#include <stdbool.h>
#include <stddef.h>

/* The capacity a buffer starts with (elements), unless one element more is needed. */
#define MOEINF_GROW_FIRST 16

/* Room for `need` elements of `elem` bytes in p, an array of *cap elements (p NULL: none
 * yet). Returns p itself when it holds them; else p reallocated to the first of *cap (or
 * MOEINF_GROW_FIRST when *cap is 0) doubled 0, 1, 2 ... times that holds them, with *cap
 * set to it. NULL when out of memory or when the bytes would not fit in a size_t: p and *cap
 * are then unchanged, and p is still the caller's to free. */
void *moeinf_grow(void *p, size_t *cap, size_t need, size_t elem);

/* Appends s[0, n) to the text *p of *len bytes (capacity *cap bytes), which stays
 * NUL-terminated (also after n = 0, so that a NULL *p becomes ""). false when out of memory:
 * the text is then as it was. */
bool moeinf_text_append(char **p, size_t *len, size_t *cap, const char *s, size_t n);

#endif
