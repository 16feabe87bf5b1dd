/* memlimit.c - cgroup memory limits and MemAvailable (see memlimit.h). */
#include "base/memlimit.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/status.h"

/* A number (or "max") read from a one-line file; false when absent or unlimited. */
static bool read_limit(const char *path, uint64_t *out) {
    FILE *f = fopen(path, "r");
    if (!f) return false;
    char line[64] = {0};
    bool ok = fgets(line, sizeof line, f) != NULL;
    fclose(f);
    if (!ok || !strncmp(line, "max", 3)) return false;
    char *end;
    unsigned long long v = strtoull(line, &end, 10);
    if (end == line) return false;
    /* cgroup v1 writes "no limit" as a page-rounded LLONG_MAX */
    if (v >= (1ull << 62)) return false;
    *out = v;
    return true;
}

/* The smallest limit named `file` in `root`/`path` and its ancestors up to `root`. */
static bool tightest(const char *root, const char *path, const char *file, uint64_t *out,
                     char *source, size_t source_size) {
    char dir[4096];
    snprintf(dir, sizeof dir, "%s", path);
    bool found = false;
    for (;;) {
        char p[4200];
        snprintf(p, sizeof p, "%s%s/%s", root, strcmp(dir, "/") ? dir : "", file);
        uint64_t v;
        if (read_limit(p, &v) && (!found || v < *out)) {
            *out = v;
            found = true;
            snprintf(source, source_size, "%s", p);
        }
        char *slash = strrchr(dir, '/');
        if (!slash || !strcmp(dir, "/")) break;
        if (slash == dir) {
            dir[1] = '\0';
        } else {
            *slash = '\0';
        }
    }
    return found;
}

static bool cgroup_limit(uint64_t *out, char *source, size_t source_size) {
    FILE *f = fopen("/proc/self/cgroup", "r");
    if (!f) return false;
    char line[4096];
    bool found = false;
    while (fgets(line, sizeof line, f)) {
        line[strcspn(line, "\n")] = '\0';
        char *c1 = strchr(line, ':');
        char *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
        if (!c2) continue;
        *c2 = '\0';
        const char *controllers = c1 + 1;
        const char *path = c2 + 1;
        uint64_t v;
        char src[256];
        bool got = false;
        if (!strcmp(controllers, "memory")) {
            got = tightest("/sys/fs/cgroup/memory", path, "memory.limit_in_bytes", &v, src,
                           sizeof src);
        } else if (!strcmp(line, "0") && controllers[0] == '\0') {
            got = tightest("/sys/fs/cgroup", path, "memory.max", &v, src, sizeof src);
        }
        if (got && (!found || v < *out)) {
            *out = v;
            found = true;
            snprintf(source, source_size, "%s", src);
        }
    }
    fclose(f);
    return found;
}

static bool mem_available(uint64_t *out) {
    FILE *f = fopen("/proc/meminfo", "r");
    if (!f) return false;
    char line[256];
    bool found = false;
    static const char key[] = "MemAvailable:";
    while (fgets(line, sizeof line, f)) {
        if (strncmp(line, key, sizeof key - 1) != 0) continue;
        char *end;
        unsigned long long kb = strtoull(line + sizeof key - 1, &end, 10);
        if (end != line + sizeof key - 1) {
            *out = (uint64_t)kb * 1024u;
            found = true;
        }
        break;
    }
    fclose(f);
    return found;
}

/* MOEINF_MEMORY_LIMIT: 1 when set to a number of bytes (into *out), 0 when unset, -1 when
 * set to anything else. */
static int env_limit(uint64_t *out) {
    /* NOLINTNEXTLINE(concurrency-mt-unsafe): moeinf never calls setenv */
    const char *v = getenv("MOEINF_MEMORY_LIMIT");
    if (!v || !*v) return 0;
    char *end;
    unsigned long long n = strtoull(v, &end, 10);
    if (v[0] < '0' || v[0] > '9' || *end != '\0' || n == 0 || n >= (1ull << 62)) return -1;
    *out = n;
    return 1;
}

enum moeinf_status moeinf_memory_limit(uint64_t *limit, bool *from_cgroup, char *source,
                                       size_t source_size, struct moeinf_error *err) {
    uint64_t env = 0;
    int got_env = env_limit(&env);
    if (got_env < 0) {
        return moeinf_fail(err, MOEINF_ERR_ARG,
                           "MOEINF_MEMORY_LIMIT is not a number of bytes (1 or more)");
    }
    bool cg = cgroup_limit(limit, source, source_size);
    if (got_env && (!cg || env < *limit)) {
        *limit = env;
        snprintf(source, source_size, "MOEINF_MEMORY_LIMIT");
        cg = true; /* a hard limit on all the process holds, as a cgroup's */
    }
    if (cg) {
        *from_cgroup = true;
        return MOEINF_OK;
    }
    *from_cgroup = false;
    if (mem_available(limit)) {
        snprintf(source, source_size, "MemAvailable in /proc/meminfo");
        return MOEINF_OK;
    }
    return moeinf_fail(err, MOEINF_ERR_IO,
                       "cannot tell how much memory this process may use (no cgroup limit, "
                       "no /proc/meminfo): give expert_cache a size instead of auto");
}

bool moeinf_memory_room(uint64_t *bytes) {
    /* each stays "no bound" unless read */
    uint64_t cg = UINT64_MAX;
    uint64_t avail = UINT64_MAX;
    char source[300];
    bool have_cg = cgroup_limit(&cg, source, sizeof source);
    bool have_avail = mem_available(&avail);
    uint64_t env = UINT64_MAX;
    bool have_env = env_limit(&env) > 0;
    *bytes = cg < avail ? cg : avail;
    if (env < *bytes) *bytes = env;
    return have_cg || have_avail || have_env;
}

bool moeinf_load_fits(uint64_t file_bytes, uint64_t limit) {
    const uint64_t room = (uint64_t)512 << 20;
    if (file_bytes > limit) return false;
    return limit - file_bytes >= file_bytes / 8 + room;
}
