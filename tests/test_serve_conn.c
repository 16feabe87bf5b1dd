/*
 * test_serve_conn.c - `moeinf serve`'s connections, shutdown, API key and CORS, through raw
 * sockets (and curl for the long requests) against tiny-mixtral-Q8_0:
 *   - 200 slow connections from 127.0.0.1 leave /health from 127.0.0.2 answering within 1 s
 *     (the deadline the issue set); 127.0.0.1 keeps only --max-conns-per-ip of them; a request
 *     that trickles in and an idle keep-alive connection are closed by the server;
 *   - a connection past capacity is answered 503, not reset;
 *   - SIGTERM: a running stream ends with an error event (no [DONE]), a running or waiting
 *     non-streamed request and a waiting stream get 503 objects;
 *   - the API key: scheme in any case, two headers 400, no path or method echoed before the
 *     key, --api-key-file over MOEINF_API_KEY, and the refused sources;
 *   - CORS only with --cors; HEAD; a generation failing mid-stream counts as an error; the
 *     IPv6 URL in brackets; a client that half-closes still gets its answer.
 * Linux routes all of 127/8 to the loopback, so each 127.0.x.y is an address of its own.
 */
// ctest-labels: threads
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "gguf/gguf.h"
#include "serve_proc.h"
#include "test.h"

#define MODEL "testdata/models/tiny-mixtral-Q8_0.gguf"

static char model_path[1024];

/* serve_proc_start with the test model when model is NULL. */
static bool server_start_at(struct server *s, const char *tag, const char *env, const char *host,
                            const char *model, const char *args, char *err, size_t err_size) {
    return serve_proc_start(s, tag, env, host, model ? model : model_path, args, err, err_size);
}

static bool server_start(struct server *s, const char *tag, const char *env, const char *args) {
    return server_start_at(s, tag, env, "127.0.0.1", NULL, args, NULL, 0);
}

static int server_stop(struct server *s) { return serve_proc_stop(s); }

/* ---- raw sockets ---------------------------------------------------------------------------- */

/* A TCP connection from `from` (an address of 127/8; NULL: any) to 127.0.0.1:port; -1 when
 * refused. */
static int tcp_connect(const char *from, int port) {
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return -1;
    struct sockaddr_in a = {.sin_family = AF_INET};
    if (from) {
        inet_pton(AF_INET, from, &a.sin_addr);
        if (bind(fd, (struct sockaddr *)&a, sizeof a) != 0) {
            close(fd);
            return -1;
        }
    }
    struct sockaddr_in to = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    inet_pton(AF_INET, "127.0.0.1", &to.sin_addr);
    if (connect(fd, (struct sockaddr *)&to, sizeof to) != 0) {
        close(fd);
        return -1;
    }
    return fd;
}

static bool send_text(int fd, const char *s) {
    size_t n = strlen(s);
    while (n) {
        ssize_t w = send(fd, s, n, MSG_NOSIGNAL);
        if (w <= 0) return false;
        s += w;
        n -= (size_t)w;
    }
    return true;
}

/*
 * Reads into buf (NUL-ended) until `needle` is in it (needle NULL: until the server closes),
 * the server closes or resets (*closed), or `timeout` seconds pass. Returns the bytes read.
 */
static size_t read_for(int fd, const char *needle, double timeout, char *buf, size_t size,
                       bool *closed) {
    size_t len = 0;
    buf[0] = '\0';
    bool gone = false;
    for (double t0 = serve_now(); !gone && serve_now() - t0 < timeout;) {
        if (needle && strstr(buf, needle)) break;
        struct pollfd p = {.fd = fd, .events = POLLIN};
        if (poll(&p, 1, 50) <= 0) continue;
        ssize_t r = recv(fd, buf + len, size - 1 - len, 0);
        if (r <= 0) {
            gone = r == 0 || errno != EINTR;
            continue;
        }
        len += (size_t)r;
        buf[len] = '\0';
        if (len + 1 == size) break;
    }
    if (closed) *closed = gone;
    return len;
}

