/* cmd_inspect.c - placeholder until this subcommand lands. */
#include <stdio.h>

#include "cli/cli.h"

int cmd_inspect(int argc, char **argv) {
    (void)argc;
    (void)argv;
    fprintf(stderr, "moeinf: 'inspect' is not built yet\n");
    return CLI_EXIT_FAIL;
}
