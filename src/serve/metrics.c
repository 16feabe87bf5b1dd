/* metrics.c - GET /metrics: the server's counters in Prometheus text format (version 0.0.4), and
 * the histograms the batching worker records into (iterations by tokens, time to first token). */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "app/grow.h"
#include "serve/serve.h"

struct out {
    char *buf;
    size_t len, cap;
};

__attribute__((format(printf, 2, 3))) static void add(struct out *o, const char *fmt, ...) {
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        int n = vsnprintf(o->buf ? o->buf + o->len : NULL, o->buf ? o->cap - o->len : 0, fmt, ap);
        va_end(ap);
        if (n < 0) return;
        if (o->buf && o->len + (size_t)n < o->cap) {
            o->len += (size_t)n;
            return;
        }
        char *b = moeinf_grow(o->buf, &o->cap, o->len + (size_t)n + 1, 1);
        if (!b) return;
        o->buf = b;
    }
}

/* The buckets' upper bounds (le); the last bucket, +Inf, has none. */
static const double batch_le[SERVE_BATCH_BUCKETS - 1] = {1, 2, 4, 8, 16, 32, 64, 128, 256, 512};
static const double ttft_le[SERVE_TTFT_BUCKETS - 1] = {.05, .1, .25, .5, 1, 2.5, 5, 10};

/* The bucket of v: the first whose bound is >= v, else +Inf. */
static int bucket(const double *le, int n_le, double v) {
    int i = 0;
    while (i < n_le && v > le[i])
        i++;
    return i;
}

void serve_metrics_batch(struct serve_metrics *m, int tokens) {
    if (tokens < 1) return;
    m->batch_hist[bucket(batch_le, SERVE_BATCH_BUCKETS - 1, tokens)]++;
    m->iterations++;
    m->iteration_tokens += (uint64_t)tokens;
}

void serve_metrics_ttft(struct serve_metrics *m, double seconds) {
    if (!(seconds >= 0)) seconds = 0; /* a clock step back, or NaN */
    m->ttft_hist[bucket(ttft_le, SERVE_TTFT_BUCKETS - 1, seconds)]++;
    m->ttft_count++;
    m->ttft_sum += seconds;
}

static void metric(struct out *o, const char *name, const char *type, const char *help,
                   double value) {
    add(o, "# HELP %s %s\n# TYPE %s %s\n%s %.17g\n", name, help, name, type, name, value);
}

/* A histogram from its per-bucket counts (hist[n_le] the +Inf bucket): cumulative buckets, the sum
 * and the count. */
static void histogram(struct out *o, const char *name, const char *help, const double *le, int n_le,
                      const uint64_t *hist, double sum, uint64_t count) {
    add(o, "# HELP %s %s\n# TYPE %s histogram\n", name, help, name);
    uint64_t acc = 0;
    for (int i = 0; i <= n_le; i++) {
        acc += hist[i];
        if (i < n_le) {
            add(o, "%s_bucket{le=\"%g\"} %llu\n", name, le[i], (unsigned long long)acc);
        } else {
            add(o, "%s_bucket{le=\"+Inf\"} %llu\n", name, (unsigned long long)acc);
        }
    }
    add(o, "%s_sum %.17g\n%s_count %llu\n", name, sum, name, (unsigned long long)count);
}

enum layer_field {
    LAYER_HITS,
    LAYER_MISSES,
    LAYER_ACCESSES
};

/* One counter family with a sample per MoE layer, labelled by the layer's index among them. */
static void layer_counter(struct out *o, const char *name, const char *help,
                          const struct moeinf_expert_stats *st, int n, enum layer_field f) {
    add(o, "# HELP %s %s\n# TYPE %s counter\n", name, help, name);
    for (int i = 0; i < n; i++) {
        uint64_t v = f == LAYER_HITS     ? st[i].hits
                     : f == LAYER_MISSES ? st[i].misses
                                         : st[i].accesses;
        add(o, "%s{layer=\"%d\"} %llu\n", name, i, (unsigned long long)v);
    }
}

