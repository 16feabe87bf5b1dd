/*
 * test_exports.c - the library boundary: libmoeinf.so defines exactly the functions that the
 * public headers (include/moeinf.h, include/moeinf_sim.h) declare with MOEINF_API, and no
 * data, and every function they declare is marked so. The symbols come from `nm -D --defined-only`
 * on the shared library CMake built
 * ($MOEINF_SHARED_LIB); the declarations from the headers' text. Without nm the test skips.
 */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "moeinf.h"
#include "test.h"

#define MAX_NAMES 512
#define NAME_LEN  96

struct names {
    char name[MAX_NAMES][NAME_LEN];
    int n;
};

static bool has(const struct names *s, const char *name) {
    for (int i = 0; i < s->n; i++)
        if (!strcmp(s->name[i], name)) return true;
    return false;
}

static void add(struct names *s, const char *name, size_t len) {
    CHECK(s->n < MAX_NAMES && len < NAME_LEN);
    if (s->n >= MAX_NAMES || len >= NAME_LEN) return;
    memcpy(s->name[s->n], name, len);
    s->name[s->n][len] = '\0';
    if (!has(s, s->name[s->n])) s->n++;
}

/* Every "MOEINF_API <type> name(" of a header: the identifier before the first '(' of the
 * declaration, which may span lines. */
static void declared_in(const char *rel, struct names *out) {
    char path[1024];
    test_src_path(rel, path, sizeof path);
    FILE *f = fopen(path, "r");
    CHECK_MSG(f != NULL, "cannot read %s", path);
    if (!f) return;
    char line[512];
    char decl[2048] = "";
    bool in_decl = false;
    while (fgets(line, sizeof line, f)) {
        /* a declaration that starts a line without the mark would be hidden in the .so */
        const bool starts_decl = !in_decl && islower((unsigned char)line[0]) &&
                                 strncmp(line, "static", 6) != 0 && strstr(line, "moeinf_") &&
                                 strchr(line, '(');
        CHECK_MSG(!starts_decl, "%s declares without MOEINF_API: %s", rel, line);
        if (!in_decl && strncmp(line, "MOEINF_API ", 11) != 0) continue;
        if (!in_decl) decl[0] = '\0';
        in_decl = true;
        strncat(decl, line, sizeof decl - strlen(decl) - 1);
        const char *paren = strchr(decl, '(');
        if (!paren) continue;
        const char *end = paren;
        while (end > decl && isspace((unsigned char)end[-1]))
            end--;
        const char *start = end;
        while (start > decl && (isalnum((unsigned char)start[-1]) || start[-1] == '_'))
            start--;
        add(out, start, (size_t)(end - start));
        in_decl = false;
    }
    fclose(f);
}

static void test_exports_are_the_public_api(void) {
    const char *lib = getenv("MOEINF_SHARED_LIB"); // NOLINT(concurrency-mt-unsafe): one thread
    if (!lib || !*lib) {
        test_skip("MOEINF_SHARED_LIB is not set (ctest sets it)");
        return;
    }
    struct names *declared = calloc(1, sizeof *declared);
    struct names *exported = calloc(1, sizeof *exported);
    if (!declared || !exported) goto done;
    declared_in("include/moeinf.h", declared);
    declared_in("include/moeinf_sim.h", declared);
    CHECK(declared->n > 40); /* the parse found the API, not nothing */
    char cmd[1200];
    snprintf(cmd, sizeof cmd, "nm -D --defined-only '%s' 2>/dev/null", lib);
    FILE *p = popen(cmd, "r");
    char line[512];
    int n_lines = 0;
    while (p && fgets(line, sizeof line, p)) {
        char addr[64];
        char kind[8];
        char name[NAME_LEN];
        if (sscanf(line, "%63s %7s %95s", addr, kind, name) != 3) continue;
        n_lines++;
        /* the toolchain's own (__bss_start, _init, __asan_*...) start with '_' */
        if (name[0] == '_') continue;
        CHECK_MSG(!strcmp(kind, "T"), "%s is exported as '%s', not a function", name, kind);
        add(exported, name, strlen(name));
    }
    int rc = p ? pclose(p) : -1;
    if (rc != 0 || n_lines == 0) {
        test_skip("nm -D is not available here");
        goto done;
    }
    for (int i = 0; i < exported->n; i++)
        CHECK_MSG(has(declared, exported->name[i]), "%s is exported but not declared MOEINF_API",
                  exported->name[i]);
    for (int i = 0; i < declared->n; i++)
        CHECK_MSG(has(exported, declared->name[i]), "%s is declared MOEINF_API but not exported",
                  declared->name[i]);
    fprintf(stderr, "  %d functions declared, %d exported\n", declared->n, exported->n);
done:
    free(declared);
    free(exported);
}

/* moeinf_version() and the version macros agree. */
static void test_version(void) {
    char want[64];
    snprintf(want, sizeof want, "%d.%d.%d", MOEINF_VERSION_MAJOR, MOEINF_VERSION_MINOR,
             MOEINF_VERSION_PATCH);
    CHECK_MSG(!strcmp(moeinf_version(), want), "moeinf_version() %s, macros %s", moeinf_version(),
              want);
}

int main(void) {
    RUN(test_exports_are_the_public_api);
    RUN(test_version);
    return test_report();
}
