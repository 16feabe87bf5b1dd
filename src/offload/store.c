/* store.c - expert extents in the model file and reads into slots (see store.h). */
#include "offload/store.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "base/file.h"
#include "base/status.h"

struct moeinf_store {
    char *path;
    int fd; /* O_DIRECT when direct, else buffered */
    bool direct;
    bool page_cache; /* buffered reads left in the page cache (else dropped after each read) */
    char note[160];
    uint64_t file_size;
    int n_layers, n_experts, n_slots;
    struct moeinf_store_layer *layers;    /* (n_layers) */
    uint64_t region[MOEINF_EXPERT_PARTS]; /* bytes of each part's region in a slot */
    uint64_t region_off[MOEINF_EXPERT_PARTS];
    uint64_t slot_bytes;
    const struct moeinf_fast_tier *fast; /* borrowed: the slots reads land in */
    uint32_t *skew;                      /* (n_slots x parts) the part's offset inside its window */
};

static uint64_t align_down(uint64_t x) {
    return x & ~(uint64_t)(MOEINF_STORE_ALIGN - 1);
}

static uint64_t align_up(uint64_t x) {
    return align_down(x + MOEINF_STORE_ALIGN - 1);
}

static uint64_t part_off(const struct moeinf_store_layer *l, int p, int e) {
    return l->off[p] + (uint64_t)e * l->stride[p];
}

uint64_t moeinf_store_part_window(const struct moeinf_store_layer *l, int p, int e, uint64_t *len) {
    const uint64_t off = part_off(l, p, e);
    *len = align_up(off + l->bytes[p]) - align_down(off);
    return align_down(off);
}

/* The largest 4 KiB window of part p over every expert of every layer. */
static uint64_t region_bytes(const struct moeinf_store_layer *layers, int n_layers, int n_experts,
                             int p) {
    uint64_t most = 0;
    for (int il = 0; il < n_layers; il++) {
        for (int e = 0; e < n_experts; e++) {
            uint64_t w = 0;
            (void)moeinf_store_part_window(&layers[il], p, e, &w);
            if (w > most) most = w;
        }
    }
    return most;
}

uint64_t moeinf_store_slot_bytes_for(const struct moeinf_store_layer *layers, int n_layers,
                                     int n_experts) {
    uint64_t total = 0;
    for (int p = 0; p < MOEINF_EXPERT_PARTS; p++)
        total += region_bytes(layers, n_layers, n_experts, p);
    return total;
}

/* O_DIRECT needs an aligned buffer, offset and length; a file system that refuses it fails
 * the open (tmpfs) or the first read (some FUSE and network file systems): try both. */
static bool try_direct(struct moeinf_store *s) {
    char eb[64];
    int fd = open(s->path, O_RDONLY | O_CLOEXEC | O_DIRECT);
    if (fd < 0) {
        snprintf(s->note, sizeof s->note,
                 "O_DIRECT refused by the file system (%s): buffered reads without readahead, "
                 "dropped from the page cache",
                 moeinf_strerror(errno, eb, sizeof eb));
        return false;
    }
    void *buf = aligned_alloc(MOEINF_STORE_ALIGN, MOEINF_STORE_ALIGN);
    ssize_t r = buf ? pread(fd, buf, MOEINF_STORE_ALIGN, 0) : -1;
    int e = errno;
    free(buf);
    if (r < 0) {
        close(fd);
        snprintf(s->note, sizeof s->note,
                 "O_DIRECT reads fail here (%s): buffered reads without readahead, dropped from "
                 "the page cache",
                 moeinf_strerror(e, eb, sizeof eb));
        return false;
    }
    s->fd = fd;
    snprintf(s->note, sizeof s->note, "O_DIRECT reads (the page cache does not hold experts)");
    return true;
}

