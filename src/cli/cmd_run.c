/* cmd_run.c - placeholder until this subcommand lands. */
#include <stdio.h>

#include "cli/cli.h"

int cmd_run(int argc, char **argv) {
    (void)argc;
    (void)argv;
    fprintf(stderr, "moeinf: 'run' is not built yet\n");
    return CLI_EXIT_FAIL;
}
