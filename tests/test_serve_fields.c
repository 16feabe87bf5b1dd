/*
 * test_serve_fields.c - the request fields of `moeinf serve` beyond test_serve.c's, through
 * curl against tiny-mixtral-Q8_0: n_predict and max_completion_tokens for max_tokens (and
 * refused when they disagree); logit_bias; logprobs/top_logprobs in OpenAI's chat and
 * completions forms, streamed and not, against a float64 log-softmax that this test computes
 * from the logits the library gives for the same tokens (greedy steps); tools, tool_choice and
 * response_format refused by name; and a chat message that spells the end token "</s>",
 * which must reach the model as text (as `moeinf run` tokenizes it), in the server and in
 * `moeinf chat`; chat_template_kwargs.enable_thinking through the qwen35 template.
 */
// ctest-labels: threads
#include <cjson/cJSON.h>
#include <signal.h>
#include <time.h>
#include <unistd.h>

#include "moeinf.h"
#include "serve_proc.h"
#include "test.h"

#define MODEL  "testdata/models/tiny-mixtral-Q8_0.gguf"
#define PROMPT "Once upon a time"
#define CHAT   "[INST] Hi there [/INST]" /* the mistral template's text of one user message */
#define TOL    2e-3                      /* logits of a decode here vs the server's */

static char model_path[1024];

static struct server srv;
static bool up;

static bool server_start(struct server *s, const char *args) {
    return serve_proc_start(s, "serve-fields", NULL, "127.0.0.1", model_path, args, NULL, 0);
}

static int server_stop(struct server *s) {
    return serve_proc_stop(s);
}

/* POST body to path: the HTTP status, the response body into out. */
static int post(const char *path, const char *body, char *out, size_t out_size) {
    return serve_http(&srv, "POST", path, body, NULL, out, out_size);
}

/* A non-streamed answer as JSON (NULL unless 200 and JSON). */
static cJSON *post_json(const char *path, const char *body) {
    static char resp[1 << 18];
    int st = post(path, body, resp, sizeof resp);
    CHECK_MSG(st == 200, "%s %s: status %d: %s", path, body, st, resp);
    return st == 200 ? cJSON_Parse(resp) : NULL;
}

static cJSON *choice0(cJSON *root) {
    return cJSON_GetArrayItem(cJSON_GetObjectItem(root, "choices"), 0);
}

static double usage(cJSON *root, const char *key) {
    cJSON *v = cJSON_GetObjectItem(cJSON_GetObjectItem(root, "usage"), key);
    return cJSON_IsNumber(v) ? v->valuedouble : -1;
}

/* ---- the reference: greedy steps through the library, log-softmax in float64 ----------- */

#define MAX_STEPS 8
#define MAX_TOP   20

struct step {
    int32_t id; /* the argmax (lowest id on ties) */
    double lp;
    int32_t top_id[MAX_TOP]; /* by log-probability, lowest id first on ties */
    double top_lp[MAX_TOP];
    double max, eos, prev; /* the best logit, EOS's, the previous step's token's */
};

static struct moeinf_model *model;

/* Greedy steps after `prompt` (tokenized as `moeinf run` does) with their log-probabilities;
 * *n_steps stops before an end token. `bias` (may be NULL) is added to the logits for the
 * choice only, never to the log-probabilities. */
