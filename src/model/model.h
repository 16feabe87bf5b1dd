/*
 * model.h - hyper-parameters and weight views of a loaded model (arch `llama`: dense Llama
 * and the Mixtral family with routed experts). Weights are views into the mapped GGUF file
 * (see docs/ARCHITECTURE.md); nothing is copied at load.
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
    const float *ffn_norm;           /* [n_embd] */
    /* routed experts (n_expert > 0) */
    struct moeinf_weight router;     /* [n_embd, n_expert], F32 */
    struct moeinf_weight gate_exps;  /* [n_embd, n_ff, n_expert] */
    struct moeinf_weight up_exps;    /* [n_embd, n_ff, n_expert] */
    struct moeinf_weight down_exps;  /* [n_ff, n_embd, n_expert] */
    /* dense FFN (n_expert == 0) */
    struct moeinf_weight ffn_gate;   /* [n_embd, n_ff] */
    struct moeinf_weight ffn_up;     /* [n_embd, n_ff] */
    struct moeinf_weight ffn_down;   /* [n_ff, n_embd] */
};

struct moeinf_hparams {
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

/* Row r of matrix e of a weight. */
static inline const uint8_t *moeinf_weight_row(const struct moeinf_weight *w, int64_t e,
                                               int64_t r) {
    return w->data + (size_t)e * w->mat_bytes + (size_t)r * w->row_bytes;
}

#endif
