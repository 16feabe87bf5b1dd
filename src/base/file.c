/* file.c - read-only mappings, positioned reads and atomic file replacement. */
#include "base/file.h"

#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/status.h"

/* What a file that is not a regular file is, for messages. */
static const char *file_kind(mode_t mode) {
    if (S_ISDIR(mode)) return "a directory";
    if (S_ISFIFO(mode)) return "a pipe or FIFO";
    if (S_ISCHR(mode)) return "a character device";
    if (S_ISBLK(mode)) return "a block device";
    if (S_ISSOCK(mode)) return "a socket";
    return "not a regular file";
}

enum moeinf_status moeinf_file_open_regular(const char *path, int *fd_out, uint64_t *size_out,
                                            struct moeinf_error *err) {
    char eb[64];
    /* O_NONBLOCK: opening a FIFO for reading would otherwise wait for a writer, before the
     * check below could refuse it. It changes nothing for regular files, but is cleared. */
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0)
        return moeinf_fail(err, MOEINF_ERR_IO, "%s: cannot open: %s", path,
                           moeinf_strerror(errno, eb, sizeof eb));
    struct stat st;
    if (fstat(fd, &st) != 0) {
        int e = errno;
        close(fd);
        return moeinf_fail(err, MOEINF_ERR_IO, "%s: %s", path, moeinf_strerror(e, eb, sizeof eb));
    }
    if (!S_ISREG(st.st_mode)) {
        close(fd);
        return moeinf_fail(err, MOEINF_ERR_IO,
                           "%s: %s, not a regular file (inputs are mapped or read more than "
                           "once: save a stream to a file first)",
                           path, file_kind(st.st_mode));
    }
    int flags = fcntl(fd, F_GETFL);
    if (flags >= 0) (void)fcntl(fd, F_SETFL, flags & ~O_NONBLOCK);
    *fd_out = fd;
    if (size_out) *size_out = (uint64_t)st.st_size;
    return MOEINF_OK;
}

enum moeinf_status moeinf_file_fopen_regular(const char *path, FILE **out,
                                             struct moeinf_error *err) {
    int fd = -1;
    enum moeinf_status st = moeinf_file_open_regular(path, &fd, NULL, err);
    if (st != MOEINF_OK) return st;
    FILE *f = fdopen(fd, "rb");
    if (!f) {
        char eb[64];
        int e = errno;
        close(fd);
        return moeinf_fail(err, e == ENOMEM ? MOEINF_ERR_NOMEM : MOEINF_ERR_IO, "%s: %s", path,
                           moeinf_strerror(e, eb, sizeof eb));
    }
    *out = f;
    return MOEINF_OK;
}

/*
 * Maps a whole file: read-only over the page cache (MOEINF_MAP_FILE), or copied once into
 * private anonymous memory (MOEINF_MAP_READ), which the kernel may back with huge pages:
 * fewer TLB misses when decode streams the weights, and no page faults after the load.
 */
enum moeinf_status moeinf_file_map_mode(const char *path, enum moeinf_map_mode mode,
                                        const struct moeinf_progress *progress,
                                        struct moeinf_mapping *out, struct moeinf_error *err) {
    char eb[64];
    int fd = -1;
    uint64_t file_size = 0;
    enum moeinf_status ost = moeinf_file_open_regular(path, &fd, &file_size, err);
    if (ost != MOEINF_OK) return ost;
    const uint8_t *data = NULL;
    const size_t size = (size_t)file_size;
    if (size > 0) {
        void *p = mode != MOEINF_MAP_READ ? mmap(NULL, size, PROT_READ, MAP_SHARED, fd, 0)
                                          : moeinf_huge_alloc(size);
        if (!p) {
            close(fd);
            return moeinf_fail(err, MOEINF_ERR_NOMEM, "%s: out of memory reading %llu bytes", path,
                               (unsigned long long)size);
        }
        if (p == MAP_FAILED) {
            int e = errno;
            close(fd);
            return moeinf_fail(err, e == ENOMEM ? MOEINF_ERR_NOMEM : MOEINF_ERR_IO, "%s: mmap: %s",
                               path, moeinf_strerror(e, eb, sizeof eb));
        }
        if (mode == MOEINF_MAP_FILE_RANDOM) {
            /* hints: where refused, the reads are only larger */
            (void)madvise(p, size, MADV_RANDOM);
            (void)posix_fadvise(fd, 0, 0, POSIX_FADV_RANDOM);
        }
        if (mode == MOEINF_MAP_READ) {
            /* in chunks, so that a long read can report its progress */
            const size_t chunk = (size_t)64 << 20;
            enum moeinf_status rst = MOEINF_OK;
            for (size_t at = 0; rst == MOEINF_OK && at < size; at += chunk) {
                size_t n = size - at < chunk ? size - at : chunk;
                rst = moeinf_file_pread(fd, (uint8_t *)p + at, n, at, path, err);
                if (rst == MOEINF_OK) moeinf_progress_report(progress, at + n, size);
            }
            if (rst != MOEINF_OK) {
                moeinf_huge_free(p, size);
                close(fd);
                return rst;
            }
            (void)mprotect(p, size, PROT_READ); /* weights are read-only either way */
        }
        data = p;
    }
    out->data = data;
    out->size = file_size;
    out->fd = fd;
    out->read = mode == MOEINF_MAP_READ && data != NULL;
    return MOEINF_OK;
}

