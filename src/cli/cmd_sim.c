/* cmd_sim.c - placeholder until this subcommand lands. */
#include <stdio.h>

#include "cli/cli.h"

int cmd_sim(int argc, char **argv) {
    (void)argc;
    (void)argv;
    fprintf(stderr, "moeinf: 'sim' is not built yet\n");
    return CLI_EXIT_FAIL;
}
