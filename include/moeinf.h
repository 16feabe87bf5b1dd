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
    int n_embd_head;        /* head dim (key/value length); 0 = n_embd / n_head */
    bool tied_output;       /* no output.weight: the lm_head is token_embd */
    float rope_freq_base;   /* RoPE base theta (default 1e6, as Mixtral) */
    float rms_eps;          /* RMSNorm epsilon (default 1e-5) */
    int n_threads;          /* generator threads; 0 = the online CPUs (bytes do not depend on it) */
};

/* The defaults: the small MoE used as the embedded default model (4 layers, 8 experts,
 * top-2, n_embd 256, n_ff 512, 8 heads, 4 KV heads, Q8_0, its own 1010-token vocabulary;
 * about 15 MB). */
struct moeinf_gen_params moeinf_gen_params_default(void);

/* Checks a geometry without writing anything: MOEINF_ERR_ARG naming the first problem
 * (heads not dividing n_embd, KV heads not dividing heads, top-k > experts, rows not a
 * multiple of 32 for quantized types, an arch other than "llama", ...). */
enum moeinf_status moeinf_gen_params_check(const struct moeinf_gen_params *params,
                                           struct moeinf_error *err);

/* Writes a GGUF with random weights, streaming to `path` (via a temp file and rename), one
 * row chunk at a time: memory stays a few MB whatever the model size. Deterministic: the
 * same params (seed included) give the same bytes. On failure no file is left at `path`. */
enum moeinf_status moeinf_gen_model(const struct moeinf_gen_params *params, const char *path,
                                    struct moeinf_error *err);

/* ---- outputs (base module) ---------------------------------------------------------------- */

/*
 * Files moeinf writes (gen-model, traces, heatmaps, EAMC files) replace a regular file (or
 * create a new one) atomically: they are written to "<path>.tmp.<pid>" and renamed over path
 * only when complete. A character device or FIFO (/dev/null, a named pipe) is written in
 * place instead; a directory, block device or socket is refused.
 */

/* Checks, before any work, that an output can be written at path: a new or regular file needs
 * an existing folder it may write in; a device or FIFO must be writable. MOEINF_ERR_IO with a
 * line naming the path and the problem. */
enum moeinf_status moeinf_file_check_output(const char *path, struct moeinf_error *err);

/* The temp file an atomic write of path by this process uses, into buf (truncated to size);
 * returns its full length. A front end that may be killed mid-write removes it in its signal
 * handler (unlink is async-signal-safe). */
size_t moeinf_file_temp_path(const char *path, char *buf, size_t size);

/* ---- engine: model, context, decode (engine.c) ------------------------------------------- */

struct moeinf_model;   /* weights + vocabulary; read-only after load, shareable */
struct moeinf_context; /* KV cache, scratch, threads; one request stream */

enum moeinf_kv_type {
    MOEINF_KV_F16 = 0,
    MOEINF_KV_F32 = 1,
};

