/*
 * serve.h - `moeinf serve`: an OpenAI-compatible HTTP server over the public API (moeinf.h).
 *
 *   server.c    libmicrohttpd: routes, methods, body limit, API key, CORS, errors, SSE
 *   request.c   a request body (cJSON) into struct serve_request, with OpenAI's defaults
 *   worker.c    the generation thread: its bounded queue, continuous batching of the requests
 *               in the context's sequences (one forward pass per iteration)
 *   slot.c      one job in one sequence: admitted where the longest prefix is kept, sampled,
 *               shown, ended (slot.h, internal)
 *   text.c      stop strings and OpenAI's frequency/presence penalties (pure, unit-tested)
 *   reply.c     a chat answer's thinking split from its content, and the choice objects
 *   metrics.c   GET /metrics in Prometheus text format, and its histograms' recording
 *   webui.html  the page at GET / (embedded at build time)
 *
 * Up to --parallel requests generate together, one sequence of the context each, in one
 * forward pass per iteration; other requests wait in a bounded queue.
 */
#ifndef MOEINF_SERVE_H
#define MOEINF_SERVE_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "moeinf.h"

#define SERVE_MAX_STOP         4   /* OpenAI's limit on stop strings */
#define SERVE_MAX_TOP_LOGPROBS 20  /* OpenAI's limit on top_logprobs */
#define SERVE_LOGIT_BIAS_MAX   100 /* OpenAI's range of a logit_bias value: [-100, 100] */

/* ---- requests (request.c) ---------------------------------------------------------------- */

/* --reasoning-format and a request's reasoning_format, in llama.cpp's names. */
enum serve_reasoning_format {
    SERVE_REASONING_UNSET, /* a request without the field: the server's */
    SERVE_REASONING_NONE,  /* "none": the thinking stays in content, markers and all */
    SERVE_REASONING_AUTO   /* "auto" or "deepseek": the thinking in reasoning_content */
};

struct serve_logit_bias {
    int32_t id; /* checked against the vocabulary by the worker */
    float bias;
};

struct serve_request {
    bool chat;    /* /v1/chat/completions (else /v1/completions) */
    char *prompt; /* completions: the prompt text */
    /* chat: the messages (role and content malloc'ed) and the template's (static) name; the
     * worker tokenizes them with moeinf_chat_tokenize (message texts as text) */
    struct moeinf_chat_message *msgs;
    size_t n_msgs;
    const char *tmpl;
    unsigned chat_flags; /* the template's MOEINF_CHAT_* flags: ADD_ASSISTANT, and NO_THINKING
                            for chat_template_kwargs.enable_thinking false */
    bool thinking_set;   /* enable_thinking or reasoning_effort "none" given (else the server's) */
    bool stream;
    bool include_usage; /* stream_options.include_usage */
    long max_tokens;    /* max_tokens, max_completion_tokens or n_predict; -1: until an end
                           token or the context's end */
    struct moeinf_sampler_params sp;
    float frequency_penalty;
    float presence_penalty;
    struct serve_logit_bias *bias; /* logit_bias, sorted by id (no id twice) */
    int n_bias;
    bool logprobs;    /* chat: logprobs true; completions: logprobs given (an integer) */
    int top_logprobs; /* alternatives per token: chat's top_logprobs, completions' logprobs */
    char *stop[SERVE_MAX_STOP];
    int n_stop;
    enum serve_reasoning_format reasoning; /* chat: reasoning_format */
};

/* Parses a body (body[len] must be NUL); on failure returns false with a one-line message in msg (a
 * 400). The chat template `tmpl` (a moeinf_chat_apply name) turns messages into the prompt. `seed`
 * is used when the request gives none. */
bool serve_request_parse(const char *body, size_t len, bool chat, const char *tmpl, uint64_t seed,
                         struct serve_request *out, char *msg, size_t msg_size);
void serve_request_free(struct serve_request *r);

/* ---- stop strings and penalties (text.c) ------------------------------------------------- */