static bool reference(const char *prompt, int steps, const float *bias, struct step *out,
                      int *n_steps) {
    struct moeinf_error err = {0};
    struct moeinf_context_params cp = moeinf_context_params_default();
    cp.n_ctx = 256;
    cp.n_threads = 1;
    struct moeinf_context *ctx = NULL;
    int32_t *ids = NULL;
    size_t n_ids = 0;
    const int n_vocab = moeinf_model_n_vocab(model);
    float *logits = malloc((size_t)n_vocab * sizeof *logits);
    double *lp = calloc((size_t)n_vocab, sizeof *lp);
    bool ok = n_vocab > 0 && logits && lp &&
              moeinf_context_init(model, &cp, &ctx, &err) == MOEINF_OK &&
              moeinf_tokenize(model, prompt, strlen(prompt), true, false, &ids, &n_ids, &err) ==
                  MOEINF_OK &&
              moeinf_decode(ctx, ids, (int)n_ids, logits, false, &err) == MOEINF_OK;
    *n_steps = 0;
    for (int s = 0; ok && s < steps; s++) {
        double max = -INFINITY;
        for (int i = 0; i < n_vocab; i++)
            max = fmax(max, (double)logits[i]);
        double sum = 0;
        for (int i = 0; i < n_vocab; i++)
            sum += exp((double)logits[i] - max);
        int32_t best = 0;
        for (int i = 0; i < n_vocab; i++) {
            lp[i] = (double)logits[i] - max - log(sum);
            double bi = (double)logits[i] + (bias ? bias[i] : 0);
            double bb = (double)logits[best] + (bias ? bias[best] : 0);
            if (bi > bb) best = i;
        }
        struct step *st = &out[s];
        st->max = max;
        st->eos = (double)logits[moeinf_token_eos(model)];
        st->prev = s > 0 ? (double)logits[out[s - 1].id] : NAN;
        st->id = best;
        st->lp = lp[best];
        for (int k = 0; k < MAX_TOP; k++) { /* selection: MAX_TOP passes */
            int32_t pick = -1;
            for (int i = 0; i < n_vocab; i++) {
                bool taken = false;
                for (int j = 0; j < k; j++)
                    taken |= st->top_id[j] == i;
                if (!taken && (pick < 0 || lp[i] > lp[pick])) pick = i;
            }
            st->top_id[k] = pick;
            st->top_lp[k] = lp[pick];
        }
        if (moeinf_token_is_eog(model, best)) break;
        (*n_steps)++;
        ok = moeinf_decode(ctx, &best, 1, logits, false, &err) == MOEINF_OK;
    }
    CHECK_MSG(ok, "reference: %s", err.msg);
    free(ids);
    free(logits);
    free(lp);
    moeinf_context_free(ctx);
    return ok;
}

static bool ascii_piece(int32_t id, const char **p, size_t *n) {
    *p = moeinf_token_piece(model, id, true, n);
    for (size_t i = 0; i < *n; i++)
        if ((unsigned char)(*p)[i] >= 0x80) return false;
    return true;
}

/* The chat form's token: its bytes are the piece's. */
static void check_bytes(cJSON *e, int32_t id, const char *what) {
    size_t n;
    const char *p = moeinf_token_piece(model, id, true, &n);
    cJSON *b = cJSON_GetObjectItem(e, "bytes");
    bool same = cJSON_IsArray(b) && (size_t)cJSON_GetArraySize(b) == n;
    for (size_t i = 0; same && i < n; i++)
        same = cJSON_GetArrayItem(b, (int)i)->valuedouble == (unsigned char)p[i];
    CHECK_MSG(same, "%s: bytes of token %d", what, (int)id);
}

/* ---- n_predict, max_completion_tokens ---------------------------------------------------- */

static void test_max_tokens_aliases(void) {
    if (!up) return;

    static const struct {
        const char *path, *body;
        int tokens;
    } cases[] = {
        {"/v1/completions", "{\"prompt\": \"" PROMPT "\", \"temperature\": 0, \"n_predict\": 5}",
         5},
        {"/v1/completions",
         "{\"prompt\": \"" PROMPT "\", \"temperature\": 0, \"max_completion_tokens\": 3}", 3},
        {"/v1/completions",
         "{\"prompt\": \"" PROMPT "\", \"temperature\": 0, \"max_tokens\": 4, \"n_predict\": 4, "
         "\"max_completion_tokens\": 4}",
         4},
        {"/v1/chat/completions",
         "{\"messages\": [{\"role\": \"user\", \"content\": \"Hi there\"}], \"temperature\": 0, "
         "\"n_predict\": 4}",
         4},
        {"/v1/chat/completions",
         "{\"messages\": [{\"role\": \"user\", \"content\": \"Hi there\"}], \"temperature\": 0, "
         "\"n_predict\": 2, \"stream\": true}",
         -1}, /* streamed: counted from the chunks below */
    };

    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        if (cases[i].tokens < 0) {
            char resp[65536];
            CHECK_EQ_INT(post(cases[i].path, cases[i].body, resp, sizeof resp), 200);
            int chunks = 0; /* role, one per token (ASCII greedy text), finish */
            for (const char *p = resp; (p = strstr(p, "\"delta\"")); p++)
                chunks++;
            CHECK_MSG(chunks <= 4 && strstr(resp, "\"finish_reason\":\"length\""), "%s", resp);
            continue;
        }
        cJSON *root = post_json(cases[i].path, cases[i].body);
        CHECK_MSG(usage(root, "completion_tokens") == cases[i].tokens, "case %zu: %g tokens", i,
                  usage(root, "completion_tokens"));
        cJSON *f = cJSON_GetObjectItem(choice0(root), "finish_reason");
        CHECK(cJSON_IsString(f) && !strcmp(f->valuestring, "length"));
        cJSON_Delete(root);
    }
}

