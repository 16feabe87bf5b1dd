/*
 * worker.c - the thread that generates, by continuous batching. Jobs wait in a bounded FIFO;
 * each of the context's sequences is a slot that runs one job at a time (slot.c). Every
 * iteration is one forward pass (moeinf_decode_batch) over one decode token of each slot that
 * generates, then prompt tokens of the slots still reading their prompts, in admission order,
 * up to n_batch (chunked prefill: a long prompt delays the streams by at most one micro-batch
 * per iteration). A handler that sees its client gone sets job->cancelled, which the worker
 * checks at every iteration, freeing the slot.
 */
#include <stdlib.h>
#include <string.h>

#include "serve/slot.h"

/* Slots whose client went away (or all, when the server stops) end now. */
static void reap_cancelled(struct serve_worker *w) {
    for (int i = 0; i < w->n_slots; i++) {
        struct serve_slot *s = &w->slots[i];
        if (s->state != SLOT_FREE && serve_job_cancelled(w, s->job))
            serve_slot_finish(w, s, NULL, false);
    }
}

/* The prefill slots in admission order into order[]; returns their count. */
static int prefill_order(struct serve_worker *w, struct serve_slot **order) {
    int n = 0;
    for (int i = 0; i < w->n_slots; i++) {
        if (w->slots[i].state != SLOT_PREFILL) continue;
        int j = n++;
        while (j > 0 && order[j - 1]->order > w->slots[i].order) {
            order[j] = order[j - 1];
            j--;
        }
        order[j] = &w->slots[i];
    }
    return n;
}

static void add_entry(struct serve_worker *w, int *n, struct serve_slot *s, int32_t tok, int pos,
                      bool logits) {
    w->b_tok[*n] = tok;
    w->b_pos[*n] = pos;
    w->b_seq[*n] = s->seq;
    w->b_slot[*n] = (int32_t)(s - w->slots);
    w->b_logits[*n] = logits;
    (*n)++;
}

/* Records an iteration's size and, when it generated, its time. Under w->mu. */
static void note_iteration(struct serve_worker *w, int n, int generated, double seconds) {
    serve_metrics_batch(&w->m, n);
    if (generated > 0) {
        w->m.decode_seconds += seconds;
        w->m.decode_tokens += (uint64_t)generated;
    }
    serve_snapshot_experts(w, false);
}

/* One iteration: the batch built, run as one forward pass, and each slot moved on. */
static void iterate(struct serve_worker *w, struct serve_slot **order) {
    reap_cancelled(w);
    int n = 0;
    for (int i = 0; i < w->n_slots && n < w->n_batch; i++) {
        struct serve_slot *s = &w->slots[i];
        if (s->state == SLOT_GEN) add_entry(w, &n, s, s->next, s->kv_n, true);
    }
    const int n_decode = n;
    const int n_pre = prefill_order(w, order);
    for (int k = 0; k < n_pre && n < w->n_batch; k++) {
        struct serve_slot *s = order[k];
        int left = s->n_prompt - s->kv_n;
        int take = left < w->n_batch - n ? left : w->n_batch - n;
        /* the prompt's last chunk holds at least 2 tokens where it can: the engine keeps a
         * checkpoint of a recurrent state or windows after each multi-token run, and the
         * prompt's end is the one a chat's next turn goes back to */
        if (left - take == 1 && take > 1) take--;
        for (int i = 0; i < take; i++) {
            const int p = s->kv_n + i;
            add_entry(w, &n, s, s->ids[p], p, p == s->n_prompt - 1);
        }
    }
    if (n == 0) return;
    struct moeinf_batch b = {
        .n = n, .token = w->b_tok, .pos = w->b_pos, .seq = w->b_seq, .logits = w->b_logits};
    struct moeinf_error err = {0};
    const double t0 = serve_now();
    enum moeinf_status st = moeinf_decode_batch(
        w->ctx, &b, n > n_decode ? MOEINF_PHASE_PREFILL : MOEINF_PHASE_DECODE, w->b_out, &err);
    if (st != MOEINF_OK) { /* what the sequences hold is no longer known */
        for (int e = 0; e < n; e++) {
            struct serve_slot *s = &w->slots[w->b_slot[e]];
            if (s->state == SLOT_FREE) continue;
            moeinf_context_seq_reset(w->ctx, s->seq, NULL);
            s->kv_n = 0;
            serve_job_fail(w, s->job, 500, err.msg);
            serve_slot_finish(w, s, NULL, false);
        }
        return;
    }
    const int n_vocab = moeinf_model_n_vocab(w->model);
    int row = 0;
    int generated = 0;
    for (int e = 0; e < n; e++) {
        struct serve_slot *s = &w->slots[w->b_slot[e]];
        s->kv[s->kv_n++] = w->b_tok[e];
        if (!w->b_logits[e]) continue;
        const float *logits = w->b_out + (size_t)row++ * n_vocab;
        if (s->state == SLOT_PREFILL) { /* its prompt is in: generation starts */
            for (int i = 0; i < s->n_prompt; i++)
                moeinf_sampler_accept(s->smp, s->ids[i]);
            s->state = SLOT_GEN;
            s->t_gen = serve_now();
        }
        const char *finish = NULL;
        bool stop_matched = false;
        generated++;
        if (!serve_slot_step(w, s, logits, &finish, &stop_matched))
            serve_slot_finish(w, s, finish, stop_matched);
    }
    pthread_mutex_lock(&w->mu);
    note_iteration(w, n, n_decode > 0 ? generated : 0, serve_now() - t0);
    pthread_mutex_unlock(&w->mu);
}

