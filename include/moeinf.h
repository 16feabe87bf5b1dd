/*
 * moeinf.h - the public engine header of moeinf, a C engine for Mixture-of-Experts language
 * models that are larger than the machine's fast memory: status, files, model, context,
 * decode, tokenizer, sampler. The expert-cache simulator and the trace tools are the second
 * public header, moeinf_sim.h (which includes this one).
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

/* The library's version; moeinf_version() gives the same as a string. CMake reads the project
 * version from these three lines. */
#define MOEINF_VERSION_MAJOR 0
#define MOEINF_VERSION_MINOR 1
#define MOEINF_VERSION_PATCH 0

/* Marks the functions libmoeinf.so exports; it is built with hidden visibility, so nothing
 * else in it is visible to a program that links it. */
#if defined(__GNUC__) || defined(__clang__)
#    define MOEINF_API __attribute__((visibility("default")))
#else
#    define MOEINF_API
#endif

/* ---- status ---------------------------------------------------------------------------- */

enum moeinf_status {
    MOEINF_OK = 0,
    MOEINF_ERR_ARG,         /* impossible option or argument */
    MOEINF_ERR_IO,          /* read/write failed; errno text in the message */
    MOEINF_ERR_FORMAT,      /* malformed or hostile file, trace or request */
    MOEINF_ERR_UNSUPPORTED, /* valid but not handled: arch, quant type, rope scaling */
    MOEINF_ERR_NOMEM,
    MOEINF_ERR_DEVICE,  /* accelerator failure */
    MOEINF_ERR_ABORTED, /* cancelled by a callback */
    MOEINF_ERR_CONTEXT, /* the context window is full */
};

struct moeinf_error {
    enum moeinf_status status;
    char msg[256];
};

/* Short constant name of a status ("ok", "format error", ...). */
MOEINF_API const char *moeinf_status_str(enum moeinf_status status);

/* ---- token phase --------------------------------------------------------------------------- */

/* Which kind of forward pass a token belongs to: the engine's routing record, the expert-cache
 * policies and the trace format (P / D) all tell the two apart. */
enum moeinf_phase {
    MOEINF_PHASE_PREFILL = 0, /* the token is part of a prompt forward pass */
    MOEINF_PHASE_DECODE = 1,  /* one generated token per forward pass */
    MOEINF_PHASE_ALL = 2,     /* both together, where a function says it takes it (trace tools) */
};

/* ---- files: generate (gen module) ------------------------------------------------------- */

/* moeinf_gen_params.type: llama-quantize's Q4_K_M choice of type per tensor (not a ggml id). */
#define MOEINF_GEN_TYPE_Q4_K_M 1015
/* moeinf_gen_params.type: llama-quantize's MXFP4_MOE: the experts (3-D tensors) MXFP4, the other
 * large matrices Q8_0 (as the published gpt-oss GGUFs hold them). */
#define MOEINF_GEN_TYPE_MXFP4_MOE 1016

/* Geometry of a model that moeinf_gen_model writes with random weights. */
struct moeinf_gen_params {
    const char *arch;    /* "llama" (Mixtral family), "qwen2moe", "qwen3moe", "olmoe", "gpt-oss",
                            "deepseek2", "glm4moe", or the hybrid linear-attention archs
                            "qwen35moe" and "qwen3next" */
    int n_layer;         /* transformer blocks */
    int n_expert;        /* routed experts per layer; 0 = dense model */
    int n_expert_used;   /* top-k */
    int n_expert_shared; /* shared experts: qwen2moe, qwen35moe, qwen3next, deepseek2 and
                            glm4moe need >= 1 (one shared FFN of width n_expert_shared x n_ff),
                            the other archs 0 */
    int n_embd;          /* model width */
    int n_ff;            /* FFN width of one expert (or of the dense FFN) */
    int n_head;          /* query heads */
    int n_head_kv;       /* KV heads */
    int n_ctx_train;     /* context_length written to metadata */
    int type;            /* GGML tensor type of the big matrices (0 F32, 1 F16, 2 Q4_0, 8 Q8_0,
                            3 Q4_1, 6 Q5_0, 7 Q5_1, 10-14 Q2_K..Q6_K), or
                            MOEINF_GEN_TYPE_Q4_K_M / _MXFP4_MOE for llama-quantize's mixes */
    uint64_t seed;
    const char *vocab_from; /* GGUF whose tokenizer is copied, or NULL for a byte vocabulary */
    int n_embd_head;        /* head dim (key/value length); 0 = n_embd / n_head */
    bool tied_output;       /* no output.weight: the lm_head is token_embd */
    float rope_freq_base;   /* RoPE base theta (default 1e6, as Mixtral) */
    float rms_eps;          /* RMSNorm epsilon (default 1e-5) */
    int n_threads;          /* generator threads; 0 = the online CPUs (bytes do not depend on it) */
    int n_vocab;            /* 0: the vocabulary's own size; larger: gen-model's own vocabulary
                               is padded with unused tokens to this size (vocab_from: ignored) */
    /* qwen35moe and qwen3next only (the other archs ignore them): */
    int n_rot;              /* rotary dims of the full-attention layers; 0 = head dim */
    int rope_sections[4];   /* qwen35moe's rope.dimension_sections; all 0 = n_rot/2 split as
                               [11, 11, 10, 0] / 32 */
    int ssm_d_conv;         /* linear-attention conv kernel (default 4) */
    int ssm_d_state;        /* head dim of the linear-attention key and value heads */
    int ssm_n_group;        /* linear-attention key heads */
    int ssm_dt_rank;        /* linear-attention value heads (a multiple of the key heads) */
    int full_attn_interval; /* layer i is full attention iff (i + 1) % interval == 0 */
    /* gpt-oss only (the other archs ignore them): */
    int n_swa;              /* attention.sliding_window (default 128) */
    float rope_yarn_factor; /* rope.scaling.factor of the YaRN scaling (default 32) */
    int rope_yarn_orig_ctx; /* rope.scaling.original_context_length (default 4096) */
    /* deepseek2 and glm4moe only (the other archs ignore them). deepseek2's heads are MLA's:
     * n_embd_head is the query/key head (nope + rope), n_rot its rotary part, head_count_kv is
     * written as 1 whatever n_head_kv; its YaRN keys (rope_yarn_factor, _orig_ctx, _log_mul)
     * are written when rope_yarn_factor > 1. glm4moe's heads are n_embd_head wide with n_rot
     * rotary dims and q/k/v biases. In both n_rot 0 is half of the head, and the
     * n_expert_shared >= 1 shared experts are one FFN of width n_expert_shared x n_ff without
     * a gate. */
    int n_dense_lead;           /* leading_dense_block_count: layers below it have a dense FFN */
    int n_ff_dense;             /* width of those dense FFNs (feed_forward_length) */
    int n_nextn;                /* glm4moe: trailing next-token-prediction blocks, after n_layer */
    int q_lora_rank;            /* deepseek2: query compression rank; 0 = a plain attn_q */
    int kv_lora_rank;           /* deepseek2: width of the compressed KV latent (default 512) */
    int v_head_dim;             /* deepseek2: value head dim (default 128) */
    int expert_gating;          /* 1 softmax, 2 sigmoid with the selection bias exp_probs_b */
    float expert_weights_scale; /* routed weights' scale (1 = none) */
    bool expert_weights_norm;   /* routed weights normalized to sum 1 */
    int n_expert_groups;        /* expert_group_count (0 = the key is not written) */
    int n_group_used;           /* expert_group_used_count */
    float rope_yarn_log_mul;    /* deepseek2: rope.scaling.yarn_log_multiplier */
};

