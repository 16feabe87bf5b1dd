/*
 * moeinf_sim.h - the second public header of moeinf: the expert-cache simulator (`moeinf sim`)
 * and the tools over recorded expert-routing traces (`moeinf trace`). It includes moeinf.h,
 * whose conventions hold here too (errors as values, _free accepts NULL, no exit, not
 * thread-safe unless stated).
 */
#ifndef MOEINF_SIM_H
#define MOEINF_SIM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "moeinf.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- expert cache simulator (sim module) ------------------------------------------------- */

/*
 * Replays a recorded expert-routing trace ("moe-trace v1", described in src/trace/trace.h)
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
    int batch;             /* prefill tokens per iteration, as the engine's micro-batch (-b):
                              a request's prefill runs in steps over the distinct experts of
                              up to `batch` tokens; 0 or 1 = per token (default) */
    int parallel;          /* > 1: continuous batching, as `moeinf serve --parallel N -b batch`
                              runs requests that all arrive at once: N sequences, each
                              iteration one decode token of every generating sequence, then
                              prompt chunks, up to `batch` tokens (docs/SIM.md); 0 or 1 =
                              one request after another (default) */
    uint64_t *decode_misses; /* optional out (n_decode_misses entries, which must be the
                                trace's n_layers x n_experts): counted decode tokens' demand
                                misses per expert, [layer * n_experts + expert]; zeroed first.
                                NULL = not wanted */
    size_t n_decode_misses;
};

struct moeinf_sim_result {
    char policy[32];
    int n_layers;
    int n_experts;
    int top_k;
    int cache_experts; /* the cache size used (after rounding a percentage) */
    uint64_t requests; /* counted requests, tokens and decode tokens */
    uint64_t tokens;
    uint64_t decode_tokens;
    uint64_t iterations;      /* counted forward iterations (decode tokens + prefill
                                 micro-batches; = tokens when batch <= 1) */
    uint64_t accesses;        /* counted demand accesses, every phase */
    uint64_t hits;            /* of them, found resident (prefetched or not) */
    uint64_t decode_accesses; /* the part in decode tokens */
    uint64_t decode_hits;
    uint64_t prefetch_loads;    /* experts a prefetch brought in */
    uint64_t prefetch_hits;     /* demand hits on an expert a prefetch brought in (once each) */
    uint64_t wasted_prefetches; /* prefetched experts evicted or left at the end unused */
    bool timed;                 /* the time model ran */
    double ms_per_token;        /* time model: mean over counted tokens (0 if none) */
    double decode_ms_per_token; /* time model: mean over counted decode tokens (0 if none) */
};

/* Defaults: no trace, default policy, no cache size (one must be set), no prefetch, no
 * warmup, time model off. */
MOEINF_API struct moeinf_sim_params moeinf_sim_params_default(void);

/* Runs one replay. MOEINF_ERR_ARG for an unknown policy, a missing cache size or one smaller
 * than top_k; MOEINF_ERR_FORMAT (message "<path>:<line>: <defect>: ...") for a malformed
 * trace; MOEINF_ERR_IO when it cannot be read. */
MOEINF_API enum moeinf_status moeinf_sim_run(const struct moeinf_sim_params *params,
                                             struct moeinf_sim_result *out,
                                             struct moeinf_error *err);

/* The policies the simulator knows, by index (NULL past the end): name and one-line summary.
 * The strings are static. */
MOEINF_API const char *moeinf_sim_policy_name(size_t i);
MOEINF_API const char *moeinf_sim_policy_summary(size_t i);
/* The policy used when params.policy is NULL. */
MOEINF_API const char *moeinf_sim_default_policy(void);

/* ---- trace tools (trace module) ---------------------------------------------------------- */

/*
 * Tools over moe-trace v1 files (src/trace/trace.h) for experiments and for looking at routing:
 * one request's expert activation matrices (EAM: the L x E matrix of counts M[l][e] = tokens
 * routed to expert e of layer l) and how skewed they are (the CLI draws them too); subsets and
 * concatenations of traces; and trace-wide statistics that explain what cache policies see.
 * Everything streams the trace: memory is O(L x E) per kept EAM, never O(tokens).
 */

/* Phases (moeinf.h's enum moeinf_phase): PREFILL and DECODE as recorded; ALL sums both
 * counts (the CLI's heatmap draws the two panels side by side). */

/* One request's EAMs, prefill and decode kept apart (as the paper keeps them). */
struct moeinf_trace_eam {
    int n_layers;
    int n_experts;
    int top_k;
    int64_t request_id;
    int64_t index;       /* 0-based position among the trace's requests */
    char tag[256];       /* its "# req" tag (truncated); "-" when the trace has no req lines */
    char model[256];     /* the trace's "model" header; empty when absent */
    int64_t n_tokens[2]; /* tokens by phase: [MOEINF_PHASE_PREFILL], [..._DECODE] */
    uint32_t *counts[2]; /* per phase (n_layers, n_experts): counts[p][l * n_experts + e] */
};

/* Reads one request of a trace: the one with id `request_id` when it is >= 0, else the one at
 * position `index` (0-based). Reads up to the end of that request only. MOEINF_ERR_ARG when
 * the trace has no such request (the message says what it has). */
MOEINF_API enum moeinf_status moeinf_trace_eam_load(const char *path, int64_t request_id,
                                                    int64_t index, struct moeinf_trace_eam **out,
                                                    struct moeinf_error *err);
MOEINF_API void moeinf_trace_eam_free(struct moeinf_trace_eam *m);

/* M[l][e] of one phase (ALL: prefill + decode). */
MOEINF_API uint32_t moeinf_trace_eam_count(const struct moeinf_trace_eam *m,
                                           enum moeinf_phase phase, int layer, int expert);

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
MOEINF_API enum moeinf_status moeinf_trace_eam_skew(const struct moeinf_trace_eam *m,
                                                    enum moeinf_phase phase, int layer,
                                                    struct moeinf_trace_skew *out,
                                                    struct moeinf_error *err);

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

MOEINF_API struct moeinf_trace_filter_params moeinf_trace_filter_params_default(void);

/* What a filter or concat wrote. */
struct moeinf_trace_copy_result {
    int64_t n_requests;
    int64_t n_tokens[2]; /* prefill, decode */
    int64_t n_shifted;   /* concat: inputs whose request ids were shifted */
};

MOEINF_API enum moeinf_status moeinf_trace_filter(const char *in_path, const char *out_path,
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
MOEINF_API enum moeinf_status moeinf_trace_concat(const char *const *in_paths, int n_in,
                                                  const char *out_path, const char *note,
                                                  struct moeinf_trace_copy_result *out,
                                                  struct moeinf_error *err);

/* mean, min and max over layers; NaN where there is nothing to measure */
struct moeinf_trace_spread {
    double mean, min, max;
};

/*
 * Trace-wide statistics, each by phase ([MOEINF_PHASE_PREFILL], [..._DECODE],
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

MOEINF_API enum moeinf_status moeinf_trace_stats(const char *path, struct moeinf_trace_stats *out,
                                                 struct moeinf_error *err);

#ifdef __cplusplus
}
#endif

#endif /* MOEINF_SIM_H */
