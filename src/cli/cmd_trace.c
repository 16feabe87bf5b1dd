/*
 * cmd_trace.c - `moeinf trace`: tools over moe-trace v1 files. heatmap (one request's expert
 * activation matrix as an SVG, with its skew), filter and concat (new traces for experiments),
 * stats (skew, reuse and similarity figures that explain what cache policies see).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "app/svg.h"
#include "cli/cli.h"
#include "moeinf_sim.h"

#define MAX_PREFIXES 64
#define NOTE_BYTES   900

static const char *base_name(const char *path) {
    const char *s = strrchr(path, '/');
    return s ? s + 1 : path;
}

/* A failed library call: MOEINF_ERR_ARG is the user's value (exit 2), the rest exit 1. */
static int fail(const char *sub, const struct moeinf_error *err) {
    if (err->status == MOEINF_ERR_ARG) {
        fprintf(stderr, "moeinf trace %s: %s\n", sub, err->msg);
        return CLI_EXIT_USAGE;
    }
    return cli_fail(err);
}

static int usage_error(const char *sub, void (*usage)(FILE *), const char *why) {
    fprintf(stderr, "moeinf trace %s: %s\n", sub, why);
    usage(stderr);
    return CLI_EXIT_USAGE;
}

static bool is_help(const char *a) {
    return !strcmp(a, "--help") || !strcmp(a, "-h");
}

static bool is_option(const char *a) {
    return a[0] == '-' && a[1] != '\0';
}

/* Takes the trace (a positional argument or --trace's value); a second trace is an error.
 * Returns false (after printing the usage) on that error. */
static bool take_trace(const char *sub, void (*usage)(FILE *), const char *a, const char **trace) {
    if (*trace) {
        fprintf(stderr, "moeinf trace %s: one trace only ('%s' and '%s')\n", sub, *trace, a);
        usage(stderr);
        return false;
    }
    *trace = a;
    return true;
}

/* A ratio in [0, 1] as "0.123", or "-" for NaN. */
static const char *ratio_str(double v, char buf[16]) {
    if (isnan(v)) return "-";
    snprintf(buf, 16, "%.3f", v);
    return buf;
}

static void print_ratio(double v, int width) {
    char buf[16];
    printf("%*s", width, ratio_str(v, buf));
}

static void json_number(const char *key, double v, bool comma) {
    if (isnan(v))
        printf("\"%s\": null", key);
    else
        printf("\"%s\": %.6f", key, v);
    if (comma) printf(", ");
}

static void json_string(const char *s) {
    putchar('"');
    for (; *s; s++) {
        if (*s == '"' || *s == '\\')
            printf("\\%c", *s);
        else if ((unsigned char)*s < 0x20)
            printf("\\u%04x", (unsigned)(unsigned char)*s);
        else
            putchar(*s);
    }
    putchar('"');
}

static const char *const phase_names[3] = {"prefill", "decode", "all"};

static bool parse_phase(const char *sub, const char *v, enum moeinf_phase *out) {
    for (int p = 0; p < 3; p++) {
        if (!strcmp(v, phase_names[p])) {
            *out = (enum moeinf_phase)p;
            return true;
        }
    }
    fprintf(stderr, "moeinf trace %s: invalid value '%s' for --phase: prefill, decode or all\n",
            sub, v);
    return false;
}

/* ---- heatmap ------------------------------------------------------------------------------ */

static void heatmap_usage(FILE *out) {
    fprintf(out,
            "usage: moeinf trace heatmap [--trace] FILE (--request ID | --index N) "
            "[--phase prefill|decode|all]\n"
            "                            [-o OUT.svg] [--layers]\n"
            "\n"
            "Reads one request of a moe-trace v1 file and builds its expert activation matrix\n"
            "(EAM): M[l][e] = tokens of the request that layer l routed to expert e, prefill\n"
            "and decode kept apart. Prints how skewed it is, per layer: the share of the\n"
            "layer's routings (tokens x top_k) that go to its most used expert (top-1) and to\n"
            "its 4 most used (top-4), and the distinct experts used; means over layers, next\n"
            "to what uniformly random routing of the same tokens would give.\n"
            "\n"
            "  [--trace] FILE   the trace (required)\n"
            "  --request ID     the request with this id\n"
            "  --index N        or the N-th request of the file (0-based)\n"
            "  --phase P        prefill, decode or all (default all: both, and the heatmap\n"
            "                   draws a prefill and a decode panel side by side)\n"
            "  -o OUT.svg       write the heatmap: rows = layers, columns = experts, colour =\n"
            "                   count (log scale, white = 0); one scale for both panels\n"
            "  --layers         also print the figures of every layer\n"
            "\n"
            "A request the trace does not have is a usage error (exit 2); a trace without\n"
            "requests is a bad file here (exit 1).\n");
}