/* The defaults, what `moeinf gen-model` writes without options: a small Mixtral-style MoE
 * (arch llama, 4 layers, 8 experts, top-2, n_embd 256, n_ff 512, 8 heads, 4 KV heads, Q8_0,
 * its own 1010-token vocabulary; about 15 MB) with random weights. (The embedded default model
 * of the CLI is another file: trained weights, models/trained-moe-Q8_0.gguf.) */
MOEINF_API struct moeinf_gen_params moeinf_gen_params_default(void);

/* Checks a geometry without writing anything: MOEINF_ERR_ARG naming the first problem
 * (heads not dividing n_embd, KV heads not dividing heads, top-k > experts, rows not a
 * multiple of the type's block: 32, or 256 for the K-quants; an unknown arch, shared experts
 * where the arch has none, ...). */
MOEINF_API enum moeinf_status moeinf_gen_params_check(const struct moeinf_gen_params *params,
                                                      struct moeinf_error *err);

/* Writes a GGUF with random weights, streaming to `path` (via a temp file and rename), one
 * row chunk at a time: memory stays a few MB whatever the model size. Deterministic: the
 * same params (seed included) give the same bytes. On failure no file is left at `path`. */
MOEINF_API enum moeinf_status moeinf_gen_model(const struct moeinf_gen_params *params,
                                               const char *path, struct moeinf_error *err);

/* Calls fn for every tensor moeinf_gen_model would write with these params, in file order,
 * writing nothing: its name, GGML type (after the type mix), number of dims and ne (unused
 * dims 1). The vocabulary's size is read from vocab_from's file when given. What a model too
 * large for the disk would hold. MOEINF_ERR_ARG as moeinf_gen_params_check. */
MOEINF_API enum moeinf_status moeinf_gen_model_tensors(const struct moeinf_gen_params *params,
                                                       void (*fn)(void *user, const char *name,
                                                                  int type, int n_dims,
                                                                  const int64_t ne[3]),
                                                       void *user, struct moeinf_error *err);

/* ---- engine: model (engine_model.c), context and decode (engine.c, engine_params.c) ---- */

struct moeinf_model;   /* weights + vocabulary; read-only after load, shareable */
struct moeinf_context; /* KV cache, scratch, threads; one request stream */

enum moeinf_kv_type {
    MOEINF_KV_F16 = 0,
    MOEINF_KV_F32 = 1,
};

/* How the weights of a model without offload_experts get into memory. */
enum moeinf_load_mode {
    /* READ when the file fits in the memory this process may use with room to spare (file +
     * 1/8 + 512 MiB within the cgroup's limit, else within MemAvailable), else MAP. */
    MOEINF_LOAD_AUTO = 0,
    /* Map the file: nothing copied, the pages shared with the page cache and other processes,
     * a model larger than memory pages in from disk. Decode reads through 4 KiB pages. */
    MOEINF_LOAD_MAP,
    /* Read the file once into private memory, on transparent huge pages where the kernel
     * allows: fewer TLB misses, so decode streams faster (measured in docs/PERFORMANCE.md). */
    MOEINF_LOAD_READ,
};

struct moeinf_model_params {
    enum moeinf_load_mode load_mode; /* default AUTO */
    /* Routed experts stay in the file and are read through each context's expert cache
     * (moeinf_context_params.expert_cache, which is then required); every other weight is read
     * once into memory, so the page cache does not hold the file (load_mode is ignored).
     * MOEINF_ERR_ARG for a dense model. Default false. */
    bool offload_experts;
    /* (optional) called while the load reads the file, from the loading thread: bytes read
     * so far of `total`, the bytes this load reads (the non-expert weights with
     * offload_experts, the whole file when read); a mapped load reads nothing up front
     * and does not call it. The CLI draws its progress line with it. */
    void (*progress)(void *user, uint64_t done, uint64_t total);
    void *progress_user;
    bool vocab_only; /* read only the vocabulary (tokenizer.ggml.*): the model tokenizes and
                        renders pieces, whatever its architecture, and a vocabulary-only GGUF
                        loads too; moeinf_context_init refuses it (MOEINF_ERR_ARG),
                        moeinf_model_n_vocab gives the vocabulary's size, n_ctx_train and
                        decode_bytes 0. Default false. */
};

