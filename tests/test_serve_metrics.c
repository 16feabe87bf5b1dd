/* test_serve_metrics.c - the /metrics text of the continuous-batching counters against
 * hand-counted cases: the batch-size and time-to-first-token histograms (cumulative buckets, the
 * bounds themselves in their bucket, _sum and _count), the gauges, the per-layer expert counters
 * (copied from the worker's array), and what is left out without an expert cache. */
#include <stdlib.h>

#include "serve/serve.h"
#include "test.h"

/* A worker with only what serve_metrics_text reads. */
static void worker_init(struct serve_worker *w) {
    memset(w, 0, sizeof *w);
    pthread_mutex_init(&w->mu, NULL);
    w->queue_max = 8;
}

/* The value of the sample line that starts with `name` and a space (-1 when absent). */
static double sample(const char *text, const char *name) {
    char key[256];
    snprintf(key, sizeof key, "\n%s ", name);
    const char *p = strstr(text, key);
    return p ? strtod(p + strlen(key), NULL) : -1;
}

static void test_batch_histogram(void) {
    struct serve_worker w;
    worker_init(&w);
    /* 0 tokens is no iteration; 1 and 512 sit on a bound (le is inclusive); 600 is past all */
    const int tokens[] = {1, 1, 3, 8, 9, 600, 512, 0};
    for (size_t i = 0; i < sizeof tokens / sizeof tokens[0]; i++)
        serve_metrics_batch(&w.m, tokens[i]);
    CHECK_EQ_INT(w.m.iterations, 7);
    CHECK_EQ_INT(w.m.iteration_tokens, 1134);
    char *text = serve_metrics_text(&w);
    CHECK(text != NULL);
    if (!text) return;
    CHECK_STR_CONTAINS(text, "# HELP moeinf_batch_tokens tokens per forward iteration");
    CHECK_STR_CONTAINS(text, "# TYPE moeinf_batch_tokens histogram\n"
                             "moeinf_batch_tokens_bucket{le=\"1\"} 2\n"
                             "moeinf_batch_tokens_bucket{le=\"2\"} 2\n"
                             "moeinf_batch_tokens_bucket{le=\"4\"} 3\n"
                             "moeinf_batch_tokens_bucket{le=\"8\"} 4\n"
                             "moeinf_batch_tokens_bucket{le=\"16\"} 5\n"
                             "moeinf_batch_tokens_bucket{le=\"32\"} 5\n"
                             "moeinf_batch_tokens_bucket{le=\"64\"} 5\n"
                             "moeinf_batch_tokens_bucket{le=\"128\"} 5\n"
                             "moeinf_batch_tokens_bucket{le=\"256\"} 5\n"
                             "moeinf_batch_tokens_bucket{le=\"512\"} 6\n"
                             "moeinf_batch_tokens_bucket{le=\"+Inf\"} 7\n"
                             "moeinf_batch_tokens_sum 1134\n"
                             "moeinf_batch_tokens_count 7\n");
    free(text);
    pthread_mutex_destroy(&w.mu);
}

static void test_ttft_histogram(void) {
    struct serve_worker w;
    worker_init(&w);
    /* .05 and 10 on their bounds; -1 (a clock step back) counts as 0 */
    const double s[] = {0.05, 0.07, 1.0, 3.0, 20.0, -1.0, 10.0};
    for (size_t i = 0; i < sizeof s / sizeof s[0]; i++)
        serve_metrics_ttft(&w.m, s[i]);
    char *text = serve_metrics_text(&w);
    CHECK(text != NULL);
    if (!text) return;
    CHECK_STR_CONTAINS(text, "# TYPE moeinf_time_to_first_token_seconds histogram\n"
                             "moeinf_time_to_first_token_seconds_bucket{le=\"0.05\"} 2\n"
                             "moeinf_time_to_first_token_seconds_bucket{le=\"0.1\"} 3\n"
                             "moeinf_time_to_first_token_seconds_bucket{le=\"0.25\"} 3\n"
                             "moeinf_time_to_first_token_seconds_bucket{le=\"0.5\"} 3\n"
                             "moeinf_time_to_first_token_seconds_bucket{le=\"1\"} 4\n"
                             "moeinf_time_to_first_token_seconds_bucket{le=\"2.5\"} 4\n"
                             "moeinf_time_to_first_token_seconds_bucket{le=\"5\"} 5\n"
                             "moeinf_time_to_first_token_seconds_bucket{le=\"10\"} 6\n"
                             "moeinf_time_to_first_token_seconds_bucket{le=\"+Inf\"} 7\n"
                             "moeinf_time_to_first_token_seconds_sum ");
    CHECK_NEAR(sample(text, "moeinf_time_to_first_token_seconds_sum"), 34.12, 1e-9);
    CHECK_EQ_INT(sample(text, "moeinf_time_to_first_token_seconds_count"), 7);
    free(text);
    pthread_mutex_destroy(&w.mu);
}

