/*
 * tier.h - the engine's offloaded routed experts: the expert cache (experts/cache.h and a
 * policy, deciding which experts stay; the fast tier of offload/fast_tier.h, holding and
 * computing them) in front of the slow tier (offload/store.c, the model file, read on I/O
 * threads by offload/loader.c), driven by the forward pass one layer step at a time through
 * experts/step.h, with the counters a context reports (moeinf_context_expert_stats).
 *
 * Per forward iteration (a decode token or a prefill micro-batch) the forward pass calls
 *   moeinf_tier_iteration_begin(t, phase, m);
 *   per MoE layer: moeinf_tier_layer_begin(t, layer, sel, m, top_k);
 *                  [moeinf_tier_hint(t, later_layer, experts, n);]   gate lookahead
 *                  while (moeinf_tier_wave(t, &ids, &n, err) == OK && n > 0) {
 *                      compute the experts that moeinf_tier_ready(t, i) says are there;
 *                      until all are computed: moeinf_tier_wave_wait_next(t, err) and
 *                          compute those that have arrived since,
 *                      all with moeinf_tier_part(t, i, part) and moeinf_tier_compute;
 *                      moeinf_tier_wave_wait(t, err);   retires the reads
 *                      moeinf_tier_wave_end(t);
 *                  }
 *                  moeinf_tier_layer_end(t, err);
 *   moeinf_tier_iteration_end(t);
 * and the engine brackets requests with moeinf_tier_request_begin / _end.
 *
 * Loads. A wave's misses are queued as demand reads; the forward pass computes the wave's
 * experts that are already there, then waits for the rest (and for any that a prefetch is
 * still bringing in: a "late" prefetch, promoted to a demand read) one read at a time,
 * computing each expert as it arrives while the next ones are read; those waits are the stall
 * time. Prefetches come from two sources and are
 * admitted to the cache exactly as the simulator admits them (moeinf_cache_prefetch, same
 * victims), their reads queued behind every demand read. The cache decides at the same
 * points as the simulator and never looks at the reads: what is admitted and what is evicted
 * depends only on the accesses, never on timing; only whether a prefetch has arrived when
 * its expert is demanded does (a hit, or a late prefetch the step waits for):
 *   - the policy's proposals after each step (moeinf_tier_layer_end: up to `prefetch` per
 *     step, what the simulator's prefetch means);
 *   - gate lookahead hints from the forward pass (the routers of the next layers applied to
 *     the current hidden state), issued right after the wave's demand reads are queued.
 * A source that is auto (prefetch_auto.h) keeps naming experts, and the tier scores every
 * prediction (precision on all the experts named, and on those that had to be read), but its
 * reads are issued only for the layers where the controller has it on; the controller also
 * weighs the I/O threads' idle time, so with auto what is admitted depends on timing too.
 * A read in flight pins nothing. When the cache evicts a prefetched expert whose read is
 * still in flight, a queued read is cancelled (a dropped prefetch) and a running one waited
 * for, before the slot is read into again. The cache and the
 * policy are only touched by the forward pass's thread; the I/O threads only read.
 */
#ifndef MOEINF_OFFLOAD_TIER_H
#define MOEINF_OFFLOAD_TIER_H

#include <stdbool.h>
#include <stdint.h>

#include "compute/expert_ffn.h"
#include "compute/pool.h"
#include "experts/policy.h"
#include "moeinf.h"
#include "offload/fast_tier.h"
#include "offload/store.h"

/* Where a prediction came from. */
enum moeinf_tier_source {
    MOEINF_SOURCE_POLICY = 0,    /* the policy's prefetch proposals */
    MOEINF_SOURCE_LOOKAHEAD = 1, /* the next layers' routers on the current hidden state */
    MOEINF_SOURCE_COUNT = 2,
};

