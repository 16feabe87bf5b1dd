/*
 * server.c - the HTTP side of `moeinf serve`, on libmicrohttpd with a thread per connection:
 * a handler reads the body (up to body_max), checks the API key, route and method, parses the
 * request, queues a job and waits for it (non-streamed) or answers with server-sent events
 * that a content-reader callback writes as the worker publishes text. While it waits, a
 * handler peeks at its socket: a client that left cancels its job (one that only half-closed
 * is told apart, below).
 *
 * Connections. A thread per connection stays because the handlers block (on the worker, and
 * in the stream's reader); libmicrohttpd's epoll thread pool would need them rewritten
 * around suspend/resume. The threads are bounded instead: at most capacity (queue + parallel + 16)
 * connections are served, SERVE_CONN_RESERVE more are taken only to answer 503, and the
 * library closes the rest at accept, as it does a client's connections past
 * --max-conns-per-ip. A reaper thread shuts down a connection whose request has not arrived
 * complete within request_timeout of its opening (or of its last answer), or that stayed
 * silent for idle_timeout, so slow or idle clients cannot keep the slots.
 */
#include <arpa/inet.h>
#include <cjson/cJSON.h>
#include <errno.h>
#include <microhttpd.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>

#include "app/grow.h"
#include "serve/serve.h"

#define SERVE_CONN_RESERVE 16 /* connections past capacity taken only to answer 503 */

enum route {
    ROUTE_NONE,
    ROUTE_HEALTH,
    ROUTE_MODELS,
    ROUTE_COMPLETIONS,
    ROUTE_CHAT,
    ROUTE_METRICS,
    ROUTE_PAGE
};

/* A GET route also answers HEAD (libmicrohttpd leaves the body out). */
static const struct {
    const char *path;
    enum route route;
    const char *method;
    const char *allow; /* the Allow header of a 405 */
} routes[] = {
    {"/health", ROUTE_HEALTH, "GET", "GET, HEAD"},
    {"/v1/models", ROUTE_MODELS, "GET", "GET, HEAD"},
    {"/v1/completions", ROUTE_COMPLETIONS, "POST", "POST"},
    {"/v1/chat/completions", ROUTE_CHAT, "POST", "POST"},
    {"/metrics", ROUTE_METRICS, "GET", "GET, HEAD"},
    {"/", ROUTE_PAGE, "GET", "GET, HEAD"},
};

/* One open connection, from libmicrohttpd's NOTIFY_CONNECTION (its socket context). */
struct tracked {
    int fd;
    bool busy;    /* a complete request is being answered */
    bool over;    /* opened past capacity: its request is answered 503 */
    bool reaped;  /* shut down by the reaper */
    double since; /* when it opened, or its last answer ended (monotonic seconds) */
    struct tracked *prev, *next;
};

struct server {
    const struct serve_options *o;
    struct serve_worker w;
    uint64_t next_id; /* under w.mu */
    long started;     /* wall-clock seconds, for "created" of /v1/models */
    int capacity;     /* connections served; SERVE_CONN_RESERVE more get 503 */
    /* under conn_mu */
    pthread_mutex_t conn_mu;
    pthread_cond_t conn_changed; /* the reaper's tick and stop; answers sent (shutdown) */
    struct tracked *conns;
    int n_conns;
    int answering; /* generation requests not yet answered to the end */
    bool reaper_stop;
    pthread_t reaper;
};

/* Per request. */
struct conn {
    char *body;
    size_t len, cap;
    bool too_big;
    bool http11;     /* HTTP/1.1: may be sent a 100 (Continue) as a probe */
    bool probed;     /* the client half-closed and was probed */
    bool generation; /* counted in server.answering */
};

static double mono_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void count_error(struct server *s) {
    pthread_mutex_lock(&s->w.mu);
    s->w.m.http_errors++;
    pthread_mutex_unlock(&s->w.mu);
}

/* ---- CORS ---------------------------------------------------------------------------------- */

/* The Access-Control-Allow-Origin of this request: "*" (--cors '*'), the configured origin the
 * request's Origin matches, or NULL (CORS off, or an origin not allowed). */
static const char *cors_origin(const struct server *s, struct MHD_Connection *c) {
    const char *origin = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Origin");
    for (int i = 0; i < s->o->n_cors; i++) {
        if (!strcmp(s->o->cors[i], "*")) return "*";
        if (origin && !strcasecmp(origin, s->o->cors[i])) return s->o->cors[i];
    }
    return NULL;
}

static void add_cors(const struct server *s, struct MHD_Connection *c, struct MHD_Response *r) {
    if (s->o->n_cors == 0) return;
    const char *allow = cors_origin(s, c);
    if (!allow || strcmp(allow, "*") != 0) MHD_add_response_header(r, "Vary", "Origin");
    if (allow) MHD_add_response_header(r, "Access-Control-Allow-Origin", allow);
}

