/*
 * server.c - the HTTP side of `moeinf serve`, on libmicrohttpd with a thread per connection:
 * a handler reads the body (up to body_max), checks route, method and API key, parses the
 * request, queues a job and waits for it (non-streamed) or answers with server-sent events
 * that a content-reader callback writes as the worker publishes text. While it waits, a
 * handler peeks at its socket: a client that closed it cancels its job.
 */
#include <arpa/inet.h>
#include <cjson/cJSON.h>
#include <errno.h>
#include <microhttpd.h>
#include <netdb.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

#include "serve/serve.h"

enum route {
    ROUTE_NONE,
    ROUTE_HEALTH,
    ROUTE_MODELS,
    ROUTE_COMPLETIONS,
    ROUTE_CHAT,
    ROUTE_METRICS
};

static const struct {
    const char *path;
    enum route route;
    const char *method;
} routes[] = {
    {"/health", ROUTE_HEALTH, "GET"},
    {"/v1/models", ROUTE_MODELS, "GET"},
    {"/v1/completions", ROUTE_COMPLETIONS, "POST"},
    {"/v1/chat/completions", ROUTE_CHAT, "POST"},
    {"/metrics", ROUTE_METRICS, "GET"},
};

struct server {
    const struct serve_options *o;
    struct serve_worker w;
    uint64_t next_id; /* under w.mu */
    long started;     /* wall-clock seconds, for "created" of /v1/models */
};

/* Per request. */
struct conn {
    char *body;
    size_t len, cap;
    bool too_big;
};

/* ---- responses ----------------------------------------------------------------------------- */

