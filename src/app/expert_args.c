/* expert_args.c - --expert-cache, --policy, --stats, --stats-json (see expert_args.h). */
#include "app/expert_args.h"
#include "app/output.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "app/args.h"
#include "app/param_flags.h"

const char expert_args_help[] = EXPERT_ARGS_HELP;

int expert_args_parse(const char *cmd, struct expert_args *a, int argc, char **argv, int *i) {
    const char *opt = argv[*i];
    if (!strcmp(opt, "--stats")) {
        a->stats = true;
        return 1;
    }
    static const char *const counts[] = {"--io-threads", "--prefetch", "--lookahead", NULL};
    bool is_count = cli_is_one_of(opt, counts);
    if (!is_count && strcmp(opt, "--expert-cache") != 0 && strcmp(opt, "--policy") != 0 &&
        strcmp(opt, "--stats-json") != 0 && strcmp(opt, "--expert-io") != 0 &&
        strcmp(opt, "--eamc") != 0) {
        return 0;
    }
    const char *val = cli_option_value(cmd, argc, argv, i);
    if (!val) return -1;
    if (is_count) {
        /* a number here (or auto, for --prefetch and --lookahead); its rule is
         * moeinf_context_params_check's (expert_args_apply) */
        const bool ahead = strcmp(opt, "--io-threads") != 0;
        long n = 0;
        if (!(ahead && !strcmp(val, "auto")) && !cli_parse_long(cmd, opt, val, INT_MIN, INT_MAX, &n)) {
            return -1;
        }
        if (ahead && n < 0) {
            fprintf(stderr, "moeinf %s: invalid value '%s' for %s: must be auto or at least 0\n",
                    cmd, val, opt);
            return -1;
        }
        if (!strcmp(opt, "--io-threads")) {
            a->io_threads = val;
        } else if (!strcmp(opt, "--prefetch")) {
            a->prefetch = val;
        } else {
            a->lookahead = val;
        }
        return 1;
    }
    if (!strcmp(opt, "--expert-cache")) {
        a->cache = val;
    } else if (!strcmp(opt, "--policy")) {
        a->policy = val;
    } else if (!strcmp(opt, "--expert-io")) {
        if (strcmp(val, "direct") != 0 && strcmp(val, "cached") != 0 &&
            strcmp(val, "nocache") != 0) {
            fprintf(stderr, "moeinf %s: --expert-io must be direct, cached or nocache, not '%s'\n",
                    cmd, val);
            return -1;
        }
        a->io = val;
    } else if (!strcmp(opt, "--eamc")) {
        a->eamc = val;
    } else {
        a->stats_json = val;
    }
    return 1;
}

/* --prefetch / --lookahead as parsed by expert_args_parse: auto or a count. */
static int ahead_count(const char *val) {
    return !strcmp(val, "auto") ? MOEINF_EXPERT_AUTO : (int)strtol(val, NULL, 10);
}

/* The library's rules of the context parameters, before the model is loaded (the ones that
 * need the model are checked again by moeinf_context_init); a bad value is a usage error
 * naming the option. */
static int check_params(const char *cmd, const struct moeinf_context_params *cp) {
    struct moeinf_error err = {0};
    if (moeinf_context_params_check(cp, NULL, &err) == MOEINF_OK) return CLI_EXIT_OK;
    return cli_param_fail(cmd, &err, CLI_EXIT_USAGE);
}

