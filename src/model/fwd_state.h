/*
 * fwd_state.h - the forward pass's state, shared by the files that make up the pass
 * (internal to src/model): forward.c (the layer loop, the KV cache, allocation),
 * layer_attn.c (attention), layer_ffn.c (dense SwiGLU FFN, shared expert), layer_moe.c
 * (routing and routed experts) and fwd_ops.c (activation conversion and matmul helpers).
 */
#ifndef MOEINF_MODEL_FWD_STATE_H
#define MOEINF_MODEL_FWD_STATE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "compute/matmul.h"
#include "model/forward.h"
#include "model/model.h"

/* Activation rows converted to one vec_dot_type, valid for one source buffer at a time. */
struct moeinf_fwd_act {
    uint8_t *buf;
    size_t row_bytes;
    const float *src; /* which float buffer buf currently holds, NULL = stale */
};

struct moeinf_fwd {
    const struct moeinf_llm *llm;
    struct moeinf_fwd_params p;
    int n_kv;         /* n_head_kv * head_dim */
    int n_q;          /* n_head * head_dim */
    int max_width;    /* widest activation row */
    size_t kv_elem;   /* bytes per cached value */
    uint8_t *k_cache; /* [n_layer][n_ctx][n_kv] */
    uint8_t *v_cache;
    float *x;             /* [n_batch][n_embd] residual stream */
    float *xb;            /* [n_batch][n_embd] normed input */
    float *q;             /* [n_batch][n_q] */
    float *k;             /* [n_batch][n_kv] */
    float *v;             /* [n_batch][n_kv] */
    float *att;           /* [n_batch][n_q] */
    float *tmp;           /* [n_batch][n_embd] sub-layer output */
    float *hg;            /* [n_batch * n_used][n_ff] gate, then swiglu */
    float *hu;            /* [n_batch * n_used][n_ff] up */
    float *eo;            /* [n_batch * n_used][n_embd] expert outputs */
    float *sh_out;        /* [n_batch][n_embd] shared expert output (n_ff_shexp > 0) */
    float *router;        /* [n_batch][n_expert] */
    float *lookahead;     /* [n_expert] a later layer's router logits (gate lookahead) */
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
    uint8_t *wave_done;              /* [n_expert] the wave's i-th expert was computed */
    uint64_t bytes;                  /* allocated: KV cache and scratch */
    int nonfinite_layer; /* first layer of the last eval whose output was not finite; -1 */
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

/* ---- the blocks of a layer ----------------------------------------------------------------- */

/* layer_attn.c: x += Wo attention(q, K, V) for m tokens at n_past.. (K, V appended). */
void moeinf_fwd_attention(struct moeinf_fwd *f, int il, int m, int n_past);
/* layer_ffn.c: x += the dense SwiGLU FFN of the normed rows in xb. */
void moeinf_fwd_dense_ffn(struct moeinf_fwd *f, int il, int m);
/* layer_ffn.c: the shared expert of the normed rows in xb, into sh_out. */
void moeinf_fwd_shared_expert(struct moeinf_fwd *f, const struct moeinf_layer *lw, int m);
/* layer_moe.c: x += the routed experts (and the shared expert) of the normed rows in xb. Fails
 * only with the expert cache's read errors. */
enum moeinf_status moeinf_fwd_moe(struct moeinf_fwd *f, int il, int m, struct moeinf_error *err);

#endif