static int active_slots(const struct serve_worker *w) {
    int n = 0;
    for (int i = 0; i < w->n_slots; i++)
        n += w->slots[i].state != SLOT_FREE;
    return n;
}

static void *worker_main(void *arg) {
    struct serve_worker *w = arg;
    struct serve_slot **order = calloc((size_t)w->n_slots, sizeof(struct serve_slot *));
    pthread_mutex_lock(&w->mu);
    for (;;) {
        while (!w->head && !w->stopping && active_slots(w) == 0)
            pthread_cond_wait(&w->wake, &w->mu);
        if (w->stopping || !order) break;
        /* FIFO admission into the free slots */
        while (w->head && w->free_slots > 0) {
            struct serve_job *job = w->head;
            w->head = job->next;
            if (!w->head) w->tail = NULL;
            w->queued--;
            w->free_slots--;
            job->state = JOB_RUNNING;
            const bool skip = job->cancelled;
            pthread_mutex_unlock(&w->mu);
            if (!skip) serve_slot_admit(w, job);
            pthread_mutex_lock(&w->mu);
            if (skip) {
                serve_job_done(w, job);
                w->free_slots++;
            }
        }
        pthread_mutex_unlock(&w->mu);
        if (active_slots(w) > 0) iterate(w, order);
        pthread_mutex_lock(&w->mu);
    }
    /* Stopping: the running jobs end (503), and what still waits gets a 503. */
    pthread_mutex_unlock(&w->mu);
    for (int i = 0; i < w->n_slots; i++) {
        if (w->slots[i].state != SLOT_FREE) serve_slot_finish(w, &w->slots[i], NULL, false);
    }
    pthread_mutex_lock(&w->mu);
    while (w->head) {
        struct serve_job *job = w->head;
        w->head = job->next;
        job->state = JOB_DONE;
        job->http_status = 503;
        snprintf(job->error, sizeof job->error, "the server is stopping");
        serve_job_unref(job);
    }
    w->tail = NULL;
    w->queued = 0;
    pthread_cond_broadcast(&w->changed);
    pthread_mutex_unlock(&w->mu);
    free(order);
    return NULL;
}

/* The slots and the iteration's buffers; false when out of memory. */
static bool alloc_slots(struct serve_worker *w) {
    const int n_vocab = moeinf_model_n_vocab(w->model);
    const size_t nb = (size_t)w->n_batch;
    w->slots = calloc((size_t)w->n_slots, sizeof *w->slots);
    w->b_tok = malloc(nb * sizeof *w->b_tok);
    w->b_pos = malloc(nb * sizeof *w->b_pos);
    w->b_seq = malloc(nb * sizeof *w->b_seq);
    w->b_slot = malloc(nb * sizeof *w->b_slot);
    w->b_logits = malloc(nb * sizeof *w->b_logits);
    w->b_out = malloc(nb * (size_t)n_vocab * sizeof *w->b_out);
    if (!w->slots || !w->b_tok || !w->b_pos || !w->b_seq || !w->b_slot || !w->b_logits ||
        !w->b_out) {
        return false;
    }
    for (int i = 0; i < w->n_slots; i++) {
        w->slots[i].seq = i;
        w->slots[i].kv = malloc((size_t)w->n_ctx * sizeof *w->slots[i].kv);
        if (!w->slots[i].kv) return false;
    }
    int n_layers = 0;
    struct moeinf_expert_stats st;
    while (moeinf_context_expert_stats(w->ctx, n_layers, &st, NULL) == MOEINF_OK)
        n_layers++;
    if (n_layers > 0) {
        w->m.layer_experts = calloc((size_t)n_layers, sizeof *w->m.layer_experts);
        if (!w->m.layer_experts) return false;
        w->m.n_moe_layers = n_layers;
    }
    return true;
}