static void print_skew_row(const char *name, const struct moeinf_trace_skew *s, bool uniform) {
    char top1[64];
    char distinct[64];
    char a[16];
    char b[16];
    char c[16];
    if (uniform) {
        snprintf(top1, sizeof top1, "%s", ratio_str(s->uniform_top1_share, a));
        snprintf(distinct, sizeof distinct, "%.1f", s->uniform_distinct);
        printf("%-9s %7s  %-20s %6s  %s\n", name, "", top1, ratio_str(s->uniform_top4_share, c),
               distinct);
        return;
    }
    snprintf(top1, sizeof top1, "%s (%s-%s)", ratio_str(s->top1_share, a),
             ratio_str(s->top1_min, b), ratio_str(s->top1_max, c));
    snprintf(distinct, sizeof distinct, "%.1f (%.0f-%.0f)", s->distinct, s->distinct_min,
             s->distinct_max);
    printf("%-9s %7lld  %-20s %6s  %s\n", name, (long long)s->tokens, top1,
           ratio_str(s->top4_share, a), distinct);
}

static int heatmap_summary(const struct moeinf_trace_eam *m, enum moeinf_phase phase, bool layers,
                           const char *trace) {
    printf("request  %lld '%s' (index %lld of %s): %lld prefill + %lld decode tokens\n",
           (long long)m->request_id, m->tag, (long long)m->index, base_name(trace),
           (long long)m->n_tokens[0], (long long)m->n_tokens[1]);
    printf("model    %s: %d layers x %d experts, top-%d\n", m->model[0] ? m->model : "-",
           m->n_layers, m->n_experts, m->top_k);
    printf("\nskew per layer, mean (min-max) over the %d layers; 'uniform' = the same tokens "
           "routed\nuniformly at random (expected values)\n",
           m->n_layers);
    printf("%-9s %7s  %-20s %6s  %s\n", "phase", "tokens", "top-1 share", "top-4",
           "distinct experts");
    int lo = phase == MOEINF_PHASE_ALL ? 0 : (int)phase;
    int hi = phase == MOEINF_PHASE_ALL ? 3 : (int)phase + 1;
    for (int p = lo; p < hi; p++) {
        struct moeinf_trace_skew s;
        struct moeinf_error err;
        memset(&err, 0, sizeof err);
        if (moeinf_trace_eam_skew(m, (enum moeinf_phase)p, -1, &s, &err) != MOEINF_OK) {
            return fail("heatmap", &err);
        }
        if (s.tokens == 0) {
            printf("%-9s %7d  (no tokens)\n", phase_names[p], 0);
            continue;
        }
        print_skew_row(phase_names[p], &s, false);
        print_skew_row("  uniform", &s, true);
    }
    if (!layers) return CLI_EXIT_OK;
    for (int p = lo; p < hi; p++) {
        printf("\n%s, per layer\n%-6s %6s %6s  %s\n", phase_names[p], "layer", "top-1", "top-4",
               "distinct");
        for (int l = 0; l < m->n_layers; l++) {
            struct moeinf_trace_skew s;
            struct moeinf_error err;
            memset(&err, 0, sizeof err);
            if (moeinf_trace_eam_skew(m, (enum moeinf_phase)p, l, &s, &err) != MOEINF_OK) {
                return fail("heatmap", &err);
            }
            if (s.tokens == 0) break;
            printf("%-6d ", l);
            print_ratio(s.top1_share, 6);
            print_ratio(s.top4_share, 7);
            printf("  %8.0f\n", s.distinct);
        }
    }
    return CLI_EXIT_OK;
}

