/*
 * layer_moe.c - the routed-expert block of a MoE layer (lw->ffn MoE): the router's choice
 * (or a replayed one), the batch's (token, rank) pairs grouped by expert so that each selected
 * expert's matrices are read once per micro-batch for all its tokens, the experts computed
 * from the weights (resident) or from the expert cache's slots in the waves it allows
 * (offloaded), the shared expert, and the weighted sum in router-rank order. Biases (router,
 * experts) are added where the model has them.
 */
#include <math.h>
#include <string.h>

#include "compute/expert_ffn.h"
#include "compute/ops.h"
#include "model/fwd_state.h"
#include "offload/tier.h"

/* Layer il's router logits of the m rows of x into out (n_expert each), its bias added. */
static void router_logits(struct moeinf_fwd *f, int il, const float *x, int m, float *out) {
    const struct moeinf_layer *lw = &f->llm->layers[il];
    const int n_expert = f->llm->hp.n_expert;
    moeinf_fwd_matmul(f, &lw->router, x, m, out, (size_t)n_expert);
    if (!lw->router_b) return;
    for (int j = 0; j < m; j++) {
        float *p = out + (size_t)j * n_expert;
        for (int e = 0; e < n_expert; e++)
            p[e] += lw->router_b[e];
    }
}

/* The mixing weights of the n_used experts chosen (sel) from one token's router row p: for a
 * softmax or sigmoid router p holds probabilities, renormalised over the chosen when
 * expert_weights_norm (equal weights when they all underflow to 0); for the top-k router p
 * holds logits, and the weights are their softmax over the chosen. Then expert_weights_scale. */
static void mix_weights(const struct moeinf_hparams *hp, const float *p, const int32_t *sel,
                        float *w) {
    const int n_used = hp->n_expert_used;
    for (int r = 0; r < n_used; r++)
        w[r] = p[sel[r]];
    switch (hp->router) {
    case MOEINF_ROUTER_SOFTMAX:
    case MOEINF_ROUTER_SIGMOID:
        if (hp->expert_weights_norm) {
            float sum = 0.0f;
            for (int r = 0; r < n_used; r++)
                sum += w[r];
            for (int r = 0; r < n_used; r++)
                w[r] = sum > 0.0f ? w[r] / sum : 1.0f / (float)n_used;
        }
        break;
    case MOEINF_ROUTER_TOPK_SOFTMAX:
        moeinf_softmax(w, n_used);
        break;
    }
    if (hp->expert_weights_scale != 0.0f && hp->expert_weights_scale != 1.0f) {
        for (int r = 0; r < n_used; r++)
            w[r] *= hp->expert_weights_scale;
    }
}

/* One token's router logits p turned in place into what its experts are chosen by and
 * weighted from: probabilities (softmax or sigmoid over every expert), or logits as they are
 * for the top-k router. */
static void router_probs(const struct moeinf_hparams *hp, float *p) {
    switch (hp->router) {
    case MOEINF_ROUTER_SOFTMAX:
        moeinf_softmax(p, hp->n_expert);
        break;
    case MOEINF_ROUTER_SIGMOID:
        for (int e = 0; e < hp->n_expert; e++)
            p[e] = 1.0f / (1.0f + expf(-p[e]));
        break;
    case MOEINF_ROUTER_TOPK_SOFTMAX:
        break;
    }
}

/*
 * The n_used experts of one token from its router row p (router_probs), best first: the top k
 * of p plus the layer's selection bias (exp_probs_b, which chooses but does not weigh), and
 * with expert groups only among the n_group_used groups whose two best scores sum highest,
 * as llama.cpp chooses. scores: 2 * n_expert floats of scratch.
 */
static void choose_experts(const struct moeinf_hparams *hp, const struct moeinf_layer *lw,
                           const float *p, float *scores, int *idx) {
    const int n_expert = hp->n_expert;
    if (!lw->exp_probs_b && hp->n_expert_groups <= 1) {
        moeinf_top_k(p, n_expert, hp->n_expert_used, idx);
        return;
    }
    for (int e = 0; e < n_expert; e++)
        scores[e] = lw->exp_probs_b ? p[e] + lw->exp_probs_b[e] : p[e];
    if (hp->n_expert_groups > 1) {
        const int n_groups = hp->n_expert_groups;
        const int per_group = n_expert / n_groups; /* >= 2 (checked at load) */
        float *group_score = scores + n_expert;
        for (int g = 0; g < n_groups; g++) {
            int best[2];
            moeinf_top_k(scores + (size_t)g * per_group, per_group, 2, best);
            group_score[g] = scores[g * per_group + best[0]] + scores[g * per_group + best[1]];
        }
        int keep[MOEINF_MAX_EXPERT_GROUPS];
        moeinf_top_k(group_score, n_groups, hp->n_group_used, keep);
        for (int g = 0; g < n_groups; g++) {
            bool kept = false;
            for (int i = 0; i < hp->n_group_used; i++)
                kept |= keep[i] == g;
            if (kept) continue;
            for (int e = g * per_group; e < (g + 1) * per_group; e++)
                scores[e] = -INFINITY;
        }
    }
    moeinf_top_k(scores, n_expert, hp->n_expert_used, idx);
}

