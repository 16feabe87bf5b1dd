/* test_grow.c - the doubling rule of base/grow.h against capacities worked out by hand, the
 * bytes kept across a move, and the sizes that must be refused (which leave the buffer as it
 * was). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/grow.h"
#include "test.h"

static void test_capacities(void) {
    size_t cap = 0;
    int *a = moeinf_grow(NULL, &cap, 1, sizeof *a);
    CHECK(a != NULL);
    CHECK(cap == 16); /* MOEINF_GROW_FIRST */
    if (!a) return;
    for (int i = 0; i < 16; i++)
        a[i] = 3 * i + 1;
    int *same = moeinf_grow(a, &cap, 16, sizeof *a); /* room already: no move, no change */
    CHECK(same == a && cap == 16);
    int *b = moeinf_grow(a, &cap, 17, sizeof *b); /* 16 -> 32 */
    CHECK(b != NULL && cap == 32);
    if (!b) {
        free(a);
        return;
    }
    b = moeinf_grow(b, &cap, 100, sizeof *b); /* 32 -> 64 -> 128 */
    CHECK(b != NULL && cap == 128);
    if (!b) return;
    for (int i = 0; i < 16; i++)
        CHECK_EQ_INT(b[i], 3 * i + 1);
    free(b);

    cap = 5; /* a capacity that is not a power of two doubles as it is: 5 -> 10 -> 20 */
    char *c = moeinf_grow(NULL, &cap, 11, 1);
    CHECK(c != NULL && cap == 20);
    free(c);
}

static void test_refused(void) {
    size_t cap = 0;
    CHECK(moeinf_grow(NULL, &cap, SIZE_MAX, 1) == NULL); /* no power-of-two multiple fits */
    CHECK(cap == 0);
    cap = 16;
    char *p = moeinf_grow(NULL, &cap, 16, 1);
    CHECK(p != NULL);
    if (!p) return;
    memcpy(p, "kept", 5);
    /* the elements fit in a size_t, their bytes do not */
    CHECK(moeinf_grow(p, &cap, SIZE_MAX / 8 + 1, 16) == NULL);
    CHECK(cap == 16 && !strcmp(p, "kept"));
    size_t len = 4;
    CHECK(!moeinf_text_append(&p, &len, &cap, "x", SIZE_MAX - 4));
    CHECK(len == 4 && cap == 16 && !strcmp(p, "kept"));
    free(p);
}

static void test_text(void) {
    char *t = NULL;
    size_t len = 0;
    size_t cap = 0;
    CHECK(moeinf_text_append(&t, &len, &cap, NULL, 0)); /* nothing yet: "" */
    CHECK(t != NULL && len == 0 && cap == 16);
    if (!t) return;
    CHECK(!strcmp(t, ""));
    CHECK(moeinf_text_append(&t, &len, &cap, "ab", 2));
    CHECK(moeinf_text_append(&t, &len, &cap, "cdefgh", 3)); /* only the first 3 bytes */
    CHECK(len == 5 && !strcmp(t, "abcde"));
    /* 5 + 11 + the NUL = 17 bytes: past 16, so 32 */
    CHECK(moeinf_text_append(&t, &len, &cap, "0123456789A", 11));
    CHECK(len == 16 && cap == 32 && !strcmp(t, "abcde0123456789A"));
    free(t);
}

int main(void) {
    RUN(test_capacities);
    RUN(test_refused);
    RUN(test_text);
    return test_report();
}