/* The final status of a raw answer (interim 1xx skipped); 0 when there is none. */
static int status_of(const char *resp) {
    for (const char *p = resp; (p = strstr(p, "HTTP/1.")) != NULL; p += 7) {
        int st = (int)strtol(p + 9, NULL, 10);
        if (st >= 200) return st;
    }
    return 0;
}

/* One request on a fresh connection from `from`, "Connection: close"; the status (0: none). */
static int raw_request(int port, const char *from, const char *method, const char *path,
                       const char *headers, const char *body, char *resp, size_t size) {
    char req[8192];
    char cl[64] = "";
    if (body) snprintf(cl, sizeof cl, "Content-Length: %zu\r\n", strlen(body));
    snprintf(req, sizeof req, "%s %s HTTP/1.1\r\nHost: t\r\nConnection: close\r\n%s%s\r\n%s",
             method, path, headers ? headers : "", cl, body ? body : "");
    resp[0] = '\0';
    int fd = tcp_connect(from, port);
    if (fd < 0) return 0;
    bool ok = send_text(fd, req);
    if (ok) read_for(fd, NULL, 60, resp, size, NULL);
    close(fd);
    return status_of(resp);
}

/* A metric's value from /metrics (-1 when absent or no answer). */
static double metric(int port, const char *name) {
    char resp[16384];
    if (raw_request(port, NULL, "GET", "/metrics", NULL, NULL, resp, sizeof resp) != 200) {
        return -1;
    }
    return serve_metric(resp, name);
}

/* Waits (up to 60 s) until the metric reads `value`. */
static bool metric_reaches(int port, const char *name, double value) {
    for (double t0 = serve_now(); serve_now() - t0 < 60; usleep(20000))
        if (metric(port, name) == value) return true;
    return false;
}

/* ---- 1: slow clients, per-address limit, deadlines ------------------------------------------ */

#define N_SLOW 200

static void test_slow_clients_lock_no_one_out(void) {
    struct server s;
    bool up = server_start(&s, "slow", NULL, "--request-timeout 3 --idle-timeout 1");
    CHECK(up);
    if (!up) return;
    static int slow[N_SLOW];
    for (int i = 0; i < N_SLOW; i++) { /* a header line each, never the end of the headers */
        slow[i] = tcp_connect("127.0.0.1", s.port);
        if (slow[i] >= 0) send_text(slow[i], "GET /health HTTP/1.1\r\nHost: t\r\n");
    }
    /* The item's deadline: another address is answered within 1 s. (The server answers
     * /health in milliseconds; 1 s is what the issue asks, far above a loaded CI machine's.) */
    char resp[4096];
    double t0 = serve_now();
    int st = raw_request(s.port, "127.0.0.2", "GET", "/health", NULL, NULL, resp, sizeof resp);
    double took = serve_now() - t0;
    CHECK_MSG(st == 200 && took < 1.0,
              "/health from 127.0.0.2 with %d slow connections open: "
              "status %d after %.3f s",
              N_SLOW, st, took);
    /* 127.0.0.1 holds at most --max-conns-per-ip (8) of them: the others were closed at once.
     * Ending the requests now (well within --request-timeout), exactly 8 are answered. */
    int answered = 0;
    for (int i = 0; i < N_SLOW; i++) {
        if (slow[i] < 0) continue;
        if (send_text(slow[i], "\r\n")) {
            read_for(slow[i], "\"status\"", 5, resp, sizeof resp, NULL);
            if (status_of(resp) == 200) answered++;
        }
    }
    CHECK_MSG(answered == 8, "%d of the %d connections from 127.0.0.1 answered, want 8", answered,
              N_SLOW);
    for (int i = 0; i < N_SLOW; i++)
        if (slow[i] >= 0) close(slow[i]);

    /* A request that trickles in (a byte every 0.2 s) is closed by the deadline (3 s), though
     * never idle. The bound (10 s) is generous; libmicrohttpd's idle timeout alone (60 s)
     * would never close it. */
    int fd = tcp_connect("127.0.0.3", s.port);
    CHECK(fd >= 0);
    const char *drip =
        "GET /health HTTP/1.1\r\nX-Slow: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
        "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";
    bool closed = false;
    t0 = serve_now();
    for (size_t i = 0; fd >= 0 && drip[i] && serve_now() - t0 < 10; i++) {
        char one[2] = {drip[i], '\0'};
        if (!send_text(fd, one)) {
            closed = true;
            break;
        }
        read_for(fd, NULL, 0.2, resp, sizeof resp, &closed);
        if (closed) break;
    }
    CHECK_MSG(closed, "a request trickling in for %.1f s was not closed", serve_now() - t0);
    if (fd >= 0) close(fd);

    /* A keep-alive connection left idle after its answer is closed (--idle-timeout 1). */
    fd = tcp_connect("127.0.0.4", s.port);
    CHECK(fd >= 0);
    if (fd >= 0) {
        CHECK(send_text(fd, "GET /health HTTP/1.1\r\nHost: t\r\n\r\n"));
        read_for(fd, "\"ok\"", 10, resp, sizeof resp, &closed);
        CHECK_EQ_INT(status_of(resp), 200);
        CHECK(!closed);
        read_for(fd, NULL, 10, resp, sizeof resp, &closed);
        CHECK_MSG(closed, "an idle keep-alive connection was kept over 10 s");
        close(fd);
    }
    CHECK_EQ_INT(server_stop(&s), 0);
}

