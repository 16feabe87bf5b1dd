/*
 * file.h - the slow tier's primitives: read-only mappings, positioned reads, and atomic
 * replacement of state files and outputs (temp file + fsync + rename + fsync of the
 * directory).
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
    int fd;    /* kept open for pread of the slow tier; -1 when closed */
    bool read; /* MOEINF_MAP_READ: data is moeinf_huge_alloc's */
};

enum moeinf_map_mode {
    MOEINF_MAP_FILE = 0, /* mmap of the file: pages come from the page cache on first touch */
    MOEINF_MAP_READ = 1, /* read once into anonymous memory (huge pages where the kernel can) */
    /* MOEINF_MAP_FILE without readahead, for a file read in parts (an offloaded model: its
     * metadata through the mapping, its weights by pread): a fault reads only its page and a
     * pread only its range (MADV_RANDOM, POSIX_FADV_RANDOM), so that nothing around them,
     * above all no expert, lands in the page cache after the loader has dropped it. */
    MOEINF_MAP_FILE_RANDOM = 2,
};

/*
 * Opens an input file for reading and checks that it is a regular file: a directory, pipe,
 * FIFO or device is refused with a message naming what it is. The open does not block, so a
 * FIFO without a writer is refused instead of hanging. *size_out (may be NULL) gets the size.
 */
enum moeinf_status moeinf_file_open_regular(const char *path, int *fd_out, uint64_t *size_out,
                                            struct moeinf_error *err);
/* The same, as a stdio stream ("rb"). */
enum moeinf_status moeinf_file_fopen_regular(const char *path, FILE **out,
                                             struct moeinf_error *err);

/* Progress of a long read (a model load): fn(user, bytes read, bytes the read will take),
 * from the reading thread; fn NULL: none. */
struct moeinf_progress {
    void (*fn)(void *user, uint64_t done, uint64_t total);
    void *user;
};

static inline void moeinf_progress_report(const struct moeinf_progress *p, uint64_t done,
                                          uint64_t total) {
    if (p && p->fn) p->fn(p->user, done, total);
}

enum moeinf_status moeinf_file_map(const char *path, struct moeinf_mapping *out,
                                   struct moeinf_error *err);
/* MOEINF_MAP_READ reads the file in chunks, reporting each to progress (may be NULL). */
enum moeinf_status moeinf_file_map_mode(const char *path, enum moeinf_map_mode mode,
                                        const struct moeinf_progress *progress,
                                        struct moeinf_mapping *out, struct moeinf_error *err);
void moeinf_file_unmap(struct moeinf_mapping *m);

/* Memory for weights that decode streams (resident copies, expert cache slots): anonymous,
 * 2 MiB-aligned, with transparent huge pages asked for (a hint; fewer TLB misses than the
 * file's 4 KiB page cache pages: docs/PERFORMANCE.md, 2026-12-02, loading). NULL when out of
 * memory (size 0 too). Free with moeinf_huge_free(p, size). */
void *moeinf_huge_alloc(size_t size);
void moeinf_huge_free(void *p, size_t size);

/* Reads exactly n bytes at offset (retrying short reads). */
enum moeinf_status moeinf_file_pread(int fd, void *buf, size_t n, uint64_t offset, const char *what,
                                     struct moeinf_error *err);

/*
 * Atomic writer: moeinf_atomic_open creates "<path>.tmp.<pid>"; write through the FILE*;
 * moeinf_atomic_commit flushes, fsyncs, renames over path and fsyncs the directory;
 * moeinf_atomic_abort removes the temp file. Either commit or abort must be called.
 * Only a regular file (or a new path) is replaced this way; a symbolic link to a regular file
 * keeps its link (the file it names is replaced). An existing character device or FIFO
 * (/dev/null, a named pipe with a reader) is written in place, with nothing to rename; a
 * directory, block device or socket is refused, and so is an existing file this process may
 * not write (access W_OK), which the rename could otherwise replace.
 */
struct moeinf_atomic_file {
    FILE *fp;
    char *path;     /* the file replaced (or written in place) */
    char *tmp_path; /* NULL when writing in place */
};

enum moeinf_status moeinf_atomic_open(const char *path, struct moeinf_atomic_file *out,
                                      struct moeinf_error *err);
enum moeinf_status moeinf_atomic_commit(struct moeinf_atomic_file *f, struct moeinf_error *err);
void moeinf_atomic_abort(struct moeinf_atomic_file *f);

/*
 * Files moeinf writes (gen-model, traces, heatmaps, EAMC files) replace a regular file (or
 * create a new one) atomically: they are written to "<path>.tmp.<pid>" and renamed over path
 * only when complete. A character device or FIFO (/dev/null, a named pipe) is written in
 * place instead; a directory, block device or socket is refused.
 */

/* Checks, before any work, that an output can be written at path: a new or regular file needs
 * an existing folder it may write in, and an existing file must be writable by this process
 * (access W_OK: the rename must not replace a file the user could not write in place); a
 * device or FIFO must be writable. MOEINF_ERR_IO with a line naming the path and the
 * problem. */
enum moeinf_status moeinf_file_check_output(const char *path, struct moeinf_error *err);

/* The temp file an atomic write of path by this process uses, into buf (truncated to size);
 * returns its full length. A front end that may be killed mid-write removes it in its signal
 * handler (unlink is async-signal-safe). */
size_t moeinf_file_temp_path(const char *path, char *buf, size_t size);

/* Writes size bytes to path atomically (the temp file above, fsync, rename over path, fsync of
 * the folder): readers see the old file or the whole new one, never a part. */
enum moeinf_status moeinf_file_write_atomic(const char *path, const void *data, size_t size,
                                            struct moeinf_error *err);

#endif
