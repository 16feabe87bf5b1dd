/* cmd_serve.c - moeinf serve: options, the model, then the HTTP server (src/serve). */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "app/model_args.h"
#include "cli/cli.h"
#include "serve/serve.h"

static void usage(FILE *out) {
    fprintf(out,
            "usage: moeinf serve [-m MODEL] [--host H] [--port P] [options]\n\n"
            "An OpenAI-compatible HTTP server: GET /health, GET /v1/models, POST\n"
            "/v1/completions, POST /v1/chat/completions (stream: true for server-sent events),\n"
            "GET /metrics (Prometheus), GET / (a web page: a chat and the expert cache's\n"
            "panel); HEAD wherever GET. Up to --parallel requests generate together\n"
            "(continuous batching: one forward pass per iteration for all of them, each in its\n"
            "own sequence of the context); others wait in a queue. Stops on SIGINT or SIGTERM,\n"
            "answering the running and the waiting requests 503 first.\n"
            "  --host H           address to listen on (default 127.0.0.1)\n"
            "  --port P           TCP port; 0 = any free port (default 8080). The address is\n"
            "                     printed as 'moeinf: listening on http://H:P' (IPv6: [H])\n"
            "  --api-key KEY      require 'Authorization: Bearer KEY' (the scheme in any\n"
            "                     case; not for /health nor the page at /)\n"
            "  --api-key-file F   the same, the key read from file F (less a final newline).\n"
            "                     Without either, the environment variable MOEINF_API_KEY;\n"
            "                     the file and the variable keep the key out of ps\n"
            "  --cors ORIGIN      CORS headers and preflights for ORIGIN (scheme://host[:port],\n"
            "                     or '*' for any); repeatable. Default: no CORS headers\n"
            "  --max-conns-per-ip N  connections one address may hold open (default %d; 0: no\n"
            "                     limit); 127.0.0.1 counts as one address like any other\n"
            "  --request-timeout S  a request must arrive complete within S seconds of the\n"
            "                     connection's opening or its last answer (default %d)\n"
            "  --idle-timeout S   close a connection that sends nothing for S seconds between\n"
            "                     requests (default %d)\n"
            "  --chat-template T  %s;\n"
            "                     default: the model's own\n"
            "  --reasoning-format F  auto (default) or deepseek: a thinking model's thinking in\n"
            "                     reasoning_content, its answer in content; none: all in\n"
            "                     content, as generated. A request's reasoning_format wins\n"
            "  --reasoning on|off|auto  off: answers without thinking (enable_thinking false:\n"
            "                     Qwen3.5, GLM, DeepSeek-R1; gpt-oss gets low effort) unless a\n"
            "                     request says; on and auto (default) leave it to the template\n"
            "  --queue N          requests that may wait while one runs (default %d); more get\n"
            "                     503. N + 16 connections are served; 16 more get 503\n"
            "  --max-body BYTES   largest request body (default %u); larger get 413\n"
            "  --alias NAME       the model name /v1/models gives (default: the file name)\n"
            "  --eamc-every N     with --eamc: also save it after every N requests (default\n"
            "                     %d), not only at shutdown\n"
            "%s",
            SERVE_CONNS_PER_IP_DEFAULT, SERVE_REQUEST_TIMEOUT_DEFAULT, SERVE_IDLE_TIMEOUT_DEFAULT,
            "mistral|chatml|llama3|deepseek2|deepseek3|deepseek-r1|olmoe|\n"
            "                     qwen35|harmony|glm45|glm47|kimi-k2|kimi-k2-thinking",
            SERVE_QUEUE_DEFAULT, SERVE_BODY_MAX_DEFAULT, SERVE_EAMC_EVERY_DEFAULT, model_args_help);
}

struct serve_cli {
    struct model_args model;
    struct serve_options so;
    const char *template_name;
    const char *api_key_file;
    int key_sources; /* --api-key and --api-key-file given */
};

