/* engine.h - the structs behind the public handles (internal; see moeinf.h). */
#ifndef MOEINF_ENGINE_H
#define MOEINF_ENGINE_H

#include <stdatomic.h>
#include <stdint.h>

#include "compute/pool.h"
#include "offload/tier.h"
#include "gguf/gguf.h"
#include "model/forward.h"
#include "model/model.h"
#include "model/resident.h"
#include "moeinf.h"

struct moeinf_vocab;
struct moeinf_trace_writer;

struct moeinf_model {
    struct moeinf_gguf *gguf; /* owns the mapping the weights point into */
    struct moeinf_llm *llm;
    struct moeinf_vocab *vocab;
    struct moeinf_resident *resident; /* offload_experts: the weights read into memory and
                                         where the experts lie; NULL otherwise */
    enum moeinf_load_mode load_mode;  /* MAP or READ: how it was loaded */
    struct moeinf_model_id id;        /* a MoE model's identity (its routers, experts/eam.h):
                                         what its saved expert-cache state names */
    /* The memory budget the contexts of this model share (engine_experts.c): bytes their
     * expert caches' slots and their KV caches and scratch hold, added by context init and
     * taken back by context free, from any thread. Relaxed order: it is a count, read and
     * changed by compare-and-swap alone, and guards no other memory. */
    _Atomic uint64_t expert_held;
};

struct moeinf_context {
    struct moeinf_model *model; /* borrowed */
    struct moeinf_context_params params;
    struct moeinf_pool *pool;
    const struct moeinf_kernels *kern;
    struct moeinf_fwd *fwd;
    struct moeinf_tier *tier; /* the expert cache, or NULL (experts resident) */
    uint64_t expert_held;     /* what this context adds to model->expert_held */
    int *seq_past;  /* [n_seq] tokens each sequence holds */
    int32_t *batch_buf; /* moeinf_decode_batch's scratch (engine_batch.c): 2 n_batch + 3 n_seq */
    struct moeinf_fwd_run *runs; /* [n_seq] */
    struct moeinf_trace_writer *record; /* routing record, or NULL */
    char *record_tag;
    int64_t record_requests;     /* requests written so far */
    int32_t *record_row;         /* [n_layer][n_expert_used] one token's routing */
    const int32_t *route_replay; /* routing of the next decode call, or NULL
                                    (engine_replay.h) */
    int route_replay_n;          /* its tokens */
    bool route_replay_prefill;   /* its phase */
};

/* engine_experts.c: the context's expert cache, when its params ask for one (or the model's
 * experts are offloaded, which needs one). */
enum moeinf_status moeinf_engine_expert_cache_init(struct moeinf_context *ctx,
                                                   struct moeinf_error *err);
/* engine_experts.c: gives back what the context held of the model's budget (context free). */
void moeinf_engine_expert_cache_release(struct moeinf_context *ctx);

/* engine_record.c: appends the last eval's routing to the open record. */
enum moeinf_status moeinf_record_eval(struct moeinf_context *ctx, int m, int n_past, bool prefill,
                                      struct moeinf_error *err);

#endif