/* Past capacity (queue 0 + parallel 1 + 16), a connection is answered 503, not reset: 17 idle
 * connections fill it. */
static void test_over_capacity_is_503(void) {
    struct server s;
    bool up = server_start(&s, "cap", NULL, "--queue 0 --parallel 1 --max-conns-per-ip 0");
    CHECK(up);
    if (!up) return;
    int idle[17];
    for (int i = 0; i < 17; i++)
        idle[i] = tcp_connect(NULL, s.port);
    /* the 17 are accepted before the 18th: wait until the server counts them (its metrics
     * are another connection, served from the reserve, answered 503 while they are open) */
    char resp[4096];
    int st = 0;
    for (double t0 = serve_now(); serve_now() - t0 < 10 && st != 503; usleep(20000))
        st = raw_request(s.port, NULL, "GET", "/health", NULL, NULL, resp, sizeof resp);
    CHECK_EQ_INT(st, 503);
    CHECK_STR_CONTAINS(resp, "too many open connections");
    CHECK_STR_CONTAINS(resp, "Connection: close");
    int refused = st == 503;
    for (int i = 0; i < 17; i++)
        if (idle[i] >= 0) close(idle[i]);
    /* and once they are closed, the server answers again */
    for (double t0 = serve_now(); serve_now() - t0 < 10 && st != 200; usleep(20000)) {
        st = raw_request(s.port, NULL, "GET", "/health", NULL, NULL, resp, sizeof resp);
        refused += st == 503;
    }
    CHECK_EQ_INT(st, 200);
    /* each of those 503s is counted apart from the queue's rejections */
    CHECK_EQ_INT((int)metric(s.port, "moeinf_connections_refused_total"), refused);
    CHECK_EQ_INT((int)metric(s.port, "moeinf_requests_rejected_total"), 0);
    CHECK_EQ_INT(server_stop(&s), 0);
}

/* ---- 2: shutdown ----------------------------------------------------------------------------- */

struct bg_curl {
    pid_t pid;
    char body[512], status[512];
};

