/*
 * cmd_sim.c - `moeinf sim`: replay an expert-routing trace through cache policies (one run,
 * a sweep of policies x cache sizes as a table, an SVG plot of the sweep, or a speed check).
 */
#include <assert.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "app/svg.h"
#include "cli/cli.h"
#include "moeinf_sim.h"

#define CMD          "sim"
#define MAX_SIZES    32
#define MAX_POLICIES 16

struct cache_spec {
    int experts;    /* > 0: a number of experts */
    double percent; /* else: a percentage of all experts */
};

struct sim_opts {
    struct moeinf_sim_params params;
    bool decode_only; /* --phase decode: headline ratio over decode accesses */
    bool json;
    bool sweep;
    bool bench;
    bool have_cache;
    struct cache_spec cache;
    const char *plot;
    const char *sizes;
    const char *policies;
};

static void usage(FILE *out) {
    fprintf(out,
            "usage: moeinf sim --trace FILE --cache N|P%% [options]\n"
            "       moeinf sim --trace FILE --sweep [--sizes LIST] [--policies LIST] "
            "[--plot FILE.svg]\n"
            "\n"
            "Replays a moe-trace v1 file (recorded router choices) through an expert cache of\n"
            "N slots shared by all layers, and reports hit ratios. Replay order: requests,\n"
            "tokens, layers 0..L-1, then the listed experts; every miss is admitted; the\n"
            "victim is never an expert the current (token, layer) step needs.\n"
            "\n"
            "  --trace FILE        the trace (required; a regular file, not a pipe: it is\n"
            "                      read more than once)\n"
            "  --policy NAME       cache policy (default %s); see below\n"
            "  --cache N|P%%        N experts, or P%% of all experts (L x E) rounded to the\n"
            "                      nearest integer; must be >= top_k\n"
            "  --phase all|decode  which accesses the headline ratio, the sweep table and\n"
            "                      the plot count (default all); the replay always runs every\n"
            "                      token, and --json reports both\n"
            "  --prefetch K        prefetches the policy may propose after each step "
            "(default 0)\n"
            "  --warmup R          replay the first R requests without counting them "
            "(default 0)\n"
            "  --batch N           replay each request's prefill as the engine runs it: in\n"
            "                      micro-batches of N tokens, one step per layer over the\n"
            "                      distinct experts they chose, in waves of at most the cache\n"
            "                      size (default 1: per token; the engine's -b is 512)\n"
            "  --parallel N        replay continuous batching, as `moeinf serve --parallel N\n"
            "                      -b B` runs requests that all arrive at once: each iteration\n"
            "                      one decode token of each of N requests, then prompt chunks,\n"
            "                      up to --batch B tokens (default 1: one request at a time)\n"
            "  --eamc FILE         load the policy's EAMC from FILE before the replay (when it\n"
            "                      exists) and save it there after (policies with an EAMC)\n"
            "  --eamc-capacity N   entries of a new EAMC, when FILE does not exist yet\n"
            "                      (default: the policy's, 256)\n"
            "  --json              print one JSON object: policy, cache_experts, accesses, "
            "hits,\n"
            "                      hit_ratio, decode_accesses, decode_hits, decode_hit_ratio,\n"
            "                      misses, tokens, decode_tokens, iterations (prefill\n"
            "                      micro-batches count once: --batch),\n"
            "                      prefetch_loads, prefetch_hits, wasted_prefetches (ratios "
            "null\n"
            "                      without accesses; ms_per_token, decode_ms_per_token with "
            "the\n"
            "                      time model)\n"
            "  --expert-bytes B    time model: bytes per expert\n"
            "  --bandwidth GBPS    time model: slow -> fast tier in GB/s (1e9 bytes/s)\n"
            "  --compute-ms T      time model: compute per token; with all three, per token\n"
            "                        load = B / (GBPS * 1e9) s\n"
            "                        ms = T + misses * load + max(0, prefetches * load - T)\n"
            "                      (demand misses stall; prefetches share the link but overlap\n"
            "                      compute); reports the mean over all and over decode tokens\n"
            "  --sweep             run every policy at every size and print a table\n"
            "  --sizes LIST        sweep sizes, comma-separated N or P%% "
            "(default 5%%,10%%,25%%,50%%)\n"
            "  --policies LIST     sweep policies, comma-separated (default all)\n"
            "  --plot FILE.svg     with --sweep: draw hit ratio against cache size\n"
            "  --bench             time the replay (trace parsing included): accesses/s\n"
            "\n"
            "policies:\n",
            moeinf_sim_default_policy());
    for (size_t i = 0; moeinf_sim_policy_name(i); i++) {
        fprintf(out, "  %-8s %s\n", moeinf_sim_policy_name(i), moeinf_sim_policy_summary(i));
    }
}

