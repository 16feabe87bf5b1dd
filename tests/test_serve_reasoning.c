/*
 * test_serve_reasoning.c - a chat answer's thinking in `moeinf serve`. The server's own pieces
 * (reply.c) are fed generated text in pieces, cut at every byte, as the worker feeds them:
 * the message must hold reasoning_content and content as llama.cpp's server gives them for
 * the same text (its Qwen3.5 case), the stream's deltas must add up to the same, the thinking's
 * chunks all before the answer's and no chunk holding both; with reasoning_format none the
 * thinking stays in content. Then through HTTP against the in-tree model that thinks by script
 * (tests/data/models/thinking-qwen3moe-F32.gguf, chatml): the fields of the message and of
 * the stream, streamed and not, for auto, deepseek and none given by the request or by
 * --reasoning-format, at max_tokens inside the thinking, with a stop string that cuts the end
 * marker, the qwen35 template whose prompt opens the block (or closes it: enable_thinking
 * false), a template family that does not think, the completions endpoint unchanged, and
 * unknown names refused. harmony (gpt-oss): its channels split in every cut, with <|end|>
 * shown or not; reasoning_effort parsed, refused when unknown, and through HTTP in the
 * prompt (prompt_tokens).
 */
// ctest-labels: threads
#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>

#include "chat/reasoning.h"
#include "serve/serve.h"
#include "serve_proc.h"
#include "test.h"

#define PROMPT_OPEN "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n<think>\n"
#define THOUGHT     "I'm\nthinking\n</think>\n\nHello, world!\nWhat's up?"

static const char *str_field(const cJSON *o, const char *key) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    return cJSON_IsString(v) ? v->valuestring : NULL;
}

struct streamed {
    char reasoning[512], content[512];
    bool content_seen, reasoning_after_content, both_in_one, empty_chunk;
};

/* The chunks the server would send now (serve_job_next_piece and serve_fill_choice, as
 * server.c's stream_next), added up. */
static void drain(struct serve_job *job, size_t *rsent, size_t *sent, struct streamed *out) {
    while (job->r_len > *rsent || job->len > *sent) {
        bool thinking;
        char *piece = serve_job_next_piece(job, rsent, sent, &thinking);
        if (!piece) abort();
        cJSON *choice = cJSON_CreateObject();
        serve_fill_choice(choice, true, true, NULL, thinking ? NULL : piece,
                          thinking ? piece : NULL, NULL, NULL);
        free(piece);
        const cJSON *delta = cJSON_GetObjectItemCaseSensitive(choice, "delta");
        const char *r = str_field(delta, "reasoning_content");
        const char *c = str_field(delta, "content");
        if (r && c) out->both_in_one = true;
        if ((r && !r[0]) || (c && !c[0]) || (!r && !c)) out->empty_chunk = true;
        if (r) {
            if (out->content_seen) out->reasoning_after_content = true;
            strncat(out->reasoning, r, sizeof out->reasoning - strlen(out->reasoning) - 1);
        }
        if (c) {
            out->content_seen = true;
            strncat(out->content, c, sizeof out->content - strlen(out->content) - 1);
        }
        cJSON_Delete(choice);
    }
}

/* gpt-oss's form of THOUGHT after the harmony template's prompt (<|end|> shown or not) */
#define HARMONY_THOUGHT                                                                            \
    "<|channel|>analysis<|message|>I'm\nthinking\n<|end|><|start|>assistant<|channel|>final"       \
    "<|message|>Hello, world!\nWhat's up?"
#define HARMONY_THOUGHT_NO_END                                                                     \
    "<|channel|>analysis<|message|>I'm\nthinking\n<|start|>assistant<|channel|>final"              \
    "<|message|>Hello, world!\nWhat's up?"

/* `text` (THOUGHT after PROMPT_OPEN when tmpl is NULL, else after the prompt of template tmpl
 * for one user message) in pieces ending at `cut` and at every `step` bytes after it: the
 * non-streamed message and the stream's sum. */
