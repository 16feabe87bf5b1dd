/*
 * tier.h - the engine's offloaded routed experts: the fast tier (cache slots, policy) in front
 * of the slow tier (experts/store.c, the model file), driven by the forward pass one layer
 * step at a time through experts/step.h, with the counters --stats reports.
 *
 * Per forward iteration (a decode token or a prefill micro-batch) the forward pass calls
 *   moeinf_tier_iteration_begin(t, phase, m);
 *   per MoE layer: moeinf_tier_layer_begin(t, layer, sel, m, top_k);
 *                  while (moeinf_tier_wave(t, &ids, &n, err) == OK && n > 0) {
 *                      compute experts ids[0..n) with moeinf_tier_part(t, i, part);
 *                      moeinf_tier_wave_end(t);
 *                  }
 *                  moeinf_tier_layer_end(t);
 *   moeinf_tier_iteration_end(t);
 * and the engine brackets requests with moeinf_tier_request_begin / _end. This part reads
 * misses synchronously inside moeinf_tier_wave; prefetching on I/O threads is planned.
 */
#ifndef MOEINF_EXPERTS_TIER_H
#define MOEINF_EXPERTS_TIER_H

#include <stdbool.h>
#include <stdint.h>

#include "experts/cache.h"
#include "experts/policy.h"
#include "experts/step.h"
#include "experts/store.h"
#include "moeinf.h"

/* Counters of one layer (or of all). */
struct moeinf_tier_counters {
    uint64_t accesses; /* expert accesses: one per distinct expert per step */
    uint64_t hits;
    uint64_t misses;
    struct moeinf_store_counters io;
};

struct moeinf_tier {
    struct moeinf_cache *cache;
    struct moeinf_policy *policy;
    struct moeinf_store *store;
    struct moeinf_step step;
    struct moeinf_cache_event *events; /* (capacity) the current wave's accesses */
    const uint32_t *wave_ids;
    int wave_n;
    int n_layers, n_experts;
    bool in_request;
    uint64_t n_requests;
    struct moeinf_tier_counters *layer; /* (n_layers) */
    uint64_t tokens, decode_tokens;
};

/*
 * Opens the store over `path` with n_slots slots (the cache capacity, >= top_k) and the
 * policy `policy` (a registered online policy; NULL: the default); page_cache: see store.h.
 * MOEINF_ERR_ARG for an unknown or offline policy, the store's errors otherwise.
 */
enum moeinf_status moeinf_tier_init(const char *path, const struct moeinf_store_layer *layers,
                                    int n_layers, int n_experts, int top_k, int n_slots,
                                    const char *policy, bool page_cache, struct moeinf_tier **out,
                                    struct moeinf_error *err);
void moeinf_tier_free(struct moeinf_tier *t);

/* A request starts (ending the previous one, if any) / ends. */
void moeinf_tier_request_begin(struct moeinf_tier *t);
void moeinf_tier_request_end(struct moeinf_tier *t);
void moeinf_tier_iteration_begin(struct moeinf_tier *t, enum moeinf_phase phase, int m);
void moeinf_tier_iteration_end(struct moeinf_tier *t);

void moeinf_tier_layer_begin(struct moeinf_tier *t, int layer, const int32_t *sel, int m,
                             int top_k);
/* The next wave: pins it, reads its misses into their slots; *ids are flat expert ids. */
enum moeinf_status moeinf_tier_wave(struct moeinf_tier *t, const uint32_t **ids, int *n,
                                    struct moeinf_error *err);
/* Part (0 gate, 1 up, 2 down) of the wave's i-th expert. */
const uint8_t *moeinf_tier_part(const struct moeinf_tier *t, int i, int part);
void moeinf_tier_wave_end(struct moeinf_tier *t);
void moeinf_tier_layer_end(struct moeinf_tier *t);

#endif