/* curl in the background: POST body to /v1/completions; its body and status into files. */
static void bg_post(struct bg_curl *b, const char *tag, int port, const char *json) {
    char name[64];
    char url[128];
    snprintf(name, sizeof name, "conn-%s.body", tag);
    test_tmp_path(name, b->body, sizeof b->body);
    snprintf(name, sizeof name, "conn-%s.status", tag);
    test_tmp_path(name, b->status, sizeof b->status);
    remove(b->body);
    remove(b->status);
    snprintf(url, sizeof url, "http://127.0.0.1:%d/v1/completions", port);
    b->pid = fork();
    if (b->pid == 0) {
        FILE *f = freopen(b->status, "w", stdout);
        if (!f) _exit(127);
        execlp("curl", "curl", "-s", "-N", "--max-time", "120", "-o", b->body, "-w", "%{http_code}",
               "-d", json, url, (char *)NULL);
        _exit(127);
    }
}

/* Waits for it; its HTTP status (0: none), its body into buf. */
static int bg_wait(struct bg_curl *b, char *buf, size_t size) {
    int st = 0;
    waitpid(b->pid, &st, 0);
    char status[32];
    test_read_text(b->status, status, sizeof status);
    test_read_text(b->body, buf, size);
    remove(b->status);
    remove(b->body);
    return (int)strtol(status, NULL, 10);
}

#define LONG_STREAM  "{\"prompt\": \"Go\", \"max_tokens\": 4000, \"stream\": true}"
#define LONG_REQUEST "{\"prompt\": \"Go\", \"max_tokens\": 4000}"

static void test_shutdown_answers_503(void) {
    static char body[1 << 20];
    /* a stream running, a request and a stream waiting */
    struct server s;
    bool up = server_start(&s, "stop1", NULL, "-c 4096 -t 1 --parallel 1");
    CHECK(up);
    if (!up) return;
    struct bg_curl a;
    struct bg_curl b;
    struct bg_curl c;
    bg_post(&a, "a", s.port, LONG_STREAM);
    CHECK(metric_reaches(s.port, "moeinf_busy", 1));
    bg_post(&b, "b", s.port, LONG_REQUEST);
    bg_post(&c, "c", s.port, LONG_STREAM);
    CHECK(metric_reaches(s.port, "moeinf_queue_depth", 2));
    CHECK_EQ_INT(server_stop(&s), 0);
    CHECK_EQ_INT(bg_wait(&a, body, sizeof body), 200); /* the stream had begun */
    CHECK_STR_CONTAINS(body, "data: {\"error\":{\"message\":\"the server is stopping\"");
    CHECK_STR_CONTAINS(body, "\"code\":503");
    CHECK_MSG(!strstr(body, "[DONE]"), "a stream cut by the shutdown ends with [DONE]");
    CHECK_MSG(!strstr(body, "\"finish_reason\":\"length\""), "it says finish_reason length");
    CHECK_EQ_INT(bg_wait(&b, body, sizeof body), 503);
    CHECK_STR_CONTAINS(body, "the server is stopping");
    CHECK_EQ_INT(bg_wait(&c, body, sizeof body), 503);
    CHECK_STR_CONTAINS(body, "the server is stopping");

    /* a non-streamed request running */
    up = server_start(&s, "stop2", NULL, "-c 4096 -t 1");
    CHECK(up);
    if (!up) return;
    bg_post(&a, "a", s.port, LONG_REQUEST);
    CHECK(metric_reaches(s.port, "moeinf_busy", 1));
    CHECK_EQ_INT(server_stop(&s), 0);
    CHECK_EQ_INT(bg_wait(&a, body, sizeof body), 503);
    CHECK_STR_CONTAINS(body, "{\"error\":{\"message\":\"the server is stopping\"");
}

/* ---- 3 and 4: the API key and CORS ----------------------------------------------------------- */