/* ---- responses ----------------------------------------------------------------------------- */

/* Queues r (with the CORS headers) and counts 4xx and 5xx as errors. */
static enum MHD_Result respond(struct server *s, struct MHD_Connection *c, unsigned status,
                               struct MHD_Response *r) {
    add_cors(s, c, r);
    enum MHD_Result ret = MHD_queue_response(c, status, r);
    MHD_destroy_response(r);
    if (status >= 400) count_error(s);
    return ret;
}

/* buf (malloc'ed, taken) as the body; one extra header when name is not NULL. */
static enum MHD_Result send_buffer_h(struct server *s, struct MHD_Connection *c, unsigned status,
                                     char *buf, const char *type, const char *name,
                                     const char *value) {
    if (!buf) return MHD_NO;
    struct MHD_Response *r =
        MHD_create_response_from_buffer(strlen(buf), buf, MHD_RESPMEM_MUST_FREE);
    if (!r) {
        free(buf);
        return MHD_NO;
    }
    MHD_add_response_header(r, "Content-Type", type);
    if (name) MHD_add_response_header(r, name, value);
    return respond(s, c, status, r);
}

static enum MHD_Result send_buffer(struct server *s, struct MHD_Connection *c, unsigned status,
                                   char *buf, const char *type) {
    return send_buffer_h(s, c, status, buf, type, NULL, NULL);
}

static const char *error_type(unsigned status) {
    switch (status) {
    case 401:
        return "authentication_error";
    case 404:
        return "not_found_error";
    case 503:
        return "server_overloaded";
    default:
        return status >= 500 ? "server_error" : "invalid_request_error";
    }
}

/* {"error": {"message", "type", "param", "code"}}, as OpenAI writes its errors. */
static char *error_json(unsigned status, const char *msg) {
    cJSON *root = cJSON_CreateObject();
    cJSON *e = cJSON_AddObjectToObject(root, "error");
    cJSON_AddStringToObject(e, "message", msg);
    cJSON_AddStringToObject(e, "type", error_type(status));
    cJSON_AddNullToObject(e, "param");
    cJSON_AddNumberToObject(e, "code", status);
    char *text = cJSON_PrintUnformatted(root);
    cJSON_Delete(root);
    return text;
}

static enum MHD_Result send_error(struct server *s, struct MHD_Connection *c, unsigned status,
                                  const char *msg) {
    return send_buffer(s, c, status, error_json(status, msg), "application/json");
}

static enum MHD_Result send_json(struct server *s, struct MHD_Connection *c, cJSON *root) {
    char *text = cJSON_PrintUnformatted(root);
    cJSON_Delete(root);
    return send_buffer(s, c, MHD_HTTP_OK, text, "application/json");
}

/* A CORS preflight (only with --cors): 204, allowing the origin when it is one of --cors. */
static enum MHD_Result send_preflight(struct server *s, struct MHD_Connection *c) {
    struct MHD_Response *r = MHD_create_response_from_buffer(0, NULL, MHD_RESPMEM_PERSISTENT);
    if (!r) return MHD_NO;
    if (cors_origin(s, c)) {
        MHD_add_response_header(r, "Access-Control-Allow-Methods", "GET, HEAD, POST, OPTIONS");
        MHD_add_response_header(r, "Access-Control-Allow-Headers", "Authorization, Content-Type");
        MHD_add_response_header(r, "Access-Control-Max-Age", "86400");
    }
    return respond(s, c, MHD_HTTP_NO_CONTENT, r);
}

/* ---- completion bodies ------------------------------------------------------------------- */

static void add_usage(cJSON *root, const struct serve_job *job) {
    cJSON *u = cJSON_AddObjectToObject(root, "usage");
    cJSON_AddNumberToObject(u, "prompt_tokens", job->prompt_tokens);
    cJSON_AddNumberToObject(u, "completion_tokens", job->completion_tokens);
    cJSON_AddNumberToObject(u, "total_tokens", job->prompt_tokens + job->completion_tokens);
    cJSON *d = cJSON_AddObjectToObject(u, "prompt_tokens_details");
    cJSON_AddNumberToObject(d, "cached_tokens", job->cached_tokens);
}

/* The envelope of a completion or a chunk: id, object, created, model, one choice. */
static cJSON *envelope(struct server *s, const char *id, bool chat, bool chunk, cJSON **choice) {
    cJSON *root = cJSON_CreateObject();
    cJSON_AddStringToObject(root, "id", id);
    cJSON_AddStringToObject(root, "object",
                            chat ? (chunk ? "chat.completion.chunk" : "chat.completion")
                                 : "text_completion");
    cJSON_AddNumberToObject(root, "created", (double)time(NULL));
    cJSON_AddStringToObject(root, "model", s->o->model_id);
    cJSON *choices = cJSON_AddArrayToObject(root, "choices");
    if (choice) {
        *choice = cJSON_CreateObject();
        cJSON_AddItemToArray(choices, *choice);
        cJSON_AddNumberToObject(*choice, "index", 0);
    }
    return root;
}

