// ctest-labels: threads
/*
 * test_tier_wave.c - a wave of the expert tier (offload/tier.c) waited for one read at a time,
 * over the synthetic file of expert_file.h: each moeinf_tier_wave_wait_next returns with more
 * of the wave's experts arrived (without I/O threads: exactly one more), until all are in their
 * slots with the file's bytes; moeinf_tier_wave_wait then retires every read without waiting;
 * a wave of hits needs no call; a failed read ends the wave with the read's error. And the
 * counters of prefetches: late ones are not hits, wasted ones are the simulator's, reads in
 * flight are reported.
 */
#include <stdint.h>
#include <string.h>
#include <unistd.h>

#include "expert_file.h"
#include "offload/tier.h"
#include "test.h"

#define N_SLOTS 6
#define TOP_K   3

static struct moeinf_tier *tier_open(int io_threads) {
    struct moeinf_store_layer l[N_LAYERS];
    layout(l);
    struct moeinf_tier_params p = {
        .path = path,
        .layers = l,
        .n_layers = N_LAYERS,
        .n_experts = N_EXPERTS,
        .top_k = TOP_K,
        .budget_bytes = N_SLOTS * moeinf_store_slot_bytes_for(l, N_LAYERS, N_EXPERTS),
        .policy = "lru",
        .io_threads = io_threads,
    };
    struct moeinf_tier *t = NULL;
    struct moeinf_error err = {0};
    CHECK_MSG(moeinf_tier_init(&p, &t, &err) == MOEINF_OK, "%s", err.msg);
    struct moeinf_tier_info info;
    if (t) moeinf_tier_info(t, &info);
    CHECK(!t || info.slots == N_SLOTS);
    return t;
}

static struct moeinf_tier_counters layer_report(const struct moeinf_tier *t, int il) {
    struct moeinf_tier_report r;
    moeinf_tier_report(t, il, &r);
    return r.counters;
}

static int n_ready(const struct moeinf_tier *t, int n) {
    int k = 0;
    for (int i = 0; i < n; i++)
        k += moeinf_tier_ready(t, i);
    return k;
}

/* One decode step of layer `il` choosing sel[0..TOP_K): its wave, waited for read by read,
 * then retired. Returns the number of wait_next calls. */
static int step(struct moeinf_tier *t, int il, const int32_t sel[TOP_K], int io_threads) {
    struct moeinf_store_layer l[N_LAYERS];
    layout(l);
    struct moeinf_error err = {0};
    moeinf_tier_layer_begin(t, il, sel, 1, TOP_K);
    const uint32_t *ids = NULL;
    int n = 0;
    CHECK(moeinf_tier_wave(t, &ids, &n, &err) == MOEINF_OK);
    CHECK_EQ_INT(n, TOP_K);
    int calls = 0;
    int ready = n_ready(t, n);
    while (ready < n && calls <= n) {
        CHECK_MSG(moeinf_tier_wave_wait_next(t, &err) == MOEINF_OK, "%s", err.msg);
        calls++;
        int now = n_ready(t, n);
        CHECK_MSG(now > ready, "%d I/O threads: call %d found %d of %d in (was %d)", io_threads,
                  calls, now, n, ready);
        if (io_threads == 0) CHECK_EQ_INT(now, ready + 1); /* one read per call */
        ready = now;
    }
    CHECK_EQ_INT(ready, n);
    const uint64_t stall = layer_report(t, il).stall_ns;
    CHECK(moeinf_tier_wave_wait(t, &err) == MOEINF_OK);
    CHECK_EQ_INT(layer_report(t, il).stall_ns, stall); /* nothing left to wait for */
    CHECK_EQ_INT(moeinf_tier_reads_in_flight(t), 0);   /* all retired */
    for (int i = 0; i < n; i++) {
        const uint8_t *parts[3];
        for (int p = 0; p < 3; p++)
            parts[p] = moeinf_tier_part(t, i, p);
        int e = (int)(ids[i] % N_EXPERTS);
        CHECK_MSG(parts_hold(parts, l, il, e), "expert %d of layer %d has the wrong bytes", e, il);
    }
    moeinf_tier_wave_end(t);
    CHECK(moeinf_tier_layer_end(t, &err) == MOEINF_OK);
    return calls;
}