static void feed_text(const char *tmpl, const char *text, bool extract, size_t cut, size_t step,
                      cJSON **message, struct streamed *st) {
    struct serve_job job = {0};
    memset(st, 0, sizeof *st);
    struct moeinf_chat_message user = {"user", "Hi"};
    if (tmpl) {
        CHECK(moeinf_chat_reasoning_init(tmpl, &user, 1, MOEINF_CHAT_ADD_ASSISTANT, extract,
                                         &job.split, NULL) == MOEINF_OK);
    } else {
        CHECK(moeinf_reasoning_init("<think>", "</think>", PROMPT_OPEN, strlen(PROMPT_OPEN),
                                    extract, &job.split, NULL) == MOEINF_OK);
    }
    size_t rsent = 0;
    size_t sent = 0;
    const size_t n = strlen(text);
    for (size_t at = 0; at < n;) {
        size_t to = at < cut ? cut : at + step;
        if (to > n) to = n;
        CHECK(serve_job_show(&job, text + at, to - at, false));
        drain(&job, &rsent, &sent, st);
        at = to;
    }
    CHECK(serve_job_show(&job, NULL, 0, true));
    drain(&job, &rsent, &sent, st);
    cJSON *choice = cJSON_CreateObject();
    serve_fill_choice(choice, true, false, "assistant", job.text ? job.text : "", job.reasoning,
                      NULL, "stop");
    *message = choice;
    free(job.text);
    free(job.reasoning);
    moeinf_reasoning_free(job.split);
}

static void feed(bool extract, size_t cut, size_t step, cJSON **message, struct streamed *st) {
    feed_text(NULL, THOUGHT, extract, cut, step, message, st);
}

/* The message and the stream's sum for every first cut and two steps: the thinking in
 * reasoning_content, the answer in content, as llama.cpp's server gives them. */
static void check_split_reply(const char *tmpl, const char *text) {
    const size_t n = strlen(text);
    for (size_t cut = 0; cut <= n; cut++) {
        for (size_t step = 1; step <= 4; step += 3) {
            cJSON *choice = NULL;
            struct streamed st;
            feed_text(tmpl, text, true, cut, step, &choice, &st);
            const cJSON *m = cJSON_GetObjectItemCaseSensitive(choice, "message");
            const char *role = str_field(m, "role");
            const char *content = str_field(m, "content");
            const char *reasoning = str_field(m, "reasoning_content");
            bool ok = role && !strcmp(role, "assistant") && content &&
                      !strcmp(content, "Hello, world!\nWhat's up?") && reasoning &&
                      !strcmp(reasoning, "I'm\nthinking");
            CHECK_MSG(ok, "cut %zu step %zu: message content \"%s\", reasoning_content \"%s\"", cut,
                      step, content ? content : "(none)", reasoning ? reasoning : "(none)");
            ok = ok && !strcmp(st.content, content) && !strcmp(st.reasoning, reasoning) &&
                 !st.reasoning_after_content && !st.both_in_one && !st.empty_chunk;
            CHECK_MSG(ok, "cut %zu step %zu: stream content \"%s\", reasoning \"%s\"%s%s%s", cut,
                      step, st.content, st.reasoning,
                      st.reasoning_after_content ? ", thinking after the answer" : "",
                      st.both_in_one ? ", a chunk with both" : "",
                      st.empty_chunk ? ", an empty chunk" : "");
            cJSON_Delete(choice);
            if (!ok) return;
        }
    }
}

static void test_split_reply(void) {
    check_split_reply(NULL, THOUGHT);
    /* gpt-oss: the analysis channel is the thinking, the final channel the answer */
    check_split_reply("harmony", HARMONY_THOUGHT);
    check_split_reply("harmony", HARMONY_THOUGHT_NO_END);
}

