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
#include <stdint.h>
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

/* max_tokens (OpenAI's older name), max_completion_tokens (its newer one) and n_predict
 * (llama.cpp's; -1 there means no limit) all give the limit; two that disagree are a 400. */
static bool parse_max_tokens(const cJSON *root, struct serve_request *r, char *msg, size_t size) {
    static const char *const keys[] = {"max_tokens", "max_completion_tokens", "n_predict"};
    const char *given = NULL;
    double limit = -1;
    for (int k = 0; k < 3; k++) {
        double d = NAN;
        if (k == 2) {
            const cJSON *v = cJSON_GetObjectItemCaseSensitive(root, keys[k]);
            if (cJSON_IsNumber(v) && v->valuedouble == -1) {
                d = -1;
            } else if (!get_integer(root, keys[k], 1, 1 << 24, &d, msg, size)) {
                return fail(msg, size, "'n_predict' must be -1 (no limit) or an integer in [1, %d]",
                            1 << 24);
            }
        } else if (!get_integer(root, keys[k], 1, 1 << 24, &d, msg, size)) {
            return false;
        }
        if (isnan(d)) continue;
        if (given && d != limit) {
            return fail(msg, size, "'%s' (%.0f) and '%s' (%.0f) disagree: give one of them", given,
                        limit, keys[k], d);
        }
        given = keys[k];
        limit = d;
    }
    r->max_tokens = limit < 0 ? -1 : (long)limit;
    return true;
}

static int cmp_bias(const void *a, const void *b) {
    int32_t x = ((const struct serve_logit_bias *)a)->id;
    int32_t y = ((const struct serve_logit_bias *)b)->id;
    return (x > y) - (x < y);
}

/* logit_bias: {"TOKEN_ID": bias in [-100, 100], ...}; the ids' range is the worker's check. */
static bool parse_logit_bias(const cJSON *root, struct serve_request *r, char *msg, size_t size) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(root, "logit_bias");
    if (!v || cJSON_IsNull(v)) return true;
    if (!cJSON_IsObject(v)) {
        return fail(msg, size, "'logit_bias' must be an object of token ids to numbers");
    }
    int n = cJSON_GetArraySize(v);
    if (n == 0) return true;
    r->bias = malloc((size_t)n * sizeof *r->bias);
    if (!r->bias) return fail(msg, size, "out of memory");
    const cJSON *e;
    cJSON_ArrayForEach(e, v) {
        const char *key = e->string;
        size_t len = strlen(key);
        bool digits = len > 0 && len <= 10 && strspn(key, "0123456789") == len;
        long long id = digits ? strtoll(key, NULL, 10) : -1;
        if (!digits || id > INT32_MAX || (len > 1 && key[0] == '0')) {
            return fail(msg, size, "'logit_bias' key '%.40s' is not a token id", key);
        }
        if (!cJSON_IsNumber(e) || !isfinite(e->valuedouble) ||
            fabs(e->valuedouble) > SERVE_LOGIT_BIAS_MAX) {
            return fail(msg, size, "'logit_bias' value of token %lld must be a number in [%d, %d]",
                        id, -SERVE_LOGIT_BIAS_MAX, SERVE_LOGIT_BIAS_MAX);
        }
        r->bias[r->n_bias++] = (struct serve_logit_bias){(int32_t)id, (float)e->valuedouble};
    }
    qsort(r->bias, (size_t)r->n_bias, sizeof *r->bias, cmp_bias);
    for (int i = 1; i < r->n_bias; i++) {
        if (r->bias[i].id == r->bias[i - 1].id) {
            return fail(msg, size, "'logit_bias' names token %d twice", (int)r->bias[i].id);
        }
    }
    return true;
}

/* Chat: logprobs (true/false) and top_logprobs (0..20, only with logprobs). Completions:
 * logprobs, the number of alternatives (0..20; OpenAI's legacy form). */
static bool parse_logprobs(const cJSON *root, struct serve_request *r, char *msg, size_t size) {
    double d = NAN;
    if (!r->chat) {
        if (!get_integer(root, "logprobs", 0, SERVE_MAX_TOP_LOGPROBS, &d, msg, size)) return false;
        r->logprobs = !isnan(d);
        r->top_logprobs = isnan(d) ? 0 : (int)d;
        return true;
    }
    if (!get_bool(root, "logprobs", &r->logprobs, msg, size)) return false;
    if (!get_integer(root, "top_logprobs", 0, SERVE_MAX_TOP_LOGPROBS, &d, msg, size)) return false;
    if (!isnan(d) && !r->logprobs) {
        return fail(msg, size, "'top_logprobs' needs 'logprobs': true");
    }
    r->top_logprobs = isnan(d) ? 0 : (int)d;
    return true;
}

