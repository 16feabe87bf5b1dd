/*
 * fit.h - `moeinf fit`: whether a model runs on this machine and how fast, before it is used
 * (fit.c: the model's sizes from its tensor table; fit_probe.c: this machine's bandwidths;
 * fit_routing.c: the expert cache's hit ratio from the simulator). In src/app: only the
 * programs and tests use it.
 */
#ifndef MOEINF_APP_FIT_H
#define MOEINF_APP_FIT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "moeinf.h"

struct moeinf_store_layer;

/* What the tensor table and the metadata say, as the engine would allocate it. */
struct cli_fit_model {
    char arch[32];
    int n_layer, n_moe_layers, n_expert, n_expert_used;
    bool header_only;          /* the file lacks some of its tensor data (or was a preset) */
    uint64_t file_bytes;       /* the whole file: header and data section */
    uint64_t present_bytes;    /* what is on disk now */
    uint64_t weight_bytes;     /* every tensor's data */
    uint64_t expert_bytes;     /* one routed expert of one layer: its gate, up and down
                                  (the expert cache's slot) */
    uint64_t slot_bytes;       /* the expert cache's slot: each part in whole 4 KiB windows
                                  (offload/store.c) */
    uint64_t experts_bytes;    /* every routed expert */
    uint64_t nonexpert_bytes;  /* everything else: resident under --expert-cache */
    uint64_t decode_bytes;     /* weights read per decode token (moeinf_model_decode_bytes) */
    uint64_t nonexpert_decode; /* of them, not routed experts */
    uint64_t active_elems;     /* weights multiplied per token (prefill compute), the
                                  lm_head included */
    uint64_t output_elems;     /* of them, the lm_head's: prefill computes it for the last
                                  position of each micro-batch only */
    uint64_t routed_elems;     /* of them, the routed experts' (top_k per MoE layer) */
    /* Attention of a 512-token prompt from position 0 (one micro-batch), every attention
     * layer (compute/attention.c: per query head and position pair, a float dot over the K
     * head and the weighted sum's multiply-adds over the V head) */
    double attn_dot;           /* multiply-adds of q.k */
    double attn_wsum;          /* multiply-adds of the weighted sum of V */
    uint64_t kv_token_bytes;   /* KV cache per token of context (F16), every attention layer */
    uint64_t state_bytes;      /* fixed per context: sliding windows' rings, recurrent state
                                  and its checkpoints (n_batch 512) */
    uint64_t scratch_bytes;    /* a context's activations for micro-batches of 512 tokens */
    int expert_type;           /* GGML type of the first routed expert matrix (or FFN) */
    struct moeinf_store_layer *layout; /* (n_moe_layers) where each MoE layer's experts lie
                                          in the file (offload/store.h); owned, freed by
                                          cli_fit_model_free */
};

/* Reads MODEL's header and tensor table (a whole file or one cut anywhere after its tensor
 * table). MOEINF_ERR_FORMAT for a file that is not a GGUF or is cut before the end of its
 * table; MOEINF_ERR_UNSUPPORTED for an architecture moeinf does not run. */
enum moeinf_status cli_fit_read(const char *path, struct cli_fit_model *out,
                                struct moeinf_error *err);
void cli_fit_model_free(struct cli_fit_model *m);

/* This machine, measured (fit_probe.c). */
struct cli_fit_machine {
    double mem_gbps;      /* weight bytes the expert type's decode kernel reads, all threads,
                           * 1e9 B/s (a plain stream's where the type has no rows kernel) */
    double disk_gbps;     /* O_DIRECT random reads of expert-sized blocks, 4 at a time */
    double dot_gops;      /* prefill kernel throughput: weights x tokens, 1e9/s, all threads */
    double fdot_gops;     /* attention: q.k multiply-adds, 1e9/s, all threads */
    double wsum_gops;     /* attention: weighted sum multiply-adds (V), 1e9/s, all threads */
    int threads;          /* the threads the figures are for */
    int64_t when;         /* unix time of the probes */
    bool cached;          /* read from the cache file */
    bool disk_from_model; /* the disk figure came from the model file itself */
    char disk_note[160];  /* what the disk probe read */
};

/* Measures (or reuses, when the cache file in the cache folder holds figures for the same
 * thread count and disk probe file's folder younger than a week, and reprobe is false) the
 * bandwidths; the disk probe reads `model_path` when it holds at least 64 MiB of data, else a
 * temporary file beside the cache (`block` bytes at a time). */
enum moeinf_status cli_fit_probe(const char *model_path, uint64_t block, int threads, bool reprobe,
                                 int expert_type, struct cli_fit_machine *out,
                                 struct moeinf_error *err);

/* GB/s of O_DIRECT reads of the windows the expert cache would read for the misses (`misses`:
 * the decode misses per expert, [MoE layer x n_expert + expert], from the simulator), each of
 * an expert's three parts drawn in proportion to its expert's misses, 4 at a time, for
 * MISS_SECS, into huge pages: the disk as the engine's misses will use it. Those windows are
 * ones a run has just read (its prefill reads every uncached expert); on a virtual disk whose
 * host keeps recently read blocks, random reads over the whole file came far slower (0.05-0.95
 * against 1.2-2.5 GB/s on the AMD EPYC, docs/OFFLOAD.md). *footprint: the bytes of the
 * distinct windows. 0 when nothing missed, the file lacks the experts' data or a read fails. */
double cli_fit_probe_misses(const char *path, const struct cli_fit_model *m, const uint64_t *misses,
                            uint64_t *footprint);