static void test_not_split(void) {
    /* reasoning_format none: all in content, the prompt's "<think>\n" first, as llama.cpp */
    cJSON *choice = NULL;
    struct streamed st;
    feed(false, 5, 2, &choice, &st);
    const cJSON *m = cJSON_GetObjectItemCaseSensitive(choice, "message");
    const char *content = str_field(m, "content");
    CHECK(content && !strcmp(content, "<think>\n" THOUGHT));
    CHECK(!cJSON_GetObjectItemCaseSensitive(m, "reasoning_content"));
    CHECK(!strcmp(st.content, "<think>\n" THOUGHT) && !st.reasoning[0]);
    cJSON_Delete(choice);
    /* harmony with none: the channels as generated (llama.cpp gives the same) */
    feed_text("harmony", HARMONY_THOUGHT, false, 7, 3, &choice, &st);
    m = cJSON_GetObjectItemCaseSensitive(choice, "message");
    content = str_field(m, "content");
    CHECK(content && !strcmp(content, HARMONY_THOUGHT));
    CHECK(!cJSON_GetObjectItemCaseSensitive(m, "reasoning_content"));
    CHECK(!strcmp(st.content, HARMONY_THOUGHT) && !st.reasoning[0]);
    cJSON_Delete(choice);
    /* no split (completions): the text as it comes */
    struct serve_job job = {0};
    CHECK(serve_job_show(&job, "a</think>b", 10, false) && serve_job_show(&job, NULL, 0, true));
    CHECK(job.text && !strcmp(job.text, "a</think>b") && job.r_len == 0);
    choice = cJSON_CreateObject();
    serve_fill_choice(choice, false, false, NULL, job.text, NULL, NULL, "stop");
    const char *text = str_field(choice, "text");
    CHECK(text && !strcmp(text, "a</think>b"));
    cJSON_Delete(choice);
    free(job.text);
    /* a message without thinking has content (even empty) and no reasoning_content */
    choice = cJSON_CreateObject();
    serve_fill_choice(choice, true, false, "assistant", "", "", NULL, "length");
    m = cJSON_GetObjectItemCaseSensitive(choice, "message");
    content = str_field(m, "content");
    CHECK(content && !content[0] && !cJSON_GetObjectItemCaseSensitive(m, "reasoning_content"));
    cJSON_Delete(choice);
}

static void test_format_names(void) {
    enum serve_reasoning_format f = SERVE_REASONING_UNSET;
    CHECK(serve_reasoning_format_parse("none", &f) && f == SERVE_REASONING_NONE);
    CHECK(serve_reasoning_format_parse("auto", &f) && f == SERVE_REASONING_AUTO);
    f = SERVE_REASONING_UNSET;
    CHECK(serve_reasoning_format_parse("deepseek", &f) && f == SERVE_REASONING_AUTO);
    CHECK(!serve_reasoning_format_parse("deepseek-legacy", &f));
    CHECK(!serve_reasoning_format_parse("None", &f));
}

/* The worker's splitter from the request: the template, its prompt, the format. */
static void test_job_split_init(void) {
    struct moeinf_chat_message msg = {"user", "Hi"};
    const unsigned add = MOEINF_CHAT_ADD_ASSISTANT;

    static const struct {
        const char *tmpl; /* NULL: completions */
        const char *reasoning, *content;
        enum serve_reasoning_format format;
        unsigned no_thinking;
    } cases[] = {
        {"qwen35", "I'm\nthinking", "Hello, world!\nWhat's up?", SERVE_REASONING_AUTO, 0},
        {"qwen35", "", "<think>\n" THOUGHT, SERVE_REASONING_NONE, 0},
        {"qwen35", "", THOUGHT, SERVE_REASONING_AUTO, MOEINF_CHAT_NO_THINKING},
        {"chatml", "", THOUGHT, SERVE_REASONING_AUTO, 0},  /* the prompt opens nothing */
        {"mistral", "", THOUGHT, SERVE_REASONING_AUTO, 0}, /* a family that does not think */
        {NULL, "", THOUGHT, SERVE_REASONING_AUTO, 0},      /* completions */
    };

    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        struct serve_job job = {0};
        struct moeinf_error err = {0};
        job.req.chat = cases[c].tmpl != NULL;
        job.req.tmpl = cases[c].tmpl;
        job.req.msgs = &msg;
        job.req.n_msgs = 1;
        job.req.chat_flags = add | cases[c].no_thinking;
        job.req.reasoning = cases[c].format;
        CHECK_MSG(serve_job_split_init(&job, &err), "%s", err.msg);
        CHECK(serve_job_show(&job, THOUGHT, strlen(THOUGHT), false));
        CHECK(serve_job_show(&job, NULL, 0, true));
        const char *r = job.reasoning ? job.reasoning : "";
        const char *t = job.text ? job.text : "";
        CHECK_MSG(!strcmp(r, cases[c].reasoning) && !strcmp(t, cases[c].content),
                  "case %zu: reasoning \"%s\", content \"%s\"", c, r, t);
        free(job.text);
        free(job.reasoning);
        moeinf_reasoning_free(job.split);
    }
}

