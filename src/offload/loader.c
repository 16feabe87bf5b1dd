/* loader.c - expert reads on I/O threads, demand before prefetch (see loader.h). */
#include "offload/loader.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/status.h"

enum {
    QUEUE_NONE = 0,
    QUEUE_DEMAND = 1,
    QUEUE_PREFETCH = 2
};

struct queue {
    int head, tail; /* slots, -1 when empty */
};

/* A job is the expert's three parts (gate, up, down), handed out to I/O threads one part at a
 * time: the job stays queued until its last part is taken, so that the idle threads read the
 * parts of one expert at once. That raises the number of reads in flight when few experts are
 * missing (SSDs serve reads of a small expert's parts faster a few at a time than one at a
 * time: docs/OFFLOAD.md, 2026-12-01, part jobs and the number of I/O threads), and an expert is
 * complete sooner, so that its compute can start while the next one is read. */
struct job {
    _Atomic int state; /* enum moeinf_job_state */
    int layer, expert;
    bool prefetch;
    int queue; /* QUEUE_* while queued */
    int prev, next;
    int parts_taken;                 /* parts handed to I/O threads; under mutex */
    int parts_done;                  /* parts finished; under mutex */
    struct moeinf_store_counters io; /* summed over the parts under mutex, before done */
    struct moeinf_error err;         /* the first failed part's error, likewise */
};

struct moeinf_loader {
    struct moeinf_store *store;
    int n_slots;
    struct job *jobs;
    pthread_mutex_t mutex; /* guards the queues, queue/prev/next and stop */
    pthread_cond_t work;   /* a job was queued, or stop */
    pthread_cond_t done;   /* a job finished */
    struct queue demand, prefetch;
    bool stop;
    int n_threads;
    /* I/O thread time spent reading (moeinf_loader_busy_ns): of the parts finished, and the
     * number and summed start times of the parts being read; under mutex */
    uint64_t busy_done_ns, running_start_sum;
    int running;
    pthread_t *threads;
};

static uint64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static struct queue *queue_of(struct moeinf_loader *l, int q) {
    return q == QUEUE_DEMAND ? &l->demand : &l->prefetch;
}

static void queue_push(struct moeinf_loader *l, int q, int slot, bool front) {
    struct queue *qu = queue_of(l, q);
    struct job *j = &l->jobs[slot];
    j->queue = q;
    if (front) {
        j->prev = -1;
        j->next = qu->head;
        if (qu->head >= 0)
            l->jobs[qu->head].prev = slot;
        else
            qu->tail = slot;
        qu->head = slot;
    } else {
        j->next = -1;
        j->prev = qu->tail;
        if (qu->tail >= 0)
            l->jobs[qu->tail].next = slot;
        else
            qu->head = slot;
        qu->tail = slot;
    }
}

static void queue_remove(struct moeinf_loader *l, int slot) {
    struct job *j = &l->jobs[slot];
    struct queue *qu = queue_of(l, j->queue);
    if (j->prev >= 0)
        l->jobs[j->prev].next = j->next;
    else
        qu->head = j->next;
    if (j->next >= 0)
        l->jobs[j->next].prev = j->prev;
    else
        qu->tail = j->prev;
    j->queue = QUEUE_NONE;
    j->prev = j->next = -1;
}

/* Reads part `part` of the slot's job (no lock held; called with the mutex unlocked) and
 * counts it; the job is done (or failed) when its last part is counted. */
static void run_part(struct moeinf_loader *l, int slot, int part, uint64_t t0) {
    struct job *j = &l->jobs[slot];
    struct moeinf_store_counters io = {0};
    struct moeinf_error err;
    moeinf_error_clear(&err);
    enum moeinf_status st =
        moeinf_store_load_part(l->store, slot, j->layer, j->expert, part, &io, &err);
    pthread_mutex_lock(&l->mutex);
    l->busy_done_ns += now_ns() - t0;
    l->running--;
    l->running_start_sum -= t0;
    moeinf_store_counters_add(&j->io, &io);
    if (st != MOEINF_OK && j->err.status == MOEINF_OK) j->err = err;
    if (++j->parts_done == MOEINF_EXPERT_PARTS) {
        bool ok = j->err.status == MOEINF_OK;
        if (ok) j->io.loads = 1;
        atomic_store_explicit(&j->state, ok ? MOEINF_JOB_DONE : MOEINF_JOB_FAILED,
                              memory_order_release);
        pthread_cond_broadcast(&l->done);
    }
    pthread_mutex_unlock(&l->mutex);
}