static bool parse_cache(const char *opt, const char *s, struct cache_spec *out) {
    size_t n = strlen(s);
    if (n > 1 && s[n - 1] == '%') {
        char num[64];
        if (n - 1 >= sizeof num) goto bad;
        memcpy(num, s, n - 1);
        num[n - 1] = '\0';
        char *end = NULL;
        double p = strtod(num, &end);
        if (*end || !isfinite(p) || p <= 0 || p > 100) goto bad;
        out->experts = 0;
        out->percent = p;
        return true;
    }
    long v = 0;
    if (!cli_parse_long(CMD, opt, s, 1, 1L << 24, &v)) return false;
    out->experts = (int)v;
    out->percent = 0;
    return true;
bad:
    fprintf(stderr, "moeinf %s: invalid value '%s' for %s: expected N or P%% with P in (0, 100]\n",
            CMD, s, opt);
    return false;
}

static bool parse_double(const char *opt, const char *s, double *out) {
    float f = 0;
    if (!cli_parse_float(CMD, opt, s, 1e-30, 1e30, &f)) return false;
    *out = f;
    return true;
}

static const char *const value_options[] = {"--trace",
                                            "--policy",
                                            "--cache",
                                            "--phase",
                                            "--prefetch",
                                            "--eamc",
                                            "--eamc-capacity",
                                            "--warmup",
                                            "--expert-bytes",
                                            "--bandwidth",
                                            "--compute-ms",
                                            "--sizes",
                                            "--policies",
                                            "--plot",
                                            "--batch",
                                            "--parallel",
                                            NULL};

