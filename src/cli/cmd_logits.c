/* cmd_logits.c - placeholder until this subcommand lands. */
#include <stdio.h>

#include "cli/cli.h"

int cmd_logits(int argc, char **argv) {
    (void)argc;
    (void)argv;
    fprintf(stderr, "moeinf: 'logits' is not built yet\n");
    return CLI_EXIT_FAIL;
}
