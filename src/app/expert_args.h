/* expert_args.h - the expert-cache options of run, logits and bench, and the --stats report. */
#ifndef MOEINF_APP_EXPERT_ARGS_H
#define MOEINF_APP_EXPERT_ARGS_H

#include <stdbool.h>
#include <stdio.h>

#include "app/output.h"
#include "moeinf.h"

struct expert_args {
    const char *cache;      /* --expert-cache SIZE|P%|auto, NULL: experts resident */
    const char *policy;     /* --policy NAME */
    const char *io;         /* --expert-io direct|cached */
    bool stats;             /* --stats */
    const char *stats_json; /* --stats-json FILE */
    const char *io_threads; /* --io-threads N (NULL: the default) */
    const char *prefetch;   /* --prefetch K|auto */
    const char *lookahead;  /* --lookahead N|auto */
    const char *routing;    /* set by bench --route-trace: where the replayed routing came
                               from, reported by --stats and --stats-json; NULL otherwise */
    const char *eamc;       /* --eamc FILE: the cache policy's learned state (warm_start.c) */
};

/* Consumes argv[*i] if it is one of the options above. Returns 1 if consumed, 0 if not one of
 * them, -1 on a bad value (message printed). */
int expert_args_parse(const char *cmd, struct expert_args *a, int argc, char **argv, int *i);

/* Sets the model and context params the options imply and checks the context params (all of
 * them, -c/-t/-b too, by moeinf_context_params_check: the one place their rules live). Returns
 * CLI_EXIT_OK, or prints the error, naming the option, and returns CLI_EXIT_USAGE (a bad
 * value). The output files (--stats-json, --eamc) are the caller's to check, with its inputs
 * (expert_args_outputs, cli_check_outputs). */
int expert_args_apply(const char *cmd, struct expert_args *a, struct moeinf_model_params *mp,
                      struct moeinf_context_params *cp);

/* Before the model loads (cache_check.c): an --expert-cache size that gives fewer slots than
 * the model's top-k experts, counted from the GGUF header of path (NULL: nothing checked).
 * Returns CLI_EXIT_USAGE (message printed) then, else CLI_EXIT_OK; a header that does not tell
 * (or auto) is left to the library's check when the context is made. */
int expert_args_check_cache(const char *cmd, const char *path,
                            const struct moeinf_context_params *cp);

/* Once the context exists: the cache's size and how it reads, one line on stderr. */
void expert_args_announce(const struct moeinf_context *ctx);

/* The outputs these options name (--stats-json, --eamc; a NULL path when not given), into
 * out[2], for cli_check_outputs. */
void expert_args_outputs(const struct expert_args *a, struct cli_file out[2]);

/* The report of --stats (stderr) and --stats-json (the file, written atomically: a temp file
 * renamed over it, so that a run that fails before the report leaves an existing file as it
 * was), for `seconds` of work. Returns false (message printed) if the JSON file cannot be
 * written. */
bool expert_args_report(struct expert_args *a, const struct moeinf_context *ctx, double seconds);

/* A failed run: nothing is written (kept for the callers; the JSON file is written only by
 * expert_args_report). */
void expert_args_close(struct expert_args *a);

/* warm_start.c: --eamc FILE loaded into the context (a missing file: a cold start, the file
 * is written at the end). Returns CLI_EXIT_OK, or prints why and returns CLI_EXIT_FAIL (a bad
 * file) or CLI_EXIT_USAGE (a policy that learns nothing). Nothing without --eamc. */
int expert_args_warm_start(const struct expert_args *a, struct moeinf_context *ctx);
/* Saves the state to --eamc FILE atomically; false (message printed) if it could not. True
 * without --eamc. */
bool expert_args_save_state(const struct expert_args *a, struct moeinf_context *ctx);

/* When a signal asked the work to stop (cli_stop_on_signal): saves --eamc and dies of the
 * signal; returns true only if the save failed (message printed). False when no signal came. */
bool expert_args_stopped(const struct expert_args *a, struct moeinf_context *ctx);

/* The help lines of those options. */
#define EXPERT_ARGS_HELP                                                                           \
    "  --expert-cache SIZE  run routed experts from the file through a cache of SIZE:\n"           \
    "                       bytes with K/M/G/T (powers of 1024, 1.5G too), P% of all\n"            \
    "                       experts (layers x experts), or auto (the cgroup limit or\n"            \
    "                       MOEINF_MEMORY_LIMIT=BYTES, the smaller, else MemAvailable, less\n"     \
    "                       resident weights, KV cache, scratch and 64 MiB); other\n"              \
    "                       weights are read into memory once. Default: all resident\n"            \
    "  --policy NAME        expert cache policy (default reuse; `moeinf sim --help` lists "        \
    "them)\n"                                                                                      \
    "  --expert-io MODE     how experts are read: direct (O_DIRECT, past the page cache; the\n"    \
    "                       default; where refused, as nocache), cached (through the page\n"       \
    "                       cache, which keeps them) or nocache (through the page cache\n"         \
    "                       without readahead, each read dropped from it after)\n"                 \
    "  --io-threads N       threads reading experts (default 4; 0: read on the compute\n"          \
    "                       thread when needed, nothing read ahead)\n"                             \
    "  --prefetch K|auto    after each layer, prefetch up to K experts the policy predicts;\n"     \
    "                       auto (default): top-k of them, read only in the layers where\n"        \
    "                       they pay (measured: precision on the experts that had to be\n"         \
    "                       read, against the I/O threads' idle time; then each layer's\n"         \
    "                       decode time with and without them)\n"                                  \
    "  --lookahead N|auto   during decode, prefetch the top-k experts that the next N layers'\n"   \
    "                       routers choose for the current hidden state; auto (default): one\n"    \
    "                       layer ahead, read only in the layers where that pays\n"                \
    "  --stats              the expert cache's counters per layer, on stderr at the end\n"         \
    "  --stats-json FILE    the same as one JSON object in FILE, written atomically at the\n"      \
    "                       end (also when SIGINT/SIGTERM stops the run; a failed run\n"           \
    "                       leaves FILE as it was)\n"                                              \
    "  --eamc FILE          warm start: the cache policy's learned state (the file of\n"           \
    "                       `moeinf sim --eamc`; it names its model: another model's is\n"         \
    "                       refused), read at start (a missing file: cold start) and\n"            \
    "                       written atomically at exit and on SIGINT/SIGTERM\n"
extern const char expert_args_help[];

#endif
