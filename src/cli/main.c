/* main.c - the moeinf command: a table of subcommands. */
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"

struct command {
    const char *name;
    int (*fn)(int argc, char **argv);
    const char *summary;
};

static const struct command commands[] = {
    {"run", cmd_run, "generate text from a prompt"},
    {"bench", cmd_bench, "measure prefill and decode tokens/s"},
    {"tokenize", cmd_tokenize, "print the token ids of a text"},
    {"logits", cmd_logits, "write the logits of every position of a prompt"},
    {"inspect", cmd_inspect, "print a GGUF file's metadata and tensor table"},
    {"gen-model", cmd_gen_model, "write a GGUF MoE model with random weights"},
    {"sim", cmd_sim, "replay an expert-routing trace through a cache policy"},
    {"trace", cmd_trace, "trace tools: heatmap, filter, concat, stats"},
    {"serve", cmd_serve, "OpenAI-compatible HTTP server (completions, chat, metrics)"},
    {"chat", cmd_chat, "interactive chat in the terminal"},
    {"fit", cmd_fit, "will a model run here, and how fast: sizes and predicted tokens/s"},
};

static void usage(FILE *out) {
    fprintf(out, "usage: moeinf COMMAND [OPTIONS]   (moeinf COMMAND --help for its options)\n"
                 "       moeinf --version\n\n");
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++) {
        fprintf(out, "  %-10s %s\n", commands[i].name, commands[i].summary);
    }
    fprintf(out, "\nWith no -m, run, bench, chat and serve use the embedded default model (a "
                 "small\ntrained MoE, written on first use to $XDG_CACHE_HOME/moeinf, else "
                 "~/.cache/moeinf).\n"
                 "Exit codes: 0 success, 1 a bad file or a runtime failure, 2 a bad option or "
                 "value.\n");
}

int main(int argc, char **argv) {
    if (argc < 2) {
        usage(stderr);
        return CLI_EXIT_USAGE;
    }
    if (!strcmp(argv[1], "help") && argc > 2) { /* moeinf help COMMAND = COMMAND --help */
        for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++) {
            if (!strcmp(argv[2], commands[i].name)) {
                char help[] = "--help";
                char *help_argv[] = {argv[2], help, NULL};
                return commands[i].fn(2, help_argv);
            }
        }
        fprintf(stderr, "moeinf: unknown command '%s'\n", argv[2]);
        usage(stderr);
        return CLI_EXIT_USAGE;
    }
    if (!strcmp(argv[1], "--version") || !strcmp(argv[1], "-V")) {
        printf("moeinf %s\n", moeinf_version());
        return CLI_EXIT_OK;
    }
    if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") || !strcmp(argv[1], "help")) {
        usage(stdout);
        return CLI_EXIT_OK;
    }
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++) {
        if (!strcmp(argv[1], commands[i].name)) return commands[i].fn(argc - 1, argv + 1);
    }
    fprintf(stderr, "moeinf: unknown command '%s'\n", argv[1]);
    usage(stderr);
    return CLI_EXIT_USAGE;
}
