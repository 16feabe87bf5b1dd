/*
 * forward.h - the forward pass of every architecture (model/arch.h) over a micro-batch of
 * tokens, with the KV cache it appends to.
 *
 * One micro-batch of m tokens at positions n_past .. n_past + m - 1 runs layer by layer, in
 * the variants the architecture chose (model.h: attention and FFN kind per layer, q/k norm,
 * RoPE, router):
 *   x += Wo * attn(rope(Wq * norm(x)), cache)                       (K, V appended to cache)
 *   x += sum over the token's top-k experts e, in router-rank order, of
 *        w_e * down_e(silu(gate_e * norm(x)) * up_e * norm(x))      (MoE layers; plus the
 *        shared expert where there is one)   or   down(silu(gate * norm(x)) * up * norm(x))
 * Prefill groups the batch's tokens by expert, so each selected expert's weights are read
 * once per micro-batch for all tokens routed to it.
 */
#ifndef MOEINF_FORWARD_H
#define MOEINF_FORWARD_H

#include <stdbool.h>
#include <stdint.h>

#include "compute/pool.h"
#include "model/model.h"
#include "moeinf.h"
#include "offload/tier.h"

struct moeinf_fwd;

struct moeinf_fwd_params {
    int n_ctx;   /* positions of all sequences together */
    int n_seq;   /* sequences, each with n_ctx / n_seq positions (0: 1) */
    int n_batch; /* largest micro-batch, all sequences together */
    bool kv_f16;
    struct moeinf_pool *pool; /* borrowed */
    const struct moeinf_kernels *kern;
    struct moeinf_tier *tier;    /* borrowed; routed experts come through this expert cache
                                    instead of the weights when not NULL (offload/tier.h) */
    const int32_t *route_replay; /* borrowed; NULL, or recorded routing that replaces the
                                    router's choice (moeinf_fwd_set_route_replay) */
};

enum moeinf_status moeinf_fwd_init(const struct moeinf_llm *llm,
                                   const struct moeinf_fwd_params *params, struct moeinf_fwd **out,
                                   struct moeinf_error *err);
void moeinf_fwd_free(struct moeinf_fwd *f);

/* Positions of each sequence (n_ctx / n_seq). */
int moeinf_fwd_n_ctx_seq(const struct moeinf_fwd *f);

/* Rows [row0, row0 + m) of an eval belong to sequence seq, at its positions n_past .. */
struct moeinf_fwd_run {
    int seq;
    int row0;
    int m;
    int n_past;
};

/*
 * Evaluates m <= n_batch tokens, in runs that cover rows 0 .. m - 1 in order, each of one
 * sequence (no sequence twice; the caller checks every window). A row's result depends on its
 * own sequence only: every kernel computes a row the same way whatever the other rows.
 * logits: NULL, or n_logit_rows rows, row i the logits of eval row logit_rows[i]. Fails only
 * with the expert cache's read errors (the tier's iteration is the caller's to begin and end).
 */
enum moeinf_status moeinf_fwd_eval_batch(struct moeinf_fwd *f, const int32_t *ids, int m,
                                         const struct moeinf_fwd_run *runs, int n_runs,
                                         const int32_t *logit_rows, int n_logit_rows, float *logits,
                                         struct moeinf_error *err);
/* Sequence 0 alone: m tokens at positions n_past ..; logits NULL, or m rows (all) or one (the
 * last token's). */
enum moeinf_status moeinf_fwd_eval(struct moeinf_fwd *f, const int32_t *ids, int m, int n_past,
                                   float *logits, bool all_logits, struct moeinf_error *err);

/*
 * The state that moving n_past back cannot restore (model/recurrent.c), per sequence: the
 * recurrent state
 * of Gated DeltaNet layers, which always holds the state after the tokens evaluated so far
 * (an eval at position 0 clears it first), and the sliding-window layers' rings, which hold
 * only their last n_swa - 1 + n_batch positions.
 *   moeinf_fwd_recurrent_clear  zeroes the recurrent state (the eval at position 0 calls it)
 *   moeinf_fwd_checkpoint    keeps a copy of that state as the one after `pos` tokens
 *   moeinf_fwd_rewind        forgets the copies after n_keep tokens; a model whose only such
 *                            state is windows goes back in place by up to n_batch tokens;
 *                            otherwise it restores the latest copy at or before n_keep and
 *                            returns its position (0: none, and the eval at 0 clears the
 *                            state), from where the caller evaluates the tokens again. A model
 *                            with neither returns n_keep and the functions do nothing.
 */
void moeinf_fwd_recurrent_clear(struct moeinf_fwd *f, int seq);
void moeinf_fwd_checkpoint(struct moeinf_fwd *f, int seq, int pos);
int moeinf_fwd_rewind(struct moeinf_fwd *f, int seq, int n_keep);

/* Bytes the pass allocated (KV cache, recurrent state and its checkpoints, scratch). */
uint64_t moeinf_fwd_bytes(const struct moeinf_fwd *f);
/* Routes experts through `tier` from now on (NULL: the weights themselves). */
void moeinf_fwd_set_tier(struct moeinf_fwd *f, struct moeinf_tier *tier);
/* Gate lookahead (with a tier): during a decode token, MoE layer `layer` (-1: every layer)
 * applies the routers of the next `depth` layers (>= 0; 0, the default, is off) to its FFN
 * input and hints their top-k experts to the tier, which prefetches them (offload/tier.h). Set
 * per layer, so that the depth can follow what each layer's predictions are worth. */
void moeinf_fwd_set_lookahead(struct moeinf_fwd *f, int layer, int depth);

/*
 * Routing replay (benchmarks on recorded routing; internal). From the next eval on, until
 * set to NULL, token j of the micro-batch uses at layer il the experts
 *     experts[(j * n_layer + il) * n_expert_used + r],  r = 0 .. n_expert_used - 1
 * (token-major, as one line of a moe-trace file), in that order, instead of the router's
 * top-k. The caller checks the ids (distinct per layer, in [0, n_expert)). Everything else
 * is computed as usual: the router still runs, and its probabilities of the replayed experts,
 * normalised as the architecture normalises its own choice, are the mixing weights.
 */
void moeinf_fwd_set_route_replay(struct moeinf_fwd *f, const int32_t *experts);

/* Expert routing of the last eval: for layer il and token j, the selected experts in rank
 * order (n_expert_used of them) and their mixing weights. NULL for dense models. */
const int32_t *moeinf_fwd_routing(const struct moeinf_fwd *f, int il, int j);
const float *moeinf_fwd_routing_weights(const struct moeinf_fwd *f, int il, int j);

/*
 * Non-finite values (weights holding NaN or infinity, or activations that overflow): the
 * layer loop calls moeinf_fwd_note_finite after each layer, one pass over the residual
 * stream (small next to the layer's matrix products) that remembers the first layer whose
 * output is not finite. moeinf_fwd_check_finite, after an eval, fails with MOEINF_ERR_FORMAT
 * naming that layer, or the output norm and lm_head when only the logits rows (n_rows rows
 * at logits, which may be NULL) hold NaN or infinity.
 */
void moeinf_fwd_note_finite(struct moeinf_fwd *f, int il, int m);
enum moeinf_status moeinf_fwd_check_finite(const struct moeinf_fwd *f, const float *logits,
                                           int n_rows, struct moeinf_error *err);

#endif
