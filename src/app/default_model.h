/* default_model.h - the model embedded in the programs (default_model.c), used when no -m is
 * given. */
#ifndef MOEINF_APP_DEFAULT_MODEL_H
#define MOEINF_APP_DEFAULT_MODEL_H

#include <stdbool.h>
#include <stddef.h>

#include "moeinf.h"

/* The default model path, written into buf: $MOEINF_DEFAULT_MODEL, else
 * $XDG_CACHE_HOME/moeinf/default-moe-HASH.gguf, else $HOME/.cache/moeinf/default-moe-HASH.gguf
 * (HASH: of the embedded model; an unset or missing HOME is an error). A missing file (or a
 * cached one of the wrong size) is written from the model embedded in the binary. */
bool cli_default_model(char *buf, size_t size, struct moeinf_error *err);

/* The cache folder (created when missing): $XDG_CACHE_HOME/moeinf when XDG_CACHE_HOME is an
 * absolute path, else $HOME/.cache/moeinf. */
bool cli_cache_dir(char *dir, size_t size, struct moeinf_error *err);

#endif