/* ---- bad fields: 400 naming the field ---------------------------------------------------- */

static void test_refused_fields(void) {
    if (!up) return;

    static const struct {
        bool chat;
        const char *fields, *says;
    } cases[] = {
        {false, "\"max_tokens\": 4, \"n_predict\": 5", "'max_tokens' (4) and 'n_predict' (5)"},
        {true, "\"max_completion_tokens\": 4, \"n_predict\": -1",
         "'max_completion_tokens' (4) and 'n_predict' (-1)"},
        {false, "\"n_predict\": 0", "'n_predict'"},
        {false, "\"max_completion_tokens\": \"8\"", "'max_completion_tokens'"},
        {false, "\"logit_bias\": {\"abc\": 1}", "'logit_bias' key 'abc'"},
        {false, "\"logit_bias\": {\"-1\": 1}", "'logit_bias' key '-1'"},
        {false, "\"logit_bias\": {\"5\": 101}", "'logit_bias' value of token 5"},
        {false, "\"logit_bias\": {\"5\": \"1\"}", "'logit_bias' value of token 5"},
        {false, "\"logit_bias\": {\"32000\": 1}", "'logit_bias' names token 32000"},
        {false, "\"logit_bias\": {\"7\": 1, \"7\": 2}", "'logit_bias' names token 7 twice"},
        {false, "\"logit_bias\": [1]", "'logit_bias' must be an object"},
        {false, "\"logprobs\": 21", "'logprobs' must be in [0, 20]"},
        {false, "\"logprobs\": true", "'logprobs' must be an integer"},
        {true, "\"logprobs\": 3", "'logprobs' must be true or false"},
        {true, "\"top_logprobs\": 3", "'top_logprobs' needs 'logprobs': true"},
        {true, "\"logprobs\": true, \"top_logprobs\": 21", "'top_logprobs' must be in [0, 20]"},
        {true,
         "\"tools\": [{\"type\": \"function\", \"function\": {\"name\": \"f\", \"parameters\": "
         "{}}}]",
         "'tools' is not supported"},
        {true, "\"tool_choice\": \"auto\"", "'tool_choice' is not supported"},
        {true, "\"tool_choice\": {\"type\": \"function\", \"function\": {\"name\": \"f\"}}",
         "'tool_choice' is not supported"},
        {true, "\"functions\": [{\"name\": \"f\"}]", "'functions' is not supported"},
        {true, "\"response_format\": {\"type\": \"json_object\"}", "'response_format'"},
        {true, "\"response_format\": {\"type\": \"json_schema\", \"json_schema\": {}}",
         "'response_format'"},
        {true, "\"response_format\": \"text\"", "'response_format'"},
        {true, "\"chat_template_kwargs\": [1]", "'chat_template_kwargs' must be an object"},
        {true, "\"chat_template_kwargs\": {\"enable_thinking\": \"no\"}",
         "'chat_template_kwargs.enable_thinking' must be true or false"},
    };

    char body[1024];
    char resp[8192];
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        snprintf(body, sizeof body, "{%s, \"max_tokens\": 4, %s}",
                 cases[i].chat ? "\"messages\": [{\"role\": \"user\", \"content\": \"x\"}]"
                               : "\"prompt\": \"x\"",
                 cases[i].fields);
        if (strstr(cases[i].fields, "max_tokens") || strstr(cases[i].fields, "n_predict") ||
            strstr(cases[i].fields, "max_completion")) { /* without the default max_tokens */
            snprintf(body, sizeof body, "{%s, %s}",
                     cases[i].chat ? "\"messages\": [{\"role\": \"user\", \"content\": \"x\"}]"
                                   : "\"prompt\": \"x\"",
                     cases[i].fields);
        }
        int st = post(cases[i].chat ? "/v1/chat/completions" : "/v1/completions", body, resp,
                      sizeof resp);
        CHECK_MSG(st == 400 && strstr(resp, cases[i].says), "case %zu (%s): %d %s, want 400 [%s]",
                  i, body, st, resp, cases[i].says);
    }
    /* what asks for nothing passes */
    cJSON *root = post_json("/v1/chat/completions",
                            "{\"messages\": [{\"role\": \"user\", \"content\": \"x\"}], "
                            "\"max_tokens\": 2, \"tools\": [], \"tool_choice\": \"none\", "
                            "\"response_format\": {\"type\": \"text\"}, \"logit_bias\": {}, "
                            "\"logprobs\": false}");
    CHECK(root != NULL);
    CHECK(cJSON_IsNull(cJSON_GetObjectItem(choice0(root), "logprobs")));
    cJSON_Delete(root);
}

