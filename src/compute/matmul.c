/* matmul.c - batched weight x activation products; see matmul.h. */
#include "compute/matmul.h"

#include <assert.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <string.h>

/* Activation rows per kernel call: the weight row stays in registers/L1 across them. */
#define M_CHUNK 8

/* Below this many (weight elements x activation rows) a product runs on the calling thread. */
#define SMALL_COST 16384

/* Below this many activation elements a quantization runs on the calling thread (a decode
 * token's expert rows: 8 x 768 in Qwen3-30B-A3B, a microsecond or two, no more than waking
 * the pool). */
#define SMALL_QUANT 16384

/* Work is handed out in chunks of about this cost (at least; fewer chunks for small
 * dispatches): at one activation row about 48 KiB of Q8_0 weights, a few microseconds of
 * streaming, so that the atomic claim per chunk costs nothing measurable. */
#define MIN_CHUNK_COST (1u << 17)

/* Chunks per thread at most: enough that a thread which loses its core for a while (a
 * shared machine) leaves little work to wait for, few enough to keep streams long. Decode
 * (one activation row per job) is memory-bound and its eight-row kernels split a chunk into
 * eight streams, which must stay long for the hardware prefetchers: 4 chunks per thread
 * streamed faster than 16 or 64 on K-quant decode (docs/PERFORMANCE.md, 2026-12-01, K-quant
 * files against llama.cpp). Prefill is compute-bound and keeps the finer split for balance. */
#define CHUNKS_PER_THREAD        16
#define CHUNKS_PER_THREAD_DECODE 4

/* Decode chunks start and end on a multiple of this many rows of a job (or at its last row):
 * the K-quant rows kernels take rows eight at a time and leave the rest of a call to the
 * per-row kernel, about half as fast, and a chunk edge anywhere left up to 7 such rows per
 * chunk and job. Which chunk computes a row never changes its result (every kernel equals
 * vec_dot bit for bit). */
#define DECODE_ROW_GROUP 8

struct mm_task {
    const struct moeinf_kernels *kern;
    const struct moeinf_mm_job *jobs;
    int n_jobs;
    uint64_t total_cost;
    uint64_t n_chunks;
    atomic_uint_fast64_t next_chunk; /* the next chunk to claim */
};

static uint64_t row_cost(const struct moeinf_mm_job *j) {
    /* Streaming the row costs about as much as a few activation rows' arithmetic. */
    return (uint64_t)j->n_in * (uint64_t)(j->m + 2);
}

static void run_rows(const struct moeinf_kernels *kern, const struct moeinf_mm_job *j, int64_t r0,
                     int64_t r1) {
    moeinf_vec_dot_m_fn dot_m = kern->vec_dot_m[j->type];
    float s[M_CHUNK];
    if (j->m == 1) {
        /* All rows in one call: the kernel prepares the activation row once for them. */
        kern->vec_dot_rows[j->type](j->n_in, r1 - r0, &j->y[r0], j->w + (size_t)r0 * j->w_row_bytes,
                                    j->w_row_bytes, j->x);
        return;
    }
    if (kern->gemm[j->type]) {
        kern->gemm[j->type](j->n_in, r1 - r0, j->m, &j->y[r0], j->y_stride,
                            j->w + (size_t)r0 * j->w_row_bytes, j->w_row_bytes, j->x, j->x_stride);
        return;
    }
    for (int64_t r = r0; r < r1; r++) {
        const uint8_t *w = j->w + (size_t)r * j->w_row_bytes;
        for (int t0 = 0; t0 < j->m; t0 += M_CHUNK) {
            int mc = j->m - t0 < M_CHUNK ? j->m - t0 : M_CHUNK;
            dot_m(j->n_in, mc, s, w, j->x + (size_t)t0 * j->x_stride, j->x_stride);
            for (int t = 0; t < mc; t++)
                j->y[(size_t)(t0 + t) * j->y_stride + r] = s[t];
        }
    }
}

/* Where a thread stands in the job list: chunks are claimed in increasing order, so each
 * thread's cursor only moves forward. */
struct cursor {
    int i;         /* job */
    uint64_t base; /* cost of the jobs before it */
};

