/*
 * moeinf.h - the one public header of moeinf, a C engine for Mixture-of-Experts language
 * models that are larger than the machine's fast memory.
 *
 * Conventions (see docs/ARCHITECTURE.md):
 *   - Every fallible function returns enum moeinf_status and takes `struct moeinf_error *err`
 *     (may be NULL) last; on failure err->msg holds one line naming the problem. Out
 *     pointers are written only on success.
 *   - Whoever calls an _init/_load/_open function calls the matching _free; every _free
 *     accepts NULL.
 *   - The library never exits, aborts on input, or writes to stdout.
 *   - Not thread-safe unless stated: one context is driven by one thread at a time.
 */
#ifndef MOEINF_H
#define MOEINF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---- status ---------------------------------------------------------------------------- */

enum moeinf_status {
    MOEINF_OK = 0,
    MOEINF_ERR_ARG,         /* impossible option or argument */
    MOEINF_ERR_IO,          /* read/write failed; errno text in the message */
    MOEINF_ERR_FORMAT,      /* malformed or hostile file, trace or request */
    MOEINF_ERR_UNSUPPORTED, /* valid but not handled: arch, quant type, rope scaling */
    MOEINF_ERR_NOMEM,
    MOEINF_ERR_DEVICE,      /* accelerator failure */
    MOEINF_ERR_ABORTED,     /* cancelled by a callback */
    MOEINF_ERR_CONTEXT,     /* the context window is full */
};

struct moeinf_error {
    enum moeinf_status status;
    char msg[256];
};

/* Short constant name of a status ("ok", "format error", ...). */
const char *moeinf_status_str(enum moeinf_status status);

/* ---- files: inspect and generate (gguf module) ------------------------------------------- */

/* Prints the metadata and tensor table of a GGUF file to `out`. */
enum moeinf_status moeinf_inspect(const char *path, FILE *out, struct moeinf_error *err);

/* Geometry of a model that moeinf_gen_model writes with random weights. */
struct moeinf_gen_params {
    const char *arch;       /* "llama" (Mixtral family) */
    int n_layer;            /* transformer blocks */
    int n_expert;           /* routed experts per layer; 0 = dense model */
    int n_expert_used;      /* top-k */
    int n_expert_shared;    /* shared experts (archs that have them) */
    int n_embd;             /* model width */
    int n_ff;               /* FFN width of one expert (or of the dense FFN) */
    int n_head;             /* query heads */
    int n_head_kv;          /* KV heads */
    int n_ctx_train;        /* context_length written to metadata */
    int type;               /* GGML tensor type of the big matrices (0 F32, 1 F16, 2 Q4_0, 8 Q8_0) */
    uint64_t seed;
    const char *vocab_from; /* GGUF whose tokenizer is copied, or NULL for a byte vocabulary */
};

/* The defaults: the small MoE used as the embedded default model. */
struct moeinf_gen_params moeinf_gen_params_default(void);

/* Writes a GGUF with random weights, streaming to `path` (via a temp file and rename). */
enum moeinf_status moeinf_gen_model(const struct moeinf_gen_params *params, const char *path,
                                    struct moeinf_error *err);

/* ---- engine: model, context, decode (engine.c) ------------------------------------------- */

struct moeinf_model;   /* weights + vocabulary; read-only after load, shareable */
struct moeinf_context; /* KV cache, scratch, threads; one request stream */

enum moeinf_kv_type {
    MOEINF_KV_F16 = 0,
    MOEINF_KV_F32 = 1,
};

struct moeinf_model_params {
    int reserved; /* no options yet */
};

struct moeinf_context_params {
    int n_ctx;                   /* context window in tokens (default 4096) */
    int n_batch;                 /* prefill micro-batch (default 512) */
    int n_threads;               /* 0 = the CPUs this process may use */
    enum moeinf_kv_type kv_type; /* default F16 */
};

struct moeinf_model_params moeinf_model_params_default(void);
struct moeinf_context_params moeinf_context_params_default(void);