static const char *const heatmap_values[] = {"--trace", "-o",      "--request",
                                             "--index", "--phase", NULL};

static int cmd_heatmap(int argc, char **argv) {
    const char *sub = "trace heatmap";
    const char *trace = NULL;
    const char *out = NULL;
    long request = -1;
    long index = -1;
    bool layers = false;
    enum moeinf_phase phase = MOEINF_PHASE_ALL;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = NULL;
        if (is_help(a)) {
            heatmap_usage(stdout);
            return CLI_EXIT_OK;
        }
        if (!strcmp(a, "--layers")) {
            layers = true;
        } else if (!is_option(a)) {
            if (!take_trace("heatmap", heatmap_usage, a, &trace)) return CLI_EXIT_USAGE;
        } else if (!cli_is_one_of(a, heatmap_values)) {
            return cli_bad_argument(sub, a, heatmap_usage);
        } else if (!(v = cli_option_value(sub, argc, argv, &i))) {
            return CLI_EXIT_USAGE;
        } else if (!strcmp(a, "--trace")) {
            if (!take_trace("heatmap", heatmap_usage, v, &trace)) return CLI_EXIT_USAGE;
        } else if (!strcmp(a, "-o")) {
            out = v;
        } else if (!strcmp(a, "--request")) {
            if (!cli_parse_long(sub, a, v, 0, INT64_MAX, &request)) return CLI_EXIT_USAGE;
        } else if (!strcmp(a, "--index")) {
            if (!cli_parse_long(sub, a, v, 0, INT64_MAX, &index)) return CLI_EXIT_USAGE;
        } else if (!strcmp(a, "--phase")) {
            if (!parse_phase("heatmap", v, &phase)) return CLI_EXIT_USAGE;
        }
    }
    if (!trace) return usage_error("heatmap", heatmap_usage, "--trace is required");
    if ((request >= 0) == (index >= 0)) {
        return usage_error("heatmap", heatmap_usage, "give one of --request and --index");
    }
    struct moeinf_error err;
    memset(&err, 0, sizeof err);
    struct moeinf_trace_eam *m = NULL;
    const struct cli_file output = {"-o", out};
    const struct cli_file input = {"--trace", trace};
    int rc = cli_check_outputs("trace heatmap", &output, 1, &input, 1);
    if (rc != CLI_EXIT_OK) return rc;
    if (moeinf_trace_eam_load(trace, request, index, &m, &err) != MOEINF_OK) {
        return fail("heatmap", &err);
    }
    int code = heatmap_summary(m, phase, layers, trace);
    if (code == CLI_EXIT_OK && out) {
        if (moeinf_trace_eam_svg(m, phase, base_name(trace), out, &err) != MOEINF_OK) {
            code = fail("heatmap", &err);
        } else {
            printf("\nwrote    %s\n", out);
        }
    }
    moeinf_trace_eam_free(m);
    return code;
}

/* ---- filter ------------------------------------------------------------------------------- */

static void filter_usage(FILE *out) {
    fprintf(out,
            "usage: moeinf trace filter [--trace] FILE -o OUT [--tag-prefix P ...] "
            "[--requests A-B]\n"
            "                           [--indices A-B] [--every K] [--first N]\n"
            "\n"
            "Writes the requests of FILE that pass every given test to OUT, a moe-trace v1\n"
            "file, in file order with their ids and tags unchanged. The header's model and\n"
            "provenance lines are copied, its totals recomputed, and a 'derived' line records\n"
            "the filter. Tests, in this order:\n"
            "\n"
            "  --tag-prefix P   the request's tag starts with P (repeat: any of them), e.g.\n"
            "                   mmlu/astronomy/ or puffin/\n"
            "  --requests A-B   request id in [A, B] (or --requests A: that id only)\n"
            "  --indices A-B    position in the file in [A, B], 0-based\n"
            "  --every K        of the requests passing the tests above, keep the 1st,\n"
            "                   (K+1)-th, (2K+1)-th, ...\n"
            "  --first N        stop after N kept requests\n"
            "\n"
            "No request kept is an error (exit 2) and writes nothing, unless FILE has no\n"
            "requests at all: then OUT is a trace without requests too.\n");
}