int expert_args_apply(const char *cmd, struct expert_args *a, struct moeinf_model_params *mp,
                      struct moeinf_context_params *cp) {
    struct moeinf_error err = {0};
    if (!a->cache) {
        if (a->policy || a->io || a->stats || a->stats_json || a->io_threads || a->prefetch ||
            a->lookahead || a->eamc) {
            fprintf(stderr,
                    "moeinf %s: --policy, --expert-io, --io-threads, --prefetch, --lookahead, "
                    "--stats, --stats-json and --eamc need --expert-cache\n",
                    cmd);
            return CLI_EXIT_USAGE;
        }
        return check_params(cmd, cp);
    }
    if (moeinf_expert_cache_parse(a->cache, &cp->expert_cache, &err) != MOEINF_OK) {
        fprintf(stderr, "moeinf %s: %s\n", cmd, err.msg);
        return CLI_EXIT_USAGE;
    }
    cp->expert_policy = a->policy;
    /* integers, parsed by expert_args_parse; their rules are check_params' */
    if (a->io_threads) cp->expert_io_threads = (int)strtol(a->io_threads, NULL, 10);
    if (a->prefetch) cp->expert_prefetch = ahead_count(a->prefetch);
    if (a->lookahead) cp->expert_lookahead = ahead_count(a->lookahead);
    cp->expert_io = !a->io                      ? MOEINF_EXPERT_IO_DIRECT
                    : !strcmp(a->io, "cached")  ? MOEINF_EXPERT_IO_CACHED
                    : !strcmp(a->io, "nocache") ? MOEINF_EXPERT_IO_NOCACHE
                                                : MOEINF_EXPERT_IO_DIRECT;
    mp->offload_experts = true;
    return check_params(cmd, cp);
}

void expert_args_outputs(const struct expert_args *a, struct cli_file out[2]) {
    out[0] = (struct cli_file){"--stats-json", a->stats_json};
    out[1] = (struct cli_file){"--eamc", a->eamc};
}

void expert_args_announce(const struct moeinf_context *ctx) {
    struct moeinf_expert_cache_info info;
    struct moeinf_error err = {0};
    if (moeinf_context_expert_cache(ctx, &info, &err) != MOEINF_OK) return;
    double mib = 1024.0 * 1024.0;
    fprintf(stderr,
            "moeinf: expert cache: %d of %d experts (%.1f%%), %d slots x %.2f MiB = %.1f MiB; "
            "resident weights %.1f MiB, KV cache and scratch %.1f MiB; policy %s; %s\n",
            info.slots, info.n_experts_total, 100.0 * info.slots / info.n_experts_total, info.slots,
            (double)info.slot_bytes / mib, (double)info.slot_bytes * info.slots / mib,
            (double)info.resident_bytes / mib, (double)info.context_bytes / mib, info.policy,
            info.io_note ? info.io_note : "");
}

static double ratio(uint64_t a, uint64_t b) {
    return b ? (double)a / (double)b : 0.0;
}

static void json_counters(FILE *f, const struct moeinf_expert_stats *s) {
    fprintf(f,
            "\"accesses\": %llu, \"hits\": %llu, \"hit_ratio\": ", (unsigned long long)s->accesses,
            (unsigned long long)s->hits);
    if (s->accesses) {
        fprintf(f, "%.6f", ratio(s->hits, s->accesses));
    } else {
        fprintf(f, "null");
    }
    fprintf(f,
            ", \"misses\": %llu, \"prefetches\": %llu, \"prefetch_hits\": %llu, "
            "\"late_prefetches\": %llu, \"wasted_prefetches\": %llu, "
            "\"dropped_prefetches\": %llu, \"reads\": %llu, \"reads_in_flight\": %llu, "
            "\"bytes_read\": %llu, \"expert_bytes\": %llu, "
            "\"read_seconds\": %.6f, \"stall_seconds\": %.6f",
            (unsigned long long)s->misses, (unsigned long long)s->prefetches,
            (unsigned long long)s->prefetch_hits, (unsigned long long)s->late_prefetches,
            (unsigned long long)s->wasted_prefetches, (unsigned long long)s->dropped_prefetches,
            (unsigned long long)s->reads, (unsigned long long)s->reads_in_flight,
            (unsigned long long)s->bytes_read, (unsigned long long)s->expert_bytes, s->read_seconds,
            s->stall_seconds);
    fprintf(f,
            ", \"policy_reads\": %llu, \"policy_reads_used\": %llu, \"lookahead_reads\": %llu, "
            "\"lookahead_reads_used\": %llu, \"spare_seconds\": %.6f, \"auto_checks\": %llu, "
            "\"auto_checks_kept\": %llu",
            (unsigned long long)s->policy_reads, (unsigned long long)s->policy_reads_used,
            (unsigned long long)s->lookahead_reads, (unsigned long long)s->lookahead_reads_used,
            s->spare_seconds, (unsigned long long)s->auto_checks,
            (unsigned long long)s->auto_checks_kept);
}

/* One source's predictions (struct moeinf_expert_stats). */
struct prediction {
    uint64_t predicted, correct, actual, reads, reads_used;
    int layers_on, layers_read;
};

