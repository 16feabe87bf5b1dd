/*
 * forward.c - the layer loop that every architecture shares (see forward.h), the KV cache and
 * the pass's buffers. Per layer: the attention block of the layer's kind (layer_attn.c), the
 * FFN norm, then the layer's FFN (layer_ffn.c dense, layer_moe.c routed experts).
 */
#include "model/forward.h"

#include <assert.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/status.h"
#include "compute/attention.h"
#include "compute/ops.h"
#include "model/fwd_state.h"

int moeinf_fwd_n_ctx_seq(const struct moeinf_fwd *f) {
    return f->n_ctx_seq;
}

enum moeinf_status moeinf_fwd_eval_batch(struct moeinf_fwd *f, const int32_t *ids, int m,
                                         const struct moeinf_fwd_run *runs, int n_runs,
                                         const int32_t *logit_rows, int n_logit_rows, float *logits,
                                         struct moeinf_error *err) {
    const struct moeinf_llm *llm = f->llm;
    const struct moeinf_hparams *hp = &llm->hp;
    const int n_embd = hp->n_embd;
    assert(m > 0 && m <= f->p.n_batch && n_runs > 0);
    moeinf_to_float_fn embed = f->p.kern->to_float[llm->tok_embd.type];
    for (int j = 0; j < m; j++) {
        embed(moeinf_weight_row(&llm->tok_embd, 0, ids[j]), f->x + (size_t)j * n_embd, n_embd);
    }
    f->runs = runs;
    f->n_runs = n_runs;
    for (int r = 0; r < n_runs; r++) {
        assert(runs[r].n_past + runs[r].m <= f->n_ctx_seq);
        if (runs[r].n_past == 0) moeinf_fwd_recurrent_clear(f, runs[r].seq);
        /* before the layers: a failed eval may have stored some of its rows */
        f->seqs[runs[r].seq].pos = runs[r].n_past + runs[r].m;
    }
    for (int il = 0; il < hp->n_layer; il++) {
        const struct moeinf_layer *lw = &llm->layers[il];
        switch (lw->attn) {
        case MOEINF_ATTN_FULL:
        case MOEINF_ATTN_GATED:
            moeinf_fwd_attention(f, il, m);
            break;
        case MOEINF_ATTN_DELTANET:
            moeinf_fwd_deltanet(f, il, m);
            break;
        case MOEINF_ATTN_MLA:
            moeinf_fwd_mla(f, il, m);
            break;
        }
        for (int j = 0; j < m; j++) {
            moeinf_rmsnorm(f->xb + (size_t)j * n_embd, f->x + (size_t)j * n_embd, lw->ffn_norm,
                           n_embd, hp->rms_eps);
        }
        moeinf_fwd_acts_invalidate(f);
        switch (lw->ffn) {
        case MOEINF_FFN_DENSE:
            moeinf_fwd_dense_ffn(f, il, m);
            break;
        case MOEINF_FFN_MOE: {
            enum moeinf_status st = moeinf_fwd_moe(f, il, m, err);
            if (st != MOEINF_OK) return st;
            break;
        }
        }
        moeinf_fwd_note_finite(f, il, m);
    }
    if (!logits || n_logit_rows == 0) return MOEINF_OK;
    /* row i of xb is wanted row logit_rows[i] of x normed: the lm_head's input in one block */
    for (int i = 0; i < n_logit_rows; i++) {
        moeinf_rmsnorm(f->xb + (size_t)i * n_embd, f->x + (size_t)logit_rows[i] * n_embd,
                       llm->output_norm, n_embd, hp->rms_eps);
    }
    moeinf_fwd_acts_invalidate(f);
    moeinf_fwd_matmul(f, &llm->output, f->xb, n_logit_rows, logits, (size_t)hp->n_vocab);
    return MOEINF_OK;
}

enum moeinf_status moeinf_fwd_eval(struct moeinf_fwd *f, const int32_t *ids, int m, int n_past,
                                   float *logits, bool all_logits, struct moeinf_error *err) {
    const struct moeinf_fwd_run run = {.seq = 0, .row0 = 0, .m = m, .n_past = n_past};
    const int32_t *rows = all_logits ? f->row_ids : f->row_ids + m - 1;
    return moeinf_fwd_eval_batch(f, ids, m, &run, 1, rows, all_logits ? m : 1, logits, err);
}

