/* test_serve_text.c - stop strings held back while they may still match, OpenAI's
 * frequency/presence penalties and logit_bias, and the log-probabilities of a row (ties,
 * NaN, a token of probability 0), against hand-worked cases. */
#include <math.h>

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

static void test_logit_bias(void) {
    float logits[4] = {1.0f, 2.0f, -1.0f, 0.5f};
    const struct serve_logit_bias bias[] = {{0, -100.0f}, {3, 2.5f}};
    serve_apply_logit_bias(logits, bias, 2);
    CHECK_NEAR(logits[0], -99.0, 1e-5);
    CHECK_NEAR(logits[1], 2.0, 0);
    CHECK_NEAR(logits[2], -1.0, 0);
    CHECK_NEAR(logits[3], 3.0, 0);
}

static void test_logprobs(void) {
    /* log-softmax of {0, ln 2, ln 2, NaN, -inf}: probabilities 1/5, 2/5, 2/5, 0, 0 */
    const float logits[5] = {0.0f, (float)M_LN2, (float)M_LN2, NAN, -INFINITY};
    int32_t top_id[5];
    double top_lp[5];
    double lp = serve_logprobs(logits, 5, 0, 5, top_id, top_lp);
    const double lse = log(1.0 + 2.0 * exp((double)(float)M_LN2));
    CHECK_NEAR(lp, -lse, 1e-12);
    /* ties go to the lower id; NaN counts as -inf; probability 0 reads -9999 */
    CHECK_EQ_INT(top_id[0], 1);
    CHECK_EQ_INT(top_id[1], 2);
    CHECK_EQ_INT(top_id[2], 0);
    CHECK_EQ_INT(top_id[3], 3);
    CHECK_EQ_INT(top_id[4], 4);
    CHECK_NEAR(top_lp[0], (double)(float)M_LN2 - lse, 1e-12);
    CHECK_NEAR(top_lp[1], top_lp[0], 0);
    CHECK_NEAR(top_lp[2], -lse, 1e-12);
    CHECK_NEAR(top_lp[3], -9999.0, 0);
    CHECK_NEAR(top_lp[4], -9999.0, 0);
    CHECK_NEAR(serve_logprobs(logits, 5, 3, 0, top_id, top_lp), -9999.0, 0);
    /* fewer alternatives than the vocabulary: the best ones */
    const float row[4] = {3.0f, -2.0f, 5.0f, 4.0f};
    serve_logprobs(row, 4, 1, 2, top_id, top_lp);
    CHECK_EQ_INT(top_id[0], 2);
    CHECK_EQ_INT(top_id[1], 3);
    CHECK_NEAR(top_lp[0] - top_lp[1], 1.0, 1e-12);
}

int main(void) {
    RUN(test_stop_scan);
    RUN(test_penalties);
    RUN(test_logit_bias);
    RUN(test_logprobs);
    return test_report();
}
