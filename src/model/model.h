/*
 * model.h - hyper-parameters and weight views of a loaded model, whatever its architecture.
 * Each architecture (src/model/arch/<name>.c, registered in model/arch.c) reads its metadata
 * into struct moeinf_hparams, binds its tensors into struct moeinf_layer and chooses the
 * variants of the shared forward pass (model/forward.c) that it computes with: the kinds and
 * flags below. Weights are views into the mapped GGUF file (see docs/ARCHITECTURE.md);
 * nothing is copied at load.
 *
 * Shapes follow ggml: a matrix [n_in, n_out] has n_out rows of n_in elements; an expert
 * tensor [n_in, n_out, n_expert] is n_expert such matrices back to back.
 */
#ifndef MOEINF_MODEL_H
#define MOEINF_MODEL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "compute/ops.h"
#include "gguf/gguf.h"
#include "moeinf.h"
#include "quant/quant.h"

#define MOEINF_MAX_EXPERT_USED 64
#define MOEINF_MAX_EXPERT_GROUPS 64
#define MOEINF_MAX_ROT         1024 /* the widest rope.dimension_count YaRN is applied to */

struct moeinf_weight {
    const uint8_t *data; /* first row; NULL when the tensor is absent */
    enum moeinf_type type;
    int64_t n_in;  /* elements per row (ne[0]) */
    int64_t n_out; /* rows per matrix (ne[1]) */
    int64_t n_mat; /* matrices (experts) (ne[2]), 1 for plain matrices */
    size_t row_bytes;
    size_t mat_bytes;  /* n_out * row_bytes: one matrix */
    size_t mat_stride; /* from one matrix (expert) to the next: mat_bytes, or twice that in
                          the gate and up views of a fused ffn_gate_up_exps tensor */
};

/* How a layer mixes tokens: causal attention over a KV cache of whole K and V, plain or gated
 * (a layer's swa flag limits it to a sliding window), multi-head latent attention over a cache
 * of latents, or Gated DeltaNet linear attention over a recurrent state. */
enum moeinf_attn_kind {
    MOEINF_ATTN_FULL,
    /* full attention whose output is multiplied by sigmoid(gate), the gate projected by wq
     * beside q: wq's rows are, per head, head_dim of q then head_dim of gate (Qwen3.5,
     * Qwen3-Next) */
    MOEINF_ATTN_GATED,
    /* Gated DeltaNet: a causal depthwise conv over the q/k/v projection, then per value head
     * the delta rule on a [head_dim x head_dim] state, the output RMS-normed and gated by
     * SiLU(z) (model/layer_deltanet.c) */
    MOEINF_ATTN_DELTANET,
    /* DeepSeek's multi-head latent attention (model/layer_mla.c). The cache holds, per token,
     * one row of mla_kv latent values then n_rot RoPE'd key values, shared by every head; the
     * queries are absorbed into the latent space through wk_b (or the key rows of wkv_b) and
     * each head's latent output is expanded through wv_b (or the value rows of wkv_b) */
    MOEINF_ATTN_MLA,
};

/* Which key head a Gated DeltaNet value head reads, when there are more value heads than key
 * heads (ratio = n_v_heads / n_k_heads). */
enum moeinf_delta_heads {
    MOEINF_DELTA_HEADS_TILED,   /* value head h reads key head h % n_k_heads (qwen35moe) */
    MOEINF_DELTA_HEADS_GROUPED, /* value head h reads key head h / ratio (qwen3next) */
};

/* A layer's feed-forward block: a gated linear unit, dense or through routed experts. */
enum moeinf_ffn_kind {
    MOEINF_FFN_DENSE, /* ffn_gate, ffn_up, ffn_down */
    MOEINF_FFN_MOE,   /* router, gate/up/down_exps, optionally the shared expert */
};