/* "A-B" or "A" into [lo, hi]. */
static bool parse_range(const char *opt, const char *s, int64_t *lo, int64_t *hi) {
    char a[64];
    const char *dash = strchr(s, '-');
    size_t n = dash ? (size_t)(dash - s) : strlen(s);
    long va = 0;
    long vb = 0;
    if (n == 0 || n >= sizeof a) goto bad;
    memcpy(a, s, n);
    a[n] = '\0';
    if (!cli_parse_long("trace filter", opt, a, 0, INT64_MAX, &va)) return false;
    vb = va;
    if (dash && !cli_parse_long("trace filter", opt, dash + 1, 0, INT64_MAX, &vb)) return false;
    if (vb < va) goto bad;
    *lo = va;
    *hi = vb;
    return true;
bad:
    fprintf(stderr, "moeinf trace filter: invalid value '%s' for %s: expected A-B with A <= B\n", s,
            opt);
    return false;
}

static const char *const filter_values[] = {"--trace",   "-o",      "--tag-prefix", "--requests",
                                            "--indices", "--every", "--first",      NULL};

static int cmd_filter(int argc, char **argv) {
    const char *sub = "trace filter";
    const char *trace = NULL;
    const char *out = NULL;
    const char *prefixes[MAX_PREFIXES];
    struct moeinf_trace_filter_params prm = moeinf_trace_filter_params_default();
    char note[NOTE_BYTES];
    size_t note_len = 0;
    note[0] = '\0';
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = NULL;
        long n = 0;
        if (is_help(a)) {
            filter_usage(stdout);
            return CLI_EXIT_OK;
        }
        if (!is_option(a)) {
            if (!take_trace("filter", filter_usage, a, &trace)) return CLI_EXIT_USAGE;
            continue;
        }
        if (!cli_is_one_of(a, filter_values)) return cli_bad_argument(sub, a, filter_usage);
        if (!(v = cli_option_value(sub, argc, argv, &i))) return CLI_EXIT_USAGE;
        if (!strcmp(a, "--trace")) {
            if (!take_trace("filter", filter_usage, v, &trace)) return CLI_EXIT_USAGE;
            continue;
        }
        if (!strcmp(a, "-o")) {
            out = v;
            continue;
        }
        if (!strcmp(a, "--tag-prefix")) {
            if (prm.n_tag_prefixes == MAX_PREFIXES) {
                fprintf(stderr, "moeinf %s: at most %d --tag-prefix\n", sub, MAX_PREFIXES);
                return CLI_EXIT_USAGE;
            }
            prefixes[prm.n_tag_prefixes++] = v;
        } else if (!strcmp(a, "--requests")) {
            if (!parse_range(a, v, &prm.id_min, &prm.id_max)) return CLI_EXIT_USAGE;
        } else if (!strcmp(a, "--indices")) {
            if (!parse_range(a, v, &prm.index_min, &prm.index_max)) return CLI_EXIT_USAGE;
        } else if (!strcmp(a, "--every")) {
            if (!cli_parse_long(sub, a, v, 1, INT64_MAX, &n)) return CLI_EXIT_USAGE;
            prm.every = n;
        } else {
            if (!cli_parse_long(sub, a, v, 1, INT64_MAX, &n)) return CLI_EXIT_USAGE;
            prm.first = n; /* --first */
        }
        /* the options as given, for the trace's "derived" line */
        int w = snprintf(note + note_len, sizeof note - note_len, " %s %s", a, v);
        if (w > 0) note_len += (size_t)w;
        if (note_len >= sizeof note) note_len = sizeof note - 1;
    }
    if (!trace) return usage_error("filter", filter_usage, "--trace is required");
    if (!out) return usage_error("filter", filter_usage, "-o is required");
    const struct cli_file output = {"-o", out};
    const struct cli_file input = {"--trace", trace};
    int rc = cli_check_outputs("trace filter", &output, 1, &input, 1);
    if (rc != CLI_EXIT_OK) return rc;
    char derived[NOTE_BYTES + 300];
    snprintf(derived, sizeof derived, "moeinf trace filter of %s:%s", base_name(trace), note);
    prm.tag_prefixes = prefixes;
    prm.note = derived;
    struct moeinf_trace_copy_result res;
    struct moeinf_error err;
    memset(&err, 0, sizeof err);
    if (moeinf_trace_filter(trace, out, &prm, &res, &err) != MOEINF_OK) return fail("filter", &err);
    printf("wrote %s: %lld requests, %lld prefill + %lld decode tokens\n", out,
           (long long)res.n_requests, (long long)res.n_tokens[0], (long long)res.n_tokens[1]);
    return CLI_EXIT_OK;
}