/* An origin for --cors: '*', or scheme://host[:port] with no path, space or control byte. */
static bool is_origin(const char *v) {
    if (!strcmp(v, "*")) return true;
    const char *sep = strstr(v, "://");
    if (!sep || sep == v || !sep[3] || v[strlen(v) - 1] == '/') return false;
    if (strchr(sep + 3, '/')) return false;
    for (const char *p = v; *p; p++)
        if ((unsigned char)*p <= ' ' || *p == 0x7f || *p == ',') return false;
    return true;
}

/* A key may not hold spaces or control bytes (it travels in a header). */
static bool key_ok(const char *k) {
    if (!*k) return false;
    for (const char *p = k; *p; p++)
        if ((unsigned char)*p <= ' ' || *p == 0x7f) return false;
    return true;
}

/* Reads --api-key-file into buf (less one final newline). Returns CLI_EXIT_OK or prints why. */
static int read_key_file(const char *path, char *buf, size_t size) {
    FILE *f = fopen(path, "rb");
    if (!f) {
        /* NOLINTNEXTLINE(concurrency-mt-unsafe): the main thread, before any other starts */
        fprintf(stderr, "moeinf serve: --api-key-file %s: %s\n", path, strerror(errno));
        return CLI_EXIT_USAGE;
    }
    size_t n = fread(buf, 1, size, f);
    bool err = ferror(f) != 0;
    fclose(f);
    if (err) {
        fprintf(stderr, "moeinf serve: --api-key-file %s: cannot read it\n", path);
        return CLI_EXIT_USAGE;
    }
    if (n == size) {
        fprintf(stderr, "moeinf serve: --api-key-file %s: longer than %zu bytes\n", path, size - 1);
        return CLI_EXIT_USAGE;
    }
    if (n > 0 && buf[n - 1] == '\n') n--;
    if (n > 0 && buf[n - 1] == '\r') n--;
    buf[n] = '\0';
    if (memchr(buf, '\0', n)) {
        fprintf(stderr, "moeinf serve: --api-key-file %s: holds a NUL byte\n", path);
        return CLI_EXIT_USAGE;
    }
    if (!n) {
        fprintf(stderr, "moeinf serve: --api-key-file %s is empty\n", path);
        return CLI_EXIT_USAGE;
    }
    if (!key_ok(buf)) {
        fprintf(stderr,
                "moeinf serve: --api-key-file %s: the key holds a space or a control "
                "character\n",
                path);
        return CLI_EXIT_USAGE;
    }
    return CLI_EXIT_OK;
}

/* The key: --api-key, --api-key-file or MOEINF_API_KEY (only one of the options; either of
 * them overrides the variable). buf holds a key read from a file. */
static int resolve_key(struct serve_cli *o, char *buf, size_t size) {
    if (o->key_sources > 1) {
        fprintf(stderr, "moeinf serve: give the key once: --api-key or --api-key-file\n");
        return CLI_EXIT_USAGE;
    }
    if (o->api_key_file) {
        int rc = read_key_file(o->api_key_file, buf, size);
        if (rc != CLI_EXIT_OK) return rc;
        o->so.api_key = buf;
        return CLI_EXIT_OK;
    }
    if (o->so.api_key) return CLI_EXIT_OK;
    const char *env = getenv("MOEINF_API_KEY"); // NOLINT(concurrency-mt-unsafe): main thread
    if (!env) return CLI_EXIT_OK;
    if (!key_ok(env)) {
        fprintf(stderr, "moeinf serve: MOEINF_API_KEY is %s\n",
                *env ? "not a key (a space or a control character)" : "set but empty");
        return CLI_EXIT_USAGE;
    }
    o->so.api_key = env;
    return CLI_EXIT_OK;
}

