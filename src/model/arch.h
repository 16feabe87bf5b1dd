/*
 * arch.h - one architecture: how a GGUF file's metadata and tensors become model.h's
 * hyper-parameters and layers, and which variants of the shared forward pass it computes
 * with. Each architecture is one file, src/model/arch/<name>.c, that defines one
 * struct moeinf_arch; the table in model/arch.c registers it under its GGUF name
 * (general.architecture). docs/ARCHITECTURE.md, "Adding an architecture", is the checklist.
 *
 * moeinf_llm_init (model.c) finds the architecture, then calls
 *   arch->read_hparams(ld, hp)            metadata -> hp, variants chosen
 *   token_embd, output_norm, output       bound by model.c (every architecture has them)
 *   arch->bind_layer(ld, hp, il, lw)      per layer: tensors bound, lw->attn, lw->ffn set
 * The helpers below do the reading and binding that architectures share; an architecture
 * calls the ones it needs, in the order its own checks want.
 */
#ifndef MOEINF_MODEL_ARCH_H
#define MOEINF_MODEL_ARCH_H

#include <stdbool.h>
#include <stdint.h>

#include "gguf/gguf.h"
#include "model/model.h"
#include "moeinf.h"

/* What the helpers read and bind through: the file, its architecture's key prefix, where bound
 * tensors are recorded and where errors go. Made by moeinf_llm_init. */
struct moeinf_arch_loader {
    const struct moeinf_gguf *g;
    const char *arch; /* GGUF name: the prefix of its keys ("qwen3moe.block_count") */
    struct moeinf_llm *llm;
    struct moeinf_error *err;
    bool yarn_log_mul; /* the architecture applies rope.scaling.yarn_log_multiplier (set
                          before reading the geometry); others refuse it */
};

struct moeinf_arch {
    const char *name; /* general.architecture */
    /* Reads every hyper-parameter into hp (zeroed before the call) and sets the variants:
     * hp->rope, qk_norm, router, expert_weights_norm/scale, n_ff_shexp. */
    enum moeinf_status (*read_hparams)(struct moeinf_arch_loader *ld, struct moeinf_hparams *hp);
    /* Binds layer il's tensors (each checked for shape and type) and sets lw->attn, lw->ffn. */
    enum moeinf_status (*bind_layer)(struct moeinf_arch_loader *ld, const struct moeinf_hparams *hp,
                                     int il, struct moeinf_layer *lw);
};

/* The registered architectures (arch.c), one per file of src/model/arch/. */
extern const struct moeinf_arch moeinf_arch_llama;     /* arch/llama.c */
extern const struct moeinf_arch moeinf_arch_qwen2moe;  /* arch/qwen2moe.c */
extern const struct moeinf_arch moeinf_arch_qwen3moe;  /* arch/qwen3moe.c */
extern const struct moeinf_arch moeinf_arch_qwen3vlmoe; /* arch/qwen3vlmoe.c */
extern const struct moeinf_arch moeinf_arch_olmoe;     /* arch/olmoe.c */
extern const struct moeinf_arch moeinf_arch_qwen35moe; /* arch/qwen35moe.c */
extern const struct moeinf_arch moeinf_arch_qwen3next; /* arch/qwen3next.c */
extern const struct moeinf_arch moeinf_arch_gptoss;    /* arch/gptoss.c */
extern const struct moeinf_arch moeinf_arch_deepseek2; /* arch/deepseek2.c */
extern const struct moeinf_arch moeinf_arch_glm4moe;   /* arch/glm4moe.c */
extern const struct moeinf_arch moeinf_arch_minimax_m2; /* arch/minimax_m2.c */

/* The architecture registered under `name` (len bytes, not NUL-terminated), or NULL. */
const struct moeinf_arch *moeinf_arch_find(const char *name, size_t len);
/* Every registered name, comma-separated ("llama, qwen2moe, ..."), into buf (truncated to
 * size, which must be > 0), for messages. */
void moeinf_arch_names(char *buf, size_t size);

/* ---- reading metadata (arch_read.c) ---------------------------------------------------- */

