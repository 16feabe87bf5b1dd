/*
 * status.h - filling struct moeinf_error. Every fallible internal function ends a failure
 * path with `return moeinf_fail(err, MOEINF_ERR_FORMAT, "%s: ...", path);`.
 */
#ifndef MOEINF_BASE_STATUS_H
#define MOEINF_BASE_STATUS_H

#include <stddef.h>

#include "moeinf.h"

/* Writes a one-line message (printf format, truncated to fit) and returns `status`.
 * `err` may be NULL. */
enum moeinf_status moeinf_fail(struct moeinf_error *err, enum moeinf_status status,
                               const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* The text of an errno value, thread-safe (strerror is not: I/O threads report errors too).
 * Returns buf or a static string; buf holds size bytes (64 is plenty). */
const char *moeinf_strerror(int errnum, char *buf, size_t size);

/* Clears err to MOEINF_OK with an empty message. */
void moeinf_error_clear(struct moeinf_error *err);

#endif