/* Counters of one layer (or of all). */
struct moeinf_tier_counters {
    uint64_t accesses;               /* expert accesses: one per distinct expert per step, =
                                        hits + late_prefetches + misses */
    uint64_t hits;                   /* resident, its bytes there: the step did not wait */
    uint64_t misses;                 /* demand reads */
    uint64_t prefetches;             /* prefetch reads queued */
    uint64_t prefetch_hits;          /* hits on an expert a prefetch brought in (first use) */
    uint64_t late_prefetches;        /* accesses to an expert a prefetch admitted whose read was
                                        queued or running: the step waited (the cache's, and the
                                        simulator's, hit; not in hits) */
    uint64_t wasted_prefetches;      /* prefetched experts evicted before any demand, and (in a
                                        report) those resident and still unused: the simulator's */
    uint64_t dropped_prefetches;     /* of the wasted, those whose read was cancelled before it
                                        started (the expert was evicted first) */
    uint64_t reads_in_flight;        /* (a report only) reads queued or running, not yet in io */
    uint64_t stall_ns;               /* time the forward pass waited for reads */
    struct moeinf_store_counters io; /* reads finished (demand and prefetch) */
    /* Per source, of the experts it named for this layer's steps (whether its reads were
     * issued or not: auto), those not in the cache when named (reads) and, of them, those
     * the step used (reads_used: demand misses it turned, or would have turned, into
     * prefetches) */
    uint64_t reads[MOEINF_SOURCE_COUNT], reads_used[MOEINF_SOURCE_COUNT];
    uint64_t spare_ns; /* I/O thread time idle before the layer's steps (prefetch_auto.h) */
};

/* How well a source predicted: of the experts it named for a layer, how many that layer's
 * next step used (precision = correct / predicted), and of the experts used by steps it had
 * named experts for, how many it named (recall = correct / actual). */
struct moeinf_tier_prediction {
    uint64_t predicted, correct, actual;
};

/* What the tier did, since it was made or last reset. */
struct moeinf_tier_report {
    struct moeinf_tier_counters counters; /* of the layer asked for, or of all summed */
    uint64_t tokens, decode_tokens;       /* tokens of the iterations, every phase / decode */
    int layers_on[MOEINF_SOURCE_COUNT];   /* auto: the layers (of those asked for) where the
                                             source's precision pays now; -1: not auto */
    int layers_read[MOEINF_SOURCE_COUNT]; /* auto: of them, where its reads are issued now */
    uint64_t auto_checks, auto_checks_kept; /* prefetch_auto.h's wall-time check's verdicts */
    struct moeinf_tier_prediction prediction[MOEINF_SOURCE_COUNT];
};

/* What the tier is. */
struct moeinf_tier_info {
    int slots;
    uint64_t slot_bytes;
    const char *policy;  /* its name */
    const char *fast;    /* the fast tier's name ("ram") */
    bool direct_io;      /* reads bypass the page cache */
    const char *io_note; /* one line on how experts are read, or NULL */
};

/*
 * The values come checked (moeinf_context_params_check states the rules): the tier trusts
 * them. budget_bytes sizes the fast tier: budget_bytes / moeinf_store_slot_bytes_for(...)
 * slots, cut to every expert when more; fewer than top_k is MOEINF_ERR_ARG.
 */
struct moeinf_tier_params {
    const char *path;                        /* the model file */
    const struct moeinf_store_layer *layers; /* [n_layers] where each layer's experts lie */
    int n_layers, n_experts, top_k;
    struct moeinf_model_id model; /* the policy's (its saved state names it) */
    uint64_t budget_bytes;
    const char *policy;                      /* a registered online policy; NULL: the default */
    enum moeinf_expert_io io;                /* how the store reads (store.h) */
    int io_threads;                          /* 0: reads on the forward pass's thread */
    int prefetch;                            /* policy proposals admitted per step; 0 without
                                                I/O threads */
    /* auto (prefetch_auto.h): the source's reads are issued only for the layers where its
     * measured precision pays; the policy then proposes `prefetch` experts per step and the
     * forward pass hints lookahead for every decode token. Not without I/O threads. */
    bool prefetch_auto, lookahead_auto;
    const struct moeinf_fast_tier_ops *fast; /* NULL: the RAM tier */
};

struct moeinf_tier;

/* Opens the fast tier, the store over `path`, the policy and the I/O threads. MOEINF_ERR_ARG
 * for a budget under top_k slots or an unknown or offline policy, the store's, the fast
 * tier's and the loader's errors otherwise. */
enum moeinf_status moeinf_tier_init(const struct moeinf_tier_params *params,
                                    struct moeinf_tier **out, struct moeinf_error *err);
