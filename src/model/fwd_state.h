/*
 * fwd_state.h - the forward pass's state, shared by the files that make up the pass
 * (internal to src/model): forward.c (the layer loop, the KV cache, allocation),
 * layer_attn.c (attention), layer_ffn.c (dense SwiGLU FFN, shared expert), layer_moe.c
 * (routing and routed experts), layer_deltanet.c (Gated DeltaNet), recurrent.c (the recurrent
 * state and its checkpoints) and fwd_ops.c (activation conversion and matmul helpers).
 */
#ifndef MOEINF_MODEL_FWD_STATE_H
#define MOEINF_MODEL_FWD_STATE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "compute/matmul.h"
#include "model/forward.h"
#include "model/model.h"

/* Recurrent-state checkpoints a context keeps (recurrent.c). */
#define MOEINF_FWD_CHECKPOINTS 4

/* Activation rows converted to one vec_dot_type, valid for one source buffer at a time. */
struct moeinf_fwd_act {
    uint8_t *buf;
    size_t row_bytes;
    const float *src; /* which float buffer buf currently holds, NULL = stale */
};

/* What one sequence holds: its part of the KV cache, its recurrent state and checkpoints. */
struct moeinf_fwd_seq {
    uint8_t *k_cache; /* per attention layer kv_rows[il] rows of n_kv values */
    uint8_t *v_cache; /* NULL for latent attention */
    float *rs;        /* its recurrent state (rs_floats), NULL without recurrent layers */
    int pos;          /* tokens evaluated (the next eval's n_past, unless the caller goes back) */
    uint8_t *ckpt[MOEINF_FWD_CHECKPOINTS];
    int ckpt_pos[MOEINF_FWD_CHECKPOINTS]; /* -1: empty */
};

struct moeinf_fwd {
    const struct moeinf_llm *llm;
    struct moeinf_fwd_params p;
    int n_kv;         /* n_head_kv * head_dim */
    int n_q;          /* n_head * head_dim */
    size_t kv_elem;   /* bytes per cached value */
    size_t *kv_off;   /* [n_layer] where layer il's rows begin in a sequence's cache, in values */
    int *kv_rows;     /* [n_layer] n_ctx_seq; a sliding layer's ring (n_swa - 1 + n_batch rows,
                         position t in row t % rows); 0 for a recurrent layer */
    int n_swa_layers; /* sliding-window layers */
    int n_seq;        /* sequences (p.n_seq) */
    int n_ctx_seq;    /* positions of each: n_ctx / n_seq */
    struct moeinf_fwd_seq *seqs; /* [n_seq] */
    struct moeinf_fwd_seq *cur;  /* the sequence the block being computed works on (bind_seq) */
    uint8_t *k_all;              /* [n_seq] the sequences' K caches, one after the other */
    uint8_t *v_all;
    float *rs_all;                 /* [n_seq][rs_floats] their recurrent states */
    const struct moeinf_fwd_run *runs; /* the current eval's runs (eval_batch) */
    int n_runs;
    int32_t *row_ids; /* [n_batch] 0, 1, ..: every row's logits (moeinf_fwd_eval) */
    float *x;             /* [n_batch][n_embd] residual stream */
    float *xb;            /* [n_batch][n_embd] normed input */
    float *q;             /* [n_batch][n_q] */
    float *k;             /* [n_batch][n_kv] */
    float *v;             /* [n_batch][n_kv] */
    float *att;           /* [n_batch][n_q] */
    float *qg;            /* [n_batch][2 n_q] a gated layer's q and gate, per head */
    /* multi-head latent attention (hp->mla_kv > 0); n_kv is then mla_kv + n_rot (one row per
     * token, no V cache) */
    float *mla_qa;        /* [n_batch][mla_q] the low-rank query */
    float *mla_q;         /* [n_batch][n_head][mla_kv + n_rot] absorbed queries, RoPE'd part */
    float *mla_lat;       /* [n_batch][n_head][mla_kv] each head's latent output */
    uint8_t *mla_act;     /* [n_batch][n_head] rows converted for wk_b / wv_b */
    float *mla_row;       /* per thread: mla_kv + n_batch floats, a dequantized wkv_b row and
                             its dot products */
    float *gate;          /* [n_batch][n_q] its output gate */
    float *tmp;           /* [n_batch][n_embd] sub-layer output */
    float *hg;            /* [n_batch * n_used][n_ff] gate, then swiglu */
    float *hu;            /* [n_batch * n_used][n_ff] up */
    float *eo;            /* [n_batch * n_used][n_embd] expert outputs */
    float *sh_out;        /* [n_batch][n_embd] shared expert output (n_ff_shexp > 0) */
    float *router;        /* [n_batch][n_expert] */
    float *lookahead;     /* [n_expert] a later layer's router logits (gate lookahead) */
    float *route_scores;  /* [2 n_expert] biased selection scores, then group scores */
    int *lookahead_depth; /* [n_layer] layers ahead predicted during that layer's decode step */
    uint8_t *ex_in;       /* [n_batch * n_used] gathered quantized rows */
    float *attn_scratch;  /* per thread */
    size_t attn_scratch_stride;
    struct moeinf_fwd_act acts[MOEINF_TYPE_COUNT]; /* allocated per vec_dot_type at init */
    int32_t *sel;                                  /* [n_layer][n_batch][n_used] selected experts */
    float *sel_w;                                  /* [n_layer][n_batch][n_used] their weights */
    int *slot;                       /* [n_batch][n_used] row of (token, rank) in ex_in, eo */
    int *expert_count;               /* [n_expert] */
    int *expert_first;               /* [n_expert + 1] */
    struct moeinf_mm_job *jobs;      /* [2 * n_expert] */
    int *wave;                       /* [n_expert] experts of the current wave, ascending */
    int *wave_row0;                  /* [n_expert] their first row in ex_in, eo */
    int *wave_rows;                  /* [n_expert] their row count */
    int *wave_index;                 /* [n_expert] position of an expert in the tier's wave */
    const uint8_t *(*wave_parts)[3]; /* [n_expert] their gate, up, down matrices */
    const float *(*wave_bias)[3];    /* [n_expert] their gate, up, down biases */
    uint8_t *wave_done;              /* [n_expert] the wave's i-th expert was computed */
    uint64_t bytes;                  /* allocated: KV cache and scratch */
    int nonfinite_layer; /* first layer of the last eval whose output was not finite; -1 */
    /* Gated DeltaNet (hp->n_recurrent > 0) */
    int ssm_key_dim;   /* n_k_heads * head_dim */
    int ssm_value_dim; /* n_v_heads * head_dim */
    int ssm_conv_dim;  /* 2 * key_dim + value_dim */
    float *ssm_mix;    /* [n_batch][conv_dim] q, k, v projected */
    float *ssm_conv;   /* [n_batch][conv_dim] after the conv and SiLU; q, k normalised */
    float *ssm_z;      /* [n_batch][value_dim] output gate */
    float *ssm_beta;   /* [n_batch][n_v_heads] sigmoid(beta) */
    float *ssm_g;      /* [n_batch][n_v_heads] log decay, softplus(alpha + dt) * a */
    float *ssm_proj;   /* [n_batch][conv_dim + value_dim] a legacy ssm_in's q, k, v, z */
    float *ssm_ba;     /* [n_batch][2 n_v_heads] a fused ssm_ba's betas and alphas */
    float *ssm_o;      /* [n_batch][value_dim] the delta rule's output, then gated-normed */
    /* a sequence's recurrent state of every Gated DeltaNet layer (moeinf_fwd_seq.rs): per
     * layer rs_conv_floats (the last d_conv - 1 conv inputs, oldest first) then
     * rs_delta_floats (per value head a [head_dim][head_dim] matrix, row r for value element
     * r) */
    size_t rs_conv_floats;
    size_t rs_delta_floats;
    size_t rs_floats; /* all layers */
    /* checkpoints (recurrent.c), per sequence: ckpt[i] holds the state after ckpt_pos[i]
     * tokens, rs then each sliding layer's last n_swa - 1 K rows and V rows, oldest first */
    size_t ckpt_bytes; /* 0: nothing to keep (a KV cache alone goes back by moving n_past) */
};