/* A request's reasoning_format (chat only; absent: the server's). */
static void test_request_field(void) {
    struct serve_request r;
    char msg[320];
    static const char *const bodies[] = {
        "{\"messages\": [{\"role\": \"user\", \"content\": \"x\"}]}",
        "{\"messages\": [{\"role\": \"user\", \"content\": \"x\"}], \"reasoning_format\": "
        "\"none\"}",
        "{\"messages\": [{\"role\": \"user\", \"content\": \"x\"}], \"reasoning_format\": "
        "\"deepseek\"}",
    };

    static const enum serve_reasoning_format want[] = {SERVE_REASONING_UNSET, SERVE_REASONING_NONE,
                                                       SERVE_REASONING_AUTO};

    for (int i = 0; i < 3; i++) {
        bool ok = serve_request_parse(bodies[i], strlen(bodies[i]), true, "chatml", 1, &r, msg,
                                      sizeof msg);
        CHECK_MSG(ok, "%s: %s", bodies[i], msg);
        if (!ok) continue;
        CHECK_EQ_INT((int)r.reasoning, (int)want[i]);
        serve_request_free(&r);
    }
    const char *bad = "{\"messages\": [{\"role\": \"user\", \"content\": \"x\"}], "
                      "\"reasoning_format\": \"think\"}";
    CHECK(!serve_request_parse(bad, strlen(bad), true, "chatml", 1, &r, msg, sizeof msg));
    CHECK_STR_CONTAINS(msg, "'reasoning_format' must be \"none\", \"auto\" or \"deepseek\"");
}

/* A request's reasoning_effort (and chat_template_kwargs.reasoning_effort, which it overrides,
 * as in llama.cpp) into the template's flags; "none" asks for no thinking; others are a 400. */
static void test_request_effort(void) {
#define MSGS "{\"messages\": [{\"role\": \"user\", \"content\": \"x\"}]"

    static const struct {
        const char *body;
        unsigned flags; /* besides ADD_ASSISTANT */
    } cases[] = {
        {MSGS "}", 0},
        {MSGS ", \"reasoning_effort\": \"low\"}", MOEINF_CHAT_EFFORT_LOW},
        {MSGS ", \"reasoning_effort\": \"medium\"}", MOEINF_CHAT_EFFORT_MEDIUM},
        {MSGS ", \"reasoning_effort\": \"high\"}", MOEINF_CHAT_EFFORT_HIGH},
        {MSGS ", \"reasoning_effort\": null}", 0},
        {MSGS ", \"reasoning_effort\": \"none\"}", MOEINF_CHAT_NO_THINKING},
        {MSGS ", \"chat_template_kwargs\": {\"reasoning_effort\": \"high\"}}",
         MOEINF_CHAT_EFFORT_HIGH},
        {MSGS ", \"chat_template_kwargs\": {\"reasoning_effort\": \"high\"}, "
              "\"reasoning_effort\": \"low\"}",
         MOEINF_CHAT_EFFORT_LOW},
    };

    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        struct serve_request r;
        char msg[320];
        bool ok = serve_request_parse(cases[i].body, strlen(cases[i].body), true, "harmony", 1, &r,
                                      msg, sizeof msg);
        CHECK_MSG(ok, "%s: %s", cases[i].body, msg);
        if (!ok) continue;
        CHECK_MSG(r.chat_flags == (MOEINF_CHAT_ADD_ASSISTANT | cases[i].flags), "%s: flags 0x%x",
                  cases[i].body, r.chat_flags);
        CHECK(r.thinking_set == ((cases[i].flags & MOEINF_CHAT_NO_THINKING) != 0));
        serve_request_free(&r);
    }

    static const struct {
        const char *body, *field;
    } bad[] = {
        {MSGS ", \"reasoning_effort\": \"max\"}", "'reasoning_effort' must be"},
        {MSGS ", \"reasoning_effort\": \"Low\"}", "'reasoning_effort' must be"},
        {MSGS ", \"reasoning_effort\": 2}", "'reasoning_effort' must be"},
        {MSGS ", \"chat_template_kwargs\": {\"reasoning_effort\": \"\"}}",
         "'chat_template_kwargs.reasoning_effort' must be"},
    };

    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        struct serve_request r;
        char msg[320];
        CHECK_MSG(!serve_request_parse(bad[i].body, strlen(bad[i].body), true, "harmony", 1, &r,
                                       msg, sizeof msg),
                  "%s accepted", bad[i].body);
        CHECK_STR_CONTAINS(msg, bad[i].field);
        CHECK_STR_CONTAINS(msg, "\"low\", \"medium\", \"high\" or \"none\"");
        CHECK(!strchr(msg, '\n'));
    }