/* Integer key "<arch>.<suffix>" into *out, at most max; when absent, *out keeps its value
 * unless required (then MOEINF_ERR_FORMAT naming the key). */
enum moeinf_status moeinf_arch_get_int(struct moeinf_arch_loader *ld, const char *suffix,
                                       bool required, int max, int *out);
/* Float key "<arch>.<suffix>", the same way. */
enum moeinf_status moeinf_arch_get_float(struct moeinf_arch_loader *ld, const char *suffix,
                                         bool required, float *out);
/* Whether the file has key "<arch>.<suffix>" (to refuse one by name). */
bool moeinf_arch_has_key(const struct moeinf_arch_loader *ld, const char *suffix);
/* Bool key "<arch>.<suffix>", optional. */
enum moeinf_status moeinf_arch_get_bool(struct moeinf_arch_loader *ld, const char *suffix,
                                        bool *out);

/*
 * The geometry every transformer here has: embedding_length, block_count,
 * attention.head_count(_kv), feed_forward_length (into *ff_len; required when ff_required,
 * and then it is hp->n_ff), context_length, attention.key_length / value_length (equal),
 * rope.dimension_count, rope.freq_base, attention.layer_norm_rms_epsilon and the RoPE
 * scaling (none or linear). Checks them; MOEINF_ERR_FORMAT naming the first bad one.
 */
enum moeinf_status moeinf_arch_read_geometry(struct moeinf_arch_loader *ld,
                                             struct moeinf_hparams *hp, bool ff_required,
                                             int *ff_len);

/* The same, where the value head (attention.value_length, into *v_len) may differ from the key
 * head (multi-head latent attention). */
enum moeinf_status moeinf_arch_read_geometry_kv(struct moeinf_arch_loader *ld,
                                                struct moeinf_hparams *hp, bool ff_required,
                                                int *ff_len, int *v_len);

/* The layers after block_count - nextn_predict_layers are next-token-prediction heads, which
 * llama.cpp loads for speculative decoding and never runs in the main pass: hp->n_layer drops
 * them, and they stay unbound. */
enum moeinf_status moeinf_arch_drop_nextn_layers(struct moeinf_arch_loader *ld,
                                                 struct moeinf_hparams *hp);

/* expert_count (required when `required`, then > 0) and, with experts, expert_used_count. */
enum moeinf_status moeinf_arch_read_experts(struct moeinf_arch_loader *ld,
                                            struct moeinf_hparams *hp, bool required);

/* The shared expert's width: expert_shared_feed_forward_length, else `fallback` (the
 * architecture's feed_forward_length); MOEINF_ERR_FORMAT when neither gives one. */
enum moeinf_status moeinf_arch_read_shared_expert(struct moeinf_arch_loader *ld,
                                                  struct moeinf_hparams *hp, int fallback);

/* The width of one routed expert: expert_feed_forward_length, else `fallback` (what the
 * architecture derives from feed_forward_length); MOEINF_ERR_FORMAT when neither gives one. */
enum moeinf_status moeinf_arch_read_expert_width(struct moeinf_arch_loader *ld,
                                                 struct moeinf_hparams *hp, int fallback);

/*
 * The routing keys of llama.cpp's MoE architectures: expert_weights_norm (default
 * norm_default), expert_weights_scale (default none) and expert_gating_func (only 1, softmax,
 * is supported: others are MOEINF_ERR_UNSUPPORTED). Sets hp->router to softmax.
 */
enum moeinf_status moeinf_arch_read_softmax_routing(struct moeinf_arch_loader *ld,
                                                    struct moeinf_hparams *hp, bool norm_default);

/* DeepSeek's and GLM's leading dense layers (leading_dense_block_count, ff_len wide: the
 * architecture's feed_forward_length) and shared experts (expert_shared_count of them, one
 * ungated FFN of that many expert widths). */
enum moeinf_status moeinf_arch_read_dense_lead(struct moeinf_arch_loader *ld,
                                               struct moeinf_hparams *hp, int ff_len);

/* The routing keys of DeepSeek and GLM: expert_gating_func (1 softmax, 2 sigmoid; absent or 0
 * = gating_default), expert_weights_norm (default false), expert_weights_scale (default none),
 * expert_group_count and expert_group_used_count (checked as llama.cpp does). */
