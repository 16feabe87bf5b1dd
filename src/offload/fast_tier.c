/* fast_tier.c - making and freeing a fast tier through its table (see fast_tier.h). */
#include "offload/fast_tier.h"

#include <stdlib.h>

#include "base/status.h"

enum moeinf_status moeinf_fast_tier_init(const struct moeinf_fast_tier_ops *ops,
                                         uint64_t slot_bytes, int n_slots,
                                         struct moeinf_fast_tier **out, struct moeinf_error *err) {
    struct moeinf_fast_tier *ft = calloc(1, sizeof *ft);
    if (!ft) return moeinf_fail(err, MOEINF_ERR_NOMEM, "out of memory for the expert cache");
    ft->ops = ops;
    ft->slot_bytes = slot_bytes;
    ft->n_slots = n_slots;
    enum moeinf_status st = ops->init(slot_bytes, n_slots, &ft->state, err);
    if (st != MOEINF_OK) {
        free(ft);
        return st;
    }
    *out = ft;
    return MOEINF_OK;
}

void moeinf_fast_tier_free(struct moeinf_fast_tier *ft) {
    if (!ft) return;
    ft->ops->free(ft->state);
    free(ft);
}
