/*
 * model.h - hyper-parameters and weight views of a loaded model: arch `llama` (dense Llama and
 * the Mixtral family with routed experts), `qwen2moe` (a shared expert behind a sigmoid gate,
 * q/k/v biases), `qwen3moe` (per-head q/k RMSNorm) and `olmoe` (q/k RMSNorm over the whole
 * projection). Weights are views into the mapped GGUF file (see docs/ARCHITECTURE.md);
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

#include "gguf/gguf.h"
#include "moeinf.h"
#include "quant/quant.h"

#define MOEINF_MAX_EXPERT_USED 64

struct moeinf_weight {
    const uint8_t *data;   /* first row; NULL when the tensor is absent */
    enum moeinf_type type;
    int64_t n_in;          /* elements per row (ne[0]) */
    int64_t n_out;         /* rows per matrix (ne[1]) */
    int64_t n_mat;         /* matrices (experts) (ne[2]), 1 for plain matrices */
    size_t row_bytes;
    size_t mat_bytes;      /* n_out * row_bytes: the stride between experts */
};

struct moeinf_layer {
    const float *attn_norm;          /* [n_embd] */
    struct moeinf_weight wq;         /* [n_embd, n_head * head_dim] */
    struct moeinf_weight wk;         /* [n_embd, n_head_kv * head_dim] */
    struct moeinf_weight wv;         /* [n_embd, n_head_kv * head_dim] */
    struct moeinf_weight wo;         /* [n_head * head_dim, n_embd] */
    const float *bq;                 /* [n_head * head_dim] bias or NULL (qwen2moe) */
    const float *bk;                 /* [n_head_kv * head_dim] or NULL */
    const float *bv;                 /* [n_head_kv * head_dim] or NULL */
    const float *q_norm;             /* RMSNorm of q before RoPE, or NULL: [head_dim] per head */
    const float *k_norm;             /* (qwen3moe) or [n_q] / [n_kv] whole (olmoe); see qk_norm */
    const float *ffn_norm;           /* [n_embd] */
    /* routed experts (n_expert > 0) */
    struct moeinf_weight router;     /* [n_embd, n_expert], F32 */
    struct moeinf_weight gate_exps;  /* [n_embd, n_ff, n_expert] */
    struct moeinf_weight up_exps;    /* [n_embd, n_ff, n_expert] */
    struct moeinf_weight down_exps;  /* [n_ff, n_embd, n_expert] */
    /* shared expert (n_ff_shexp > 0): always run, scaled by sigmoid(gate_inp_shexp . x) */
    const float *gate_inp_shexp;     /* [n_embd], F32 */
    struct moeinf_weight gate_shexp; /* [n_embd, n_ff_shexp] */
    struct moeinf_weight up_shexp;   /* [n_embd, n_ff_shexp] */
    struct moeinf_weight down_shexp; /* [n_ff_shexp, n_embd] */
    /* dense FFN (n_expert == 0) */
    struct moeinf_weight ffn_gate;   /* [n_embd, n_ff] */
    struct moeinf_weight ffn_up;     /* [n_embd, n_ff] */
    struct moeinf_weight ffn_down;   /* [n_ff, n_embd] */
};

enum moeinf_arch {
    MOEINF_ARCH_LLAMA,
    MOEINF_ARCH_QWEN2MOE,
    MOEINF_ARCH_QWEN3MOE,
    MOEINF_ARCH_OLMOE,
};

/* Where q/k RMSNorm applies (its weights in the layer's q_norm, k_norm). */
enum moeinf_qk_norm {
    MOEINF_QK_NORM_NONE,
    MOEINF_QK_NORM_HEAD,  /* each head's head_dim values (qwen3moe) */
    MOEINF_QK_NORM_WHOLE, /* the whole q (n_head * head_dim) and k projection (olmoe) */
};

/* The hyper-parameters. The fields after n_ff_shexp say how an architecture computes; they
 * are set at load from the architecture and its metadata, and tests may change them on a
 * loaded model to show that the goldens notice (the forward pass reads them at each eval). */
struct moeinf_hparams {
    enum moeinf_arch arch;
    int n_vocab;
    int n_embd;
    int n_layer;
    int n_head;
    int n_head_kv;
    int head_dim;       /* key_length (= value_length) */
    int n_rot;          /* rope.dimension_count */
    int n_ff;           /* FFN width of one expert (or of the dense FFN) */
    int n_expert;       /* 0 for a dense model */
    int n_expert_used;
    int n_ctx_train;
    float rope_base;
    float rope_freq_scale; /* 1 / linear scaling factor */
    float rms_eps;
    int n_ff_shexp; /* shared expert width, 0 = none */
    bool rope_neox; /* RoPE on half-split pairs (x[i], x[i + n_rot/2]); else adjacent */
    enum moeinf_qk_norm qk_norm;
    bool expert_weights_norm;   /* renormalise the top-k router probabilities to sum 1 */
    float expert_weights_scale; /* multiplies the expert weights; 0 or 1 = none */
};

struct moeinf_llm {
    struct moeinf_hparams hp;
    struct moeinf_weight tok_embd; /* [n_embd, n_vocab] */
    const float *output_norm;      /* [n_embd] */
    struct moeinf_weight output;   /* [n_embd, n_vocab]; = tok_embd when tied */
    struct moeinf_layer *layers;   /* [n_layer] */
};

/* Reads hyper-parameters and binds weight views; checks every shape and type. The views
 * borrow g's mapping: g must outlive the llm. */
enum moeinf_status moeinf_llm_init(const struct moeinf_gguf *g, struct moeinf_llm **out,
                                   struct moeinf_error *err);
void moeinf_llm_free(struct moeinf_llm *llm);

/* The architecture's GGUF name ("llama", "qwen2moe", ...). */
const char *moeinf_arch_name(enum moeinf_arch arch);

/* Row r of matrix e of a weight. */
static inline const uint8_t *moeinf_weight_row(const struct moeinf_weight *w, int64_t e,
                                               int64_t r) {
    return w->data + (size_t)e * w->mat_bytes + (size_t)r * w->row_bytes;
}

#endif
