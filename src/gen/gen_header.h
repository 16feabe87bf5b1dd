/*
 * gen_header.h - the header of the file gen-model would write (gen_model.c): its metadata and
 * tensor table without the tensor data, for `moeinf fit` on a geometry (src/app/fit.c).
 * Internal: libmoeinf.so does not export it.
 */
#ifndef MOEINF_GEN_HEADER_H
#define MOEINF_GEN_HEADER_H

#include "moeinf.h"

/* Writes what moeinf_gen_model would write to `path` up to the end of the tensor table (the
 * padding to the data section included), and no tensor data: a file that
 * moeinf_gguf_open_header reads (gguf/gguf.h). Errors as moeinf_gen_model's. */
enum moeinf_status moeinf_gen_model_header(const struct moeinf_gen_params *p, const char *path,
                                           struct moeinf_error *err);

#endif