static enum MHD_Result send_buffer(struct server *s, struct MHD_Connection *c, unsigned status,
                                   char *buf, const char *type) {
    if (!buf) return MHD_NO;
    struct MHD_Response *r =
        MHD_create_response_from_buffer(strlen(buf), buf, MHD_RESPMEM_MUST_FREE);
    if (!r) {
        free(buf);
        return MHD_NO;
    }
    MHD_add_response_header(r, "Content-Type", type);
    MHD_add_response_header(r, "Access-Control-Allow-Origin", "*");
    enum MHD_Result ret = MHD_queue_response(c, status, r);
    MHD_destroy_response(r);
    if (status >= 400) {
        pthread_mutex_lock(&s->w.mu);
        s->w.m.http_errors++;
        pthread_mutex_unlock(&s->w.mu);
    }
    return ret;
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

static enum MHD_Result send_preflight(struct MHD_Connection *c) {
    struct MHD_Response *r = MHD_create_response_from_buffer(0, NULL, MHD_RESPMEM_PERSISTENT);
    if (!r) return MHD_NO;
    MHD_add_response_header(r, "Access-Control-Allow-Origin", "*");
    MHD_add_response_header(r, "Access-Control-Allow-Methods", "GET, POST, OPTIONS");
    MHD_add_response_header(r, "Access-Control-Allow-Headers", "Authorization, Content-Type");
    MHD_add_response_header(r, "Access-Control-Max-Age", "86400");
    enum MHD_Result ret = MHD_queue_response(c, MHD_HTTP_NO_CONTENT, r);
    MHD_destroy_response(r);
    return ret;
}

static enum MHD_Result send_method_not_allowed(struct server *s, struct MHD_Connection *c,
                                               const char *allow, const char *method,
                                               const char *url) {
    char msg[200];
    snprintf(msg, sizeof msg, "%s takes %s, not %.32s", url, allow, method);
    char *text = error_json(405, msg);
    if (!text) return MHD_NO;
    struct MHD_Response *r =
        MHD_create_response_from_buffer(strlen(text), text, MHD_RESPMEM_MUST_FREE);
    if (!r) {
        free(text);
        return MHD_NO;
    }
    MHD_add_response_header(r, "Content-Type", "application/json");
    MHD_add_response_header(r, "Access-Control-Allow-Origin", "*");
    MHD_add_response_header(r, "Allow", allow);
    enum MHD_Result ret = MHD_queue_response(c, MHD_HTTP_METHOD_NOT_ALLOWED, r);
    MHD_destroy_response(r);
    pthread_mutex_lock(&s->w.mu);
    s->w.m.http_errors++;
    pthread_mutex_unlock(&s->w.mu);
    return ret;
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

/* One choice: text (completion) or message/delta (chat); finish NULL while streaming;
 * logprobs (taken) NULL for null. */
static void fill_choice(cJSON *choice, bool chat, bool chunk, const char *role, const char *text,
                        cJSON *logprobs, const char *finish) {
    if (!chat) {
        cJSON_AddStringToObject(choice, "text", text ? text : "");
    } else {
        cJSON *m = cJSON_AddObjectToObject(choice, chunk ? "delta" : "message");
        if (role) cJSON_AddStringToObject(m, "role", role);
        if (text) cJSON_AddStringToObject(m, "content", text);
    }
    if (logprobs) {
        cJSON_AddItemToObject(choice, "logprobs", logprobs);
    } else {
        cJSON_AddNullToObject(choice, "logprobs");
    }
    if (finish) {
        cJSON_AddStringToObject(choice, "finish_reason", finish);
    } else {
        cJSON_AddNullToObject(choice, "finish_reason");
    }
}

/* ---- waiting on a job -------------------------------------------------------------------- */

/* True when the peer has closed its end (EOF on a peek; data waiting is not a close). */
static bool peer_closed(int fd) {
    if (fd < 0) return false;
    char b;
    ssize_t r = recv(fd, &b, 1, MSG_PEEK | MSG_DONTWAIT);
    return r == 0 || (r < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR);
}

static void wait_tick(struct serve_worker *w) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_nsec += 50L * 1000 * 1000;
    if (ts.tv_nsec >= 1000000000L) {
        ts.tv_sec++;
        ts.tv_nsec -= 1000000000L;
    }
    pthread_cond_timedwait(&w->changed, &w->mu, &ts);
}

/* Waits (under w->mu) until the job started (or ended) or, with `to_end`, ended. False when
 * the client went away (the job is cancelled). */
static bool wait_job(struct serve_worker *w, struct serve_job *job, int fd, bool to_end) {
    while (job->state != JOB_DONE && (to_end || !job->started)) {
        if (peer_closed(fd)) {
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
    size_t sent;   /* bytes of job->text already sent */
    size_t lp_sent; /* entries of job->lp already sent */
    char *pending; /* an event not yet fully copied out */
    size_t plen, poff;
};

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
            fill_choice(choice, true, true, "assistant", "", NULL, NULL);
            stream_set(st, root);
            return true;
        }
    }
    if (st->phase == SP_TEXT) {
        pthread_mutex_lock(&w->mu);
        struct serve_job *job = st->job;
        while (job->len == st->sent && job->n_lp == st->lp_sent && job->state != JOB_DONE) {
            if (peer_closed(st->fd)) {
                job->cancelled = true;
                pthread_mutex_unlock(&w->mu);
                return false;
            }
            wait_tick(w);
        }
        if (job->len > st->sent || job->n_lp > st->lp_sent) {
            char *piece = malloc(job->len - st->sent + 1);
            if (piece) { /* no text yet when the first tokens print nothing */
                if (job->len > st->sent) memcpy(piece, job->text + st->sent, job->len - st->sent);
                piece[job->len - st->sent] = '\0';
            }
            st->sent = job->len;
            cJSON *lp = serve_logprobs_json(w->model, job, st->lp_sent, job->n_lp);
            st->lp_sent = job->n_lp;
            pthread_mutex_unlock(&w->mu);
            if (!piece) {
                cJSON_Delete(lp);
                return false;
            }
            cJSON *root = envelope(st->s, st->id, chat, true, &choice);
            fill_choice(choice, chat, true, NULL, piece, lp, NULL);
            free(piece);
            stream_set(st, root);
            return true;
        }
        pthread_mutex_unlock(&w->mu);
        st->phase = SP_USAGE;
        if (job->http_status) { /* failed after the stream began: an error event */
            char *e = error_json((unsigned)job->http_status, job->error);
            cJSON *root = e ? cJSON_Parse(e) : NULL;
            free(e);
            if (!root) return false;
            stream_set(st, root);
            st->phase = SP_DONE_LINE;
            return true;
        }
        cJSON *root = envelope(st->s, st->id, chat, true, &choice);
        fill_choice(choice, chat, true, NULL, chat ? NULL : "", NULL, job->finish_reason);
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
        free(st->pending);
        st->pending = strdup("data: [DONE]\n\n");
        st->plen = st->pending ? strlen(st->pending) : 0;
        st->poff = 0;
        return st->pending != NULL;
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
    struct serve_job *job = serve_worker_submit(&s->w, &req);
    if (!job) {
        serve_request_free(&req);
        snprintf(msg, sizeof msg, "the server is busy: %d requests already wait (--queue)",
                 s->o->queue_max);
        return send_error(s, c, 503, msg);
    }
    int fd = connection_fd(c);
    pthread_mutex_lock(&s->w.mu);
    bool present = wait_job(&s->w, job, fd, !job->req.stream);
    int status = job->http_status;
    snprintf(msg, sizeof msg, "%s", job->error);
    pthread_mutex_unlock(&s->w.mu);
    if (!present) {
        serve_job_release(&s->w, job);
        return MHD_NO; /* the client is gone: close */
    }
    if (status) {
        serve_job_release(&s->w, job);
        return send_error(s, c, (unsigned)status, msg);
    }
    char id[48];
    snprintf(id, sizeof id, "%s-%llu", chat ? "chatcmpl" : "cmpl", (unsigned long long)n);
    if (!job->req.stream) { /* the job is done: only this thread reads it now */
        cJSON *choice;
        cJSON *root = envelope(s, id, chat, false, &choice);
        fill_choice(choice, chat, false, "assistant", job->text ? job->text : "",
                    serve_logprobs_json(s->w.model, job, 0, job->n_lp), job->finish_reason);
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
    snprintf(st->id, sizeof st->id, "%s", id);
    struct MHD_Response *r =
        MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 4096, stream_read, st, stream_free);
    if (!r) {
        stream_free(st);
        return MHD_NO;
    }
    MHD_add_response_header(r, "Content-Type", "text/event-stream");
    MHD_add_response_header(r, "Cache-Control", "no-cache");
    MHD_add_response_header(r, "Access-Control-Allow-Origin", "*");
    enum MHD_Result ret = MHD_queue_response(c, MHD_HTTP_OK, r);
    MHD_destroy_response(r);
    return ret;
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

static bool authorized(const struct server *s, struct MHD_Connection *c) {
    if (!s->o->api_key) return true;
    const char *h = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Authorization");
    if (!h || strncmp(h, "Bearer ", 7) != 0) return false;
    const char *key = s->o->api_key;
    size_t a = strlen(h + 7);
    size_t b = strlen(key);
    unsigned diff = a != b;
    for (size_t i = 0; i < a && i < b; i++) /* no early exit: the time does not tell the key */
        diff |= (unsigned)(h[7 + i] ^ key[i]);
    return diff == 0;
}

static enum MHD_Result dispatch(struct server *s, struct MHD_Connection *c, const char *url,
                                const char *method, struct conn *cn) {
    if (!strcmp(method, "OPTIONS")) return send_preflight(c); /* CORS preflight */
    size_t i = 0;
    const size_t n_routes = sizeof routes / sizeof routes[0];
    while (i < n_routes && strcmp(url, routes[i].path) != 0)
        i++;
    if (i == n_routes) {
        char msg[160];
        snprintf(msg, sizeof msg, "no route %.100s", url);
        return send_error(s, c, 404, msg);
    }
    if (strcmp(method, routes[i].method) != 0) {
        return send_method_not_allowed(s, c, routes[i].method, method, url);
    }
    if (routes[i].route != ROUTE_HEALTH && !authorized(s, c)) {
        return send_error(s, c, 401, "missing or wrong API key (Authorization: Bearer KEY)");
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
    case ROUTE_COMPLETIONS:
        return generate(s, c, cn, false);
    case ROUTE_CHAT:
        return generate(s, c, cn, true);
    default:
        return send_error(s, c, 404, "no such route");
    }
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url,
                                  const char *method, const char *version, const char *upload_data,
                                  size_t *upload_data_size, void **con_cls) {
    (void)version;
    struct server *s = cls;
    struct conn *cn = *con_cls;
    if (!cn) { /* the headers are in; the body follows */
        cn = calloc(1, sizeof *cn);
        if (!cn) return MHD_NO;
        *con_cls = cn;
        pthread_mutex_lock(&s->w.mu);
        s->w.m.http_requests++;
        pthread_mutex_unlock(&s->w.mu);
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
        if (cn->len + n + 1 > cn->cap) {
            size_t cap = cn->cap ? cn->cap : 4096;
            while (cap < cn->len + n + 1)
                cap *= 2;
            char *b = realloc(cn->body, cap);
            if (!b) return MHD_NO;
            cn->body = b;
            cn->cap = cap;
        }
        memcpy(cn->body + cn->len, upload_data, n);
        cn->len += n;
        cn->body[cn->len] = '\0';
        return MHD_YES;
    }
    return dispatch(s, c, url, method, cn);
}

static void on_completed(void *cls, struct MHD_Connection *c, void **con_cls,
                         enum MHD_RequestTerminationCode why) {
    (void)cls;
    (void)c;
    (void)why;
    struct conn *cn = *con_cls;
    if (!cn) return;
    free(cn->body);
    free(cn);
    *con_cls = NULL;
}

int serve_run(const struct serve_options *o, struct moeinf_model *model,
              struct moeinf_context *ctx) {
    struct server s = {.o = o, .started = (long)time(NULL)};
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
    if (!serve_worker_start(&s.w, model, ctx, o->n_ctx, o->n_batch, o->queue_max, o->eamc_path,
                            o->eamc_every, &err)) {
        freeaddrinfo(ai);
        fprintf(stderr, "moeinf: %s\n", err.msg);
        return 1;
    }
    unsigned flags = MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD |
                     MHD_USE_AUTO | MHD_USE_ERROR_LOG;
    if (ai->ai_family == AF_INET6) flags |= MHD_USE_IPv6;
    struct MHD_Daemon *d = MHD_start_daemon(
        flags, 0, NULL, NULL, on_request, &s, MHD_OPTION_SOCK_ADDR, ai->ai_addr,
        MHD_OPTION_NOTIFY_COMPLETED, on_completed, &s, MHD_OPTION_CONNECTION_LIMIT,
        (unsigned)(o->queue_max + 16), MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)60, MHD_OPTION_END);
    freeaddrinfo(ai);
    if (!d) {
        fprintf(stderr,
                "moeinf: cannot listen on %s port %d (in use, or not an address of "
                "this machine)\n",
                o->host, o->port);
        serve_worker_stop(&s.w);
        serve_worker_destroy(&s.w);
        return 1;
    }
    const union MHD_DaemonInfo *di = MHD_get_daemon_info(d, MHD_DAEMON_INFO_BIND_PORT);
    printf("moeinf: listening on http://%s:%u\n", o->host, di ? (unsigned)di->port : 0u);
    fflush(stdout);

    /* SIGINT and SIGTERM were blocked in every thread (cmd_serve): wait for one here. */
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGTERM);
    int sig = 0;
    sigwait(&set, &sig);
    fprintf(stderr, "moeinf: stopping\n");
    serve_worker_stop(&s.w); /* fails what waits, so the handlers return */
    MHD_stop_daemon(d);
    serve_worker_destroy(&s.w);
    return 0;
}
