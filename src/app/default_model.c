/*
 * default_model.c - the embedded default model: the trained MoE of tools/train
 * (models/trained-moe-Q8_0.gguf), compiled into the binary by CMake (cmake/embed_file.cmake)
 * and written to the cache folder on first use, so that it is mapped like any model file
 * (default_model.h). CMake builds the data into moeinf_app next to this file.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "app/default_model.h"
#include "app/output.h"
#include "app/interrupt.h"

/* Generated at build time (build/<preset>/generated/default_model_data.c). */
extern const unsigned char moeinf_default_model[];
extern const size_t moeinf_default_model_size;

/* Creates dir (one level: its parent must exist) with `mode` unless it is already a folder. */
static bool make_dir(const char *dir, mode_t mode, struct moeinf_error *err) {
    struct stat st;
    if (mkdir(dir, mode) == 0 || (errno == EEXIST && stat(dir, &st) == 0 && S_ISDIR(st.st_mode))) {
        return true;
    }
    const char *why = "a file of that name exists";
    /* NOLINTNEXTLINE(concurrency-mt-unsafe): only the main thread reports errors */
    if (errno != EEXIST) why = strerror(errno);
    snprintf(err->msg, sizeof err->msg, "%s: cannot create the folder: %s", dir, why);
    err->status = MOEINF_ERR_IO;
    return false;
}

/*
 * The cache folder, as the XDG base directory rules say: $XDG_CACHE_HOME when it is an
 * absolute path, else $HOME/.cache. HOME must be an existing folder: a missing or unset
 * HOME is refused rather than replaced by a shared folder such as /tmp, or created.
 */
bool cli_cache_dir(char *dir, size_t size, struct moeinf_error *err) {
    /* NOLINTNEXTLINE(concurrency-mt-unsafe): moeinf never calls setenv */
    const char *xdg = getenv("XDG_CACHE_HOME");
    if (xdg && xdg[0] == '/') {
        if (!make_dir(xdg, 0700, err)) return false;
        snprintf(dir, size, "%s/moeinf", xdg);
        return make_dir(dir, 0755, err);
    }
    const char *home = getenv("HOME"); // NOLINT(concurrency-mt-unsafe): as above
    const char *hint = "give -m MODEL, or set MOEINF_DEFAULT_MODEL or XDG_CACHE_HOME";
    struct stat st;
    if (!home || !*home) {
        snprintf(err->msg, sizeof err->msg,
                 "HOME is not set, so the default model has no folder: %s", hint);
        err->status = MOEINF_ERR_IO;
        return false;
    }
    if (stat(home, &st) != 0 || !S_ISDIR(st.st_mode)) {
        snprintf(err->msg, sizeof err->msg, "HOME=%s is not an existing folder: %s", home, hint);
        err->status = MOEINF_ERR_IO;
        return false;
    }
    char base[1024];
    snprintf(base, sizeof base, "%s/.cache", home);
    if (!make_dir(base, 0700, err)) return false;
    snprintf(dir, size, "%s/moeinf", base);
    return make_dir(dir, 0755, err);
}

/* FNV-1a (64 bits) of the embedded bytes: it names the cached file, so that a binary with
 * another default model never takes an older file (such as the random model earlier versions
 * wrote) for its own. */
static uint64_t embedded_hash(void) {
    uint64_t h = 0xcbf29ce484222325u;
    for (size_t i = 0; i < moeinf_default_model_size; i++) {
        h = (h ^ moeinf_default_model[i]) * 0x100000001b3u;
    }
    return h;
}

bool cli_default_model(char *buf, size_t size, struct moeinf_error *err) {
    /* NOLINTNEXTLINE(concurrency-mt-unsafe): moeinf never calls setenv */
    const char *env = getenv("MOEINF_DEFAULT_MODEL");
    struct stat st;
    if (env && *env) {
        snprintf(buf, size, "%s", env);
        if (stat(buf, &st) == 0) return true; /* the user's file, whatever it holds */
    } else {
        char dir[1024];
        if (!cli_cache_dir(dir, sizeof dir, err)) return false;
        snprintf(buf, size, "%s/default-moe-%016" PRIx64 ".gguf", dir, embedded_hash());
        /* A file of another size is not ours (a write cut short cannot leave one: it is
         * renamed into place only when complete): write it again. */
        if (stat(buf, &st) == 0 && S_ISREG(st.st_mode) &&
            (uint64_t)st.st_size == (uint64_t)moeinf_default_model_size) {
            return true;
        }
    }
    fprintf(stderr, "moeinf: writing the default model to %s (first use)\n", buf);
    cli_remove_on_signal(buf);
    bool ok = moeinf_file_write_atomic(buf, moeinf_default_model, moeinf_default_model_size, err) ==
              MOEINF_OK;
    cli_remove_on_signal(NULL);
    return ok;
}