/* Returns -1 when parsing should stop with exit code *code. */
static int parse_args(int argc, char **argv, struct sim_opts *o, int *code) {
    *code = CLI_EXIT_USAGE;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = NULL;
        long n = 0;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage(stdout);
            *code = CLI_EXIT_OK;
            return -1;
        }
        if (!strcmp(a, "--json")) {
            o->json = true;
        } else if (!strcmp(a, "--sweep")) {
            o->sweep = true;
        } else if (!strcmp(a, "--bench")) {
            o->bench = true;
        } else if (!cli_is_one_of(a, value_options)) {
            cli_bad_argument(CMD, a, usage);
            return -1;
        } else if (!(v = cli_option_value(CMD, argc, argv, &i))) {
            return -1;
        } else if (!strcmp(a, "--trace")) {
            o->params.trace_path = v;
        } else if (!strcmp(a, "--policy")) {
            o->params.policy = v;
        } else if (!strcmp(a, "--cache")) {
            if (!parse_cache(a, v, &o->cache)) return -1;
            o->have_cache = true;
        } else if (!strcmp(a, "--phase")) {
            if (strcmp(v, "all") != 0 && strcmp(v, "decode") != 0) {
                fprintf(stderr, "moeinf %s: invalid value '%s' for --phase: all or decode\n", CMD,
                        v);
                return -1;
            }
            o->decode_only = !strcmp(v, "decode");
        } else if (!strcmp(a, "--prefetch")) {
            if (!cli_parse_long(CMD, a, v, 0, 1 << 20, &n)) return -1;
            o->params.prefetch = (int)n;
        } else if (!strcmp(a, "--eamc")) {
            o->params.eamc_path = v;
        } else if (!strcmp(a, "--eamc-capacity")) {
            if (!cli_parse_long(CMD, a, v, 1, 4096, &n)) return -1;
            o->params.eamc_capacity = (int)n;
        } else if (!strcmp(a, "--batch")) {
            if (!cli_parse_long(CMD, a, v, 1, 1 << 20, &n)) return -1;
            o->params.batch = (int)n;
        } else if (!strcmp(a, "--parallel")) {
            if (!cli_parse_long(CMD, a, v, 1, MOEINF_SEQ_MAX, &n)) return -1;
            o->params.parallel = (int)n;
        } else if (!strcmp(a, "--warmup")) {
            if (!cli_parse_long(CMD, a, v, 0, 1L << 30, &n)) return -1;
            o->params.warmup_requests = (int)n;
        } else if (!strcmp(a, "--expert-bytes")) {
            if (!parse_double(a, v, &o->params.expert_bytes)) return -1;
        } else if (!strcmp(a, "--bandwidth")) {
            if (!parse_double(a, v, &o->params.bandwidth_gbps)) return -1;
        } else if (!strcmp(a, "--compute-ms")) {
            if (!parse_double(a, v, &o->params.compute_ms)) return -1;
        } else if (!strcmp(a, "--sizes")) {
            o->sizes = v;
        } else if (!strcmp(a, "--policies")) {
            o->policies = v;
        } else {
            assert(!strcmp(a, "--plot"));
            o->plot = v;
        }
    }
    const char *why = NULL;
    bool timed =
        o->params.expert_bytes > 0 || o->params.bandwidth_gbps > 0 || o->params.compute_ms > 0;
    bool all_timed =
        o->params.expert_bytes > 0 && o->params.bandwidth_gbps > 0 && o->params.compute_ms > 0;
    if (!o->params.trace_path)
        why = "--trace is required";
    else if (!o->sweep && !o->have_cache)
        why = "--cache is required (or --sweep)";
    else if (o->sweep && o->have_cache)
        why = "--sweep takes --sizes, not --cache";
    else if (!o->sweep && (o->sizes || o->policies || o->plot)) {
        why = "--sizes, --policies and --plot need --sweep";
    } else if (o->sweep && (o->params.policy || o->bench)) {
        why = "--sweep takes --policies, not --policy or --bench";
    } else if (timed && !all_timed) {
        why = "the time model needs --expert-bytes, --bandwidth and --compute-ms together";
    }
    if (why) {
        fprintf(stderr, "moeinf %s: %s\n", CMD, why);
        usage(stderr);
        return -1;
    }
    return 0;
}

static void set_cache(struct moeinf_sim_params *p, const struct cache_spec *c) {
    p->cache_experts = c->experts;
    p->cache_percent = c->percent;
}

/* Runs one replay; on failure prints the message and returns the exit code (else -1). */
static int run_one(const struct moeinf_sim_params *p, struct moeinf_sim_result *res) {
    struct moeinf_error err;
    memset(&err, 0, sizeof err);
    enum moeinf_status st = moeinf_sim_run(p, res, &err);
    if (st == MOEINF_OK) return -1;
    if (st == MOEINF_ERR_ARG) {
        fprintf(stderr, "moeinf %s: %s\n", CMD, err.msg);
        return CLI_EXIT_USAGE;
    }
    return cli_fail(&err);
}

static double ratio(uint64_t hits, uint64_t accesses) {
    return accesses ? (double)hits / (double)accesses : NAN;
}