/* The router's choice for the m tokens: hp->router. */
static void route(struct moeinf_fwd *f, int il, int m) {
    const struct moeinf_hparams *hp = &f->llm->hp;
    const struct moeinf_layer *lw = &f->llm->layers[il];
    const int n_expert = hp->n_expert;
    const int n_used = hp->n_expert_used;
    router_logits(f, il, f->xb, m, f->router);
    for (int j = 0; j < m; j++) {
        float *p = f->router + (size_t)j * n_expert;
        int idx[MOEINF_MAX_EXPERT_USED];
        router_probs(hp, p);
        choose_experts(hp, lw, p, f->route_scores, idx);
        int32_t *sel = f->sel + ((size_t)il * f->p.n_batch + j) * n_used;
        for (int r = 0; r < n_used; r++)
            sel[r] = idx[r];
        mix_weights(hp, p, sel, f->sel_w + ((size_t)il * f->p.n_batch + j) * n_used);
    }
}

/*
 * Routing replay (forward.h): layer il's choice of the m tokens replaced by the recorded
 * experts. route() left the router's row in f->router (probabilities of a softmax router,
 * logits of a top-k one); the weights are those of the recorded experts, mixed as route()
 * mixes its own choice.
 */
static void replay_routing(struct moeinf_fwd *f, int il, int m) {
    const struct moeinf_hparams *hp = &f->llm->hp;
    const int n_used = hp->n_expert_used;
    for (int j = 0; j < m; j++) {
        const int32_t *rec = f->p.route_replay +
                             ((size_t)j * moeinf_n_moe_layers(hp) + il - hp->n_layer_dense_lead) *
                                 n_used;
        int32_t *sel = f->sel + ((size_t)il * f->p.n_batch + j) * n_used;
        memcpy(sel, rec, (size_t)n_used * sizeof *sel);
        mix_weights(hp, f->router + (size_t)j * hp->n_expert, sel,
                    f->sel_w + ((size_t)il * f->p.n_batch + j) * n_used);
    }
}

static struct moeinf_expert_mat mat_of(const struct moeinf_weight *w) {
    struct moeinf_expert_mat mat = {w->type, w->n_in, w->n_out, w->row_bytes};
    return mat;
}

/* The n experts of f->wave (ascending, their matrices in f->wave_parts), over their rows of
 * ex_in into eo: from the weights, or from the expert cache's slots. */
static void experts_run(struct moeinf_fwd *f, const struct moeinf_layer *lw, int n, size_t rb,
                        bool from_cache) {
    const int *first = f->expert_first;
    const bool biased = lw->gate_exps_b || lw->up_exps_b || lw->down_exps_b;
    const int64_t n_ff = lw->gate_exps.n_out;
    const int64_t n_embd = lw->down_exps.n_out;
    for (int i = 0; i < n; i++) {
        const int e = f->wave[i];
        f->wave_row0[i] = first[e];
        f->wave_rows[i] = first[e + 1] - first[e];
        if (!biased) continue;
        f->wave_bias[i][MOEINF_EXPERT_GATE] = lw->gate_exps_b ? lw->gate_exps_b + e * n_ff : NULL;
        f->wave_bias[i][MOEINF_EXPERT_UP] = lw->up_exps_b ? lw->up_exps_b + e * n_ff : NULL;
        f->wave_bias[i][MOEINF_EXPERT_DOWN] =
            lw->down_exps_b ? lw->down_exps_b + e * n_embd : NULL;
    }
    const enum moeinf_type down_vt = moeinf_type_cpu_get(lw->down_exps.type)->vec_dot_type;
    struct moeinf_expert_ffn a = {
        .mat = {mat_of(&lw->gate_exps), mat_of(&lw->up_exps), mat_of(&lw->down_exps)},
        .n = n,
        .parts = (const uint8_t *const(*)[3])f->wave_parts,
        .bias = biased ? (const float *const(*)[3])f->wave_bias : NULL,
        .glu = f->llm->hp.glu,
        .row0 = f->wave_row0,
        .rows = f->wave_rows,
        .x = f->ex_in,
        .x_stride = rb,
        .out = f->eo,
        .hg = f->hg,
        .hu = f->hu,
        .hq = f->acts[down_vt].buf,
        .jobs = f->jobs,
    };
    f->acts[down_vt].src = NULL; /* it will hold parts of hg only */
    if (from_cache) {
        moeinf_tier_compute(f->p.tier, &a, f->p.pool, f->p.kern);
    } else {
        moeinf_expert_ffn_run(f->p.pool, f->p.kern, &a);
    }
}

