/*
 * cli.h - the moeinf command line: one cmd_<name>.c per subcommand, table in main.c. The
 * helpers the commands share (option parsing, progress, signals, the default model) are in
 * src/app, the internal library the programs and the tests link; this header brings in the
 * ones every command uses. The CLI includes only the public headers moeinf.h and
 * moeinf_sim.h, src/app's headers and its own (plus serve/serve.h, the server it starts).
 *
 * Exit codes (app/args.h): 0 success; 1 bad file or runtime failure (one line
 * "moeinf: <msg>" on stderr); 2 bad option or value (usage on stderr).
 */
#ifndef MOEINF_CLI_H
#define MOEINF_CLI_H

#include "app/args.h"
#include "app/default_model.h"
#include "app/interrupt.h"
#include "app/output.h"
#include "app/progress.h"

int cmd_inspect(int argc, char **argv);
int cmd_gen_model(int argc, char **argv);
int cmd_tokenize(int argc, char **argv);
int cmd_logits(int argc, char **argv);
int cmd_run(int argc, char **argv);
int cmd_bench(int argc, char **argv);
int cmd_sim(int argc, char **argv);
int cmd_trace(int argc, char **argv);
int cmd_serve(int argc, char **argv);
int cmd_chat(int argc, char **argv);
int cmd_fit(int argc, char **argv);

/* gen-model's preset NAME (cmd_gen_model.c) in *p, over the defaults; false for an unknown
 * name. */
bool cli_gen_preset(const char *name, struct moeinf_gen_params *p);

#endif
