/* test_sampler.c - the sampling chain against hand-computed cases and brute force. */
#include <math.h>
#include <stdint.h>

#include "moeinf.h"
#include "test.h"

static struct moeinf_sampler_params plain(float temp) {
    struct moeinf_sampler_params p = moeinf_sampler_params_default();
    p.temp = temp;
    p.top_k = 0;
    p.top_p = 1.0f;
    p.min_p = 0.0f;
    p.repeat_penalty = 1.0f;
    return p;
}

static struct moeinf_sampler *make(const struct moeinf_sampler_params *p, int n_vocab) {
    struct moeinf_sampler *s = NULL;
    struct moeinf_error err;
    enum moeinf_status st = moeinf_sampler_init(p, n_vocab, &s, &err);
    CHECK_MSG(st == MOEINF_OK, "%s", err.msg);
    return s;
}

/* A small deterministic generator for test rows (independent of the sampler's PRNG). */
static uint32_t lcg(uint32_t *x) {
    *x = *x * 1664525u + 1013904223u;
    return *x >> 8;
}

static void test_greedy_argmax_lowest_id_on_ties(void) {
    struct moeinf_sampler_params p = plain(0.0f);
    struct moeinf_sampler *s = make(&p, 5);
    if (!s) return;
    const float a[5] = {1.0f, 5.0f, 3.0f, 5.0f, -2.0f};
    CHECK_EQ_INT(moeinf_sampler_sample(s, a), 1);
    const float b[5] = {-3.0f, -1.0f, -2.0f, -1.5f, -1.0f};
    CHECK_EQ_INT(moeinf_sampler_sample(s, b), 1);
    const float c[5] = {NAN, 0.5f, NAN, 0.7f, 0.1f};
    CHECK_EQ_INT(moeinf_sampler_sample(s, c), 3);
    /* The row is read, not modified. */
    CHECK(a[1] == 5.0f && a[3] == 5.0f);
    moeinf_sampler_free(s);
}

static void test_top_k_1_equals_greedy(void) {
    enum {
        N = 3000
    };

    static float row[N];
    struct moeinf_sampler_params p = plain(0.8f);
    p.top_k = 1;
    p.top_p = 0.9f;
    p.min_p = 0.05f;
    struct moeinf_sampler *s = make(&p, N);
    if (!s) return;
    uint32_t x = 7;
    for (int r = 0; r < 50; r++) {
        /* Coarse values so that ties of the maximum happen. */
        for (int i = 0; i < N; i++)
            row[i] = (float)(lcg(&x) % 200) * 0.1f - 10.0f;
        int best = 0;
        for (int i = 1; i < N; i++)
            if (row[i] > row[best]) best = i;
        CHECK_EQ_INT(moeinf_sampler_sample(s, row), best);
    }
    moeinf_sampler_free(s);
}

/* Counts of n draws; checks each against n * prob within 4 sigma. */
static void check_distribution(struct moeinf_sampler *s, const float *row, const double *prob,
                               int n_vocab, int n) {
    int count[16] = {0};
    for (int d = 0; d < n; d++) {
        int32_t id = moeinf_sampler_sample(s, row);
        CHECK(id >= 0 && id < n_vocab);
        if (id >= 0 && id < n_vocab) count[id]++;
    }
    for (int i = 0; i < n_vocab; i++) {
        double mean = n * prob[i];
        double sigma = sqrt(n * prob[i] * (1.0 - prob[i]));
        if (prob[i] == 0.0) {
            CHECK_MSG(count[i] == 0, "token %d drawn %d times, outside the kept set", i, count[i]);
        } else {
            CHECK_MSG(fabs(count[i] - mean) <= 4.0 * sigma, "token %d: %d draws, expected %.1f", i,
                      count[i], mean);
        }
    }
}

static void test_temp1_matches_softmax(void) {
    const float row[4] = {0.0f, 1.0f, 2.0f, -1.0f};
    double prob[4];
    double z = 0.0;
    for (int i = 0; i < 4; i++)
        z += exp((double)row[i]);
    for (int i = 0; i < 4; i++)
        prob[i] = exp((double)row[i]) / z;
    struct moeinf_sampler_params p = plain(1.0f);
    struct moeinf_sampler *s = make(&p, 4);
    if (!s) return;
    check_distribution(s, row, prob, 4, 20000);
    moeinf_sampler_free(s);
}

static void test_temperature_scales_logits(void) {
    /* temp 0.5 is softmax of 2 * logits. */
    const float row[4] = {0.0f, 1.0f, 0.5f, -1.0f};
    double prob[4];
    double z = 0.0;
    for (int i = 0; i < 4; i++)
        z += exp(2.0 * row[i]);
    for (int i = 0; i < 4; i++)
        prob[i] = exp(2.0 * row[i]) / z;
    struct moeinf_sampler_params p = plain(0.5f);
    struct moeinf_sampler *s = make(&p, 4);
    if (!s) return;
    check_distribution(s, row, prob, 4, 20000);
    moeinf_sampler_free(s);
}

