/* cmd_fit.c - moeinf fit -m MODEL [--memory SIZE]: whether a model runs on this machine and
 * how fast, before it is used (the work is in src/app/fit*.c). */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "app/fit.h"
#include "cli/cli.h"

#define CMD "fit"

static void usage(FILE *out) {
    fprintf(out,
            "usage: moeinf fit -m MODEL [--memory SIZE|P%%] [options]\n"
            "\n"
            "Says whether MODEL runs on this machine and how fast, before it is used. MODEL\n"
            "is a GGUF file, whole or cut anywhere after its tensor table (a download in\n"
            "progress: only the header and the tensor table are read), or a gen-model preset\n"
            "name (moeinf gen-model --help; its header is written to a temporary file).\n"
            "Prints the weights the engine keeps resident, the non-expert part (resident\n"
            "under --expert-cache), one routed expert and all of them, the weights read per\n"
            "decode token, the KV cache per token of context, this machine's memory, disk and\n"
            "compute rates (short probes, under 2 s, cached for a week in the cache folder's\n"
            "fit-probe.txt), then the predicted decode and prefill tokens/s resident and at\n"
            "the memory budget with the --expert-cache to give. The hit ratio behind an\n"
            "offloaded prediction comes from the simulator (moeinf sim) on --trace, else on a\n"
            "synthetic routing fitted to recorded ones; the output says which. With a whole\n"
            "file, the disk rate behind the offloaded decode comes from one more probe (1 s,\n"
            "not cached) that reads the windows the simulated misses read.\n"
            "\n"
            "  -m, --model MODEL   GGUF file or gen-model preset name (required)\n"
            "  --memory SIZE|P%%    the budget: bytes with K, M, G or T (powers of 1024, 1.5G\n"
            "                      too), or a percentage of the resident run's need\n"
            "                      (default: the memory this process may use: its cgroup's\n"
            "                      limit, else MemAvailable)\n"
            "  -c, --ctx N         context tokens the KV cache holds (default 4096)\n"
            "  --trace FILE        a recorded routing (moe-trace v1) of this model for the hit\n"
            "                      ratio\n"
            "  -t, --threads N     threads the rates are for (default: the CPUs usable)\n"
            "  --reprobe           measure the machine again instead of using the cache\n"
            "  --synthetic L,E,K,SKEW,REUSE -o FILE\n"
            "                      write the synthetic routing (12 requests of 64 prefill and\n"
            "                      128 decode tokens) of that geometry and those parameters, and\n"
            "                      nothing else (for bench/fit_calibrate.sh)\n"
            "  -h, --help          this help\n");
}

static int bad_usage(const char *what, const char *value) {
    fprintf(stderr, "moeinf " CMD ": %s '%s'\n", what, value);
    usage(stderr);
    return CLI_EXIT_USAGE;
}

static double gb(uint64_t b) {
    return (double)b / 1e9;
}

/* A preset's header in a temporary file (path in buf), or false with err set. */
static bool preset_header(const char *name, char *buf, size_t size, struct moeinf_error *err) {
    struct moeinf_gen_params p;
    if (!cli_gen_preset(name, &p)) return false;
    const char *dir = getenv("TMPDIR"); // NOLINT(concurrency-mt-unsafe): no setenv
    snprintf(buf, size, "%s/moeinf-fit-%ld-%s.gguf", dir && *dir ? dir : "/tmp", (long)getpid(),
             name);
    return cli_fit_preset_header(&p, buf, err) == MOEINF_OK;
}

/* Comma-separated numbers of --synthetic: 3 integers, then 2 reals. */
static bool parse_synthetic(const char *spec, long ints[3], double reals[2]) {
    const char *p = spec;
    for (int i = 0; i < 5; i++) {
        char *end = NULL;
        if (i < 3) {
            ints[i] = strtol(p, &end, 10);
        } else {
            reals[i - 3] = strtod(p, &end);
        }
        if (end == p || (i < 4 && *end != ',') || (i == 4 && *end != '\0')) return false;
        p = end + 1;
    }
    return ints[0] > 0 && ints[1] > 0 && ints[2] > 0 && ints[0] < 100000 && ints[1] < 100000 &&
           ints[2] <= ints[1];
}