/* ---- concat ------------------------------------------------------------------------------- */

static void concat_usage(FILE *out) {
    fprintf(out,
            "usage: moeinf trace concat -o OUT A B ...\n"
            "\n"
            "Writes the requests of the traces A, B, ... one after another to OUT (e.g. a\n"
            "workload shift: the requests of one subject, then another's; or A twice). All\n"
            "inputs must have the same n_layers, n_experts and top_k. OUT takes the header\n"
            "lines of A; its totals are recomputed and a 'derived' line names the inputs.\n"
            "\n"
            "Request ids: an input whose first id is above the last id written keeps its ids;\n"
            "otherwise all of its ids are shifted up by the same amount, so that its first id\n"
            "is the last written + 1 (gaps inside the input are kept). Tags are kept.\n");
}

static int cmd_concat(int argc, char **argv) {
    const char *sub = "trace concat";
    const char *out = NULL;
    const char **inputs = calloc((size_t)argc, sizeof *inputs);
    if (!inputs) {
        fprintf(stderr, "moeinf: out of memory\n");
        return CLI_EXIT_FAIL;
    }
    int n_in = 0;
    int code = CLI_EXIT_USAGE;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (is_help(a)) {
            concat_usage(stdout);
            code = CLI_EXIT_OK;
            goto done;
        }
        if (!strcmp(a, "-o")) {
            if (!(out = cli_option_value(sub, argc, argv, &i))) goto done;
        } else if (a[0] == '-' && a[1] != '\0') {
            fprintf(stderr, "moeinf %s: unknown option '%s'\n", sub, a);
            concat_usage(stderr);
            goto done;
        } else {
            inputs[n_in++] = a;
        }
    }
    if (!out) {
        code = usage_error("concat", concat_usage, "-o is required");
        goto done;
    }
    if (n_in == 0) {
        code = usage_error("concat", concat_usage, "no input traces");
        goto done;
    }
    const struct cli_file output = {"-o", out};
    for (int i = 0; i < n_in; i++) { /* -o is written at the end: not one of the inputs */
        const struct cli_file input = {"the input", inputs[i]};
        code = cli_check_outputs(sub, &output, 1, &input, 1);
        if (code != CLI_EXIT_OK) goto done;
    }
    char note[NOTE_BYTES];
    size_t len = (size_t)snprintf(note, sizeof note, "moeinf trace concat of");
    for (int i = 0; i < n_in && len < sizeof note; i++) {
        int w =
            snprintf(note + len, sizeof note - len, "%s%s", i ? " + " : " ", base_name(inputs[i]));
        if (w > 0) len += (size_t)w;
    }
    struct moeinf_trace_copy_result res;
    struct moeinf_error err;
    memset(&err, 0, sizeof err);
    if (moeinf_trace_concat(inputs, n_in, out, note, &res, &err) != MOEINF_OK) {
        code = fail("concat", &err);
        goto done;
    }
    printf("wrote %s: %lld requests, %lld prefill + %lld decode tokens", out,
           (long long)res.n_requests, (long long)res.n_tokens[0], (long long)res.n_tokens[1]);
    if (res.n_shifted) {
        printf("; request ids of %lld input%s shifted to keep ids increasing",
               (long long)res.n_shifted, res.n_shifted == 1 ? "" : "s");
    }
    printf("\n");
    code = CLI_EXIT_OK;
done:
    free(inputs);
    return code;
}

/* ---- stats -------------------------------------------------------------------------------- */