/* ---- fwd_ops.c --------------------------------------------------------------------------- */

/* Rows of `src` (m rows of n floats, n floats apart) converted for weight type wt, converted
 * once per source buffer (moeinf_fwd_acts_invalidate when src changes); *row_bytes the
 * converted rows' stride. */
const uint8_t *moeinf_fwd_act(struct moeinf_fwd *f, enum moeinf_type wt, const float *src, int m,
                              int64_t n, size_t *row_bytes);
void moeinf_fwd_acts_invalidate(struct moeinf_fwd *f);
/* A job for matrix e of w (its rows from the view) over x into y. */
struct moeinf_mm_job moeinf_fwd_job(const struct moeinf_weight *w, int64_t e, const uint8_t *x,
                                    size_t x_stride, int m, float *y, size_t y_stride);
/* y = W x for m rows of src (n_in wide) into y (y_stride floats apart). */
void moeinf_fwd_matmul(struct moeinf_fwd *f, const struct moeinf_weight *w, const float *src, int m,
                       float *y, size_t y_stride);

/* RoPE (hp->rope, YaRN-scaled where hp->rope_scaling says) of the first n_rot values of
 * n_heads heads head_dim floats apart, at position pos. */
void moeinf_fwd_rope(const struct moeinf_hparams *hp, float *x, int n_heads, int head_dim,
                     int pos);

/* ---- the blocks of a layer ----------------------------------------------------------------- */

/* Makes sequence `seq` the one f->cur names. */
static inline void moeinf_fwd_bind_seq(struct moeinf_fwd *f, int seq) {
    f->cur = &f->seqs[seq];
}

/* The blocks run over the m rows of the eval; where a row's sequence matters (its positions,
 * its KV cache or recurrent state) they go through f->runs, each run's rows with its sequence
 * bound. */
/* layer_attn.c: x += Wo attention(q, K, V) (K, V appended to each run's sequence). */
void moeinf_fwd_attention(struct moeinf_fwd *f, int il, int m);
/* layer_mla.c: the same for a multi-head latent attention layer (latents appended). */
void moeinf_fwd_mla(struct moeinf_fwd *f, int il, int m);
/* layer_ffn.c: x += the dense SwiGLU FFN of the normed rows in xb. */
void moeinf_fwd_dense_ffn(struct moeinf_fwd *f, int il, int m);
/* layer_ffn.c: the shared expert of the normed rows in xb, into sh_out. */
void moeinf_fwd_shared_expert(struct moeinf_fwd *f, const struct moeinf_layer *lw, int m);
/* layer_deltanet.c: x += Wo GatedDeltaNet(norm(x)) for m tokens, each run's recurrent state
 * advanced. */
void moeinf_fwd_deltanet(struct moeinf_fwd *f, int il, int m);
/* layer_moe.c: x += the routed experts (and the shared expert) of the normed rows in xb. Fails
 * only with the expert cache's read errors. */
enum moeinf_status moeinf_fwd_moe(struct moeinf_fwd *f, int il, int m, struct moeinf_error *err);

#endif
