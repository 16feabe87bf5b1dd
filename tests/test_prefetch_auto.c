/*
 * test_prefetch_auto.c - the controller of `--prefetch auto` / `--lookahead auto`
 * (offload/prefetch_auto.h) on hand-made counter sequences: the decision rule's thresholds,
 * its hysteresis and the spare time's discount, worked out by hand from the rule in the
 * header; the windows, the halving of the sums, the layers and sources kept apart, and a
 * source's own reads added back to the spare time while it is on.
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
        CHECK(!moeinf_prefetch_auto_on(a, il, 0) && !moeinf_prefetch_auto_on(a, il, 1));
    }
    /* layer 0, lookahead right every time: decided at the 16th step, not before */
    struct moeinf_prefetch_auto_obs right = obs(1, 1, 1, 0);
    for (int s = 1; s < 16; s++)
        CHECK(!moeinf_prefetch_auto_step(a, 0, &right, 0));
    CHECK(!moeinf_prefetch_auto_on(a, 0, 1));
    CHECK(moeinf_prefetch_auto_step(a, 0, &right, 0));
    CHECK(moeinf_prefetch_auto_on(a, 0, 1));
    CHECK(!moeinf_prefetch_auto_on(a, 0, 0)); /* the policy named nothing */
    CHECK(!moeinf_prefetch_auto_on(a, 1, 1)); /* other layers saw nothing */
    CHECK_EQ_INT(moeinf_prefetch_auto_layers_on(a, 1), 1);
    CHECK_EQ_INT(moeinf_prefetch_auto_layers_on(a, 0), 0);
    /* then wrong every time: the sums are 8 + 16 reads and 8 + 0 used, 8 < 16 x 0.75: off at
     * the 32nd step (and not after 15 of them) */
    struct moeinf_prefetch_auto_obs wrong = obs(1, 1, 0, 0);
    for (int s = 1; s < 16; s++)
        moeinf_prefetch_auto_step(a, 0, &wrong, 0);
    CHECK(moeinf_prefetch_auto_on(a, 0, 1));
    CHECK(moeinf_prefetch_auto_step(a, 0, &wrong, 0));
    CHECK(!moeinf_prefetch_auto_on(a, 0, 1));

    /* Layers 2 and 3: right 16 times, then right 2 times of 16, reads of 1000 ns: the sums are
     * 24 reads, 10 used, 14 wasted. While on, the source's own reads (24 x 1000 ns) are added
     * back to the spare time, which then covers its wasted reads: cost 0.75, 10 >= 0.75 x 14 x
     * 0.75 = 7.875, it stays on. Layer 3 without a read time: cost 1, 10 < 10.5, off. */
    for (int il = 2; il < 4; il++) {
        uint64_t read_ns = il == 2 ? 1000 : 0;
        for (int s = 0; s < 16; s++)
            moeinf_prefetch_auto_step(a, il, &right, read_ns);
        CHECK(moeinf_prefetch_auto_on(a, il, 1));
        for (int s = 0; s < 16; s++)
            moeinf_prefetch_auto_step(a, il, s < 2 ? &right : &wrong, read_ns);
    }
    CHECK(moeinf_prefetch_auto_on(a, 2, 1));
    CHECK(!moeinf_prefetch_auto_on(a, 3, 1));

    /* Layer 1, the policy: half right, and the layer's spare time measured (the sums are what
     * counts: 16 x 500 ns spare over 8 wasted reads of 1000 ns = f 1, cost 0.75: 8 > 7.5, on;
     * without it, cost 1: 8 <= 10, it would stay off);
     * the lookahead of the same layer is untouched */
    struct moeinf_prefetch_auto_obs half = obs(0, 1, 0, 500);
    struct moeinf_prefetch_auto_obs half_used = obs(0, 1, 1, 500);
    for (int s = 0; s < 16; s++)
        moeinf_prefetch_auto_step(a, 1, s % 2 ? &half_used : &half, 1000);
    CHECK(moeinf_prefetch_auto_on(a, 1, 0));
    CHECK(!moeinf_prefetch_auto_on(a, 1, 1));
    CHECK_EQ_INT(moeinf_prefetch_auto_layers_on(a, 0), 1);
    CHECK_EQ_INT(moeinf_prefetch_auto_layers_on(a, 1), 1);
    moeinf_prefetch_auto_free(a);
    moeinf_prefetch_auto_free(NULL);
}

int main(void) {
    RUN(test_decide);
    RUN(test_windows);
    return test_report();
}