uint64_t moeinf_fwd_bytes(const struct moeinf_fwd *f) {
    return f->bytes;
}

void moeinf_fwd_set_tier(struct moeinf_fwd *f, struct moeinf_tier *tier) {
    f->p.tier = tier;
}

void moeinf_fwd_set_lookahead(struct moeinf_fwd *f, int layer, int depth) {
    for (int il = 0; il < f->llm->hp.n_layer; il++) {
        if (layer < 0 || layer == il) f->lookahead_depth[il] = depth;
    }
}

void moeinf_fwd_set_route_replay(struct moeinf_fwd *f, const int32_t *experts) {
    f->p.route_replay = experts;
}

const int32_t *moeinf_fwd_routing(const struct moeinf_fwd *f, int il, int j) {
    if (!f->sel) return NULL;
    return f->sel + ((size_t)il * f->p.n_batch + j) * f->llm->hp.n_expert_used;
}

const float *moeinf_fwd_routing_weights(const struct moeinf_fwd *f, int il, int j) {
    if (!f->sel_w) return NULL;
    return f->sel_w + ((size_t)il * f->p.n_batch + j) * f->llm->hp.n_expert_used;
}

/* Rows of each layer's KV cache in one sequence's part (fwd_state.h) and where they begin;
 * returns the values of all layers. Sliding-window layers keep a ring of n_swa - 1 + n_batch rows:
 * a micro-batch of m <= n_batch tokens stores its rows before attending, so its first query still
 * finds the n_swa - 1 positions before it. */
static size_t kv_layout(struct moeinf_fwd *f) {
    const struct moeinf_hparams *hp = &f->llm->hp;
    size_t off = 0;
    f->n_swa_layers = 0;
    for (int il = 0; il < hp->n_layer; il++) {
        const struct moeinf_layer *lw = &f->llm->layers[il];
        int rows = f->n_ctx_seq;
        if (lw->attn == MOEINF_ATTN_DELTANET) {
            rows = 0;
        } else if (lw->swa && hp->n_swa > 0) {
            int ring = hp->n_swa - 1 + f->p.n_batch;
            if (ring < rows) rows = ring;
            f->n_swa_layers++;
        }
        f->kv_rows[il] = rows;
        f->kv_off[il] = off;
        off += (size_t)rows * (size_t)f->n_kv;
    }
    return off;
}

static void *alloc_array(struct moeinf_fwd *f, size_t n, size_t size, bool *failed) {
    if (n == 0) n = 1;
    void *p = calloc(n, size);
    if (!p) *failed = true;
    f->bytes += n * size;
    return p;
}

/* Each vec_dot_type's activation buffer, sized for the widest conversion it takes: n_batch
 * rows of a weight's input, or, for the routed experts (whose down projections convert one
 * row per (token, rank) slot), slots rows; widths in whole 256-blocks (Q8_K's). */
static void alloc_acts(struct moeinf_fwd *f, size_t slots, bool *failed) {
    const struct moeinf_llm *llm = f->llm;
    size_t need[MOEINF_TYPE_COUNT] = {0};
    for (int i = -1; i < llm->n_bound; i++) {
        /* -1: the lm_head, unbound when tied; token_embd's rows are converted to float, not
         * multiplied */
        const struct moeinf_weight *w = i < 0 ? &llm->output : llm->bound[i].w;
        if (!w || w == &llm->tok_embd) continue;
        const enum moeinf_type vt = moeinf_type_cpu_get(w->type)->vec_dot_type;
        const size_t rows = i >= 0 && llm->bound[i].expert ? slots : (size_t)f->p.n_batch;
        const size_t bytes = rows * moeinf_row_bytes(vt, (w->n_in + 255) / 256 * 256);
        if (bytes > need[vt]) need[vt] = bytes;
    }
    for (int t = 0; t < MOEINF_TYPE_COUNT; t++) {
        if (need[t] == 0) continue;
        f->acts[t].buf = malloc(need[t]);
        f->bytes += need[t];
        if (!f->acts[t].buf) *failed = true;
    }
}