#undef MSGS
}

/* ---- through HTTP ------------------------------------------------------------------------ */

/* The in-tree model that writes RAW after any prompt (tests/data/README.md). */
#define THINKING_MODEL "tests/data/models/thinking-qwen3moe-F32.gguf"
#define RAW            "<think> hmm, ok</think>  Hello"

static struct server srv;

#define USER "{\"messages\": [{\"role\": \"user\", \"content\": \"Hi\"}], \"temperature\": 0"

struct answer {
    int status;
    char content[256], reasoning[256], finish[16];
    bool has_content, has_reasoning;
    bool reasoning_after_content, both_in_one; /* streamed */
    int chunks;
};

static void take(struct answer *a, const cJSON *m, const cJSON *choice, bool chunk) {
    const char *c = str_field(m, "content");
    const char *r = str_field(m, "reasoning_content");
    const char *f = str_field(choice, "finish_reason");
    if (c && r && chunk) a->both_in_one = true;
    if (r && a->has_content && a->content[0]) a->reasoning_after_content = true;
    if (c) {
        a->has_content = true;
        strncat(a->content, c, sizeof a->content - strlen(a->content) - 1);
    }
    if (r) {
        a->has_reasoning = true;
        strncat(a->reasoning, r, sizeof a->reasoning - strlen(a->reasoning) - 1);
    }
    if (f) snprintf(a->finish, sizeof a->finish, "%s", f);
}

/* POST USER + extra + "}" to /v1/chat/completions; a stream's deltas are added up. */
static struct answer ask(const char *extra) {
    static char resp[1 << 16];
    char body[512];
    struct answer a = {0};
    snprintf(body, sizeof body, "%s%s}", USER, extra);
    a.status = serve_http(&srv, "POST", "/v1/chat/completions", body, NULL, resp, sizeof resp);
    if (a.status != 200) return a;
    if (!strstr(extra, "\"stream\": true")) {
        cJSON *root = cJSON_Parse(resp);
        const cJSON *choice =
            cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(root, "choices"), 0);
        take(&a, cJSON_GetObjectItemCaseSensitive(choice, "message"), choice, false);
        cJSON_Delete(root);
        return a;
    }
    char *save = NULL;
    for (char *line = strtok_r(resp, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        if (strncmp(line, "data: {", 7) != 0) continue;
        cJSON *chunk = cJSON_Parse(line + 6);
        const cJSON *choice =
            cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(chunk, "choices"), 0);
        if (choice) {
            take(&a, cJSON_GetObjectItemCaseSensitive(choice, "delta"), choice, true);
            a.chunks++;
        }
        cJSON_Delete(chunk);
    }
    return a;
}

static void check_answer(const char *extra, const struct answer *a, const char *reasoning,
                         const char *content, const char *finish) {
    bool ok =
        a->status == 200 && !strcmp(a->content, content) &&
        (reasoning ? a->has_reasoning && !strcmp(a->reasoning, reasoning) : !a->has_reasoning) &&
        !strcmp(a->finish, finish) && !a->reasoning_after_content && !a->both_in_one;
    CHECK_MSG(ok, "%s: status %d, reasoning_content %s\"%s\", content \"%s\", finish %s%s%s", extra,
              a->status, a->has_reasoning ? "" : "(absent) ", a->reasoning, a->content, a->finish,
              a->reasoning_after_content ? ", thinking after the answer" : "",
              a->both_in_one ? ", a chunk with both" : "");
}