static void test_gauges_and_layers(void) {
    struct serve_worker w;
    worker_init(&w);
    w.m.n_parallel = 4;
    w.m.active_seqs = 3;
    w.m.decode_tokens = 300;
    w.m.decode_seconds = 4.0;
    char *text = serve_metrics_text(&w);
    CHECK(text != NULL);
    if (!text) return;
    CHECK_EQ_INT(sample(text, "moeinf_parallel"), 4);
    CHECK_EQ_INT(sample(text, "moeinf_active_sequences"), 3);
    CHECK_NEAR(sample(text, "moeinf_decode_tokens_per_second"), 75.0, 1e-12);
    /* no expert cache: none of its series, per layer or not */
    CHECK(!strstr(text, "moeinf_expert_"));
    free(text);

    /* an expert cache with two MoE layers; per-layer counters only once the worker has them */
    w.m.has_expert_cache = true;
    w.m.experts.tokens = 17;
    w.m.n_moe_layers = 2;
    w.m.decode_seconds = 0; /* nothing generated yet: 0, not a division by zero */
    text = serve_metrics_text(&w);
    CHECK(text != NULL);
    if (!text) return;
    CHECK_EQ_INT(sample(text, "moeinf_decode_tokens_per_second"), 0);
    CHECK_EQ_INT(sample(text, "moeinf_expert_cache_tokens_total"), 17);
    CHECK(!strstr(text, "moeinf_expert_layer_"));
    free(text);

    struct moeinf_expert_stats *layers = calloc(2, sizeof *layers);
    CHECK(layers != NULL);
    if (!layers) return;
    layers[0] = (struct moeinf_expert_stats){.accesses = 10, .hits = 7, .misses = 3};
    layers[1] = (struct moeinf_expert_stats){.accesses = 12, .hits = 2, .misses = 9};
    w.m.layer_experts = layers;
    text = serve_metrics_text(&w);
    /* the text stands on its own: the worker may change or free its array afterwards */
    layers[0].hits = 99;
    free(layers);
    w.m.layer_experts = NULL;
    CHECK(text != NULL);
    if (!text) return;
    CHECK_STR_CONTAINS(text, "# TYPE moeinf_expert_layer_hits_total counter\n"
                             "moeinf_expert_layer_hits_total{layer=\"0\"} 7\n"
                             "moeinf_expert_layer_hits_total{layer=\"1\"} 2\n");
    CHECK_STR_CONTAINS(text, "# TYPE moeinf_expert_layer_misses_total counter\n"
                             "moeinf_expert_layer_misses_total{layer=\"0\"} 3\n"
                             "moeinf_expert_layer_misses_total{layer=\"1\"} 9\n");
    CHECK_STR_CONTAINS(text, "# TYPE moeinf_expert_layer_accesses_total counter\n"
                             "moeinf_expert_layer_accesses_total{layer=\"0\"} 10\n"
                             "moeinf_expert_layer_accesses_total{layer=\"1\"} 12\n");
    CHECK(!strstr(text, "{layer=\"2\"}"));
    /* every family has one HELP and one TYPE line */
    size_t types = 0;
    for (const char *p = text; (p = strstr(p, "# TYPE ")) != NULL; p++)
        types++;
    size_t helps = 0;
    for (const char *p = text; (p = strstr(p, "# HELP ")) != NULL; p++)
        helps++;
    CHECK_EQ_INT(types, helps);
    free(text);
    pthread_mutex_destroy(&w.mu);
}

int main(void) {
    RUN(test_batch_histogram);
    RUN(test_ttft_histogram);
    RUN(test_gauges_and_layers);
    return test_report();
}