static void free_slots(struct serve_worker *w) {
    for (int i = 0; w->slots && i < w->n_slots; i++)
        free(w->slots[i].kv);
    free(w->slots);
    free(w->b_tok);
    free(w->b_pos);
    free(w->b_seq);
    free(w->b_slot);
    free(w->b_logits);
    free(w->b_out);
    free(w->m.layer_experts);
    w->slots = NULL;
    w->m.layer_experts = NULL;
}

bool serve_worker_start(struct serve_worker *w, struct moeinf_model *model,
                        struct moeinf_context *ctx, int n_batch, int queue_max,
                        const char *eamc_path, int eamc_every, struct moeinf_error *err) {
    memset(w, 0, sizeof *w);
    w->eamc_path = eamc_path;
    w->eamc_every = eamc_every > 0 ? eamc_every : SERVE_EAMC_EVERY_DEFAULT;
    w->model = model;
    w->ctx = ctx;
    w->n_ctx = moeinf_context_seq_n_ctx(ctx);
    w->n_slots = moeinf_context_n_seq(ctx);
    w->free_slots = w->n_slots;
    w->n_batch = n_batch;
    w->queue_max = queue_max;
    w->m.n_parallel = w->n_slots;
    struct moeinf_expert_cache_info info;
    w->m.has_expert_cache = moeinf_context_expert_cache(ctx, &info, NULL) == MOEINF_OK;
    if (w->m.has_expert_cache) w->m.expert_slots = info.slots;
    if (!alloc_slots(w)) {
        free_slots(w);
        snprintf(err->msg, sizeof err->msg, "out of memory");
        return false;
    }
    moeinf_context_reset(ctx);
    pthread_mutex_init(&w->mu, NULL);
    pthread_cond_init(&w->wake, NULL);
    pthread_cond_init(&w->changed, NULL);
    if (pthread_create(&w->thread, NULL, worker_main, w) != 0) {
        snprintf(err->msg, sizeof err->msg, "cannot start the generation thread");
        free_slots(w);
        return false;
    }
    return true;
}

void serve_worker_stop(struct serve_worker *w) {
    pthread_mutex_lock(&w->mu);
    w->stopping = true;
    pthread_cond_broadcast(&w->wake);
    pthread_cond_broadcast(&w->changed);
    pthread_mutex_unlock(&w->mu);
    pthread_join(w->thread, NULL);
}

void serve_worker_destroy(struct serve_worker *w) {
    pthread_cond_destroy(&w->wake);
    pthread_cond_destroy(&w->changed);
    pthread_mutex_destroy(&w->mu);
    free_slots(w);
}

struct serve_job *serve_worker_submit(struct serve_worker *w, struct serve_request *req) {
    struct serve_job *job = calloc(1, sizeof *job);
    if (!job) return NULL;
    pthread_mutex_lock(&w->mu);
    /* queue_max counts waiting jobs: a free slot takes one at once, whatever the limit */
    if (w->stopping || (w->queued >= w->queue_max && (w->free_slots == 0 || w->queued > 0))) {
        w->m.rejected++;
        pthread_mutex_unlock(&w->mu);
        free(job);
        return NULL;
    }
    job->req = *req;
    memset(req, 0, sizeof *req);
    job->refs = 2;
    job->state = JOB_QUEUED;
    job->t_submit = serve_now();
    if (w->tail) {
        w->tail->next = job;
    } else {
        w->head = job;
    }
    w->tail = job;
    w->queued++;
    pthread_cond_signal(&w->wake);
    pthread_mutex_unlock(&w->mu);
    return job;
}