/* How big a context's expert cache is (moeinf_expert_cache_parse reads the CLI's forms). */
enum moeinf_expert_cache_kind {
    MOEINF_EXPERT_CACHE_NONE = 0, /* no cache: every expert is resident (mapped) */
    MOEINF_EXPERT_CACHE_BYTES,    /* at most `bytes` of expert slots */
    MOEINF_EXPERT_CACHE_PERCENT,  /* `percent` % of all routed experts (layers x experts),
                                     rounded to the nearest */
    MOEINF_EXPERT_CACHE_AUTO,     /* what this process may use (the cgroup limit or the
                                     environment's MOEINF_MEMORY_LIMIT, decimal bytes, the
                                     smaller; else MemAvailable) minus resident weights, KV cache,
                                     scratch, what the model's other contexts hold (their
                                     slots, KV caches and scratch) and
                                     MOEINF_EXPERT_CACHE_MARGIN: a model's contexts share one
                                     budget */
};

/* Memory `auto` leaves for what it does not count: code, stacks, allocator slack. */
#define MOEINF_EXPERT_CACHE_MARGIN (64ull << 20)

/* How the expert cache reads experts from the file. */
enum moeinf_expert_io {
    MOEINF_EXPERT_IO_DIRECT = 0,  /* O_DIRECT, bypassing the page cache (where the file system
                                     refuses it: as NOCACHE); the default */
    MOEINF_EXPERT_IO_CACHED = 1,  /* buffered reads left in the page cache: fast when the file
                                     fits in memory (tests, repeated runs), but the page cache
                                     is then outside the budget */
    MOEINF_EXPERT_IO_NOCACHE = 2, /* buffered reads without readahead, each read's pages
                                     dropped from the page cache after it */
};

struct moeinf_expert_cache_size {
    enum moeinf_expert_cache_kind kind;
    uint64_t bytes;
    double percent;
};

/* Parses SIZE (bytes, with an optional K, M, G or T suffix meaning powers of 1024; with a
 * suffix the number may have a fraction, "1.5G", rounded to the nearest byte), P% (0 < P <=
 * 100) or "auto"; spaces around the text are ignored. MOEINF_ERR_ARG naming the text
 * otherwise. */
MOEINF_API enum moeinf_status moeinf_expert_cache_parse(const char *text,
                                                        struct moeinf_expert_cache_size *out,
                                                        struct moeinf_error *err);

/*
 * The rules of each field are checked in one place, moeinf_context_params_check (which
 * moeinf_context_init calls): a value that cannot apply is MOEINF_ERR_ARG whose message
 * starts with the field's name ("expert_prefetch: ..."), never clamped or ignored. The two
 * documented cuts: n_batch above n_ctx is n_ctx, and an expert cache larger than every expert
 * holds every expert.
 */
struct moeinf_context_params {
    int n_ctx;                   /* context window in tokens, 1 .. 2^24 (default 4096) */
    int n_batch;                 /* micro-batch: tokens of one forward pass, all sequences
                                    together, >= 1 (default 512) */
    int n_seq;                   /* sequences the context holds, 1 .. MOEINF_SEQ_MAX (default
                                    1); each has n_ctx / n_seq positions of its own (n_ctx is
                                    their total, so more sequences cost no more KV memory) and
                                    its own recurrent state, windows and checkpoints, which
                                    count in the memory budget */
    int n_threads;               /* 0 = the CPUs this process may use; at most 1024 */
    enum moeinf_kv_type kv_type; /* default F16 */
    /* Routed experts through an expert cache of this size (the model must be loaded with
     * offload_experts, and then the size is required); kind NONE (default): resident. A size
     * under the model's top_k experts is MOEINF_ERR_ARG naming the minimum. */
    struct moeinf_expert_cache_size expert_cache;
    enum moeinf_expert_io expert_io;
    const char *expert_policy; /* cache policy name (moeinf sim --help lists them; NULL: the
                                  default, "reuse"); offline policies are refused; needs an
                                  expert cache */
    /* Reading ahead (defaults MOEINF_EXPERT_*_DEFAULT): experts are read on
     * expert_io_threads I/O threads (0 .. MOEINF_EXPERT_IO_THREADS_MAX; 0: on the forward
     * pass's thread when a step needs them, and then nothing may be read ahead); after each
     * layer's step the policy may prefetch up to expert_prefetch experts it predicts (0 ..
     * MOEINF_EXPERT_PREFETCH_MAX, as `moeinf sim --prefetch`); during each decode token the
     * routers of the next expert_lookahead layers (0 .. the model's layers - 1) are applied
     * to the current hidden state and their top-k experts prefetched (gate lookahead).
     * A count above 0 needs an expert cache and at least one I/O thread.
     * MOEINF_EXPERT_AUTO (the default of both): per MoE layer, the engine measures each
     * source's precision on the experts that had to be read (of the experts it names that are
     * not cached, how many the layer then uses) and the I/O threads' idle time, and reads
     * what the source names only for the layers where that pays (the policy then proposes
     * top_k experts per step, lookahead looks one layer ahead); nothing is read ahead without
     * an expert cache or I/O threads. Whether a layer's source is on depends on measured
     * time, so with auto the cache's misses may differ from run to run (the output does
     * not); `moeinf sim --prefetch K` models the integer K, not auto. */
    int expert_io_threads;
    int expert_prefetch;
    int expert_lookahead;
};

/* The most sequences a context may hold (moeinf_context_params.n_seq). */
#define MOEINF_SEQ_MAX 256

/* Defaults of the reading-ahead parameters, chosen by measurement (docs/OFFLOAD.md), and their
 * bounds. */
#define MOEINF_EXPERT_IO_THREADS_DEFAULT 4
#define MOEINF_EXPERT_AUTO               (-1)
#define MOEINF_EXPERT_PREFETCH_DEFAULT   MOEINF_EXPERT_AUTO
#define MOEINF_EXPERT_LOOKAHEAD_DEFAULT  MOEINF_EXPERT_AUTO
#define MOEINF_EXPERT_IO_THREADS_MAX     64
#define MOEINF_EXPERT_PREFETCH_MAX       64

MOEINF_API struct moeinf_model_params moeinf_model_params_default(void);
MOEINF_API struct moeinf_context_params moeinf_context_params_default(void);

MOEINF_API enum moeinf_status moeinf_model_load(const char *path,
                                                const struct moeinf_model_params *params,
                                                struct moeinf_model **out,
                                                struct moeinf_error *err);
MOEINF_API void moeinf_model_free(struct moeinf_model *model);

