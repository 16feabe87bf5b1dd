/*
 * inspect.h - `moeinf inspect`: a GGUF file printed as text (inspect.c). In src/app, the
 * internal library of the programs and tests; libmoeinf.so does not export it.
 */
#ifndef MOEINF_APP_INSPECT_H
#define MOEINF_APP_INSPECT_H

#include <stdio.h>

#include "moeinf.h"

struct moeinf_gguf;

/* Prints the metadata and tensor table of the GGUF file at path to out. */
enum moeinf_status moeinf_inspect(const char *path, FILE *out, struct moeinf_error *err);

/* Prints an open file's header line, metadata (strings cut at 64 bytes, arrays at 6
 * elements) and tensor table to out. */
void moeinf_gguf_print(const struct moeinf_gguf *g, FILE *out);

#endif