static bool start(const char *path, const char *args) {
    char err[2048];
    bool up =
        serve_proc_start(&srv, "serve-reasoning", NULL, "127.0.0.1", path, args, err, sizeof err);
    CHECK_MSG(up, "the server did not start: %s", err);
    return up;
}

static void test_http(void) {
    char path[1024];
    test_src_path(THINKING_MODEL, path, sizeof path);
    if (!start(path, "--chat-template chatml -c 1024")) return;

    static const struct {
        const char *extra, *reasoning, *content, *finish;
    } cases[] = {
        /* the default: llama.cpp's auto */
        {"", "hmm, ok", "Hello", "stop"},
        {", \"stream\": true", "hmm, ok", "Hello", "stop"},
        {", \"reasoning_format\": \"deepseek\", \"stream\": true", "hmm, ok", "Hello", "stop"},
        /* none: as generated, markers and all */
        {", \"reasoning_format\": \"none\"", NULL, RAW, "stop"},
        {", \"reasoning_format\": \"none\", \"stream\": true", NULL, RAW, "stop"},
        /* max_tokens inside the thinking: all thinking, an empty answer */
        {", \"max_tokens\": 3", "hmm, ok", "", "length"},
        {", \"max_tokens\": 3, \"stream\": true", "hmm, ok", "", "length"},
        /* a stop string that cuts the end marker: what was held is thinking text */
        {", \"stop\": [\"nk>  \"]", "hmm, ok</thi", "", "stop"},
        {", \"stop\": [\"nk>  \"], \"stream\": true", "hmm, ok</thi", "", "stop"},
    };

    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        struct answer a = ask(cases[c].extra);
        check_answer(cases[c].extra, &a, cases[c].reasoning, cases[c].content, cases[c].finish);
        /* role, thinking, answer and finish: the thinking and the answer never share one */
        if (strstr(cases[c].extra, "stream") && cases[c].reasoning && cases[c].content[0]) {
            CHECK_MSG(a.chunks >= 4, "%s: %d chunks", cases[c].extra, a.chunks);
        }
    }
    /* the completions endpoint is unchanged */
    static char resp[1 << 16];
    int st = serve_http(&srv, "POST", "/v1/completions", "{\"prompt\": \"Hi\", \"temperature\": 0}",
                        NULL, resp, sizeof resp);
    CHECK_EQ_INT(st, 200);
    cJSON *root = cJSON_Parse(resp);
    const char *text =
        str_field(cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(root, "choices"), 0), "text");
    CHECK_MSG(text && !strcmp(text, RAW), "completions: \"%s\"", text ? text : "(none)");
    cJSON_Delete(root);
    /* unknown names are refused, naming the field */
    st = serve_http(&srv, "POST", "/v1/chat/completions",
                    USER ", \"reasoning_format\": \"deepseek-legacy\"}", NULL, resp, sizeof resp);
    CHECK_EQ_INT(st, 400);
    CHECK_STR_CONTAINS(resp, "'reasoning_format' must be");
    st = serve_http(&srv, "POST", "/v1/chat/completions", USER ", \"reasoning_format\": 1}", NULL,
                    resp, sizeof resp);
    CHECK_EQ_INT(st, 400);
    CHECK_EQ_INT(serve_proc_stop(&srv), 0);

    /* --reasoning-format none is the default of requests that give none */
    if (start(path, "--chat-template chatml -c 1024 --reasoning-format none")) {
        struct answer a = ask("");
        check_answer("--reasoning-format none", &a, NULL, RAW, "stop");
        a = ask(", \"reasoning_format\": \"auto\"");
        check_answer("--reasoning-format none, request auto", &a, "hmm, ok", "Hello", "stop");
        CHECK_EQ_INT(serve_proc_stop(&srv), 0);
    }
    /* qwen35: its prompt opens the block ("<think>\n"), so everything before "</think>" is
     * thinking, the model's own "<think>" included; enable_thinking false closes it in the
     * prompt, and all is answer */
    if (start(path, "--chat-template qwen35 -c 1024")) {
        struct answer a = ask("");
        check_answer("qwen35", &a, "<think> hmm, ok", "Hello", "stop");
        a = ask(", \"stream\": true");
        check_answer("qwen35 streamed", &a, "<think> hmm, ok", "Hello", "stop");
        a = ask(", \"reasoning_format\": \"none\"");
        check_answer("qwen35 none", &a, NULL, "<think>\n" RAW, "stop");
        a = ask(", \"chat_template_kwargs\": {\"enable_thinking\": false}");
        check_answer("qwen35 without thinking", &a, NULL, RAW, "stop");
        CHECK_EQ_INT(serve_proc_stop(&srv), 0);
    }
    /* glm45 (GLM-4.5/4.6): the model opens the block itself; enable_thinking false closes it
     * in the prompt ("<|assistant|>\n<think></think>"), after which this model writes "  Hello"
     * (it goes on from "</think>"): all answer, less its leading whitespace, as GLM writes
     * "\n" there. deepseek-r1: the prompt opens it, as qwen35's does */
    if (start(path, "--chat-template glm45 -c 1024")) {
        struct answer a = ask(", \"stream\": true");
        check_answer("glm45", &a, "hmm, ok", "Hello", "stop");
        a = ask(", \"chat_template_kwargs\": {\"enable_thinking\": false}");
        check_answer("glm45 without thinking", &a, NULL, "Hello", "stop");
        CHECK_EQ_INT(serve_proc_stop(&srv), 0);
    }
    if (start(path, "--chat-template deepseek-r1 -c 1024")) {
        struct answer a = ask("");
        check_answer("deepseek-r1", &a, "<think> hmm, ok", "Hello", "stop");
        CHECK_EQ_INT(serve_proc_stop(&srv), 0);
    }
    /* a family that does not think (mistral) is not split */
    if (start(path, "--chat-template mistral -c 1024")) {
        struct answer a = ask("");
        check_answer("--chat-template mistral", &a, NULL, RAW, "stop");
        CHECK_EQ_INT(serve_proc_stop(&srv), 0);
    }
    /* and the server's option refuses unknown names */
    char out[1024];
    char err[1024];
    char args[1200];
    snprintf(args, sizeof args, "serve -m '%s' --reasoning-format deepseek-legacy", path);
    int rc = test_run_moeinf("serve-reasoning-opt", args, out, sizeof out, err, sizeof err);
    CHECK_EQ_INT(rc, 2);
    CHECK_STR_CONTAINS(err, "--reasoning-format 'deepseek-legacy' is not none, auto or deepseek");
}

