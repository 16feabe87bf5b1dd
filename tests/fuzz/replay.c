/*
 * replay.c - the main of a fuzz target outside libFuzzer builds (see fuzz.h): runs
 * LLVMFuzzerTestOneInput once over every file named on the command line or found in a
 * folder named there (in name order, so that a failure is reproducible), then prints how many
 * inputs it ran. No input at all is a failure, so an empty or misplaced corpus cannot pass.
 */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "fuzz.h"

/* Runs the target over one file; returns 0 if it could be read. */
static int run_file(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "replay: cannot open %s\n", path);
        return -1;
    }
    size_t cap = 4096;
    size_t n = 0;
    uint8_t *buf = malloc(cap);
    while (buf) {
        n += fread(buf + n, 1, cap - n, f);
        if (n < cap) break;
        uint8_t *p = realloc(buf, 2 * cap);
        if (!p) {
            free(buf);
            buf = NULL;
            break;
        }
        buf = p;
        cap *= 2;
    }
    int bad = ferror(f) || !buf;
    fclose(f);
    if (bad) {
        free(buf);
        fprintf(stderr, "replay: cannot read %s\n", path);
        return -1;
    }
    /* An exact-size copy, so that ASan sees any read past the end of the input. */
    uint8_t *exact = malloc(n ? n : 1);
    if (!exact) {
        free(buf);
        return -1;
    }
    memcpy(exact, buf, n);
    free(buf);
    LLVMFuzzerTestOneInput(exact, n);
    free(exact);
    return 0;
}

static int cmp_str(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Runs every regular file of a folder; returns the count, or -1 on error. */
static long run_dir(const char *dir) {
    DIR *d = opendir(dir);
    if (!d) return -1;
    char **names = NULL;
    size_t n = 0;
    size_t cap = 0;
    long count = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) { // NOLINT(concurrency-mt-unsafe): one thread, one DIR
        if (e->d_name[0] == '.') continue;
        if (n == cap) {
            cap = cap ? 2 * cap : 64;
            char **p = realloc(names, cap * sizeof *p);
            if (!p) {
                count = -1;
                break;
            }
            names = p;
        }
        names[n] = strdup(e->d_name);
        if (!names[n]) {
            count = -1;
            break;
        }
        n++;
    }
    closedir(d);
    if (count == 0 && n > 0) qsort(names, n, sizeof *names, cmp_str);
    for (size_t i = 0; i < n && count >= 0; i++) {
        char path[4096];
        snprintf(path, sizeof path, "%s/%s", dir, names[i]);
        struct stat st;
        if (stat(path, &st) != 0 || !S_ISREG(st.st_mode)) continue;
        if (run_file(path) != 0) {
            count = -1;
            break;
        }
        count++;
    }
    for (size_t i = 0; i < n; i++)
        free(names[i]);
    free(names);
    return count;
}

int main(int argc, char **argv) {
    long total = 0;
    for (int i = 1; i < argc; i++) {
        struct stat st;
        if (stat(argv[i], &st) != 0) {
            fprintf(stderr, "replay: no such file or folder: %s\n", argv[i]);
            return 1;
        }
        long n = S_ISDIR(st.st_mode) ? run_dir(argv[i]) : (run_file(argv[i]) == 0 ? 1 : -1);
        if (n < 0) {
            fprintf(stderr, "replay: failed on %s\n", argv[i]);
            return 1;
        }
        total += n;
    }
    printf("replayed %ld inputs\n", total);
    return total > 0 ? 0 : 1;
}