/* ---- logprobs ---------------------------------------------------------------------------- */

/* Completions' form: tokens, token_logprobs, top_logprobs ({token: logprob}) and text_offset
 * against the reference steps. */
static void check_completion_logprobs(cJSON *lp, const struct step *ref, int n, int n_top,
                                      const char *what) {
    cJSON *tokens = cJSON_GetObjectItem(lp, "tokens");
    cJSON *lps = cJSON_GetObjectItem(lp, "token_logprobs");
    cJSON *tops = cJSON_GetObjectItem(lp, "top_logprobs");
    cJSON *offs = cJSON_GetObjectItem(lp, "text_offset");
    CHECK_MSG(cJSON_GetArraySize(tokens) == n && cJSON_GetArraySize(lps) == n &&
                  cJSON_GetArraySize(tops) == n && cJSON_GetArraySize(offs) == n,
              "%s: %d tokens, want %d", what, cJSON_GetArraySize(tokens), n);
    if (cJSON_GetArraySize(tokens) != n) return;
    double chars = 0;
    for (int s = 0; s < n; s++) {
        const char *p;
        size_t len;
        if (ascii_piece(ref[s].id, &p, &len)) {
            const char *t = cJSON_GetArrayItem(tokens, s)->valuestring;
            CHECK_MSG(t && strlen(t) == len && !memcmp(t, p, len), "%s step %d: token [%s]", what,
                      s, t ? t : "");
        }
        CHECK_NEAR(cJSON_GetArrayItem(lps, s)->valuedouble, ref[s].lp, TOL);
        CHECK_EQ_INT(cJSON_GetArrayItem(offs, s)->valuedouble, chars);
        p = moeinf_token_piece(model, ref[s].id, true, &len);
        for (size_t i = 0; i < len; i++)
            chars += (p[i] & 0xC0) != 0x80;
        cJSON *top = cJSON_GetArrayItem(tops, s);
        CHECK_EQ_INT(cJSON_GetArraySize(top), n_top);
        int k = 0;
        for (cJSON *e = top ? top->child : NULL; e && k < n_top; e = e->next, k++) {
            CHECK_NEAR(e->valuedouble, ref[s].top_lp[k], TOL);
            if (ascii_piece(ref[s].top_id[k], &p, &len)) {
                CHECK_MSG(strlen(e->string) == len && !memcmp(e->string, p, len),
                          "%s step %d top %d: [%s]", what, s, k, e->string);
            }
        }
    }
}

/* Chat's form: content[] of {token, logprob, bytes, top_logprobs[]}. */
static void check_chat_logprobs(cJSON *lp, const struct step *ref, int n, int n_top,
                                const char *what) {
    cJSON *content = cJSON_GetObjectItem(lp, "content");
    CHECK_MSG(cJSON_GetArraySize(content) == n, "%s: %d entries, want %d", what,
              cJSON_GetArraySize(content), n);
    if (cJSON_GetArraySize(content) != n) return;
    for (int s = 0; s < n; s++) {
        cJSON *e = cJSON_GetArrayItem(content, s);
        CHECK(cJSON_IsString(cJSON_GetObjectItem(e, "token")));
        check_bytes(e, ref[s].id, what);
        CHECK_NEAR(cJSON_GetObjectItem(e, "logprob")->valuedouble, ref[s].lp, TOL);
        cJSON *top = cJSON_GetObjectItem(e, "top_logprobs");
        CHECK_EQ_INT(cJSON_GetArraySize(top), n_top);
        for (int k = 0; k < n_top && k < cJSON_GetArraySize(top); k++) {
            cJSON *t = cJSON_GetArrayItem(top, k);
            check_bytes(t, ref[s].top_id[k], what);
            CHECK_NEAR(cJSON_GetObjectItem(t, "logprob")->valuedouble, ref[s].top_lp[k], TOL);
        }
    }
}

