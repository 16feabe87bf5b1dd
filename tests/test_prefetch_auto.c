/*
 * test_prefetch_auto.c - the controller of `--prefetch auto` / `--lookahead auto`
 * (offload/prefetch_auto.h) on hand-made counter sequences: the decision rule's thresholds,
 * its hysteresis and the spare time's discount, worked out by hand from the rule in the
 * header; the windows, the halving of the sums, the layers and sources kept apart, and a
 * source's own reads added back to the spare time while it is on; the wall-time check on
 * hand-made times: one source at a time over every layer that wants it, its arms, its
 * verdicts by the medians, the sources' turns and the waits between checks.
 */
#include "offload/prefetch_auto.h"
#include "test.h"

/* The rule alone: cost = 0.75 + 0.25 x (1 - f), on above cost x wasted x 1.25, off below
 * cost x wasted x 0.75, nothing decided under 4 reads. */
static void test_decide(void) {
    /* too few reads: the state stays */
    CHECK(!moeinf_prefetch_auto_decide(false, 3, 3, 0, 0));
    CHECK(moeinf_prefetch_auto_decide(true, 3, 0, 0, 0));
    /* no spare time known (read_ns 0): cost 1. 6 used, 4 wasted: 6 > 5, on */
    CHECK(moeinf_prefetch_auto_decide(false, 10, 6, 0, 0));
    /* 5 used, 5 wasted: between 3.75 and 6.25, the state stays (hysteresis) */
    CHECK(!moeinf_prefetch_auto_decide(false, 10, 5, 0, 0));
    CHECK(moeinf_prefetch_auto_decide(true, 10, 5, 0, 0));
    /* 4 used, 6 wasted: 4 < 4.5, off */
    CHECK(!moeinf_prefetch_auto_decide(true, 10, 4, 0, 0));
    /* 5 used, 5 wasted with the wasted reads' whole time spare (5 x 1000 ns): cost 0.75,
     * 5 > 4.6875, on (without the spare it stayed off, above) */
    CHECK(moeinf_prefetch_auto_decide(false, 10, 5, 5000, 1000));
    /* spare but no read time known: no discount */
    CHECK(!moeinf_prefetch_auto_decide(false, 10, 5, 5000, 0));
    /* half of it spare: cost 0.875, on above 5.47, off below 3.28: 5 keeps either state */
    CHECK(!moeinf_prefetch_auto_decide(false, 10, 5, 2500, 1000));
    CHECK(moeinf_prefetch_auto_decide(true, 10, 5, 2500, 1000));
    /* more spare than the wasted reads need counts as all of it (f <= 1): 2 used, 8 wasted,
     * 2 < 0.75 x 8 x 0.75 = 4.5, off however much is spare */
    CHECK(!moeinf_prefetch_auto_decide(true, 10, 2, 1e12, 1000));
    /* nothing wasted: on */
    CHECK(moeinf_prefetch_auto_decide(false, 5, 5, 0, 0));
}

static struct moeinf_prefetch_auto_obs obs(int source, uint32_t reads, uint32_t used,
                                           uint64_t spare_ns) {
    struct moeinf_prefetch_auto_obs o = {.spare_ns = spare_ns};
    o.reads[source] = reads;
    o.used[source] = used;
    return o;
}