/* Every selected expert in one call, straight from the weights (resident experts). */
static void experts_resident(struct moeinf_fwd *f, const struct moeinf_layer *lw, size_t rb) {
    int n = 0;
    for (int e = 0; e < f->llm->hp.n_expert; e++) {
        if (f->expert_first[e + 1] == f->expert_first[e]) continue;
        f->wave[n] = e;
        f->wave_parts[n][0] = moeinf_weight_row(&lw->gate_exps, e, 0);
        f->wave_parts[n][1] = moeinf_weight_row(&lw->up_exps, e, 0);
        f->wave_parts[n][2] = moeinf_weight_row(&lw->down_exps, e, 0);
        n++;
    }
    experts_run(f, lw, n, rb, false);
}

/*
 * Gate lookahead for a decode token: applies the routers of the next lookahead_depth[il]
 * layers to this layer's FFN input (the residual stream changes little from layer to layer)
 * and hints their top-k experts to the cache, which prefetches them behind this layer's
 * demand reads. One router product per layer ahead (n_embd x n_expert), no I/O.
 */
static void lookahead_hints(struct moeinf_fwd *f, int il) {
    const struct moeinf_hparams *hp = &f->llm->hp;
    for (int d = 1; d <= f->lookahead_depth[il] && il + d < hp->n_layer; d++) {
        if (f->llm->layers[il + d].ffn != MOEINF_FFN_MOE) continue;
        router_logits(f, il + d, f->xb, 1, f->lookahead);
        int idx[MOEINF_MAX_EXPERT_USED];
        router_probs(hp, f->lookahead);
        choose_experts(hp, &f->llm->layers[il + d], f->lookahead, f->route_scores, idx);
        moeinf_tier_hint(f->p.tier, il + d - hp->n_layer_dense_lead, idx, hp->n_expert_used);
    }
}

/* Computes the wave's experts (flat ids[0..n) of MoE layer ml) that are in their slots and not
 * computed yet, in ascending order, and marks them computed (f->wave_done). Returns how many
 * of the wave are left. */
static int experts_arrived(struct moeinf_fwd *f, const struct moeinf_layer *lw, int ml,
                           const uint32_t *ids, int n, size_t rb) {
    const int n_expert = f->llm->hp.n_expert;
    struct moeinf_tier *t = f->p.tier;
    for (int e = 0; e < n_expert; e++)
        f->wave_index[e] = -1;
    int left = 0;
    for (int i = 0; i < n; i++) {
        if (f->wave_done[i]) continue;
        if (moeinf_tier_ready(t, i)) {
            f->wave_index[ids[i] - (uint32_t)ml * (uint32_t)n_expert] = i;
            f->wave_done[i] = 1;
        } else {
            left++;
        }
    }
    int k = 0;
    for (int e = 0; e < n_expert; e++) {
        int i = f->wave_index[e];
        if (i < 0) continue;
        f->wave[k] = e;
        for (int part = 0; part < 3; part++)
            f->wave_parts[k][part] = moeinf_tier_part(t, i, part);
        k++;
    }
    if (k > 0) experts_run(f, lw, k, rb, true);
    return left;
}

/* The selected experts through the expert cache, in the waves it allows. Of each wave, the
 * experts already in their slots are computed first while the rest are read, then each of the
 * rest as soon as it has arrived, while the later ones are still read: each expert's outputs
 * land in its own rows, so the split changes no bit. */