static double headline(const struct sim_opts *o, const struct moeinf_sim_result *r) {
    return o->decode_only ? ratio(r->decode_hits, r->decode_accesses) : ratio(r->hits, r->accesses);
}

static void json_ratio(const char *key, uint64_t hits, uint64_t accesses) {
    if (accesses)
        printf(", \"%s\": %.6f", key, (double)hits / (double)accesses);
    else
        printf(", \"%s\": null", key);
}

static void print_json(const struct moeinf_sim_result *r) {
    printf("{\"policy\": \"%s\", \"cache_experts\": %d", r->policy, r->cache_experts);
    printf(", \"accesses\": %llu, \"hits\": %llu", (unsigned long long)r->accesses,
           (unsigned long long)r->hits);
    json_ratio("hit_ratio", r->hits, r->accesses);
    printf(", \"decode_accesses\": %llu, \"decode_hits\": %llu",
           (unsigned long long)r->decode_accesses, (unsigned long long)r->decode_hits);
    json_ratio("decode_hit_ratio", r->decode_hits, r->decode_accesses);
    printf(", \"misses\": %llu, \"tokens\": %llu, \"decode_tokens\": %llu, \"iterations\": %llu",
           (unsigned long long)(r->accesses - r->hits), (unsigned long long)r->tokens,
           (unsigned long long)r->decode_tokens, (unsigned long long)r->iterations);
    printf(", \"prefetch_loads\": %llu, \"prefetch_hits\": %llu, \"wasted_prefetches\": %llu",
           (unsigned long long)r->prefetch_loads, (unsigned long long)r->prefetch_hits,
           (unsigned long long)r->wasted_prefetches);
    if (r->timed) {
        if (r->tokens)
            printf(", \"ms_per_token\": %.6f", r->ms_per_token);
        else
            printf(", \"ms_per_token\": null");
        if (r->decode_tokens)
            printf(", \"decode_ms_per_token\": %.6f", r->decode_ms_per_token);
        else
            printf(", \"decode_ms_per_token\": null");
    }
    printf("}\n");
}

static void print_ratio(const char *label, uint64_t hits, uint64_t accesses) {
    if (accesses) {
        printf("%s %.4f (%llu of %llu accesses)\n", label, (double)hits / (double)accesses,
               (unsigned long long)hits, (unsigned long long)accesses);
    } else {
        printf("%s - (no accesses)\n", label);
    }
}

