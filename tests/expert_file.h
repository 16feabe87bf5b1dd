/*
 * expert_file.h - a synthetic file of routed experts for the tests of the slow tier
 * (test_loader.c, test_tier_wave.c): N_LAYERS x N_EXPERTS experts whose three parts have odd
 * sizes at offsets that are not 4 KiB aligned, over a file whose every byte is a known
 * function of its offset, so that a slot can be checked byte for byte.
 */
#ifndef MOEINF_TESTS_EXPERT_FILE_H
#define MOEINF_TESTS_EXPERT_FILE_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <unistd.h>

#include "offload/store.h"
#include "test.h"

#define N_LAYERS     2
#define N_EXPERTS    8
#define FILE_SIZE    (3u << 20)
#define EXPERT_BYTES (36000 + 36000 + 41234)

static char path[512];

static uint8_t byte_at(uint64_t i) {
    return (uint8_t)((i * 2654435761u) >> 13);
}

/* Parts of odd sizes at offsets that are not 4 KiB aligned (1.8 MB of the file's 3 MiB). */
static void layout(struct moeinf_store_layer *l) {
    const uint64_t bytes[3] = {36000, 36000, 41234};
    uint64_t off = 1000;
    for (int il = 0; il < N_LAYERS; il++) {
        for (int p = 0; p < 3; p++) {
            l[il].off[p] = off;
            l[il].stride[p] = bytes[p] + 32;
            l[il].bytes[p] = bytes[p];
            off += (uint64_t)N_EXPERTS * l[il].stride[p];
        }
    }
}

/* (Re)writes the file at `path`, named after `stem` and the process. */
static bool write_file(const char *stem) {
    char name[64];
    snprintf(name, sizeof name, "%s-%d.bin", stem, (int)getpid());
    test_tmp_path(name, path, sizeof path);
    FILE *f = fopen(path, "wb");
    if (!f) return false;
    for (uint64_t i = 0; i < FILE_SIZE; i++)
        fputc(byte_at(i), f);
    return fclose(f) == 0;
}

/* parts[0..3) hold expert e of layer il, byte for byte. */
static bool parts_hold(const uint8_t *const parts[3], const struct moeinf_store_layer *l, int il,
                       int e) {
    for (int p = 0; p < 3; p++) {
        uint64_t off = l[il].off[p] + (uint64_t)e * l[il].stride[p];
        for (uint64_t i = 0; i < l[il].bytes[p]; i++) {
            if (parts[p][i] != byte_at(off + i)) return false;
        }
    }
    return true;
}

/* A store over the file at `path`, reading into n_slots slots of a RAM fast tier, made
 * together and freed together (store_close). */
struct test_store {
    struct moeinf_fast_tier *fast;
    struct moeinf_store *s;
};

static inline enum moeinf_status store_open(const struct moeinf_store_layer *l, int n_slots,
                                            enum moeinf_expert_io io, struct test_store *ts,
                                            struct moeinf_error *err) {
    memset(ts, 0, sizeof *ts);
    uint64_t slot_bytes = moeinf_store_slot_bytes_for(l, N_LAYERS, N_EXPERTS);
    enum moeinf_status st =
        moeinf_fast_tier_init(&moeinf_fast_tier_ram, slot_bytes, n_slots, &ts->fast, err);
    if (st == MOEINF_OK) {
        st = moeinf_store_open(path, l, N_LAYERS, N_EXPERTS, ts->fast, io, &ts->s, err);
    }
    if (st != MOEINF_OK) {
        moeinf_fast_tier_free(ts->fast);
        ts->fast = NULL;
    }
    return st;
}

static inline void store_close(struct test_store *ts) {
    moeinf_store_free(ts->s);
    moeinf_fast_tier_free(ts->fast);
}

#endif
