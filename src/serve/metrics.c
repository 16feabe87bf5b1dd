/* metrics.c - GET /metrics: the server's counters in Prometheus text format (version 0.0.4). */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
        size_t cap = o->cap ? o->cap * 2 : 4096;
        while (cap < o->len + (size_t)n + 1)
            cap *= 2;
        char *b = realloc(o->buf, cap);
        if (!b) return;
        o->buf = b;
        o->cap = cap;
    }
}

static void metric(struct out *o, const char *name, const char *type, const char *help,
                   double value) {
    add(o, "# HELP %s %s\n# TYPE %s %s\n%s %.17g\n", name, help, name, type, name, value);
}

char *serve_metrics_text(struct serve_worker *w) {
    pthread_mutex_lock(&w->mu);
    struct serve_metrics m = w->m;
    int queued = w->queued;
    int busy = w->busy;
    int queue_max = w->queue_max;
    pthread_mutex_unlock(&w->mu);
    struct out o = {0};
    add(&o, "%s", "");
    metric(&o, "moeinf_http_requests_total", "counter", "HTTP requests received",
           (double)m.http_requests);
    metric(&o, "moeinf_http_errors_total", "counter", "HTTP requests answered with 4xx or 5xx",
           (double)m.http_errors);
    metric(&o, "moeinf_requests_rejected_total", "counter",
           "generation requests refused with 503 because the queue was full", (double)m.rejected);
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
    }
    return o.buf;
}