/* Takes the next part of the slot's queued job (under mutex): the job leaves its queue with
 * its last part. *t0: when its read starts (for run_part). */
static int take_part(struct moeinf_loader *l, int slot, uint64_t *t0) {
    struct job *j = &l->jobs[slot];
    *t0 = now_ns();
    l->running++;
    l->running_start_sum += *t0;
    int part = j->parts_taken++;
    if (j->parts_taken == MOEINF_EXPERT_PARTS) queue_remove(l, slot);
    atomic_store_explicit(&j->state, MOEINF_JOB_READING, memory_order_relaxed);
    return part;
}

static void *io_thread(void *arg) {
    struct moeinf_loader *l = arg;
    pthread_mutex_lock(&l->mutex);
    for (;;) {
        while (!l->stop && l->demand.head < 0 && l->prefetch.head < 0)
            pthread_cond_wait(&l->work, &l->mutex);
        if (l->stop) break;
        int slot = l->demand.head >= 0 ? l->demand.head : l->prefetch.head;
        uint64_t t0;
        int part = take_part(l, slot, &t0);
        pthread_mutex_unlock(&l->mutex);
        run_part(l, slot, part, t0);
        pthread_mutex_lock(&l->mutex);
    }
    pthread_mutex_unlock(&l->mutex);
    return NULL;
}

enum moeinf_status moeinf_loader_init(struct moeinf_store *store, int n_threads,
                                      struct moeinf_loader **out, struct moeinf_error *err) {
    if (n_threads < 0) n_threads = 0;
    struct moeinf_loader *l = calloc(1, sizeof *l);
    if (!l) return moeinf_fail(err, MOEINF_ERR_NOMEM, "out of memory for the expert loader");
    l->store = store;
    l->n_slots = moeinf_store_n_slots(store);
    l->jobs = calloc((size_t)l->n_slots, sizeof *l->jobs);
    l->threads = calloc((size_t)(n_threads > 0 ? n_threads : 1), sizeof *l->threads);
    if (!l->jobs || !l->threads) {
        free(l->jobs);
        free(l->threads);
        free(l);
        return moeinf_fail(err, MOEINF_ERR_NOMEM, "out of memory for the expert loader");
    }
    for (int i = 0; i < l->n_slots; i++) {
        atomic_init(&l->jobs[i].state, MOEINF_JOB_IDLE);
        l->jobs[i].prev = l->jobs[i].next = -1;
    }
    l->demand.head = l->demand.tail = l->prefetch.head = l->prefetch.tail = -1;
    pthread_mutex_init(&l->mutex, NULL);
    pthread_cond_init(&l->work, NULL);
    pthread_cond_init(&l->done, NULL);
    for (int i = 0; i < n_threads; i++) {
        int e = pthread_create(&l->threads[i], NULL, io_thread, l);
        if (e != 0) {
            moeinf_loader_free(l);
            char eb[64];
            /* a thread is a system resource like memory (EAGAIN: a limit reached) */
            return moeinf_fail(err, MOEINF_ERR_NOMEM, "cannot start an expert I/O thread: %s",
                               moeinf_strerror(e, eb, sizeof eb));
        }
        l->n_threads++;
    }
    *out = l;
    return MOEINF_OK;
}

void moeinf_loader_free(struct moeinf_loader *l) {
    if (!l) return;
    pthread_mutex_lock(&l->mutex);
    l->stop = true;
    while (l->demand.head >= 0 || l->prefetch.head >= 0) {
        int slot = l->demand.head >= 0 ? l->demand.head : l->prefetch.head;
        queue_remove(l, slot);
        atomic_store_explicit(&l->jobs[slot].state, MOEINF_JOB_IDLE, memory_order_relaxed);
    }
    pthread_cond_broadcast(&l->work);
    pthread_mutex_unlock(&l->mutex);
    for (int i = 0; i < l->n_threads; i++)
        pthread_join(l->threads[i], NULL);
    pthread_cond_destroy(&l->done);
    pthread_cond_destroy(&l->work);
    pthread_mutex_destroy(&l->mutex);
    free(l->jobs);
    free(l->threads);
    free(l);
}

int moeinf_loader_n_threads(const struct moeinf_loader *l) {
    return l->n_threads;
}