/*
 * Given the generated text so far (len bytes) of which the first `shown` were already given to
 * the client, returns how many bytes may be shown now: the position of the first stop string
 * found at or after `shown` (*stopped = true), else len less the longest tail that could still
 * grow into a stop string.
 */
size_t serve_stop_scan(const char *text, size_t len, size_t shown, char *const *stops, int n_stops,
                       bool *stopped);

/* OpenAI's penalties on a row of logits: each token t generated c_t > 0 times loses
 * c_t * frequency + presence. counts holds n_vocab counters. */
void serve_apply_penalties(float *logits, const int32_t *counts, int n_vocab, float frequency,
                           float presence);

/* OpenAI's logit_bias: logits[id] += bias for each of the n entries (ids within n_vocab). */
void serve_apply_logit_bias(float *logits, const struct serve_logit_bias *bias, int n);

/*
 * The log-probability of token `id` under the model's distribution softmax(logits), in
 * float64 (NaN logits count as -inf), and the n_top most likely tokens (by logit, the lower id
 * first on ties) with theirs into top_id/top_lp. A log-probability that is not finite (a
 * token of probability 0) is given as -9999, as OpenAI gives it.
 */
double serve_logprobs(const float *logits, int n_vocab, int32_t id, int n_top, int32_t *top_id,
                      double *top_lp);

/* ---- log-probabilities in a response (logprobs.c) ---------------------------------------- */

/* One generated token's log-probability and its alternatives. */
struct serve_logprob {
    int32_t id;
    double logprob;
    size_t offset; /* bytes of the generated text before this token's */
    int n_top;
    int32_t top_id[SERVE_MAX_TOP_LOGPROBS];
    double top_lp[SERVE_MAX_TOP_LOGPROBS];
};

/* ---- a chat answer's parts and the choice objects (reply.c) ------------------------------- */

/* "none", "auto" or "deepseek" (llama.cpp's names; deepseek splits as auto does) into *out;
 * false for any other name. */
bool serve_reasoning_format_parse(const char *name, enum serve_reasoning_format *out);

struct serve_job;
struct cJSON;

/* A chat job's splitter (job->split) for the answer to its messages: its template's markers,
 * the tail of the prompt the template writes, the request's reasoning format (none: the
 * thinking stays in content). Completions get none. False with err set on failure. */
bool serve_job_split_init(struct serve_job *job, struct moeinf_error *err);

/* Gives the client n more bytes of the generated text (s may be NULL when n is 0); `end`: the
 * text ended, so what the splitter held comes out. With job->split the bytes are split into
 * job->reasoning and job->text, else they go to job->text. Under the worker's mutex (or before
 * the job is shared). False when out of memory. */
bool serve_job_show(struct serve_job *job, const char *s, size_t n, bool end);

/* The next piece of a streamed job from the bytes of its thinking and answer already sent
 * (*reasoning_sent, *text_sent, advanced): the thinking's new bytes first, else the answer's;
 * *thinking says which. Malloc'ed and NUL-terminated ("" when nothing is new), NULL when out
 * of memory. Under the worker's mutex. */
char *serve_job_next_piece(const struct serve_job *job, size_t *reasoning_sent, size_t *text_sent,
                           bool *thinking);

/* Fills one choice as llama.cpp's server writes it: completions {"text"}; chat {"message"} or,
 * with `chunk`, {"delta"}, holding role when not NULL, "content" when content is not NULL
 * (always in a message) and "reasoning_content" when reasoning is neither NULL nor ""; then
 * logprobs (taken; NULL for null) and finish_reason (NULL: null). */
void serve_fill_choice(struct cJSON *choice, bool chat, bool chunk, const char *role,
                       const char *content, const char *reasoning, struct cJSON *logprobs,
                       const char *finish);

/* ---- the generation worker (worker.c) --------------------------------------------------- */

enum job_state {
    JOB_QUEUED,
    JOB_RUNNING,
    JOB_DONE
};

