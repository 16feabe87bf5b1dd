/*
 * test_bench_stats.c - the per-phase counters of `moeinf bench` (src/cli/bench_print.c, linked
 * into this test alone): bench_phase_stats_set defines every field of what it fills, each
 * counter the difference of the two snapshots. `bench --route-trace` (bench_replay.c) sums
 * every such field over its calls, so one left unset was summed from an uninitialised stack
 * variable (expert_bytes was).
 */
#include <string.h>

#include "cli/bench.h"
#include "test.h"

static void test_every_field_is_set(void) {
    struct moeinf_expert_stats a;
    struct moeinf_expert_stats b;
    memset(&a, 0, sizeof a);
    memset(&b, 0, sizeof b);
    a.accesses = 10, b.accesses = 25;
    a.hits = 4, b.hits = 9;
    a.misses = 6, b.misses = 16;
    a.bytes_read = 4096, b.bytes_read = 12288;
    a.expert_bytes = 3000, b.expert_bytes = 7000;
    a.read_seconds = 0.25, b.read_seconds = 1.0;
    a.stall_seconds = 0.5, b.stall_seconds = 0.75;
    struct phase_stats ps;
    memset(&ps, 0xA5, sizeof ps); /* what a stack variable may hold */
    bench_phase_stats_set(&ps, &a, &b, 2.0);
    CHECK(ps.seconds == 2.0);
    CHECK_EQ_INT(ps.d.accesses, 15);
    CHECK_EQ_INT(ps.d.hits, 5);
    CHECK_EQ_INT(ps.d.misses, 10);
    CHECK_EQ_INT(ps.d.bytes_read, 2 * 4096);
    CHECK_EQ_INT(ps.d.expert_bytes, 4000);
    CHECK(ps.d.read_seconds == 0.75);
    CHECK(ps.d.stall_seconds == 0.25);
    /* the fields bench does not difference are 0, not what was there */
    struct phase_stats zero;
    memset(&zero, 0, sizeof zero);
    zero.seconds = ps.seconds;
    zero.d.accesses = ps.d.accesses;
    zero.d.hits = ps.d.hits;
    zero.d.misses = ps.d.misses;
    zero.d.bytes_read = ps.d.bytes_read;
    zero.d.expert_bytes = ps.d.expert_bytes;
    zero.d.read_seconds = ps.d.read_seconds;
    zero.d.stall_seconds = ps.d.stall_seconds;
    CHECK(test_same_bytes(&ps, &zero, sizeof ps));
}

int main(void) {
    RUN(test_every_field_is_set);
    return test_report();
}
