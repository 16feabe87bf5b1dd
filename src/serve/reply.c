/*
 * reply.c - what a chat answer shows: the generated text, once the stop strings allow it,
 * goes through the job's reasoning splitter (moeinf.h) into the thinking (reasoning_content)
 * and the answer (content), as llama.cpp's server returns them; a stream sends the thinking's
 * new bytes before the answer's, each in a chunk of its own. Unit-tested in
 * tests/test_serve_reasoning.c with text fed in pieces.
 */
#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>

#include "app/grow.h"
#include "serve/serve.h"

bool serve_reasoning_format_parse(const char *name, enum serve_reasoning_format *out) {
    if (!strcmp(name, "none")) {
        *out = SERVE_REASONING_NONE;
    } else if (!strcmp(name, "auto") || !strcmp(name, "deepseek")) {
        *out = SERVE_REASONING_AUTO;
    } else {
        return false;
    }
    return true;
}

bool serve_job_split_init(struct serve_job *job, struct moeinf_error *err) {
    const struct serve_request *r = &job->req;
    if (!r->chat) return true;
    return moeinf_chat_reasoning_init(r->tmpl, r->msgs, r->n_msgs, r->chat_flags,
                                      r->reasoning != SERVE_REASONING_NONE, &job->split,
                                      err) == MOEINF_OK;
}

/* Appends s[0, n) to the NUL-terminated buffer *p. */
static bool add(char **p, size_t *len, size_t *cap, const char *s, size_t n) {
    return moeinf_text_append(p, len, cap, s, n);
}

bool serve_job_show(struct serve_job *job, const char *s, size_t n, bool end) {
    if (!job->split) return add(&job->text, &job->len, &job->cap, s, n);
    struct moeinf_reasoning_text t;
    for (int pass = 0; pass < 2; pass++) { /* the bytes, then (at the end) what was held */
        enum moeinf_status st = pass == 0 ? moeinf_reasoning_push(job->split, s, n, &t, NULL)
                                          : moeinf_reasoning_flush(job->split, &t, NULL);
        if (st != MOEINF_OK) return false;
        if (!add(&job->reasoning, &job->r_len, &job->r_cap, t.thinking, t.thinking_len) ||
            !add(&job->text, &job->len, &job->cap, t.answer, t.answer_len)) {
            return false;
        }
        if (!end) break;
    }
    return true;
}

char *serve_job_next_piece(const struct serve_job *job, size_t *reasoning_sent, size_t *text_sent,
                           bool *thinking) {
    *thinking = job->r_len > *reasoning_sent;
    const char *from = *thinking ? job->reasoning + *reasoning_sent : job->text + *text_sent;
    size_t n = *thinking ? job->r_len - *reasoning_sent : job->len - *text_sent;
    char *piece = malloc(n + 1);
    if (!piece) return NULL;
    if (n > 0) memcpy(piece, from, n);
    piece[n] = '\0';
    if (*thinking) {
        *reasoning_sent = job->r_len;
    } else {
        *text_sent = job->len;
    }
    return piece;
}

void serve_fill_choice(cJSON *choice, bool chat, bool chunk, const char *role, const char *content,
                       const char *reasoning, cJSON *logprobs, const char *finish) {
    if (!chat) {
        cJSON_AddStringToObject(choice, "text", content ? content : "");
    } else {
        cJSON *m = cJSON_AddObjectToObject(choice, chunk ? "delta" : "message");
        if (role) cJSON_AddStringToObject(m, "role", role);
        if (content || !chunk) cJSON_AddStringToObject(m, "content", content ? content : "");
        if (reasoning && reasoning[0]) cJSON_AddStringToObject(m, "reasoning_content", reasoning);
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