struct moeinf_layer {
    enum moeinf_attn_kind attn;
    enum moeinf_ffn_kind ffn;
    const float *attn_norm;  /* [n_embd] */
    struct moeinf_weight wq; /* [n_embd, n_head * head_dim] */
    struct moeinf_weight wk; /* [n_embd, n_head_kv * head_dim] */
    struct moeinf_weight wv; /* [n_embd, n_head_kv * head_dim] */
    struct moeinf_weight wo; /* [n_head * head_dim, n_embd] */
    const float *bq;         /* [n_head * head_dim] bias or NULL */
    const float *bk;         /* [n_head_kv * head_dim] or NULL */
    const float *bv;         /* [n_head_kv * head_dim] or NULL */
    const float *q_norm;     /* RMSNorm of q before RoPE, or NULL: [head_dim] per head */
    const float *k_norm;     /* or [n_q] / [n_kv] over the whole projection; qk_norm */
    const float *bo;         /* [n_embd] attn_output bias or NULL */
    const float *attn_sinks; /* [n_head] or NULL: a learned logit per head that joins each
                                softmax's denominator (gpt-oss) */
    bool swa;                /* attention limited to the last hp->n_swa positions */
    /* multi-head latent attention (MOEINF_ATTN_MLA); k_mla = head_dim = nope + n_rot */
    struct moeinf_weight wq_a;  /* [n_embd, q_lora], or absent: wq [n_embd, n_head * k_mla] */
    const float *q_a_norm;      /* [q_lora] */
    struct moeinf_weight wq_b;  /* [q_lora, n_head * k_mla]: per head nope then n_rot values */
    struct moeinf_weight wkv_a; /* attn_kv_a_mqa [n_embd, mla_kv + n_rot]: latent, then k_pe */
    const float *kv_a_norm;     /* [mla_kv] */
    struct moeinf_weight wk_b;  /* [nope, mla_kv, n_head]: per head the latent rows of q_nope */
    struct moeinf_weight wv_b;  /* [mla_kv, mla_v, n_head]; or a view of wkv_b's value rows */
    struct moeinf_weight wkv_b; /* older files instead: [mla_kv, n_head * (nope + mla_v)], per
                                   head nope key rows then mla_v value rows (NULL data when
                                   the file has wk_b) */
    const float *ffn_norm;   /* [n_embd] (post_attention_norm in qwen35moe, qwen3next, gpt-oss) */
    /* Gated DeltaNet (MOEINF_ATTN_DELTANET); key_dim = n_k_heads * head_dim, value_dim =
     * n_v_heads * head_dim, conv_dim = 2 * key_dim + value_dim */
    struct moeinf_weight ssm_qkv;    /* attn_qkv [n_embd, conv_dim]: q, k, v */
    struct moeinf_weight ssm_z;      /* attn_gate [n_embd, value_dim]: the output gate z */
    struct moeinf_weight ssm_in;     /* or, in older qwen3next files instead of both, ssm_in
                                        [n_embd, conv_dim + value_dim] laid out per key head:
                                        q, k, then its ratio value heads' v and z */
    struct moeinf_weight ssm_beta;   /* [n_embd, n_v_heads] */
    struct moeinf_weight ssm_alpha;  /* [n_embd, n_v_heads] */
    struct moeinf_weight ssm_ba;     /* or fused ssm_ba [n_embd, 2 n_v_heads], per key head its
                                        ratio betas then its ratio alphas (qwen3next) */
    struct moeinf_weight ssm_conv1d; /* [d_conv, conv_dim] F32: per channel d_conv weights,
                                        oldest input first */
    const float *ssm_dt_bias;        /* [n_v_heads] */
    const float *ssm_a;              /* [n_v_heads], -exp(A_log): the decay rate, < 0 */
    const float *ssm_norm;           /* [head_dim] gated RMSNorm weight */
    struct moeinf_weight ssm_out;    /* [value_dim, n_embd] */
    int recurrent_index;             /* which of the model's recurrent states is this layer's */
    /* routed experts (MOEINF_FFN_MOE) */
    struct moeinf_weight router;    /* [n_embd, n_expert], F32 */
    const float *router_b;          /* [n_expert] router bias or NULL */
    const float *exp_probs_b;       /* [n_expert] selection bias (exp_probs_b) or NULL: added to
                                       the probabilities to choose, not to the weights */
    /* per-expert biases or NULL: [n_expert][n_ff] for gate and up, [n_expert][n_embd] for down,
       resident (small next to the matrices) */
    const float *gate_exps_b;
    const float *up_exps_b;
    const float *down_exps_b;
    struct moeinf_weight gate_exps; /* [n_embd, n_ff, n_expert] */
    struct moeinf_weight up_exps;   /* [n_embd, n_ff, n_expert] */
    struct moeinf_weight down_exps; /* [n_ff, n_embd, n_expert] */
    /* shared expert (n_ff_shexp > 0): always run, scaled by sigmoid(gate_inp_shexp . x) */
    const float *gate_inp_shexp;     /* [n_embd], F32 */
    struct moeinf_weight gate_shexp; /* [n_embd, n_ff_shexp] */
    struct moeinf_weight up_shexp;   /* [n_embd, n_ff_shexp] */
    struct moeinf_weight down_shexp; /* [n_ff_shexp, n_embd] */
    /* dense FFN (MOEINF_FFN_DENSE) */
    struct moeinf_weight ffn_gate; /* [n_embd, n_ff] */
    struct moeinf_weight ffn_up;   /* [n_embd, n_ff] */
    struct moeinf_weight ffn_down; /* [n_ff, n_embd] */
};