static void test_api_key_and_cors(void) {
    char key_file[512];
    test_tmp_path("conn-key.txt", key_file, sizeof key_file);
    FILE *f = fopen(key_file, "w");
    CHECK(f != NULL);
    if (!f) return;
    fputs("filekey\n", f);
    fclose(f);
    char args[1024];
    snprintf(args, sizeof args,
             "--api-key-file '%s' --cors http://example.test --cors http://b.test", key_file);
    struct server s;
    /* the option wins over the environment */
    bool up = server_start(&s, "key", "MOEINF_API_KEY=envkey", args);
    CHECK(up);
    if (!up) return;
    char resp[8192];
    int p = s.port;
    CHECK_EQ_INT(raw_request(p, NULL, "GET", "/v1/models", "Authorization: Bearer filekey\r\n",
                             NULL, resp, sizeof resp),
                 200);
    CHECK_EQ_INT(raw_request(p, NULL, "GET", "/v1/models", "Authorization: bearer filekey\r\n",
                             NULL, resp, sizeof resp),
                 200);
    CHECK_EQ_INT(raw_request(p, NULL, "GET", "/v1/models", "Authorization: BEARER filekey\r\n",
                             NULL, resp, sizeof resp),
                 200);
    CHECK_EQ_INT(raw_request(p, NULL, "GET", "/v1/models", "Authorization: Bearer envkey\r\n", NULL,
                             resp, sizeof resp),
                 401);
    CHECK_EQ_INT(raw_request(p, NULL, "GET", "/v1/models", "Authorization: Basic filekey\r\n", NULL,
                             resp, sizeof resp),
                 401);
    CHECK_EQ_INT(raw_request(p, NULL, "GET", "/v1/models",
                             "Authorization: Bearer filekey\r\nAuthorization: Bearer x\r\n", NULL,
                             resp, sizeof resp),
                 400);
    CHECK_STR_CONTAINS(resp, "more than one Authorization header");
    /* before the key, neither path nor method is echoed, and unknown paths are a 401 */
    CHECK_EQ_INT(raw_request(p, NULL, "GET", "/secret-path-x", NULL, NULL, resp, sizeof resp), 401);
    CHECK_MSG(!strstr(resp, "secret-path-x"), "the 401 echoes the path: %s", resp);
    CHECK_EQ_INT(raw_request(p, NULL, "PURGEX", "/v1/models", NULL, NULL, resp, sizeof resp), 401);
    CHECK_MSG(!strstr(resp, "PURGEX"), "the 401 echoes the method: %s", resp);
    /* with it: 404 and 405 (with Allow), still without echoes */
    CHECK_EQ_INT(raw_request(p, NULL, "GET", "/secret-path-x", "Authorization: Bearer filekey\r\n",
                             NULL, resp, sizeof resp),
                 404);
    CHECK_MSG(!strstr(resp, "secret-path-x"), "the 404 echoes the path: %s", resp);
    CHECK_EQ_INT(raw_request(p, NULL, "PURGEX", "/v1/models", "Authorization: Bearer filekey\r\n",
                             NULL, resp, sizeof resp),
                 405);
    CHECK_MSG(!strstr(resp, "PURGEX"), "the 405 echoes the method: %s", resp);
    CHECK_STR_CONTAINS(resp, "Allow: GET, HEAD");
    /* /health never needs the key */
    CHECK_EQ_INT(raw_request(p, NULL, "GET", "/health", NULL, NULL, resp, sizeof resp), 200);

    /* CORS, for the two origins given */
    CHECK_EQ_INT(raw_request(p, NULL, "GET", "/health", "Origin: http://b.test\r\n", NULL, resp,
                             sizeof resp),
                 200);
    CHECK_STR_CONTAINS(resp, "Access-Control-Allow-Origin: http://b.test\r\n");
    CHECK_STR_CONTAINS(resp, "Vary: Origin");
    CHECK_EQ_INT(raw_request(p, NULL, "GET", "/health", "Origin: http://evil.test\r\n", NULL, resp,
                             sizeof resp),
                 200);
    CHECK_MSG(!strstr(resp, "Access-Control-Allow-Origin"), "evil.test allowed: %s", resp);
    CHECK_STR_CONTAINS(resp, "Vary: Origin");
    CHECK_EQ_INT(raw_request(p, NULL, "OPTIONS", "/v1/chat/completions",
                             "Origin: http://example.test\r\n", NULL, resp, sizeof resp),
                 204);
    CHECK_STR_CONTAINS(resp, "Access-Control-Allow-Origin: http://example.test\r\n");
    CHECK_STR_CONTAINS(resp, "Access-Control-Allow-Headers: Authorization, Content-Type");
    CHECK_EQ_INT(server_stop(&s), 0);

    /* the environment alone; --cors '*' */
    up = server_start(&s, "key2", "MOEINF_API_KEY=envkey", "--cors '*'");
    CHECK(up);
    if (!up) return;
    p = s.port;
    CHECK_EQ_INT(raw_request(p, NULL, "GET", "/v1/models", "Authorization: Bearer envkey\r\n", NULL,
                             resp, sizeof resp),
                 200);
    CHECK_EQ_INT(raw_request(p, NULL, "GET", "/v1/models", NULL, NULL, resp, sizeof resp), 401);
    CHECK_EQ_INT(raw_request(p, NULL, "GET", "/health", "Origin: http://any.test\r\n", NULL, resp,
                             sizeof resp),
                 200);
    CHECK_STR_CONTAINS(resp, "Access-Control-Allow-Origin: *\r\n");
    CHECK_EQ_INT(server_stop(&s), 0);

    /* no --cors: no CORS headers, and OPTIONS is a method like any other */
    up = server_start(&s, "nocors", NULL, "");
    CHECK(up);
    if (!up) return;
    p = s.port;
    CHECK_EQ_INT(raw_request(p, NULL, "GET", "/health", "Origin: http://any.test\r\n", NULL, resp,
                             sizeof resp),
                 200);
    CHECK_MSG(!strstr(resp, "Access-Control-"), "CORS headers without --cors: %s", resp);
    CHECK_EQ_INT(raw_request(p, NULL, "OPTIONS", "/v1/completions", "Origin: http://any.test\r\n",
                             NULL, resp, sizeof resp),
                 405);
    CHECK_MSG(!strstr(resp, "Access-Control-"), "CORS headers without --cors: %s", resp);
    /* HEAD wherever GET */
    CHECK_EQ_INT(raw_request(p, NULL, "HEAD", "/health", NULL, NULL, resp, sizeof resp), 200);
    CHECK_MSG(!strstr(resp, "\"ok\""), "HEAD has a body: %s", resp);
    CHECK_EQ_INT(raw_request(p, NULL, "HEAD", "/v1/models", NULL, NULL, resp, sizeof resp), 200);
    CHECK_EQ_INT(raw_request(p, NULL, "HEAD", "/metrics", NULL, NULL, resp, sizeof resp), 200);
    CHECK_EQ_INT(server_stop(&s), 0);
    remove(key_file);
}