static void print_text(const struct sim_opts *o, const struct moeinf_sim_result *r) {
    int n_ids = r->n_layers * r->n_experts;
    printf("trace      %s: %d layers x %d experts, top-%d\n", o->params.trace_path, r->n_layers,
           r->n_experts, r->top_k);
    printf("counted    %llu requests, %llu tokens (%llu decode)%s\n",
           (unsigned long long)r->requests, (unsigned long long)r->tokens,
           (unsigned long long)r->decode_tokens,
           o->params.warmup_requests ? " after the warmup" : "");
    printf("policy     %s, cache %d experts (%.1f%% of %d)\n", r->policy, r->cache_experts,
           100.0 * r->cache_experts / n_ids, n_ids);
    if (o->decode_only) {
        print_ratio("decode     hit ratio", r->decode_hits, r->decode_accesses);
        print_ratio("all        hit ratio", r->hits, r->accesses);
    } else {
        print_ratio("all        hit ratio", r->hits, r->accesses);
        print_ratio("decode     hit ratio", r->decode_hits, r->decode_accesses);
    }
    if (o->params.prefetch > 0) {
        printf("prefetch   %llu loads, %llu hits, %llu wasted\n",
               (unsigned long long)r->prefetch_loads, (unsigned long long)r->prefetch_hits,
               (unsigned long long)r->wasted_prefetches);
    }
    if (r->timed) {
        printf("time       %.3f ms/token", r->ms_per_token);
        if (r->decode_tokens) printf(", decode %.3f ms/token", r->decode_ms_per_token);
        printf("\n");
    }
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* ---- sweep -------------------------------------------------------------------------------- */

struct sweep {
    int n_sizes, n_pols;
    struct cache_spec sizes[MAX_SIZES];
    const char *pols[MAX_POLICIES];
    char pol_buf[512];
    struct moeinf_sim_result res[MAX_SIZES][MAX_POLICIES];
};

static bool parse_lists(const struct sim_opts *o, struct sweep *sw) {
    char buf[512];
    snprintf(buf, sizeof buf, "%s", o->sizes ? o->sizes : "5%,10%,25%,50%");
    for (char *save = NULL, *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        if (sw->n_sizes == MAX_SIZES) {
            fprintf(stderr, "moeinf %s: at most %d sizes\n", CMD, MAX_SIZES);
            return false;
        }
        if (!parse_cache("--sizes", t, &sw->sizes[sw->n_sizes++])) return false;
    }
    if (o->policies) {
        snprintf(sw->pol_buf, sizeof sw->pol_buf, "%s", o->policies);
        for (char *save = NULL, *t = strtok_r(sw->pol_buf, ",", &save); t;
             t = strtok_r(NULL, ",", &save)) {
            if (sw->n_pols == MAX_POLICIES) {
                fprintf(stderr, "moeinf %s: at most %d policies\n", CMD, MAX_POLICIES);
                return false;
            }
            sw->pols[sw->n_pols++] = t;
        }
    } else {
        for (size_t i = 0; moeinf_sim_policy_name(i) && sw->n_pols < MAX_POLICIES; i++) {
            sw->pols[sw->n_pols++] = moeinf_sim_policy_name(i);
        }
    }
    if (sw->n_sizes == 0 || sw->n_pols == 0) {
        fprintf(stderr, "moeinf %s: empty --sizes or --policies\n", CMD);
        return false;
    }
    return true;
}

static const char *base_name(const char *path) {
    const char *s = strrchr(path, '/');
    return s ? s + 1 : path;
}

static void print_sweep(const struct sim_opts *o, const struct sweep *sw) {
    const struct moeinf_sim_result *r0 = &sw->res[0][0];
    int n_ids = r0->n_layers * r0->n_experts;
    printf("%s: %d layers x %d experts, top-%d; hit ratio, %s accesses\n",
           base_name(o->params.trace_path), r0->n_layers, r0->n_experts, r0->top_k,
           o->decode_only ? "decode" : "all");
    printf("| cache |");
    for (int p = 0; p < sw->n_pols; p++)
        printf(" %s |", sw->pols[p]);
    printf("\n|---|");
    for (int p = 0; p < sw->n_pols; p++)
        printf("---|");
    printf("\n");
    for (int s = 0; s < sw->n_sizes; s++) {
        int c = sw->res[s][0].cache_experts;
        printf("| %d (%.1f%%) |", c, 100.0 * c / n_ids);
        for (int p = 0; p < sw->n_pols; p++) {
            double v = headline(o, &sw->res[s][p]);
            if (isnan(v))
                printf(" - |");
            else
                printf(" %.3f |", v);
        }
        printf("\n");
    }
}

static void print_sweep_json(const struct sim_opts *o, const struct sweep *sw) {
    printf("{\"trace\": \"%s\", \"phase\": \"%s\", \"results\": [\n",
           base_name(o->params.trace_path), o->decode_only ? "decode" : "all");
    for (int s = 0; s < sw->n_sizes; s++) {
        for (int p = 0; p < sw->n_pols; p++) {
            const struct moeinf_sim_result *r = &sw->res[s][p];
            printf("  {\"policy\": \"%s\", \"cache_experts\": %d", r->policy, r->cache_experts);
            json_ratio("hit_ratio", r->hits, r->accesses);
            json_ratio("decode_hit_ratio", r->decode_hits, r->decode_accesses);
            printf("}%s\n", s + 1 == sw->n_sizes && p + 1 == sw->n_pols ? "" : ",");
        }
    }
    printf("]}\n");
}

/* The sweep as svg.h's plot: its hit ratios (the headline ratio: all or decode accesses)
 * and sizes, size-major. */
static bool write_plot(const struct sim_opts *o, const struct sweep *sw) {
    int cache_experts[MAX_SIZES * MAX_POLICIES];
    double ratio[MAX_SIZES * MAX_POLICIES];
    for (int s = 0; s < sw->n_sizes; s++) {
        for (int p = 0; p < sw->n_pols; p++) {
            cache_experts[s * sw->n_pols + p] = sw->res[s][p].cache_experts;
            ratio[s * sw->n_pols + p] = headline(o, &sw->res[s][p]);
        }
    }
    const struct moeinf_sim_plot plot = {
        .title = base_name(o->params.trace_path),
        .accesses = o->decode_only ? "decode" : "all",
        .n_ids = sw->res[0][0].n_layers * sw->res[0][0].n_experts,
        .n_sizes = sw->n_sizes,
        .n_policies = sw->n_pols,
        .policies = sw->pols,
        .cache_experts = cache_experts,
        .ratio = ratio,
    };
    struct moeinf_error err = {0};
    if (moeinf_sim_plot_svg(&plot, o->plot, &err) != MOEINF_OK) {
        cli_fail(&err);
        return false;
    }
    return true;
}

static int run_sweep(const struct sim_opts *o) {
    struct sweep *sw = calloc(1, sizeof *sw);
    if (!sw) {
        fprintf(stderr, "moeinf: out of memory\n");
        return CLI_EXIT_FAIL;
    }
    int code = CLI_EXIT_USAGE;
    if (!parse_lists(o, sw)) goto done;
    for (int s = 0; s < sw->n_sizes; s++) {
        for (int p = 0; p < sw->n_pols; p++) {
            struct moeinf_sim_params prm = o->params;
            prm.policy = sw->pols[p];
            set_cache(&prm, &sw->sizes[s]);
            code = run_one(&prm, &sw->res[s][p]);
            if (code >= 0) goto done;
        }
    }
    if (o->json)
        print_sweep_json(o, sw);
    else
        print_sweep(o, sw);
    code = CLI_EXIT_OK;
    if (o->plot && !write_plot(o, sw)) code = CLI_EXIT_FAIL;
done:
    free(sw);
    return code;
}

int cmd_sim(int argc, char **argv) {
    struct sim_opts o;
    memset(&o, 0, sizeof o);
    o.params = moeinf_sim_params_default();
    int code = CLI_EXIT_USAGE;
    if (parse_args(argc, argv, &o, &code) < 0) return code;
    /* outputs are written after the replay: a path that cannot be written, or that is the
     * trace, fails now */
    const struct cli_file outputs[2] = {{"--plot", o.plot}, {"--eamc", o.params.eamc_path}};
    const struct cli_file input = {"--trace", o.params.trace_path};
    code = cli_check_outputs("sim", outputs, 2, &input, 1);
    if (code != CLI_EXIT_OK) return code;
    if (o.sweep) return run_sweep(&o);
    set_cache(&o.params, &o.cache);
    struct moeinf_sim_result res;
    double t0 = now_s();
    code = run_one(&o.params, &res);
    double dt = now_s() - t0;
    if (code >= 0) return code;
    if (o.json)
        print_json(&res);
    else
        print_text(&o, &res);
    if (o.bench) { /* stderr under --json, which owns stdout */
        fprintf(o.json ? stderr : stdout,
                "bench      %s: %llu accesses in %.3f s = %.1f M accesses/s (trace parsing "
                "included)\n",
                res.policy, (unsigned long long)res.accesses, dt,
                dt > 0 ? (double)res.accesses / dt / 1e6 : 0.0);
    }
    return CLI_EXIT_OK;
}