static struct prediction prediction_of(const struct moeinf_expert_stats *s, bool lookahead) {
    struct prediction p = {s->policy_predicted,  s->policy_correct,    s->policy_actual,
                           s->policy_reads,      s->policy_reads_used, s->policy_layers_on,
                           s->policy_layers_read};
    if (lookahead) {
        p = (struct prediction){s->lookahead_predicted, s->lookahead_correct,
                                s->lookahead_actual,    s->lookahead_reads,
                                s->lookahead_reads_used, s->lookahead_layers_on,
                                s->lookahead_layers_read};
    }
    return p;
}

static void json_prediction(FILE *f, const char *name, const struct prediction *p) {
    fprintf(f,
            "\"%s\": {\"predicted\": %llu, \"correct\": %llu, \"actual\": %llu, "
            "\"reads\": %llu, \"reads_used\": %llu, \"layers_on\": %d, \"layers_read\": %d}",
            name, (unsigned long long)p->predicted, (unsigned long long)p->correct,
            (unsigned long long)p->actual, (unsigned long long)p->reads,
            (unsigned long long)p->reads_used, p->layers_on, p->layers_read);
}

/* "precision 0.812, recall 0.655 (123 experts named); on the experts that had to be read
 * 0.310 (40 of 129); auto: wanted in 3 of 16 layers, read in 2", or "none named". */
static void print_prediction(const char *name, const struct prediction *p, int n_layers) {
    if (!p->predicted) {
        fprintf(stderr, "%s: none named\n", name);
        return;
    }
    fprintf(stderr,
            "%s: precision %.3f, recall %.3f (%llu experts named); on the experts that had to "
            "be read %.3f (%llu of %llu)",
            name, ratio(p->correct, p->predicted), ratio(p->correct, p->actual),
            (unsigned long long)p->predicted, ratio(p->reads_used, p->reads),
            (unsigned long long)p->reads_used, (unsigned long long)p->reads);
    if (p->layers_on >= 0) {
        fprintf(stderr, "; auto: wanted in %d of %d layers, read in %d", p->layers_on, n_layers,
                p->layers_read);
    }
    fprintf(stderr, "\n");
}

/* s as a JSON string (quotes and backslashes escaped, control bytes as \u00XX). */
static void json_string(FILE *f, const char *s) {
    fputc('"', f);
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p == '"' || *p == '\\') {
            fprintf(f, "\\%c", *p);
        } else if (*p < 0x20) {
            fprintf(f, "\\u%04x", *p);
        } else {
            fputc(*p, f);
        }
    }
    fputc('"', f);
}

