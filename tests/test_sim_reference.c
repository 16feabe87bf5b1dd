// ctest-labels: traces
/*
 * test_sim_reference.c - the reference hit ratios of ../shared/traces/README.md, reproduced to
 * the printed digits for LRU, LFU and Belady at 10 / 25 / 50 % cache, overall and decode-only.
 * It replays the real traces (the DeepSeek one is 14 MB), hence its own executable and the
 * label "traces" (ctest -LE traces leaves it out).
 */
#include <math.h>

#include "moeinf_sim.h"
#include "test.h"

struct reference {
    const char *trace;
    double percent;
    int cache; /* the README's C */
    const char *policy;
    int overall, decode; /* thousandths as printed; decode -1 where the trace has none */
};

static const struct reference refs[] = {
    {"llama4_maverick_mmlu.txt", 10, 307, "lru", 753, 764},
    {"llama4_maverick_mmlu.txt", 10, 307, "lfu", 599, 596},
    {"llama4_maverick_mmlu.txt", 10, 307, "belady", 862, 874},
    {"llama4_maverick_mmlu.txt", 25, 768, "lru", 879, 887},
    {"llama4_maverick_mmlu.txt", 25, 768, "lfu", 806, 805},
    {"llama4_maverick_mmlu.txt", 25, 768, "belady", 944, 948},
    {"llama4_maverick_mmlu.txt", 50, 1536, "lru", 960, 963},
    {"llama4_maverick_mmlu.txt", 50, 1536, "lfu", 950, 951},
    {"llama4_maverick_mmlu.txt", 50, 1536, "belady", 984, 986},
    {"deepseek_v2_lite_puffin_prefill.txt", 10, 166, "lru", 269, -1},
    {"deepseek_v2_lite_puffin_prefill.txt", 10, 166, "lfu", 143, -1},
    {"deepseek_v2_lite_puffin_prefill.txt", 10, 166, "belady", 487, -1},
    {"deepseek_v2_lite_puffin_prefill.txt", 25, 416, "lru", 446, -1},
    {"deepseek_v2_lite_puffin_prefill.txt", 25, 416, "lfu", 322, -1},
    {"deepseek_v2_lite_puffin_prefill.txt", 25, 416, "belady", 712, -1},
    {"deepseek_v2_lite_puffin_prefill.txt", 50, 832, "lru", 700, -1},
    {"deepseek_v2_lite_puffin_prefill.txt", 50, 832, "lfu", 581, -1},
    {"deepseek_v2_lite_puffin_prefill.txt", 50, 832, "belady", 884, -1},
};

/* The ratio rounded to three decimals, in thousandths. */
static int thousandths(uint64_t hits, uint64_t accesses) {
    return (int)floor(1000.0 * (double)hits / (double)accesses + 0.5);
}

static void test_reference_ratios(void) {
    for (size_t i = 0; i < sizeof refs / sizeof refs[0]; i++) {
        const struct reference *ref = &refs[i];
        char rel[256];
        char path[1024];
        snprintf(rel, sizeof rel, "traces/%s", ref->trace);
        if (!test_shared_path(rel, path, sizeof path)) return;
        struct moeinf_sim_params p = moeinf_sim_params_default();
        p.trace_path = path;
        p.policy = ref->policy;
        p.cache_percent = ref->percent;
        struct moeinf_sim_result r;
        struct moeinf_error err;
        enum moeinf_status st = moeinf_sim_run(&p, &r, &err);
        CHECK_MSG(st == MOEINF_OK, "%s", err.msg);
        if (st != MOEINF_OK) continue;
        CHECK_EQ_INT(r.cache_experts, ref->cache);
        int overall = thousandths(r.hits, r.accesses);
        CHECK_MSG(overall == ref->overall, "%s %s C=%d: overall %.5f, README .%03d", ref->trace,
                  ref->policy, ref->cache, (double)r.hits / (double)r.accesses, ref->overall);
        if (ref->decode < 0) {
            CHECK_EQ_INT(r.decode_accesses, 0);
        } else {
            int decode = thousandths(r.decode_hits, r.decode_accesses);
            CHECK_MSG(decode == ref->decode, "%s %s C=%d: decode %.5f, README .%03d", ref->trace,
                      ref->policy, ref->cache, (double)r.decode_hits / (double)r.decode_accesses,
                      ref->decode);
        }
        fprintf(stderr, "  %-36s %-6s C=%-4d overall %.5f decode %.5f\n", ref->trace, ref->policy,
                ref->cache, (double)r.hits / (double)r.accesses,
                r.decode_accesses ? (double)r.decode_hits / (double)r.decode_accesses : NAN);
    }
}

int main(void) {
    RUN(test_reference_ratios);
    return test_report();
}
