/* test_serve_text.c - stop strings held back while they may still match, and OpenAI's
 * frequency/presence penalties, against hand-worked cases. */
#include "serve/serve.h"
#include "test.h"

static size_t scan(const char *text, size_t shown, char *const *stops, int n, bool *stopped) {
    return serve_stop_scan(text, strlen(text), shown, stops, n, stopped);
}

static void test_stop_scan(void) {
    char *stops[] = {(char *)"END", (char *)"\n\n"};
    bool stopped;
    /* no stop, no tail that starts one: everything shows */
    CHECK_EQ_INT(scan("hello", 0, stops, 2, &stopped), 5);
    CHECK(!stopped);
    /* "EN" may become "END": held back */
    CHECK_EQ_INT(scan("helloEN", 0, stops, 2, &stopped), 5);
    CHECK(!stopped);
    /* a single newline may become "\n\n" */
    CHECK_EQ_INT(scan("ab\n", 0, stops, 2, &stopped), 2);
    /* a match cuts the text before it, the earliest of several */
    CHECK_EQ_INT(scan("abc\n\nxEND", 0, stops, 2, &stopped), 3);
    CHECK(stopped);
    CHECK_EQ_INT(scan("helloENDmore", 5, stops, 2, &stopped), 5);
    CHECK(stopped);
    /* matches start at or after what was shown */
    CHECK_EQ_INT(scan("END and more", 4, stops, 2, &stopped), 12);
    CHECK(!stopped);
    /* no stops: all of it */
    CHECK_EQ_INT(scan("x\n", 0, NULL, 0, &stopped), 2);
    /* a stop longer than the text so far: hold the prefix */
    char *long_stop[] = {(char *)"abcdef"};
    CHECK_EQ_INT(scan("xxabc", 0, long_stop, 1, &stopped), 2);
    CHECK(!stopped);
}

static void test_penalties(void) {
    float logits[4] = {1.0f, 2.0f, -1.0f, 0.5f};
    int32_t counts[4] = {0, 2, 1, 0};
    serve_apply_penalties(logits, counts, 4, 0.5f, 0.25f);
    /* token 1: 2 - (2 x 0.5 + 0.25) = 0.75; token 2: -1 - (0.5 + 0.25) = -1.75 */
    CHECK_NEAR(logits[0], 1.0, 0);
    CHECK_NEAR(logits[1], 0.75, 1e-7);
    CHECK_NEAR(logits[2], -1.75, 1e-7);
    CHECK_NEAR(logits[3], 0.5, 0);
}

int main(void) {
    RUN(test_stop_scan);
    RUN(test_penalties);
    return test_report();
}
