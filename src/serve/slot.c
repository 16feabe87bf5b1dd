/*
 * slot.c - one job in one sequence of the context (a slot): admitted (its prompt tokenized and
 * checked, the free sequence that shares the longest prefix with it chosen and cut to that
 * prefix), each generated token sampled and shown (stop strings held back, log-probabilities),
 * and its end (the text flushed, the counters, the job answered and released). The worker
 * (worker.c) composes the iterations that feed the slots; the text a job may show is published
 * under w->mu and the handlers are woken.
 */
#include "serve/slot.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "app/grow.h"

double serve_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void job_free(struct serve_job *job) {
    serve_request_free(&job->req);
    free(job->lp);
    free(job->text);
    free(job->reasoning);
    moeinf_reasoning_free(job->split);
    free(job);
}

/* Under w->mu. */
void serve_job_unref(struct serve_job *job) {
    if (--job->refs == 0) job_free(job);
}

void serve_job_release(struct serve_worker *w, struct serve_job *job) {
    pthread_mutex_lock(&w->mu);
    serve_job_unref(job);
    pthread_mutex_unlock(&w->mu);
}

bool serve_job_cancelled(struct serve_worker *w, struct serve_job *job) {
    pthread_mutex_lock(&w->mu);
    bool c = job->cancelled || w->stopping;
    pthread_mutex_unlock(&w->mu);
    return c;
}

void serve_job_fail(struct serve_worker *w, struct serve_job *job, int status, const char *msg) {
    pthread_mutex_lock(&w->mu);
    job->http_status = status;
    snprintf(job->error, sizeof job->error, "%s", msg);
    pthread_cond_broadcast(&w->changed);
    pthread_mutex_unlock(&w->mu);
}

/* The expert cache's counters into the metrics; under w->mu, worker thread only. */
void serve_snapshot_experts(struct serve_worker *w, bool now) {
    /* each count is a pass over the cache: a few times a second is enough for a panel that
     * polls every second, and a finished job's counters are copied at once */
    const double t = serve_now();
    if (!now && t - w->experts_snapshot < 0.25) return;
    w->experts_snapshot = t;
    struct moeinf_expert_stats st;
    if (moeinf_context_expert_stats(w->ctx, -1, &st, NULL) == MOEINF_OK) w->m.experts = st;
    for (int l = 0; l < w->m.n_moe_layers; l++) {
        if (moeinf_context_expert_stats(w->ctx, l, &st, NULL) == MOEINF_OK) {
            w->m.layer_experts[l] = st;
        }
    }
}

static bool lp_push(struct serve_logprob **a, size_t *n, size_t *cap, const struct serve_logprob *e,
                    size_t count) {
    if (count == 0) return true;
    struct serve_logprob *p = moeinf_grow(*a, cap, *n + count, sizeof *p);
    if (!p) return false;
    *a = p;
    memcpy(*a + *n, e, count * sizeof *e);
    *n += count;
    return true;
}

static bool raw_append(struct gen *g, const char *s, size_t n) {
    return moeinf_text_append(&g->raw, &g->len, &g->cap, s, n);
}

/* Shows what the stop strings allow (all of it when `final`), with the log-probabilities of
 * the tokens whose text starts in what is shown (all of them when final and no stop matched);
 * true when a stop matched. */
static bool publish(struct serve_worker *w, struct serve_job *job, struct gen *g, bool final) {
    bool stopped = false;
    size_t upto = serve_stop_scan(g->raw ? g->raw : "", g->len, g->shown, job->req.stop,
                                  job->req.n_stop, &stopped);
    if (final && !stopped) upto = g->len;
    size_t lp_upto = g->lp_shown;
    while (lp_upto < g->n_lp && (g->lp[lp_upto].offset < upto || (final && !stopped)))
        lp_upto++;
    if (upto > g->shown || lp_upto > g->lp_shown) {
        pthread_mutex_lock(&w->mu);
        bool ok =
            serve_job_show(job, g->raw + g->shown, upto - g->shown, false) &&
            lp_push(&job->lp, &job->n_lp, &job->lp_cap, g->lp + g->lp_shown, lp_upto - g->lp_shown);
        pthread_cond_broadcast(&w->changed);
        pthread_mutex_unlock(&w->mu);
        if (!ok) serve_job_fail(w, job, 500, "out of memory");
        g->shown = upto;
        g->lp_shown = lp_upto;
    }
    return stopped;
}

