/* status.c - status names and the one-line error message. */
#include "base/status.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "base/escape.h"

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
        char raw[sizeof err->msg];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(raw, sizeof raw, fmt, ap);
        va_end(ap);
        /* One line and no terminal escapes: a control byte that reached the message (a name
         * the caller did not escape) is written as inspect writes it, \n or \x1b; the text is
         * cut before an escape that would not fit. */
        size_t o = 0;
        for (const char *p = raw; *p; p++) {
            unsigned char c = (unsigned char)*p;
            char e[4];
            size_t k = 1;
            e[0] = *p;
            if (c < 0x20 || c == 0x7f) k = moeinf_escape_byte(c, e);
            if (o + k >= sizeof err->msg) break;
            memcpy(err->msg + o, e, k);
            o += k;
        }
        err->msg[o] = '\0';
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