enum moeinf_status moeinf_arch_read_routing(struct moeinf_arch_loader *ld,
                                            struct moeinf_hparams *hp, int gating_default);

/* attention.sliding_window (required when `required`, then > 0) into hp->n_swa, and which
 * layers slide: attention.sliding_window_pattern, an array of one bool per layer or an integer
 * n (default default_pattern: every n-th layer, the last of each n, sees everything; llama.cpp's
 * set_swa_pattern). */
enum moeinf_status moeinf_arch_read_sliding_window(struct moeinf_arch_loader *ld,
                                                   struct moeinf_hparams *hp, bool required,
                                                   int default_pattern);
/* Whether layer il attends within the sliding window (hp->n_swa > 0 and the pattern says so). */
bool moeinf_arch_layer_sliding(const struct moeinf_hparams *hp, int il);

/* ---- binding tensors (arch_bind.c) ----------------------------------------------------- */

/* Tensor `name` with shape (ne0, ne1, ne2; 0 = any, for the vocabulary dimension) and a type
 * moeinf computes with, into *w; absent: an error unless optional (then w->data is NULL). */
enum moeinf_status moeinf_arch_bind(struct moeinf_arch_loader *ld, const char *name, int64_t ne0,
                                    int64_t ne1, int64_t ne2, bool optional,
                                    struct moeinf_weight *w);
/* A 1-D F32 vector of n elements (norm weights, biases); *out NULL when absent and optional. */
enum moeinf_status moeinf_arch_bind_vec(struct moeinf_arch_loader *ld, const char *name, int64_t n,
                                        bool optional, const float **out);

/* moeinf_arch_bind of "blk.<il>.<suffix>". */
enum moeinf_status moeinf_arch_bind_layer(struct moeinf_arch_loader *ld, int il, const char *suffix,
                                          int64_t ne0, int64_t ne1, int64_t ne2, bool optional,
                                          struct moeinf_weight *w);
/* moeinf_arch_bind_vec of "blk.<il>.<suffix>". */
enum moeinf_status moeinf_arch_bind_layer_vec(struct moeinf_arch_loader *ld, int il,
                                              const char *suffix, int64_t n, bool optional,
                                              const float **out);
/* A required F32 tensor [ne0, ne1] (e.g. per-expert biases, one row of ne0 per expert). */
enum moeinf_status moeinf_arch_bind_f32(struct moeinf_arch_loader *ld, const char *name,
                                        int64_t ne0, int64_t ne1, const float **out);

/* Layer il's attention: attn_norm, attn_q, attn_k, attn_v, attn_output (lw->attn full). */
enum moeinf_status moeinf_arch_bind_attention(struct moeinf_arch_loader *ld,
                                              const struct moeinf_hparams *hp, int il,
                                              struct moeinf_layer *lw);
/* The same with attn_q q_rows rows (2 n_head head_dim for a gated layer's q and gate). */
enum moeinf_status moeinf_arch_bind_attention_q(struct moeinf_arch_loader *ld,
                                                const struct moeinf_hparams *hp, int il,
                                                int64_t q_rows, struct moeinf_layer *lw);
/* attn_q.bias, attn_k.bias, attn_v.bias: all three required, or each optional. */
enum moeinf_status moeinf_arch_bind_qkv_bias(struct moeinf_arch_loader *ld,
                                             const struct moeinf_hparams *hp, int il, bool required,
                                             struct moeinf_layer *lw);
/* attn_q_norm, attn_k_norm, shaped as hp->qk_norm says (nothing for NONE). */
enum moeinf_status moeinf_arch_bind_qk_norm(struct moeinf_arch_loader *ld,
                                            const struct moeinf_hparams *hp, int il,
                                            struct moeinf_layer *lw);
/* ffn_norm and the dense SwiGLU FFN (ffn_gate, ffn_up, ffn_down), n_ff_dense wide where the
 * model has leading dense layers, else n_ff. */
enum moeinf_status moeinf_arch_bind_dense_ffn(struct moeinf_arch_loader *ld,
                                              const struct moeinf_hparams *hp, int il,
                                              struct moeinf_layer *lw);