MOEINF_API int moeinf_model_n_vocab(const struct moeinf_model *model);
MOEINF_API int moeinf_model_n_ctx_train(const struct moeinf_model *model);
/* How the model's weights were loaded: MAP or READ (AUTO resolved); with offload_experts,
 * READ (the non-expert weights are read, the experts go through the expert cache). */
MOEINF_API enum moeinf_load_mode moeinf_model_load_mode(const struct moeinf_model *model);
/* One line describing the model (arch, layers, experts, types) into buf. */
MOEINF_API void moeinf_model_desc(const struct moeinf_model *model, char *buf, size_t size);
/* Weight bytes one decode token reads: every dense matrix, the router, n_expert_used experts
 * per MoE layer, one embedding row and the lm_head (the memory-bandwidth bound of decode). */
MOEINF_API uint64_t moeinf_model_decode_bytes(const struct moeinf_model *model);

/* Checks every field of params (the rules above). With model NULL, the rules that need no
 * model (a front end checks its options before loading one; expert_lookahead is then bounded
 * by the largest layer count a file may have); with a model, all of them, as
 * moeinf_context_init does: whether an expert cache may or must be asked for, lookahead below
 * its layers. MOEINF_ERR_ARG with "<field>: <why>". */
MOEINF_API enum moeinf_status
moeinf_context_params_check(const struct moeinf_context_params *params,
                            const struct moeinf_model *model, struct moeinf_error *err);

MOEINF_API enum moeinf_status moeinf_context_init(struct moeinf_model *model,
                                                  const struct moeinf_context_params *params,
                                                  struct moeinf_context **out,
                                                  struct moeinf_error *err);
MOEINF_API void moeinf_context_free(struct moeinf_context *ctx);

/* What a context's expert cache is. */
struct moeinf_expert_cache_info {
    int slots;               /* experts the cache holds */
    int n_experts_total;     /* layers x experts */
    uint64_t slot_bytes;     /* one slot: an expert's three matrices and alignment room */
    uint64_t resident_bytes; /* the model's weights kept in memory (not experts) */
    uint64_t context_bytes;  /* KV cache and scratch */
    const char *policy;
    bool direct_io;      /* reads bypass the page cache (O_DIRECT) */
    const char *io_note; /* one line on how experts are read */
};

/* Counters since the context was made (or since moeinf_context_expert_stats_reset). */
struct moeinf_expert_stats {
    uint64_t accesses;           /* one per distinct expert per layer and forward iteration: hits +
                                    late_prefetches + misses */
    uint64_t hits;               /* the expert was in its slot, read: the step did not wait */
    uint64_t misses;             /* demand reads: the step had to wait for them */
    uint64_t prefetches;         /* experts read ahead of need (policy or lookahead) */
    uint64_t prefetch_hits;      /* of the hits, first uses of a prefetched expert */
    uint64_t late_prefetches;    /* accesses that waited for a prefetch still being read (not
                                    hits; `moeinf sim` counts them as hits) */
    uint64_t wasted_prefetches;  /* prefetched experts evicted before any access, and those
                                    still unused in the cache now (as `moeinf sim` counts) */
    uint64_t dropped_prefetches; /* of the wasted, those whose read was cancelled unstarted */
    uint64_t reads;              /* expert reads finished (demand and prefetch) */
    uint64_t reads_in_flight;    /* reads queued or running now: not yet in reads, bytes_read,
                                    expert_bytes or read_seconds */
    uint64_t bytes_read;         /* from the file, alignment windows included */
    uint64_t expert_bytes;       /* of them, the experts' own bytes */
    double read_seconds;         /* time spent in reads, summed over I/O threads */
    double stall_seconds;        /* time the forward pass waited for reads */
    /* Predictions (layer -1 only): of the experts a source named for a layer's next step,
     * how many it used (precision = correct / predicted); of the experts used by steps the
     * source named experts for, how many it named (recall = correct / actual). */
    uint64_t policy_predicted, policy_correct, policy_actual;
    uint64_t lookahead_predicted, lookahead_correct, lookahead_actual;
    /* Precision on the experts that had to be read (every layer, or the layer asked for): of
     * the experts a source named that were not in the cache when named (reads; with auto,
     * counted also where its reads were not issued), how many the step then used
     * (reads_used: demand misses avoided, or that would have been). layers_on: with auto, the
     * layers where the source's precision pays now; layers_read: of them, those where its reads
     * are issued now (the wall-time check); -1 when the source is not auto. auto_checks: the
     * wall-time check's verdicts so far, auto_checks_kept: those that kept a layer's reads. */
    uint64_t policy_reads, policy_reads_used, lookahead_reads, lookahead_reads_used;
    int policy_layers_on, lookahead_layers_on;
    int policy_layers_read, lookahead_layers_read;
    uint64_t auto_checks, auto_checks_kept;
    double spare_seconds; /* I/O thread time idle while the layers computed */
    uint64_t tokens; /* tokens evaluated, every phase */
    uint64_t decode_tokens;
};

/* MOEINF_ERR_ARG when the context has no expert cache. */
MOEINF_API enum moeinf_status moeinf_context_expert_cache(const struct moeinf_context *ctx,
                                                          struct moeinf_expert_cache_info *out,
                                                          struct moeinf_error *err);
/* Counters of MoE layer `layer` (0-based), or of all layers for -1 (tokens are counted in
 * both). MOEINF_ERR_ARG without an expert cache or for a layer out of range. */
MOEINF_API enum moeinf_status moeinf_context_expert_stats(const struct moeinf_context *ctx,
                                                          int layer,
                                                          struct moeinf_expert_stats *out,
                                                          struct moeinf_error *err);
/* Zeroes the counters (the cache keeps its contents). */
MOEINF_API void moeinf_context_expert_stats_reset(struct moeinf_context *ctx);