/* Frees what a slot's job held; the slot is free again. */
static void slot_clear(struct serve_slot *s) {
    moeinf_text_stream_free(s->detok);
    moeinf_sampler_free(s->smp);
    free(s->g.raw);
    free(s->g.counts);
    free(s->g.row);
    free(s->g.lp);
    free(s->ids);
    memset(&s->g, 0, sizeof s->g);
    s->detok = NULL;
    s->smp = NULL;
    s->ids = NULL;
    s->job = NULL;
    s->state = SLOT_FREE;
}

/* After a job, on the worker thread without the lock: the request is over for the expert
 * cache's policy (with other sequences in flight, its current request also held their
 * activations); every eamc_every jobs its state is saved. */
static void after_job(struct serve_worker *w) {
    moeinf_context_request_end(w->ctx);
    if (!w->eamc_path || ++w->jobs_unsaved < w->eamc_every) return;
    w->jobs_unsaved = 0;
    struct moeinf_error err = {0};
    if (moeinf_context_expert_state_save(w->ctx, w->eamc_path, &err) != MOEINF_OK) {
        fprintf(stderr, "moeinf: %s\n", err.msg); /* serving goes on; the next save retries */
    }
}

/* Marks a job done (finish NULL: cancelled or failed, answered 503 unless it failed with a
 * status of its own) and drops the worker's reference. Under w->mu. */
void serve_job_done(struct serve_worker *w, struct serve_job *job) {
    if (job->cancelled) w->m.cancelled++;
    if (!job->finish_reason && !job->http_status) { /* cancelled, or the server stops */
        job->http_status = 503;
        snprintf(job->error, sizeof job->error, "%s",
                 w->stopping ? "the server is stopping" : "the request was cancelled");
    }
    job->state = JOB_DONE;
    pthread_cond_broadcast(&w->changed);
    serve_job_unref(job);
}

/* Ends a slot's job: with `finish` ("stop" or "length") the answer is complete (what stop
 * strings and the splitter held comes out first), else it was cancelled or failed. */
void serve_slot_finish(struct serve_worker *w, struct serve_slot *s, const char *finish,
                       bool stop_matched) {
    struct serve_job *job = s->job;
    const double t_end = serve_now();
    if (finish) {
        if (!stop_matched) { /* what stop strings held back, at an end token too */
            size_t n;
            const char *tail = moeinf_text_stream_flush(s->detok, &n);
            if (raw_append(&s->g, tail, n) && publish(w, job, &s->g, true)) finish = "stop";
        }
        pthread_mutex_lock(&w->mu); /* the text ended: what the splitter held */
        bool shown = serve_job_show(job, NULL, 0, true);
        pthread_cond_broadcast(&w->changed);
        pthread_mutex_unlock(&w->mu);
        if (!shown) {
            serve_job_fail(w, job, 500, "out of memory");
            finish = NULL;
        }
    }
    pthread_mutex_lock(&w->mu);
    if (finish) {
        job->finish_reason = finish;
        job->completion_tokens = s->n_out;
        w->m.completions++;
        w->m.prompt_tokens += (uint64_t)s->n_prompt;
        w->m.cached_tokens += (uint64_t)s->keep;
        w->m.completion_tokens += (uint64_t)s->n_out;
        const double t_gen = s->t_gen > 0 ? s->t_gen : t_end;
        w->m.prompt_seconds += t_gen - s->t_admit;
        w->m.generation_seconds += t_end - t_gen;
        if (t_gen > s->t_admit)
            w->m.last_prompt_tps = (s->n_prompt - s->keep) / (t_gen - s->t_admit);
        if (t_end > t_gen) w->m.last_generation_tps = s->n_out / (t_end - t_gen);
    }
    serve_snapshot_experts(w, true);
    serve_job_done(w, job);
    w->free_slots++;
    w->m.active_seqs--;
    w->busy = w->m.active_seqs > 0;
    pthread_mutex_unlock(&w->mu);
    slot_clear(s);
    after_job(w);
}

