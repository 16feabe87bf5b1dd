/* engine_batch.c - moeinf_decode_batch: tokens of several sequences in one forward pass. The
 * entries are checked, grouped into one run of rows per sequence (in the order the sequences
 * first appear; a row's result does not depend on where it sits), evaluated as one iteration
 * of the expert cache, and appended to their sequences only when the whole pass succeeded. */
#include <string.h>

#include "base/status.h"
#include "engine/engine.h"

/* Checks every entry against its sequence; counts each sequence's entries into count. */
static enum moeinf_status check_entries(struct moeinf_context *ctx, const struct moeinf_batch *b,
                                        int32_t *count, struct moeinf_error *err) {
    const int n_vocab = ctx->model->llm->hp.n_vocab;
    const int n_seq = ctx->params.n_seq;
    for (int q = 0; q < n_seq; q++)
        count[q] = 0;
    for (int i = 0; i < b->n; i++) {
        const int q = b->seq[i];
        if (q < 0 || q >= n_seq) {
            return moeinf_fail(err, MOEINF_ERR_ARG, "batch entry %d: sequence %d is not in [0, %d)",
                               i, q, n_seq);
        }
        if (b->token[i] < 0 || b->token[i] >= n_vocab) {
            return moeinf_fail(err, MOEINF_ERR_ARG,
                               "batch entry %d: token id %d is outside the vocabulary [0, %d)", i,
                               b->token[i], n_vocab);
        }
        const int next = ctx->seq_past[q] + count[q];
        if (b->pos[i] != next) {
            return moeinf_fail(err, MOEINF_ERR_ARG,
                               "batch entry %d: position %d of sequence %d is not its next (%d)", i,
                               b->pos[i], q, next);
        }
        count[q]++;
    }
    const int n_ctx = moeinf_fwd_n_ctx_seq(ctx->fwd);
    for (int q = 0; q < n_seq; q++) {
        if (count[q] > n_ctx - ctx->seq_past[q]) {
            return moeinf_fail(err, MOEINF_ERR_CONTEXT,
                               "context full: sequence %d holds %d tokens + %d new, more than its "
                               "%d positions",
                               q, ctx->seq_past[q], count[q], n_ctx);
        }
    }
    return MOEINF_OK;
}

enum moeinf_status moeinf_decode_batch(struct moeinf_context *ctx, const struct moeinf_batch *b,
                                       enum moeinf_phase phase, float *logits,
                                       struct moeinf_error *err) {
    if (!b || b->n <= 0 || !b->token || !b->pos || !b->seq) {
        return moeinf_fail(err, MOEINF_ERR_ARG, "a batch needs at least one entry");
    }
    if (b->n > ctx->params.n_batch) {
        return moeinf_fail(err, MOEINF_ERR_ARG, "a batch of %d entries exceeds n_batch %d", b->n,
                           ctx->params.n_batch);
    }
    if (phase != MOEINF_PHASE_PREFILL && phase != MOEINF_PHASE_DECODE) {
        return moeinf_fail(err, MOEINF_ERR_ARG, "a batch's phase is prefill or decode");
    }
    if (ctx->record || ctx->route_replay) {
        ctx->route_replay = NULL;
        return moeinf_fail(err, MOEINF_ERR_ARG,
                           "a routing record or replay follows moeinf_decode only, not a batch");
    }
    const int n = b->n;
    const int n_batch = ctx->params.n_batch;
    const int n_seq = ctx->params.n_seq;
    int32_t *ids = ctx->batch_buf;         /* [n_batch] tokens in row order */
    int32_t *logit_rows = ids + n_batch;   /* [n_batch] rows whose logits are wanted */
    int32_t *count = logit_rows + n_batch; /* [n_seq] a sequence's entries */
    int32_t *run_of = count + n_seq;       /* [n_seq] its run, -1: none */
    int32_t *next_row = run_of + n_seq;    /* [n_seq] a run's next row */
    enum moeinf_status st = check_entries(ctx, b, count, err);
    if (st != MOEINF_OK) return st;
    for (int q = 0; q < n_seq; q++)
        run_of[q] = -1;
    /* one run per sequence, in the order of first appearance; rows follow runs */
    struct moeinf_fwd_run *runs = ctx->runs;
    int n_runs = 0;
    int row = 0;
    for (int i = 0; i < n; i++) {
        const int q = b->seq[i];
        if (run_of[q] >= 0) continue;
        run_of[q] = n_runs;
        runs[n_runs++] = (struct moeinf_fwd_run){
            .seq = q, .row0 = row, .m = count[q], .n_past = ctx->seq_past[q]};
        row += count[q];
    }
    /* where each run's next row goes; entries keep their order within their sequence */
    int n_logits = 0;
    for (int r = 0; r < n_runs; r++)
        next_row[r] = runs[r].row0;
    for (int i = 0; i < n; i++) {
        const int at = next_row[run_of[b->seq[i]]]++;
        ids[at] = b->token[i];
        if (b->logits && b->logits[i]) logit_rows[n_logits++] = at;
    }
    if (ctx->tier && !moeinf_tier_in_request(ctx->tier)) moeinf_tier_request_begin(ctx->tier);
    if (ctx->tier) moeinf_tier_iteration_begin(ctx->tier, phase, n);
    st = moeinf_fwd_eval_batch(ctx->fwd, ids, n, runs, n_runs, logit_rows, n_logits, logits, err);
    if (ctx->tier) moeinf_tier_iteration_end(ctx->tier);
    if (st == MOEINF_OK) st = moeinf_fwd_check_finite(ctx->fwd, logits, logits ? n_logits : 0, err);
    for (int r = 0; r < n_runs; r++) {
        const int q = runs[r].seq;
        if (st != MOEINF_OK) { /* nothing appended; a recurrent state goes back */
            ctx->seq_past[q] = moeinf_fwd_rewind(ctx->fwd, q, ctx->seq_past[q]);
            continue;
        }
        ctx->seq_past[q] += runs[r].m;
        if (runs[r].m > 1) moeinf_fwd_checkpoint(ctx->fwd, q, ctx->seq_past[q]);
    }
    return st;
}
