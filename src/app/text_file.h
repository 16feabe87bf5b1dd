/* text_file.h - the text of -f/--file FILE (tokenize, run, logits, bench), read whole. */
#ifndef MOEINF_APP_TEXT_FILE_H
#define MOEINF_APP_TEXT_FILE_H

#include <stddef.h>

#include "moeinf.h"

/*
 * Reads the whole of path ("-": standard input) into *text (malloc'ed, NUL-terminated; the
 * caller frees it), its length in *len; bytes are taken as they are (NUL bytes included), but
 * one final "\n" is dropped, as llama.cpp's -f does (a file saved by an editor ends in one).
 * Any file that can be read once works: a pipe, a FIFO, /dev/stdin. MOEINF_ERR_IO naming the
 * path (MOEINF_ERR_NOMEM when it does not fit in memory).
 */
enum moeinf_status cli_read_text_file(const char *path, char **text, size_t *len,
                                      struct moeinf_error *err);

/* The help line of -f/--file. */
#define TEXT_FILE_HELP "read the text from FILE (- for standard input; one final newline dropped)"

#endif
