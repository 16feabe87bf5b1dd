/*
 * test_params.c - the rules of the context parameters (moeinf_context_params_check): each
 * value that cannot apply is MOEINF_ERR_ARG whose one-line message starts with the field's
 * name, the bounds themselves pass, and the rules that need the model (lookahead below its
 * layers; a cache exactly when its experts are offloaded) hold in moeinf_context_init too.
 * The model is the committed tiny qwen3moe (2 layers, 16 experts, top 4).
 */
#include <limits.h>
#include <stdint.h>
#include <string.h>

#include "moeinf.h"
#include "test.h"

/* params with one change, expected to fail naming `field`. */
#define EXPECT_BAD(model, change, field)                                                           \
    do {                                                                                           \
        struct moeinf_context_params p_ = moeinf_context_params_default();                         \
        struct moeinf_error e_ = {0};                                                              \
        change;                                                                                    \
        enum moeinf_status s_ = moeinf_context_params_check(&p_, model, &e_);                      \
        CHECK_MSG(s_ == MOEINF_ERR_ARG, "%s: status %d", #change, (int)s_);                        \
        CHECK_MSG(!strncmp(e_.msg, field ": ", strlen(field ": ")), "%s: '%s'", #change, e_.msg);  \
        CHECK(strchr(e_.msg, '\n') == NULL);                                                       \
    } while (0)

#define EXPECT_GOOD(model, change)                                                                 \
    do {                                                                                           \
        struct moeinf_context_params p_ = moeinf_context_params_default();                         \
        struct moeinf_error e_ = {0};                                                              \
        change;                                                                                    \
        CHECK_MSG(moeinf_context_params_check(&p_, model, &e_) == MOEINF_OK, "%s: %s", #change,    \
                  e_.msg);                                                                         \
    } while (0)

static void cache_percent(struct moeinf_context_params *p, double percent) {
    p->expert_cache.kind = MOEINF_EXPERT_CACHE_PERCENT;
    p->expert_cache.percent = percent;
}

/* -1 is auto (the default of both): allowed with or without a cache or I/O threads (it then
 * reads nothing ahead); below it nothing is. */
static void test_auto_reading_ahead(void) {
    CHECK_EQ_INT(moeinf_context_params_default().expert_prefetch, MOEINF_EXPERT_AUTO);
    CHECK_EQ_INT(moeinf_context_params_default().expert_lookahead, MOEINF_EXPERT_AUTO);
    CHECK_EQ_INT(MOEINF_EXPERT_AUTO, -1);
    EXPECT_GOOD(NULL, (p_.expert_prefetch = -1, p_.expert_lookahead = -1));
    EXPECT_GOOD(NULL, (cache_percent(&p_, 50), p_.expert_io_threads = 0));
    EXPECT_BAD(NULL, (cache_percent(&p_, 50), p_.expert_prefetch = -2), "expert_prefetch");
    EXPECT_BAD(NULL, (cache_percent(&p_, 50), p_.expert_lookahead = -2), "expert_lookahead");
    EXPECT_BAD(NULL, (cache_percent(&p_, 50), p_.expert_prefetch = INT_MIN), "expert_prefetch");
}

static void test_rules_without_a_model(void) {
    EXPECT_GOOD(NULL, (void)0);
    EXPECT_BAD(NULL, p_.n_ctx = 0, "n_ctx");
    EXPECT_BAD(NULL, p_.n_ctx = (1 << 24) + 1, "n_ctx");
    EXPECT_GOOD(NULL, p_.n_ctx = 1 << 24);
    EXPECT_BAD(NULL, p_.n_batch = 0, "n_batch");
    EXPECT_GOOD(NULL, (p_.n_ctx = 16, p_.n_batch = 512)); /* cut to n_ctx, documented */
    EXPECT_BAD(NULL, p_.n_threads = -1, "n_threads");
    EXPECT_BAD(NULL, p_.n_threads = 1025, "n_threads");
    EXPECT_GOOD(NULL, p_.n_threads = 1024);
    EXPECT_BAD(NULL, p_.kv_type = (enum moeinf_kv_type)7, "kv_type");
    EXPECT_BAD(NULL, p_.expert_io = (enum moeinf_expert_io)9, "expert_io");
    EXPECT_BAD(NULL, (p_.expert_cache.kind = MOEINF_EXPERT_CACHE_BYTES, p_.expert_cache.bytes = 0),
               "expert_cache");
    EXPECT_BAD(NULL, cache_percent(&p_, 0.0), "expert_cache");
    EXPECT_BAD(NULL, cache_percent(&p_, 100.5), "expert_cache");
    EXPECT_GOOD(NULL, cache_percent(&p_, 100.0));
    EXPECT_BAD(NULL, p_.expert_io_threads = -1, "expert_io_threads");
    EXPECT_BAD(NULL, p_.expert_io_threads = MOEINF_EXPERT_IO_THREADS_MAX + 1, "expert_io_threads");
    EXPECT_GOOD(NULL, p_.expert_io_threads = MOEINF_EXPERT_IO_THREADS_MAX);
    EXPECT_BAD(NULL, (cache_percent(&p_, 50), p_.expert_prefetch = MOEINF_EXPERT_PREFETCH_MAX + 1),
               "expert_prefetch");
    EXPECT_GOOD(NULL, (cache_percent(&p_, 50), p_.expert_prefetch = MOEINF_EXPERT_PREFETCH_MAX));
    /* without a model, lookahead is bounded by the most layers a file may have */
    EXPECT_GOOD(NULL, (cache_percent(&p_, 50), p_.expert_lookahead = 4095));
    EXPECT_BAD(NULL, (cache_percent(&p_, 50), p_.expert_lookahead = 4096), "expert_lookahead");
    /* reading ahead needs a cache and an I/O thread; a policy needs a cache */
    EXPECT_BAD(NULL, p_.expert_prefetch = 1, "expert_prefetch");
    EXPECT_BAD(NULL, p_.expert_lookahead = 1, "expert_lookahead");
    EXPECT_BAD(NULL, (cache_percent(&p_, 50), p_.expert_io_threads = 0, p_.expert_prefetch = 1),
               "expert_prefetch");
    EXPECT_BAD(NULL, (cache_percent(&p_, 50), p_.expert_io_threads = 0, p_.expert_lookahead = 1),
               "expert_lookahead");
    EXPECT_GOOD(NULL, (cache_percent(&p_, 50), p_.expert_io_threads = 0));
    EXPECT_BAD(NULL, p_.expert_policy = "lru", "expert_policy");
    EXPECT_BAD(NULL, (cache_percent(&p_, 50), p_.expert_policy = "nosuch"), "expert_policy");
    EXPECT_BAD(NULL, (cache_percent(&p_, 50), p_.expert_policy = "belady"), "expert_policy");
    EXPECT_GOOD(NULL, (cache_percent(&p_, 50), p_.expert_policy = "lru"));
}

static struct moeinf_model *load(bool offload) {
    char path[1024];
    test_src_path("tests/data/models/tiny-qwen3moe-F32.gguf", path, sizeof path);
    struct moeinf_model_params mp = moeinf_model_params_default();
    mp.offload_experts = offload;
    struct moeinf_model *m = NULL;
    struct moeinf_error err = {0};
    CHECK_MSG(moeinf_model_load(path, &mp, &m, &err) == MOEINF_OK, "%s", err.msg);
    return m;
}

static void test_rules_with_the_model(void) {
    struct moeinf_model *offloaded = load(true);
    struct moeinf_model *resident = load(false);
    if (!offloaded || !resident) goto done;
    /* 2 layers: one layer can be looked ahead at */
    EXPECT_GOOD(offloaded, (cache_percent(&p_, 50), p_.expert_lookahead = 1));
    EXPECT_BAD(offloaded, (cache_percent(&p_, 50), p_.expert_lookahead = 2), "expert_lookahead");
    EXPECT_BAD(offloaded, (void)0, "expert_cache");               /* offloaded: a cache is needed */
    EXPECT_BAD(resident, cache_percent(&p_, 50), "expert_cache"); /* and only then allowed */
    EXPECT_GOOD(resident, (void)0);
    /* moeinf_context_init applies the same rules */
    struct moeinf_context_params p = moeinf_context_params_default();
    cache_percent(&p, 50);
    p.expert_lookahead = 2;
    struct moeinf_context *ctx = NULL;
    struct moeinf_error err = {0};
    CHECK_EQ_INT(moeinf_context_init(offloaded, &p, &ctx, &err), MOEINF_ERR_ARG);
    CHECK(ctx == NULL && !strncmp(err.msg, "expert_lookahead: ", 18));
    p.expert_lookahead = 1;
    CHECK_MSG(moeinf_context_init(offloaded, &p, &ctx, &err) == MOEINF_OK, "%s", err.msg);
    moeinf_context_free(ctx);
done:
    moeinf_model_free(offloaded);
    moeinf_model_free(resident);
}

int main(void) {
    RUN(test_rules_without_a_model);
    RUN(test_auto_reading_ahead);
    RUN(test_rules_with_the_model);
    return test_report();
}