enum moeinf_status moeinf_model_load(const char *path, const struct moeinf_model_params *params,
                                     struct moeinf_model **out, struct moeinf_error *err);
void moeinf_model_free(struct moeinf_model *model);

int moeinf_model_n_vocab(const struct moeinf_model *model);
int moeinf_model_n_ctx_train(const struct moeinf_model *model);
/* One line describing the model (arch, layers, experts, types) into buf. */
void moeinf_model_desc(const struct moeinf_model *model, char *buf, size_t size);

enum moeinf_status moeinf_context_init(struct moeinf_model *model,
                                       const struct moeinf_context_params *params,
                                       struct moeinf_context **out, struct moeinf_error *err);
void moeinf_context_free(struct moeinf_context *ctx);

/* Forgets the KV cache: the next decode starts at position 0. */
void moeinf_context_reset(struct moeinf_context *ctx);
int moeinf_context_n_past(const struct moeinf_context *ctx);

/*
 * Runs `n` tokens through the model, appending them to the context (prefill when n > 1, in
 * micro-batches of n_batch). If `logits` is not NULL it receives either every position's
 * logits (all_logits: n x n_vocab floats) or the last position's (n_vocab floats).
 * MOEINF_ERR_CONTEXT if n_past + n would exceed n_ctx (nothing is appended then);
 * MOEINF_ERR_ARG for a token id outside the vocabulary.
 */
enum moeinf_status moeinf_decode(struct moeinf_context *ctx, const int32_t *ids, int n,
                                 float *logits, bool all_logits, struct moeinf_error *err);

/* ---- tokenizer (tokenizer module) -------------------------------------------------------- */

/*
 * Tokenizes `len` bytes of `text`. add_special: prepend BOS (and append EOS) iff the model's
 * metadata asks for it. parse_special: text that spells a control token becomes that token.
 * On success *out_ids is malloc'ed (caller frees with free()) and *n_out set.
 */
enum moeinf_status moeinf_tokenize(const struct moeinf_model *model, const char *text, size_t len,
                                   bool add_special, bool parse_special, int32_t **out_ids,
                                   size_t *n_out, struct moeinf_error *err);

/* The bytes a token stands for (byte tokens decoded, the SentencePiece space restored). The
 * returned pointer borrows the model's storage. Control tokens give their text iff special. */
const char *moeinf_token_piece(const struct moeinf_model *model, int32_t id, bool special,
                               size_t *len);

int32_t moeinf_token_bos(const struct moeinf_model *model); /* -1 if none */
int32_t moeinf_token_eos(const struct moeinf_model *model); /* -1 if none */
/* True for every end-of-generation token the vocabulary marks (EOS, EOT, ...). */
bool moeinf_token_is_eog(const struct moeinf_model *model, int32_t id);

/* ---- sampler (sampler module) ------------------------------------------------------------ */

struct moeinf_sampler;

struct moeinf_sampler_params {
    float temp;           /* 0 = greedy (default 0.8) */
    int top_k;            /* 0 = off (default 40) */
    float top_p;          /* 1 = off (default 0.95) */
    float min_p;          /* 0 = off (default 0.05) */
    float repeat_penalty; /* 1 = off (default 1.0) */
    int repeat_last_n;    /* window of the repetition penalty (default 64) */
    uint64_t seed;        /* same seed, same choices */
};

struct moeinf_sampler_params moeinf_sampler_params_default(void);
enum moeinf_status moeinf_sampler_init(const struct moeinf_sampler_params *params, int n_vocab,
                                       struct moeinf_sampler **out, struct moeinf_error *err);
void moeinf_sampler_free(struct moeinf_sampler *s);
/* Picks a token from one row of logits (not modified). */
int32_t moeinf_sampler_sample(struct moeinf_sampler *s, const float *logits);
/* Tells the sampler a token was emitted or fed (for the repetition penalty). */
void moeinf_sampler_accept(struct moeinf_sampler *s, int32_t id);

/* ---- expert cache simulator (sim module) ------------------------------------------------- */