/* Tool calling and structured output are not implemented: a request for them is a 400 naming
 * the field rather than an answer that silently ignores it. An empty tools list, tool_choice
 * "none" and response_format {"type": "text"} ask for nothing and pass. */
static bool refuse_unsupported(const cJSON *root, char *msg, size_t size) {
    static const char *const lists[] = {"tools", "functions"};
    static const char *const choices[] = {"tool_choice", "function_call"};
    for (int i = 0; i < 2; i++) {
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(root, lists[i]);
        if (v && !cJSON_IsNull(v) && !(cJSON_IsArray(v) && cJSON_GetArraySize(v) == 0)) {
            return fail(msg, size, "'%s' is not supported: moeinf serve has no tool calling",
                        lists[i]);
        }
        v = cJSON_GetObjectItemCaseSensitive(root, choices[i]);
        if (v && !cJSON_IsNull(v) && !(cJSON_IsString(v) && !strcmp(v->valuestring, "none"))) {
            return fail(msg, size,
                        "'%s' is not supported: moeinf serve has no tool calling (only "
                        "\"none\")",
                        choices[i]);
        }
    }
    const cJSON *rf = cJSON_GetObjectItemCaseSensitive(root, "response_format");
    if (rf && !cJSON_IsNull(rf)) {
        const cJSON *type = cJSON_GetObjectItemCaseSensitive(rf, "type");
        if (!cJSON_IsObject(rf) || !cJSON_IsString(type) ||
            strcmp(type->valuestring, "text") != 0) {
            return fail(msg, size,
                        "'response_format' is not supported beyond {\"type\": \"text\"} "
                        "(no JSON mode or schema)");
        }
    }
    return true;
}

/* Chat: reasoning_format, llama.cpp's per-request --reasoning-format (absent: the server's). */
static bool parse_reasoning_format(const cJSON *root, struct serve_request *r, char *msg,
                                   size_t size) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(root, "reasoning_format");
    if (!v || cJSON_IsNull(v)) return true;
    if (!cJSON_IsString(v) || !serve_reasoning_format_parse(v->valuestring, &r->reasoning)) {
        return fail(msg, size, "'reasoning_format' must be \"none\", \"auto\" or \"deepseek\"");
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
    if (!parse_max_tokens(root, r, msg, size)) return false;
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
    return parse_logit_bias(root, r, msg, size) && parse_logprobs(root, r, msg, size) &&
           (!r->chat ||
            (refuse_unsupported(root, msg, size) && parse_reasoning_format(root, r, msg, size))) &&
           parse_stop(root, r, msg, size);
}

