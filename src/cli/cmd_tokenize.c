/* cmd_tokenize.c - moeinf tokenize -m MODEL (TEXT | -f FILE): one line of token ids. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "app/text_file.h"
#include "cli/cli.h"

static void usage(FILE *out) {
    fprintf(out, "usage: moeinf tokenize -m MODEL TEXT\n"
                 "       moeinf tokenize -m MODEL -f FILE\n\n"
                 "Prints the token ids of TEXT on one line, separated by single spaces.\n"
                 "TEXT is taken literally (text that spells a special token stays text); BOS\n"
                 "is included iff the model's metadata asks for it. Only the vocabulary is\n"
                 "read: any architecture, and vocabulary-only GGUFs, work.\n"
                 "  -f, --file FILE  the text of FILE, whole and as it is (- for standard\n"
                 "                   input; one final newline dropped, as llama.cpp's -f does)\n"
                 "  -                as TEXT: standard input, as -f - (to tokenize the text\n"
                 "                   \"-\", write -- -)\n"
                 "  --               ends the options: the next argument is TEXT as written,\n"
                 "                   even when it starts with - (e.g. -- -5)\n");
}

int cmd_tokenize(int argc, char **argv) {
    const char *model_path = NULL;
    const char *text = NULL;
    const char *file = NULL;
    bool options = true; /* until -- */
    int sources = 0;     /* TEXT, -f FILE and - given */
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (options && (!strcmp(a, "--help") || !strcmp(a, "-h"))) {
            usage(stdout);
            return CLI_EXIT_OK;
        }
        if (options && !strcmp(a, "--")) {
            options = false;
            continue;
        }
        if (options && (!strcmp(a, "-m") || !strcmp(a, "--model"))) {
            if (!(model_path = cli_option_value("tokenize", argc, argv, &i))) return CLI_EXIT_USAGE;
            continue;
        }
        if (options && (!strcmp(a, "-f") || !strcmp(a, "--file"))) {
            if (!(file = cli_option_value("tokenize", argc, argv, &i))) return CLI_EXIT_USAGE;
            sources++;
            continue;
        }
        if (options && !strcmp(a, "-")) { /* before --: standard input, as -f - */
            file = a;
            sources++;
            continue;
        }
        if (text || (options && a[0] == '-')) {
            fprintf(stderr, "moeinf tokenize: %s '%s'%s\n",
                    text ? "unexpected argument" : "unknown option", a,
                    text ? "" : " (write -- before a TEXT that starts with -)");
            usage(stderr);
            return CLI_EXIT_USAGE;
        }
        text = a;
        sources++;
    }
    if (sources > 1) {
        fprintf(stderr, "moeinf tokenize: give the text once: TEXT, -f FILE or - (standard "
                        "input)\n");
        return CLI_EXIT_USAGE;
    }
    if (!model_path || (!text && !file)) {
        usage(stderr);
        return CLI_EXIT_USAGE;
    }
    struct moeinf_error err = {0};
    char *buf = NULL;
    size_t len = text ? strlen(text) : 0;
    if (file) {
        if (cli_read_text_file(file, &buf, &len, &err) != MOEINF_OK) return cli_fail(&err);
        text = buf;
    }
    struct moeinf_model *model = NULL;
    struct moeinf_model_params mp = moeinf_model_params_default();
    mp.vocab_only = true; /* the weights are not needed to tokenize */
    int32_t *ids = NULL;
    size_t n = 0;
    int rc = CLI_EXIT_OK;
    if (moeinf_model_load(model_path, &mp, &model, &err) != MOEINF_OK ||
        moeinf_tokenize(model, text, len, true, false, &ids, &n, &err) != MOEINF_OK) {
        rc = cli_fail(&err);
    } else {
        for (size_t i = 0; i < n; i++)
            printf(i ? " %d" : "%d", ids[i]);
        printf("\n");
    }
    free(ids);
    free(buf);
    moeinf_model_free(model);
    return rc;
}