static void test_windows(void) {
    struct moeinf_prefetch_auto *a = NULL;
    struct moeinf_error err = {0};
    CHECK(moeinf_prefetch_auto_init(4, &a, &err) == MOEINF_OK);
    if (!a) return;
    for (int il = 0; il < 4; il++) {
        CHECK(!moeinf_prefetch_auto_wanted(a, il, 0) && !moeinf_prefetch_auto_wanted(a, il, 1));
    }
    /* layer 0, lookahead right every time: decided at the 16th step, not before */
    struct moeinf_prefetch_auto_obs right = obs(1, 1, 1, 0);
    for (int s = 1; s < 16; s++)
        CHECK(!moeinf_prefetch_auto_step(a, 0, &right, 0));
    CHECK(!moeinf_prefetch_auto_wanted(a, 0, 1));
    CHECK(moeinf_prefetch_auto_step(a, 0, &right, 0));
    CHECK(moeinf_prefetch_auto_wanted(a, 0, 1));
    CHECK(!moeinf_prefetch_auto_wanted(a, 0, 0)); /* the policy named nothing */
    CHECK(!moeinf_prefetch_auto_wanted(a, 1, 1)); /* other layers saw nothing */
    /* wanted, but read nowhere before a wall-time check says it pays */
    CHECK(!moeinf_prefetch_auto_on(a, 0, 1));
    CHECK_EQ_INT(moeinf_prefetch_auto_layers_on(a, 1), 0);
    /* then wrong every time: the sums are 8 + 16 reads and 8 + 0 used, 8 < 16 x 0.75: off at
     * the 32nd step (and not after 15 of them) */
    struct moeinf_prefetch_auto_obs wrong = obs(1, 1, 0, 0);
    for (int s = 1; s < 16; s++)
        moeinf_prefetch_auto_step(a, 0, &wrong, 0);
    CHECK(moeinf_prefetch_auto_wanted(a, 0, 1));
    CHECK(moeinf_prefetch_auto_step(a, 0, &wrong, 0));
    CHECK(!moeinf_prefetch_auto_wanted(a, 0, 1));

    /* Layers 2 and 3: right 16 times, then right 2 times of 16, reads of 1000 ns: the sums are
     * 24 reads, 10 used, 14 wasted. While on, the source's own reads (24 x 1000 ns) are added
     * back to the spare time, which then covers its wasted reads: cost 0.75, 10 >= 0.75 x 14 x
     * 0.75 = 7.875, it stays on. Layer 3 without a read time: cost 1, 10 < 10.5, off. */
    for (int il = 2; il < 4; il++) {
        uint64_t read_ns = il == 2 ? 1000 : 0;
        for (int s = 0; s < 16; s++)
            moeinf_prefetch_auto_step(a, il, &right, read_ns);
        CHECK(moeinf_prefetch_auto_wanted(a, il, 1));
        for (int s = 0; s < 16; s++)
            moeinf_prefetch_auto_step(a, il, s < 2 ? &right : &wrong, read_ns);
    }
    CHECK(moeinf_prefetch_auto_wanted(a, 2, 1));
    CHECK(!moeinf_prefetch_auto_wanted(a, 3, 1));

    /* Layer 1, the policy: half right, and the layer's spare time measured (the sums are what
     * counts: 16 x 500 ns spare over 8 wasted reads of 1000 ns = f 1, cost 0.75: 8 > 7.5, on;
     * without it, cost 1: 8 <= 10, it would stay off);
     * the lookahead of the same layer is untouched */
    struct moeinf_prefetch_auto_obs half = obs(0, 1, 0, 500);
    struct moeinf_prefetch_auto_obs half_used = obs(0, 1, 1, 500);
    for (int s = 0; s < 16; s++)
        moeinf_prefetch_auto_step(a, 1, s % 2 ? &half_used : &half, 1000);
    CHECK(moeinf_prefetch_auto_wanted(a, 1, 0));
    CHECK(!moeinf_prefetch_auto_wanted(a, 1, 1));
    CHECK_EQ_INT(moeinf_prefetch_auto_layers_on(a, 0), 0);
    CHECK_EQ_INT(moeinf_prefetch_auto_layers_on(a, 1), 0);
    moeinf_prefetch_auto_free(a);
    moeinf_prefetch_auto_free(NULL);
}

/* Layer `il` wants source `src` (right 16 times), or stops wanting it (wrong 16 times: with
 * the 16 right before, 8 + 16 reads and 8 used, off). */
static void want(struct moeinf_prefetch_auto *a, int il, int src, bool right) {
    struct moeinf_prefetch_auto_obs o = obs(src, 1, right ? 1 : 0, 0);
    for (int s = 0; s < 16; s++)
        moeinf_prefetch_auto_step(a, il, &o, 0);
}

/* Checks which reads are issued: source s in layer il exactly where bit il of mask[s] is set. */
static void check_on(const struct moeinf_prefetch_auto *a, const unsigned mask[2]) {
    for (int src = 0; src < 2; src++)
        for (int il = 0; il < 3; il++)
            CHECK(moeinf_prefetch_auto_on(a, il, src) == ((mask[src] >> il & 1) != 0));
}

/* One check of source `src` (started by the iteration before): arms on, off, off, on of 8
 * steps; the on arms' times `on_ns`, the off arms' `off_ns`, each arm's first step (not
 * counted) and one more step of each arm 100 x longer (outliers the median ignores). At every
 * step the source reads in the layers of `wanted` in the on arms only, and the other source in
 * the layers of `other` (its standing verdict) throughout. */
static void trial(struct moeinf_prefetch_auto *a, int src, unsigned wanted, unsigned other,
                  uint64_t on_ns, uint64_t off_ns) {
    for (int arm = 0; arm < 4; arm++) {
        bool on = arm == 0 || arm == 3;
        unsigned mask[2];
        mask[src] = on ? wanted : 0;
        mask[1 - src] = other;
        for (int s = 0; s < 8; s++) {
            check_on(a, mask);
            uint64_t ns = on ? on_ns : off_ns;
            moeinf_prefetch_auto_iteration(a, s == 0 || s == 3 ? 100 * ns : ns);
        }
    }
}

/* Iterations of time 0 until source `src` reads in layer `il` (a check's on arm starts), 200
 * at most. */
static int until_on(struct moeinf_prefetch_auto *a, int il, int src) {
    int n = 0;
    while (!moeinf_prefetch_auto_on(a, il, src) && n < 200) {
        moeinf_prefetch_auto_iteration(a, 0);
        n++;
    }
    return n;
}

