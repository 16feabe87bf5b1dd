/*
 * recurrent.c - the state that moving n_past back cannot restore, and its checkpoints: the
 * Gated DeltaNet layers' recurrent state, and the windows of sliding-window attention layers.
 *
 * A KV cache forgets a suffix by moving n_past back; a recurrent state cannot: it is the sum
 * of every token it has seen. A sliding layer's ring (fwd_state.h) holds its last
 * n_swa - 1 + n_batch positions, so it can go back n_batch tokens in place, not further: the
 * rows of older positions were overwritten. So the context keeps copies of that state at some
 * positions (the engine takes one after each prefill micro-batch), at most
 * MOEINF_FWD_CHECKPOINTS per sequence, the oldest replaced first. Going back to n_keep tokens
 * restores the latest copy at or before n_keep, and the tokens after it are evaluated again. Going
 * back forgets the copies after n_keep, so within the history the context holds a copy's age
 * follows its position: the oldest is the lowest.
 */
#include <string.h>

#include "model/forward.h"
#include "model/fwd_state.h"

void moeinf_fwd_recurrent_clear(struct moeinf_fwd *f, int seq) {
    float *rs = f->seqs[seq].rs;
    if (rs) memset(rs, 0, f->rs_floats * sizeof(float));
}

/* Copies each sliding layer's rows of positions pos - n_swa + 1 .. pos - 1 between sequence
 * sq's ring and buf (to_ring: from buf), K then V, oldest first; positions below 0 are skipped
 * in both. */
static void copy_windows(struct moeinf_fwd *f, const struct moeinf_fwd_seq *sq, uint8_t *buf,
                         int pos, bool to_ring) {
    const struct moeinf_hparams *hp = &f->llm->hp;
    const int w = hp->n_swa - 1;
    const size_t row = (size_t)f->n_kv * f->kv_elem;
    for (int il = 0; il < hp->n_layer; il++) {
        const struct moeinf_layer *lw = &f->llm->layers[il];
        if (!lw->swa || lw->attn == MOEINF_ATTN_DELTANET) continue;
        uint8_t *caches[2] = {sq->k_cache, sq->v_cache};
        for (int c = 0; c < 2; c++) {
            for (int i = 0; i < w; i++) {
                int t = pos - w + i;
                uint8_t *saved = buf + (size_t)i * row;
                if (t >= 0) {
                    uint8_t *ring =
                        caches[c] + f->kv_off[il] * f->kv_elem + (size_t)(t % f->kv_rows[il]) * row;
                    if (to_ring) {
                        memcpy(ring, saved, row);
                    } else {
                        memcpy(saved, ring, row);
                    }
                }
            }
            buf += (size_t)w * row;
        }
    }
}

void moeinf_fwd_checkpoint(struct moeinf_fwd *f, int seq, int pos) {
    if (f->ckpt_bytes == 0) return;
    struct moeinf_fwd_seq *sq = &f->seqs[seq];
    int slot = -1;
    for (int i = 0; i < MOEINF_FWD_CHECKPOINTS && slot < 0; i++) {
        if (sq->ckpt_pos[i] == pos) slot = i;
    }
    for (int i = 0; i < MOEINF_FWD_CHECKPOINTS && slot < 0; i++) {
        if (sq->ckpt_pos[i] < 0) slot = i;
    }
    if (slot < 0) { /* all full: the oldest goes, which is the one at the lowest position */
        slot = 0;
        for (int i = 1; i < MOEINF_FWD_CHECKPOINTS; i++) {
            if (sq->ckpt_pos[i] < sq->ckpt_pos[slot]) slot = i;
        }
    }
    const size_t rs_bytes = f->rs_floats * sizeof(float);
    if (sq->rs) memcpy(sq->ckpt[slot], sq->rs, rs_bytes);
    if (f->n_swa_layers > 0) copy_windows(f, sq, sq->ckpt[slot] + rs_bytes, pos, false);
    sq->ckpt_pos[slot] = pos;
}

int moeinf_fwd_rewind(struct moeinf_fwd *f, int seq, int n_keep) {
    if (f->ckpt_bytes == 0) return n_keep;
    struct moeinf_fwd_seq *sq = &f->seqs[seq];
    int best = -1;
    for (int i = 0; i < MOEINF_FWD_CHECKPOINTS; i++) {
        if (sq->ckpt_pos[i] > n_keep) sq->ckpt_pos[i] = -1; /* of a history now forgotten */
        if (sq->ckpt_pos[i] > 0 && (best < 0 || sq->ckpt_pos[i] > sq->ckpt_pos[best])) best = i;
    }
    /* windows alone, back by at most n_batch: the ring still holds them (fwd_state.h) */
    if (!sq->rs && n_keep <= sq->pos && sq->pos - n_keep <= f->p.n_batch) return n_keep;
    if (best < 0) return 0; /* the eval at position 0 clears the state */
    const size_t rs_bytes = f->rs_floats * sizeof(float);
    if (sq->rs) memcpy(sq->rs, sq->ckpt[best], rs_bytes);
    if (f->n_swa_layers > 0) {
        copy_windows(f, sq, sq->ckpt[best] + rs_bytes, sq->ckpt_pos[best], true);
    }
    sq->pos = sq->ckpt_pos[best];
    return sq->ckpt_pos[best];
}
