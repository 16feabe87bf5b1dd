/*
 * logprobs.c - choices[].logprobs in OpenAI's two forms. Chat: {"content": [{"token", "logprob",
 * "bytes", "top_logprobs": [{"token", "logprob", "bytes"}]}]}. Completions (the legacy form):
 * {"tokens", "token_logprobs", "top_logprobs": [{TOKEN: logprob}], "text_offset"}, the offsets
 * counted in Unicode characters from the start of the generated text. A token's text is its
 * piece with control tokens spelled out; bytes that are not valid UTF-8 there (a character
 * split across tokens) become U+FFFD in "token", and "bytes" holds the exact bytes.
 */
#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>

#include "serve/serve.h"

/* The length of the valid UTF-8 character at s[0..n), or 0. */
static size_t utf8_char(const unsigned char *s, size_t n) {
    size_t len;
    unsigned min;
    unsigned cp;
    if (s[0] < 0x80) return 1;
    if (s[0] >= 0xC2 && s[0] <= 0xDF) {
        len = 2;
        min = 0x80;
        cp = s[0] & 0x1F;
    } else if (s[0] >= 0xE0 && s[0] <= 0xEF) {
        len = 3;
        min = 0x800;
        cp = s[0] & 0x0F;
    } else if (s[0] >= 0xF0 && s[0] <= 0xF4) {
        len = 4;
        min = 0x10000;
        cp = s[0] & 0x07;
    } else {
        return 0;
    }
    if (n < len) return 0;
    for (size_t i = 1; i < len; i++) {
        if ((s[i] & 0xC0) != 0x80) return 0;
        cp = cp << 6 | (s[i] & 0x3F);
    }
    if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return 0;
    return len;
}

/* The token's text with invalid bytes as U+FFFD (malloc'ed; NULL when out of memory), and
 * its exact bytes in *raw, *n. */
static char *token_text(const struct moeinf_model *model, int32_t id, const char **raw, size_t *n) {
    const char *p = moeinf_token_piece(model, id, true, n);
    *raw = p;
    char *text = malloc(3 * *n + 1);
    if (!text) return NULL;
    size_t k = 0;
    for (size_t i = 0; i < *n;) {
        size_t c = utf8_char((const unsigned char *)p + i, *n - i);
        if (c) {
            memcpy(text + k, p + i, c);
            k += c;
            i += c;
        } else {
            memcpy(text + k, "\xef\xbf\xbd", 3);
            k += 3;
            i++;
        }
    }
    text[k] = '\0';
    return text;
}

/* "token" and "bytes" of the chat form. */
static void add_token(cJSON *obj, const struct moeinf_model *model, int32_t id) {
    const char *raw;
    size_t n;
    char *text = token_text(model, id, &raw, &n);
    cJSON_AddStringToObject(obj, "token", text ? text : "");
    free(text);
    cJSON *b = cJSON_AddArrayToObject(obj, "bytes");
    for (size_t i = 0; i < n; i++)
        cJSON_AddItemToArray(b, cJSON_CreateNumber((unsigned char)raw[i]));
}

static cJSON *chat_form(const struct moeinf_model *model, const struct serve_logprob *lp,
                        size_t n) {
    cJSON *root = cJSON_CreateObject();
    cJSON *content = cJSON_AddArrayToObject(root, "content");
    for (size_t i = 0; i < n; i++) {
        cJSON *e = cJSON_CreateObject();
        cJSON_AddItemToArray(content, e);
        add_token(e, model, lp[i].id);
        cJSON_AddNumberToObject(e, "logprob", lp[i].logprob);
        cJSON *top = cJSON_AddArrayToObject(e, "top_logprobs");
        for (int k = 0; k < lp[i].n_top; k++) {
            cJSON *t = cJSON_CreateObject();
            cJSON_AddItemToArray(top, t);
            add_token(t, model, lp[i].top_id[k]);
            cJSON_AddNumberToObject(t, "logprob", lp[i].top_lp[k]);
        }
    }
    return root;
}

/* Unicode characters in text[0..n). */
static double chars(const char *text, size_t n) {
    double c = 0;
    for (size_t i = 0; i < n; i++)
        c += ((unsigned char)text[i] & 0xC0) != 0x80;
    return c;
}

static cJSON *completion_form(const struct moeinf_model *model, const struct serve_job *job,
                              const struct serve_logprob *lp, size_t n) {
    cJSON *root = cJSON_CreateObject();
    cJSON *tokens = cJSON_AddArrayToObject(root, "tokens");
    cJSON *logprobs = cJSON_AddArrayToObject(root, "token_logprobs");
    cJSON *tops = cJSON_AddArrayToObject(root, "top_logprobs");
    cJSON *offsets = cJSON_AddArrayToObject(root, "text_offset");
    for (size_t i = 0; i < n; i++) {
        const char *raw;
        size_t len;
        char *text = token_text(model, lp[i].id, &raw, &len);
        cJSON_AddItemToArray(tokens, cJSON_CreateString(text ? text : ""));
        free(text);
        cJSON_AddItemToArray(logprobs, cJSON_CreateNumber(lp[i].logprob));
        cJSON *top = cJSON_CreateObject();
        cJSON_AddItemToArray(tops, top);
        for (int k = 0; k < lp[i].n_top; k++) {
            text = token_text(model, lp[i].top_id[k], &raw, &len);
            cJSON_AddNumberToObject(top, text ? text : "", lp[i].top_lp[k]);
            free(text);
        }
        size_t off = lp[i].offset < job->len ? lp[i].offset : job->len;
        cJSON_AddItemToArray(offsets, cJSON_CreateNumber(chars(job->text ? job->text : "", off)));
    }
    return root;
}

cJSON *serve_logprobs_json(const struct moeinf_model *model, const struct serve_job *job,
                           size_t from, size_t to) {
    if (!job->req.logprobs) return NULL;
    if (to > job->n_lp) to = job->n_lp;
    if (from > to) from = to;
    return job->req.chat ? chat_form(model, job->lp + from, to - from)
                         : completion_form(model, job, job->lp + from, to - from);
}