/* The key's sources, refused before the model loads. */
static void test_api_key_sources_refused(void) {
    char key_file[512];
    char empty_file[512];
    char cmd[4096];
    char out[1024];
    char err[1024];
    test_tmp_path("conn-key2.txt", key_file, sizeof key_file);
    test_tmp_path("conn-key-empty.txt", empty_file, sizeof empty_file);
    FILE *f = fopen(key_file, "w");
    if (f) {
        fputs("k\n", f);
        fclose(f);
    }
    f = fopen(empty_file, "w");
    if (f) {
        fputs("\n", f);
        fclose(f);
    }

    static const struct {
        const char *env, *args, *says;
    } cases[] = {
        {"", "--api-key a --api-key-file KEY", "give the key once"},
        {"", "--api-key-file EMPTY", "is empty"},
        {"", "--api-key-file /nonexistent/key", "--api-key-file /nonexistent/key"},
        {"MOEINF_API_KEY=", "", "MOEINF_API_KEY is set but empty"},
        {"", "--api-key 'a b'", "--api-key must not"},
        {"", "--cors example.test", "--cors 'example.test' is not an origin"},
        {"", "--cors http://example.test/", "is not an origin"},
        {"", "--max-conns-per-ip -1", "--max-conns-per-ip"},
        {"", "--request-timeout 0", "--request-timeout"},
    };

    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char args[1024];
        snprintf(args, sizeof args, "%s", cases[i].args);
        char *k = strstr(args, "KEY");
        char tmp[1024];
        if (k) {
            snprintf(tmp, sizeof tmp, "%.*s'%s'%s", (int)(k - args), args, key_file, k + 3);
            snprintf(args, sizeof args, "%s", tmp);
        }
        k = strstr(args, "EMPTY");
        if (k) {
            snprintf(tmp, sizeof tmp, "%.*s'%s'%s", (int)(k - args), args, empty_file, k + 5);
            snprintf(args, sizeof args, "%s", tmp);
        }
        snprintf(cmd, sizeof cmd, "%s '%s' serve -m /nonexistent/model.gguf --port 0 %s",
                 cases[i].env, test_moeinf_bin(), args);
        int rc = test_run_shell("conn-keys", cmd, out, sizeof out, err, sizeof err);
        CHECK_MSG(rc == 2, "case %zu (%s): exit %d: %s", i, cases[i].args, rc, err);
        CHECK_MSG(strstr(err, cases[i].says) != NULL, "case %zu: '%s' lacks '%s'", i, err,
                  cases[i].says);
    }
    remove(key_file);
    remove(empty_file);
}

