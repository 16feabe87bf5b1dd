/*
 * grow.h - growing buffers for the programs (src/cli, src/serve): the library's own doubling
 * rule (base/grow.h: moeinf_grow, moeinf_text_append), which libmoeinf.so does not export.
 * The programs include this header for it, as they include app/output.h for base/file.h.
 */
#ifndef MOEINF_APP_GROW_H
#define MOEINF_APP_GROW_H

#include "base/grow.h"

#endif