static void test_wall_check(void) {
    struct moeinf_prefetch_auto *a = NULL;
    struct moeinf_error err = {0};
    CHECK(moeinf_prefetch_auto_init(3, &a, &err) == MOEINF_OK);
    if (!a) return;
    uint64_t checks = 9;
    uint64_t kept = 9;
    /* nothing wanted: no check, nothing read */
    moeinf_prefetch_auto_iteration(a, 1000);
    moeinf_prefetch_auto_checks(a, &checks, &kept);
    CHECK(checks == 0 && kept == 0);
    want(a, 1, 1, true);
    CHECK(moeinf_prefetch_auto_wanted(a, 1, 1) && !moeinf_prefetch_auto_on(a, 1, 1));
    moeinf_prefetch_auto_iteration(a, 0); /* the lookahead's check starts, this time not counted */
    /* faster with its reads (1000 against 1200 ns): kept */
    trial(a, 1, 2u, 0u, 1000, 1200);
    check_on(a, (const unsigned[2]){0u, 2u});
    moeinf_prefetch_auto_checks(a, &checks, &kept);
    CHECK(checks == 1 && kept == 1);
    CHECK_EQ_INT(moeinf_prefetch_auto_layers_on(a, 1), 1);
    /* a first verdict waits one check's time (32 iterations), reading meanwhile: the next check
     * starts at the 32nd */
    CHECK_EQ_INT(until_on(a, 1, 1), 0);
    for (int i = 0; i < 32; i++)
        moeinf_prefetch_auto_iteration(a, 0);
    trial(a, 1, 2u, 0u, 1000, 1200);
    /* the same verdict again: twice the wait (64). Layer 0 comes to want the lookahead and
     * follows the standing verdict; the next check tries both layers at once: slower with the
     * reads (1300 against 1200), off in both, though the precision rule still wants them */
    for (int i = 0; i < 63; i++)
        moeinf_prefetch_auto_iteration(a, 0);
    want(a, 0, 1, true);
    check_on(a, (const unsigned[2]){0u, 3u});
    moeinf_prefetch_auto_iteration(a, 0);
    trial(a, 1, 3u, 0u, 1300, 1200);
    check_on(a, (const unsigned[2]){0u, 0u});
    CHECK(moeinf_prefetch_auto_wanted(a, 0, 1) && moeinf_prefetch_auto_wanted(a, 1, 1));
    moeinf_prefetch_auto_checks(a, &checks, &kept);
    CHECK(checks == 3 && kept == 2);

    /* The policy's proposals come to be wanted in layer 2: their check starts at the next
     * iteration (the lookahead waits 32 after its changed verdict, and counts down meanwhile)
     * and keeps them; the lookahead, off, is checked right after, with the policy reading in
     * layer 2: equal medians, not faster, off again (the wait doubles to 64) */
    want(a, 2, 0, true);
    moeinf_prefetch_auto_iteration(a, 0);
    trial(a, 0, 4u, 0u, 1000, 1100);
    moeinf_prefetch_auto_iteration(a, 0);
    trial(a, 1, 3u, 4u, 1000, 1000);
    check_on(a, (const unsigned[2]){4u, 0u});
    moeinf_prefetch_auto_checks(a, &checks, &kept);
    CHECK(checks == 5 && kept == 3);
    /* the policy's first verdict waited 32 iterations, all in the lookahead's check: its next
     * check starts at once, and the lookahead's 64 count down in it. The policy stops being
     * wanted in its off arm: its check ends with the verdict it had, and it reads nowhere */
    moeinf_prefetch_auto_iteration(a, 0);
    for (int s = 0; s < 9; s++) {
        check_on(a, (const unsigned[2]){s < 8 ? 4u : 0u, 0u});
        moeinf_prefetch_auto_iteration(a, 1000);
    }
    want(a, 2, 0, false);
    CHECK(!moeinf_prefetch_auto_wanted(a, 2, 0));
    moeinf_prefetch_auto_iteration(a, 1000);
    check_on(a, (const unsigned[2]){0u, 0u});
    moeinf_prefetch_auto_checks(a, &checks, &kept);
    CHECK(checks == 5 && kept == 3);
    /* the lookahead's next check starts once its 64 iterations have passed: 11 in the policy's
     * check, 53 to go */
    CHECK_EQ_INT(until_on(a, 0, 1), 53);
    trial(a, 1, 3u, 0u, 900, 1000);
    check_on(a, (const unsigned[2]){0u, 3u});
    /* no layer wants anything any more: no check starts, the counts stay */
    want(a, 0, 1, false);
    want(a, 1, 1, false);
    for (int i = 0; i < 300; i++)
        moeinf_prefetch_auto_iteration(a, 0);
    check_on(a, (const unsigned[2]){0u, 0u});
    moeinf_prefetch_auto_checks(a, &checks, &kept);
    CHECK(checks == 6 && kept == 4);
    moeinf_prefetch_auto_free(a);
}

int main(void) {
    RUN(test_decide);
    RUN(test_wall_check);
    RUN(test_windows);
    return test_report();
}
