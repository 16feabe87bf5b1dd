/*
 * request.c - a completion or chat request body into struct serve_request. Fields OpenAI
 * defines take OpenAI's defaults (temperature 1, top_p 1, no penalties, max_tokens unset:
 * until an end token or the context's end); llama.cpp's extensions take moeinf run's defaults
 * (top_k 40, min_p 0.05, repeat_penalty 1). Unknown fields are ignored, as OpenAI clients
 * send many; known fields of the wrong type or out of range are a 400 naming the field.
 */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "serve/serve.h"

__attribute__((format(printf, 3, 4))) static bool fail(char *msg, size_t size, const char *fmt,
                                                       ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, size, fmt, ap);
    va_end(ap);
    return false;
}

/* A number field within [lo, hi] (absent: *out untouched). */
static bool get_number(const cJSON *root, const char *key, double lo, double hi, float *out,
                       char *msg, size_t size) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(root, key);
    if (!v || cJSON_IsNull(v)) return true;
    if (!cJSON_IsNumber(v) || !isfinite(v->valuedouble)) {
        return fail(msg, size, "'%s' must be a number", key);
    }
    if (v->valuedouble < lo || v->valuedouble > hi) {
        return fail(msg, size, "'%s' must be in [%g, %g], not %g", key, lo, hi, v->valuedouble);
    }
    *out = (float)v->valuedouble;
    return true;
}

/* An integer field within [lo, hi] (absent: *out untouched). */
static bool get_integer(const cJSON *root, const char *key, double lo, double hi, double *out,
                        char *msg, size_t size) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(root, key);
    if (!v || cJSON_IsNull(v)) return true;
    double d = cJSON_IsNumber(v) ? v->valuedouble : NAN;
    if (!isfinite(d) || d != floor(d)) return fail(msg, size, "'%s' must be an integer", key);
    if (d < lo || d > hi) {
        return fail(msg, size, "'%s' must be in [%.0f, %.0f], not %.0f", key, lo, hi, d);
    }
    *out = d;
    return true;
}

static bool get_bool(const cJSON *root, const char *key, bool *out, char *msg, size_t size) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(root, key);
    if (!v || cJSON_IsNull(v)) return true;
    if (!cJSON_IsBool(v)) return fail(msg, size, "'%s' must be true or false", key);
    *out = cJSON_IsTrue(v);
    return true;
}

static char *dup_string(const char *s) {
    size_t n = strlen(s);
    char *d = malloc(n + 1);
    if (d) memcpy(d, s, n + 1);
    return d;
}

static bool parse_stop(const cJSON *root, struct serve_request *r, char *msg, size_t size) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(root, "stop");
    if (!v || cJSON_IsNull(v)) return true;
    const cJSON *items[SERVE_MAX_STOP];
    int n = 0;
    if (cJSON_IsString(v)) {
        items[n++] = v;
    } else if (cJSON_IsArray(v)) {
        const cJSON *e;
        cJSON_ArrayForEach(e, v) {
            if (n == SERVE_MAX_STOP) {
                return fail(msg, size, "'stop' holds at most %d strings", SERVE_MAX_STOP);
            }
            if (!cJSON_IsString(e)) return fail(msg, size, "'stop' must hold strings");
            items[n++] = e;
        }
    } else {
        return fail(msg, size, "'stop' must be a string or an array of strings");
    }
    for (int i = 0; i < n; i++) {
        if (!items[i]->valuestring[0]) continue; /* an empty stop never matches */
        char *s = dup_string(items[i]->valuestring);
        if (!s) return fail(msg, size, "out of memory");
        r->stop[r->n_stop++] = s;
    }
    return true;
}

static bool parse_sampling(const cJSON *root, struct serve_request *r, uint64_t seed, char *msg,
                           size_t size) {
    r->sp = moeinf_sampler_params_default();
    r->sp.temp = 1.0f;
    r->sp.top_p = 1.0f;
    r->sp.seed = seed;
    r->max_tokens = -1;
    double d = -1;
    bool ok = get_number(root, "temperature", 0.0, 2.0, &r->sp.temp, msg, size) &&
              get_number(root, "top_p", 1e-6, 1.0, &r->sp.top_p, msg, size) &&
              get_number(root, "min_p", 0.0, 1.0, &r->sp.min_p, msg, size) &&
              get_number(root, "repeat_penalty", 1e-3, 100.0, &r->sp.repeat_penalty, msg, size) &&
              get_number(root, "frequency_penalty", -2.0, 2.0, &r->frequency_penalty, msg, size) &&
              get_number(root, "presence_penalty", -2.0, 2.0, &r->presence_penalty, msg, size) &&
              get_bool(root, "stream", &r->stream, msg, size);
    if (!ok) return false;
    d = -1;
    if (!get_integer(root, "top_k", 0, 1 << 24, &d, msg, size)) return false;
    if (d >= 0) r->sp.top_k = (int)d;
    d = -1;
    if (!get_integer(root, "max_tokens", 1, 1 << 24, &d, msg, size)) return false;
    if (r->chat && d < 0 &&
        !get_integer(root, "max_completion_tokens", 1, 1 << 24, &d, msg, size)) {
        return false;
    }
    r->max_tokens = d < 0 ? -1 : (long)d;
    d = NAN;
    /* OpenAI's seed is a signed 64-bit integer; doubles hold integers exactly up to 2^53. */
    if (!get_integer(root, "seed", -9007199254740992.0, 9007199254740992.0, &d, msg, size)) {
        return false;
    }
    if (!isnan(d)) r->sp.seed = (uint64_t)(int64_t)d;
    d = 1;
    if (!get_integer(root, "n", 1, 1, &d, msg, size)) return false;
    const cJSON *so = cJSON_GetObjectItemCaseSensitive(root, "stream_options");
    if (so && !cJSON_IsNull(so)) {
        if (!cJSON_IsObject(so)) return fail(msg, size, "'stream_options' must be an object");
        if (!get_bool(so, "include_usage", &r->include_usage, msg, size)) return false;
    }
    return parse_stop(root, r, msg, size);
}