static int synthetic(const char *spec, const char *out) {
    long ints[3];
    double reals[2];
    if (!out) return bad_usage("--synthetic needs -o FILE", spec);
    if (!parse_synthetic(spec, ints, reals)) {
        return bad_usage("--synthetic takes L,E,K,SKEW,REUSE, not", spec);
    }
    struct moeinf_error err = {0};
    if (cli_fit_synthetic_trace(out, (int)ints[0], (int)ints[1], (int)ints[2], reals[0], reals[1],
                                12, 192, 0x5eedu, &err)) {
        return cli_fail(&err);
    }
    return CLI_EXIT_OK;
}

static void print_prediction(const char *label, const struct cli_fit_prediction *p,
                             const struct cli_fit_model *m, const char *source) {
    printf("%-16s %" PRIu64 " bytes (%.2f GB): ", label, p->memory, gb(p->memory));
    if (!p->runs) {
        printf("does not run\n");
        return;
    }
    if (p->resident) {
        printf("resident, no --expert-cache: decode %.1f tok/s, prefill %.1f tok/s\n",
               p->decode_tps, p->prefill_tps);
        printf("%-16s decode %.2f ms reading memory; prefill %.0f ms products + %.0f ms "
               "attention per 512 tokens\n",
               "  time", p->t_mem * 1e3, p->t_dot * 1e3, p->t_attn * 1e3);
        return;
    }
    printf("--expert-cache %" PRIu64 "M (%d of %d experts, %.1f %%), hit ratio %.2f: decode "
           "%.1f tok/s, prefill %.1f tok/s\n",
           p->cache_bytes >> 20, p->cache_slots, m->n_moe_layers * m->n_expert,
           p->cache_percent, p->hit, p->decode_tps, p->prefill_tps);
    printf("%-16s decode %.2f ms non-expert weights + max(%.2f ms experts from memory, %.2f ms "
           "the disk); prefill %.0f ms products + %.0f ms attention + %.0f ms waiting for reads "
           "per 512 tokens (%.2f of its experts cached)\n",
           "  time", p->t_nonexpert * 1e3, (p->t_mem - p->t_nonexpert) * 1e3, p->t_disk * 1e3,
           p->t_dot * 1e3, p->t_attn * 1e3, p->t_read * 1e3, p->prefill_hit);
    printf("%-16s %s\n", "  hit ratio from", source);
    if (p->miss_gbps > 0) {
        printf("%-16s %.2f GB/s: the disk probe over the simulated misses' reads (%.0f MiB of "
               "distinct experts)\n",
               "  disk, misses", p->miss_gbps, (double)p->miss_footprint / (1 << 20));
    }
}

static void print_sizes(const struct cli_fit_model *m, const char *model, bool preset,
                        long n_ctx) {
    printf("%-16s %s%s\n", "model", model, preset ? " (gen-model preset)" : "");
    printf("%-16s %s: %d layers, %d with experts, %d experts, top %d\n", "arch", m->arch,
           m->n_layer, m->n_moe_layers, m->n_expert, m->n_expert_used);
    printf("%-16s %" PRIu64 " bytes (%.2f GB)%s", "file", m->file_bytes, gb(m->file_bytes),
           m->header_only ? "; header and tensor table read" : "\n");
    if (m->header_only && !preset) printf(", %" PRIu64 " bytes on disk\n", m->present_bytes);
    if (m->header_only && preset) printf(" (not written)\n");
    printf("%-16s %" PRIu64 " bytes (%.2f GB): every weight the engine binds\n", "resident",
           m->weight_bytes, gb(m->weight_bytes));
    printf("%-16s %" PRIu64 " bytes (%.2f GB): resident under --expert-cache\n", "non-expert",
           m->nonexpert_bytes, gb(m->nonexpert_bytes));
    printf("%-16s %" PRIu64 " bytes (%.2f GB) = %d x %" PRIu64 " bytes (one expert's gate, up "
           "and down; a cache slot %" PRIu64 " bytes)\n",
           "experts", m->experts_bytes, gb(m->experts_bytes), m->n_moe_layers * m->n_expert,
           m->expert_bytes, m->slot_bytes);
    printf("%-16s %" PRIu64 " bytes per token (%.3f GB; non-expert %.3f GB)\n", "decode reads",
           m->decode_bytes, gb(m->decode_bytes), gb(m->nonexpert_decode));
    printf("%-16s %" PRIu64 " bytes (F16 K and V%s), fixed %" PRIu64 " bytes; %ld tokens: %.2f "
           "GB\n",
           "KV per token", m->kv_token_bytes, strcmp(m->arch, "deepseek2") ? "" : ": the latent",
           m->state_bytes, n_ctx, gb(m->kv_token_bytes * (uint64_t)n_ctx + m->state_bytes));
}