/* harmony: the prompt's reasoning effort is the request's (prompt_tokens as
 * moeinf_chat_tokenize counts them with that effort, the date fixed for both); this model
 * writes no channels, so all is answer; a bad effort is a 400 */
static void test_http_harmony(void) {
    static char resp[1 << 16];
    char path[1024];
    test_src_path(THINKING_MODEL, path, sizeof path);
    setenv("MOEINF_CHAT_DATE", "2026-01-15", 1); // NOLINT(concurrency-mt-unsafe): one thread
    struct moeinf_model *model = NULL;
    struct moeinf_error merr = {0};
    CHECK_EQ_INT(moeinf_model_load(path, NULL, &model, &merr), MOEINF_OK);
    if (model && start(path, "--chat-template harmony -c 4096")) {
        struct answer a = ask("");
        check_answer("harmony", &a, NULL, RAW, "stop");

        static const struct {
            const char *extra;
            unsigned flags;
        } efforts[] = {
            {"", 0},
            {", \"reasoning_effort\": \"low\"", MOEINF_CHAT_EFFORT_LOW},
            {", \"reasoning_effort\": \"high\"", MOEINF_CHAT_EFFORT_HIGH},
            {", \"reasoning_effort\": \"none\"", MOEINF_CHAT_NO_THINKING},
        };

        size_t counts[4] = {0};
        for (size_t i = 0; i < 4; i++) {
            struct moeinf_chat_message user = {"user", "Hi"};
            int32_t *ids = NULL;
            CHECK_EQ_INT(moeinf_chat_tokenize(model, "harmony", &user, 1,
                                              MOEINF_CHAT_ADD_ASSISTANT | efforts[i].flags, &ids,
                                              &counts[i], &merr),
                         MOEINF_OK);
            free(ids);
            char body[512];
            snprintf(body, sizeof body, "%s, \"max_tokens\": 1%s}", USER, efforts[i].extra);
            int code =
                serve_http(&srv, "POST", "/v1/chat/completions", body, NULL, resp, sizeof resp);
            cJSON *got = code == 200 ? cJSON_Parse(resp) : NULL;
            const cJSON *n = cJSON_GetObjectItemCaseSensitive(
                cJSON_GetObjectItemCaseSensitive(got, "usage"), "prompt_tokens");
            CHECK_MSG(cJSON_IsNumber(n) && n->valuedouble == (double)counts[i],
                      "%s: status %d, prompt_tokens %g, want %zu", body, code,
                      cJSON_IsNumber(n) ? n->valuedouble : -1.0, counts[i]);
            cJSON_Delete(got);
        }
        /* the efforts differ in the prompt ("none" is low: harmony cannot switch thinking off) */
        CHECK(counts[0] != counts[1] && counts[0] != counts[2] && counts[3] == counts[1]);
        CHECK_EQ_INT(serve_http(&srv, "POST", "/v1/chat/completions",
                                USER ", \"reasoning_effort\": \"extreme\"}", NULL, resp,
                                sizeof resp),
                     400);
        CHECK_STR_CONTAINS(resp, "'reasoning_effort' must be");
        CHECK_EQ_INT(serve_proc_stop(&srv), 0);
    }
    moeinf_model_free(model);
    unsetenv("MOEINF_CHAT_DATE"); // NOLINT(concurrency-mt-unsafe): one thread
}

