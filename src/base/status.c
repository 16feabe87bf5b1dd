/* status.c - status names and the one-line error message. */
#include "base/status.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

const char *moeinf_status_str(enum moeinf_status status) {
    switch (status) {
    case MOEINF_OK: return "ok";
    case MOEINF_ERR_ARG: return "invalid argument";
    case MOEINF_ERR_IO: return "i/o error";
    case MOEINF_ERR_FORMAT: return "format error";
    case MOEINF_ERR_UNSUPPORTED: return "unsupported";
    case MOEINF_ERR_NOMEM: return "out of memory";
    case MOEINF_ERR_DEVICE: return "device error";
    case MOEINF_ERR_ABORTED: return "aborted";
    case MOEINF_ERR_CONTEXT: return "context full";
    }
    return "unknown status";
}

enum moeinf_status moeinf_fail(struct moeinf_error *err, enum moeinf_status status,
                               const char *fmt, ...) {
    if (err) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err->msg, sizeof err->msg, fmt, ap);
        va_end(ap);
        /* One line: a newline in a quoted name must not split the message. */
        for (char *p = err->msg; *p; p++) {
            if (*p == '\n' || *p == '\r') *p = ' ';
        }
        err->status = status;
    }
    return status;
}

const char *moeinf_strerror(int errnum, char *buf, size_t size) {
#if defined(__GLIBC__) && defined(_GNU_SOURCE)
    return strerror_r(errnum, buf, size); /* GNU variant: returns the text */
#else
    if (strerror_r(errnum, buf, size) != 0) snprintf(buf, size, "error %d", errnum);
    return buf;
#endif
}

void moeinf_error_clear(struct moeinf_error *err) {
    if (err) {
        err->status = MOEINF_OK;
        err->msg[0] = '\0';
    }
}