/* The Gated DeltaNet layers' buffers, their recurrent state and its checkpoints. */
static void alloc_recurrent(struct moeinf_fwd *f, bool *failed) {
    const struct moeinf_hparams *hp = &f->llm->hp;
    const size_t n_b = (size_t)f->p.n_batch;
    const size_t n_v = (size_t)hp->ssm_n_v_heads;
    f->ssm_mix = alloc_array(f, n_b * f->ssm_conv_dim, sizeof(float), failed);
    f->ssm_conv = alloc_array(f, n_b * f->ssm_conv_dim, sizeof(float), failed);
    f->ssm_z = alloc_array(f, n_b * f->ssm_value_dim, sizeof(float), failed);
    f->ssm_beta = alloc_array(f, n_b * n_v, sizeof(float), failed);
    f->ssm_g = alloc_array(f, n_b * n_v, sizeof(float), failed);
    bool legacy = false;
    bool fused_ba = false;
    for (int il = 0; il < hp->n_layer; il++) {
        legacy |= f->llm->layers[il].ssm_in.data != NULL;
        fused_ba |= f->llm->layers[il].ssm_ba.data != NULL;
    }
    if (legacy) {
        f->ssm_proj = alloc_array(f, n_b * ((size_t)f->ssm_conv_dim + f->ssm_value_dim),
                                  sizeof(float), failed);
    }
    if (fused_ba) f->ssm_ba = alloc_array(f, n_b * 2 * n_v, sizeof(float), failed);
    f->ssm_o = alloc_array(f, n_b * f->ssm_value_dim, sizeof(float), failed);
    f->rs_conv_floats = (size_t)(hp->ssm_d_conv - 1) * f->ssm_conv_dim;
    f->rs_delta_floats = n_v * (size_t)hp->ssm_head_dim * hp->ssm_head_dim;
    f->rs_floats = (size_t)hp->n_recurrent * (f->rs_conv_floats + f->rs_delta_floats);
    f->rs_all = alloc_array(f, (size_t)f->n_seq * f->rs_floats, sizeof(float), failed);
}

/* The buffers of multi-head latent attention (layer_mla.c). */
static void alloc_mla(struct moeinf_fwd *f, int n_threads, bool *failed) {
    const struct moeinf_hparams *hp = &f->llm->hp;
    const size_t n_b = (size_t)f->p.n_batch;
    const size_t n_h = (size_t)hp->n_head;
    const int nope = hp->head_dim - hp->n_rot;
    /* F32 is the widest vec_dot_type: a row of the wider of nope and mla_kv floats */
    const size_t act_row = moeinf_row_bytes(MOEINF_TYPE_F32, nope > hp->mla_kv ? nope : hp->mla_kv);
    f->mla_qa = alloc_array(f, n_b * (size_t)hp->mla_q, sizeof(float), failed);
    f->mla_q = alloc_array(f, n_b * n_h * (size_t)f->n_kv, sizeof(float), failed);
    f->mla_lat = alloc_array(f, n_b * n_h * (size_t)hp->mla_kv, sizeof(float), failed);
    f->mla_act = alloc_array(f, n_b * n_h, act_row, failed);
    f->mla_row =
        alloc_array(f, (size_t)n_threads * ((size_t)hp->mla_kv + n_b), sizeof(float), failed);
}

/* The checkpoints of the state that moving n_past back cannot restore: the recurrent state
 * and the sliding layers' windows (recurrent.c). */
static void alloc_checkpoints(struct moeinf_fwd *f, bool *failed) {
    const struct moeinf_hparams *hp = &f->llm->hp;
    const int w = hp->n_swa > 1 ? hp->n_swa - 1 : 0;
    f->ckpt_bytes = f->rs_floats * sizeof(float) +
                    (size_t)f->n_swa_layers * 2 * (size_t)w * (size_t)f->n_kv * f->kv_elem;
    for (int s = 0; s < f->n_seq; s++) {
        for (int i = 0; i < MOEINF_FWD_CHECKPOINTS; i++) {
            f->seqs[s].ckpt_pos[i] = -1;
            if (f->ckpt_bytes > 0) f->seqs[s].ckpt[i] = alloc_array(f, f->ckpt_bytes, 1, failed);
        }
    }
}