/* ---- waiting on a job -------------------------------------------------------------------- */

/*
 * Where the client stands. A peek that reads EOF means the client shut down its sending side:
 * either it left, or it half-closed (shutdown(SHUT_WR)) and still waits for the answer. Only a
 * write tells them apart: a client that left answers it with a reset, which puts the socket
 * out of CLOSE_WAIT (TCP_INFO). So EOF is PEER_HALF_CLOSED until the caller has written
 * something harmless (a probe) and the state says whether anyone read it.
 */
enum peer {
    PEER_OPEN,
    PEER_HALF_CLOSED, /* EOF read; the connection still stands */
    PEER_GONE
};

static enum peer peer_state(int fd) {
    if (fd < 0) return PEER_OPEN;
    struct tcp_info ti;
    socklen_t len = sizeof ti;
    if (getsockopt(fd, IPPROTO_TCP, TCP_INFO, &ti, &len) == 0 && ti.tcpi_state != TCP_ESTABLISHED &&
        ti.tcpi_state != TCP_CLOSE_WAIT) {
        return PEER_GONE; /* reset, or closed */
    }
    char b;
    ssize_t r = recv(fd, &b, 1, MSG_PEEK | MSG_DONTWAIT);
    if (r > 0 || (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))) {
        return PEER_OPEN;
    }
    return r == 0 ? PEER_HALF_CLOSED : PEER_GONE;
}

/* Waits on cv (mu held) for a signal or ms milliseconds, whichever comes first. */
static void wait_at_most(pthread_cond_t *cv, pthread_mutex_t *mu, long ms) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_nsec += ms * 1000 * 1000;
    ts.tv_sec += ts.tv_nsec / 1000000000L;
    ts.tv_nsec %= 1000000000L;
    pthread_cond_timedwait(cv, mu, &ts);
}

static void wait_tick(struct serve_worker *w) {
    wait_at_most(&w->changed, &w->mu, 50);
}

/* Waits (under w->mu) until the job started (or ended) or, with `to_end`, ended. False when
 * the client went away (the job is cancelled). A client that half-closed is sent an interim
 * "100 Continue" (which HTTP/1.1 clients must accept before any answer) as the probe; the
 * answer has not begun, so nothing else is on the wire. An HTTP/1.0 client may not be sent
 * one: its EOF counts as leaving. */
static bool wait_job(struct serve_worker *w, struct serve_job *job, struct conn *cn, int fd,
                     bool to_end) {
    static const char probe[] = "HTTP/1.1 100 Continue\r\n\r\n";
    while (job->state != JOB_DONE && (to_end || !job->started)) {
        enum peer p = peer_state(fd);
        if (p == PEER_HALF_CLOSED && !cn->probed) {
            cn->probed = true;
            if (!cn->http11 || send(fd, probe, sizeof probe - 1, MSG_NOSIGNAL | MSG_DONTWAIT) !=
                                   (ssize_t)(sizeof probe - 1)) {
                p = PEER_GONE;
            }
        }
        if (p == PEER_GONE) {
            job->cancelled = true;
            return false;
        }
        wait_tick(w);
    }
    return true;
}

static int connection_fd(struct MHD_Connection *c) {
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
    return ci ? ci->connect_fd : -1;
}

/* ---- streaming --------------------------------------------------------------------------- */

enum stream_phase {
    SP_ROLE,
    SP_TEXT,
    SP_USAGE,
    SP_DONE_LINE,
    SP_END
};

struct stream {
    struct server *s;
    struct serve_job *job;
    int fd;
    char id[48];
    enum stream_phase phase;
    bool probed;    /* the client half-closed and was sent a comment as the probe */
    size_t sent;    /* bytes of job->text already sent */
    size_t rsent;   /* bytes of job->reasoning already sent */
    size_t lp_sent; /* entries of job->lp already sent */
    char *pending;  /* an event not yet fully copied out */
    size_t plen, poff;
};

/* st->pending = text (copied); false when out of memory. */
static bool stream_set_text(struct stream *st, const char *text) {
    free(st->pending);
    st->pending = strdup(text);
    st->plen = st->pending ? strlen(st->pending) : 0;
    st->poff = 0;
    return st->pending != NULL;
}

