/* test_le.c - the little-endian codec (base/le.h) against bytes written out by hand: the
 * least significant byte first, floats as their IEEE-754 bit patterns. */
#include <stdint.h>

#include "base/le.h"
#include "test.h"

static void test_integers(void) {
    const uint8_t b[8] = {0x01, 0x23, 0x45, 0x67, 0x89, 0xab, 0xcd, 0xef};
    CHECK_EQ_INT(moeinf_le_u16(b), 0x2301);
    CHECK(moeinf_le_u32(b) == 0x67452301u);
    CHECK(moeinf_le_u64(b) == 0xefcdab8967452301ull);
    CHECK(moeinf_le_get(b, 3) == 0x452301u);
    CHECK(moeinf_le_get(b, 0) == 0);

    uint8_t out[9];
    memset(out, 0x55, sizeof out);
    moeinf_le_put_u64(out, 0x0807060504030201ull);
    for (int i = 0; i < 8; i++)
        CHECK_EQ_INT(out[i], i + 1);
    CHECK_EQ_INT(out[8], 0x55); /* nothing past the value */
    memset(out, 0x55, sizeof out);
    moeinf_le_put_u32(out, 0xdeadbeefu);
    CHECK(out[0] == 0xef && out[1] == 0xbe && out[2] == 0xad && out[3] == 0xde);
    CHECK_EQ_INT(out[4], 0x55);
    moeinf_le_put(out, 0xfedcba, 2); /* only the low two bytes */
    CHECK(out[0] == 0xba && out[1] == 0xdc && out[2] == 0xad);
}

static void test_floats(void) {
    const uint8_t one[4] = {0x00, 0x00, 0x80, 0x3f};          /* 1.0f */
    const uint8_t minus_two[8] = {0, 0, 0, 0, 0, 0, 0, 0xc0}; /* -2.0 */
    CHECK(moeinf_le_f32(one) == 1.0f);
    CHECK(moeinf_le_f64(minus_two) == -2.0);
    uint8_t out[8];
    moeinf_le_put_f32(out, 0.5f); /* 0x3f000000 */
    CHECK(out[0] == 0 && out[1] == 0 && out[2] == 0 && out[3] == 0x3f);
    moeinf_le_put_f64(out, 1.5); /* 0x3ff8000000000000 */
    CHECK(out[6] == 0xf8 && out[7] == 0x3f && out[0] == 0);
    CHECK(moeinf_le_f64(out) == 1.5);
}

int main(void) {
    RUN(test_integers);
    RUN(test_floats);
    return test_report();
}
