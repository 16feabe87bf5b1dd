/*
 * gguf_types.h - what the GGUF reader and writer need to know about ggml tensor types:
 * the name, the elements per block and the bytes per block of every ggml type id.
 *
 * This is deliberately a small table of facts kept inside the gguf module, so that reading
 * a file does not depend on the quant module (which also knows how to compute with the
 * types). A type listed here is "known": a file using it opens, even if nothing in moeinf
 * can multiply with it; an id that ggml never assigned or has removed is "unknown" and makes
 * the file malformed.
 */
#ifndef MOEINF_GGUF_TYPES_H
#define MOEINF_GGUF_TYPES_H

#include <stddef.h>
#include <stdint.h>

/* ggml type ids are below this (ggml's GGML_TYPE_COUNT at the reference commit). */
#define MOEINF_GGUF_N_TENSOR_TYPES 42

struct moeinf_gguf_type_info {
    const char *name;   /* ggml's name: "f32", "q4_0", "q4_K", ... */
    int64_t block_size; /* elements per block */
    size_t type_size;   /* bytes per block */
};

/* The facts of a ggml type id, or NULL if the id is not a ggml type (negative, removed, or
 * past the table). */
const struct moeinf_gguf_type_info *moeinf_gguf_type_info_get(int type);

/* Name of a ggml type id, or "unknown". Never NULL. */
const char *moeinf_gguf_type_name(int type);

#endif