static void stream_set(struct stream *st, cJSON *root) {
    char *json = cJSON_PrintUnformatted(root);
    cJSON_Delete(root);
    free(st->pending);
    st->pending = NULL;
    st->plen = st->poff = 0;
    if (!json) return;
    size_t n = strlen(json);
    st->pending = malloc(n + 9);
    if (st->pending) {
        memcpy(st->pending, "data: ", 6);
        memcpy(st->pending + 6, json, n);
        memcpy(st->pending + 6 + n, "\n\n", 3);
        st->plen = n + 8;
    }
    free(json);
}

/* The next event of the stream into st->pending; false at the end (or the client left). */
static bool stream_next(struct stream *st) {
    struct serve_worker *w = &st->s->w;
    bool chat = st->job->req.chat;
    cJSON *choice;
    if (st->phase == SP_ROLE) { /* chat: the assistant's role first, as OpenAI sends it */
        st->phase = SP_TEXT;
        if (chat) {
            cJSON *root = envelope(st->s, st->id, true, true, &choice);
            serve_fill_choice(choice, true, true, "assistant", "", NULL, NULL, NULL);
            stream_set(st, root);
            return true;
        }
    }
    if (st->phase == SP_TEXT) {
        pthread_mutex_lock(&w->mu);
        struct serve_job *job = st->job;
        while (job->len == st->sent && job->r_len == st->rsent && job->n_lp == st->lp_sent &&
               job->state != JOB_DONE) {
            enum peer p = peer_state(st->fd);
            if (p == PEER_HALF_CLOSED && !st->probed) { /* an SSE comment as the probe */
                st->probed = true;
                pthread_mutex_unlock(&w->mu);
                return stream_set_text(st, ":\n\n");
            }
            if (p == PEER_GONE) {
                job->cancelled = true;
                pthread_mutex_unlock(&w->mu);
                return false;
            }
            wait_tick(w);
        }
        if (job->len > st->sent || job->r_len > st->rsent || job->n_lp > st->lp_sent) {
            /* the thinking's new bytes first; "" when the first tokens print nothing */
            bool thinking;
            char *piece = serve_job_next_piece(job, &st->rsent, &st->sent, &thinking);
            cJSON *lp = serve_logprobs_json(w->model, job, st->lp_sent, job->n_lp);
            st->lp_sent = job->n_lp;
            pthread_mutex_unlock(&w->mu);
            if (!piece) {
                cJSON_Delete(lp);
                return false;
            }
            cJSON *root = envelope(st->s, st->id, chat, true, &choice);
            serve_fill_choice(choice, chat, true, NULL, thinking ? NULL : piece,
                              thinking ? piece : NULL, lp, NULL);
            free(piece);
            stream_set(st, root);
            return true;
        }
        pthread_mutex_unlock(&w->mu);
        st->phase = SP_USAGE;
        if (job->http_status) { /* failed after the stream began: an error event, no [DONE] */
            count_error(st->s);
            char *e = error_json((unsigned)job->http_status, job->error);
            cJSON *root = e ? cJSON_Parse(e) : NULL;
            free(e);
            if (!root) return false;
            stream_set(st, root);
            st->phase = SP_END;
            return true;
        }
        cJSON *root = envelope(st->s, st->id, chat, true, &choice);
        serve_fill_choice(choice, chat, true, NULL, chat ? NULL : "", NULL, NULL,
                          job->finish_reason);
        stream_set(st, root);
        return true;
    }
    if (st->phase == SP_USAGE) {
        st->phase = SP_DONE_LINE;
        if (st->job->req.include_usage) {
            cJSON *root = envelope(st->s, st->id, chat, true, NULL);
            add_usage(root, st->job);
            stream_set(st, root);
            return true;
        }
    }
    if (st->phase == SP_DONE_LINE) {
        st->phase = SP_END;
        return stream_set_text(st, "data: [DONE]\n\n");
    }
    return false;
}

static ssize_t stream_read(void *cls, uint64_t pos, char *buf, size_t max) {
    (void)pos;
    struct stream *st = cls;
    if (st->poff == st->plen) {
        bool more = stream_next(st);
        if (!more) {
            return st->phase == SP_END ? MHD_CONTENT_READER_END_OF_STREAM
                                       : MHD_CONTENT_READER_END_WITH_ERROR;
        }
    }
    if (!st->pending) return MHD_CONTENT_READER_END_WITH_ERROR; /* out of memory */
    size_t n = st->plen - st->poff < max ? st->plen - st->poff : max;
    memcpy(buf, st->pending + st->poff, n);
    st->poff += n;
    return (ssize_t)n;
}

static void stream_free(void *cls) {
    struct stream *st = cls;
    struct serve_worker *w = &st->s->w;
    pthread_mutex_lock(&w->mu);
    if (st->job->state != JOB_DONE) st->job->cancelled = true; /* the client went away */
    pthread_mutex_unlock(&w->mu);
    serve_job_release(w, st->job);
    free(st->pending);
    free(st);
}