struct moeinf_arch; /* model/arch.h */

/* Which elements RoPE rotates together. */
enum moeinf_rope_kind {
    MOEINF_ROPE_NORM, /* adjacent pairs (x[2i], x[2i + 1]) */
    MOEINF_ROPE_NEOX, /* half-split pairs (x[i], x[i + n_rot / 2]) */
    /* The interleaved multi-section RoPE of Qwen3.5 and Qwen3-VL (rope.dimension_sections,
     * hparams.rope_sections). A text token has the same position in its time, height and
     * width sections, so those pairs rotate as NEOX; the pairs the sections leave to the
     * fourth one are at position 0 for text, so they keep their values
     * (moeinf_imrope_positioned, compute/ops.h). */
    MOEINF_ROPE_IMROPE,
};

/* How RoPE angles are scaled beyond the training context (rope.scaling.type). */
enum moeinf_rope_scaling {
    MOEINF_ROPE_SCALING_NONE,   /* also linear: every angle times rope_freq_scale */
    /* YaRN: each pair's angle blends the scaled and the unscaled one by a ramp over the pair
     * index set by yarn_beta_fast/slow and yarn_orig_ctx, and q and k are multiplied by
     * yarn_attn_factor * (1 + 0.1 ln(1 / rope_freq_scale)) (llama.cpp's arithmetic) */
    MOEINF_ROPE_SCALING_YARN,
};

/* How the router turns its logits into the chosen experts and their weights. */
enum moeinf_router_kind {
    /* softmax over every expert, the top k, renormalised when expert_weights_norm, then
     * scaled by expert_weights_scale */
    MOEINF_ROUTER_SOFTMAX,
    /* the top k of the logits, then a softmax over those k (gpt-oss) */
    MOEINF_ROUTER_TOPK_SOFTMAX,
    /* the sigmoid of each logit; the top k of sigmoid + the layer's exp_probs_b; their
     * sigmoids renormalised when expert_weights_norm, then scaled (DeepSeek-V3, GLM-4.5) */
    MOEINF_ROUTER_SIGMOID,
};



/* Where q/k RMSNorm applies (its weights in the layer's q_norm, k_norm). */
enum moeinf_qk_norm {
    MOEINF_QK_NORM_NONE,
    MOEINF_QK_NORM_HEAD,  /* each head's head_dim values */
    MOEINF_QK_NORM_WHOLE, /* the whole q (n_head * head_dim) and k projection */
};

/* The hyper-parameters. The fields after n_ff_shexp say how an architecture computes; they
 * are set at load from the architecture and its metadata, and tests may change them on a
 * loaded model to show that the goldens notice (the forward pass reads them at each eval). */