/*
 * Warm starts: what the context's expert-cache policy has learned, in the versioned file of
 * `moeinf sim --eamc` (so a file either one writes, the other reads). For the default policy
 * `reuse` that is the EAMC (the expert activations of past requests), its learned table of
 * reuse likelihoods, recency and layer-to-layer co-occurrence; for moe-infinity the EAMC and
 * recency. Which experts the cache holds is not part of it: a loaded context's cache stays as
 * it was (empty, in a new context). Both functions first end the request in progress (as
 * moeinf_context_request_end), so it is part of what is saved.
 *
 * load: a missing file is no error (*loaded = false, nothing changes; loaded may be NULL). A
 * file that is corrupt, truncated, of another version, written by another policy or for
 * another model (layers, experts, top_k; or, with those equal, another model's routers: the
 * file names its model, and the message names both) is MOEINF_ERR_FORMAT, one line naming the
 * file and the defect; it is read into a new state that replaces the old only when every
 * check passed, so a refused file leaves the context as it was. A file `moeinf sim` built
 * from a trace is this model's when the trace was recorded by it (its "# model_id:" line).
 * save: atomic (a temp file in the same folder, fsync, rename, fsync of the folder): the file
 * is the old one or the whole new one, never a part.
 * Both: MOEINF_ERR_ARG without an expert cache or for a policy that keeps no learned state
 * (lru, lfu, count).
 */
MOEINF_API enum moeinf_status moeinf_context_expert_state_load(struct moeinf_context *ctx,
                                                               const char *path, bool *loaded,
                                                               struct moeinf_error *err);
MOEINF_API enum moeinf_status moeinf_context_expert_state_save(struct moeinf_context *ctx,
                                                               const char *path,
                                                               struct moeinf_error *err);

/* Tells the expert cache's policy that the current request is over: it learns from it now
 * rather than when the next request starts. The next decode starts a new request even when
 * it continues the KV cache (a server that keeps a shared prefix). No effect without an
 * expert cache or outside a request. */
MOEINF_API void moeinf_context_request_end(struct moeinf_context *ctx);

/* Forgets the KV cache of every sequence (and their recurrent states, sliding windows and
 * checkpoints): the next decode starts at position 0 and a new request. The expert cache keeps
 * its contents and what its policy learned. */
MOEINF_API void moeinf_context_reset(struct moeinf_context *ctx);
MOEINF_API int moeinf_context_n_past(const struct moeinf_context *ctx);
MOEINF_API int moeinf_context_n_threads(const struct moeinf_context *ctx);
/* Name of the CPU kernel table in use ("avx512", "avx2", "scalar"). */
MOEINF_API const char *moeinf_context_kernels(const struct moeinf_context *ctx);

/*
 * Runs `n` tokens through the model, appending them to the context's sequence 0 (prefill when
 * n > 1, in micro-batches of n_batch); moeinf_context_n_past, _truncate and _reset also act on
 * sequence 0. If `logits` is not NULL it receives either every position's
 * logits (all_logits: n x n_vocab floats) or the last position's (n_vocab floats).
 * MOEINF_ERR_CONTEXT if n_past + n would exceed n_ctx / n_seq (nothing is appended then);
 * MOEINF_ERR_ARG for a token id outside the vocabulary; MOEINF_ERR_FORMAT when the model
 * computes NaN or infinity (weights that hold them, or activations that overflow), naming
 * the first layer whose output is not finite (the micro-batch is not appended; a model with
 * recurrent layers goes back to its latest state checkpoint, as moeinf_context_truncate does;
 * sliding windows stay in place).
 */
MOEINF_API enum moeinf_status moeinf_decode(struct moeinf_context *ctx, const int32_t *ids, int n,
                                            float *logits, bool all_logits,
                                            struct moeinf_error *err);

/*
 * Several sequences in one context (n_seq > 1). A batch is one forward pass over tokens of any
 * of them: entry i appends token[i] to sequence seq[i] at position pos[i], which must be that
 * sequence's next position (its n_past, plus its entries before i in this batch); logits[i]
 * (logits may be NULL: none) asks for entry i's logits. Entries of one sequence stay in their
 * order; sequences may interleave.
 */
struct moeinf_batch {
    int n;
    const int32_t *token;
    const int32_t *pos;
    const int32_t *seq;
    const bool *logits;
};

/*
 * Runs a batch of 1 .. n_batch entries as one forward pass (one iteration of the expert cache,
 * counted in `phase`, PREFILL or DECODE: each expert the batch's tokens chose is read once for
 * all of them). `logits` receives one row of n_vocab floats per entry that asks for it, in
 * entry order. A sequence's results do not depend on what else is in the batch: every kernel
 * computes a token's row the same way whatever the other rows, so its logits are
 * bit-identical to the same tokens decoded alone in the same micro-batch cuts (and equal
 * within the kernels' rounding to other cuts).
 * MOEINF_ERR_ARG for an entry out of range (token, sequence, a position that is not the next,
 * more than n_batch entries, a routing record open: it follows moeinf_decode only);
 * MOEINF_ERR_CONTEXT when a sequence would pass its n_ctx / n_seq positions; MOEINF_ERR_FORMAT
 * for non-finite values, as moeinf_decode. On any failure nothing is appended to any sequence.
 * A sequence whose entries start at position 0 starts over (its recurrent state is cleared).
 */
MOEINF_API enum moeinf_status moeinf_decode_batch(struct moeinf_context *ctx,
                                                  const struct moeinf_batch *batch,
                                                  enum moeinf_phase phase, float *logits,
                                                  struct moeinf_error *err);
/* Sequences the context holds, and each one's positions (n_ctx / n_seq). */
MOEINF_API int moeinf_context_n_seq(const struct moeinf_context *ctx);
MOEINF_API int moeinf_context_seq_n_ctx(const struct moeinf_context *ctx);
/* Tokens sequence `seq` holds; -1 for a sequence out of range. */
MOEINF_API int moeinf_context_seq_n_past(const struct moeinf_context *ctx, int seq);
/* moeinf_context_truncate and moeinf_context_reset for sequence `seq` (the others keep
 * theirs). MOEINF_ERR_ARG for a sequence out of range. */
MOEINF_API enum moeinf_status moeinf_context_seq_truncate(struct moeinf_context *ctx, int seq,
                                                          int n_keep, struct moeinf_error *err);
MOEINF_API enum moeinf_status moeinf_context_seq_reset(struct moeinf_context *ctx, int seq,
                                                       struct moeinf_error *err);

