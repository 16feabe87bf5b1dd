/* cmd_tokenize.c - placeholder until this subcommand lands. */
#include <stdio.h>

#include "cli/cli.h"

int cmd_tokenize(int argc, char **argv) {
    (void)argc;
    (void)argv;
    fprintf(stderr, "moeinf: 'tokenize' is not built yet\n");
    return CLI_EXIT_FAIL;
}
