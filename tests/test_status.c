/* test_status.c - error values: messages are one line, truncated, and carry the status. */
#include "base/status.h"
#include "test.h"

static void test_fail_fills_message(void) {
    struct moeinf_error err;
    moeinf_error_clear(&err);
    enum moeinf_status st = moeinf_fail(&err, MOEINF_ERR_FORMAT, "%s: bad %d", "f.gguf", 7);
    CHECK_EQ_INT(st, MOEINF_ERR_FORMAT);
    CHECK_EQ_INT(err.status, MOEINF_ERR_FORMAT);
    CHECK(strcmp(err.msg, "f.gguf: bad 7") == 0);
}

static void test_fail_is_one_line_and_truncated(void) {
    struct moeinf_error err;
    char long_name[1000];
    memset(long_name, 'a', sizeof long_name - 1);
    long_name[sizeof long_name - 1] = '\0';
    long_name[10] = '\n';
    moeinf_fail(&err, MOEINF_ERR_IO, "%s", long_name);
    CHECK_EQ_INT(strlen(err.msg), sizeof err.msg - 1);
    CHECK(strchr(err.msg, '\n') == NULL);
}

static void test_fail_accepts_null(void) {
    CHECK_EQ_INT(moeinf_fail(NULL, MOEINF_ERR_NOMEM, "x"), MOEINF_ERR_NOMEM);
    CHECK(strcmp(moeinf_status_str(MOEINF_OK), "ok") == 0);
    CHECK(strcmp(moeinf_status_str(MOEINF_ERR_CONTEXT), "context full") == 0);
}

int main(void) {
    RUN(test_fail_fills_message);
    RUN(test_fail_is_one_line_and_truncated);
    RUN(test_fail_accepts_null);
    return test_report();
}