struct moeinf_hparams {
    int n_vocab;
    int n_embd;
    int n_layer;
    int n_head;
    int n_head_kv;
    int head_dim; /* key_length (= value_length) */
    int n_rot;    /* rope.dimension_count */
    int n_ff;     /* FFN width of one expert (or of the dense FFN) */
    int n_expert; /* 0 for a dense model */
    int n_expert_used;
    int n_ctx_train;
    float rope_base;
    float rope_freq_scale; /* 1 / linear scaling factor */
    float rms_eps;
    int n_ff_shexp; /* shared expert width, 0 = none; it runs for every token, scaled by the
                       sigmoid of its gate (gate_inp_shexp) unless shexp_ungated */
    bool shexp_ungated; /* the shared expert's output is added as it is (DeepSeek, GLM) */
    int n_ff_dense; /* width of the leading dense layers' FFN (leading_dense_block_count), 0 */
    int n_layer_dense_lead; /* layers 0 .. n_layer_dense_lead - 1 have a dense FFN */
    /* multi-head latent attention (MOEINF_ATTN_MLA): head_dim is the query/key head (nope +
     * n_rot), n_head_kv is 1 (the latent row is shared) */
    int mla_q;  /* attention.q_lora_rank, 0 = queries straight from wq */
    int mla_kv; /* attention.kv_lora_rank: latent values per token */
    int mla_v;  /* value head size after expansion (value_length_mla) */
    enum moeinf_rope_kind rope;
    int rope_sections[4]; /* MOEINF_ROPE_IMROPE: rope.dimension_sections */
    enum moeinf_qk_norm qk_norm;
    enum moeinf_router_kind router;
    enum moeinf_glu glu; /* of the routed experts (compute/ops.h) */
    enum moeinf_rope_scaling rope_scaling;
    int yarn_orig_ctx; /* rope.scaling.original_context_length (default context_length) */
    float yarn_beta_fast;
    float yarn_beta_slow;
    float yarn_attn_factor; /* rope.scaling.attn_factor (default 1) */
    int n_swa;              /* attention.sliding_window: the positions a sliding layer sees */
    int swa_pattern;        /* layer il slides iff il % swa_pattern < swa_pattern - 1, unless */
    const uint8_t *swa_layers; /* not NULL: layer il slides iff [il] != 0 (a GGUF bool array) */
    float attn_scale; /* multiplies q.k; 0 = 1 / sqrt(head_dim) (MLA: YaRN's mscale^2 too) */
    float yarn_log_mul; /* rope.scaling.yarn_log_multiplier (DeepSeek's 0.1 mscale_all_dim) */
    int n_expert_groups; /* > 1: experts in groups; only the n_group_used groups whose two */
    int n_group_used;    /* best selection scores sum highest are chosen from */
    bool expert_weights_norm;   /* renormalise the top-k router probabilities to sum 1 */
    float expert_weights_scale; /* multiplies the expert weights; 0 or 1 = none */
    /* Gated DeltaNet layers (n_recurrent > 0); ssm.conv_kernel, ssm.group_count (key heads),
     * ssm.time_step_rank (value heads), ssm.state_size (head_dim of both) */
    int n_recurrent;        /* layers with a recurrent state */
    int full_attn_interval; /* layer il is full attention iff (il + 1) % this == 0, unless */
    const uint8_t *recurrent_layers; /* not NULL: layer il is recurrent iff [il] != 0 (a GGUF
                                        bool array in the file's mapping) */
    int ssm_d_conv;
    int ssm_n_k_heads;
    int ssm_n_v_heads;
    int ssm_head_dim;
    enum moeinf_delta_heads ssm_heads;
};

/* A tensor the model bound, so that code which handles every weight (model/resident.c copies
 * them; the forward pass sizes its activation buffers) needs no list of its own: a matrix
 * view or an F32 vector, each a field of the llm or of one of its layers. */
struct moeinf_bound {
    struct moeinf_weight *w; /* the view, or NULL for a vector */
    const float **v;         /* the vector, or NULL for a view */
    size_t bytes;            /* of its data */
    bool expert;             /* routed experts (gate/up/down_exps): the expert cache's */
};

struct moeinf_llm {
    const struct moeinf_arch *arch;
    struct moeinf_hparams hp;
    struct moeinf_weight tok_embd; /* [n_embd, n_vocab] */
    const float *output_norm;      /* [n_embd] */
    struct moeinf_weight output;   /* [n_embd, n_vocab]; = tok_embd when tied */
    struct moeinf_layer *layers;   /* [n_layer] */
    struct moeinf_bound *bound;    /* [n_bound] every tensor bound, in binding order (a fused
                                      ffn_gate_up_exps as its two views): at most twice the
                                      file's tensors */
    int n_bound;
};

/* Reads hyper-parameters and binds weight views; checks every shape and type. The views
 * borrow g's mapping: g must outlive the llm. */
enum moeinf_status moeinf_llm_init(const struct moeinf_gguf *g, struct moeinf_llm **out,
                                   struct moeinf_error *err);
void moeinf_llm_free(struct moeinf_llm *llm);

/* The architecture's GGUF name ("llama", "qwen2moe", ...). */
const char *moeinf_llm_arch_name(const struct moeinf_llm *llm);

/* The layers with routed experts are the last n_layer - n_layer_dense_lead: the expert cache,
 * routing records and replays count only them, as moe-trace files do (MoE layer ml is decoder
 * layer n_layer_dense_lead + ml). */
static inline int moeinf_n_moe_layers(const struct moeinf_hparams *hp) {
    return hp->n_expert > 0 ? hp->n_layer - hp->n_layer_dense_lead : 0;
}

/* Row r of matrix e of a weight. */
static inline const uint8_t *moeinf_weight_row(const struct moeinf_weight *w, int64_t e,
                                               int64_t r) {
    return w->data + (size_t)e * w->mat_stride + (size_t)r * w->row_bytes;
}

#endif