struct serve_job {
    struct serve_request req;
    /* under serve_worker.mu from here */
    enum job_state state;
    bool started;   /* the prompt was accepted: a stream may begin */
    bool cancelled; /* the client went away (or the server stops) */
    int refs;       /* the HTTP handler and the worker */
    char *text;     /* the text the client may be shown so far (chat: the answer) */
    size_t len, cap;
    char *reasoning; /* chat: the thinking shown so far (reasoning_content) */
    size_t r_len, r_cap;
    struct moeinf_reasoning *split; /* chat: the splitter (worker thread); NULL: no split */
    struct serve_logprob *lp;       /* the shown tokens' log-probabilities (req.logprobs) */
    size_t n_lp, lp_cap;
    const char *finish_reason; /* "stop" or "length" once done */
    int http_status;           /* non-zero: the request failed with this status */
    char error[256];
    int prompt_tokens, cached_tokens, completion_tokens;
    double t_submit; /* CLOCK_MONOTONIC seconds when it was queued (time to first token) */
    struct serve_job *next;
};

#define SERVE_BATCH_BUCKETS 11 /* 1 2 4 8 16 32 64 128 256 512 +Inf */
#define SERVE_TTFT_BUCKETS  9  /* .05 .1 .25 .5 1 2.5 5 10 +Inf seconds */

struct serve_metrics {
    uint64_t http_requests, http_errors, rejected, cancelled;
    uint64_t conns_refused; /* requests answered 503 for too many open connections */
    uint64_t completions, prompt_tokens, cached_tokens, completion_tokens;
    double prompt_seconds, generation_seconds;
    double last_prompt_tps, last_generation_tps;
    bool has_expert_cache;
    struct moeinf_expert_stats experts;
    int expert_slots;
    /* continuous batching (worker.c): sequences, iterations and time to first token */
    int n_parallel;     /* sequences the context holds (--parallel) */
    int active_seqs;    /* sequences in prefill or generating now */
    uint64_t batch_hist[SERVE_BATCH_BUCKETS]; /* iterations by tokens: <= 1, 2, 4, .. 512, more */
    uint64_t iterations, iteration_tokens;
    double decode_seconds;          /* wall time with at least one sequence generating */
    uint64_t decode_tokens;         /* tokens generated in that time */
    uint64_t ttft_hist[SERVE_TTFT_BUCKETS]; /* arrival to first token: <= .05 .1 .25 .5 1 2.5 5
                                               10 s, more */
    uint64_t ttft_count;
    double ttft_sum;
    int n_moe_layers;                   /* entries of layer_experts */
    struct moeinf_expert_stats *layer_experts; /* per MoE layer (worker-owned; snapshots under
                                                  w->mu) */
};

struct serve_slot;

struct serve_worker {
    struct moeinf_model *model;
    struct moeinf_context *ctx;
    int n_ctx, n_batch, queue_max; /* n_ctx: positions of one sequence */
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t wake;    /* the worker: a job or stop */
    pthread_cond_t changed; /* the handlers: text, state */
    struct serve_job *head, *tail;
    int queued; /* jobs waiting (not the running ones) */
    int free_slots;
    bool busy; /* at least one request generates */
    bool stopping;
    struct serve_metrics m;
    /* worker thread only */
    struct serve_slot *slots; /* [n_parallel] one per sequence of the context */
    int n_slots;
    uint64_t admitted;      /* jobs admitted so far: a slot's admission order */
    double experts_snapshot; /* when the expert cache's counters were last copied */
    int32_t *b_tok, *b_pos, *b_seq, *b_slot; /* [n_batch] the iteration's entries */
    bool *b_logits;
    float *b_out; /* [n_batch][n_vocab] their logits */
    const char *eamc_path; /* NULL: no periodic save */
    int eamc_every, jobs_unsaved;
};

/* Starts the worker thread on a loaded model and context (borrowed), one slot per sequence of
 * the context. Each finished job ends a request for the expert cache's policy; with eamc_path,
 * every eamc_every jobs its state is saved there (so that a crash loses little; the caller
 * saves at shutdown). */
