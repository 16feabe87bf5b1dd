/*
 * gguf_writer.h - streaming writer of GGUF v3 files (little-endian; layout in gguf.h).
 *
 * Use:
 *   struct moeinf_gguf_writer *w;
 *   moeinf_gguf_writer_open(path, 0, &w, err);          // temp file next to path
 *   moeinf_gguf_writer_add_str(w, "general.architecture", "llama");
 *   ... more add_* (metadata), then add_tensor for every tensor, in file order ...
 *   moeinf_gguf_writer_write(w, bytes, n, err);          // tensor data, in order, any chunking
 *   moeinf_gguf_writer_finish(w, err);                   // renames over path
 *   moeinf_gguf_writer_free(w);                          // always; removes an unfinished file
 *
 * Metadata and tensor infos are kept in memory (they are small) and written, with the
 * padding to the alignment, by the first moeinf_gguf_writer_write (or by finish when there
 * are no tensors). Tensor data is streamed straight to the file: the writer pads each tensor
 * to the alignment when its last byte arrives, so the caller never holds more than a chunk.
 * The file appears at `path` only when finish succeeds (moeinf_atomic_open/commit): a failed
 * or abandoned write leaves nothing behind.
 *
 * Errors are sticky: after the first failure every call returns the same status (and
 * message) without doing anything, so a sequence of add_* calls may be checked once, at the
 * next write or at finish. Numeric values are passed as host values and written little-endian.
 * Not thread-safe: one writer is driven by one thread.
 */
#ifndef MOEINF_GGUF_WRITER_H
#define MOEINF_GGUF_WRITER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "gguf/gguf.h"
#include "moeinf.h"

struct moeinf_gguf_writer;

/* Starts a file; alignment 0 means the GGUF default (32), otherwise a power of two, which is
 * also written as general.alignment. */
enum moeinf_status moeinf_gguf_writer_open(const char *path, uint32_t alignment,
                                           struct moeinf_gguf_writer **out,
                                           struct moeinf_error *err);
/* Removes the temporary file unless finish succeeded. Accepts NULL. */
void moeinf_gguf_writer_free(struct moeinf_gguf_writer *w);

/* Metadata. Keys must be unique (MOEINF_ERR_ARG otherwise); strings are NUL-terminated. */
enum moeinf_status moeinf_gguf_writer_add_u32(struct moeinf_gguf_writer *w, const char *key,
                                              uint32_t v, struct moeinf_error *err);
enum moeinf_status moeinf_gguf_writer_add_i32(struct moeinf_gguf_writer *w, const char *key,
                                              int32_t v, struct moeinf_error *err);
enum moeinf_status moeinf_gguf_writer_add_u64(struct moeinf_gguf_writer *w, const char *key,
                                              uint64_t v, struct moeinf_error *err);
enum moeinf_status moeinf_gguf_writer_add_f32(struct moeinf_gguf_writer *w, const char *key,
                                              float v, struct moeinf_error *err);
enum moeinf_status moeinf_gguf_writer_add_bool(struct moeinf_gguf_writer *w, const char *key,
                                               bool v, struct moeinf_error *err);
enum moeinf_status moeinf_gguf_writer_add_str(struct moeinf_gguf_writer *w, const char *key,
                                              const char *v, struct moeinf_error *err);
/* Any scalar value type except STRING/ARRAY: `v` points to one host value of that type
 * (uint8_t for BOOL). */
enum moeinf_status moeinf_gguf_writer_add_scalar(struct moeinf_gguf_writer *w, const char *key,
                                                 enum moeinf_gguf_type type, const void *v,
                                                 struct moeinf_error *err);
/* An array of n host values of a scalar element type (not STRING, not ARRAY). */
enum moeinf_status moeinf_gguf_writer_add_arr(struct moeinf_gguf_writer *w, const char *key,
                                              enum moeinf_gguf_type elem_type, const void *data,
                                              uint64_t n, struct moeinf_error *err);
/* An array of n strings; lens may be NULL (then strs are NUL-terminated). */
enum moeinf_status moeinf_gguf_writer_add_arr_str(struct moeinf_gguf_writer *w, const char *key,
                                                  const char *const *strs, const size_t *lens,
                                                  uint64_t n, struct moeinf_error *err);
/* Copies an entry read by the reader (any type, arrays included), under its own key. */
enum moeinf_status moeinf_gguf_writer_add_kv(struct moeinf_gguf_writer *w,
                                             const struct moeinf_gguf_kv *kv,
                                             struct moeinf_error *err);

/*
 * Declares the next tensor: ggml type id, n_dims (1..4) and ne (innermost first). The shape
 * is checked like the reader checks it (positive dims, ne[0] a multiple of the type's block,
 * no overflow), names are unique and at most 127 bytes. All tensors are declared before the
 * first write. Returns MOEINF_ERR_ARG for a bad declaration.
 */
enum moeinf_status moeinf_gguf_writer_add_tensor(struct moeinf_gguf_writer *w, const char *name,
                                                 int type, int n_dims, const int64_t *ne,
                                                 struct moeinf_error *err);
/* Bytes of a declared tensor's data (0 if index out of range). */
uint64_t moeinf_gguf_writer_tensor_bytes(const struct moeinf_gguf_writer *w, uint64_t index);

/* Appends n bytes of tensor data (the tensors' data in declaration order, concatenated; a
 * call may span tensors). Writing more than was declared is MOEINF_ERR_ARG. */
enum moeinf_status moeinf_gguf_writer_write(struct moeinf_gguf_writer *w, const void *data,
                                            size_t n, struct moeinf_error *err);
/* Checks that every tensor's data was written, then flushes, syncs and renames the file
 * into place. */
enum moeinf_status moeinf_gguf_writer_finish(struct moeinf_gguf_writer *w,
                                             struct moeinf_error *err);
/* Finishes a file of the header, metadata and tensor table only, no tensor data (what
 * moeinf_gguf_open_header reads): no data may have been written. */
enum moeinf_status moeinf_gguf_writer_finish_header(struct moeinf_gguf_writer *w,
                                                    struct moeinf_error *err);

#endif