static void stats_usage(FILE *out) {
    fprintf(out,
            "usage: moeinf trace stats [--trace] FILE [--json]\n"
            "\n"
            "Figures of a whole trace that explain what cache policies see, by phase\n"
            "(prefill, decode, all):\n"
            "  expert frequency  per layer, each expert's accesses over the whole trace: Gini\n"
            "                    coefficient (0 = even) and the share of the 10%% most used\n"
            "                    experts (ceil(E/10)); mean [min, max] over layers. Low: a\n"
            "                    global counter (LFU) has little to go on.\n"
            "  reuse             accesses to an expert (layer, id) that an earlier token of\n"
            "                    the same request already used (what recency and a request's\n"
            "                    EAM can exploit); distinct experts per request (%% of L x E)\n"
            "  similarity        cosine similarity of a request's EAM to the previous\n"
            "                    request's, to a random earlier one (mean over all earlier),\n"
            "                    and to the most similar earlier one (what matching against\n"
            "                    an EAM collection of all past requests finds); means over\n"
            "                    requests after the first\n"
            "\n"
            "  [--trace] FILE the trace (required)\n"
            "  --json         one JSON object instead of the table (null where a figure is\n"
            "                 undefined, e.g. decode figures of a prefill-only trace)\n");
}

static void print_row3(const char *label, const double v[3], bool percent) {
    printf("  %-44s", label);
    for (int p = 0; p < 3; p++) {
        if (isnan(v[p]))
            printf("%10s", "-");
        else if (percent)
            printf("%9.1f%%", 100 * v[p]);
        else
            printf("%10.3f", v[p]);
    }
    printf("\n");
}

static void print_spread3(const char *label, const struct moeinf_trace_spread s[3]) {
    double mean[3];
    for (int p = 0; p < 3; p++)
        mean[p] = s[p].mean;
    print_row3(label, mean, false);
    printf("  %-44s", "    [min, max] over layers");
    for (int p = 0; p < 3; p++) {
        char buf[48];
        if (isnan(s[p].mean))
            snprintf(buf, sizeof buf, "-");
        else
            snprintf(buf, sizeof buf, "%.2f-%.2f", s[p].min, s[p].max);
        printf("%10s", buf);
    }
    printf("\n");
}

static void stats_text(const char *trace, const struct moeinf_trace_stats *s) {
    printf("trace %s: %d layers x %d experts, top-%d; %lld requests\n", base_name(trace),
           s->n_layers, s->n_experts, s->top_k, (long long)s->n_requests);
    if (s->model[0]) printf("model %s\n", s->model);
    printf("\n  %-44s%10s%10s%10s\n", "", "prefill", "decode", "all");
    printf("  %-44s%10lld%10lld%10lld\n", "tokens", (long long)s->n_tokens[0],
           (long long)s->n_tokens[1], (long long)s->n_tokens[2]);
    printf("  %-44s%10llu%10llu%10llu\n", "expert accesses (tokens x layers x top_k)",
           (unsigned long long)s->accesses[0], (unsigned long long)s->accesses[1],
           (unsigned long long)s->accesses[2]);
    printf("expert frequency over the whole trace, per layer (mean over layers)\n");
    print_spread3("Gini coefficient of the experts' counts", s->gini);
    char label[96];
    snprintf(label, sizeof label, "share of the %d most used experts (10%%)", s->top_share_experts);
    print_spread3(label, s->top_share);
    printf("within a request\n");
    double reuse[3];
    for (int p = 0; p < 3; p++) {
        reuse[p] = s->accesses[p] ? (double)s->reused[p] / (double)s->accesses[p] : NAN;
    }
    print_row3("accesses to an expert used earlier in it", reuse, true);
    print_row3("distinct experts it uses (% of L x E)", s->distinct_share, true);
    printf("cosine similarity of request EAMs (mean over requests)\n");
    print_row3("to the previous request", s->similarity_prev, false);
    print_row3("to a random earlier request", s->similarity_random, false);
    print_row3("to the most similar earlier request", s->similarity_best, false);
}

