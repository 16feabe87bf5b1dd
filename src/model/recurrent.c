/*
 * recurrent.c - the Gated DeltaNet layers' recurrent state between evals, and its checkpoints.
 *
 * A KV cache forgets a suffix by moving n_past back; a recurrent state cannot: it is the sum
 * of every token it has seen. So the context keeps copies of the whole state at some
 * positions (the engine takes one after each prefill micro-batch), at most
 * MOEINF_FWD_CHECKPOINTS, the oldest replaced first. Going back to n_keep tokens restores the
 * latest copy at or before n_keep, and the tokens after it are evaluated again. Going back
 * forgets the copies after n_keep, so within the history the context holds a copy's age
 * follows its position: the oldest is the lowest.
 */
#include <string.h>

#include "model/forward.h"
#include "model/fwd_state.h"

void moeinf_fwd_recurrent_clear(struct moeinf_fwd *f) {
    if (f->rs) memset(f->rs, 0, f->rs_floats * sizeof(float));
}

void moeinf_fwd_checkpoint(struct moeinf_fwd *f, int pos) {
    if (!f->rs) return;
    int slot = -1;
    for (int i = 0; i < MOEINF_FWD_CHECKPOINTS && slot < 0; i++) {
        if (f->ckpt_pos[i] == pos) slot = i;
    }
    for (int i = 0; i < MOEINF_FWD_CHECKPOINTS && slot < 0; i++) {
        if (f->ckpt_pos[i] < 0) slot = i;
    }
    if (slot < 0) { /* all full: the oldest goes, which is the one at the lowest position */
        slot = 0;
        for (int i = 1; i < MOEINF_FWD_CHECKPOINTS; i++) {
            if (f->ckpt_pos[i] < f->ckpt_pos[slot]) slot = i;
        }
    }
    memcpy(f->ckpt[slot], f->rs, f->rs_floats * sizeof(float));
    f->ckpt_pos[slot] = pos;
}

int moeinf_fwd_rewind(struct moeinf_fwd *f, int n_keep) {
    if (!f->rs) return n_keep;
    int best = -1;
    for (int i = 0; i < MOEINF_FWD_CHECKPOINTS; i++) {
        if (f->ckpt_pos[i] > n_keep) f->ckpt_pos[i] = -1; /* of a history now forgotten */
        if (f->ckpt_pos[i] > 0 && (best < 0 || f->ckpt_pos[i] > f->ckpt_pos[best])) best = i;
    }
    if (best < 0) return 0; /* the eval at position 0 clears the state */
    memcpy(f->rs, f->ckpt[best], f->rs_floats * sizeof(float));
    return f->ckpt_pos[best];
}
