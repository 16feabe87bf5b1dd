/* fast_tier_ram.c - the RAM fast tier: slots in one block of anonymous memory (huge pages where
 * the kernel allows: fewer TLB misses while the kernels stream an expert), computed by the CPU
 * kernels (see fast_tier.h). */
#include <stdlib.h>

#include "base/file.h"
#include "base/status.h"
#include "offload/fast_tier.h"

struct ram {
    uint8_t *slots; /* n_slots * slot_bytes, moeinf_huge_alloc's (2 MiB aligned) */
    size_t bytes;
    uint64_t slot_bytes;
};

static enum moeinf_status ram_init(uint64_t slot_bytes, int n_slots, void **state,
                                   struct moeinf_error *err) {
    if (n_slots < 1 || slot_bytes > SIZE_MAX / (size_t)n_slots) {
        return moeinf_fail(err, MOEINF_ERR_NOMEM,
                           "%d expert slots of %llu bytes do not fit in "
                           "memory",
                           n_slots, (unsigned long long)slot_bytes);
    }
    struct ram *r = calloc(1, sizeof *r);
    if (!r) return moeinf_fail(err, MOEINF_ERR_NOMEM, "out of memory for the expert cache");
    r->slot_bytes = slot_bytes;
    r->bytes = (size_t)slot_bytes * (size_t)n_slots;
    r->slots = moeinf_huge_alloc(r->bytes);
    if (!r->slots) {
        free(r);
        return moeinf_fail(err, MOEINF_ERR_NOMEM, "out of memory for %d expert slots (%llu MiB)",
                           n_slots, (unsigned long long)((slot_bytes * (uint64_t)n_slots) >> 20));
    }
    *state = r;
    return MOEINF_OK;
}

static void ram_free(void *state) {
    struct ram *r = state;
    if (!r) return;
    moeinf_huge_free(r->slots, r->bytes);
    free(r);
}

static uint8_t *ram_slot(void *state, int slot) {
    struct ram *r = state;
    return r->slots + (size_t)slot * (size_t)r->slot_bytes;
}

static void ram_compute(void *state, const struct moeinf_expert_ffn *ffn, struct moeinf_pool *pool,
                        const struct moeinf_kernels *kern) {
    (void)state; /* the parts point into this tier's slots, which the CPU reads directly */
    moeinf_expert_ffn_run(pool, kern, ffn);
}

const struct moeinf_fast_tier_ops moeinf_fast_tier_ram = {
    .name = "ram",
    .init = ram_init,
    .free = ram_free,
    .slot = ram_slot,
    .compute = ram_compute,
};