struct moeinf_model_params {
    bool no_mmap; /* read the file once into memory instead of mapping it (default false) */
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
/* Weight bytes one decode token reads: every dense matrix, the router, n_expert_used experts
 * per MoE layer, one embedding row and the lm_head (the memory-bandwidth bound of decode). */
uint64_t moeinf_model_decode_bytes(const struct moeinf_model *model);

enum moeinf_status moeinf_context_init(struct moeinf_model *model,
                                       const struct moeinf_context_params *params,
                                       struct moeinf_context **out, struct moeinf_error *err);
void moeinf_context_free(struct moeinf_context *ctx);

/* Forgets the KV cache: the next decode starts at position 0. */
void moeinf_context_reset(struct moeinf_context *ctx);
int moeinf_context_n_past(const struct moeinf_context *ctx);
int moeinf_context_n_threads(const struct moeinf_context *ctx);
/* Name of the CPU kernel table in use ("avx512", "avx2", "scalar"). */
const char *moeinf_context_kernels(const struct moeinf_context *ctx);

/*
 * Runs `n` tokens through the model, appending them to the context (prefill when n > 1, in
 * micro-batches of n_batch). If `logits` is not NULL it receives either every position's
 * logits (all_logits: n x n_vocab floats) or the last position's (n_vocab floats).
 * MOEINF_ERR_CONTEXT if n_past + n would exceed n_ctx (nothing is appended then);
 * MOEINF_ERR_ARG for a token id outside the vocabulary; MOEINF_ERR_FORMAT when the model
 * computes NaN or infinity (weights that hold them, or activations that overflow), naming
 * the first layer whose output is not finite (the micro-batch is not appended).
 */
enum moeinf_status moeinf_decode(struct moeinf_context *ctx, const int32_t *ids, int n,
                                 float *logits, bool all_logits, struct moeinf_error *err);

/*
 * Routing record: from now on every token this context evaluates appends its expert choices
 * (per MoE layer, the top-k in router-rank order) to a moe-trace v1 file (the format of
 * `moeinf sim`), written atomically when the record is closed (or the context freed). A
 * request starts whenever a decode begins at position 0; tokens of a multi-token decode are
 * prefill (P), single tokens decode (D). `tag` names the requests (no whitespace; NULL: "-").
 * MOEINF_ERR_ARG for a dense model or a record already open.
 */
enum moeinf_status moeinf_context_record_open(struct moeinf_context *ctx, const char *path,
                                              const char *tag, struct moeinf_error *err);
enum moeinf_status moeinf_context_record_close(struct moeinf_context *ctx,
                                               struct moeinf_error *err);

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

/*
 * Streaming text of generated ids: feed ids one at a time and print what comes back; bytes
 * of a UTF-8 character split across tokens are held until the character is complete, so
 * streamed output never splits a character, and it is always valid UTF-8: bytes that cannot
 * form a character (byte tokens in a bad order) come out as U+FFFD, one per maximal invalid
 * subpart. The returned bytes are borrowed until the next call. Control tokens print nothing.
 */
struct moeinf_text_stream;

enum moeinf_status moeinf_text_stream_init(const struct moeinf_model *model,
                                           struct moeinf_text_stream **out,
                                           struct moeinf_error *err);
void moeinf_text_stream_free(struct moeinf_text_stream *s);
const char *moeinf_text_stream_push(struct moeinf_text_stream *s, int32_t id, size_t *len);
/* Ends the text: a character still incomplete at the end of generation comes out as one
 * U+FFFD (nothing when none is held). */
const char *moeinf_text_stream_flush(struct moeinf_text_stream *s, size_t *len);

/* ---- sampler (sampler module) ------------------------------------------------------------ */

/*
 * The chain (llama.cpp's default order): repetition penalty over the last repeat_last_n
 * accepted tokens (positive logits divided by repeat_penalty, negative ones multiplied; each
 * distinct token once); then temp == 0 picks the argmax (lowest id on exact ties); otherwise
 * top-k, top-p, min-p (top-p and min-p on the probabilities before temperature), temperature,
 * softmax, and a draw from a PRNG (xoshiro256** seeded by splitmix64(seed)) held in the
 * sampler. Ties in the ordering go to the lower id. NaN logits count as -inf.
 */
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

struct moeinf_sampler_params moeinf_sampler_params_default(void); /* seed 0xC0FFEE */
/* MOEINF_ERR_ARG for n_vocab <= 0, temp < 0 or not finite, top_k < 0, top_p outside (0, 1],
 * min_p outside [0, 1], repeat_penalty <= 0 or not finite, repeat_last_n < 0. params may be
 * NULL (defaults). */
enum moeinf_status moeinf_sampler_init(const struct moeinf_sampler_params *params, int n_vocab,
                                       struct moeinf_sampler **out, struct moeinf_error *err);
void moeinf_sampler_free(struct moeinf_sampler *s);
/* Picks a token from one row of logits (not modified). */
int32_t moeinf_sampler_sample(struct moeinf_sampler *s, const float *logits);
/* Tells the sampler a token was emitted or fed (for the repetition penalty); ids outside the
 * vocabulary are ignored. */
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

/* ---- trace tools (sim module) ------------------------------------------------------------ */

/*
 * Tools over moe-trace v1 files (src/sim/trace.h) for experiments and for looking at routing:
 * one request's expert activation matrices (EAM: the L x E matrix of counts M[l][e] = tokens
 * routed to expert e of layer l), how skewed they are, a heatmap of them; subsets and
 * concatenations of traces; and trace-wide statistics that explain what cache policies see.
 * Everything streams the trace: memory is O(L x E) per kept EAM, never O(tokens).
 */

enum moeinf_trace_phase {
    MOEINF_TRACE_PHASE_PREFILL = 0,
    MOEINF_TRACE_PHASE_DECODE = 1,
    MOEINF_TRACE_PHASE_ALL = 2, /* both: counts summed; heatmap panels side by side */
};

/* One request's EAMs, prefill and decode kept apart (as the paper keeps them). */
struct moeinf_trace_eam {
    int n_layers;
    int n_experts;
    int top_k;
    int64_t request_id;
    int64_t index;       /* 0-based position among the trace's requests */
    char tag[256];       /* its "# req" tag (truncated); "-" when the trace has no req lines */
    char model[256];     /* the trace's "model" header; empty when absent */
    int64_t n_tokens[2]; /* tokens by phase: [MOEINF_TRACE_PHASE_PREFILL], [..._DECODE] */
    uint32_t *counts[2]; /* per phase (n_layers, n_experts): counts[p][l * n_experts + e] */
};

/* Reads one request of a trace: the one with id `request_id` when it is >= 0, else the one at
 * position `index` (0-based). Reads up to the end of that request only. MOEINF_ERR_ARG when
 * the trace has no such request (the message says what it has). */
enum moeinf_status moeinf_trace_eam_load(const char *path, int64_t request_id, int64_t index,
                                         struct moeinf_trace_eam **out, struct moeinf_error *err);
void moeinf_trace_eam_free(struct moeinf_trace_eam *m);

/* M[l][e] of one phase (ALL: prefill + decode). */
uint32_t moeinf_trace_eam_count(const struct moeinf_trace_eam *m, enum moeinf_trace_phase phase,
                                int layer, int expert);

/*
 * How concentrated a request's routing is, per layer: the share of the layer's accesses
 * (tokens x top_k) that go to its most used expert (top1) and to its 4 most used (top4; at
 * most 4 / top_k when top_k > 4), and the number of distinct experts used. The uniform_*
 * fields are the same quantities expected if every token chose top_k distinct experts
 * uniformly at random: uniform_distinct exactly, E (1 - (1 - K/E)^T); the shares by a
 * seeded (so repeatable) Monte Carlo of 1024 draws.
 */
struct moeinf_trace_skew {
    int64_t tokens;                          /* tokens of the phase; 0 leaves every other field 0 */
    int64_t accesses;                        /* per layer: tokens x top_k */
    double top1_share, top4_share, distinct; /* the layer, or the mean over layers */
    double top1_min, top1_max, distinct_min, distinct_max; /* over layers (layer -1 only) */
    double uniform_top1_share, uniform_top4_share, uniform_distinct;
};

/* Skew of one phase of a request, for one layer or (layer -1) averaged over the layers. */
enum moeinf_status moeinf_trace_eam_skew(const struct moeinf_trace_eam *m,
                                         enum moeinf_trace_phase phase, int layer,
                                         struct moeinf_trace_skew *out, struct moeinf_error *err);

/*
 * Writes an SVG heatmap of the request's EAM: rows = layers (0 at the top), columns = experts,
 * one <rect> per cell in <g class="cells">, coloured by count on one log scale shared by the
 * panels: 0 white, 1 = #c6dbef ... max = #08306b (ColorBrewer "Blues"), with a colour bar.
 * Phase ALL draws a prefill and a decode panel side by side. `label` (e.g. the trace's file
 * name, or NULL) starts the title. Written atomically.
 */
enum moeinf_status moeinf_trace_eam_svg(const struct moeinf_trace_eam *m,
                                        enum moeinf_trace_phase phase, const char *label,
                                        const char *path, struct moeinf_error *err);

/* The colour of `count` on the heatmap scale whose darkest value is `max`: "#rrggbb\0". */
void moeinf_trace_color(uint32_t count, uint32_t max, char out[8]);

/*
 * Filter: copies the requests that pass every given test, in file order, to a new trace (the
 * header's model and provenance lines are copied, totals recomputed, and a "derived" line
 * records `note`). Tests, in order: tag starts with one of tag_prefixes; id in
 * [id_min, id_max]; position in [index_min, index_max]; then of the requests passing these,
 * the 1st, (every+1)-th, (2 every+1)-th, ... are kept; copying stops after `first` kept
 * requests. MOEINF_ERR_ARG when no request is kept (nothing is written then).
 */
struct moeinf_trace_filter_params {
    const char *const *tag_prefixes; /* n_tag_prefixes strings; none = every tag */
    int n_tag_prefixes;
    int64_t id_min, id_max;       /* default 0, INT64_MAX */
    int64_t index_min, index_max; /* default 0, INT64_MAX */
    int64_t every;                /* default 1 */
    int64_t first;                /* default 0 = no limit */
    const char *note;             /* for the "derived" header line; NULL = none */
};

struct moeinf_trace_filter_params moeinf_trace_filter_params_default(void);

/* What a filter or concat wrote. */
struct moeinf_trace_copy_result {
    int64_t n_requests;
    int64_t n_tokens[2]; /* prefill, decode */
    int64_t n_shifted;   /* concat: inputs whose request ids were shifted */
};

enum moeinf_status moeinf_trace_filter(const char *in_path, const char *out_path,
                                       const struct moeinf_trace_filter_params *params,
                                       struct moeinf_trace_copy_result *out,
                                       struct moeinf_error *err);

/*
 * Concat: writes the requests of n_in traces one after another (header lines of the first;
 * "derived" records `note`). All must have the same n_layers, n_experts and top_k
 * (MOEINF_ERR_FORMAT "<path>: geometry mismatch: ..." otherwise). Request ids: an input whose
 * first id is above the last id written keeps its ids; otherwise all its ids are shifted up
 * by the same amount, so that its first id is the last written + 1 (gaps kept).
 */
enum moeinf_status moeinf_trace_concat(const char *const *in_paths, int n_in, const char *out_path,
                                       const char *note, struct moeinf_trace_copy_result *out,
                                       struct moeinf_error *err);

/* mean, min and max over layers; NaN where there is nothing to measure */
struct moeinf_trace_spread {
    double mean, min, max;
};

/*
 * Trace-wide statistics, each by phase ([MOEINF_TRACE_PHASE_PREFILL], [..._DECODE],
 * [..._ALL]):
 * - expert frequency: per layer, the counts of every expert over the whole trace; their Gini
 *   coefficient (0 = even, (E-1)/E = one expert takes all) and the share of the top_share_experts
 *   (ceil(E / 10)) most used; spread over layers. Low values mean a global counter (LFU) has
 *   little to go on.
 * - reuse: accesses to an expert (layer, id) that an earlier token of the same request (any
 *   phase) already used: what recency and per-request EAMs can exploit.
 * - distinct: mean over requests of the experts a request uses, as a share of L x E.
 * - similarity: cosine similarity of a request's EAM (counts of that phase) to the previous
 *   request's, to an earlier request picked uniformly at random (the mean over all earlier
 *   requests), and to the most similar earlier request (what an EAMC of every past request
 *   would match); means over requests after the first. Requests without tokens of the
 *   phase are left out.
 */
struct moeinf_trace_stats {
    int n_layers;
    int n_experts;
    int top_k;
    char model[256];
    int64_t n_requests;
    int64_t n_tokens[3];
    uint64_t accesses[3];
    int top_share_experts;
    struct moeinf_trace_spread gini[3];
    struct moeinf_trace_spread top_share[3];
    uint64_t reused[3];
    double distinct_share[3];
    int64_t similarity_requests[3]; /* requests with tokens of the phase */
    double similarity_prev[3];
    double similarity_random[3];
    double similarity_best[3];
};

enum moeinf_status moeinf_trace_stats(const char *path, struct moeinf_trace_stats *out,
                                      struct moeinf_error *err);

#ifdef __cplusplus
}
#endif

#endif /* MOEINF_H */