/*
 * Routing record: from now on every token this context evaluates appends its expert choices
 * (per MoE layer, the top-k in router-rank order) to a moe-trace v1 file (the format of
 * `moeinf sim`), written atomically when the record is closed (or the context freed). A
 * request starts whenever a decode begins at position 0; tokens of a multi-token decode are
 * prefill (P), single tokens decode (D). `tag` names the requests (no whitespace; NULL: "-").
 * MOEINF_ERR_ARG for a dense model or a record already open.
 */
MOEINF_API enum moeinf_status moeinf_context_record_open(struct moeinf_context *ctx,
                                                         const char *path, const char *tag,
                                                         struct moeinf_error *err);
MOEINF_API enum moeinf_status moeinf_context_record_close(struct moeinf_context *ctx,
                                                          struct moeinf_error *err);
/* Drops the open record without writing it: the file at its path stays as it was (for a run
 * that failed). Nothing when no record is open. */
MOEINF_API void moeinf_context_record_discard(struct moeinf_context *ctx);

/* ---- tokenizer (tokenizer module) -------------------------------------------------------- */

/*
 * Tokenizes `len` bytes of `text`. add_special: prepend BOS (and append EOS) iff the model's
 * metadata asks for it. parse_special: text that spells a control token becomes that token.
 * On success *out_ids is malloc'ed (caller frees with free()) and *n_out set.
 */
MOEINF_API enum moeinf_status moeinf_tokenize(const struct moeinf_model *model, const char *text,
                                              size_t len, bool add_special, bool parse_special,
                                              int32_t **out_ids, size_t *n_out,
                                              struct moeinf_error *err);

/* The bytes a token stands for (byte tokens decoded, the SentencePiece space restored). The
 * returned pointer borrows the model's storage. Control tokens give their text iff special. */
MOEINF_API const char *moeinf_token_piece(const struct moeinf_model *model, int32_t id,
                                          bool special, size_t *len);

MOEINF_API int32_t moeinf_token_bos(const struct moeinf_model *model); /* -1 if none */
MOEINF_API int32_t moeinf_token_eos(const struct moeinf_model *model); /* -1 if none */
/* True for every end-of-generation token the vocabulary marks (EOS, EOT, ...). */
MOEINF_API bool moeinf_token_is_eog(const struct moeinf_model *model, int32_t id);

/*
 * Streaming text of generated ids: feed ids one at a time and print what comes back; bytes
 * of a UTF-8 character split across tokens are held until the character is complete, so
 * streamed output never splits a character, and it is always valid UTF-8: bytes that cannot
 * form a character (byte tokens in a bad order) come out as U+FFFD, one per maximal invalid
 * subpart. The returned bytes are borrowed until the next call. Control tokens print nothing
 * (unless moeinf_text_stream_show names them).
 */
struct moeinf_text_stream;

MOEINF_API enum moeinf_status moeinf_text_stream_init(const struct moeinf_model *model,
                                                      struct moeinf_text_stream **out,
                                                      struct moeinf_error *err);
MOEINF_API void moeinf_text_stream_free(struct moeinf_text_stream *s);
MOEINF_API const char *moeinf_text_stream_push(struct moeinf_text_stream *s, int32_t id,
                                               size_t *len);
/* Ends the text: a character still incomplete at the end of generation comes out as one
 * U+FFFD (nothing when none is held). */
MOEINF_API const char *moeinf_text_stream_flush(struct moeinf_text_stream *s, size_t *len);
/* Shows the tokens whose texts are in `texts` (NULL-terminated; NULL: none; at most 8) as
 * their text even when they are control tokens, as llama.cpp's server shows a chat template's
 * "preserved tokens": the reasoning markers of moeinf_chat_reasoning_markers, so that a
 * splitter sees Kimi-K2-Thinking's <think> and </think>. Texts that are no token are
 * ignored; a later call replaces the set. */
MOEINF_API void moeinf_text_stream_show(struct moeinf_text_stream *s, const char *const *texts);

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

MOEINF_API struct moeinf_sampler_params moeinf_sampler_params_default(void); /* seed 0xC0FFEE */
/* MOEINF_ERR_ARG for n_vocab <= 0, temp < 0 or not finite, top_k < 0, top_p outside (0, 1],
 * min_p outside [0, 1], repeat_penalty <= 0 or not finite, repeat_last_n < 0. params may be
 * NULL (defaults). */
MOEINF_API enum moeinf_status moeinf_sampler_init(const struct moeinf_sampler_params *params,
                                                  int n_vocab, struct moeinf_sampler **out,
                                                  struct moeinf_error *err);
MOEINF_API void moeinf_sampler_free(struct moeinf_sampler *s);
/* Picks a token from one row of logits (not modified). */
MOEINF_API int32_t moeinf_sampler_sample(struct moeinf_sampler *s, const float *logits);
/* Tells the sampler a token was emitted or fed (for the repetition penalty); ids outside the
 * vocabulary are ignored. */
MOEINF_API void moeinf_sampler_accept(struct moeinf_sampler *s, int32_t id);

/* ---- chat templates (chat module) -------------------------------------------------------- */