/* ---- 7: smaller points ----------------------------------------------------------------------- */

/* A generation that fails after its stream began (a model file cut short in its experts, read
 * through the expert cache): an error event, no [DONE], and one HTTP error counted. */
static void test_stream_failure_counts(void) {
    char copy[512];
    test_tmp_path("conn-cut.gguf", copy, sizeof copy);
    char cmd[2048];
    char out[256];
    char err[256];
    snprintf(cmd, sizeof cmd, "cp '%s' '%s' && chmod u+w '%s'", model_path, copy, copy);
    CHECK_EQ_INT(test_run_shell("conn-cp", cmd, out, sizeof out, err, sizeof err), 0);
    struct server s;
    char serr[1024];
    bool up = server_start_at(&s, "cut", NULL, "127.0.0.1", copy,
                              "--expert-cache 50% --expert-io cached", serr, sizeof serr);
    CHECK_MSG(up, "%s", serr);
    if (!up) return;
    struct moeinf_gguf *g = NULL;
    struct moeinf_error e = {0};
    CHECK(moeinf_gguf_open(model_path, &g, &e) == MOEINF_OK);
    const struct moeinf_gguf_tensor *t =
        g ? moeinf_gguf_find_tensor(g, "blk.0.ffn_gate_exps.weight") : NULL;
    CHECK(t != NULL);
    if (t) CHECK(truncate(copy, (off_t)t->offset) == 0);
    moeinf_gguf_free(g);
    char resp[65536];
    int st = raw_request(s.port, NULL, "POST", "/v1/completions", NULL,
                         "{\"prompt\": \"Once upon a time\", \"max_tokens\": 4, \"stream\": true}",
                         resp, sizeof resp);
    CHECK_EQ_INT(st, 200);
    CHECK_STR_CONTAINS(resp, "text/event-stream");
    CHECK_STR_CONTAINS(resp, "data: {\"error\":");
    CHECK_STR_CONTAINS(resp, "\"code\":500");
    CHECK_MSG(!strstr(resp, "[DONE]"), "a failed stream ends with [DONE]: %s", resp);
    CHECK_EQ_INT(metric(s.port, "moeinf_http_errors_total"), 1);
    CHECK_EQ_INT(server_stop(&s), 0);
    remove(copy);
}