/*
 * Replays a recorded expert-routing trace ("moe-trace v1", described in src/sim/trace.h)
 * through one expert-cache policy, with the same cache and policy code the engine uses.
 *
 * Replay: requests in file order; inside a request tokens in order; inside a token layers
 * 0..L-1; inside a layer the listed experts in order. One cache of C slots is shared by all
 * layers and starts empty. An access is a hit when the expert is resident; otherwise a miss,
 * and the expert is always admitted; when the cache is full the policy chooses the victim
 * among resident experts not needed by the current (token, layer) step. After each step the
 * policy may propose up to `prefetch` experts, which are admitted at once (evicting likewise).
 *
 * Time model (when expert_bytes, bandwidth_gbps and compute_ms are all > 0), per token:
 *   load_ms  = expert_bytes / (bandwidth_gbps * 1e9) * 1e3
 *   token_ms = compute_ms + misses * load_ms + max(0, prefetches * load_ms - compute_ms)
 * where misses are the token's demand misses (they stall) and prefetches the loads proposed
 * after the token's layer steps (they share the link but overlap compute).
 */
struct moeinf_sim_params {
    const char *trace_path;
    const char *policy;    /* a name from moeinf_sim_policy_name; NULL = the default (reuse) */
    int cache_experts;     /* slots shared by all layers; 0 = use cache_percent */
    double cache_percent;  /* % of n_layers x n_experts, rounded to the nearest integer */
    int prefetch;          /* most prefetches per (token, layer) step (default 0) */
    int warmup_requests;   /* the first requests are replayed but not counted (default 0) */
    double expert_bytes;   /* time model: bytes of one expert */
    double bandwidth_gbps; /* time model: slow -> fast tier, in 1e9 bytes/s */
    double compute_ms;     /* time model: compute time of one token */
    const char *eamc_path; /* policy state (EAMC) file: loaded before the replay when it
                              exists, saved after it; NULL = start empty, save nothing */
    int eamc_capacity;     /* entries of a new EAMC (no file yet); 0 = the policy's default */
};

struct moeinf_sim_result {
    char policy[32];
    int n_layers;
    int n_experts;
    int top_k;
    int cache_experts;           /* the cache size used (after rounding a percentage) */
    uint64_t requests;           /* counted requests, tokens and decode tokens */
    uint64_t tokens;
    uint64_t decode_tokens;
    uint64_t accesses;           /* counted demand accesses, every phase */
    uint64_t hits;               /* of them, found resident (prefetched or not) */
    uint64_t decode_accesses;    /* the part in decode tokens */
    uint64_t decode_hits;
    uint64_t prefetch_loads;     /* experts a prefetch brought in */
    uint64_t prefetch_hits;      /* demand hits on an expert a prefetch brought in (once each) */
    uint64_t wasted_prefetches;  /* prefetched experts evicted or left at the end unused */
    bool timed;                  /* the time model ran */
    double ms_per_token;         /* time model: mean over counted tokens (0 if none) */
    double decode_ms_per_token;  /* time model: mean over counted decode tokens (0 if none) */
};

/* Defaults: no trace, default policy, no cache size (one must be set), no prefetch, no
 * warmup, time model off. */
struct moeinf_sim_params moeinf_sim_params_default(void);

/* Runs one replay. MOEINF_ERR_ARG for an unknown policy, a missing cache size or one smaller
 * than top_k; MOEINF_ERR_FORMAT (message "<path>:<line>: <defect>: ...") for a malformed
 * trace; MOEINF_ERR_IO when it cannot be read. */
enum moeinf_status moeinf_sim_run(const struct moeinf_sim_params *params,
                                  struct moeinf_sim_result *out, struct moeinf_error *err);

/* The policies the simulator knows, by index (NULL past the end): name and one-line summary.
 * The strings are static. */
const char *moeinf_sim_policy_name(size_t i);
const char *moeinf_sim_policy_summary(size_t i);
/* The policy used when params.policy is NULL. */
const char *moeinf_sim_default_policy(void);

#ifdef __cplusplus
}
#endif

#endif /* MOEINF_H */
