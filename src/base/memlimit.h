/*
 * memlimit.h - how much memory this process may use: the tightest memory limit of its cgroup
 * and the cgroup's ancestors (cgroup v1's memory controller or cgroup v2), else the kernel's
 * MemAvailable estimate. Used by `--expert-cache auto` and by the choice between reading a
 * model into memory and mapping it (MOEINF_LOAD_AUTO).
 */
#ifndef MOEINF_BASE_MEMLIMIT_H
#define MOEINF_BASE_MEMLIMIT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "moeinf.h"

/* *limit: the cgroup limit in bytes when one applies (*from_cgroup true), else MemAvailable.
 * The environment variable MOEINF_MEMORY_LIMIT (decimal bytes), when set, is a limit of the
 * same kind as a cgroup's (*from_cgroup true): the smaller of it and the cgroup's applies. It
 * fakes a limit for tests and lets a user cap `--expert-cache auto` below the cgroup's.
 * `source` receives a short description (the file the figure came from, or the variable).
 * MOEINF_ERR_IO when none can be read; MOEINF_ERR_ARG for a variable that is not a number. */
enum moeinf_status moeinf_memory_limit(uint64_t *limit, bool *from_cgroup, char *source,
                                       size_t source_size, struct moeinf_error *err);

/* The smallest of the cgroup limit (when one applies), MOEINF_MEMORY_LIMIT (when set to a
 * number) and MemAvailable (when readable): what a new allocation can take without pushing
 * anything out. false when none is known (*bytes is then UINT64_MAX). */
bool moeinf_memory_room(uint64_t *bytes);

/* Whether reading a file of `file_bytes` into memory leaves room to spare under `limit`
 * (moeinf_memory_room's figure): file + 1/8 of it + 512 MiB for the KV cache, scratch and
 * everything else the process holds. */
bool moeinf_load_fits(uint64_t file_bytes, uint64_t limit);

#endif