/* The routed experts' buffers: routing, grouping by expert, waves of the expert cache. */
static void alloc_moe(struct moeinf_fwd *f, size_t slots, bool *failed) {
    const struct moeinf_hparams *hp = &f->llm->hp;
    const size_t n_b = (size_t)f->p.n_batch;
    f->eo = alloc_array(f, slots * hp->n_embd, sizeof(float), failed);
    f->router = alloc_array(f, n_b * hp->n_expert, sizeof(float), failed);
    f->lookahead = alloc_array(f, (size_t)hp->n_expert, sizeof(float), failed);
    f->route_scores = alloc_array(f, 2 * (size_t)hp->n_expert, sizeof(float), failed);
    f->lookahead_depth = alloc_array(f, (size_t)hp->n_layer, sizeof(int), failed);
    f->ex_in = alloc_array(f, slots, moeinf_row_bytes(MOEINF_TYPE_F32, hp->n_embd), failed);
    f->sel = alloc_array(f, (size_t)hp->n_layer * slots, sizeof(int32_t), failed);
    f->sel_w = alloc_array(f, (size_t)hp->n_layer * slots, sizeof(float), failed);
    f->slot = alloc_array(f, slots, sizeof(int), failed);
    f->expert_count = alloc_array(f, (size_t)hp->n_expert, sizeof(int), failed);
    f->expert_first = alloc_array(f, (size_t)hp->n_expert + 1, sizeof(int), failed);
    /* one job per expert and matrix, or per head of a latent attention layer */
    size_t n_jobs = 2 * (size_t)hp->n_expert;
    if ((size_t)hp->n_head > n_jobs) n_jobs = (size_t)hp->n_head;
    f->jobs = alloc_array(f, n_jobs, sizeof *f->jobs, failed);
    f->wave = alloc_array(f, (size_t)hp->n_expert, sizeof *f->wave, failed);
    f->wave_row0 = alloc_array(f, (size_t)hp->n_expert, sizeof *f->wave_row0, failed);
    f->wave_rows = alloc_array(f, (size_t)hp->n_expert, sizeof *f->wave_rows, failed);
    f->wave_index = alloc_array(f, (size_t)hp->n_expert, sizeof *f->wave_index, failed);
    f->wave_parts = alloc_array(f, (size_t)hp->n_expert, sizeof *f->wave_parts, failed);
    f->wave_bias = alloc_array(f, (size_t)hp->n_expert, sizeof *f->wave_bias, failed);
    f->wave_done = alloc_array(f, (size_t)hp->n_expert, 1, failed);
}

