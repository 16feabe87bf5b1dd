/*
 * gen_types.h - the tensor types of `moeinf gen-model --type` by name, for the command line
 * (gen_types.c, over the generator's table in src/gen/quant_mix.h).
 */
#ifndef MOEINF_APP_GEN_TYPES_H
#define MOEINF_APP_GEN_TYPES_H

#include <stdint.h>

/* The moeinf_gen_params.type of a --type name ("q4_k", "q4_k_m", ...), or -1. */
int cli_gen_type_by_name(const char *name);

/* The --type name of a type or mix, or "unknown". */
const char *cli_gen_type_name(int type);

/* Every name cli_gen_type_by_name knows, for messages: "f32, f16, ...". */
const char *cli_gen_type_names(void);

/* A GGML tensor type's name ("q4_K"), and the bytes of a row of n weights of it (gen-model
 * --list). */
const char *cli_tensor_type_name(int type);
uint64_t cli_tensor_row_bytes(int type, int64_t n);

#endif