/* --host ::1 prints http://[::1]:PORT (skipped where the machine has no IPv6 loopback). */
static void test_ipv6_url(void) {
    struct server s;
    char err[1024];
    if (!server_start_at(&s, "v6", NULL, "::1", NULL, "", err, sizeof err)) {
        if (strstr(err, "cannot listen")) {
            test_skip("no IPv6 loopback here");
            return;
        }
        CHECK_MSG(false, "serve --host ::1 printed no http://[::1]:PORT: %s", err);
        return;
    }
    char cmd[256];
    char out[4096];
    snprintf(cmd, sizeof cmd, "curl -s -g 'http://[::1]:%d/health'", s.port);
    test_run_shell("conn-v6", cmd, out, sizeof out, err, sizeof err);
    CHECK_STR_CONTAINS(out, "\"status\":\"ok\"");
    CHECK_EQ_INT(server_stop(&s), 0);
}

/* A client that half-closes (shutdown(SHUT_WR)) after its request still gets the answer,
 * streamed or not; one that closes while its request runs still cancels it. */
static void test_half_close(void) {
    struct server s;
    bool up = server_start(&s, "half", NULL, "--queue 2 -c 4096 -t 1");
    CHECK(up);
    if (!up) return;
    static const char *const bodies[] = {
        "{\"prompt\": \"Once upon a time\", \"max_tokens\": 6, \"temperature\": 0}",
        "{\"prompt\": \"Once upon a time\", \"max_tokens\": 6, \"temperature\": 0, "
        "\"stream\": true}",
    };
    char resp[65536];
    for (int i = 0; i < 2; i++) {
        char req[1024];
        snprintf(req, sizeof req,
                 "POST /v1/completions HTTP/1.1\r\nHost: t\r\nContent-Length: %zu\r\n\r\n%s",
                 strlen(bodies[i]), bodies[i]);
        int fd = tcp_connect(NULL, s.port);
        CHECK(fd >= 0);
        if (fd < 0) continue;
        CHECK(send_text(fd, req));
        shutdown(fd, SHUT_WR);
        bool closed = false;
        read_for(fd, i ? "[DONE]" : "\"usage\"", 60, resp, sizeof resp, &closed);
        close(fd);
        CHECK_MSG(status_of(resp) == 200, "half-closed client %d: %s", i, resp);
        CHECK_STR_CONTAINS(resp, i ? "data: [DONE]" : "\"finish_reason\":\"length\"");
    }
    /* a long request whose client leaves while it runs: cancelled at its next token (were the
     * close taken for a half-close, the 4000 tokens would run on) */
    int fd = tcp_connect(NULL, s.port);
    CHECK(fd >= 0);
    if (fd >= 0) {
        char req[1024];
        snprintf(req, sizeof req,
                 "POST /v1/completions HTTP/1.1\r\nHost: t\r\nContent-Length: %zu\r\n\r\n%s",
                 strlen(LONG_REQUEST), LONG_REQUEST);
        CHECK(send_text(fd, req));
        CHECK(metric_reaches(s.port, "moeinf_busy", 1));
        close(fd);
    }
    CHECK(metric_reaches(s.port, "moeinf_requests_cancelled_total", 1));
    CHECK_EQ_INT(server_stop(&s), 0);
}

int main(void) {
    if (!test_shared_path(MODEL, model_path, sizeof model_path)) return test_report();
    if (!getenv("MOEINF_BIN")) { // NOLINT(concurrency-mt-unsafe): main thread
        test_skip("MOEINF_BIN unset (run through ctest)");
        return test_report();
    }
    signal(SIGPIPE, SIG_IGN);
    RUN(test_slow_clients_lock_no_one_out);
    RUN(test_over_capacity_is_503);
    RUN(test_shutdown_answers_503);
    RUN(test_api_key_and_cors);
    RUN(test_api_key_sources_refused);
    RUN(test_stream_failure_counts);
    RUN(test_ipv6_url);
    RUN(test_half_close);
    return test_report();
}