enum moeinf_status moeinf_store_open(const char *path, const struct moeinf_store_layer *layers,
                                     int n_layers, int n_experts,
                                     const struct moeinf_fast_tier *fast, enum moeinf_expert_io io,
                                     struct moeinf_store **out, struct moeinf_error *err) {
    char eb[64];
    const int n_slots = fast->n_slots;
    if (n_layers < 1 || n_experts < 1 || n_slots < 1) {
        return moeinf_fail(err, MOEINF_ERR_ARG, "%s: expert store needs layers, experts, slots",
                           path);
    }
    struct moeinf_store *s = calloc(1, sizeof *s);
    if (!s) return moeinf_fail(err, MOEINF_ERR_NOMEM, "%s: out of memory", path);
    s->fd = -1;
    s->n_layers = n_layers;
    s->n_experts = n_experts;
    s->n_slots = n_slots;
    s->fast = fast;
    s->path = strdup(path);
    s->layers = malloc((size_t)n_layers * sizeof *s->layers);
    if (!s->path || !s->layers) {
        moeinf_store_free(s);
        return moeinf_fail(err, MOEINF_ERR_NOMEM, "%s: out of memory", path);
    }
    memcpy(s->layers, layers, (size_t)n_layers * sizeof *layers);
    s->page_cache = io == MOEINF_EXPERT_IO_CACHED;
    if (s->page_cache) {
        snprintf(s->note, sizeof s->note,
                 "buffered reads kept in the page cache (not counted by the budget)");
    } else if (io == MOEINF_EXPERT_IO_NOCACHE) {
        snprintf(s->note, sizeof s->note,
                 "buffered reads without readahead, dropped from the page cache (expert_io "
                 "nocache)");
    }
    if (io != MOEINF_EXPERT_IO_DIRECT || !try_direct(s)) {
        s->fd = open(path, O_RDONLY | O_CLOEXEC);
        if (s->fd < 0) {
            int e = errno;
            moeinf_store_free(s);
            return moeinf_fail(err, MOEINF_ERR_IO, "%s: %s", path,
                               moeinf_strerror(e, eb, sizeof eb));
        }
        /* Readahead would fill the page cache with the neighbours of each part (up to the
         * device's read_ahead_kb), which the drop after each read does not cover: this fd
         * reads only what is asked. A hint: where it is refused the drop still runs. */
        if (!s->page_cache) (void)posix_fadvise(s->fd, 0, 0, POSIX_FADV_RANDOM);
    } else {
        s->direct = true;
    }
    struct stat st;
    if (fstat(s->fd, &st) != 0) {
        int e = errno;
        moeinf_store_free(s);
        return moeinf_fail(err, MOEINF_ERR_IO, "%s: %s", path, moeinf_strerror(e, eb, sizeof eb));
    }
    s->file_size = (uint64_t)st.st_size;
    for (int il = 0; il < n_layers; il++) {
        for (int p = 0; p < MOEINF_EXPERT_PARTS; p++) {
            uint64_t end = part_off(&layers[il], p, n_experts - 1) + layers[il].bytes[p];
            if (end > s->file_size) {
                moeinf_store_free(s);
                return moeinf_fail(err, MOEINF_ERR_FORMAT,
                                   "%s: experts of layer %d end at byte %llu, past the end of "
                                   "the file (%llu bytes)",
                                   path, il, (unsigned long long)end,
                                   (unsigned long long)st.st_size);
            }
        }
    }
    uint64_t off = 0;
    for (int p = 0; p < MOEINF_EXPERT_PARTS; p++) {
        s->region[p] = region_bytes(layers, n_layers, n_experts, p);
        s->region_off[p] = off;
        off += s->region[p];
    }
    s->slot_bytes = off;
    if (off > fast->slot_bytes) {
        moeinf_store_free(s);
        return moeinf_fail(err, MOEINF_ERR_ARG,
                           "%s: an expert needs %llu bytes of slot but the slots hold %llu", path,
                           (unsigned long long)off, (unsigned long long)fast->slot_bytes);
    }
    s->skew = calloc((size_t)n_slots * MOEINF_EXPERT_PARTS, sizeof *s->skew);
    if (!s->skew) {
        moeinf_store_free(s);
        return moeinf_fail(err, MOEINF_ERR_NOMEM, "%s: out of memory", path);
    }
    *out = s;
    return MOEINF_OK;
}