bool serve_worker_start(struct serve_worker *w, struct moeinf_model *model,
                        struct moeinf_context *ctx, int n_batch, int queue_max,
                        const char *eamc_path, int eamc_every, struct moeinf_error *err);
/* Cancels what runs, fails the jobs still queued (503) and joins the thread. */
void serve_worker_stop(struct serve_worker *w);
/* Frees what the worker holds, once no handler uses it. */
void serve_worker_destroy(struct serve_worker *w);

/* Queues a job (taking ownership of req); NULL when the queue is full (the caller answers
 * 503, and still owns req) or the server stops. The handler holds one reference, released with
 * _release. */
struct serve_job *serve_worker_submit(struct serve_worker *w, struct serve_request *req);
void serve_job_release(struct serve_worker *w, struct serve_job *job);

/* choices[].logprobs for the job's tokens [from, to) in OpenAI's form: chat {"content": [{token,
 * logprob, bytes, top_logprobs}]}, completions {tokens, token_logprobs, top_logprobs,
 * text_offset}; NULL (JSON null) when the request asked for none. Under w->mu (or once the job
 * is done). */
struct cJSON *serve_logprobs_json(const struct moeinf_model *model, const struct serve_job *job,
                                  size_t from, size_t to);

/* ---- metrics (metrics.c) ----------------------------------------------------------------- */

/* The Prometheus text of the counters (a snapshot taken under w->mu, layer_experts copied);
 * malloc'ed, NULL when out of memory. */
char *serve_metrics_text(struct serve_worker *w);

/* Records one forward iteration of `tokens` tokens (< 1: nothing) into batch_hist, iterations
 * and iteration_tokens; under w->mu. */
void serve_metrics_batch(struct serve_metrics *m, int tokens);
/* Records one request's time to first token (negative or NaN counts as 0) into ttft_hist,
 * ttft_count and ttft_sum; under w->mu. */
void serve_metrics_ttft(struct serve_metrics *m, double seconds);

/* ---- the server (server.c) --------------------------------------------------------------- */

/* The page at GET / (src/serve/webui.html, embedded by the build). */
extern const unsigned char serve_webui_html[];
extern const size_t serve_webui_html_size;

#define SERVE_MAX_CORS 16 /* --cors origins */

struct serve_options {
    const char *host;
    int port;                         /* 0: any free port */
    const char *api_key;              /* NULL: no key */
    const char *cors[SERVE_MAX_CORS]; /* allowed origins ("*": any); none: no CORS headers */
    int n_cors;
    int max_conns_per_ip; /* 0: no limit */
    int request_timeout;  /* seconds a request may take to arrive complete */
    int idle_timeout;     /* seconds an idle connection is kept */
    const char *model_id; /* the name /v1/models gives */
    const char *chat_template;
    enum serve_reasoning_format reasoning_format; /* for requests that give none */
    bool no_thinking; /* --reasoning off: enable_thinking false for requests that give none */
    int queue_max;
    size_t body_max;
    int n_ctx, n_batch;
    int n_parallel;        /* sequences of the context: requests generated together */
    const char *eamc_path; /* --eamc: the expert-cache state, saved every eamc_every requests */
    int eamc_every;
};

#define SERVE_EAMC_EVERY_DEFAULT 16

#define SERVE_PARALLEL_DEFAULT        4
#define SERVE_QUEUE_DEFAULT           8
#define SERVE_BODY_MAX_DEFAULT        (1u << 20)
#define SERVE_CONNS_PER_IP_DEFAULT    8
#define SERVE_REQUEST_TIMEOUT_DEFAULT 10
#define SERVE_IDLE_TIMEOUT_DEFAULT    5

/* Serves until SIGINT or SIGTERM; prints "moeinf: listening on http://HOST:PORT" on stdout
 * once ready (an IPv6 HOST in brackets). On the signal, the running and the waiting requests
 * are answered 503 before the listener closes. Returns 0, or 1 after printing why it could not
 * start. */
int serve_run(const struct serve_options *o, struct moeinf_model *model,
              struct moeinf_context *ctx);

#endif
