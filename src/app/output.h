/*
 * output.h - the files the programs write (logits, traces, SVGs, EAMC files, the default
 * model): checked before the work and written atomically by the library's own writer
 * (base/file.h: moeinf_file_check_output, moeinf_file_temp_path, moeinf_file_write_atomic),
 * which libmoeinf.so does not export. The programs include this header for it.
 */
#ifndef MOEINF_APP_OUTPUT_H
#define MOEINF_APP_OUTPUT_H

#include "base/file.h"

#endif