/* The logprobs of every chunk of a stream, joined into one of the non-streamed form. */
static cJSON *stream_logprobs(const char *resp, bool chat) {
    cJSON *all = cJSON_CreateObject();
    static const char *const keys[] = {"tokens", "token_logprobs", "top_logprobs", "text_offset",
                                       "content"};
    for (int k = 0; k < 5; k++)
        cJSON_AddArrayToObject(all, keys[k]);
    for (const char *p = resp; (p = strstr(p, "data: {")); p++) {
        const char *end = strstr(p, "\n\n");
        cJSON *root = end ? cJSON_ParseWithLength(p + 6, (size_t)(end - p - 6)) : NULL;
        cJSON *lp = cJSON_GetObjectItem(choice0(root), "logprobs");
        for (int k = chat ? 4 : 0; k < (chat ? 5 : 4); k++) {
            cJSON *a = cJSON_GetObjectItem(lp, keys[k]);
            for (cJSON *e = a ? a->child : NULL; e; e = e->next)
                cJSON_AddItemToArray(cJSON_GetObjectItem(all, keys[k]), cJSON_Duplicate(e, true));
        }
        cJSON_Delete(root);
    }
    return all;
}

static void test_logprobs(void) {
    if (!up) return;
    struct step ref[MAX_STEPS];
    int n = 0;
    if (!reference(PROMPT, 4, NULL, ref, &n)) return;
    char body[1024];
    static char resp[1 << 18];
    for (int stream = 0; stream < 2; stream++) {
        snprintf(body, sizeof body,
                 "{\"prompt\": \"" PROMPT "\", \"temperature\": 0, \"max_tokens\": 4, "
                 "\"logprobs\": 5, \"stream\": %s}",
                 stream ? "true" : "false");
        CHECK_EQ_INT(post("/v1/completions", body, resp, sizeof resp), 200);
        cJSON *root = stream ? NULL : cJSON_Parse(resp);
        cJSON *lp = stream ? stream_logprobs(resp, false)
                           : cJSON_DetachItemFromObject(choice0(root), "logprobs");
        check_completion_logprobs(lp, ref, n, 5, stream ? "completions, streamed" : "completions");
        cJSON_Delete(lp);
        cJSON_Delete(root);
    }
    /* logprobs 0: the tokens' own, no alternatives */
    cJSON *root = post_json("/v1/completions", "{\"prompt\": \"" PROMPT "\", \"temperature\": 0, "
                                               "\"max_tokens\": 2, \"logprobs\": 0}");
    check_completion_logprobs(cJSON_GetObjectItem(choice0(root), "logprobs"), ref, n < 2 ? n : 2, 0,
                              "completions, 0");
    cJSON_Delete(root);

    /* tokens that print nothing (BOS forced with logit_bias): no text, but their entries,
     * streamed and not, with the control token spelled out */
    for (int stream = 0; stream < 2; stream++) {
        snprintf(body, sizeof body,
                 "{\"prompt\": \"" PROMPT "\", \"max_tokens\": 2, \"logprobs\": 1, "
                 "\"logit_bias\": {\"%d\": 100}, \"stream\": %s}",
                 (int)moeinf_token_bos(model), stream ? "true" : "false");
        CHECK_EQ_INT(post("/v1/completions", body, resp, sizeof resp), 200);
        root = stream ? NULL : cJSON_Parse(resp);
        cJSON *lp = stream ? stream_logprobs(resp, false)
                           : cJSON_DetachItemFromObject(choice0(root), "logprobs");
        cJSON *tokens = cJSON_GetObjectItem(lp, "tokens");
        CHECK_MSG(cJSON_GetArraySize(tokens) == 2 &&
                      !strcmp(cJSON_GetArrayItem(tokens, 1)->valuestring, "<s>") &&
                      cJSON_GetArrayItem(cJSON_GetObjectItem(lp, "text_offset"), 1)->valuedouble ==
                          0,
                  "stream %d: %s", stream, resp);
        cJSON_Delete(lp);
        cJSON_Delete(root);
    }

    if (!reference(CHAT, 3, NULL, ref, &n)) return;
    for (int stream = 0; stream < 2; stream++) {
        snprintf(body, sizeof body,
                 "{\"messages\": [{\"role\": \"user\", \"content\": \"Hi there\"}], "
                 "\"temperature\": 0, \"max_tokens\": 3, \"logprobs\": true, \"top_logprobs\": "
                 "%d, \"stream\": %s}",
                 stream ? 20 : 2, stream ? "true" : "false");
        CHECK_EQ_INT(post("/v1/chat/completions", body, resp, sizeof resp), 200);
        root = stream ? NULL : cJSON_Parse(resp);
        cJSON *lp = stream ? stream_logprobs(resp, true)
                           : cJSON_DetachItemFromObject(choice0(root), "logprobs");
        check_chat_logprobs(lp, ref, n, stream ? 20 : 2, stream ? "chat, streamed" : "chat");
        cJSON_Delete(lp);
        cJSON_Delete(root);
    }
}