/* ---- the generation endpoints ------------------------------------------------------------ */

static enum MHD_Result generate(struct server *s, struct MHD_Connection *c, struct conn *cn,
                                bool chat) {
    struct serve_request req;
    char msg[320];
    pthread_mutex_lock(&s->w.mu);
    uint64_t n = ++s->next_id;
    pthread_mutex_unlock(&s->w.mu);
    /* without "seed", each request draws its own */
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    uint64_t seed = (uint64_t)ts.tv_nsec * 0x9E3779B97F4A7C15ull ^ n;
    if (!serve_request_parse(cn->body ? cn->body : "", cn->len, chat, s->o->chat_template, seed,
                             &req, msg, sizeof msg)) {
        return send_error(s, c, 400, msg);
    }
    if (req.reasoning == SERVE_REASONING_UNSET) req.reasoning = s->o->reasoning_format;
    if (!req.thinking_set && s->o->no_thinking) req.chat_flags |= MOEINF_CHAT_NO_THINKING;
    pthread_mutex_lock(&s->conn_mu);
    s->answering++; /* until on_completed: the shutdown waits for this answer */
    cn->generation = true;
    pthread_mutex_unlock(&s->conn_mu);
    struct serve_job *job = serve_worker_submit(&s->w, &req);
    if (!job) {
        serve_request_free(&req);
        pthread_mutex_lock(&s->w.mu);
        bool stopping = s->w.stopping;
        pthread_mutex_unlock(&s->w.mu);
        if (stopping) {
            snprintf(msg, sizeof msg, "the server is stopping");
        } else {
            snprintf(msg, sizeof msg, "the server is busy: %d requests already wait (--queue)",
                     s->o->queue_max);
        }
        return send_error(s, c, 503, msg);
    }
    int fd = connection_fd(c);
    pthread_mutex_lock(&s->w.mu);
    bool present = wait_job(&s->w, job, cn, fd, !job->req.stream);
    int status = job->http_status;
    bool started = job->started;
    snprintf(msg, sizeof msg, "%s", job->error);
    pthread_mutex_unlock(&s->w.mu);
    if (!present) {
        serve_job_release(&s->w, job);
        return MHD_NO; /* the client is gone: close */
    }
    /* A stream begins once the prompt is accepted; what fails later is an error event. */
    if (status && !(job->req.stream && started)) {
        serve_job_release(&s->w, job);
        return send_error(s, c, (unsigned)status, msg);
    }
    char id[48];
    snprintf(id, sizeof id, "%s-%llu", chat ? "chatcmpl" : "cmpl", (unsigned long long)n);
    if (!job->req.stream) { /* the job is done: only this thread reads it now */
        cJSON *choice;
        cJSON *root = envelope(s, id, chat, false, &choice);
        serve_fill_choice(choice, chat, false, "assistant", job->text ? job->text : "",
                          job->reasoning, serve_logprobs_json(s->w.model, job, 0, job->n_lp),
                          job->finish_reason);
        add_usage(root, job);
        serve_job_release(&s->w, job);
        return send_json(s, c, root);
    }
    struct stream *st = calloc(1, sizeof *st);
    if (!st) {
        serve_job_release(&s->w, job);
        return send_error(s, c, 500, "out of memory");
    }
    st->s = s;
    st->job = job;
    st->fd = fd;
    st->probed = cn->probed;
    snprintf(st->id, sizeof st->id, "%s", id);
    struct MHD_Response *r =
        MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 4096, stream_read, st, stream_free);
    if (!r) {
        stream_free(st);
        return MHD_NO;
    }
    MHD_add_response_header(r, "Content-Type", "text/event-stream");
    MHD_add_response_header(r, "Cache-Control", "no-cache");
    return respond(s, c, MHD_HTTP_OK, r);
}

/* ---- the other endpoints ----------------------------------------------------------------- */

static enum MHD_Result health(struct server *s, struct MHD_Connection *c) {
    cJSON *root = cJSON_CreateObject();
    cJSON_AddStringToObject(root, "status", "ok");
    return send_json(s, c, root);
}

static enum MHD_Result models(struct server *s, struct MHD_Connection *c) {
    cJSON *root = cJSON_CreateObject();
    cJSON_AddStringToObject(root, "object", "list");
    cJSON *data = cJSON_AddArrayToObject(root, "data");
    cJSON *m = cJSON_CreateObject();
    cJSON_AddItemToArray(data, m);
    cJSON_AddStringToObject(m, "id", s->o->model_id);
    cJSON_AddStringToObject(m, "object", "model");
    cJSON_AddNumberToObject(m, "created", (double)s->started);
    cJSON_AddStringToObject(m, "owned_by", "moeinf");
    return send_json(s, c, root);
}