void moeinf_tier_free(struct moeinf_tier *t);

void moeinf_tier_info(const struct moeinf_tier *t, struct moeinf_tier_info *out);
/* layer in [0, n_layers), or -1 for every layer summed. */
void moeinf_tier_report(const struct moeinf_tier *t, int layer, struct moeinf_tier_report *out);
/* Zeroes the counters, after every read in flight has finished (the cache keeps its
 * contents). */
void moeinf_tier_report_reset(struct moeinf_tier *t);
/* The policy, for its learned state (save and load). */
struct moeinf_policy *moeinf_tier_policy(struct moeinf_tier *t);
/* Reads queued or running (demand and prefetch), not yet retired. */
int moeinf_tier_reads_in_flight(const struct moeinf_tier *t);
/* True between moeinf_tier_request_begin and _end. */
bool moeinf_tier_in_request(const struct moeinf_tier *t);
/* Empties the cache (the policy told of each expert as of an eviction), after every read in
 * flight has finished: the next steps miss. */
void moeinf_tier_evict_all(struct moeinf_tier *t);

/* A request starts (ending the previous one, if any) / ends. */
void moeinf_tier_request_begin(struct moeinf_tier *t);
void moeinf_tier_request_end(struct moeinf_tier *t);
void moeinf_tier_iteration_begin(struct moeinf_tier *t, enum moeinf_phase phase, int m);
void moeinf_tier_iteration_end(struct moeinf_tier *t);

void moeinf_tier_layer_begin(struct moeinf_tier *t, int layer, const int32_t *sel, int m,
                             int top_k);
/* Gate lookahead: the forward pass predicts that `layer` (a later layer) will use experts[0..n)
 * (experts of that layer); they are prefetched after the current wave's demand reads. At most
 * top_k experts for each of the layers after the step's. */
void moeinf_tier_hint(struct moeinf_tier *t, int layer, const int *experts, int n);
/* The next wave: pins it and queues the reads of its misses (and the lookahead hints); *ids
 * are flat expert ids. The wave's experts may be computed once ready: moeinf_tier_ready for
 * one, moeinf_tier_wave_wait for all (the forward pass computes the ready ones first, so that
 * the reads overlap that compute). */
enum moeinf_status moeinf_tier_wave(struct moeinf_tier *t, const uint32_t **ids, int *n,
                                    struct moeinf_error *err);
/* True if the wave's i-th expert is in its slot now. */
bool moeinf_tier_ready(const struct moeinf_tier *t, int i);
/* Waits for the wave's reads (the stall) and retires them. On a failed read the wave is over
 * (unpinned, its failed experts forgotten) and the read's error is returned. */
enum moeinf_status moeinf_tier_wave_wait(struct moeinf_tier *t, struct moeinf_error *err);
/* Waits for the next of the wave's reads still in flight, in the order they were queued (the
 * order the I/O threads take them), and returns once it has arrived (at once when none is
 * left), so that the forward pass computes each expert while the later ones are still read;
 * the wait counts as stall. moeinf_tier_wave_wait then retires the wave's reads. On a failed
 * read it is moeinf_tier_wave_wait: the wave is over and the read's error is returned. */
enum moeinf_status moeinf_tier_wave_wait_next(struct moeinf_tier *t, struct moeinf_error *err);
/* Part (0 gate, 1 up, 2 down) of the wave's i-th expert, in its slot. */
const uint8_t *moeinf_tier_part(const struct moeinf_tier *t, int i, int part);
/* Computes ready wave experts whose parts (moeinf_tier_part) ffn names, in the fast tier. */
void moeinf_tier_compute(struct moeinf_tier *t, const struct moeinf_expert_ffn *ffn,
                         struct moeinf_pool *pool, const struct moeinf_kernels *kern);
void moeinf_tier_wave_end(struct moeinf_tier *t);
/* Ends the step and queues the policy's prefetch proposals. Errors are the cache's (a policy
 * that names an invalid victim). */
enum moeinf_status moeinf_tier_layer_end(struct moeinf_tier *t, struct moeinf_error *err);

/* Waits for every read in flight and retires it (the cache keeps its contents): before the
 * counters are reset and before the cache is emptied. */
void moeinf_tier_quiesce(struct moeinf_tier *t);

#endif
