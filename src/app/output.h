/*
 * output.h - the files the programs write (logits, traces, SVGs, EAMC files, --stats-json, the
 * default model): checked before the work and written atomically by the library's own writer
 * (base/file.h: moeinf_file_check_output, moeinf_atomic_open, moeinf_file_temp_path,
 * moeinf_file_write_atomic), which libmoeinf.so does not export. The programs include this
 * header for it, and for the check of a command's outputs against its inputs (output.c).
 */
#ifndef MOEINF_APP_OUTPUT_H
#define MOEINF_APP_OUTPUT_H

#include <stdbool.h>

#include "base/file.h"

/* A file a command reads or writes, and the option that names it (for messages). A NULL path
 * is not given: skipped. */
struct cli_file {
    const char *opt;
    const char *path;
};

/* True when a and b name the same file: the same device and inode, or, for a path that does
 * not exist yet, the same folder (device and inode) and the same name. Devices and FIFOs
 * (written in place, and two outputs may share /dev/null) are never the same file here. */
bool cli_same_file(const char *a, const char *b);

/*
 * Checks a command's outputs before any work: each can be written (moeinf_file_check_output:
 * the folder, and an existing file writable by this process), none is one of the inputs
 * (`logits -m X -o X` would replace the model), and no two outputs are one file. Prints
 * "moeinf CMD: ..." and returns CLI_EXIT_USAGE for an output that is an input or another
 * output, "moeinf: ..." and CLI_EXIT_FAIL for an output that cannot be written; else
 * CLI_EXIT_OK.
 */
int cli_check_outputs(const char *cmd, const struct cli_file *outputs, int n_outputs,
                      const struct cli_file *inputs, int n_inputs);

#endif
