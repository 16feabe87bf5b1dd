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

/*
 * Maps a whole file: read-only over the page cache (MOEINF_MAP_FILE), or copied once into
 * private anonymous memory (MOEINF_MAP_READ), which the kernel may back with huge pages:
 * fewer TLB misses when decode streams the weights, and no page faults after the load.
 */
enum moeinf_status moeinf_file_map_mode(const char *path, enum moeinf_map_mode mode,
                                        struct moeinf_mapping *out, struct moeinf_error *err) {
    char eb[64];
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return moeinf_fail(err, MOEINF_ERR_IO, "%s: %s", path,
                           moeinf_strerror(errno, eb, sizeof eb));
    struct stat st;
    if (fstat(fd, &st) != 0) {
        int e = errno;
        close(fd);
        return moeinf_fail(err, MOEINF_ERR_IO, "%s: %s", path, moeinf_strerror(e, eb, sizeof eb));
    }
    if (!S_ISREG(st.st_mode)) {
        close(fd);
        return moeinf_fail(err, MOEINF_ERR_IO, "%s: not a regular file", path);
    }
    const uint8_t *data = NULL;
    const size_t size = (size_t)st.st_size;
    if (size > 0) {
        void *p = mode == MOEINF_MAP_FILE
                      ? mmap(NULL, size, PROT_READ, MAP_SHARED, fd, 0)
                      : mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (p == MAP_FAILED) {
            int e = errno;
            close(fd);
            return moeinf_fail(err, e == ENOMEM ? MOEINF_ERR_NOMEM : MOEINF_ERR_IO,
                               "%s: mmap: %s", path, moeinf_strerror(e, eb, sizeof eb));
        }
        if (mode == MOEINF_MAP_READ) {
#ifdef MADV_HUGEPAGE
            (void)madvise(p, size, MADV_HUGEPAGE); /* a hint: refused where THP is off */
#endif
            enum moeinf_status rst = moeinf_file_pread(fd, p, size, 0, path, err);
            if (rst != MOEINF_OK) {
                munmap(p, size);
                close(fd);
                return rst;
            }
            (void)mprotect(p, size, PROT_READ); /* weights are read-only either way */
        }
        data = p;
    }
    out->data = data;
    out->size = (uint64_t)st.st_size;
    out->fd = fd;
    return MOEINF_OK;
}

enum moeinf_status moeinf_file_map(const char *path, struct moeinf_mapping *out,
                                   struct moeinf_error *err) {
    return moeinf_file_map_mode(path, MOEINF_MAP_FILE, out, err);
}

void moeinf_file_unmap(struct moeinf_mapping *m) {
    if (!m) return;
    if (m->data) munmap((void *)m->data, (size_t)m->size);
    if (m->fd >= 0) close(m->fd);
    m->data = NULL;
    m->size = 0;
    m->fd = -1;
}

enum moeinf_status moeinf_file_pread(int fd, void *buf, size_t n, uint64_t offset,
                                     const char *what, struct moeinf_error *err) {
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

enum moeinf_status moeinf_atomic_open(const char *path, struct moeinf_atomic_file *out,
                                      struct moeinf_error *err) {
    size_t n = strlen(path) + 32;
    char *tmp = malloc(n);
    char *dup = strdup(path);
    if (!tmp || !dup) {
        free(tmp);
        free(dup);
        return moeinf_fail(err, MOEINF_ERR_NOMEM, "%s: out of memory", path);
    }
    snprintf(tmp, n, "%s.tmp.%ld", path, (long)getpid());
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    FILE *fp = fd >= 0 ? fdopen(fd, "wb") : NULL;
    if (!fp) {
        int e = errno;
        char eb[64];
        if (fd >= 0) close(fd);
        free(tmp);
        free(dup);
        return moeinf_fail(err, MOEINF_ERR_IO, "%s: cannot create: %s", path,
                           moeinf_strerror(e, eb, sizeof eb));
    }
    out->fp = fp;
    out->path = dup;
    out->tmp_path = tmp;
    return MOEINF_OK;
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
    if (fsync(fileno(f->fp)) != 0) {
        failed = true;
        if (!e) e = errno;
    }
    if (fclose(f->fp) != 0) {
        failed = true;
        if (!e) e = errno;
    }
    f->fp = NULL;
    if (failed) {
        unlink(f->tmp_path);
        enum moeinf_status st = moeinf_fail(err, MOEINF_ERR_IO, "%s: write failed: %s", f->path,
                                            moeinf_strerror(e ? e : EIO, eb, sizeof eb));
        atomic_release(f);
        return st;
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
    if (!f || !f->tmp_path) return;
    if (f->fp) fclose(f->fp);
    unlink(f->tmp_path);
    atomic_release(f);
}