static void test_reads_arrive_one_by_one(void) {
    const int32_t sel[TOP_K] = {5, 1, 6};
    for (int io = 0; io <= 3; io++) {
        struct moeinf_tier *t = tier_open(io);
        if (!t) return;
        moeinf_tier_request_begin(t);
        moeinf_tier_iteration_begin(t, MOEINF_PHASE_DECODE, 1);
        int calls = step(t, 1, sel, io);
        CHECK(calls >= 1 && calls <= TOP_K);     /* the reads were queued after the wave began */
        if (io == 0) CHECK_EQ_INT(calls, TOP_K); /* each call read one expert */
        CHECK_EQ_INT(layer_report(t, 1).misses, TOP_K);
        moeinf_tier_iteration_end(t);
        /* the same experts again: all hits, nothing to wait for */
        uint64_t stall = layer_report(t, 1).stall_ns;
        moeinf_tier_iteration_begin(t, MOEINF_PHASE_DECODE, 1);
        CHECK_EQ_INT(step(t, 1, sel, io), 0);
        CHECK_EQ_INT(layer_report(t, 1).hits, TOP_K);
        CHECK_EQ_INT(layer_report(t, 1).stall_ns, stall);
        moeinf_tier_iteration_end(t);
        moeinf_tier_request_end(t);
        moeinf_tier_free(t);
    }
}

/* A file cut short: the first wait_next reports the read's error, and the wave is over. */
static void test_failed_read_ends_the_wave(void) {
    for (int io = 0; io <= 2; io += 2) {
        struct moeinf_tier *t = tier_open(io);
        if (!t) return;
        CHECK(truncate(path, 100000) == 0);
        moeinf_tier_request_begin(t);
        moeinf_tier_iteration_begin(t, MOEINF_PHASE_DECODE, 1);
        const int32_t sel[TOP_K] = {2, 3, 7};
        moeinf_tier_layer_begin(t, 1, sel, 1, TOP_K);
        const uint32_t *ids = NULL;
        int n = 0;
        struct moeinf_error err = {0};
        CHECK(moeinf_tier_wave(t, &ids, &n, &err) == MOEINF_OK);
        enum moeinf_status st = moeinf_tier_wave_wait_next(t, &err);
        CHECK_EQ_INT(st, MOEINF_ERR_IO);
        CHECK_MSG(strstr(err.msg, path) != NULL, "%s", err.msg);
        CHECK_EQ_INT(moeinf_tier_reads_in_flight(t), 0);
        /* the wave is over and its experts forgotten: with the file whole again, the next
         * step reads them and gets their bytes */
        CHECK(write_file("tier-wave"));
        CHECK_EQ_INT(moeinf_tier_layer_end(t, &err), MOEINF_OK);
        CHECK(step(t, 1, sel, io) >= 1);
        CHECK_EQ_INT(layer_report(t, 1).misses, 2 * TOP_K);
        moeinf_tier_iteration_end(t);
        moeinf_tier_request_end(t);
        moeinf_tier_free(t);
    }
}

/* One decode step of layer il choosing sel[0..TOP_K), with gate-lookahead hints of layer
 * hint_layer (n_hint of them) prefetched behind its demand reads; waited for and ended. */
static void hinted_step(struct moeinf_tier *t, int il, const int32_t sel[TOP_K], int hint_layer,
                        const int *hint, int n_hint) {
    struct moeinf_error err = {0};
    moeinf_tier_iteration_begin(t, MOEINF_PHASE_DECODE, 1);
    moeinf_tier_layer_begin(t, il, sel, 1, TOP_K);
    if (n_hint > 0) moeinf_tier_hint(t, hint_layer, hint, n_hint);
    const uint32_t *ids = NULL;
    int n = 0;
    CHECK(moeinf_tier_wave(t, &ids, &n, &err) == MOEINF_OK);
    CHECK_EQ_INT(n, TOP_K);
    CHECK_MSG(moeinf_tier_wave_wait(t, &err) == MOEINF_OK, "%s", err.msg);
    moeinf_tier_wave_end(t);
    CHECK(moeinf_tier_layer_end(t, &err) == MOEINF_OK);
    moeinf_tier_iteration_end(t);
}