bool expert_args_report(struct expert_args *a, const struct moeinf_context *ctx, double seconds) {
    struct moeinf_expert_cache_info info;
    struct moeinf_expert_stats total;
    struct moeinf_error err = {0};
    if (!a->cache) return true;
    if (moeinf_context_expert_cache(ctx, &info, &err) != MOEINF_OK ||
        moeinf_context_expert_stats(ctx, -1, &total, &err) != MOEINF_OK) {
        cli_fail(&err);
        return false;
    }
    int n_layers = 0;
    struct moeinf_expert_stats ls;
    while (moeinf_context_expert_stats(ctx, n_layers, &ls, &err) == MOEINF_OK)
        n_layers++;
    double tps = seconds > 0 ? (double)total.tokens / seconds : 0.0;
    if (a->stats) {
        fprintf(stderr, "\nexpert cache (%s, %d slots):\n", info.policy, info.slots);
        if (a->routing) fprintf(stderr, "routing replayed from %s\n", a->routing);
        fprintf(stderr, "%-6s %9s %9s %9s %6s %9s %9s %7s %7s %7s %10s %9s %9s\n", "layer",
                "accesses", "hits", "misses", "hit", "prefetch", "pf hits", "late", "wasted",
                "dropped", "MiB read", "read s", "stall s");
        for (int il = 0; il <= n_layers; il++) {
            if (il < n_layers) {
                moeinf_context_expert_stats(ctx, il, &ls, &err);
            } else {
                ls = total;
            }
            char name[16];
            snprintf(name, sizeof name, il < n_layers ? "%d" : "total", il);
            fprintf(stderr,
                    "%-6s %9llu %9llu %9llu %6.3f %9llu %9llu %7llu %7llu %7llu %10.1f %9.3f "
                    "%9.3f\n",
                    name, (unsigned long long)ls.accesses, (unsigned long long)ls.hits,
                    (unsigned long long)ls.misses, ratio(ls.hits, ls.accesses),
                    (unsigned long long)ls.prefetches, (unsigned long long)ls.prefetch_hits,
                    (unsigned long long)ls.late_prefetches,
                    (unsigned long long)ls.wasted_prefetches,
                    (unsigned long long)ls.dropped_prefetches,
                    (double)ls.bytes_read / (1024.0 * 1024.0), ls.read_seconds, ls.stall_seconds);
        }
        if (total.late_prefetches || total.reads_in_flight) {
            fprintf(stderr,
                    "late: accesses that waited for a prefetch still being read (not hits); "
                    "%llu reads still in flight (not in MiB read)\n",
                    (unsigned long long)total.reads_in_flight);
        }
        fprintf(stderr, "%llu tokens (%llu decode) in %.3f s: %.2f tokens/s\n",
                (unsigned long long)total.tokens, (unsigned long long)total.decode_tokens, seconds,
                tps);
        if (total.tokens && seconds > 0) {
            fprintf(stderr, "reads %.1f MiB/s; stall %.2f ms per token (%.0f%% of the time)\n",
                    (double)total.bytes_read / (1024.0 * 1024.0) / seconds,
                    1e3 * total.stall_seconds / (double)total.tokens,
                    100.0 * total.stall_seconds / seconds);
        }
        struct prediction pp = prediction_of(&total, false);
        struct prediction pl = prediction_of(&total, true);
        print_prediction("policy prefetch", &pp, n_layers);
        print_prediction("gate lookahead", &pl, n_layers);
        if (pp.layers_on >= 0 || pl.layers_on >= 0) {
            fprintf(stderr, "auto wall-time check: %llu verdicts, %llu kept a source's reads\n",
                    (unsigned long long)total.auto_checks,
                    (unsigned long long)total.auto_checks_kept);
        }
        if (total.tokens) {
            fprintf(stderr, "I/O threads idle while the layers computed: %.2f ms per token\n",
                    1e3 * total.spare_seconds / (double)total.tokens);
        }
    }
    if (!a->stats_json) return true;
    struct moeinf_atomic_file af = {0};
    if (moeinf_atomic_open(a->stats_json, &af, &err) != MOEINF_OK) {
        cli_fail(&err);
        return false;
    }
    FILE *f = af.fp;
    fprintf(f,
            "{\"policy\": \"%s\", \"cache_experts\": %d, \"experts_total\": %d, "
            "\"slot_bytes\": %llu, \"direct_io\": %s, ",
            info.policy, info.slots, info.n_experts_total, (unsigned long long)info.slot_bytes,
            info.direct_io ? "true" : "false");
    if (a->routing) {
        fprintf(f, "\"routing_replayed_from\": ");
        json_string(f, a->routing);
        fprintf(f, ", ");
    }
    json_counters(f, &total);
    fprintf(f,
            ", \"tokens\": %llu, \"decode_tokens\": %llu, \"seconds\": %.6f, "
            "\"tokens_per_second\": %.4f, ",
            (unsigned long long)total.tokens, (unsigned long long)total.decode_tokens, seconds,
            tps);
    struct prediction jp = prediction_of(&total, false);
    struct prediction jl = prediction_of(&total, true);
    json_prediction(f, "policy_prediction", &jp);
    fprintf(f, ", ");
    json_prediction(f, "lookahead_prediction", &jl);
    fprintf(f, ", \"layers\": [");
    for (int il = 0; il < n_layers; il++) {
        moeinf_context_expert_stats(ctx, il, &ls, &err);
        fprintf(f, "%s{\"layer\": %d, ", il ? ", " : "", il);
        json_counters(f, &ls);
        fprintf(f, "}");
    }
    fprintf(f, "]}\n");
    if (moeinf_atomic_commit(&af, &err) != MOEINF_OK) {
        cli_fail(&err);
        return false;
    }
    return true;
}

void expert_args_close(struct expert_args *a) {
    (void)a;
}