enum moeinf_status moeinf_fwd_init(const struct moeinf_llm *llm,
                                   const struct moeinf_fwd_params *params, struct moeinf_fwd **out,
                                   struct moeinf_error *err) {
    const struct moeinf_hparams *hp = &llm->hp;
    if (params->n_ctx < 1 || params->n_batch < 1) {
        return moeinf_fail(err, MOEINF_ERR_ARG, "context size and batch must be positive");
    }
    const int n_seq = params->n_seq > 0 ? params->n_seq : 1;
    if (params->n_ctx < n_seq) {
        return moeinf_fail(err, MOEINF_ERR_ARG, "a context of %d tokens cannot hold %d sequences",
                           params->n_ctx, n_seq);
    }
    struct moeinf_fwd *f = calloc(1, sizeof *f);
    if (!f) return moeinf_fail(err, MOEINF_ERR_NOMEM, "out of memory for the context");
    f->llm = llm;
    f->p = *params;
    f->n_seq = n_seq;
    f->n_ctx_seq = params->n_ctx / n_seq;
    if (f->p.n_batch > f->p.n_ctx) f->p.n_batch = f->p.n_ctx;
    const size_t n_b = (size_t)f->p.n_batch;
    const size_t n_c = (size_t)f->n_ctx_seq;
    const bool mla = hp->mla_kv > 0;
    /* a latent attention layer caches one row of latent and RoPE'd key per token, no V */
    f->n_kv = mla ? hp->mla_kv + hp->n_rot : hp->n_head_kv * hp->head_dim;
    f->n_q = hp->n_head * hp->head_dim;
    const int n_att = mla && hp->n_head * hp->mla_v > f->n_q ? hp->n_head * hp->mla_v : f->n_q;
    f->ssm_key_dim = hp->ssm_n_k_heads * hp->ssm_head_dim;
    f->ssm_value_dim = hp->ssm_n_v_heads * hp->ssm_head_dim;
    f->ssm_conv_dim = 2 * f->ssm_key_dim + f->ssm_value_dim;
    f->kv_elem = params->kv_f16 ? 2 : 4;
    const int n_used = hp->n_expert > 0 ? hp->n_expert_used : 1;
    const size_t slots = n_b * (size_t)n_used;
    bool failed = false;
    /* A file may ask for 4096 layers of 2^28 n_kv_dim values each, so the cache size can pass
     * SIZE_MAX for a long context (it wrapped to a tiny allocation that decoding overran). */
    const size_t kv_row_bytes = (size_t)f->n_kv * f->kv_elem; /* <= 2^30 */
    if (kv_row_bytes > SIZE_MAX / 2 / (size_t)params->n_ctx / (size_t)hp->n_layer) {
        moeinf_fwd_free(f);
        return moeinf_fail(err, MOEINF_ERR_NOMEM,
                           "a context of %d tokens needs a KV cache larger than memory (%d "
                           "layers of %d values per token)",
                           params->n_ctx, hp->n_layer, hp->n_head_kv * hp->head_dim);
    }
    f->kv_off = alloc_array(f, (size_t)hp->n_layer, sizeof *f->kv_off, &failed);
    f->kv_rows = alloc_array(f, (size_t)hp->n_layer, sizeof *f->kv_rows, &failed);
    f->seqs = alloc_array(f, (size_t)f->n_seq, sizeof *f->seqs, &failed);
    if (failed) {
        moeinf_fwd_free(f);
        return moeinf_fail(err, MOEINF_ERR_NOMEM, "out of memory for the context");
    }
    const size_t seq_kv_bytes = kv_layout(f) * f->kv_elem;
    const size_t kv_bytes = seq_kv_bytes * (size_t)f->n_seq;
    f->k_all = alloc_array(f, kv_bytes, 1, &failed);
    if (!mla) f->v_all = alloc_array(f, kv_bytes, 1, &failed);
    f->row_ids = alloc_array(f, n_b, sizeof *f->row_ids, &failed);
    for (size_t j = 0; f->row_ids && j < n_b; j++)
        f->row_ids[j] = (int32_t)j;
    f->x = alloc_array(f, n_b * hp->n_embd, sizeof(float), &failed);
    f->xb = alloc_array(f, n_b * hp->n_embd, sizeof(float), &failed);
    f->q = alloc_array(f, n_b * f->n_q, sizeof(float), &failed);
    f->k = alloc_array(f, n_b * f->n_kv, sizeof(float), &failed);
    f->v = alloc_array(f, n_b * f->n_kv, sizeof(float), &failed);
    f->att = alloc_array(f, n_b * n_att, sizeof(float), &failed);
    f->tmp = alloc_array(f, n_b * hp->n_embd, sizeof(float), &failed);
    /* hg and hu also hold the shared expert's rows */
    size_t h_floats = slots * hp->n_ff;
    if (n_b * (size_t)hp->n_ff_shexp > h_floats) h_floats = n_b * (size_t)hp->n_ff_shexp;
    if (n_b * (size_t)hp->n_ff_dense > h_floats) h_floats = n_b * (size_t)hp->n_ff_dense;
    f->hg = alloc_array(f, h_floats, sizeof(float), &failed);
    f->hu = alloc_array(f, h_floats, sizeof(float), &failed);
    if (hp->n_ff_shexp > 0) f->sh_out = alloc_array(f, n_b * hp->n_embd, sizeof(float), &failed);
    for (int il = 0; il < hp->n_layer; il++) {
        if (llm->layers[il].attn != MOEINF_ATTN_GATED || f->qg) continue;
        f->qg = alloc_array(f, n_b * 2 * f->n_q, sizeof(float), &failed);
        f->gate = alloc_array(f, n_b * f->n_q, sizeof(float), &failed);
    }
    if (hp->n_recurrent > 0) alloc_recurrent(f, &failed);
    alloc_checkpoints(f, &failed);
    for (int q = 0; q < f->n_seq && !failed; q++) {
        struct moeinf_fwd_seq *sq = &f->seqs[q];
        sq->k_cache = f->k_all + (size_t)q * seq_kv_bytes;
        sq->v_cache = f->v_all ? f->v_all + (size_t)q * seq_kv_bytes : NULL;
        sq->rs = f->rs_all ? f->rs_all + (size_t)q * f->rs_floats : NULL;
    }
    f->cur = f->seqs;
    int n_threads = moeinf_pool_size(params->pool);
    if (mla) alloc_mla(f, n_threads, &failed);
    f->attn_scratch_stride = moeinf_attn_scratch_floats((int)n_c, hp->n_head, hp->n_head_kv,
                                                        mla ? f->n_kv : hp->head_dim);
    f->attn_scratch =
        alloc_array(f, f->attn_scratch_stride * (size_t)n_threads, sizeof(float), &failed);
    if (hp->n_expert > 0) alloc_moe(f, slots, &failed);
    alloc_acts(f, slots, &failed);
    if (failed) {
        moeinf_fwd_free(f);
        return moeinf_fail(err, MOEINF_ERR_NOMEM,
                           "out of memory for a context of %d tokens (KV cache %zu MiB)",
                           params->n_ctx, (mla ? kv_bytes : 2 * kv_bytes) >> 20);
    }
    *out = f;
    return MOEINF_OK;
}

