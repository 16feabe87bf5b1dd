// ctest-labels: threads
/*
 * test_loader.c - expert reads on I/O threads (offload/loader.c) over a store of a synthetic
 * file: every read lands the file's bytes where moeinf_store_part points, with any number of
 * I/O threads and in any mix of demand and prefetch reads; cancel, promote and the
 * synchronous mode do what loader.h says; a file that shrinks gives a named I/O error; freeing
 * a loader with reads queued neither hangs nor leaks.
 */
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "expert_file.h"
#include "offload/loader.h"
#include "offload/store.h"
#include "test.h"

/* The slot holds expert e of layer il, byte for byte. */
static bool slot_holds(const struct moeinf_store *s, const struct moeinf_store_layer *l, int slot,
                       int il, int e) {
    const uint8_t *parts[3];
    for (int p = 0; p < 3; p++)
        parts[p] = moeinf_store_part(s, slot, p);
    return parts_hold(parts, l, il, e);
}

static void check_all_reads(int n_threads, enum moeinf_expert_io mode) {
    struct moeinf_store_layer l[N_LAYERS];
    layout(l);
    const int n_slots = N_LAYERS * N_EXPERTS;
    struct test_store ts;
    struct moeinf_loader *ld = NULL;
    struct moeinf_error err = {0};
    CHECK_MSG(store_open(l, n_slots, mode, &ts, &err) == MOEINF_OK, "%s", err.msg);
    struct moeinf_store *s = ts.s;
    if (!s) return;
    CHECK(moeinf_loader_init(s, n_threads, &ld, &err) == MOEINF_OK);
    if (!ld) {
        store_close(&ts);
        return;
    }
    CHECK_EQ_INT(moeinf_loader_n_threads(ld), n_threads);
    /* slot k gets expert k read backwards through the flat ids, every third as a demand */
    for (int k = 0; k < n_slots; k++) {
        int id = n_slots - 1 - k;
        moeinf_loader_submit(ld, k, id / N_EXPERTS, id % N_EXPERTS, k % 3 != 0);
    }
    moeinf_loader_promote(ld, 4); /* whatever state it is in now */
    uint64_t part_bytes = 0;
    for (int k = 0; k < n_slots; k++) {
        int id = n_slots - 1 - k;
        uint64_t waited;
        enum moeinf_status st = moeinf_loader_wait(ld, k, &waited, &err);
        CHECK_MSG(st == MOEINF_OK, "%s", err.msg);
        CHECK_EQ_INT(moeinf_loader_state(ld, k), MOEINF_JOB_DONE);
        CHECK_MSG(slot_holds(s, l, k, id / N_EXPERTS, id % N_EXPERTS),
                  "%d threads: slot %d does not hold expert %d", n_threads, k, id);
        struct moeinf_store_counters io;
        CHECK(moeinf_loader_retire(ld, k, &io, &err) == MOEINF_OK);
        CHECK_EQ_INT(moeinf_loader_state(ld, k), MOEINF_JOB_IDLE);
        CHECK_EQ_INT(io.loads, 1);
        CHECK_EQ_INT(io.part_bytes, EXPERT_BYTES);
        part_bytes += io.part_bytes;
    }
    CHECK_EQ_INT(part_bytes, (uint64_t)n_slots * EXPERT_BYTES);
    moeinf_loader_free(ld);
    store_close(&ts);
}

static void test_reads_land_in_their_slots(void) {
    for (int t = 0; t <= 3; t++) {
        check_all_reads(t, MOEINF_EXPERT_IO_DIRECT);
        check_all_reads(t, MOEINF_EXPERT_IO_CACHED);
        check_all_reads(t, MOEINF_EXPERT_IO_NOCACHE);
    }
}

