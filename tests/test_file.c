/*
 * test_file.c - base/file.c with inputs and outputs that are not plain files: a FIFO given as
 * an input is refused at once (not waited on), an output that is a FIFO is written in place
 * (it stays a FIFO), a symbolic link keeps its link, a folder is refused, and output paths are
 * checked before any work. Also base/memlimit.c's rule for reading a model into memory.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include "base/file.h"
#include "base/memlimit.h"
#include "base/status.h"
#include "golden.h"
#include "test.h"

/* A fresh FIFO at $MOEINF_TMP/name. */
static const char *make_fifo(const char *name, char *buf, size_t size) {
    test_tmp_path(name, buf, size);
    remove(buf);
    /* NOLINTNEXTLINE(concurrency-mt-unsafe): main thread */
    CHECK_MSG(mkfifo(buf, 0644) == 0, "mkfifo %s: %s", buf, strerror(errno));
    return buf;
}

/* A file is read into memory when file + file / 8 + 512 MiB fits under the limit
 * (hand-computed cases on both sides of the line), and the room the process has is known here. */
static void test_load_fits(void) {
    const uint64_t mib = (uint64_t)1 << 20;
    const uint64_t gib = (uint64_t)1 << 30;
    CHECK(moeinf_load_fits(8 * gib, 10 * gib));              /* 8 + 1 + 0.5 = 9.5 GiB */
    CHECK(!moeinf_load_fits(8 * gib + 512 * mib, 10 * gib)); /* 8.5 + 1.0625 + 0.5 */
    CHECK(moeinf_load_fits(8 * gib, 9 * gib + 512 * mib));   /* exactly at the line */
    CHECK(!moeinf_load_fits(8 * gib, 9 * gib + 512 * mib - 1));
    CHECK(moeinf_load_fits(0, 512 * mib));
    CHECK(!moeinf_load_fits(0, 512 * mib - 1));
    CHECK(!moeinf_load_fits(11 * gib, 10 * gib)); /* larger than the limit: no wrap-around */
    uint64_t room = 0;
    CHECK(moeinf_memory_room(&room)); /* Linux always has /proc/meminfo */
    CHECK(room > 0);
}

static void test_fifo_input_refused(void) {
    char fifo[512];
    make_fifo("file_in.fifo", fifo, sizeof fifo);
    /* no writer: a blocking open would wait forever; the alarm turns a hang into a failure */
    alarm(20);
    struct moeinf_error err;
    moeinf_error_clear(&err);
    int fd = -1;
    CHECK_EQ_INT(moeinf_file_open_regular(fifo, &fd, NULL, &err), MOEINF_ERR_IO);
    CHECK_STR_CONTAINS(err.msg, fifo);
    CHECK_STR_CONTAINS(err.msg, "a pipe or FIFO, not a regular file");
    FILE *f = NULL;
    CHECK_EQ_INT(moeinf_file_fopen_regular(fifo, &f, &err), MOEINF_ERR_IO);
    CHECK(f == NULL);
    struct moeinf_mapping m;
    CHECK_EQ_INT(moeinf_file_map(fifo, &m, &err), MOEINF_ERR_IO);
    CHECK_STR_CONTAINS(err.msg, "a pipe or FIFO");
    char dir[512];
    test_tmp_path("", dir, sizeof dir);
    CHECK_EQ_INT(moeinf_file_open_regular(dir, &fd, NULL, &err), MOEINF_ERR_IO);
    CHECK_STR_CONTAINS(err.msg, "a directory, not a regular file");
    alarm(0);
    remove(fifo);
}

/* Writes `text` through the atomic writer; returns the status. */
static enum moeinf_status write_text(const char *path, const char *text, struct moeinf_error *err) {
    struct moeinf_atomic_file af;
    enum moeinf_status st = moeinf_atomic_open(path, &af, err);
    if (st != MOEINF_OK) return st;
    fputs(text, af.fp);
    return moeinf_atomic_commit(&af, err);
}

