/* cmd_bench.c - placeholder until this subcommand lands. */
#include <stdio.h>

#include "cli/cli.h"

int cmd_bench(int argc, char **argv) {
    (void)argc;
    (void)argv;
    fprintf(stderr, "moeinf: 'bench' is not built yet\n");
    return CLI_EXIT_FAIL;
}