/* Without I/O threads a job stays queued until it is cancelled or waited for. */
static void test_cancel_and_synchronous_wait(void) {
    struct moeinf_store_layer l[N_LAYERS];
    layout(l);
    struct test_store ts;
    struct moeinf_loader *ld = NULL;
    struct moeinf_error err = {0};
    CHECK(store_open(l, 4, MOEINF_EXPERT_IO_DIRECT, &ts, &err) == MOEINF_OK);
    struct moeinf_store *s = ts.s;
    if (!s) return;
    CHECK(moeinf_loader_init(s, 0, &ld, &err) == MOEINF_OK);
    if (!ld) {
        store_close(&ts);
        return;
    }
    moeinf_loader_submit(ld, 0, 1, 5, true);
    moeinf_loader_submit(ld, 1, 0, 2, false);
    CHECK_EQ_INT(moeinf_loader_state(ld, 0), MOEINF_JOB_QUEUED);
    CHECK(moeinf_loader_is_prefetch(ld, 0));
    CHECK(!moeinf_loader_is_prefetch(ld, 1));
    CHECK(moeinf_loader_cancel(ld, 0));
    CHECK_EQ_INT(moeinf_loader_state(ld, 0), MOEINF_JOB_IDLE);
    CHECK(!moeinf_loader_cancel(ld, 0)); /* nothing queued any more */
    uint64_t waited;
    CHECK(moeinf_loader_wait(ld, 1, &waited, &err) == MOEINF_OK);
    CHECK(slot_holds(s, l, 1, 0, 2));
    CHECK(!moeinf_loader_cancel(ld, 1)); /* finished: too late to cancel */
    struct moeinf_store_counters io;
    CHECK(moeinf_loader_retire(ld, 1, &io, &err) == MOEINF_OK);
    moeinf_loader_submit(ld, 0, 1, 7, true); /* a cancelled slot takes a new job */
    CHECK(moeinf_loader_wait(ld, 0, &waited, &err) == MOEINF_OK);
    CHECK(slot_holds(s, l, 0, 1, 7));
    CHECK(moeinf_loader_retire(ld, 0, &io, &err) == MOEINF_OK);
    moeinf_loader_free(ld);
    store_close(&ts);
}

/* A file cut short after the store opened it: the read fails with a message naming the
 * file and the expert, through wait and retire. */
static void test_short_file_is_an_error(void) {
    struct moeinf_store_layer l[N_LAYERS];
    layout(l);
    struct test_store ts;
    struct moeinf_loader *ld = NULL;
    struct moeinf_error err = {0};
    CHECK(store_open(l, 2, MOEINF_EXPERT_IO_DIRECT, &ts, &err) == MOEINF_OK);
    struct moeinf_store *s = ts.s;
    if (!s) return;
    CHECK(moeinf_loader_init(s, 2, &ld, &err) == MOEINF_OK);
    if (!ld) {
        store_close(&ts);
        return;
    }
    CHECK(truncate(path, 100000) == 0);
    moeinf_loader_submit(ld, 0, 1, 7, false);
    uint64_t waited;
    enum moeinf_status st = moeinf_loader_wait(ld, 0, &waited, &err);
    CHECK_EQ_INT(st, MOEINF_ERR_IO);
    CHECK_MSG(strstr(err.msg, path) && strstr(err.msg, "expert 7 of layer 1"), "%s", err.msg);
    struct moeinf_store_counters io;
    struct moeinf_error e2 = {0};
    CHECK_EQ_INT(moeinf_loader_retire(ld, 0, &io, &e2), MOEINF_ERR_IO);
    CHECK(strcmp(e2.msg, err.msg) == 0);
    CHECK_EQ_INT(moeinf_loader_state(ld, 0), MOEINF_JOB_IDLE);
    moeinf_loader_free(ld);
    store_close(&ts);
    CHECK(write_file("loader")); /* restore for later tests */
}

/* Freed with reads queued and running: returns (no hang), ASan sees no leak. */
static void test_free_with_reads_queued(void) {
    struct moeinf_store_layer l[N_LAYERS];
    layout(l);
    const int n_slots = N_LAYERS * N_EXPERTS;
    for (int round = 0; round < 20; round++) {
        struct test_store ts;
        struct moeinf_loader *ld = NULL;
        struct moeinf_error err = {0};
        CHECK(store_open(l, n_slots, MOEINF_EXPERT_IO_CACHED, &ts, &err) == MOEINF_OK);
        struct moeinf_store *s = ts.s;
        if (!s) return;
        CHECK(moeinf_loader_init(s, 1 + round % 3, &ld, &err) == MOEINF_OK);
        for (int k = 0; ld && k < n_slots; k++)
            moeinf_loader_submit(ld, k, k / N_EXPERTS, k % N_EXPERTS, k % 2 == 0);
        moeinf_loader_free(ld);
        store_close(&ts);
    }
}

int main(void) {
    if (!write_file("loader")) {
        fprintf(stderr, "cannot write %s\n", path);
        return 1;
    }
    RUN(test_reads_land_in_their_slots);
    RUN(test_cancel_and_synchronous_wait);
    RUN(test_short_file_is_an_error);
    RUN(test_free_with_reads_queued);
    remove(path);
    return test_report();
}