/* gpt-oss's output as its vocabulary renders it (the tiny gpt-oss file): the markup tokens
 * through the detokenizer the worker uses, one token at a time, then the server's split.
 * The harmony markup, <|end|> included, is user-defined: it all shows. */
static void test_harmony_tokens(void) {
    char path[1024];
    struct moeinf_error err = {0};
    struct moeinf_model_params mp = moeinf_model_params_default();
    mp.vocab_only = true;
    test_src_path("tests/data/models/tiny-gptoss-F32.gguf", path, sizeof path);
    struct moeinf_model *m = NULL;
    CHECK_EQ_INT(moeinf_model_load(path, &mp, &m, &err), MOEINF_OK);
    if (!m) return;
    int32_t *ids = NULL;
    size_t n_ids = 0;
    CHECK_EQ_INT(moeinf_tokenize(m, HARMONY_THOUGHT, strlen(HARMONY_THOUGHT), false, true, &ids,
                                 &n_ids, &err),
                 MOEINF_OK);
    struct moeinf_text_stream *detok = NULL;
    CHECK_EQ_INT(moeinf_text_stream_init(m, &detok, &err), MOEINF_OK);
    struct serve_job job = {0};
    struct moeinf_chat_message user = {"user", "Hi"};
    CHECK(moeinf_chat_reasoning_init("harmony", &user, 1, MOEINF_CHAT_ADD_ASSISTANT, true,
                                     &job.split, &err) == MOEINF_OK);
    char shown[512] = "";
    for (size_t i = 0; detok && job.split && i < n_ids; i++) {
        size_t n = 0;
        const char *piece = moeinf_text_stream_push(detok, ids[i], &n);
        strncat(shown, piece, n < sizeof shown - strlen(shown) - 1 ? n : 0);
        CHECK(serve_job_show(&job, piece, n, false));
    }
    CHECK(job.split && serve_job_show(&job, NULL, 0, true));
    CHECK_MSG(!strcmp(shown, HARMONY_THOUGHT), "the text shows \"%s\"", shown);
    CHECK_MSG(job.reasoning && !strcmp(job.reasoning, "I'm\nthinking") && job.text &&
                  !strcmp(job.text, "Hello, world!\nWhat's up?"),
              "reasoning \"%s\", content \"%s\"", job.reasoning ? job.reasoning : "(none)",
              job.text ? job.text : "(none)");
    free(job.text);
    free(job.reasoning);
    moeinf_reasoning_free(job.split);
    moeinf_text_stream_free(detok);
    free(ids);
    moeinf_model_free(m);
}

int main(void) {
    RUN(test_format_names);
    RUN(test_split_reply);
    RUN(test_harmony_tokens);
    RUN(test_not_split);
    RUN(test_job_split_init);
    RUN(test_request_field);
    RUN(test_request_effort);
    RUN(test_http);
    RUN(test_http_harmony);
    return test_report();
}
