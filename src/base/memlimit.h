/*
 * memlimit.h - how much memory this process may use: the tightest memory limit of its cgroup
 * and the cgroup's ancestors (cgroup v1's memory controller or cgroup v2), else the kernel's
 * MemAvailable estimate. Used by `--expert-cache auto`.
 */
#ifndef MOEINF_BASE_MEMLIMIT_H
#define MOEINF_BASE_MEMLIMIT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "moeinf.h"

/* *limit: the cgroup limit in bytes when one applies (*from_cgroup true), else MemAvailable.
 * `source` receives a short description (the file the figure came from). MOEINF_ERR_IO when
 * neither can be read. */
enum moeinf_status moeinf_memory_limit(uint64_t *limit, bool *from_cgroup, char *source,
                                       size_t source_size, struct moeinf_error *err);

#endif