static enum moeinf_status experts_offloaded(struct moeinf_fwd *f, const struct moeinf_layer *lw,
                                            int il, int m, size_t rb, struct moeinf_error *err) {
    struct moeinf_tier *t = f->p.tier;
    const int ml = il - f->llm->hp.n_layer_dense_lead; /* the cache counts MoE layers */
    moeinf_tier_layer_begin(t, ml, f->sel + (size_t)il * f->p.n_batch * f->llm->hp.n_expert_used, m,
                            f->llm->hp.n_expert_used);
    /* Under a routing replay the routers' own choice is not the one made, so their lookahead
     * would predict routing that never happens: it is off. */
    if (m == 1 && !f->p.route_replay) lookahead_hints(f, il);
    for (;;) {
        const uint32_t *ids;
        int n = 0;
        enum moeinf_status st = moeinf_tier_wave(t, &ids, &n, err);
        if (st != MOEINF_OK) return st;
        if (n == 0) break;
        memset(f->wave_done, 0, (size_t)n);
        int left = experts_arrived(f, lw, ml, ids, n, rb);
        while (left > 0) {
            st = moeinf_tier_wave_wait_next(t, err);
            if (st != MOEINF_OK) return st;
            left = experts_arrived(f, lw, ml, ids, n, rb);
        }
        st = moeinf_tier_wave_wait(t, err); /* every read is in: retires them */
        if (st != MOEINF_OK) return st;
        moeinf_tier_wave_end(t);
    }
    return moeinf_tier_layer_end(t, err);
}

/* (token, rank) pairs grouped by expert: expert e's rows are [expert_first[e],
 * expert_first[e + 1]), f->slot[j * n_used + r] the row of token j's rank-r expert. */
static void group_by_expert(struct moeinf_fwd *f, const int32_t *sel, int m) {
    const int n_expert = f->llm->hp.n_expert;
    const int n_used = f->llm->hp.n_expert_used;
    memset(f->expert_count, 0, (size_t)n_expert * sizeof(int));
    for (int i = 0; i < m * n_used; i++)
        f->expert_count[sel[i]]++;
    f->expert_first[0] = 0;
    for (int e = 0; e < n_expert; e++)
        f->expert_first[e + 1] = f->expert_first[e] + f->expert_count[e];
    memset(f->expert_count, 0, (size_t)n_expert * sizeof(int));
    for (int j = 0; j < m; j++) {
        for (int r = 0; r < n_used; r++) {
            int e = sel[(size_t)j * n_used + r];
            f->slot[(size_t)j * n_used + r] = f->expert_first[e] + f->expert_count[e]++;
        }
    }
}

enum moeinf_status moeinf_fwd_moe(struct moeinf_fwd *f, int il, int m, struct moeinf_error *err) {
    const struct moeinf_hparams *hp = &f->llm->hp;
    const struct moeinf_layer *lw = &f->llm->layers[il];
    const int n_used = hp->n_expert_used;
    const int n_embd = hp->n_embd;
    route(f, il, m);
    if (f->p.route_replay) replay_routing(f, il, m);
    group_by_expert(f, f->sel + (size_t)il * f->p.n_batch * n_used, m);
    size_t rb;
    /* gate and up share one activation type (checked at load) */
    const uint8_t *xq = moeinf_fwd_act(f, lw->gate_exps.type, f->xb, m, n_embd, &rb);
    for (int j = 0; j < m; j++) {
        for (int r = 0; r < n_used; r++) {
            memcpy(f->ex_in + (size_t)f->slot[(size_t)j * n_used + r] * rb, xq + (size_t)j * rb,
                   rb);
        }
    }
    if (f->p.tier) {
        enum moeinf_status st = experts_offloaded(f, lw, il, m, rb, err);
        if (st != MOEINF_OK) return st;
    } else {
        experts_resident(f, lw, rb);
    }
    if (hp->n_ff_shexp > 0) moeinf_fwd_shared_expert(f, lw, m); /* resident, after the routed */
    /* weighted sum in router-rank order, then the residual add */
    const float *w = f->sel_w + (size_t)il * f->p.n_batch * n_used;
    for (int j = 0; j < m; j++) {
        float *out = f->tmp + (size_t)j * n_embd;
        for (int r = 0; r < n_used; r++) {
            const float *o = f->eo + (size_t)f->slot[(size_t)j * n_used + r] * n_embd;
            const float wr = w[(size_t)j * n_used + r];
            if (r == 0) {
                for (int i = 0; i < n_embd; i++)
                    out[i] = o[i] * wr;
            } else {
                for (int i = 0; i < n_embd; i++)
                    out[i] += o[i] * wr;
            }
        }
        if (hp->n_ff_shexp > 0) {
            const float *sh = f->sh_out + (size_t)j * n_embd;
            for (int i = 0; i < n_embd; i++)
                out[i] += sh[i];
        }
        float *x = f->x + (size_t)j * n_embd;
        for (int i = 0; i < n_embd; i++)
            x[i] += out[i];
    }
    return MOEINF_OK;
}