#define HUGE_PAGE ((size_t)2 << 20)

/* The mapping is taken 2 MiB larger than asked and trimmed to a 2 MiB boundary at both ends,
 * so that the kernel can back all of it with huge pages. */
void *moeinf_huge_alloc(size_t size) {
    if (size == 0 || size > SIZE_MAX - 2 * HUGE_PAGE) return NULL;
    const size_t len = (size + HUGE_PAGE - 1) & ~(HUGE_PAGE - 1);
    uint8_t *raw =
        mmap(NULL, len + HUGE_PAGE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (raw == MAP_FAILED) return NULL;
    const uintptr_t at = ((uintptr_t)raw + HUGE_PAGE - 1) & ~(uintptr_t)(HUGE_PAGE - 1);
    uint8_t *p = raw + (at - (uintptr_t)raw);
    if (p > raw) munmap(raw, (size_t)(p - raw));
    const size_t tail = (size_t)(raw + len + HUGE_PAGE - (p + len));
    if (tail > 0) munmap(p + len, tail);
#ifdef MADV_HUGEPAGE
    (void)madvise(p, len, MADV_HUGEPAGE); /* a hint: refused where THP is off */
#endif
    return p;
}

void moeinf_huge_free(void *p, size_t size) {
    if (!p) return;
    munmap(p, (size + HUGE_PAGE - 1) & ~(HUGE_PAGE - 1));
}

enum moeinf_status moeinf_file_map(const char *path, struct moeinf_mapping *out,
                                   struct moeinf_error *err) {
    return moeinf_file_map_mode(path, MOEINF_MAP_FILE, NULL, out, err);
}

void moeinf_file_unmap(struct moeinf_mapping *m) {
    if (!m) return;
    if (m->data && m->read) {
        moeinf_huge_free((void *)m->data, (size_t)m->size);
    } else if (m->data) {
        munmap((void *)m->data, (size_t)m->size);
    }
    if (m->fd >= 0) close(m->fd);
    m->data = NULL;
    m->size = 0;
    m->fd = -1;
}

enum moeinf_status moeinf_file_pread(int fd, void *buf, size_t n, uint64_t offset, const char *what,
                                     struct moeinf_error *err) {
    char eb[64];
    uint8_t *p = buf;
    while (n > 0) {
        ssize_t r = pread(fd, p, n, (off_t)offset);
        if (r < 0) {
            if (errno == EINTR) continue;
            return moeinf_fail(err, MOEINF_ERR_IO, "%s: read: %s", what,
                               moeinf_strerror(errno, eb, sizeof eb));
        }
        if (r == 0) return moeinf_fail(err, MOEINF_ERR_IO, "%s: unexpected end of file", what);
        p += r;
        n -= (size_t)r;
        offset += (uint64_t)r;
    }
    return MOEINF_OK;
}

static void atomic_release(struct moeinf_atomic_file *f) {
    free(f->path);
    free(f->tmp_path);
    f->path = NULL;
    f->tmp_path = NULL;
    f->fp = NULL;
}

/* The regular file an atomic write replaces: path itself, or the file a symbolic link names
 * (so that the link stays a link). malloc'ed; NULL when out of memory. */
static char *replace_target(const char *path) {
    struct stat lst;
    if (lstat(path, &lst) == 0 && S_ISLNK(lst.st_mode)) {
        char *real = realpath(path, NULL);
        if (real) return real;
    }
    return strdup(path);
}

size_t moeinf_file_temp_path(const char *path, char *buf, size_t size) {
    char *target = replace_target(path);
    int n = snprintf(buf, size, "%s.tmp.%ld", target ? target : path, (long)getpid());
    free(target);
    return n < 0 ? 0 : (size_t)n;
}

/* Opens an existing character device or FIFO for writing in place. */
static enum moeinf_status open_in_place(const char *path, struct moeinf_atomic_file *out,
                                        struct moeinf_error *err) {
    char eb[64];
    /* O_NONBLOCK: a FIFO without a reader fails at once (ENXIO) instead of hanging. */
    int fd = open(path, O_WRONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) {
        if (errno == ENXIO)
            return moeinf_fail(err, MOEINF_ERR_IO, "%s: a FIFO with no reader", path);
        return moeinf_fail(err, MOEINF_ERR_IO, "%s: cannot write: %s", path,
                           moeinf_strerror(errno, eb, sizeof eb));
    }
    int flags = fcntl(fd, F_GETFL);
    if (flags >= 0) (void)fcntl(fd, F_SETFL, flags & ~O_NONBLOCK);
    FILE *fp = fdopen(fd, "wb");
    char *dup = fp ? strdup(path) : NULL;
    if (!fp || !dup) {
        if (fp) {
            fclose(fp);
        } else {
            close(fd);
        }
        return moeinf_fail(err, MOEINF_ERR_NOMEM, "%s: out of memory", path);
    }
    out->fp = fp;
    out->path = dup;
    out->tmp_path = NULL;
    return MOEINF_OK;
}

enum moeinf_status moeinf_atomic_open(const char *path, struct moeinf_atomic_file *out,
                                      struct moeinf_error *err) {
    struct stat st;
    if (stat(path, &st) == 0 && !S_ISREG(st.st_mode)) {
        if (S_ISCHR(st.st_mode) || S_ISFIFO(st.st_mode)) return open_in_place(path, out, err);
        return moeinf_fail(err, MOEINF_ERR_IO, "%s: %s, not a regular file: cannot write there",
                           path, file_kind(st.st_mode));
    }
    /* An existing file the user may not write is not replaced, though the folder would let
     * the rename do it. */
    if (stat(path, &st) == 0 && access(path, W_OK) != 0) {
        char eb[64];
        return moeinf_fail(err, MOEINF_ERR_IO, "%s: cannot write: %s", path,
                           moeinf_strerror(errno, eb, sizeof eb));
    }
    char *target = replace_target(path);
    size_t n = (target ? strlen(target) : 0) + 32;
    char *tmp = target ? malloc(n) : NULL;
    if (!tmp) {
        free(target);
        return moeinf_fail(err, MOEINF_ERR_NOMEM, "%s: out of memory", path);
    }
    snprintf(tmp, n, "%s.tmp.%ld", target, (long)getpid());
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    FILE *fp = fd >= 0 ? fdopen(fd, "wb") : NULL;
    if (!fp) {
        int e = errno;
        char eb[64];
        if (fd >= 0) {
            close(fd);
            unlink(tmp);
        }
        free(tmp);
        free(target);
        return moeinf_fail(err, MOEINF_ERR_IO, "%s: cannot create: %s", path,
                           moeinf_strerror(e, eb, sizeof eb));
    }
    out->fp = fp;
    out->path = target;
    out->tmp_path = tmp;
    return MOEINF_OK;
}

enum moeinf_status moeinf_file_check_output(const char *path, struct moeinf_error *err) {
    char eb[64];
    struct stat st;
    if (!*path) return moeinf_fail(err, MOEINF_ERR_IO, "an empty output path");
    if (stat(path, &st) == 0) {
        if (S_ISCHR(st.st_mode) || S_ISFIFO(st.st_mode)) { /* written in place */
            if (access(path, W_OK) != 0)
                return moeinf_fail(err, MOEINF_ERR_IO, "%s: cannot write: %s", path,
                                   moeinf_strerror(errno, eb, sizeof eb));
            return MOEINF_OK;
        }
        if (!S_ISREG(st.st_mode))
            return moeinf_fail(err, MOEINF_ERR_IO, "%s: %s, not a regular file: cannot write there",
                               path, file_kind(st.st_mode));
        /* The rename could replace a file the user may not write (the folder's permission is
         * enough for it): refused, as writing in place would be. */
        if (access(path, W_OK) != 0)
            return moeinf_fail(err, MOEINF_ERR_IO, "%s: cannot write: %s", path,
                               moeinf_strerror(errno, eb, sizeof eb));
    } else if (errno != ENOENT) {
        return moeinf_fail(err, MOEINF_ERR_IO, "%s: %s", path,
                           moeinf_strerror(errno, eb, sizeof eb));
    }
    /* A new or replaced regular file is created in its folder, then renamed there. */
    char *dir = replace_target(path);
    if (!dir) return moeinf_fail(err, MOEINF_ERR_NOMEM, "%s: out of memory", path);
    char *slash = strrchr(dir, '/');
    const char *d = dir;
    if (!slash) {
        d = ".";
    } else if (slash == dir) {
        slash[1] = '\0';
    } else {
        *slash = '\0';
    }
    enum moeinf_status rc = MOEINF_OK;
    if (stat(d, &st) != 0) {
        rc = moeinf_fail(err, MOEINF_ERR_IO, "%s: folder %s: %s", path, d,
                         moeinf_strerror(errno, eb, sizeof eb));
    } else if (!S_ISDIR(st.st_mode)) {
        rc = moeinf_fail(err, MOEINF_ERR_IO, "%s: %s is not a folder", path, d);
    } else if (access(d, W_OK | X_OK) != 0) {
        rc = moeinf_fail(err, MOEINF_ERR_IO, "%s: cannot write in folder %s: %s", path, d,
                         moeinf_strerror(errno, eb, sizeof eb));
    }
    free(dir);
    return rc;
}

static void fsync_parent_dir(const char *path) {
    char *copy = strdup(path);
    if (!copy) return;
    /* The folder part by hand: dirname() may return static storage (not thread-safe). */
    char *slash = strrchr(copy, '/');
    const char *dir = copy;
    if (!slash) {
        dir = ".";
    } else if (slash == copy) {
        slash[1] = '\0'; /* "/name" -> "/" */
    } else {
        *slash = '\0';
    }
    int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd >= 0) {
        (void)fsync(dfd); /* best effort: some filesystems refuse fsync on directories */
        close(dfd);
    }
    free(copy);
}