/* A message's content: a string, null, or an array of parts whose text parts are joined. */
static char *message_content(const cJSON *m, size_t i, char *msg, size_t size) {
    const cJSON *c = cJSON_GetObjectItemCaseSensitive(m, "content");
    if (!c || cJSON_IsNull(c)) return dup_string("");
    if (cJSON_IsString(c)) return dup_string(c->valuestring);
    if (!cJSON_IsArray(c)) {
        fail(msg, size, "messages[%zu].content must be a string or an array of parts", i);
        return NULL;
    }
    size_t total = 1;
    const cJSON *p;
    cJSON_ArrayForEach(p, c) {
        const cJSON *type = cJSON_GetObjectItemCaseSensitive(p, "type");
        const cJSON *text = cJSON_GetObjectItemCaseSensitive(p, "text");
        if (!cJSON_IsString(type) || strcmp(type->valuestring, "text") != 0 ||
            !cJSON_IsString(text)) {
            fail(msg, size,
                 "messages[%zu].content: only parts {\"type\": \"text\", \"text\": "
                 "...} are supported",
                 i);
            return NULL;
        }
        total += strlen(text->valuestring);
    }
    char *s = malloc(total);
    if (!s) return NULL;
    s[0] = '\0';
    size_t at = 0;
    cJSON_ArrayForEach(p, c) {
        const char *t = cJSON_GetObjectItemCaseSensitive(p, "text")->valuestring;
        size_t n = strlen(t);
        memcpy(s + at, t, n + 1);
        at += n;
    }
    return s;
}

static bool parse_messages(const cJSON *root, const char *tmpl, struct serve_request *r, char *msg,
                           size_t size) {
    const cJSON *ms = cJSON_GetObjectItemCaseSensitive(root, "messages");
    if (!ms) return fail(msg, size, "'messages' is required");
    if (!cJSON_IsArray(ms)) return fail(msg, size, "'messages' must be an array");
    int n = cJSON_GetArraySize(ms);
    if (n == 0) return fail(msg, size, "'messages' is empty");
    struct moeinf_chat_message *chat = calloc((size_t)n, sizeof *chat);
    if (!chat) return fail(msg, size, "out of memory");
    bool ok = true;
    size_t i = 0;
    const cJSON *m;
    cJSON_ArrayForEach(m, ms) {
        const cJSON *role = cJSON_GetObjectItemCaseSensitive(m, "role");
        if (!cJSON_IsObject(m) || !cJSON_IsString(role)) {
            ok = fail(msg, size, "messages[%zu] must be an object with a string 'role'", i);
            break;
        }
        chat[i].role = role->valuestring;
        chat[i].content = message_content(m, i, msg, size);
        if (!chat[i].content) {
            ok = false;
            break;
        }
        i++;
    }
    if (ok) {
        struct moeinf_error err = {0};
        if (moeinf_chat_apply(tmpl, chat, (size_t)n, true, &r->prompt, NULL, &err) != MOEINF_OK) {
            ok = fail(msg, size, "%s", err.msg);
        }
    }
    for (int k = 0; k < n; k++)
        free((char *)chat[k].content);
    free(chat);
    return ok;
}

static bool parse_prompt(const cJSON *root, struct serve_request *r, char *msg, size_t size) {
    const cJSON *p = cJSON_GetObjectItemCaseSensitive(root, "prompt");
    if (!p) return fail(msg, size, "'prompt' is required");
    if (cJSON_IsArray(p) && cJSON_GetArraySize(p) == 1 && cJSON_IsString(p->child)) p = p->child;
    if (!cJSON_IsString(p)) {
        return fail(msg, size, "'prompt' must be a string (or an array of one string)");
    }
    r->prompt = dup_string(p->valuestring);
    return r->prompt ? true : fail(msg, size, "out of memory");
}

bool serve_request_parse(const char *body, size_t len, bool chat, const char *tmpl, uint64_t seed,
                         struct serve_request *out, char *msg, size_t size) {
    memset(out, 0, sizeof *out);
    out->chat = chat;
    const char *end = NULL;
    /* len + 1: the NUL after the body marks its end, so trailing garbage is refused */
    cJSON *root = cJSON_ParseWithLengthOpts(body, len + 1, &end, true);
    if (!root) {
        size_t at = end && end >= body ? (size_t)(end - body) : 0;
        return fail(msg, size, "the body is not valid JSON (near byte %zu)", at);
    }
    bool ok = true;
    if (!cJSON_IsObject(root)) {
        ok = fail(msg, size, "the body must be a JSON object");
    } else {
        const cJSON *model = cJSON_GetObjectItemCaseSensitive(root, "model");
        if (model && !cJSON_IsString(model) && !cJSON_IsNull(model)) {
            ok = fail(msg, size, "'model' must be a string");
        }
        ok = ok && parse_sampling(root, out, seed, msg, size);
        if (ok && chat && !tmpl) {
            ok = fail(msg, size,
                      "the server has no chat template: start it with "
                      "--chat-template NAME");
        }
        ok = ok && (chat ? parse_messages(root, tmpl, out, msg, size)
                         : parse_prompt(root, out, msg, size));
    }
    cJSON_Delete(root);
    if (!ok) serve_request_free(out);
    return ok;
}

void serve_request_free(struct serve_request *r) {
    free(r->prompt);
    r->prompt = NULL;
    for (int i = 0; i < r->n_stop; i++)
        free(r->stop[i]);
    r->n_stop = 0;
}