static void test_top_p_cuts_the_tail(void) {
    /* Probabilities 0.5, 0.3, 0.15, 0.05: cumulative 0.5, 0.8, ... so top_p 0.75 keeps
     * {0, 1}, renormalized to 0.625 / 0.375. */
    const float row[4] = {logf(0.15f), logf(0.5f), logf(0.05f), logf(0.3f)};
    struct moeinf_sampler_params p = plain(1.0f);
    p.top_p = 0.75f;
    struct moeinf_sampler *s = make(&p, 4);
    if (!s) return;
    const double prob[4] = {0.0, 0.625, 0.0, 0.375};
    check_distribution(s, row, prob, 4, 20000);
    moeinf_sampler_free(s);

    /* After top-k 3 the probabilities are renormalized over {1, 3, 0}: 0.526, 0.316, 0.158,
     * cumulative 0.526, 0.842: top_p 0.75 keeps {1, 3} again; top_p 0.85 keeps three. */
    p.top_k = 3;
    p.top_p = 0.85f;
    s = make(&p, 4);
    if (!s) return;
    const double prob3[4] = {0.15 / 0.95, 0.5 / 0.95, 0.0, 0.3 / 0.95};
    check_distribution(s, row, prob3, 4, 20000);
    moeinf_sampler_free(s);
}

static void test_min_p_cuts_below_fraction_of_best(void) {
    const float row[4] = {logf(0.15f), logf(0.5f), logf(0.05f), logf(0.3f)};
    struct moeinf_sampler_params p = plain(1.0f);
    p.min_p = 0.2f; /* threshold 0.1: token 2 (0.05) goes */
    struct moeinf_sampler *s = make(&p, 4);
    if (!s) return;
    const double prob[4] = {0.15 / 0.95, 0.5 / 0.95, 0.0, 0.3 / 0.95};
    check_distribution(s, row, prob, 4, 20000);
    moeinf_sampler_free(s);

    p.min_p = 0.35f; /* threshold 0.175: tokens 0 and 2 go */
    p.top_k = 4;     /* the top-k path applies min-p after selection */
    s = make(&p, 4);
    if (!s) return;
    const double prob2[4] = {0.0, 0.625, 0.0, 0.375};
    check_distribution(s, row, prob2, 4, 20000);
    moeinf_sampler_free(s);
}

static void test_top_k_draws_only_the_k_best(void) {
    enum {
        N = 5000,
        K = 10
    };

    static float row[N];
    uint32_t x = 99;
    for (int i = 0; i < N; i++)
        row[i] = (float)(lcg(&x) % 1000) * 0.01f;
    /* Brute force: the K best by (logit desc, id asc). */
    int chosen[K];
    static unsigned char taken[N];
    for (int k = 0; k < K; k++) {
        int best = -1;
        for (int i = 0; i < N; i++)
            if (!taken[i] && (best < 0 || row[i] > row[best])) best = i;
        taken[best] = 1;
        chosen[k] = best;
    }
    struct moeinf_sampler_params p = plain(3.0f);
    p.top_k = K;
    struct moeinf_sampler *s = make(&p, N);
    if (!s) return;
    int hits[K] = {0};
    for (int d = 0; d < 4000; d++) {
        int32_t id = moeinf_sampler_sample(s, row);
        int found = -1;
        for (int k = 0; k < K; k++)
            if (chosen[k] == id) found = k;
        CHECK_MSG(found >= 0, "token %d is outside the top %d", id, K);
        if (found >= 0) hits[found]++;
    }
    /* At temp 3 all ten keep a real share (>= exp(-0.1 * 100 / 3) relative) and get drawn. */
    for (int k = 0; k < K; k++)
        CHECK_MSG(hits[k] > 0, "top-%d token %d never drawn", k, chosen[k]);
    moeinf_sampler_free(s);
}