/* The free slot for a prompt: the one whose sequence shares the longest prefix with it (less
 * one token, which must be decoded to give the next logits); *keep that prefix. */
static struct serve_slot *pick_slot(struct serve_worker *w, const int32_t *ids, int n_prompt,
                                    int *keep) {
    struct serve_slot *best = NULL;
    *keep = -1;
    for (int i = 0; i < w->n_slots; i++) {
        struct serve_slot *s = &w->slots[i];
        if (s->state != SLOT_FREE) continue;
        int k = 0;
        while (k < s->kv_n && k < n_prompt - 1 && s->kv[k] == ids[k])
            k++;
        if (k > *keep) {
            *keep = k;
            best = s;
        }
    }
    return best;
}

/* Takes a job into a free slot: its prompt tokenized and checked, the slot's sequence cut to
 * the prefix it shares, the sampler and text streams made. A job that cannot start is failed
 * (and done), its slot left free. */
void serve_slot_admit(struct serve_worker *w, struct serve_job *job) {
    struct serve_request *r = &job->req;
    struct moeinf_error err = {0};
    int32_t *ids = NULL;
    size_t n_ids = 0;
    char msg[320];
    const int n_vocab = moeinf_model_n_vocab(w->model);
    int status = 0;
    enum moeinf_status tst = r->chat ? moeinf_chat_tokenize(w->model, r->tmpl, r->msgs, r->n_msgs,
                                                            r->chat_flags, &ids, &n_ids, &err)
                                     : moeinf_tokenize(w->model, r->prompt, strlen(r->prompt), true,
                                                       false, &ids, &n_ids, &err);
    if (tst != MOEINF_OK) {
        status = 400;
        snprintf(msg, sizeof msg, "%s", err.msg);
    }
    for (int i = 0; status == 0 && i < r->n_bias; i++) {
        if (r->bias[i].id >= n_vocab) {
            status = 400;
            snprintf(msg, sizeof msg, "'logit_bias' names token %d; the vocabulary has %d",
                     (int)r->bias[i].id, n_vocab);
        }
    }
    if (status == 0 && n_ids == 0) {
        status = 400;
        snprintf(msg, sizeof msg, "the prompt is empty and the model adds no BOS");
    }
    if (status == 0 && n_ids > (size_t)w->n_ctx) {
        status = 400;
        snprintf(msg, sizeof msg, "the prompt has %zu tokens, more than the context (%d)", n_ids,
                 w->n_ctx);
    }
    int keep = 0;
    struct serve_slot *s = status == 0 ? pick_slot(w, ids, (int)n_ids, &keep) : NULL;
    if (s) {
        s->job = job;
        s->ids = ids;
        ids = NULL;
        s->n_prompt = (int)n_ids;
        s->penalties = r->frequency_penalty != 0.0f || r->presence_penalty != 0.0f;
        s->g.row = malloc((size_t)n_vocab * sizeof(float));
        if (s->penalties) s->g.counts = calloc((size_t)n_vocab, sizeof(int32_t));
        if (!s->g.row || (s->penalties && !s->g.counts)) {
            status = 500;
            snprintf(msg, sizeof msg, "out of memory");
        } else if (moeinf_sampler_init(&r->sp, n_vocab, &s->smp, &err) != MOEINF_OK) {
            status = 400;
            snprintf(msg, sizeof msg, "%s", err.msg);
        } else if (moeinf_text_stream_init(w->model, &s->detok, &err) != MOEINF_OK ||
                   !serve_job_split_init(job, &err)) {
            status = 500;
            snprintf(msg, sizeof msg, "%s", err.msg);
        }
    }
    if (status != 0 || !s) {
        free(ids);
        if (s) slot_clear(s);
        serve_job_fail(w, job, status ? status : 500, status ? msg : "no free sequence");
        pthread_mutex_lock(&w->mu);
        serve_job_done(w, job);
        w->free_slots++;
        pthread_mutex_unlock(&w->mu);
        return;
    }
    /* the template's thinking markers show even when they are control tokens (Kimi-K2) */
    if (r->chat) moeinf_text_stream_show(s->detok, moeinf_chat_reasoning_markers(r->tmpl));
    moeinf_context_seq_truncate(w->ctx, s->seq, keep, NULL);
    s->kv_n = moeinf_context_seq_n_past(w->ctx, s->seq); /* a recurrent state keeps fewer */
    s->keep = s->kv_n;
    s->state = SLOT_PREFILL;
    s->order = w->admitted++;
    s->n_out = 0;
    s->t_admit = serve_now();
    s->t_gen = 0;
    pthread_mutex_lock(&w->mu);
    job->started = true;
    job->prompt_tokens = s->n_prompt;
    job->cached_tokens = s->keep;
    w->m.active_seqs++;
    w->busy = true;
    pthread_cond_broadcast(&w->changed);
    pthread_mutex_unlock(&w->mu);
}