/* ---- logit_bias -------------------------------------------------------------------------- */

static void test_logit_bias(void) {
    if (!up) return;
    struct step ref[MAX_STEPS];
    struct step biased[MAX_STEPS];
    int n = 0;
    int nb = 0;
    const int n_vocab = moeinf_model_n_vocab(model);
    float *bias = calloc((size_t)n_vocab, sizeof *bias);
    if (!bias || !reference(PROMPT, 1, NULL, ref, &n) || n < 1) {
        free(bias);
        CHECK(false);
        return;
    }
    /* -100 on the greedy token and +7.5 on the fifth most likely: the reference decides the
     * greedy steps on the biased logits; the log-probabilities stay the model's */
    const int32_t banned = ref[0].id;
    const int32_t raised = ref[0].top_id[4];
    bias[banned] = -100.0f;
    bias[raised] = 7.5f;
    bool ok = reference(PROMPT, 3, bias, biased, &nb);
    free(bias);
    if (!ok) return;
    CHECK(biased[0].id != banned);
    char body[512];
    snprintf(body, sizeof body,
             "{\"prompt\": \"" PROMPT "\", \"temperature\": 0, \"max_tokens\": 3, \"logprobs\": "
             "5, \"logit_bias\": {\"%d\": -100, \"%d\": 7.5}}",
             (int)banned, (int)raised);
    cJSON *root = post_json("/v1/completions", body);
    check_completion_logprobs(cJSON_GetObjectItem(choice0(root), "logprobs"), biased, nb, 5,
                              "biased");
    cJSON_Delete(root);
    /* +100: that token every time, sampled (temperature 1) or not */
    snprintf(body, sizeof body,
             "{\"prompt\": \"" PROMPT "\", \"seed\": 3, \"max_tokens\": 3, \"top_k\": 0, "
             "\"min_p\": 0, \"logit_bias\": {\"%d\": 100}}",
             (int)raised);
    root = post_json("/v1/completions", body);
    const char *p;
    size_t len;
    if (ascii_piece(raised, &p, &len)) {
        char want[256];
        snprintf(want, sizeof want, "%.*s%.*s%.*s", (int)len, p, (int)len, p, (int)len, p);
        cJSON *t = cJSON_GetObjectItem(choice0(root), "text");
        CHECK_MSG(cJSON_IsString(t) && !strcmp(t->valuestring, want), "+100: [%s], want [%s]",
                  cJSON_IsString(t) ? t->valuestring : "", want);
    }
    cJSON_Delete(root);
}

/* ---- text held back by a stop string, at an end token ---------------------------------- */

/* A generation that ends with an end token shows the text a stop string held back. With
 * logit_bias, the greedy first token t0 is raised by B and EOS by E so that t0 still wins the
 * first step and EOS the second (t0 is less likely after itself); the stop string is the
 * text's last character followed by characters that never come. */