/* The same with the pre-FFN norm named `norm` ("blk.<il>." is prefixed). */
enum moeinf_status moeinf_arch_bind_dense_ffn_norm(struct moeinf_arch_loader *ld,
                                                   const struct moeinf_hparams *hp, int il,
                                                   const char *norm, struct moeinf_layer *lw);
/* The layer of llama, qwen2moe, qwen3moe and olmoe: full attention with its q/k/v biases
 * (required, or each optional) and the q/k norm hp->qk_norm says, then the routed-expert FFN,
 * or the dense one when the model has no experts. */
enum moeinf_status moeinf_arch_bind_std_layer(struct moeinf_arch_loader *ld,
                                              const struct moeinf_hparams *hp, int il,
                                              bool bias_required, struct moeinf_layer *lw);
/* ffn_norm, the router (F32) and the routed experts (ffn_gate/up/down_exps; gate and up must
 * share an activation type), plus the shared expert when hp->n_ff_shexp > 0
 * (ffn_gate_inp_shexp, ffn_gate/up/down_shexp). */
enum moeinf_status moeinf_arch_bind_moe_ffn(struct moeinf_arch_loader *ld,
                                            const struct moeinf_hparams *hp, int il,
                                            struct moeinf_layer *lw);
/* The same with the pre-FFN norm named `norm` ("blk.<il>." is prefixed) instead of ffn_norm. */
enum moeinf_status moeinf_arch_bind_moe_ffn_norm(struct moeinf_arch_loader *ld,
                                                 const struct moeinf_hparams *hp, int il,
                                                 const char *norm, struct moeinf_layer *lw);

/* ---- hybrid Gated DeltaNet architectures (arch_deltanet.c) -------------------------------- */

/* nextn_predict_layers (blocks after the rest, left unbound), the ssm.* keys into hp->ssm_*,
 * and which layers are recurrent (attention.recurrent_layers, else full_attention_interval,
 * default 4) with their count. */
enum moeinf_status moeinf_arch_read_deltanet(struct moeinf_arch_loader *ld,
                                             struct moeinf_hparams *hp);
/* What qwen35moe and qwen3next share: the geometry, experts and a shared expert (its width
 * expert_shared_feed_forward_length, else feed_forward_length), moeinf_arch_read_deltanet,
 * q/k RMSNorm per head and softmax routing renormalised by default. RoPE is the caller's. */
enum moeinf_status moeinf_arch_read_hybrid(struct moeinf_arch_loader *ld,
                                           struct moeinf_hparams *hp);
/* Whether layer il is a Gated DeltaNet layer (else gated full attention). */
bool moeinf_arch_layer_recurrent(const struct moeinf_hparams *hp, int il);
/* rope.dimension_sections into hp->rope_sections; hp->rope = MOEINF_ROPE_IMROPE (model.h). */
enum moeinf_status moeinf_arch_read_imrope(struct moeinf_arch_loader *ld,
                                           struct moeinf_hparams *hp);
/* attn_norm, attn_q (q and gate per head), attn_k, attn_v, attn_output, q/k norm per head. */
enum moeinf_status moeinf_arch_bind_gated_attention(struct moeinf_arch_loader *ld,
                                                    const struct moeinf_hparams *hp, int il,
                                                    struct moeinf_layer *lw);
/* attn_norm and a Gated DeltaNet layer's tensors; `next` selects qwen3next's layout (fused
 * ssm_ba, and the older ssm_in accepted for attn_qkv + attn_gate). */
enum moeinf_status moeinf_arch_bind_deltanet(struct moeinf_arch_loader *ld,
                                             const struct moeinf_hparams *hp, int il, bool next,
                                             struct moeinf_layer *lw);
/* Layer il of qwen35moe / qwen3next: Gated DeltaNet or gated full attention as the pattern
 * says, then post_attention_norm and the routed experts with the shared expert. */
enum moeinf_status moeinf_arch_bind_hybrid_layer(struct moeinf_arch_loader *ld,
                                                 const struct moeinf_hparams *hp, int il, bool next,
                                                 struct moeinf_layer *lw);

#endif
