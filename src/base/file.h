/*
 * file.h - the slow tier's primitives: read-only mappings, positioned reads, and atomic
 * replacement of state files (temp file + fsync + rename + fsync of the directory).
 */
#ifndef MOEINF_BASE_FILE_H
#define MOEINF_BASE_FILE_H

#include <stddef.h>
#include <stdint.h>

#include "moeinf.h"

/* A whole file mapped read-only. data is NULL for an empty file. */
struct moeinf_mapping {
    const uint8_t *data;
    uint64_t size;
    int fd; /* kept open for pread of the slow tier; -1 when closed */
};

enum moeinf_map_mode {
    MOEINF_MAP_FILE = 0, /* mmap of the file: pages come from the page cache on first touch */
    MOEINF_MAP_READ = 1, /* read once into anonymous memory (huge pages where the kernel can) */
};

enum moeinf_status moeinf_file_map(const char *path, struct moeinf_mapping *out,
                                   struct moeinf_error *err);
enum moeinf_status moeinf_file_map_mode(const char *path, enum moeinf_map_mode mode,
                                        struct moeinf_mapping *out, struct moeinf_error *err);
void moeinf_file_unmap(struct moeinf_mapping *m);

/* Reads exactly n bytes at offset (retrying short reads). */
enum moeinf_status moeinf_file_pread(int fd, void *buf, size_t n, uint64_t offset,
                                     const char *what, struct moeinf_error *err);

/*
 * Atomic writer: moeinf_atomic_open creates "<path>.tmp.<pid>"; write through the FILE*;
 * moeinf_atomic_commit flushes, fsyncs, renames over path and fsyncs the directory;
 * moeinf_atomic_abort removes the temp file. Either commit or abort must be called.
 */
struct moeinf_atomic_file {
    FILE *fp;
    char *path;
    char *tmp_path;
};

enum moeinf_status moeinf_atomic_open(const char *path, struct moeinf_atomic_file *out,
                                      struct moeinf_error *err);
enum moeinf_status moeinf_atomic_commit(struct moeinf_atomic_file *f, struct moeinf_error *err);
void moeinf_atomic_abort(struct moeinf_atomic_file *f);

#endif
