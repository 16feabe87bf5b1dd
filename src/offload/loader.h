/*
 * loader.h - reads of experts into cache slots on I/O threads, so that the forward pass
 * computes while the disk works.
 *
 * Each slot has at most one read of an expert (a "job") at a time. A job is three reads, one
 * per part (gate, up, down), which idle I/O threads take one at a time, so that up to three
 * threads read one expert at once. Jobs wait in two queues: demand reads (a step needs the
 * expert now) always go before prefetches (a prediction). The caller (the
 * forward pass's thread, through offload/tier.c) is the only one that submits, promotes,
 * cancels, waits for and retires jobs; the I/O threads only take queued jobs, read, and mark
 * them done. A job's life:
 *
 *   idle --submit--> queued --an I/O thread takes a part--> reading --> done | failed
 *     ^                 |  (cancel: back to idle, no part was taken)          |
 *     +----------------------------------------------- retire -----------+
 *
 * The slot's bytes may be used once moeinf_loader_wait (or moeinf_loader_state) says done:
 * the state is read with acquire order and written with release order after the read, so the
 * bytes are visible to the waiting thread and to the compute threads it starts afterwards.
 *
 * Threads. n_threads I/O threads (pread with O_DIRECT where the store uses it); with 0
 * threads nothing runs in the background and moeinf_loader_wait reads a queued job on the
 * caller's thread (the synchronous behaviour). No lock is held during a read: the queue lock
 * guards only the queues and state changes.
 */
#ifndef MOEINF_OFFLOAD_LOADER_H
#define MOEINF_OFFLOAD_LOADER_H

#include <stdbool.h>
#include <stdint.h>

#include "moeinf.h"
#include "offload/store.h"

enum moeinf_job_state {
    MOEINF_JOB_IDLE = 0,
    MOEINF_JOB_QUEUED = 1,
    MOEINF_JOB_READING = 2,
    MOEINF_JOB_DONE = 3,
    MOEINF_JOB_FAILED = 4,
};

struct moeinf_loader;

/* Starts n_threads (>= 0) I/O threads over the store's slots. The store must outlive the
 * loader. MOEINF_ERR_NOMEM, also when a thread cannot be started. */
enum moeinf_status moeinf_loader_init(struct moeinf_store *store, int n_threads,
                                      struct moeinf_loader **out, struct moeinf_error *err);
/* Cancels queued jobs, waits for reads in progress, joins the threads. Accepts NULL. */
void moeinf_loader_free(struct moeinf_loader *l);
int moeinf_loader_n_threads(const struct moeinf_loader *l);

/* Queues a read of expert `expert` of `layer` into `slot`, whose job must be idle. */
void moeinf_loader_submit(struct moeinf_loader *l, int slot, int layer, int expert, bool prefetch);
/* A queued prefetch becomes a demand read (nothing happens in any other state). */
void moeinf_loader_promote(struct moeinf_loader *l, int slot);
/* Takes a queued job back (true; the job is idle again) or finds it already started or
 * finished (false). */
bool moeinf_loader_cancel(struct moeinf_loader *l, int slot);
/* The job's state now (acquire order: done means the bytes are there). */
enum moeinf_job_state moeinf_loader_state(const struct moeinf_loader *l, int slot);
/* Waits until the job is done or failed, promoting it first if it is a queued prefetch
 * (reading it here when there are no I/O threads). Returns the read's status; *waited_ns
 * gets the time spent waiting (0 if the job was already finished). */
enum moeinf_status moeinf_loader_wait(struct moeinf_loader *l, int slot, uint64_t *waited_ns,
                                      struct moeinf_error *err);
/* Ends a done or failed job (back to idle): returns its counters (the read's bytes and time)
 * and, for a failed one, its error through err. */
enum moeinf_status moeinf_loader_retire(struct moeinf_loader *l, int slot,
                                        struct moeinf_store_counters *io, struct moeinf_error *err);
/* Time the I/O threads (or, without them, the caller's reads) have spent reading since the
 * loader started, summed over threads; parts being read count up to now. */
uint64_t moeinf_loader_busy_ns(struct moeinf_loader *l);
/* True if the slot's last submitted job was a prefetch that is still not retired. */
bool moeinf_loader_is_prefetch(const struct moeinf_loader *l, int slot);

#endif