static void test_held_text_at_end_token(void) {
    if (!up) return;
    struct step ref[2];
    int n = 0;
    if (!reference(PROMPT, 2, NULL, ref, &n) || n < 2) {
        CHECK(false);
        return;
    }
    const double x0 = ref[0].max - ref[0].eos;  /* t0 over EOS, step 0 */
    const double x1 = ref[1].prev - ref[1].eos; /* t0 over EOS, step 1 */
    if (!(x1 + 1.0 < x0 - 1.0)) {               /* margins far above the logits' noise */
        test_skip("the first token is not less likely after itself");
        return;
    }
    const double d = (x0 + x1) / 2;                        /* E - B */
    const double e = fmax(ref[1].max - ref[1].eos, d) + 5; /* EOS beats the rest at step 1 */
    const double b = e - d;
    size_t len;
    const char *p = moeinf_token_piece(model, ref[0].id, true, &len);
    if (len == 0 || len > 64 || (unsigned char)p[len - 1] >= 0x80 || p[len - 1] == '"' ||
        p[len - 1] == '\\' || e > 100 || b > 100) {
        test_skip("the first token does not end in a plain ASCII character");
        return;
    }
    char body[512];
    snprintf(body, sizeof body,
             "{\"prompt\": \"" PROMPT "\", \"temperature\": 0, \"max_tokens\": 8, "
             "\"stop\": \"%c~~~\", \"logit_bias\": {\"%d\": %.3f, \"%d\": %.3f}}",
             p[len - 1], (int)ref[0].id, b, (int)moeinf_token_eos(model), e);
    cJSON *root = post_json("/v1/completions", body);
    cJSON *t = cJSON_GetObjectItem(choice0(root), "text");
    cJSON *f = cJSON_GetObjectItem(choice0(root), "finish_reason");
    char want[80];
    snprintf(want, sizeof want, "%.*s", (int)len, p);
    CHECK_MSG(cJSON_IsString(t) && !strcmp(t->valuestring, want), "[%s], want [%s] (%s)",
              cJSON_IsString(t) ? t->valuestring : "", want, body);
    CHECK(cJSON_IsString(f) && !strcmp(f->valuestring, "stop"));
    CHECK_EQ_INT(usage(root, "completion_tokens"), 2); /* t0 and the end token */
    cJSON_Delete(root);
}

/* ---- special tokens in chat messages ----------------------------------------------------- */

/* "</s>" typed in a message is text: the server and `moeinf chat` see what `moeinf run` sees
 * for the template's text (run tokenizes its prompt without special tokens). */
static void test_chat_special_tokens(void) {
    if (!up) return;
    const char *text = "[INST] Hi there</s> [/INST]";
    int32_t *ids = NULL;
    size_t n_ids = 0;
    struct moeinf_error err = {0};
    CHECK_EQ_INT(moeinf_tokenize(model, text, strlen(text), true, false, &ids, &n_ids, &err),
                 MOEINF_OK);
    free(ids);
    cJSON *root = post_json("/v1/chat/completions",
                            "{\"messages\": [{\"role\": \"user\", \"content\": \"Hi there</s>\"}], "
                            "\"temperature\": 0, \"max_tokens\": 6}");
    CHECK_MSG(usage(root, "prompt_tokens") == (double)n_ids, "prompt_tokens %g, want %zu",
              usage(root, "prompt_tokens"), n_ids);
    cJSON *c = cJSON_GetObjectItem(cJSON_GetObjectItem(choice0(root), "message"), "content");
    char answer[4096];
    snprintf(answer, sizeof answer, "%s", cJSON_IsString(c) ? c->valuestring : "");
    cJSON_Delete(root);
    char args[2048];
    char out[8192];
    char errs[4096];
    snprintf(args, sizeof args, "run -m '%s' -p '%s' --temp 0 -n 6 -t 1", model_path, text);
    CHECK_EQ_INT(test_run_moeinf("serve-fields-run", args, out, sizeof out, errs, sizeof errs), 0);
    size_t nt = strlen(text);
    size_t no = strlen(out);
    CHECK(no > nt && !strncmp(out, text, nt) && out[no - 1] == '\n');
    char want[8192]; /* run's answer and its newline */
    snprintf(want, sizeof want, "%s", no > nt ? out + nt : "");
    char got[8192];
    snprintf(got, sizeof got, "%s\n", answer);
    CHECK_MSG(!strcmp(got, want), "server [%s], run [%s]", got, want);
    snprintf(args, sizeof args,
             "printf 'Hi there</s>\\n/exit\\n' | '%s' chat -m '%s' --chat-template mistral "
             "--temp 0 -n 6 -t 1",
             test_moeinf_bin(), model_path);
    CHECK_EQ_INT(test_run_shell("serve-fields-chat", args, out, sizeof out, errs, sizeof errs), 0);
    CHECK_MSG(!strcmp(out, want), "chat printed [%s], run [%s]", out, want);
}

/* ---- chat_template_kwargs.enable_thinking ----------------------------------------------- */

/* With the qwen35 template, enable_thinking false ends the prompt with an empty thinking block
 * ("<think>\n\n</think>\n\n" instead of "<think>\n"): the server's prompt_tokens are those
 * of moeinf_chat_tokenize with and without MOEINF_CHAT_NO_THINKING, which differ. */