/* ---- dispatch ---------------------------------------------------------------------------- */

static enum MHD_Result count_authorization(void *cls, enum MHD_ValueKind kind, const char *key,
                                           const char *value) {
    (void)kind;
    (void)value;
    if (key && !strcasecmp(key, "Authorization")) ++*(int *)cls;
    return MHD_YES;
}

/* 0 when the request may go on; else the status that refuses it: 400 for two Authorization
 * headers, 401 for a missing or wrong key. The scheme is case-insensitive ("bearer"). */
static unsigned check_key(const struct server *s, struct MHD_Connection *c) {
    if (!s->o->api_key) return 0;
    int n = 0;
    MHD_get_connection_values(c, MHD_HEADER_KIND, count_authorization, &n);
    if (n > 1) return 400;
    const char *h = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Authorization");
    if (!h || strncasecmp(h, "Bearer", 6) != 0 || (h[6] != ' ' && h[6] != '\t')) return 401;
    h += 6;
    while (*h == ' ' || *h == '\t')
        h++;
    const char *key = s->o->api_key;
    size_t a = strlen(h);
    size_t b = strlen(key);
    unsigned diff = a != b;
    for (size_t i = 0; i < a && i < b; i++) /* no early exit: the time does not tell the key */
        diff |= (unsigned)(h[i] ^ key[i]);
    return diff == 0 ? 0 : 401;
}

static enum MHD_Result dispatch(struct server *s, struct MHD_Connection *c, const char *url,
                                const char *method, struct conn *cn) {
    /* a browser's preflight carries no key */
    if (s->o->n_cors > 0 && !strcmp(method, "OPTIONS")) return send_preflight(s, c);
    size_t i = 0;
    const size_t n_routes = sizeof routes / sizeof routes[0];
    while (i < n_routes && strcmp(url, routes[i].path) != 0)
        i++;
    /* The key first: without it, no answer says which paths or methods exist. The page holds
     * no data (its calls send the key the user types), so it loads without one, as /health. */
    if (i == n_routes || (routes[i].route != ROUTE_HEALTH && routes[i].route != ROUTE_PAGE)) {
        unsigned refused = check_key(s, c);
        if (refused == 400) return send_error(s, c, 400, "more than one Authorization header");
        if (refused) {
            return send_error(s, c, 401, "missing or wrong API key (Authorization: Bearer KEY)");
        }
    }
    if (i == n_routes) return send_error(s, c, 404, "no such path");
    bool head_as_get = !strcmp(method, "HEAD") && !strcmp(routes[i].method, "GET");
    if (strcmp(method, routes[i].method) != 0 && !head_as_get) {
        char msg[64];
        snprintf(msg, sizeof msg, "this path takes %s", routes[i].allow);
        return send_buffer_h(s, c, MHD_HTTP_METHOD_NOT_ALLOWED, error_json(405, msg),
                             "application/json", "Allow", routes[i].allow);
    }
    if (cn->too_big) {
        char msg[128];
        snprintf(msg, sizeof msg, "the body is larger than %zu bytes", s->o->body_max);
        return send_error(s, c, 413, msg);
    }
    switch (routes[i].route) {
    case ROUTE_HEALTH:
        return health(s, c);
    case ROUTE_MODELS:
        return models(s, c);
    case ROUTE_METRICS:
        return send_buffer(s, c, 200, serve_metrics_text(&s->w), "text/plain; version=0.0.4");
    case ROUTE_PAGE: {
        struct MHD_Response *r = MHD_create_response_from_buffer(
            serve_webui_html_size, (void *)serve_webui_html, MHD_RESPMEM_PERSISTENT);
        if (!r) return MHD_NO;
        MHD_add_response_header(r, "Content-Type", "text/html; charset=utf-8");
        return respond(s, c, 200, r);
    }
    case ROUTE_COMPLETIONS:
        return generate(s, c, cn, false);
    case ROUTE_CHAT:
        return generate(s, c, cn, true);
    default:
        return send_error(s, c, 404, "no such path");
    }
}

/* ---- connections ------------------------------------------------------------------------- */