/* Where the probe cache lives: $XDG_CACHE_HOME/moeinf/fit-probe.txt or ~/.cache/... */
bool cli_fit_cache_path(char *buf, size_t size, struct moeinf_error *err);

/* The hit ratio of decode tokens under a cache of `slots` of the model's experts, from the
 * simulator: on the trace at trace_path when given (its geometry must be the model's), else on
 * a synthetic routing of the model's geometry drawn with the parameters fitted to the shared
 * traces (fit_routing.c). `source` says which. Prefill runs in micro-batches of CLI_FIT_BATCH
 * tokens, as the engine's do; *prefill_hit is the share of their experts found cached (-1
 * where the routing has no prefill). */
enum moeinf_status cli_fit_hit_ratio(const struct cli_fit_model *m, int slots,
                                     const char *trace_path, uint64_t *misses, double *hit,
                                     double *prefill_hit, char *source, size_t source_size,
                                     struct moeinf_error *err);

/* misses, when not NULL (n_moe_layers x n_expert entries): the decode misses per expert. */

/* The synthetic routing (fit_routing.c): n_requests requests of n_tokens decode tokens, each
 * token drawing top_k of n_experts per layer with the parameters of calibration row `row`
 * (skew and reuse), written as a moe-trace v1 file. For the calibration script too. */
enum moeinf_status cli_fit_synthetic_trace(const char *path, int n_layers, int n_experts,
                                           int top_k, double skew, double reuse, int n_requests,
                                           int n_tokens, uint64_t seed, struct moeinf_error *err);

/* The prediction's constants (fit.c says what they are and how they were found). */
#define CLI_FIT_MEM_EFF  0.70  /* share of the probed memory bandwidth decode reaches */
#define CLI_FIT_DISK_EFF 0.89  /* share of the probed disk bandwidth the expert reads reach */
#define CLI_FIT_PREFILL_READ_EFF 0.75  /* share of the disk probe prefill's reads reach */
#define CLI_FIT_DOT_EFF  1.0   /* prefill's products: the engine's rate against the probe's */
#define CLI_FIT_ATTN_EFF 1.0   /* prefill's attention: against the probed kernels' rates */
/* per MoE layer of a decode token with an expert cache: the wave's pinning, the queueing and
 * the latency of the reads it waits for */
#define CLI_FIT_LAYER_S  0.00175
#define CLI_FIT_BATCH    512   /* the engine's micro-batch, the prompt prefill is predicted for */

/* A prediction for one memory budget. */
struct cli_fit_prediction {
    uint64_t memory;       /* the budget */
    bool resident;         /* every weight fits: no expert cache */
    bool runs;             /* the non-expert weights, KV, scratch and one layer's experts fit */
    uint64_t cache_bytes;  /* suggested --expert-cache (whole slots) */
    int cache_slots;
    double cache_percent;  /* of every expert */
    double hit;            /* decode hit ratio (resident: 1) */
    double prefill_hit;    /* share of a prefill micro-batch's experts found cached (the
                              simulator's; resident: 1) */
    double decode_tps;     /* predicted */
    double prefill_tps;
    double t_mem, t_disk;  /* decode: seconds per token reading memory and the disk */
    double t_nonexpert;    /* decode: of t_mem, the non-expert weights' (with a cache) */
    double t_dot, t_attn;  /* prefill: seconds per micro-batch in the matrix products and
                              in the attention */
    double t_read;         /* prefill: seconds per micro-batch that waiting for the reads of
                              uncached experts adds (what the waves do not hide) */
    double miss_gbps;      /* decode's disk rate from cli_fit_probe_misses (0: not probed,
                              t_disk then uses the machine's random-read probe) */
    uint64_t miss_footprint; /* the distinct bytes those misses read */
};

/* Seconds one MoE layer's step of a prefill micro-batch spends waiting for its reads, beyond
 * computing its experts, as the engine runs it (experts/step.h, model/layer_moe.c): `used`
 * experts, `hits` of them cached, in waves of at most `slots`, the cached ones first; a
 * wave's misses are read one after another (expert_read seconds each) from the wave's start,
 * and its experts computed (expert_s seconds each) as they are there, the cached ones first.
 * A wave with misses so lasts the longest of: computing them all; the first read, then
 * computing the misses; reading them all, then computing the last. The next wave starts
 * when it is done. */
double cli_fit_prefill_read_wait(double used, double hits, double slots, double expert_s,
                                 double expert_read);

/* The prediction at `memory` bytes for a context of n_ctx tokens (fit.c; its constants and
 * how they were calibrated are described there), the hit ratio through
 * cli_fit_hit_ratio(trace_path). With probe_path (the whole model file), decode's disk time
 * comes from cli_fit_probe_misses over the simulated misses. */
enum moeinf_status cli_fit_predict(const struct cli_fit_model *m, const struct cli_fit_machine *mc,
                                   uint64_t memory, int n_ctx, const char *trace_path,
                                   const char *probe_path, struct cli_fit_prediction *out,
                                   char *source, size_t source_size, struct moeinf_error *err);

/* gen-model's header of a geometry in a file at path (gen/gen_header.h): a model that
 * cli_fit_read reads. */
enum moeinf_status cli_fit_preset_header(const struct moeinf_gen_params *p, const char *path,
                                         struct moeinf_error *err);

/* The memory this process may use (base/memlimit.h): its cgroup's limit, else MemAvailable;
 * `source` says which. */
enum moeinf_status cli_fit_memory(uint64_t *bytes, char *source, size_t source_size,
                                  struct moeinf_error *err);

#endif