static int parse(int argc, char **argv, struct serve_cli *o) {
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage(stdout);
            return -1;
        }
        int r = model_args_parse("serve", &o->model, argc, argv, &i);
        if (r < 0) return CLI_EXIT_USAGE;
        if (r > 0) continue;
        static const char *const with_value[] = {"--host",
                                                 "--port",
                                                 "--api-key",
                                                 "--queue",
                                                 "--max-body",
                                                 "--chat-template",
                                                 "--alias",
                                                 "--eamc-every",
                                                 "--api-key-file",
                                                 "--cors",
                                                 "--max-conns-per-ip",
                                                 "--request-timeout",
                                                 "--idle-timeout",
                                                 "--reasoning-format",
                                                 "--reasoning",
                                                 NULL};
        if (!cli_is_one_of(a, with_value)) return cli_bad_argument("serve", a, usage);
        const char *val = cli_option_value("serve", argc, argv, &i);
        if (!val) return CLI_EXIT_USAGE;
        long v = 0;
        if (!strcmp(a, "--host")) {
            o->so.host = val;
        } else if (!strcmp(a, "--port")) {
            if (!cli_parse_long("serve", a, val, 0, 65535, &v)) return CLI_EXIT_USAGE;
            o->so.port = (int)v;
        } else if (!strcmp(a, "--api-key")) {
            if (!key_ok(val)) {
                fprintf(stderr, "moeinf serve: --api-key must not be empty or hold a space or a "
                                "control character\n");
                return CLI_EXIT_USAGE;
            }
            o->so.api_key = val;
            o->key_sources++;
        } else if (!strcmp(a, "--api-key-file")) {
            o->api_key_file = val;
            o->key_sources++;
        } else if (!strcmp(a, "--cors")) {
            if (!is_origin(val)) {
                fprintf(stderr,
                        "moeinf serve: --cors '%s' is not an origin (scheme://host[:port]) or "
                        "'*'\n",
                        val);
                return CLI_EXIT_USAGE;
            }
            if (o->so.n_cors == SERVE_MAX_CORS) {
                fprintf(stderr, "moeinf serve: --cors: at most %d origins\n", SERVE_MAX_CORS);
                return CLI_EXIT_USAGE;
            }
            o->so.cors[o->so.n_cors++] = val;
        } else if (!strcmp(a, "--max-conns-per-ip")) {
            if (!cli_parse_long("serve", a, val, 0, 65535, &v)) return CLI_EXIT_USAGE;
            o->so.max_conns_per_ip = (int)v;
        } else if (!strcmp(a, "--request-timeout")) {
            if (!cli_parse_long("serve", a, val, 1, 3600, &v)) return CLI_EXIT_USAGE;
            o->so.request_timeout = (int)v;
        } else if (!strcmp(a, "--idle-timeout")) {
            if (!cli_parse_long("serve", a, val, 1, 3600, &v)) return CLI_EXIT_USAGE;
            o->so.idle_timeout = (int)v;
        } else if (!strcmp(a, "--queue")) {
            if (!cli_parse_long("serve", a, val, 0, 1024, &v)) return CLI_EXIT_USAGE;
            o->so.queue_max = (int)v;
        } else if (!strcmp(a, "--max-body")) {
            if (!cli_parse_long("serve", a, val, 1024, 1L << 30, &v)) return CLI_EXIT_USAGE;
            o->so.body_max = (size_t)v;
        } else if (!strcmp(a, "--eamc-every")) {
            if (!cli_parse_long("serve", a, val, 1, 1L << 30, &v)) return CLI_EXIT_USAGE;
            o->so.eamc_every = (int)v;
        } else if (!strcmp(a, "--chat-template")) {
            o->template_name = val;
        } else if (!strcmp(a, "--reasoning")) {
            if (strcmp(val, "on") != 0 && strcmp(val, "off") != 0 && strcmp(val, "auto") != 0) {
                fprintf(stderr, "moeinf serve: --reasoning '%s' is not on, off or auto\n", val);
                return CLI_EXIT_USAGE;
            }
            o->so.no_thinking = !strcmp(val, "off");
        } else if (!strcmp(a, "--reasoning-format")) {
            if (!serve_reasoning_format_parse(val, &o->so.reasoning_format)) {
                fprintf(stderr,
                        "moeinf serve: --reasoning-format '%s' is not none, auto or deepseek\n",
                        val);
                return CLI_EXIT_USAGE;
            }
        } else {
            o->so.model_id = val;
        }
    }
    return 0;
}

/* The file name without folders and .gguf: the model's name for /v1/models. */
static void model_name(const char *path, char *buf, size_t size) {
    const char *base = path ? strrchr(path, '/') : NULL;
    base = base ? base + 1 : (path ? path : "default-moe.gguf");
    snprintf(buf, size, "%s", base);
    size_t n = strlen(buf);
    if (n > 5 && !strcmp(buf + n - 5, ".gguf")) buf[n - 5] = '\0';
}