static void test_repetition_penalty_changes_greedy(void) {
    struct moeinf_sampler_params p = plain(0.0f);
    p.repeat_penalty = 1.5f;
    p.repeat_last_n = 2;
    struct moeinf_sampler *s = make(&p, 4);
    if (!s) return;
    const float row[4] = {2.0f, 1.8f, -1.0f, 0.5f};
    CHECK_EQ_INT(moeinf_sampler_sample(s, row), 0);
    moeinf_sampler_accept(s, 0); /* 2.0 / 1.5 = 1.33 < 1.8 */
    CHECK_EQ_INT(moeinf_sampler_sample(s, row), 1);
    moeinf_sampler_accept(s, 3);
    moeinf_sampler_accept(s, 3); /* 0 left the window of 2 */
    CHECK_EQ_INT(moeinf_sampler_sample(s, row), 0);
    moeinf_sampler_free(s);

    /* Negative logits are multiplied: -1.0 * 1.5 = -1.5 < -1.2. */
    p.repeat_last_n = 4;
    s = make(&p, 2);
    if (!s) return;
    const float neg[2] = {-1.0f, -1.2f};
    moeinf_sampler_accept(s, 0);
    CHECK_EQ_INT(moeinf_sampler_sample(s, neg), 1);
    moeinf_sampler_free(s);

    /* A token repeated in the window is penalized once: 2.0 / 1.5 = 1.33 > 1.2 (twice would
     * give 0.89 and flip the choice). */
    s = make(&p, 2);
    if (!s) return;
    const float once[2] = {2.0f, 1.2f};
    moeinf_sampler_accept(s, 0);
    moeinf_sampler_accept(s, 0);
    moeinf_sampler_accept(s, 0);
    moeinf_sampler_accept(s, 77); /* outside the vocabulary: ignored */
    CHECK_EQ_INT(moeinf_sampler_sample(s, once), 0);
    moeinf_sampler_free(s);
}

static void draw_seq(uint64_t seed, int32_t *out, int n) {
    enum {
        V = 50
    };

    float row[V];
    for (int i = 0; i < V; i++)
        row[i] = (float)((i * 37) % 11) * 0.3f;
    struct moeinf_sampler_params p = moeinf_sampler_params_default();
    p.temp = 1.0f;
    p.seed = seed;
    struct moeinf_sampler *s = make(&p, V);
    if (!s) return;
    for (int i = 0; i < n; i++)
        out[i] = moeinf_sampler_sample(s, row);
    moeinf_sampler_free(s);
}

static void test_seed_determinism(void) {
    int32_t a[200];
    int32_t b[200];
    int32_t c[200];
    draw_seq(42, a, 200);
    draw_seq(42, b, 200);
    draw_seq(43, c, 200);
    CHECK(memcmp(a, b, sizeof a) == 0);
    CHECK(memcmp(a, c, sizeof a) != 0);
}

static void expect_arg(struct moeinf_sampler_params p, int n_vocab) {
    struct moeinf_sampler *s = NULL;
    struct moeinf_error err;
    err.status = MOEINF_OK;
    CHECK_EQ_INT(moeinf_sampler_init(&p, n_vocab, &s, &err), MOEINF_ERR_ARG);
    CHECK(s == NULL);
    CHECK(strchr(err.msg, '\n') == NULL && err.msg[0] != '\0');
}

static void test_invalid_params(void) {
    struct moeinf_sampler_params d = moeinf_sampler_params_default();
    struct moeinf_sampler_params p;
    p = d, p.temp = -0.1f, expect_arg(p, 10);
    p = d, p.temp = NAN, expect_arg(p, 10);
    p = d, p.temp = INFINITY, expect_arg(p, 10);
    p = d, p.top_k = -1, expect_arg(p, 10);
    p = d, p.top_p = 0.0f, expect_arg(p, 10);
    p = d, p.top_p = 1.01f, expect_arg(p, 10);
    p = d, p.min_p = -0.01f, expect_arg(p, 10);
    p = d, p.min_p = 1.5f, expect_arg(p, 10);
    p = d, p.repeat_penalty = 0.0f, expect_arg(p, 10);
    p = d, p.repeat_last_n = -1, expect_arg(p, 10);
    expect_arg(d, 0);
    /* The documented defaults. */
    CHECK_NEAR(d.temp, 0.8, 1e-7);
    CHECK_EQ_INT(d.top_k, 40);
    CHECK_NEAR(d.top_p, 0.95, 1e-7);
    CHECK_NEAR(d.min_p, 0.05, 1e-7);
    CHECK_NEAR(d.repeat_penalty, 1.0, 0);
    CHECK_EQ_INT(d.repeat_last_n, 64);
    moeinf_sampler_free(NULL);
}

int main(void) {
    RUN(test_greedy_argmax_lowest_id_on_ties);
    RUN(test_top_k_1_equals_greedy);
    RUN(test_temp1_matches_softmax);
    RUN(test_temperature_scales_logits);
    RUN(test_top_p_cuts_the_tail);
    RUN(test_min_p_cuts_below_fraction_of_best);
    RUN(test_top_k_draws_only_the_k_best);
    RUN(test_repetition_penalty_changes_greedy);
    RUN(test_seed_determinism);
    RUN(test_invalid_params);
    return test_report();
}
