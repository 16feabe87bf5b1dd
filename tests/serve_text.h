/*
 * serve_text.h - the generated text of a server response, for the server's tests
 * (test_serve.c, test_serve_batch.c): a non-streamed JSON body or the SSE events joined.
 */
#ifndef MOEINF_TESTS_SERVE_TEXT_H
#define MOEINF_TESTS_SERVE_TEXT_H

#include <cjson/cJSON.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

/* The generated text of a response: non-streamed JSON or the SSE events (joined), with the
 * finish reason. */
static inline bool response_text(const char *body, bool chat, char *text, size_t size, char *finish,
                                 cJSON **usage_out) {
    text[0] = finish[0] = '\0';
    size_t len = 0;
    bool done_line = false;
    const char *p = body;
    bool stream = !strncmp(body, "data: ", 6);
    while (p && *p) {
        const char *json = p;
        const char *next = NULL;
        if (stream) {
            if (strncmp(p, "data: ", 6) != 0) return false;
            json = p + 6;
            next = strstr(json, "\n\n");
            if (!next) return false;
            if (!strncmp(json, "[DONE]", 6)) {
                done_line = true;
                p = next + 2;
                continue;
            }
        }
        cJSON *root = cJSON_ParseWithLength(json, next ? (size_t)(next - json) : strlen(json));
        if (!root) return false;
        cJSON *choice = cJSON_GetArrayItem(cJSON_GetObjectItem(root, "choices"), 0);
        cJSON *usage = cJSON_GetObjectItem(root, "usage");
        if (usage && usage_out && !*usage_out) *usage_out = cJSON_Duplicate(usage, true);
        if (choice) {
            cJSON *t =
                chat ? cJSON_GetObjectItem(
                           cJSON_GetObjectItem(choice, stream ? "delta" : "message"), "content")
                     : cJSON_GetObjectItem(choice, "text");
            if (cJSON_IsString(t)) {
                len += (size_t)snprintf(text + len, size - len, "%s", t->valuestring);
                if (len >= size) len = size - 1;
            }
            cJSON *f = cJSON_GetObjectItem(choice, "finish_reason");
            if (cJSON_IsString(f)) snprintf(finish, 16, "%s", f->valuestring);
        }
        cJSON_Delete(root);
        p = stream ? next + 2 : NULL;
    }
    return !stream || done_line;
}

#endif