/* A message's content: a string, null, or an array of parts whose text parts are joined. */
static char *message_content(const cJSON *m, size_t i, char *msg, size_t size) {
    const cJSON *c = cJSON_GetObjectItemCaseSensitive(m, "content");
    if (!c || cJSON_IsNull(c) || cJSON_IsString(c)) {
        const char *text = c && cJSON_IsString(c) ? c->valuestring : "";
        char *d = dup_string(text);
        if (!d) fail(msg, size, "out of memory");
        return d;
    }
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
    if (!s) {
        fail(msg, size, "out of memory");
        return NULL;
    }
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

/* A reasoning_effort value into r's flags: "low", "medium" or "high" (harmony's Reasoning:
 * line; the other templates ignore it), or "none", as llama.cpp takes it, for an answer without
 * thinking (MOEINF_CHAT_NO_THINKING). `field` names it in the message. */
static bool parse_effort(const cJSON *v, const char *field, struct serve_request *r, char *msg,
                         size_t size) {
    static const char *const names[] = {"low", "medium", "high"};
    if (!v || cJSON_IsNull(v)) return true;
    if (cJSON_IsString(v)) {
        for (unsigned e = 0; e < 3; e++) {
            if (!strcmp(v->valuestring, names[e])) {
                r->chat_flags &= ~(unsigned)MOEINF_CHAT_EFFORT_MASK;
                r->chat_flags |= MOEINF_CHAT_EFFORT_LOW * (e + 1);
                return true;
            }
        }
        if (!strcmp(v->valuestring, "none")) {
            r->thinking_set = true;
            r->chat_flags |= MOEINF_CHAT_NO_THINKING;
            return true;
        }
    }
    return fail(msg, size, "'%s' must be \"low\", \"medium\", \"high\" or \"none\"", field);
}

/* chat_template_kwargs (llama.cpp's server takes it): enable_thinking false asks a template
 * whose model thinks (qwen35) for an answer without thinking, reasoning_effort sets harmony's
 * effort; other keys are ignored, as a Jinja template ignores variables it does not use. The
 * request's own reasoning_effort wins over the kwarg, as in llama.cpp. */
static bool parse_template_kwargs(const cJSON *root, struct serve_request *r, char *msg,
                                  size_t size) {
    r->chat_flags = MOEINF_CHAT_ADD_ASSISTANT;
    const cJSON *kw = cJSON_GetObjectItemCaseSensitive(root, "chat_template_kwargs");
    if (kw && !cJSON_IsNull(kw)) {
        if (!cJSON_IsObject(kw)) {
            return fail(msg, size, "'chat_template_kwargs' must be an object");
        }
        const cJSON *think = cJSON_GetObjectItemCaseSensitive(kw, "enable_thinking");
        if (think && !cJSON_IsNull(think)) {
            if (!cJSON_IsBool(think)) {
                return fail(msg, size,
                            "'chat_template_kwargs.enable_thinking' must be true or false");
            }
            r->thinking_set = true;
            if (cJSON_IsFalse(think)) r->chat_flags |= MOEINF_CHAT_NO_THINKING;
        }
        if (!parse_effort(cJSON_GetObjectItemCaseSensitive(kw, "reasoning_effort"),
                          "chat_template_kwargs.reasoning_effort", r, msg, size)) {
            return false;
        }
    }
    return parse_effort(cJSON_GetObjectItemCaseSensitive(root, "reasoning_effort"),
                        "reasoning_effort", r, msg, size);
}

static bool parse_messages(const cJSON *root, const char *tmpl, struct serve_request *r, char *msg,
                           size_t size) {
    if (!parse_template_kwargs(root, r, msg, size)) return false;
    const cJSON *ms = cJSON_GetObjectItemCaseSensitive(root, "messages");
    if (!ms) return fail(msg, size, "'messages' is required");
    if (!cJSON_IsArray(ms)) return fail(msg, size, "'messages' must be an array");
    int n = cJSON_GetArraySize(ms);
    if (n == 0) return fail(msg, size, "'messages' is empty");
    struct moeinf_chat_message *chat = calloc((size_t)n, sizeof *chat);
    if (!chat) return fail(msg, size, "out of memory");
    r->msgs = chat; /* role and content owned; freed by serve_request_free, also on failure */
    r->n_msgs = (size_t)n;
    r->tmpl = tmpl;
    size_t i = 0;
    const cJSON *m;
    cJSON_ArrayForEach(m, ms) {
        const cJSON *role = cJSON_GetObjectItemCaseSensitive(m, "role");
        if (!cJSON_IsObject(m) || !cJSON_IsString(role)) {
            return fail(msg, size, "messages[%zu] must be an object with a string 'role'", i);
        }
        chat[i].content = message_content(m, i, msg, size);
        if (!chat[i].content) return false;
        chat[i].role = dup_string(role->valuestring);
        if (!chat[i].role) return fail(msg, size, "out of memory");
        i++;
    }
    /* the roles and the template are checked now, for a 400 before the queue */
    struct moeinf_error err = {0};
    char *text = NULL;
    bool ok =
        moeinf_chat_apply(tmpl, chat, (size_t)n, r->chat_flags, &text, NULL, &err) == MOEINF_OK;
    free(text);
    return ok ? true : fail(msg, size, "%s", err.msg);
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
    for (size_t k = 0; k < r->n_msgs; k++) {
        free((char *)r->msgs[k].role);
        free((char *)r->msgs[k].content);
    }
    free(r->msgs);
    r->msgs = NULL;
    r->n_msgs = 0;
    free(r->bias);
    r->bias = NULL;
    r->n_bias = 0;
    for (int i = 0; i < r->n_stop; i++)
        free(r->stop[i]);
    r->n_stop = 0;
}