enum moeinf_status moeinf_atomic_commit(struct moeinf_atomic_file *f, struct moeinf_error *err) {
    char eb[64];
    /* The first failing call's errno names the problem; errno is read only after a failure
     * (a successful call may leave a stale value there). */
    int e = 0;
    bool failed = ferror(f->fp) != 0;
    if (fflush(f->fp) != 0) failed = true, e = errno;
    /* A device or FIFO written in place has nothing to sync or rename. */
    if (f->tmp_path && fsync(fileno(f->fp)) != 0) {
        failed = true;
        if (!e) e = errno;
    }
    if (fclose(f->fp) != 0) {
        failed = true;
        if (!e) e = errno;
    }
    f->fp = NULL;
    if (failed) {
        if (f->tmp_path) unlink(f->tmp_path);
        enum moeinf_status st = moeinf_fail(err, MOEINF_ERR_IO, "%s: write failed: %s", f->path,
                                            moeinf_strerror(e ? e : EIO, eb, sizeof eb));
        atomic_release(f);
        return st;
    }
    if (!f->tmp_path) {
        atomic_release(f);
        return MOEINF_OK;
    }
    if (rename(f->tmp_path, f->path) != 0) {
        e = errno;
        unlink(f->tmp_path);
        enum moeinf_status st = moeinf_fail(err, MOEINF_ERR_IO, "%s: rename failed: %s", f->path,
                                            moeinf_strerror(e, eb, sizeof eb));
        atomic_release(f);
        return st;
    }
    fsync_parent_dir(f->path);
    atomic_release(f);
    return MOEINF_OK;
}

void moeinf_atomic_abort(struct moeinf_atomic_file *f) {
    if (!f || !f->path) return;
    if (f->fp) fclose(f->fp);
    if (f->tmp_path) unlink(f->tmp_path);
    atomic_release(f);
}

enum moeinf_status moeinf_file_write_atomic(const char *path, const void *data, size_t size,
                                            struct moeinf_error *err) {
    struct moeinf_atomic_file f = {0};
    enum moeinf_status st = moeinf_atomic_open(path, &f, err);
    if (st != MOEINF_OK) return st;
    if (size && fwrite(data, 1, size, f.fp) != size) {
        moeinf_atomic_abort(&f);
        return moeinf_fail(err, MOEINF_ERR_IO, "%s: write failed", path);
    }
    return moeinf_atomic_commit(&f, err);
}