static struct tracked *tracked_of(struct MHD_Connection *c) {
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(c, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
    return ci ? ci->socket_context : NULL;
}

/* The request is complete (busy) or answered (the deadlines start again). */
static void set_busy(struct server *s, struct MHD_Connection *c, bool busy) {
    struct tracked *t = tracked_of(c);
    if (!t) return;
    pthread_mutex_lock(&s->conn_mu);
    t->busy = busy;
    t->since = mono_now();
    pthread_mutex_unlock(&s->conn_mu);
}

static void on_connection(void *cls, struct MHD_Connection *c, void **socket_context,
                          enum MHD_ConnectionNotificationCode code) {
    struct server *s = cls;
    if (code == MHD_CONNECTION_NOTIFY_STARTED) {
        int fd = connection_fd(c);
        struct tracked *t = calloc(1, sizeof *t);
        if (!t) { /* untracked would mean no deadline: refuse it */
            if (fd >= 0) shutdown(fd, SHUT_RDWR);
            return;
        }
        t->fd = fd;
        t->since = mono_now();
        pthread_mutex_lock(&s->conn_mu);
        t->next = s->conns;
        if (s->conns) s->conns->prev = t;
        s->conns = t;
        t->over = ++s->n_conns > s->capacity;
        pthread_mutex_unlock(&s->conn_mu);
        *socket_context = t;
    } else if (code == MHD_CONNECTION_NOTIFY_CLOSED) {
        /* before libmicrohttpd closes the socket: the reaper never shuts down a reused fd */
        struct tracked *t = *socket_context;
        if (!t) return;
        pthread_mutex_lock(&s->conn_mu);
        if (t->prev) {
            t->prev->next = t->next;
        } else {
            s->conns = t->next;
        }
        if (t->next) t->next->prev = t->prev;
        s->n_conns--;
        pthread_mutex_unlock(&s->conn_mu);
        free(t);
        *socket_context = NULL;
    }
}

/* Milliseconds since the client last sent data (or connected). */
static unsigned silent_ms(int fd) {
    struct tcp_info ti;
    socklen_t len = sizeof ti;
    if (getsockopt(fd, IPPROTO_TCP, TCP_INFO, &ti, &len) != 0) return 0;
    return ti.tcpi_last_data_recv;
}

/* Shuts down the connections that are not answering a request and whose request is late or
 * that are idle; libmicrohttpd then reads EOF and closes them. */
static void *reaper_main(void *arg) {
    struct server *s = arg;
    const double late = s->o->request_timeout;
    const double idle = s->o->idle_timeout;
    pthread_mutex_lock(&s->conn_mu);
    while (!s->reaper_stop) {
        double t = mono_now();
        for (struct tracked *c = s->conns; c; c = c->next) {
            if (c->busy || c->reaped || c->fd < 0) continue;
            double age = t - c->since;
            if (age >= late || (age >= idle && silent_ms(c->fd) >= (unsigned)(idle * 1000))) {
                shutdown(c->fd, SHUT_RDWR);
                c->reaped = true;
            }
        }
        wait_at_most(&s->conn_changed, &s->conn_mu, 100);
    }
    pthread_mutex_unlock(&s->conn_mu);
    return NULL;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url,
                                  const char *method, const char *version, const char *upload_data,
                                  size_t *upload_data_size, void **con_cls) {
    struct server *s = cls;
    struct conn *cn = *con_cls;
    if (!cn) { /* the headers are in; the body follows */
        cn = calloc(1, sizeof *cn);
        if (!cn) return MHD_NO;
        *con_cls = cn;
        cn->http11 = version && !strcmp(version, MHD_HTTP_VERSION_1_1);
        pthread_mutex_lock(&s->w.mu);
        s->w.m.http_requests++;
        pthread_mutex_unlock(&s->w.mu);
        struct tracked *t = tracked_of(c);
        pthread_mutex_lock(&s->conn_mu);
        bool over = t && t->over;
        pthread_mutex_unlock(&s->conn_mu);
        if (over) { /* past capacity: answered now, and closed */
            pthread_mutex_lock(&s->w.mu);
            s->w.m.conns_refused++;
            pthread_mutex_unlock(&s->w.mu);
            set_busy(s, c, true);
            char msg[96];
            snprintf(msg, sizeof msg, "the server has too many open connections (%d)", s->capacity);
            return send_buffer_h(s, c, 503, error_json(503, msg), "application/json", "Connection",
                                 "close");
        }
        const char *cl = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Content-Length");
        if (cl && strtoull(cl, NULL, 10) > s->o->body_max) cn->too_big = true;
        return MHD_YES;
    }
    if (*upload_data_size) {
        size_t n = *upload_data_size;
        *upload_data_size = 0;
        if (cn->too_big || cn->len + n > s->o->body_max) {
            cn->too_big = true; /* read and dropped, answered 413 at the end */
            return MHD_YES;
        }
        if (!moeinf_text_append(&cn->body, &cn->len, &cn->cap, upload_data, n)) return MHD_NO;
        return MHD_YES;
    }
    set_busy(s, c, true); /* the request is complete: no deadline while it is answered */
    return dispatch(s, c, url, method, cn);
}

static void on_completed(void *cls, struct MHD_Connection *c, void **con_cls,
                         enum MHD_RequestTerminationCode why) {
    (void)why;
    struct server *s = cls;
    set_busy(s, c, false);
    struct conn *cn = *con_cls;
    if (!cn) return;
    if (cn->generation) {
        pthread_mutex_lock(&s->conn_mu);
        s->answering--;
        pthread_cond_broadcast(&s->conn_changed);
        pthread_mutex_unlock(&s->conn_mu);
    }
    free(cn->body);
    free(cn);
    *con_cls = NULL;
}

/* After the signal: the worker has failed what ran and what waited (503); their answers go out
 * before the listener closes (within request_timeout, for a client that does not read). */
static void drain(struct server *s) {
    double until = mono_now() + s->o->request_timeout;
    pthread_mutex_lock(&s->conn_mu);
    while (s->answering > 0 && mono_now() < until) {
        wait_at_most(&s->conn_changed, &s->conn_mu, 50);
    }
    pthread_mutex_unlock(&s->conn_mu);
}

int serve_run(const struct serve_options *o, struct moeinf_model *model,
              struct moeinf_context *ctx) {
    struct server s = {
        .o = o, .started = (long)time(NULL), .capacity = o->queue_max + o->n_parallel + 16};
    struct addrinfo hints = {
        .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM, .ai_flags = AI_NUMERICSERV};
    struct addrinfo *ai = NULL;
    char port[16];
    snprintf(port, sizeof port, "%d", o->port);
    int gai = getaddrinfo(o->host, port, &hints, &ai);
    if (gai != 0 || !ai) {
        fprintf(stderr, "moeinf: --host %s: %s\n", o->host, gai_strerror(gai));
        return 1;
    }
    struct moeinf_error err = {0};
    if (!serve_worker_start(&s.w, model, ctx, o->n_batch, o->queue_max, o->eamc_path, o->eamc_every,
                            &err)) {
        freeaddrinfo(ai);
        fprintf(stderr, "moeinf: %s\n", err.msg);
        return 1;
    }
    pthread_mutex_init(&s.conn_mu, NULL);
    pthread_cond_init(&s.conn_changed, NULL);
    unsigned flags = MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD |
                     MHD_USE_AUTO | MHD_USE_ERROR_LOG;
    if (ai->ai_family == AF_INET6) flags |= MHD_USE_IPv6;
    /* libmicrohttpd's own idle timeout is a backstop (a client that stops reading an
     * answer); the reaper applies request_timeout and idle_timeout */
    struct MHD_Daemon *d = MHD_start_daemon(
        flags, 0, NULL, NULL, on_request, &s, MHD_OPTION_SOCK_ADDR, ai->ai_addr,
        MHD_OPTION_NOTIFY_COMPLETED, on_completed, &s, MHD_OPTION_NOTIFY_CONNECTION, on_connection,
        &s, MHD_OPTION_CONNECTION_LIMIT, (unsigned)(s.capacity + SERVE_CONN_RESERVE),
        MHD_OPTION_PER_IP_CONNECTION_LIMIT, (unsigned)o->max_conns_per_ip,
        MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)60, MHD_OPTION_END);
    freeaddrinfo(ai);
    if (!d) {
        fprintf(stderr,
                "moeinf: cannot listen on %s port %d (in use, or not an address of "
                "this machine)\n",
                o->host, o->port);
        serve_worker_stop(&s.w);
        serve_worker_destroy(&s.w);
        pthread_cond_destroy(&s.conn_changed);
        pthread_mutex_destroy(&s.conn_mu);
        return 1;
    }
    bool reaping = pthread_create(&s.reaper, NULL, reaper_main, &s) == 0;
    if (!reaping) fprintf(stderr, "moeinf: cannot start the connection reaper; no deadlines\n");
    const union MHD_DaemonInfo *di = MHD_get_daemon_info(d, MHD_DAEMON_INFO_BIND_PORT);
    bool v6 = strchr(o->host, ':') != NULL; /* an IPv6 address goes in brackets in a URL */
    printf("moeinf: listening on http://%s%s%s:%u\n", v6 ? "[" : "", o->host, v6 ? "]" : "",
           di ? (unsigned)di->port : 0u);
    fflush(stdout);

    /* SIGINT and SIGTERM were blocked in every thread (cmd_serve): wait for one here. */
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGTERM);
    int sig = 0;
    sigwait(&set, &sig);
    fprintf(stderr, "moeinf: stopping\n");
    serve_worker_stop(&s.w); /* fails what runs and what waits (503), so the handlers return */
    drain(&s);
    MHD_stop_daemon(d);
    if (reaping) {
        pthread_mutex_lock(&s.conn_mu);
        s.reaper_stop = true;
        pthread_cond_broadcast(&s.conn_changed);
        pthread_mutex_unlock(&s.conn_mu);
        pthread_join(s.reaper, NULL);
    }
    serve_worker_destroy(&s.w);
    pthread_cond_destroy(&s.conn_changed);
    pthread_mutex_destroy(&s.conn_mu);
    return 0;
}