void moeinf_loader_submit(struct moeinf_loader *l, int slot, int layer, int expert, bool prefetch) {
    struct job *j = &l->jobs[slot];
    pthread_mutex_lock(&l->mutex);
    j->layer = layer;
    j->expert = expert;
    j->prefetch = prefetch;
    j->parts_taken = j->parts_done = 0;
    memset(&j->io, 0, sizeof j->io);
    moeinf_error_clear(&j->err);
    atomic_store_explicit(&j->state, MOEINF_JOB_QUEUED, memory_order_relaxed);
    queue_push(l, prefetch ? QUEUE_PREFETCH : QUEUE_DEMAND, slot, false);
    /* every idle thread may take one of the parts */
    pthread_cond_broadcast(&l->work);
    pthread_mutex_unlock(&l->mutex);
}

void moeinf_loader_promote(struct moeinf_loader *l, int slot) {
    pthread_mutex_lock(&l->mutex);
    if (l->jobs[slot].queue == QUEUE_PREFETCH) {
        queue_remove(l, slot);
        queue_push(l, QUEUE_DEMAND, slot, false);
    }
    pthread_mutex_unlock(&l->mutex);
}

bool moeinf_loader_cancel(struct moeinf_loader *l, int slot) {
    pthread_mutex_lock(&l->mutex);
    /* a job whose first part was taken has started */
    bool queued = l->jobs[slot].queue != QUEUE_NONE && l->jobs[slot].parts_taken == 0;
    if (queued) {
        queue_remove(l, slot);
        atomic_store_explicit(&l->jobs[slot].state, MOEINF_JOB_IDLE, memory_order_relaxed);
    }
    pthread_mutex_unlock(&l->mutex);
    return queued;
}

enum moeinf_job_state moeinf_loader_state(const struct moeinf_loader *l, int slot) {
    return (enum moeinf_job_state)atomic_load_explicit(&l->jobs[slot].state, memory_order_acquire);
}

static bool finished(int state) {
    return state == MOEINF_JOB_DONE || state == MOEINF_JOB_FAILED;
}

enum moeinf_status moeinf_loader_wait(struct moeinf_loader *l, int slot, uint64_t *waited_ns,
                                      struct moeinf_error *err) {
    struct job *j = &l->jobs[slot];
    *waited_ns = 0;
    int state = atomic_load_explicit(&j->state, memory_order_acquire);
    if (!finished(state)) {
        uint64_t t0 = now_ns();
        pthread_mutex_lock(&l->mutex);
        if (j->queue != QUEUE_NONE && l->n_threads == 0) {
            /* No I/O threads: the read happens here, as a synchronous load. */
            while (j->queue != QUEUE_NONE) {
                uint64_t start;
                int part = take_part(l, slot, &start);
                pthread_mutex_unlock(&l->mutex);
                run_part(l, slot, part, start);
                pthread_mutex_lock(&l->mutex);
            }
        } else if (j->queue == QUEUE_PREFETCH) {
            queue_remove(l, slot);
            queue_push(l, QUEUE_DEMAND, slot, true);
        }
        while (!finished(state = atomic_load_explicit(&j->state, memory_order_acquire)))
            pthread_cond_wait(&l->done, &l->mutex);
        pthread_mutex_unlock(&l->mutex);
        *waited_ns = now_ns() - t0;
    }
    if (state == MOEINF_JOB_FAILED) {
        if (err) *err = j->err;
        return j->err.status != MOEINF_OK ? j->err.status : MOEINF_ERR_IO;
    }
    return MOEINF_OK;
}

enum moeinf_status moeinf_loader_retire(struct moeinf_loader *l, int slot,
                                        struct moeinf_store_counters *io,
                                        struct moeinf_error *err) {
    struct job *j = &l->jobs[slot];
    int state = atomic_load_explicit(&j->state, memory_order_acquire);
    *io = j->io;
    enum moeinf_status st = MOEINF_OK;
    if (state == MOEINF_JOB_FAILED) {
        if (err) *err = j->err;
        st = j->err.status != MOEINF_OK ? j->err.status : MOEINF_ERR_IO;
    }
    atomic_store_explicit(&j->state, MOEINF_JOB_IDLE, memory_order_relaxed);
    return st;
}

bool moeinf_loader_is_prefetch(const struct moeinf_loader *l, int slot) {
    return l->jobs[slot].prefetch;
}

uint64_t moeinf_loader_busy_ns(struct moeinf_loader *l) {
    pthread_mutex_lock(&l->mutex);
    uint64_t now = now_ns();
    uint64_t busy = l->busy_done_ns + (uint64_t)l->running * now - l->running_start_sum;
    pthread_mutex_unlock(&l->mutex);
    return busy;
}
