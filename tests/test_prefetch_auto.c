/*
 * test_prefetch_auto.c - the controller of `--prefetch auto` / `--lookahead auto`
 * (offload/prefetch_auto.h) on hand-made counter sequences: the decision rule's thresholds,
 * its hysteresis and the spare time's discount, worked out by hand from the rule in the
 * header; the windows, the halving of the sums, the layers and sources kept apart, and a
 * source's own reads added back to the spare time while it is on; the wall-time check on
 * hand-made times: its arms, its verdicts by the medians, and the layers' turns.
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

/* Layer `il` wants the lookahead (right 16 times). */
static void want(struct moeinf_prefetch_auto *a, int il, bool right) {
    struct moeinf_prefetch_auto_obs o = obs(1, 1, right ? 1 : 0, 0);
    for (int s = 0; s < 16; s++)
        moeinf_prefetch_auto_step(a, il, &o, 0);
}

/* One trial of layer `il` (started by the token before): arms on, off, off, on of 8 steps; the
 * on arms' times `on_ns`, the off arms' `off_ns`, each arm's first step (not counted) and one
 * more step of each arm 100 x longer (outliers the median ignores). Checks the arm the layer
 * is in at every step. */
static void trial(struct moeinf_prefetch_auto *a, int il, uint64_t on_ns, uint64_t off_ns) {
    for (int arm = 0; arm < 4; arm++) {
        bool on = arm == 0 || arm == 3;
        for (int s = 0; s < 8; s++) {
            CHECK(moeinf_prefetch_auto_on(a, il, 1) == on);
            CHECK(!moeinf_prefetch_auto_on(a, il, 0)); /* not wanted */
            uint64_t ns = on ? on_ns : off_ns;
            moeinf_prefetch_auto_iteration(a, s == 0 || s == 3 ? 100 * ns : ns);
        }
    }
}

static void test_wall_check(void) {
    struct moeinf_prefetch_auto *a = NULL;
    struct moeinf_error err = {0};
    CHECK(moeinf_prefetch_auto_init(3, &a, &err) == MOEINF_OK);
    if (!a) return;
    uint64_t checks = 9;
    uint64_t kept = 9;
    /* nothing wanted: no trial, nothing read */
    moeinf_prefetch_auto_iteration(a, 1000);
    moeinf_prefetch_auto_checks(a, &checks, &kept);
    CHECK(checks == 0 && kept == 0);
    want(a, 1, true);
    CHECK(moeinf_prefetch_auto_wanted(a, 1, 1) && !moeinf_prefetch_auto_on(a, 1, 1));
    moeinf_prefetch_auto_iteration(a, 0); /* layer 1's trial starts with this time, not counted */
    /* faster with its reads (1000 against 1200 ns): kept */
    trial(a, 1, 1000, 1200);
    CHECK(moeinf_prefetch_auto_on(a, 1, 1));
    moeinf_prefetch_auto_checks(a, &checks, &kept);
    CHECK(checks == 1 && kept == 1);
    CHECK_EQ_INT(moeinf_prefetch_auto_layers_on(a, 1), 1);
    /* the only layer that wants a source is tried again at its next step: now slower with
     * them (1300 against 1200): off, though the precision rule still wants them */
    moeinf_prefetch_auto_iteration(a, 0);
    trial(a, 1, 1300, 1200);
    CHECK(!moeinf_prefetch_auto_on(a, 1, 1) && moeinf_prefetch_auto_wanted(a, 1, 1));
    moeinf_prefetch_auto_checks(a, &checks, &kept);
    CHECK(checks == 2 && kept == 1);
    /* a no: the layer waits one check's time (32 iterations) before it is tried again, then
     * equal medians: not faster, off */
    for (int i = 0; i < 32; i++) {
        CHECK(!moeinf_prefetch_auto_on(a, 1, 1));
        moeinf_prefetch_auto_iteration(a, 0);
    }
    CHECK(moeinf_prefetch_auto_on(a, 1, 1)); /* tried again, on arm first */
    trial(a, 1, 1000, 1000);
    CHECK(!moeinf_prefetch_auto_on(a, 1, 1));

    /* Layer 0 wants too: it is tried while layer 1 waits (two checks' time now, 64
     * iterations), and again and again (layer 1 still waiting) */
    want(a, 0, true);
    moeinf_prefetch_auto_iteration(a, 0);
    trial(a, 0, 1000, 1200);
    CHECK(moeinf_prefetch_auto_on(a, 0, 1) && !moeinf_prefetch_auto_on(a, 1, 1));
    /* layer 0 in its next trial, in its off arm, stops being wanted: the trial ends with the
     * verdict it had; its source is off (not wanted) */
    moeinf_prefetch_auto_iteration(a, 0);
    for (int s = 0; s < 9; s++)
        moeinf_prefetch_auto_iteration(a, 1000);
    CHECK(!moeinf_prefetch_auto_on(a, 0, 1));
    want(a, 0, false); /* 16 wrong: 8 + 16 reads, 8 used, off */
    CHECK(!moeinf_prefetch_auto_wanted(a, 0, 1));
    moeinf_prefetch_auto_iteration(a, 1000);
    /* layer 1 is tried once its 64 iterations have passed: 44 of them are, 20 to go */
    int waited = 0;
    while (!moeinf_prefetch_auto_on(a, 1, 1) && waited < 100) {
        moeinf_prefetch_auto_iteration(a, 0);
        waited++;
    }
    CHECK_EQ_INT(waited, 20);
    trial(a, 1, 1200, 1000);
    CHECK(!moeinf_prefetch_auto_on(a, 1, 1));
    moeinf_prefetch_auto_checks(a, &checks, &kept);
    CHECK(checks == 5 && kept == 2);
    moeinf_prefetch_auto_free(a);
}

int main(void) {
    RUN(test_decide);
    RUN(test_wall_check);
    RUN(test_windows);
    return test_report();
}