void moeinf_fwd_free(struct moeinf_fwd *f) {
    if (!f) return;
    free(f->k_all);
    free(f->v_all);
    free(f->kv_off);
    free(f->kv_rows);
    free(f->row_ids);
    free(f->x);
    free(f->xb);
    free(f->q);
    free(f->k);
    free(f->v);
    free(f->att);
    free(f->qg);
    free(f->gate);
    free(f->mla_qa);
    free(f->mla_q);
    free(f->mla_lat);
    free(f->mla_act);
    free(f->mla_row);
    free(f->route_scores);
    free(f->ssm_mix);
    free(f->ssm_conv);
    free(f->ssm_z);
    free(f->ssm_beta);
    free(f->ssm_g);
    free(f->ssm_proj);
    free(f->ssm_ba);
    free(f->ssm_o);
    free(f->rs_all);
    for (int q = 0; f->seqs && q < f->n_seq; q++) {
        for (int i = 0; i < MOEINF_FWD_CHECKPOINTS; i++)
            free(f->seqs[q].ckpt[i]);
    }
    free(f->seqs);
    free(f->tmp);
    free(f->hg);
    free(f->hu);
    free(f->eo);
    free(f->sh_out);
    free(f->router);
    free(f->lookahead);
    free(f->lookahead_depth);
    free(f->ex_in);
    free(f->attn_scratch);
    free(f->sel);
    free(f->sel_w);
    free(f->slot);
    free(f->expert_count);
    free(f->expert_first);
    free(f->jobs);
    free(f->wave);
    free(f->wave_row0);
    free(f->wave_rows);
    free(f->wave_index);
    free(f->wave_done);
    free(f->wave_parts);
    free(f->wave_bias);
    for (int t = 0; t < MOEINF_TYPE_COUNT; t++)
        free(f->acts[t].buf);
    free(f);
}

/* ---- non-finite values ---------------------------------------------------------------- */

void moeinf_fwd_note_finite(struct moeinf_fwd *f, int il, int m) {
    if (il == 0) f->nonfinite_layer = -1;
    if (f->nonfinite_layer >= 0) return;
    if (!moeinf_all_finite(f->x, (size_t)m * (size_t)f->llm->hp.n_embd)) f->nonfinite_layer = il;
}

enum moeinf_status moeinf_fwd_check_finite(const struct moeinf_fwd *f, const float *logits,
                                           int n_rows, struct moeinf_error *err) {
    const struct moeinf_hparams *hp = &f->llm->hp;
    if (f->nonfinite_layer >= 0) {
        return moeinf_fail(err, MOEINF_ERR_FORMAT,
                           "NaN or infinity in the hidden state from layer %d on (layers 0-%d): "
                           "the model's weights hold non-finite values or its activations "
                           "overflow",
                           f->nonfinite_layer, hp->n_layer - 1);
    }
    if (logits && !moeinf_all_finite(logits, (size_t)n_rows * (size_t)hp->n_vocab)) {
        return moeinf_fail(err, MOEINF_ERR_FORMAT,
                           "NaN or infinity in the logits, though every layer's output is "
                           "finite: output_norm or the lm_head hold non-finite values");
    }
    return MOEINF_OK;
}