int cmd_serve(int argc, char **argv) {
    struct serve_cli o = {0};
    o.model.ctx = moeinf_context_params_default();
    o.model.ctx.n_seq = SERVE_PARALLEL_DEFAULT;
    o.model.model = moeinf_model_params_default();
    o.so.host = "127.0.0.1";
    o.so.port = 8080;
    o.so.queue_max = SERVE_QUEUE_DEFAULT;
    o.so.body_max = SERVE_BODY_MAX_DEFAULT;
    o.so.max_conns_per_ip = SERVE_CONNS_PER_IP_DEFAULT;
    o.so.request_timeout = SERVE_REQUEST_TIMEOUT_DEFAULT;
    o.so.idle_timeout = SERVE_IDLE_TIMEOUT_DEFAULT;
    o.so.reasoning_format = SERVE_REASONING_AUTO;
    int prc = parse(argc, argv, &o);
    if (prc < 0) return CLI_EXIT_OK;
    if (prc > 0) return prc;
    static char key_buf[4096];
    prc = resolve_key(&o, key_buf, sizeof key_buf);
    if (prc != CLI_EXIT_OK) return prc;
    if (o.so.eamc_every && !o.model.experts.eamc) {
        fprintf(stderr, "moeinf serve: --eamc-every needs --eamc FILE\n");
        return CLI_EXIT_USAGE;
    }
    if (o.model.experts.stats || o.model.experts.stats_json) {
        fprintf(stderr, "moeinf serve: --stats and --stats-json are for run and bench; GET "
                        "/metrics gives the expert cache's counters\n");
        return CLI_EXIT_USAGE;
    }
    if (o.template_name) {
        struct moeinf_error err = {0};
        const char *name;
        if (moeinf_chat_template_resolve(NULL, o.template_name, &name, &err) != MOEINF_OK) {
            fprintf(stderr, "moeinf serve: --chat-template: %s\n", err.msg);
            return CLI_EXIT_USAGE;
        }
        o.so.chat_template = name;
    }
    /* Every thread (the engine's pool, libmicrohttpd's, the worker) inherits this mask, so
     * SIGINT and SIGTERM reach only serve_run's sigwait and it can stop in order. */
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &set, NULL);
    signal(SIGPIPE, SIG_IGN); /* a client that leaves mid-answer is an error value, not death */

    struct moeinf_model *model = NULL;
    struct moeinf_context *ctx = NULL;
    int rc = model_args_open(&o.model, &model, &ctx);
    if (rc != CLI_EXIT_OK) return rc;
    if (!o.so.chat_template) {
        struct moeinf_error err = {0};
        const char *name;
        if (moeinf_chat_template_resolve(model, NULL, &name, &err) == MOEINF_OK) {
            o.so.chat_template = name;
        } else {
            /* completions still work; chat requests get a 400 saying this */
            fprintf(stderr,
                    "moeinf: %s: /v1/chat/completions needs --chat-template NAME "
                    "(mistral, chatml, llama3, deepseek2, deepseek3, deepseek-r1, olmoe, qwen35, "
                    "harmony, glm45, glm47, kimi-k2, kimi-k2-thinking)\n",
                    err.msg);
        }
    }
    char name[256];
    model_name(o.model.model_path, name, sizeof name);
    if (!o.so.model_id) o.so.model_id = name;
    o.so.n_ctx = o.model.ctx.n_ctx;
    o.so.n_batch = o.model.ctx.n_batch;
    o.so.n_parallel = o.model.ctx.n_seq;
    o.so.eamc_path = o.model.experts.eamc;
    rc = serve_run(&o.so, model, ctx) == 0 ? CLI_EXIT_OK : CLI_EXIT_FAIL;
    /* the worker has stopped: the state as of the last request */
    if (rc == CLI_EXIT_OK && !expert_args_save_state(&o.model.experts, ctx)) rc = CLI_EXIT_FAIL;
    moeinf_context_free(ctx);
    moeinf_model_free(model);
    return rc;
}
