/*
 * fast_tier.h - where the expert cache keeps the experts it holds and where it computes them:
 * the memory of its slots, into which the slow tier (store.h) reads each expert's bytes, and
 * the SwiGLU FFN of a wave of experts from their slots (compute/expert_ffn.h).
 *
 * The cache, the policies and the step schedule (src/experts/) never see slot memory: they
 * deal in expert ids and slot numbers. So a tier in another memory (GPU memory, planned) is
 * one more table of these operations, chosen in offload/tier.c, and the cache, policy and step
 * code do not change. What it must add: the store reads with pread straight into the address
 * `slot` returns, so that address must be CPU-writable; a device tier whose slots are not
 * (plain device memory) needs a staging buffer per read in flight and an upload when the read
 * completes, an operation this table does not have yet. Today there is one tier, the RAM tier
 * (fast_tier_ram.c): slots in anonymous memory, on huge pages where the kernel allows,
 * computed by the CPU kernels.
 *
 * Threads: `slot` is called from the I/O threads (reads of distinct slots, or of distinct
 * parts of one slot, run at once) and must only compute an address; `compute` runs on the
 * forward pass's thread, with its pool, once the wave's reads are done (offload/loader.h).
 */
#ifndef MOEINF_OFFLOAD_FAST_TIER_H
#define MOEINF_OFFLOAD_FAST_TIER_H

#include <stdint.h>

#include "compute/expert_ffn.h"
#include "compute/pool.h"
#include "moeinf.h"
#include "quant/quant.h"

struct moeinf_fast_tier_ops {
    const char *name;
    /* n_slots slots of slot_bytes each (a multiple of 4096), each 4096-byte aligned (what
     * O_DIRECT reads need). MOEINF_ERR_NOMEM naming the size when they do not fit. */
    enum moeinf_status (*init)(uint64_t slot_bytes, int n_slots, void **state,
                               struct moeinf_error *err);
    void (*free)(void *state);
    /* The first byte of `slot`: reads write the expert's parts there, and the parts handed to
     * compute point there. */
    uint8_t *(*slot)(void *state, int slot);
    /* Computes a wave of one layer's experts whose parts (ffn->parts) point into slots. */
    void (*compute)(void *state, const struct moeinf_expert_ffn *ffn, struct moeinf_pool *pool,
                    const struct moeinf_kernels *kern);
};

/* The RAM tier (fast_tier_ram.c). */
extern const struct moeinf_fast_tier_ops moeinf_fast_tier_ram;

struct moeinf_fast_tier {
    const struct moeinf_fast_tier_ops *ops;
    void *state;
    uint64_t slot_bytes;
    int n_slots;
};

enum moeinf_status moeinf_fast_tier_init(const struct moeinf_fast_tier_ops *ops,
                                         uint64_t slot_bytes, int n_slots,
                                         struct moeinf_fast_tier **out, struct moeinf_error *err);
void moeinf_fast_tier_free(struct moeinf_fast_tier *ft);

static inline uint8_t *moeinf_fast_tier_slot(const struct moeinf_fast_tier *ft, int slot) {
    return ft->ops->slot(ft->state, slot);
}

static inline void moeinf_fast_tier_compute(const struct moeinf_fast_tier *ft,
                                            const struct moeinf_expert_ffn *ffn,
                                            struct moeinf_pool *pool,
                                            const struct moeinf_kernels *kern) {
    ft->ops->compute(ft->state, ffn, pool, kern);
}

#endif