/*
 * A conversation becomes one prompt text through a chat template. moeinf writes the templates
 * of the families it runs itself (no Jinja interpreter); each writes the text llama.cpp's
 * template code writes for it (olmoe: the text the model's own Jinja template renders, which
 * llama.cpp has no template for). The text holds control tokens such as <|im_start|>:
 * moeinf_chat_tokenize parses them in the template's own markup only, and tokenizes the
 * messages' texts as text, so that a message cannot forge a role boundary or an end token.
 *
 *   mistral    [INST] user [/INST]answer</s>   (Mistral, Mixtral; llama.cpp's "llama2"; a
 *              system message is put before the first user message, then a newline)
 *   chatml     <|im_start|>role\ntext<|im_end|>\n   (Qwen, Qwen-MoE)
 *   llama3     <|start_header_id|>role<|end_header_id|>\n\ntext<|eot_id|>   (text trimmed)
 *   deepseek2  User: text\n\nAssistant: answer<｜end▁of▁sentence｜>   (DeepSeek-V2)
 *   deepseek3  <｜User｜>text<｜Assistant｜>answer<｜end▁of▁sentence｜>   (DeepSeek-V3)
 *   olmoe      <|user|>\ntext\n<|assistant|>\nanswer<|endoftext|>\n   (OLMoE, Tulu)
 *   qwen35     <|im_start|>role\ntext<|im_end|>\n   (Qwen3.5, Qwen3.6: the model's Jinja
 *              template as jinja2 renders it, tools and images aside. Texts are trimmed; an
 *              answer after the last user message keeps its thinking as
 *              <think>\nthought\n</think>\n\n before the answer, earlier answers lose it;
 *              the prompt of a generation ends "<|im_start|>assistant\n<think>\n", so the
 *              model's output starts inside its thinking and closes it with </think>, or with
 *              MOEINF_CHAT_NO_THINKING "<think>\n\n</think>\n\n", an answer without thinking.
 *              No messages, no user message, or a system message after the first is
 *              MOEINF_ERR_ARG, as the template raises.)
 *   harmony    <|start|>role<|message|>text<|end|>   (gpt-oss: the model's Jinja template as
 *              jinja2 renders it, tools aside. A system message of its own first, with the
 *              date (MOEINF_CHAT_DATE, YYYY-MM-DD, else today's local date) and the reasoning
 *              effort (MOEINF_CHAT_EFFORT_*; default medium, low with NO_THINKING); a first
 *              system or developer message becomes the developer's instructions, later ones
 *              are dropped as the template drops them; answers go to the final channel, their
 *              thinking dropped except in a last answer without ADD_ASSISTANT; the prompt of a
 *              generation ends "<|start|>assistant". Roles also "developer". No messages, or
 *              channel markup in an answer, is MOEINF_ERR_ARG, as the template raises.)
 *   deepseek-r1  <｜User｜>text<｜Assistant｜>answer<｜end▁of▁sentence｜>   (DeepSeek-R1: its
 *              Jinja template as jinja2 renders it, BOS aside: the last system text first, an
 *              answer's text after its last </think>; the prompt of a generation ends
 *              "<｜Assistant｜><think>\n", or "<think>\n</think>" with NO_THINKING)
 *   glm45      [gMASK]<sop><|user|>\ntext<|assistant|>\n<think></think>\nanswer   (GLM-4.5,
 *              4.6: the Jinja template as jinja2 renders it, tools aside; an answer after the
 *              last user message keeps its thinking; NO_THINKING appends "/nothink" to user
 *              texts and ends the prompt "<|assistant|>\n<think></think>")
 *   glm47      [gMASK]<sop><|user|>text<|assistant|></think>answer   (GLM-4.7-Flash: the same
 *              without newlines; the prompt ends "<|assistant|><think>", or "</think>" with
 *              NO_THINKING)
 *   kimi-k2    <|im_user|>user<|im_middle|>text<|im_end|>   (Kimi-K2-Instruct: the Jinja
 *              template as jinja2 renders it; Kimi's own system message when the first is not
 *              a system message)
 *   kimi-k2-thinking  the same, with "<think></think>" before each past answer (Kimi-K2-
 *              Thinking; the model opens its thinking itself)
 */
struct moeinf_chat_message {
    const char *role;    /* "system", "user" or "assistant" */
    const char *content; /* UTF-8 text; NULL counts as empty */
};

/* The template names above, NULL-terminated. */
MOEINF_API const char *const *moeinf_chat_template_names(void);

/* The built-in template a Jinja chat template is written for, by the markers it holds, or
 * NULL when it is none of them. */
MOEINF_API const char *moeinf_chat_template_detect(const char *jinja);

/* The model's own template (tokenizer.chat_template) as a malloc'ed copy (caller frees with
 * free()) in *out, or *out = NULL when the model has none. */
MOEINF_API enum moeinf_status moeinf_model_chat_template(const struct moeinf_model *model,
                                                         char **out, struct moeinf_error *err);

/* Which template to use: `name` when not NULL (MOEINF_ERR_ARG naming it and the known names
 * when it is not one of them), else the model's own (MOEINF_ERR_UNSUPPORTED when the model
 * has none, or one that is none of the built-in ones). *out is one of the static names. */
MOEINF_API enum moeinf_status moeinf_chat_template_resolve(const struct moeinf_model *model,
                                                           const char *name, const char **out,
                                                           struct moeinf_error *err);

/* Flags of moeinf_chat_apply and moeinf_chat_tokenize, OR'ed (0: none). */
/* End with the opening of the assistant's turn (the prompt of a generation). */
#define MOEINF_CHAT_ADD_ASSISTANT 1u
/* With ADD_ASSISTANT, for a model that thinks before it answers (qwen35, deepseek-r1, glm45,
 * glm47): open the turn with an empty or closed thinking block, for an answer without
 * thinking (chat_template_kwargs' enable_thinking = false; glm45 also marks each user text
 * "/nothink"); the other templates have no such switch and ignore it. */
#define MOEINF_CHAT_NO_THINKING 2u
/* The reasoning effort a template asks for (harmony's "Reasoning: low|medium|high"; the other
 * templates ignore it): one of these, or none for the template's default. */
#define MOEINF_CHAT_EFFORT_LOW    4u
#define MOEINF_CHAT_EFFORT_MEDIUM 8u
#define MOEINF_CHAT_EFFORT_HIGH   12u
#define MOEINF_CHAT_EFFORT_MASK   12u

/* Writes the conversation through template `name` with `flags` (MOEINF_CHAT_*; true is
 * MOEINF_CHAT_ADD_ASSISTANT). *out is malloc'ed and NUL-terminated (caller frees), *out_len its
 * length (may be NULL). MOEINF_ERR_ARG for an unknown template name or flag, a role other than
 * system, user and assistant (naming the message), or a conversation the template refuses. */
MOEINF_API enum moeinf_status moeinf_chat_apply(const char *name,
                                                const struct moeinf_chat_message *msgs,
                                                size_t n_msgs, unsigned flags, char **out,
                                                size_t *out_len, struct moeinf_error *err);

