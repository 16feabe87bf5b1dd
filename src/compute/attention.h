/*
 * attention.h - causal grouped-query attention of m new tokens against the KV cache of one
 * layer. The cache holds rows of n_head_kv * head_dim values (F16 or F32), position t in row
 * t % ring; the new tokens' K and V rows must already be stored at positions
 * pos0 .. pos0 + m - 1. Query head h reads KV head h / (n_head / n_head_kv). K and V heads may
 * differ in size and row layout (v_dim, k_row, v_row): multi-head latent attention reads its
 * values as the first v_dim of each cached key row.
 * With a window w > 0 the query at position p sees positions p - w + 1 .. p only (a
 * sliding-window layer, whose ring needs w - 1 + m rows); with sinks, head h's softmax
 * denominator also holds exp(sinks[h]), which takes weight from every position and gives it to
 * none (gpt-oss).
 */
#ifndef MOEINF_ATTENTION_H
#define MOEINF_ATTENTION_H

#include <stdbool.h>
#include <stddef.h>

#include "compute/pool.h"
#include "quant/quant.h"

struct moeinf_attn_args {
    const float *q;     /* [m][n_head * head_dim], RoPE applied */
    const void *k;      /* cache rows [n_ctx][n_head_kv * head_dim] */
    const void *v;
    bool kv_f16;
    int m;
    int pos0;
    int n_head;
    int n_head_kv;
    int head_dim;        /* of q and k */
    int v_dim;           /* of v and out; 0 = head_dim */
    int k_row;           /* values per cache row of k; 0 = n_head_kv * head_dim */
    int v_row;           /* of v; 0 = n_head_kv * v_dim (MLA: v is a prefix of k's row) */
    float scale;         /* of q.k; 0 = 1 / sqrt(head_dim) */
    int ring;            /* rows of the cache */
    int window;          /* 0: every earlier position */
    const float *sinks;  /* [n_head] or NULL */
    float *out;         /* [m][n_head * v_dim] */
    float *scratch;     /* per thread: moeinf_attn_scratch_floats() floats */
    size_t scratch_stride;
    const struct moeinf_kernels *kern;
};

/* A work item takes up to moeinf_attn_block() consecutive tokens of one KV head (fewer where the
 * scratch is short), so that each K and V row it reads comes from memory once for all of them
 * (the kernels convert F16 in their registers, once per pass over a few rows of tokens x
 * heads): one token at a time, prefill spent as long converting rows as multiplying them (one
 * conversion per position pair). At most MOEINF_ATTN_BLOCK tokens, and 16 KiB of their q rows
 * (tokens x heads per KV head x width, the wider of the K and V heads): one token for
 * multi-head latent attention's 16 heads of 576. */
#define MOEINF_ATTN_BLOCK 16
int moeinf_attn_block(int n_head, int n_head_kv, int width);

/* Floats of scratch one thread needs for contexts up to n_ctx; head_dim the wider of the k and
 * v heads. */
size_t moeinf_attn_scratch_floats(int n_ctx, int n_head, int n_head_kv, int head_dim);

void moeinf_attention(struct moeinf_pool *pool, const struct moeinf_attn_args *args);

#endif
