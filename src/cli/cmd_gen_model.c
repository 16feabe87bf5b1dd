/* cmd_gen_model.c - placeholder until this subcommand lands. */
#include <stdio.h>

#include "cli/cli.h"

int cmd_gen_model(int argc, char **argv) {
    (void)argc;
    (void)argv;
    fprintf(stderr, "moeinf: 'gen_model' is not built yet\n");
    return CLI_EXIT_FAIL;
}