/* The conversation through template `name` (as moeinf_chat_apply) as token ids: BOS when the
 * model asks for one, the template's markup with its control tokens recognised, and each
 * message's text tokenized as text (no control token is recognised in it or across its
 * edges; user-defined tokens are, as without parse_special). *out_ids is malloc'ed (caller
 * frees). Errors as moeinf_chat_apply and moeinf_tokenize. */
MOEINF_API enum moeinf_status moeinf_chat_tokenize(const struct moeinf_model *model,
                                                   const char *name,
                                                   const struct moeinf_chat_message *msgs,
                                                   size_t n_msgs, unsigned flags, int32_t **out_ids,
                                                   size_t *n_out, struct moeinf_error *err);

/* ---- reasoning (chat module, reasoning.c) ------------------------------------------------ */

/*
 * A model that thinks writes its reasoning between two markers before the answer (<think> and
 * </think> for Qwen3, Qwen3.5, DeepSeek-R1, GLM-4.5 to 4.7 and Kimi-K2-Thinking). A reasoning
 * splitter takes the generated text piece by piece, as it streams, and gives back what may be
 * shown of the thinking and of the answer, as llama.cpp's server splits reasoning_content from
 * content:
 *   - the thinking block counts only at the very start of the generated text, or when the
 *     prompt opened it: the prompt, less trailing whitespace, ends with the start marker
 *     (Qwen3.5's generation prompt "<think>\n", DeepSeek-R1's and GLM-4.7-Flash's); for
 *     glm45 whitespace may come first (GLM-4.5 writes "\n<think>"). A prompt that ends with
 *     the end marker (thinking switched off: "<think>\n\n</think>\n\n") leaves everything to
 *     the answer (for glm45 less its leading whitespace);
 *   - the thinking loses its leading and trailing whitespace (whitespace only: none), the
 *     answer its leading whitespace after the end marker; the markers are not shown;
 *   - a marker split across pieces, and whitespace that may still end the thinking, are held
 *     until the text tells; thinking that is never closed (max_tokens) is all thinking;
 *   - an end marker without an opening, or a start marker after other text, is answer text.
 * With extract false (llama.cpp's --reasoning-format none) everything is answer, preceded by
 * the prompt's opening (its text from the start marker on) when the prompt opened thinking.
 * harmony (gpt-oss) writes channels instead: "<|channel|>analysis<|message|>thinking<|end|>
 * <|start|>assistant<|channel|>final<|message|>answer". A message's body runs to <|end|>,
 * <|start|>, <|return|> or <|call|> (so with <|end|> shown or not); the analysis channel is
 * thinking, any other (final, a commentary preamble) answer, each part's bodies joined by a
 * newline; headers are not shown, nor is a header the text ends in; text before any header is
 * answer; whitespace as above, per body.
 */
struct moeinf_reasoning;

/* The text of one push or flush; both borrowed until the next call (length 0: none). */
struct moeinf_reasoning_text {
    const char *thinking;
    size_t thinking_len;
    const char *answer;
    size_t answer_len;
};

/* A splitter for the answer to a conversation: the markers of chat template `name` ("<think>",
 * "</think>" for the families that think, and any template this version does not name;
 * harmony's channels; none for mistral, llama3, deepseek2, olmoe and kimi-k2, whose text is all
 * answer) and
 * the tail of the prompt the template writes for msgs with `flags` (as moeinf_chat_apply; the
 * prompt of a generation has MOEINF_CHAT_ADD_ASSISTANT), so that it works for any template. extract
 * false: llama.cpp's --reasoning-format none (above). Errors as moeinf_chat_apply. */
MOEINF_API enum moeinf_status
moeinf_chat_reasoning_init(const char *name, const struct moeinf_chat_message *msgs, size_t n_msgs,
                           unsigned flags, bool extract, struct moeinf_reasoning **out,
                           struct moeinf_error *err);
/* The thinking block's markers of chat template `name` ("<think>", "</think>"), as
 * moeinf_chat_reasoning_init reads them, for moeinf_text_stream_show (NULL-terminated, static);
 * NULL for a family that does not think, and for harmony, whose markup always shows. */
MOEINF_API const char *const *moeinf_chat_reasoning_markers(const char *name);
MOEINF_API void moeinf_reasoning_free(struct moeinf_reasoning *r);
/* The next piece of generated text. MOEINF_ERR_ARG after moeinf_reasoning_flush. */
MOEINF_API enum moeinf_status moeinf_reasoning_push(struct moeinf_reasoning *r, const char *text,
                                                    size_t len, struct moeinf_reasoning_text *out,
                                                    struct moeinf_error *err);
/* The end of the text: what was held back (a partial marker is text; trailing whitespace of
 * the thinking is dropped). */
MOEINF_API enum moeinf_status moeinf_reasoning_flush(struct moeinf_reasoning *r,
                                                     struct moeinf_reasoning_text *out,
                                                     struct moeinf_error *err);

/* ---- KV cache reuse and version (engine_kv.c) -------------------------------------------- */

/* Keeps the first n_keep tokens of the context and forgets the rest, so that a prompt that
 * shares them (a chat that resends its history) decodes only what follows. MOEINF_ERR_ARG
 * unless 0 <= n_keep <= moeinf_context_n_past. A model with recurrent layers (Gated DeltaNet:
 * qwen35moe, qwen3next) cannot forget a suffix of its state: the context goes back to the
 * latest state checkpoint at or before n_keep (one is taken after each micro-batch of a
 * multi-token decode, the last 4 kept), possibly 0, so read moeinf_context_n_past after and
 * decode from there. A model with sliding-window layers (gpt-oss) keeps only the last
 * window + n_batch - 1 positions of them: it goes back in place by up to n_batch tokens, and
 * further to the latest checkpoint of its windows at or before n_keep, as above. */
MOEINF_API enum moeinf_status moeinf_context_truncate(struct moeinf_context *ctx, int n_keep,
                                                      struct moeinf_error *err);

/* The library's version, "MAJOR.MINOR.PATCH". */
MOEINF_API const char *moeinf_version(void);

#ifdef __cplusplus
}
#endif

#endif /* MOEINF_H */