static void print_machine(const struct cli_fit_machine *mc) {
    char when[32] = "";
    time_t t = (time_t)mc->when;
    struct tm tm;
    if (gmtime_r(&t, &tm)) strftime(when, sizeof when, "%Y-%m-%d %H:%M UTC", &tm);
    printf("%-16s memory %.1f GB/s, disk %.2f GB/s, prefill kernel %.1f G/s, %d threads (%s %s)\n",
           "machine", mc->mem_gbps, mc->disk_gbps, mc->dot_gops, mc->threads,
           mc->cached ? "cached, probed" : "probed", when);
    printf("%-16s q.k %.1f G/s, weighted sum %.1f G/s\n", "  attention", mc->fdot_gops,
           mc->wsum_gops);
    printf("%-16s %s\n", "  disk probe", mc->disk_note);
}

/* MODEL read: a file, else a preset name (its header written to a temporary file and removed
 * again). */
static int read_model(const char *model, struct cli_fit_model *m, bool *preset,
                      struct moeinf_error *err) {
    char tmp[1100] = "";
    const char *path = model;
    struct stat sb;
    struct moeinf_gen_params p;
    if (stat(model, &sb) != 0) {
        if (strchr(model, '/') || !cli_gen_preset(model, &p)) {
            fprintf(stderr, "moeinf: %s: no such file, and not a gen-model preset\n", model);
            return CLI_EXIT_FAIL;
        }
        if (!preset_header(model, tmp, sizeof tmp, err)) return cli_fail(err);
        path = tmp;
    }
    *preset = tmp[0] != 0;
    enum moeinf_status st = cli_fit_read(path, m, err);
    if (tmp[0]) unlink(tmp);
    return st ? cli_fail(err) : CLI_EXIT_OK;
}

struct fit_opts {
    const char *model;
    const char *memory;
    const char *trace;
    const char *synth;
    const char *out;
    long n_ctx;
    long threads;
    bool reprobe;
};

/* The options into o; CLI_EXIT_OK to go on, else the exit code (help: -1). */
static int parse_opts(int argc, char **argv, struct fit_opts *o) {
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = NULL;
        const char **str = NULL;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage(stdout);
            return -1;
        }
        if (!strcmp(a, "-m") || !strcmp(a, "--model")) str = &o->model;
        if (!strcmp(a, "--memory")) str = &o->memory;
        if (!strcmp(a, "--trace")) str = &o->trace;
        if (!strcmp(a, "--synthetic")) str = &o->synth;
        if (!strcmp(a, "-o")) str = &o->out;
        if (str) {
            if (!(*str = cli_option_value(CMD, argc, argv, &i))) return CLI_EXIT_USAGE;
        } else if (!strcmp(a, "-c") || !strcmp(a, "--ctx")) {
            if (!(v = cli_option_value(CMD, argc, argv, &i)) ||
                !cli_parse_long(CMD, a, v, 1, 1 << 24, &o->n_ctx)) {
                return CLI_EXIT_USAGE;
            }
        } else if (!strcmp(a, "-t") || !strcmp(a, "--threads")) {
            if (!(v = cli_option_value(CMD, argc, argv, &i)) ||
                !cli_parse_long(CMD, a, v, 1, 256, &o->threads)) {
                return CLI_EXIT_USAGE;
            }
        } else if (!strcmp(a, "--reprobe")) {
            o->reprobe = true;
        } else {
            return cli_bad_argument(CMD, a, usage);
        }
    }
    return CLI_EXIT_OK;
}