void moeinf_store_free(struct moeinf_store *s) {
    if (!s) return;
    if (s->fd >= 0) close(s->fd);
    free(s->path);
    free(s->layers);
    free(s->skew);
    free(s);
}

int moeinf_store_n_slots(const struct moeinf_store *s) {
    return s->n_slots;
}

bool moeinf_store_direct(const struct moeinf_store *s) {
    return s->direct;
}

const char *moeinf_store_note(const struct moeinf_store *s) {
    return s->note[0] ? s->note : NULL;
}

/* Reads [off, off + n) into buf, accepting a short read only past `need` bytes (the end of
 * the file inside an O_DIRECT window). Returns the bytes read, or -1 with errno set; errno 0
 * means the file ended before `need`. */
static int64_t read_window(int fd, uint8_t *buf, uint64_t n, uint64_t off, uint64_t need) {
    uint64_t got = 0;
    while (got < n) {
        ssize_t r = pread(fd, buf + got, (size_t)(n - got), (off_t)(off + got));
        if (r < 0) {
            if (errno == EINTR) continue;
            return -1;
        }
        if (r == 0) break;
        got += (uint64_t)r;
    }
    if (got < need) {
        errno = 0;
        return -1;
    }
    return (int64_t)got;
}

static uint64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

enum moeinf_status moeinf_store_load_part(struct moeinf_store *s, int slot, int layer, int expert,
                                          int part, struct moeinf_store_counters *counters,
                                          struct moeinf_error *err) {
    char eb[64];
    const struct moeinf_store_layer *l = &s->layers[layer];
    uint8_t *base = moeinf_fast_tier_slot(s->fast, slot);
    uint64_t t0 = now_ns();
    uint64_t off = part_off(l, part, expert);
    uint64_t window = 0;
    const uint64_t window_start = moeinf_store_part_window(l, part, expert, &window);
    uint64_t start = s->direct ? window_start : off;
    uint64_t skew = off - start;
    uint64_t n = s->direct ? window : l->bytes[part];
    uint8_t *dst = base + s->region_off[part] + (s->direct ? 0 : (off - window_start));
    int64_t got = read_window(s->fd, dst, n, start, skew + l->bytes[part]);
    if (got < 0) {
        int e = errno;
        if (e == 0) {
            return moeinf_fail(err, MOEINF_ERR_IO,
                               "%s: short read of expert %d of layer %d at byte %llu: the "
                               "file is shorter than when it was opened",
                               s->path, expert, layer, (unsigned long long)off);
        }
        return moeinf_fail(err, MOEINF_ERR_IO, "%s: reading expert %d of layer %d: %s", s->path,
                           expert, layer, moeinf_strerror(e, eb, sizeof eb));
    }
    if (!s->direct && !s->page_cache) {
        /* DONTNEED drops only the whole pages inside its range: the part's page-aligned
         * window, so that its first and last pages go too (a neighbour read at once by
         * another thread only reads those again). */
        (void)posix_fadvise(s->fd, (off_t)window_start, (off_t)window, POSIX_FADV_DONTNEED);
    }
    s->skew[(size_t)slot * MOEINF_EXPERT_PARTS + (size_t)part] = (uint32_t)(off - window_start);
    counters->bytes += (uint64_t)got;
    counters->part_bytes += l->bytes[part];
    counters->read_ns += now_ns() - t0;
    return MOEINF_OK;
}

void moeinf_store_counters_add(struct moeinf_store_counters *to,
                               const struct moeinf_store_counters *from) {
    to->loads += from->loads;
    to->bytes += from->bytes;
    to->part_bytes += from->part_bytes;
    to->read_ns += from->read_ns;
}

const uint8_t *moeinf_store_part(const struct moeinf_store *s, int slot, int part) {
    return moeinf_fast_tier_slot(s->fast, slot) + s->region_off[part] +
           s->skew[(size_t)slot * MOEINF_EXPERT_PARTS + (size_t)part];
}