/*
 * Without I/O threads a prefetch stays queued until a step needs it, so what is late is
 * known. LRU, 6 slots: layer 0's experts 0, 1, 2 are read; a step of layer 0 hints experts 3
 * and 4 of layer 1 (queued, unread: in flight, and wasted as of now); layer 0 again (hits:
 * 3 and 4 are now the least recent); then layer 1 uses 3, 5 and 6: 3 is a late prefetch (the
 * step reads it and waits: not a hit), 5 takes the free slot and 6 evicts 4, the least
 * recent unpinned expert, whose queued read is cancelled (wasted and dropped). The cache
 * decides as the simulator does: 4 is evicted whatever its read's state.
 */
static void test_late_and_wasted_prefetches(void) {
    struct moeinf_tier *t = tier_open(0);
    if (!t) return;
    const int32_t first[TOP_K] = {0, 1, 2};
    const int32_t second[TOP_K] = {3, 5, 6};
    const int hint[2] = {3, 4};
    moeinf_tier_request_begin(t);
    hinted_step(t, 0, first, 0, NULL, 0);
    hinted_step(t, 0, first, 1, hint, 2);
    struct moeinf_tier_report r;
    moeinf_tier_report(t, -1, &r);
    CHECK_EQ_INT(r.counters.misses, 3);
    CHECK_EQ_INT(r.counters.hits, 3);
    CHECK_EQ_INT(r.counters.prefetches, 2);
    CHECK_EQ_INT(r.counters.io.loads, 3);
    CHECK_EQ_INT(r.counters.reads_in_flight, 2);
    CHECK_EQ_INT(r.counters.wasted_prefetches, 2); /* as of now: resident, unused */
    CHECK_EQ_INT(layer_report(t, 1).reads_in_flight, 2);
    CHECK_EQ_INT(layer_report(t, 0).reads_in_flight, 0);
    hinted_step(t, 0, first, 0, NULL, 0);
    hinted_step(t, 1, second, 0, NULL, 0);
    struct moeinf_tier_counters c = layer_report(t, 1);
    CHECK_EQ_INT(c.accesses, 3);
    CHECK_EQ_INT(c.hits, 0);
    CHECK_EQ_INT(c.late_prefetches, 1);
    CHECK_EQ_INT(c.misses, 2);
    CHECK_EQ_INT(c.prefetch_hits, 0);
    CHECK_EQ_INT(c.wasted_prefetches, 1);
    CHECK_EQ_INT(c.dropped_prefetches, 1);
    CHECK_EQ_INT(c.reads_in_flight, 0);
    CHECK_EQ_INT(c.io.loads, 3); /* 3, 5 and 6 */
    moeinf_tier_report(t, -1, &r);
    CHECK_EQ_INT(r.counters.hits, 6);
    CHECK_EQ_INT(r.counters.accesses, 12);
    /* a prefetch the cache is emptied of was wasted too */
    const int hint7[1] = {7};
    hinted_step(t, 0, first, 1, hint7, 1);
    CHECK_EQ_INT(layer_report(t, 1).wasted_prefetches, 2);
    moeinf_tier_evict_all(t);
    CHECK_EQ_INT(layer_report(t, 1).wasted_prefetches, 2);
    CHECK_EQ_INT(layer_report(t, 1).reads_in_flight, 0);
    moeinf_tier_request_end(t);
    moeinf_tier_free(t);
}

int main(void) {
    if (!write_file("tier-wave")) {
        fprintf(stderr, "cannot write %s\n", path);
        return 1;
    }
    RUN(test_reads_arrive_one_by_one);
    RUN(test_failed_read_ends_the_wave);
    RUN(test_late_and_wasted_prefetches);
    remove(path);
    return test_report();
}
