/* cmd_tokenize.c - moeinf tokenize -m MODEL TEXT: one line of token ids. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"

static void usage(FILE *out) {
    fprintf(out, "usage: moeinf tokenize -m MODEL TEXT\n\n"
                 "Prints the token ids of TEXT on one line, separated by single spaces.\n"
                 "TEXT is taken literally (text that spells a special token stays text); BOS\n"
                 "is included iff the model's metadata asks for it. Only the vocabulary is\n"
                 "read: any architecture, and vocabulary-only GGUFs, work.\n");
}

int cmd_tokenize(int argc, char **argv) {
    const char *model_path = NULL;
    const char *text = NULL;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage(stdout);
            return CLI_EXIT_OK;
        }
        if (!strcmp(a, "-m") || !strcmp(a, "--model")) {
            if (!(model_path = cli_option_value("tokenize", argc, argv, &i))) return CLI_EXIT_USAGE;
            continue;
        }
        if (text || (a[0] == '-' && a[1] != '\0')) {
            fprintf(stderr, "moeinf tokenize: %s '%s'\n",
                    text ? "unexpected argument" : "unknown option", a);
            usage(stderr);
            return CLI_EXIT_USAGE;
        }
        text = a;
    }
    if (!model_path || !text) {
        usage(stderr);
        return CLI_EXIT_USAGE;
    }
    struct moeinf_error err = {0};
    struct moeinf_model *model = NULL;
    struct moeinf_model_params mp = moeinf_model_params_default();
    mp.vocab_only = true; /* the weights are not needed to tokenize */
    if (moeinf_model_load(model_path, &mp, &model, &err) != MOEINF_OK) return cli_fail(&err);
    int32_t *ids = NULL;
    size_t n = 0;
    if (moeinf_tokenize(model, text, strlen(text), true, false, &ids, &n, &err) != MOEINF_OK) {
        moeinf_model_free(model);
        return cli_fail(&err);
    }
    for (size_t i = 0; i < n; i++)
        printf(i ? " %d" : "%d", ids[i]);
    printf("\n");
    free(ids);
    moeinf_model_free(model);
    return CLI_EXIT_OK;
}