/* Runs the rows whose start cost lies in [c0, c1): the rows of one chunk. */
static void run_range(const struct mm_task *task, struct cursor *cur, uint64_t c0, uint64_t c1) {
    for (; cur->i < task->n_jobs; cur->i++) {
        const struct moeinf_mm_job *j = &task->jobs[cur->i];
        uint64_t rc = row_cost(j);
        uint64_t end = cur->base + rc * (uint64_t)j->n_out;
        if (cur->base >= c1) return;
        if (end > c0) {
            /* Row r belongs to the chunk whose range holds the row's start cost. */
            uint64_t lo = c0 > cur->base ? c0 - cur->base : 0;
            uint64_t hi = (c1 < end ? c1 : end) - cur->base;
            int64_t r0 = (int64_t)((lo + rc - 1) / rc);
            int64_t r1 = (int64_t)((hi + rc - 1) / rc);
            if (j->m == 1) {
                /* both edges of a boundary round alike, so the chunks still split the rows */
                r0 = (r0 + DECODE_ROW_GROUP - 1) / DECODE_ROW_GROUP * DECODE_ROW_GROUP;
                r1 = (r1 + DECODE_ROW_GROUP - 1) / DECODE_ROW_GROUP * DECODE_ROW_GROUP;
            }
            if (r1 > j->n_out) r1 = j->n_out;
            if (r0 < r1) run_rows(task->kern, j, r0, r1);
            if (end > c1) return; /* the job goes on in a later chunk */
        }
        cur->base = end;
    }
}

/* floor(total_cost * c / n_chunks) without overflow (c <= n_chunks <= 2^24). */
static uint64_t chunk_start(const struct mm_task *task, uint64_t c) {
    uint64_t q = task->total_cost / task->n_chunks;
    uint64_t r = task->total_cost % task->n_chunks;
    return q * c + r * c / task->n_chunks;
}

static void mm_worker(void *arg, int ith, int nth) {
    (void)ith;
    (void)nth;
    struct mm_task *task = arg;
    struct cursor cur = {0, 0};
    for (;;) {
        uint64_t c = atomic_fetch_add_explicit(&task->next_chunk, 1, memory_order_relaxed);
        if (c >= task->n_chunks) return;
        run_range(task, &cur, chunk_start(task, c), chunk_start(task, c + 1));
    }
}

void moeinf_matmul_run(struct moeinf_pool *pool, const struct moeinf_kernels *kern,
                       const struct moeinf_mm_job *jobs, int n_jobs) {
    struct mm_task task = {.kern = kern, .jobs = jobs, .n_jobs = n_jobs};
    for (int i = 0; i < n_jobs; i++) {
        assert(kern->vec_dot_rows[jobs[i].type] && kern->vec_dot_m[jobs[i].type]);
        task.total_cost += row_cost(&jobs[i]) * (uint64_t)jobs[i].n_out;
    }
    if (task.total_cost == 0) return;
    const int nth = moeinf_pool_size(pool);
    if (task.total_cost < SMALL_COST || nth == 1) {
        /* one chunk on the calling thread: waking the pool costs more than the work (routers) */
        struct cursor cur = {0, 0};
        run_range(&task, &cur, 0, task.total_cost);
        return;
    }
    bool decode = true;
    for (int i = 0; i < n_jobs; i++)
        decode = decode && jobs[i].m == 1;
    uint64_t max_chunks = (uint64_t)nth * (decode ? CHUNKS_PER_THREAD_DECODE : CHUNKS_PER_THREAD);
    uint64_t n = task.total_cost / MIN_CHUNK_COST;
    task.n_chunks = n < (uint64_t)nth ? (uint64_t)nth : n > max_chunks ? max_chunks : n;
    atomic_init(&task.next_chunk, 0);
    moeinf_pool_run(pool, mm_worker, &task);
}

struct q_task {
    moeinf_from_float_fn fn;
    const float *x;
    size_t x_stride;
    int m;
    int64_t n;
    uint8_t *out;
    size_t out_stride;
};

static void q_worker(void *arg, int ith, int nth) {
    const struct q_task *t = arg;
    for (int j = ith; j < t->m; j += nth) {
        t->fn(t->x + (size_t)j * t->x_stride, t->out + (size_t)j * t->out_stride, t->n);
    }
}

void moeinf_quantize_rows(struct moeinf_pool *pool, const struct moeinf_kernels *kern,
                          enum moeinf_type type, const float *x, size_t x_stride, int m, int64_t n,
                          uint8_t *out, size_t out_stride) {
    if (type == MOEINF_TYPE_F32) {
        for (int j = 0; j < m; j++) {
            memcpy(out + (size_t)j * out_stride, x + (size_t)j * x_stride,
                   (size_t)n * sizeof(float));
        }
        return;
    }
    struct q_task t = {kern->from_float[type], x, x_stride, m, n, out, out_stride};
    assert(t.fn);
    if ((uint64_t)m * (uint64_t)n < SMALL_QUANT) {
        q_worker(&t, 0, 1);
        return;
    }
    moeinf_pool_run(pool, q_worker, &t);
}