/* One generated token of a slot from the model's logits of its latest token: sampled, shown,
 * and either queued for the next iteration (true) or the end of the job (false, *finish and
 * *stop_matched set; *finish NULL when it failed). */
bool serve_slot_step(struct serve_worker *w, struct serve_slot *s, const float *logits,
                     const char **finish, bool *stop_matched) {
    struct serve_job *job = s->job;
    struct serve_request *r = &job->req;
    const int n_vocab = moeinf_model_n_vocab(w->model);
    struct gen *g = &s->g;
    g->logits = logits;
    const float *row = logits;
    if (s->penalties || r->n_bias > 0) { /* on a copy: the model's logits stay as they are */
        memcpy(g->row, logits, (size_t)n_vocab * sizeof(float));
        if (s->penalties) {
            serve_apply_penalties(g->row, g->counts, n_vocab, r->frequency_penalty,
                                  r->presence_penalty);
        }
        serve_apply_logit_bias(g->row, r->bias, r->n_bias);
        row = g->row;
    }
    int32_t id = moeinf_sampler_sample(s->smp, row);
    moeinf_sampler_accept(s->smp, id);
    if (s->n_out++ == 0) {
        const double ttft = serve_now() - job->t_submit;
        pthread_mutex_lock(&w->mu);
        serve_metrics_ttft(&w->m, ttft);
        pthread_mutex_unlock(&w->mu);
    }
    if (s->penalties) g->counts[id]++;
    *finish = "length";
    *stop_matched = false;
    if (moeinf_token_is_eog(w->model, id)) {
        *finish = "stop";
        return false;
    }
    if (r->logprobs) { /* the model's distribution, before bias, penalties and sampling */
        struct serve_logprob e = {.id = id, .offset = g->len};
        e.n_top = r->top_logprobs < n_vocab ? r->top_logprobs : n_vocab;
        e.logprob = serve_logprobs(logits, n_vocab, id, e.n_top, e.top_id, e.top_lp);
        if (!lp_push(&g->lp, &g->n_lp, &g->lp_cap, &e, 1)) {
            serve_job_fail(w, job, 500, "out of memory");
            *finish = NULL;
            return false;
        }
    }
    size_t n;
    const char *piece = moeinf_text_stream_push(s->detok, id, &n);
    if (!raw_append(g, piece, n)) {
        serve_job_fail(w, job, 500, "out of memory");
        *finish = NULL;
        return false;
    }
    if (publish(w, job, g, false)) {
        *finish = "stop";
        *stop_matched = true;
        return false;
    }
    if (r->max_tokens > 0 && s->n_out >= r->max_tokens) return false;
    if (s->kv_n >= w->n_ctx) return false; /* the sequence's end */
    s->next = id;
    return true;
}
