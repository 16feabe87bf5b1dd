/*
 * tensor_type.h - the ggml tensor types: the type ids GGUF files store, and the one table of
 * their facts (name, elements per block, bytes per block).
 *
 * One table serves the whole tree, as ggml's type_traits does: the GGUF reader and writer
 * need block sizes to bound and place tensor data, the kernels need them to walk rows. It
 * lives in base so that reading a file does not depend on the compute code; what only the
 * CPU kernels know about a type (whether moeinf computes with it, its activation partner)
 * is quant's own table keyed by the same ids (quant/quant.h, moeinf_type_cpu_get).
 *
 * A type listed here is "known": a file using it opens, even if nothing in moeinf can
 * multiply with it yet; an id that ggml never assigned or has removed is "unknown" and makes
 * the file malformed.
 *
 * DESIGN: the traits are in layers, one table per layer, each indexed by the type id, as
 * ggml splits type_traits (ggml.c) from type_traits_cpu (ggml-cpu.c):
 *   1. facts (here): name and block geometry; what reading and writing GGUF needs;
 *   2. CPU traits (quant/quant_types.c): activation partner and reference quantizer;
 *   3. kernels: one table per instruction set (quant/kernels.c, quant/kernels_x86.h), one
 *      MOEINF_KERNELS_ENTRY line per type (from_float, to_float, vec_dot, vec_dot_m,
 *      vec_dot_rows together).
 * Adding a type is one entry in each layer it reaches (a type with no kernels only layer 1);
 * no switch elsewhere names types. One table for all three was not chosen: the GGUF reader
 * would then depend on the compute code, and the kernels differ per instruction set anyway.
 */
#ifndef MOEINF_BASE_TENSOR_TYPE_H
#define MOEINF_BASE_TENSOR_TYPE_H

#include <stddef.h>
#include <stdint.h>

/* ggml type ids (ggml.h's enum ggml_type), as stored in GGUF tensor infos. Ids 4, 5, 31-33
 * and 36-38 were removed from ggml and from GGUF files. */
enum moeinf_type {
    MOEINF_TYPE_F32 = 0,
    MOEINF_TYPE_F16 = 1,
    MOEINF_TYPE_Q4_0 = 2,
    MOEINF_TYPE_Q4_1 = 3,
    MOEINF_TYPE_Q5_0 = 6,
    MOEINF_TYPE_Q5_1 = 7,
    MOEINF_TYPE_Q8_0 = 8,
    MOEINF_TYPE_Q8_1 = 9,
    MOEINF_TYPE_Q2_K = 10,
    MOEINF_TYPE_Q3_K = 11,
    MOEINF_TYPE_Q4_K = 12,
    MOEINF_TYPE_Q5_K = 13,
    MOEINF_TYPE_Q6_K = 14,
    MOEINF_TYPE_Q8_K = 15,
    MOEINF_TYPE_IQ2_XXS = 16,
    MOEINF_TYPE_IQ2_XS = 17,
    MOEINF_TYPE_IQ3_XXS = 18,
    MOEINF_TYPE_IQ1_S = 19,
    MOEINF_TYPE_IQ4_NL = 20,
    MOEINF_TYPE_IQ3_S = 21,
    MOEINF_TYPE_IQ2_S = 22,
    MOEINF_TYPE_IQ4_XS = 23,
    MOEINF_TYPE_I8 = 24,
    MOEINF_TYPE_I16 = 25,
    MOEINF_TYPE_I32 = 26,
    MOEINF_TYPE_I64 = 27,
    MOEINF_TYPE_F64 = 28,
    MOEINF_TYPE_IQ1_M = 29,
    MOEINF_TYPE_BF16 = 30,
    MOEINF_TYPE_TQ1_0 = 34,
    MOEINF_TYPE_TQ2_0 = 35,
    MOEINF_TYPE_MXFP4 = 39,
    MOEINF_TYPE_NVFP4 = 40,
    MOEINF_TYPE_Q1_0 = 41,
    MOEINF_TYPE_COUNT = 42 /* table size (ggml's GGML_TYPE_COUNT); ids >= this are unknown */
};

struct moeinf_type_traits {
    const char *name;   /* ggml's name: "f32", "q4_0", "q4_K", ... */
    int64_t block_size; /* elements per block */
    size_t type_size;   /* bytes per block */
};

/* The facts of a ggml type id, or NULL if the id is not a known ggml type (negative, removed,
 * never assigned, or past the table). */
const struct moeinf_type_traits *moeinf_type_traits_get(int type);

/* Name of a ggml type id, or "unknown". Never NULL. */
const char *moeinf_type_name(int type);

/* Bytes of a row of n elements of a known type (n must be a multiple of the block size);
 * 0 for an unknown type or a negative n. */
size_t moeinf_row_bytes(enum moeinf_type type, int64_t n);

#endif