char *serve_metrics_text(struct serve_worker *w) {
    pthread_mutex_lock(&w->mu);
    struct serve_metrics m = w->m;
    int queued = w->queued;
    int busy = w->busy;
    int queue_max = w->queue_max;
    /* the per-layer counters are the worker's memory: copied while it cannot change them */
    m.layer_experts = NULL;
    if (m.n_moe_layers > 0 && w->m.layer_experts) {
        m.layer_experts = malloc((size_t)m.n_moe_layers * sizeof *m.layer_experts);
        if (m.layer_experts) {
            memcpy(m.layer_experts, w->m.layer_experts,
                   (size_t)m.n_moe_layers * sizeof *m.layer_experts);
        }
    }
    pthread_mutex_unlock(&w->mu);
    struct out o = {0};
    add(&o, "%s", "");
    metric(&o, "moeinf_http_requests_total", "counter", "HTTP requests received",
           (double)m.http_requests);
    metric(&o, "moeinf_http_errors_total", "counter", "HTTP requests answered with 4xx or 5xx",
           (double)m.http_errors);
    metric(&o, "moeinf_requests_rejected_total", "counter",
           "generation requests refused with 503 because the queue was full", (double)m.rejected);
    metric(&o, "moeinf_connections_refused_total", "counter",
           "requests answered 503 because the server had too many open connections",
           (double)m.conns_refused);
    metric(&o, "moeinf_requests_cancelled_total", "counter",
           "generations stopped because the client went away", (double)m.cancelled);
    metric(&o, "moeinf_completions_total", "counter", "generations finished",
           (double)m.completions);
    metric(&o, "moeinf_prompt_tokens_total", "counter", "prompt tokens of finished generations",
           (double)m.prompt_tokens);
    metric(&o, "moeinf_prompt_tokens_cached_total", "counter",
           "prompt tokens reused from the previous request's KV cache", (double)m.cached_tokens);
    metric(&o, "moeinf_completion_tokens_total", "counter", "tokens generated",
           (double)m.completion_tokens);
    metric(&o, "moeinf_prompt_seconds_total", "counter", "seconds spent on prompts",
           m.prompt_seconds);
    metric(&o, "moeinf_generation_seconds_total", "counter", "seconds spent generating",
           m.generation_seconds);
    metric(&o, "moeinf_prompt_tokens_per_second", "gauge",
           "prompt tokens per second of the last generation (reused tokens not counted)",
           m.last_prompt_tps);
    metric(&o, "moeinf_generation_tokens_per_second", "gauge",
           "generated tokens per second of the last generation", m.last_generation_tps);
    metric(&o, "moeinf_queue_depth", "gauge", "requests waiting for the generation thread", queued);
    metric(&o, "moeinf_queue_capacity", "gauge", "requests the queue holds (--queue)", queue_max);
    metric(&o, "moeinf_busy", "gauge", "1 while a generation runs", busy);
    metric(&o, "moeinf_parallel", "gauge", "sequences the context holds (--parallel)",
           m.n_parallel);
    metric(&o, "moeinf_active_sequences", "gauge", "sequences in prefill or generating now",
           m.active_seqs);
    histogram(&o, "moeinf_batch_tokens", "tokens per forward iteration (decode and prompt)",
              batch_le, SERVE_BATCH_BUCKETS - 1, m.batch_hist, (double)m.iteration_tokens,
              m.iterations);
    metric(&o, "moeinf_decode_tokens_per_second", "gauge",
           "tokens generated per second of wall time with at least one sequence generating, "
           "since start",
           m.decode_seconds > 0 ? (double)m.decode_tokens / m.decode_seconds : 0);
    histogram(&o, "moeinf_time_to_first_token_seconds",
              "seconds from a request's arrival to its first generated token", ttft_le,
              SERVE_TTFT_BUCKETS - 1, m.ttft_hist, m.ttft_sum, m.ttft_count);
    if (m.has_expert_cache) {
        metric(&o, "moeinf_expert_cache_slots", "gauge", "experts the cache holds", m.expert_slots);
        metric(&o, "moeinf_expert_cache_accesses_total", "counter",
               "expert uses (one per distinct expert per layer and forward pass)",
               (double)m.experts.accesses);
        metric(&o, "moeinf_expert_cache_hits_total", "counter",
               "expert uses found in the cache, read", (double)m.experts.hits);
        metric(&o, "moeinf_expert_cache_late_prefetches_total", "counter",
               "expert uses that waited for a prefetch still being read (not hits)",
               (double)m.experts.late_prefetches);
        metric(&o, "moeinf_expert_cache_misses_total", "counter",
               "experts read from the model file", (double)m.experts.misses);
        metric(&o, "moeinf_expert_cache_read_bytes_total", "counter",
               "bytes read from the model file for experts", (double)m.experts.bytes_read);
        metric(&o, "moeinf_expert_cache_stall_seconds_total", "counter",
               "seconds generation waited on expert reads", m.experts.stall_seconds);
        metric(&o, "moeinf_expert_cache_tokens_total", "counter",
               "tokens evaluated, prompt and generated (the divisor of per-token figures)",
               (double)m.experts.tokens);
        if (m.layer_experts) {
            layer_counter(&o, "moeinf_expert_layer_hits_total",
                          "expert uses found in the cache, by MoE layer", m.layer_experts,
                          m.n_moe_layers, LAYER_HITS);
            layer_counter(&o, "moeinf_expert_layer_misses_total",
                          "experts read from the model file, by MoE layer", m.layer_experts,
                          m.n_moe_layers, LAYER_MISSES);
            layer_counter(&o, "moeinf_expert_layer_accesses_total",
                          "expert uses (one per distinct expert per forward pass), by MoE layer",
                          m.layer_experts, m.n_moe_layers, LAYER_ACCESSES);
        }
    }
    free(m.layer_experts);
    return o.buf;
}