/* The model read: the machine probed, the predictions printed. */
static int fit_model(const struct fit_opts *o, const struct moeinf_expert_cache_size *mem_size,
                     const struct cli_fit_model *m, bool preset) {
    const struct moeinf_expert_cache_size mem = *mem_size;
    const char *model = o->model;
    const char *memory = o->memory;
    const char *trace = o->trace;
    const long n_ctx = o->n_ctx;
    const long threads = o->threads;
    const bool reprobe = o->reprobe;
    struct moeinf_error err = {0};
    const uint64_t kv_ctx = m->kv_token_bytes * (uint64_t)n_ctx + m->state_bytes;
    struct cli_fit_prediction res;
    struct cli_fit_machine mc;
    char source[512];
    /* the resident run's need: what a prediction at unbounded memory reports as its budget */
    uint64_t budget = 0;
    char budget_from[320] = "--memory";
    if (mem.kind == MOEINF_EXPERT_CACHE_NONE) {
        if (cli_fit_memory(&budget, budget_from, sizeof budget_from, &err)) return cli_fail(&err);
    }
    if (cli_fit_probe(preset ? NULL : model, m->expert_bytes / 3, (int)threads, reprobe,
                      m->expert_type, &mc, &err)) {
        return cli_fail(&err);
    }
    if (cli_fit_predict(m, &mc, UINT64_MAX / 2, (int)n_ctx, trace, NULL, &res, source,
                        sizeof source, &err)) {
        return cli_fail(&err);
    }
    uint64_t need = m->weight_bytes + kv_ctx + m->scratch_bytes + (64ull << 20);
    if (mem.kind == MOEINF_EXPERT_CACHE_BYTES) budget = mem.bytes;
    if (mem.kind == MOEINF_EXPERT_CACHE_PERCENT) {
        budget = (uint64_t)((double)need * mem.percent / 100.0);
    }
    struct cli_fit_prediction at;
    if (cli_fit_predict(m, &mc, budget, (int)n_ctx, trace, preset ? NULL : model, &at, source,
                        sizeof source, &err)) {
        return cli_fail(&err);
    }
    if (!at.runs && memory) {
        fprintf(stderr,
                "moeinf: --memory %s (%.2f GB) is too small for %s: it needs at least %.2f GB "
                "(the non-expert weights, a KV cache of %ld tokens, scratch and top-k experts "
                "per layer)\n",
                memory, gb(budget), model,
                gb(m->nonexpert_bytes + kv_ctx + m->scratch_bytes + (64ull << 20) +
                   (uint64_t)m->n_expert_used * m->slot_bytes),
                n_ctx);
        return CLI_EXIT_FAIL;
    }

    print_sizes(m, model, preset, n_ctx);
    print_machine(&mc);
    res.memory = need;
    print_prediction("need resident", &res, m, source);
    printf("%-16s %s\n", "budget from", budget_from);
    print_prediction("at budget", &at, m, source);
    if (fflush(stdout) != 0) {
        fprintf(stderr, "moeinf: writing the output failed\n");
        return CLI_EXIT_FAIL;
    }
    return CLI_EXIT_OK;
}

int cmd_fit(int argc, char **argv) {
    struct fit_opts o = {.n_ctx = 4096};
    int rc = parse_opts(argc, argv, &o);
    if (rc != CLI_EXIT_OK) return rc < 0 ? CLI_EXIT_OK : rc;
    const char *model = o.model;
    const char *memory = o.memory;
    if (o.synth) return synthetic(o.synth, o.out);
    if (!model) {
        fprintf(stderr, "moeinf " CMD ": missing -m MODEL\n");
        usage(stderr);
        return CLI_EXIT_USAGE;
    }
    struct moeinf_expert_cache_size mem = {0};
    struct moeinf_error err = {0};
    if (memory) {
        if (moeinf_expert_cache_parse(memory, &mem, &err) != MOEINF_OK ||
            mem.kind == MOEINF_EXPERT_CACHE_AUTO ||
            (mem.kind == MOEINF_EXPERT_CACHE_BYTES && mem.bytes == 0)) {
            return bad_usage("--memory takes a size (K, M, G, T; 1.5G) or P%, not", memory);
        }
    }
    struct cli_fit_model m = {0};
    bool preset = false;
    if ((rc = read_model(model, &m, &preset, &err)) != CLI_EXIT_OK) return rc;
    rc = fit_model(&o, &mem, &m, preset);
    cli_fit_model_free(&m);
    return rc;
}