static void test_enable_thinking(void) {
    if (!up) return;
    struct server q;
    bool q_up = serve_proc_start(&q, "serve-fields-qwen35", NULL, "127.0.0.1", model_path,
                                 "--chat-template qwen35 -c 256 -t 1", NULL, 0);
    CHECK(q_up);
    if (!q_up) return;
    struct moeinf_chat_message msg = {"user", "Hi there"};
    size_t n_tokens[2] = {0, 0}; /* thinking on, off */
    for (int off = 0; off < 2; off++) {
        int32_t *ids = NULL;
        struct moeinf_error err = {0};
        unsigned flags = MOEINF_CHAT_ADD_ASSISTANT | (off ? MOEINF_CHAT_NO_THINKING : 0);
        CHECK_EQ_INT(
            moeinf_chat_tokenize(model, "qwen35", &msg, 1, flags, &ids, &n_tokens[off], &err),
            MOEINF_OK);
        free(ids);
    }
    CHECK(n_tokens[1] > n_tokens[0]);

    static const struct {
        const char *kwargs;
        int off;
    } cases[] = {{"", 0},
                 {", \"chat_template_kwargs\": {\"enable_thinking\": true}", 0},
                 {", \"chat_template_kwargs\": {\"enable_thinking\": false}", 1},
                 {", \"chat_template_kwargs\": {\"enable_thinking\": false, \"other\": 1}", 1},
                 {", \"chat_template_kwargs\": {}", 0},
                 {", \"chat_template_kwargs\": null", 0}};

    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char body[512];
        snprintf(body, sizeof body,
                 "{\"messages\": [{\"role\": \"user\", \"content\": \"Hi there\"}], "
                 "\"max_tokens\": 1%s}",
                 cases[i].kwargs);
        static char resp[1 << 16];
        int st = serve_http(&q, "POST", "/v1/chat/completions", body, NULL, resp, sizeof resp);
        cJSON *root = st == 200 ? cJSON_Parse(resp) : NULL;
        CHECK_MSG(root && usage(root, "prompt_tokens") == (double)n_tokens[cases[i].off],
                  "%s: status %d, prompt_tokens %g, want %zu", body, st,
                  root ? usage(root, "prompt_tokens") : -1.0, n_tokens[cases[i].off]);
        cJSON_Delete(root);
    }
    CHECK_EQ_INT(serve_proc_stop(&q), 0);

    /* --reasoning off: enable_thinking false for the requests that do not say */
    q_up = serve_proc_start(&q, "serve-fields-qwen35-off", NULL, "127.0.0.1", model_path,
                            "--chat-template qwen35 --reasoning off -c 256 -t 1", NULL, 0);
    CHECK(q_up);
    if (!q_up) return;
    for (size_t i = 0; i < 3; i++) {
        char body[512];
        snprintf(body, sizeof body,
                 "{\"messages\": [{\"role\": \"user\", \"content\": \"Hi there\"}], "
                 "\"max_tokens\": 1%s}",
                 cases[i].kwargs);
        static char resp[1 << 16];
        int st = serve_http(&q, "POST", "/v1/chat/completions", body, NULL, resp, sizeof resp);
        cJSON *root = st == 200 ? cJSON_Parse(resp) : NULL;
        size_t want = n_tokens[i == 1 ? 0 : 1]; /* only an explicit true thinks */
        CHECK_MSG(root && usage(root, "prompt_tokens") == (double)want,
                  "--reasoning off, %s: status %d, prompt_tokens %g, want %zu", body, st,
                  root ? usage(root, "prompt_tokens") : -1.0, want);
        cJSON_Delete(root);
    }
    CHECK_EQ_INT(serve_proc_stop(&q), 0);
}

int main(void) {
    if (!test_shared_path(MODEL, model_path, sizeof model_path)) return test_report();
    if (!getenv("MOEINF_BIN")) { // NOLINT(concurrency-mt-unsafe): main thread
        test_skip("MOEINF_BIN unset (run through ctest)");
        return test_report();
    }
    signal(SIGPIPE, SIG_IGN);
    struct moeinf_error err = {0};
    CHECK_EQ_INT(moeinf_model_load(model_path, NULL, &model, &err), MOEINF_OK);
    up = model && server_start(&srv, "--chat-template mistral -c 256 -t 1");
    CHECK(up);
    RUN(test_max_tokens_aliases);
    RUN(test_refused_fields);
    RUN(test_logprobs);
    RUN(test_logit_bias);
    RUN(test_held_text_at_end_token);
    RUN(test_chat_special_tokens);
    RUN(test_enable_thinking);
    if (up) CHECK_EQ_INT(server_stop(&srv), 0);
    moeinf_model_free(model);
    return test_report();
}