static void stats_json(const char *trace, const struct moeinf_trace_stats *s) {
    printf("{\"trace\": ");
    json_string(base_name(trace));
    printf(", \"model\": ");
    json_string(s->model);
    printf(", \"n_layers\": %d, \"n_experts\": %d, \"top_k\": %d, \"requests\": %lld, "
           "\"top_share_experts\": %d",
           s->n_layers, s->n_experts, s->top_k, (long long)s->n_requests, s->top_share_experts);
    for (int p = 0; p < 3; p++) {
        printf(", \"%s\": {\"tokens\": %lld, \"accesses\": %llu, \"reused\": %llu, ",
               phase_names[p], (long long)s->n_tokens[p], (unsigned long long)s->accesses[p],
               (unsigned long long)s->reused[p]);
        json_number("reuse_ratio",
                    s->accesses[p] ? (double)s->reused[p] / (double)s->accesses[p] : NAN, true);
        json_number("distinct_share", s->distinct_share[p], true);
        printf("\"gini\": {");
        json_number("mean", s->gini[p].mean, true);
        json_number("min", s->gini[p].min, true);
        json_number("max", s->gini[p].max, false);
        printf("}, \"top_share\": {");
        json_number("mean", s->top_share[p].mean, true);
        json_number("min", s->top_share[p].min, true);
        json_number("max", s->top_share[p].max, false);
        printf("}, \"similarity\": {\"requests\": %lld, ", (long long)s->similarity_requests[p]);
        json_number("prev", s->similarity_prev[p], true);
        json_number("random", s->similarity_random[p], true);
        json_number("best", s->similarity_best[p], false);
        printf("}}");
    }
    printf("}\n");
}

static int cmd_stats(int argc, char **argv) {
    const char *sub = "trace stats";
    const char *trace = NULL;
    bool json = false;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = NULL;
        if (is_help(a)) {
            stats_usage(stdout);
            return CLI_EXIT_OK;
        }
        if (!strcmp(a, "--json")) {
            json = true;
        } else if (!is_option(a)) {
            if (!take_trace("stats", stats_usage, a, &trace)) return CLI_EXIT_USAGE;
        } else if (strcmp(a, "--trace") != 0) {
            return cli_bad_argument(sub, a, stats_usage);
        } else {
            v = cli_option_value(sub, argc, argv, &i);
            if (!v || !take_trace("stats", stats_usage, v, &trace)) return CLI_EXIT_USAGE;
        }
    }
    if (!trace) return usage_error("stats", stats_usage, "--trace is required");
    struct moeinf_trace_stats s;
    struct moeinf_error err;
    memset(&err, 0, sizeof err);
    if (moeinf_trace_stats(trace, &s, &err) != MOEINF_OK) return fail("stats", &err);
    if (json)
        stats_json(trace, &s);
    else
        stats_text(trace, &s);
    return CLI_EXIT_OK;
}

/* ---- dispatch ----------------------------------------------------------------------------- */

struct subcommand {
    const char *name;
    int (*fn)(int argc, char **argv);
    const char *summary;
};

static const struct subcommand subcommands[] = {
    {"heatmap", cmd_heatmap, "one request's expert activation matrix: skew summary, SVG heatmap"},
    {"filter", cmd_filter, "write a subset of a trace's requests (by tag, id, position)"},
    {"concat", cmd_concat, "write traces one after another (workload-shift experiments)"},
    {"stats", cmd_stats, "expert-frequency skew, within-request reuse, request similarity"},
};

static void usage(FILE *out) {
    fprintf(out, "usage: moeinf trace SUBCOMMAND [OPTIONS]   (moeinf trace SUBCOMMAND --help)\n\n"
                 "Tools over moe-trace v1 files (recorded expert routing, see moeinf sim):\n\n");
    for (size_t i = 0; i < sizeof subcommands / sizeof subcommands[0]; i++) {
        fprintf(out, "  %-8s %s\n", subcommands[i].name, subcommands[i].summary);
    }
}

int cmd_trace(int argc, char **argv) {
    if (argc < 2) {
        usage(stderr);
        return CLI_EXIT_USAGE;
    }
    if (is_help(argv[1]) || !strcmp(argv[1], "help")) {
        usage(stdout);
        return CLI_EXIT_OK;
    }
    for (size_t i = 0; i < sizeof subcommands / sizeof subcommands[0]; i++) {
        if (!strcmp(argv[1], subcommands[i].name)) return subcommands[i].fn(argc - 1, argv + 1);
    }
    fprintf(stderr, "moeinf trace: unknown subcommand '%s'\n", argv[1]);
    usage(stderr);
    return CLI_EXIT_USAGE;
}