static void test_fifo_output_in_place(void) {
    char fifo[512];
    char got[512];
    make_fifo("file_out.fifo", fifo, sizeof fifo);
    test_tmp_path("file_out.got", got, sizeof got);
    struct moeinf_error err;
    moeinf_error_clear(&err);
    alarm(20);
    /* no reader: refused at once rather than blocking */
    CHECK_EQ_INT(write_text(fifo, "x", &err), MOEINF_ERR_IO);
    CHECK_STR_CONTAINS(err.msg, "a FIFO with no reader");
    /* with a reader: the bytes go through the FIFO, which is still a FIFO afterwards (an
     * atomic rename would have replaced it by a regular file, as it did /dev/null) */
    pid_t pid = fork();
    if (pid == 0) {
        int in = open(fifo, O_RDONLY);
        int out = open(got, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        char buf[256];
        ssize_t n;
        while (in >= 0 && out >= 0 && (n = read(in, buf, sizeof buf)) > 0) {
            if (write(out, buf, (size_t)n) != n) break;
        }
        _exit(0);
    }
    CHECK(pid > 0);
    enum moeinf_status st = MOEINF_ERR_IO;
    for (int tries = 0; tries < 200 && st != MOEINF_OK; tries++) { /* until the reader opened */
        st = write_text(fifo, "through the pipe\n", &err);
        if (st != MOEINF_OK) usleep(10000);
    }
    CHECK_MSG(st == MOEINF_OK, "%s", err.msg);
    int status = 0;
    if (pid > 0) waitpid(pid, &status, 0);
    alarm(0);
    char text[256];
    test_read_text(got, text, sizeof text);
    CHECK(strcmp(text, "through the pipe\n") == 0);
    struct stat sb;
    CHECK(lstat(fifo, &sb) == 0 && S_ISFIFO(sb.st_mode));
    CHECK_EQ_INT(test_temp_leftovers("file_out.fifo"), 0);
    remove(fifo);
    remove(got);
}

static void test_symlink_and_directory(void) {
    char target[512];
    char link[512];
    char dir[512];
    test_tmp_path("file_target.txt", target, sizeof target);
    test_tmp_path("file_link.txt", link, sizeof link);
    test_tmp_path("file_dir", dir, sizeof dir);
    remove(link);
    struct moeinf_error err;
    moeinf_error_clear(&err);
    CHECK_EQ_INT(write_text(target, "old\n", &err), MOEINF_OK);
    CHECK(symlink("file_target.txt", link) == 0);
    CHECK_EQ_INT(write_text(link, "new\n", &err), MOEINF_OK);
    struct stat sb;
    CHECK(lstat(link, &sb) == 0 && S_ISLNK(sb.st_mode)); /* still a link */
    char text[64];
    test_read_text(target, text, sizeof text);
    CHECK(strcmp(text, "new\n") == 0); /* the file it names was replaced */
    CHECK_EQ_INT(test_temp_leftovers("file_target.txt"), 0);
    rmdir(dir);
    CHECK(mkdir(dir, 0755) == 0);
    CHECK_EQ_INT(write_text(dir, "x", &err), MOEINF_ERR_IO);
    CHECK_STR_CONTAINS(err.msg, "a directory, not a regular file");
    struct stat ds;
    CHECK(stat(dir, &ds) == 0 && S_ISDIR(ds.st_mode));
    rmdir(dir);
    remove(link);
    remove(target);
}

static void test_check_output(void) {
    struct moeinf_error err;
    moeinf_error_clear(&err);
    char path[512];
    char dir[512];
    test_tmp_path("file_new.txt", path, sizeof path);
    remove(path);
    CHECK_EQ_INT(moeinf_file_check_output(path, &err), MOEINF_OK); /* new, folder exists */
    CHECK(!test_file_exists(path));                                /* nothing created */
    CHECK_EQ_INT(moeinf_file_check_output("/nonexistent-dir/sub/out.txt", &err), MOEINF_ERR_IO);
    CHECK_STR_CONTAINS(err.msg, "/nonexistent-dir/sub/out.txt: folder /nonexistent-dir/sub:");
    CHECK(!test_file_exists("/nonexistent-dir"));
    test_tmp_path("", dir, sizeof dir);
    CHECK_EQ_INT(moeinf_file_check_output(dir, &err), MOEINF_ERR_IO);
    CHECK_STR_CONTAINS(err.msg, "a directory");
    /* a file where the folder should be */
    CHECK_EQ_INT(write_text(path, "x", &err), MOEINF_OK);
    char under[600];
    snprintf(under, sizeof under, "%s/out.txt", path);
    CHECK_EQ_INT(moeinf_file_check_output(under, &err), MOEINF_ERR_IO);
    remove(path);
    CHECK_EQ_INT(moeinf_file_check_output("", &err), MOEINF_ERR_IO);
    /* the temp name of an atomic write, for a front end's signal handler */
    char tmp[600];
    char want[600];
    moeinf_file_temp_path(path, tmp, sizeof tmp);
    snprintf(want, sizeof want, "%s.tmp.%ld", path, (long)getpid());
    CHECK(strcmp(tmp, want) == 0);
}

/* moeinf_file_write_atomic: the whole buffer replaces the file, no temp file stays; a folder
 * that does not exist is an error, and nothing is created. */
static void test_write_atomic(void) {
    char path[512];
    char bad[512];
    test_tmp_path("file_write_atomic.bin", path, sizeof path);
    unsigned char data[3000];
    for (size_t i = 0; i < sizeof data; i++)
        data[i] = (unsigned char)(i * 7 + 1);
    struct moeinf_error err = {0};
    CHECK_EQ_INT(moeinf_file_write_atomic(path, "old", 3, &err), MOEINF_OK);
    CHECK_EQ_INT(moeinf_file_write_atomic(path, data, sizeof data, &err), MOEINF_OK);
    size_t n = 0;
    char *back = golden_read_file(path, &n);
    CHECK(back && n == sizeof data && !memcmp(back, data, n));
    free(back);
    CHECK_EQ_INT(test_temp_leftovers("file_write_atomic.bin"), 0);
    test_tmp_path("no-such-folder/x.bin", bad, sizeof bad);
    CHECK_EQ_INT(moeinf_file_write_atomic(bad, data, sizeof data, &err), MOEINF_ERR_IO);
    CHECK(!test_file_exists(bad));
    remove(path);
}

int main(void) {
    RUN(test_load_fits);
    RUN(test_fifo_input_refused);
    RUN(test_fifo_output_in_place);
    RUN(test_symlink_and_directory);
    RUN(test_check_output);
    RUN(test_write_atomic);
    return test_report();
}
