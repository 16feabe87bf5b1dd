/*
 * cmd_chat.c - moeinf chat: an interactive chat in the terminal. Each line is a user message;
 * the whole history goes through the chat template (as `moeinf serve` does) and the context
 * keeps the tokens the history shares with the last turn, so each turn decodes only what is
 * new. Ctrl-C stops the answer being written (the part written stays in the history); /exit
 * or end of input quits. A conversation that outgrows the context loses its oldest turns (a
 * user message and its answer at a time; the system message stays) until it leaves room for
 * the answer; a message too long for the context even alone is refused and the session goes on.
 * A model that thinks (<think>...</think>, or gpt-oss's analysis channel) shows only its answer
 * (gpt-oss's final channel) unless --show-thinking; the history keeps the answer only.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "app/model_args.h"
#include "cli/cli.h"

static void usage(FILE *out) {
    struct moeinf_sampler_params d = moeinf_sampler_params_default();
    fprintf(out,
            "usage: moeinf chat [-m MODEL] [--chat-template T] [options]\n\n"
            "An interactive chat: type a message and Enter; the answer streams. Ctrl-C stops an\n"
            "answer; /exit or end of input (Ctrl-D) quits. A conversation that outgrows the\n"
            "context (-c) loses its oldest turns, the system message kept, until the answer has\n"
            "room (-n tokens, at most half the context; a quarter of it without -n); a message\n"
            "too long for the context alone is not sent, and the chat goes on.\n"
            "  --chat-template T  mistral|chatml|llama3|deepseek2|deepseek3|deepseek-r1|olmoe|\n"
            "                     qwen35|harmony|glm45|glm47|kimi-k2|kimi-k2-thinking;\n"
            "                     default: the model's own (tokenizer.chat_template)\n"
            "  --system TEXT      a system message first\n"
            "  --show-thinking    show a thinking model's thinking before its answer, between\n"
            "                     [Start thinking] and [End thinking] (dimmed on a terminal);\n"
            "                     by default only the answer shows\n"
            "  --reasoning-format F  auto|deepseek (default: the answer apart from the\n"
            "                     thinking) or none (the text as generated, markers and all)\n"
            "  --reasoning on|off|auto  off asks the template for an answer without thinking\n"
            "                     (enable_thinking false: Qwen3.5, GLM, DeepSeek-R1;\n"
            "                     gpt-oss, which always thinks, gets low effort); on and auto\n"
            "                     (default) leave it to the template\n"
            "  --reasoning-effort E  low|medium|high: how hard gpt-oss (harmony) thinks\n"
            "                     (default: medium, low with --reasoning off); other\n"
            "                     templates ignore it\n"
            "  -n N               at most N tokens per answer (default: until an end token or\n"
            "                     the context's end)\n"
            "  --temp T, --top-k K, --top-p P, --min-p P, --repeat-penalty R, --seed S\n"
            "                     sampling as in `moeinf run` (defaults %.2f, %d, %.2f, %.2f,\n"
            "                     %.2f, %llu)\n"
            "%s",
            (double)d.temp, d.top_k, (double)d.top_p, (double)d.min_p, (double)d.repeat_penalty,
            (unsigned long long)d.seed, model_args_help);
}

struct chat_opts {
    struct model_args model;
    struct moeinf_sampler_params sp;
    const char *template_name;
    const char *system;
    long n_predict; /* 0: no limit */
    bool show_thinking;
    bool split;          /* --reasoning-format other than none */
    unsigned chat_flags; /* MOEINF_CHAT_*: ADD_ASSISTANT, NO_THINKING with --reasoning off,
                            EFFORT_* with --reasoning-effort */
};

static int parse(int argc, char **argv, struct chat_opts *o) {
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage(stdout);
            return -1;
        }
        int r = model_args_parse("chat", &o->model, argc, argv, &i);
        if (r < 0) return CLI_EXIT_USAGE;
        if (r > 0) continue;
        if (!strcmp(a, "--show-thinking")) {
            o->show_thinking = true;
            continue;
        }
        static const char *const with_value[] = {"--chat-template",
                                                 "--system",
                                                 "-n",
                                                 "--temp",
                                                 "--top-k",
                                                 "--top-p",
                                                 "--min-p",
                                                 "--seed",
                                                 "--repeat-penalty",
                                                 "--reasoning-format",
                                                 "--reasoning",
                                                 "--reasoning-effort",
                                                 NULL};
        if (!cli_is_one_of(a, with_value)) return cli_bad_argument("chat", a, usage);
        const char *val = cli_option_value("chat", argc, argv, &i);
        if (!val) return CLI_EXIT_USAGE;
        long v;
        bool ok = true;
        if (!strcmp(a, "--chat-template")) {
            o->template_name = val;
        } else if (!strcmp(a, "--system")) {
            o->system = val;
        } else if (!strcmp(a, "--reasoning-format")) {
            o->split = strcmp(val, "none") != 0;
            if (o->split && strcmp(val, "auto") != 0 && strcmp(val, "deepseek") != 0) {
                fprintf(stderr,
                        "moeinf chat: --reasoning-format '%s' is not none, auto or deepseek\n",
                        val);
                return CLI_EXIT_USAGE;
            }
        } else if (!strcmp(a, "--reasoning-effort")) {
            static const char *const efforts[] = {"low", "medium", "high"};
            int e = 0;
            while (e < 3 && strcmp(val, efforts[e]) != 0)
                e++;
            if (e == 3) {
                fprintf(stderr, "moeinf chat: --reasoning-effort '%s' is not low, medium or high\n",
                        val);
                return CLI_EXIT_USAGE;
            }
            o->chat_flags &= ~(unsigned)MOEINF_CHAT_EFFORT_MASK;
            o->chat_flags |= MOEINF_CHAT_EFFORT_LOW * (unsigned)(e + 1);
        } else if (!strcmp(a, "--reasoning")) {
            if (!strcmp(val, "off")) {
                o->chat_flags |= MOEINF_CHAT_NO_THINKING;
            } else if (!strcmp(val, "on") || !strcmp(val, "auto")) {
                o->chat_flags &= ~(unsigned)MOEINF_CHAT_NO_THINKING;
            } else {
                fprintf(stderr, "moeinf chat: --reasoning '%s' is not on, off or auto\n", val);
                return CLI_EXIT_USAGE;
            }
        } else if (!strcmp(a, "-n")) {
            ok = cli_parse_long("chat", a, val, 1, 1 << 24, &o->n_predict);
        } else if (!strcmp(a, "--temp")) {
            ok = cli_parse_float("chat", a, val, 0.0, 100.0, &o->sp.temp);
        } else if (!strcmp(a, "--top-k")) {
            ok = cli_parse_long("chat", a, val, 0, 1 << 24, &v);
            o->sp.top_k = (int)v;
        } else if (!strcmp(a, "--top-p")) {
            ok = cli_parse_float("chat", a, val, 1e-6, 1.0, &o->sp.top_p);
        } else if (!strcmp(a, "--min-p")) {
            ok = cli_parse_float("chat", a, val, 0.0, 1.0, &o->sp.min_p);
        } else if (!strcmp(a, "--repeat-penalty")) {
            ok = cli_parse_float("chat", a, val, 1e-3, 100.0, &o->sp.repeat_penalty);
        } else {
            ok = cli_parse_u64("chat", a, val, &o->sp.seed);
        }
        if (!ok) return CLI_EXIT_USAGE;
    }
    return 0;
}

static volatile sig_atomic_t interrupted;

static void on_sigint(int sig) {
    (void)sig;
    interrupted = 1;
}

struct history {
    struct moeinf_chat_message *msgs;
    size_t n, cap;
};

static bool history_add(struct history *h, const char *role, const char *text, size_t len) {
    if (h->n == h->cap) {
        size_t cap = h->cap ? h->cap * 2 : 16;
        struct moeinf_chat_message *m = realloc(h->msgs, cap * sizeof *m);
        if (!m) return false;
        h->msgs = m;
        h->cap = cap;
    }
    char *c = malloc(len + 1);
    if (!c) return false;
    memcpy(c, text, len);
    c[len] = '\0';
    h->msgs[h->n].role = role;
    h->msgs[h->n].content = c;
    h->n++;
    return true;
}

/* Removes n messages from index i on. */
static void history_remove(struct history *h, size_t i, size_t n) {
    for (size_t k = i; k < i + n; k++)
        free((char *)h->msgs[k].content);
    memmove(h->msgs + i, h->msgs + i + n, (h->n - i - n) * sizeof *h->msgs);
    h->n -= n;
}

static void history_free(struct history *h) {
    for (size_t i = 0; i < h->n; i++)
        free((char *)h->msgs[i].content);
    free(h->msgs);
}

/* The session: the model, its context, and the tokens the context holds. */
struct session {
    struct moeinf_model *model;
    struct moeinf_context *ctx;
    const struct chat_opts *o;
    const char *tmpl;
    int32_t *kv;
    int kv_n, n_ctx;
    float *logits;
    struct moeinf_sampler *smp;
    bool dropped; /* turns were dropped once (said once on stderr) */
};

/* The tokens of msgs[0, n) through the template, the assistant's turn opened (*ids
 * malloc'ed). */
static enum moeinf_status conversation_tokens(const struct session *s,
                                              const struct moeinf_chat_message *msgs, size_t n,
                                              int32_t **ids, size_t *n_ids,
                                              struct moeinf_error *err) {
    *ids = NULL;
    *n_ids = 0;
    /* the template's markup with control tokens parsed, the messages' text as text */
    return moeinf_chat_tokenize(s->model, s->tmpl, msgs, n, s->o->chat_flags, ids, n_ids, err);
}

enum fit {
    FIT_OK,
    FIT_REFUSED,
    FIT_FAIL
};

/* The history's tokens (*ids, malloc'ed) once they fit the context: while the conversation
 * leaves less room than the answer's share (-n N, at most half the context; without -n a
 * quarter of it), its oldest user message and answer are dropped, the system message kept.
 * FIT_REFUSED (the message in err): the last message, with the system message alone, leaves
 * no room for an answer token; the history is unchanged. FIT_FAIL: out of memory. */
static enum fit fit_context(struct session *s, struct history *h, int32_t **ids, size_t *n_ids,
                            struct moeinf_error *err) {
    size_t first = s->o->system ? 1 : 0; /* the oldest message that may go */
    size_t n_ctx = (size_t)s->n_ctx;
    size_t room = n_ctx / 4;
    if (s->o->n_predict) {
        room = (size_t)s->o->n_predict;
        if (room > n_ctx / 2) room = n_ctx / 2;
    }
    enum moeinf_status st = conversation_tokens(s, h->msgs, h->n, ids, n_ids, err);
    if (st == MOEINF_OK && *n_ids + room <= n_ctx) return FIT_OK;
    if (st == MOEINF_ERR_NOMEM) return FIT_FAIL;
    if (st == MOEINF_OK) {
        /* Alone with the system message, does the message leave room for an answer? */
        free(*ids);
        struct moeinf_chat_message alone[2];
        if (first) alone[0] = h->msgs[0];
        alone[first] = h->msgs[h->n - 1];
        st = conversation_tokens(s, alone, first + 1, ids, n_ids, err);
        if (st == MOEINF_ERR_NOMEM) return FIT_FAIL;
        if (st == MOEINF_OK && *n_ids >= n_ctx) {
            snprintf(err->msg, sizeof err->msg,
                     "this message takes %zu tokens in the chat template%s; the context "
                     "(-c %d) has no room for it and an answer, so it is not sent",
                     *n_ids, first ? " with the system message" : "", s->n_ctx);
            st = MOEINF_ERR_CONTEXT;
        }
    }
    if (st != MOEINF_OK) {
        free(*ids);
        *ids = NULL;
        return FIT_REFUSED;
    }
    /* It fits alone: drop the oldest turns until the whole fits (or only it is left). */
    for (;;) {
        free(*ids);
        if (h->n - first >= 3) {
            history_remove(h, first, 2);
            if (!s->dropped) {
                fprintf(stderr,
                        "moeinf chat: the conversation outgrew the context (-c %d): its oldest "
                        "turns are dropped from now on%s\n",
                        s->n_ctx, first ? ", the system message kept" : "");
                s->dropped = true;
            }
        }
        st = conversation_tokens(s, h->msgs, h->n, ids, n_ids, err);
        if (st != MOEINF_OK) {
            free(*ids);
            *ids = NULL;
            return st == MOEINF_ERR_NOMEM ? FIT_FAIL : FIT_REFUSED;
        }
        if (*n_ids + room <= n_ctx || h->n - first < 3) return FIT_OK;
    }
}

/* What an answer shows on stdout, and its text for the history (the answer without the
 * thinking, or with --reasoning-format none the text as generated, except for harmony: its
 * final channel). */
struct shown {
    char *text;
    size_t len, cap;
    bool thinking; /* [Start thinking] printed, [End thinking] not yet */
    bool tty;
};

static void end_thinking(struct shown *sh) {
    if (!sh->thinking) return;
    printf("\n[End thinking]%s\n\n", sh->tty ? "\033[0m" : "");
    sh->thinking = false;
}

/* Appends an answer's text to what the history keeps; false when out of memory. */
static bool keep_text(struct shown *sh, const char *s, size_t n) {
    if (n == 0) return true;
    if (!sh->text || sh->len + n + 1 > sh->cap) {
        size_t cap = (sh->len + n + 1) * 2;
        char *p = realloc(sh->text, cap);
        if (!p) return false;
        sh->text = p;
        sh->cap = cap;
    }
    memcpy(sh->text + sh->len, s, n);
    sh->len += n;
    return true;
}

/* Prints what the splitter gave (the thinking only with --show-thinking) and, unless `kept`
 * (another splitter gives the history's text), keeps the answer. False when out of memory. */
static bool show(struct shown *sh, const struct chat_opts *o, const struct moeinf_reasoning_text *t,
                 bool kept) {
    if (t->thinking_len && o->show_thinking) {
        if (!sh->thinking) printf("%s[Start thinking]\n", sh->tty ? "\033[2m" : "");
        sh->thinking = true;
        fwrite(t->thinking, 1, t->thinking_len, stdout);
    }
    if (t->answer_len) {
        end_thinking(sh);
        fwrite(t->answer, 1, t->answer_len, stdout);
        if (!kept && !keep_text(sh, t->answer, t->answer_len)) return false;
    }
    fflush(stdout);
    return true;
}

/* The piece through the shown splitter and, when there is one, the history's (hist). */
static bool take(struct shown *sh, const struct chat_opts *o, struct moeinf_reasoning *split,
                 struct moeinf_reasoning *hist, const char *piece, size_t n, bool flush,
                 struct moeinf_error *err) {
    struct moeinf_reasoning_text t;
    enum moeinf_status st = flush ? moeinf_reasoning_flush(split, &t, err)
                                  : moeinf_reasoning_push(split, piece, n, &t, err);
    if (st != MOEINF_OK || !show(sh, o, &t, hist != NULL)) return false;
    if (!hist) return true;
    st = flush ? moeinf_reasoning_flush(hist, &t, err)
               : moeinf_reasoning_push(hist, piece, n, &t, err);
    return st == MOEINF_OK && keep_text(sh, t.answer, t.answer_len);
}

/* One answer to the history h, whose tokens are ids[0, n_ids) (fewer than the context holds),
 * streamed to stdout and returned in *answer (malloc'ed). */
static bool answer(struct session *s, const struct history *h, const int32_t *ids, size_t n_ids,
                   char **answer, size_t *answer_len, struct moeinf_error *err) {
    struct moeinf_text_stream *detok = NULL;
    struct moeinf_reasoning *split = NULL;
    struct moeinf_reasoning *hist = NULL;
    struct shown sh = {.tty = isatty(STDOUT_FILENO)};
    bool ok = false;
    if (moeinf_text_stream_init(s->model, &detok, err) != MOEINF_OK) goto done;
    /* the template's thinking markers show even when they are control tokens (Kimi-K2) */
    moeinf_text_stream_show(detok, moeinf_chat_reasoning_markers(s->tmpl));
    /* the thinking apart from the answer (the prompt's tail says whether it opened it) */
    if (moeinf_chat_reasoning_init(s->tmpl, h->msgs, h->n, s->o->chat_flags, s->o->split, &split,
                                   err) != MOEINF_OK) {
        goto done;
    }
    /* harmony refuses an answer with channel markup: with --reasoning-format none the history
     * keeps the final channel, as an extracting splitter gives it */
    if (!s->o->split && !strcmp(s->tmpl, "harmony") &&
        moeinf_chat_reasoning_init(s->tmpl, h->msgs, h->n, s->o->chat_flags, true, &hist, err) !=
            MOEINF_OK) {
        goto done;
    }
    int keep = 0;
    while (keep < s->kv_n && keep < (int)n_ids - 1 && s->kv[keep] == ids[keep])
        keep++;
    moeinf_context_truncate(s->ctx, keep, NULL);
    keep = moeinf_context_n_past(s->ctx); /* fewer with a recurrent state (a checkpoint's) */
    s->kv_n = keep;
    if (moeinf_decode(s->ctx, ids + keep, (int)n_ids - keep, s->logits, false, err) != MOEINF_OK) {
        moeinf_context_reset(s->ctx);
        s->kv_n = 0;
        goto done;
    }
    memcpy(s->kv + keep, ids + keep, (n_ids - (size_t)keep) * sizeof *ids);
    s->kv_n = (int)n_ids;
    for (size_t i = 0; i < n_ids; i++)
        moeinf_sampler_accept(s->smp, ids[i]);
    long n_out = 0;
    for (;;) {
        if (interrupted || cli_stop_signal()) break;
        int32_t id = moeinf_sampler_sample(s->smp, s->logits);
        moeinf_sampler_accept(s->smp, id);
        n_out++;
        if (moeinf_token_is_eog(s->model, id)) break;
        size_t n;
        const char *piece = moeinf_text_stream_push(detok, id, &n);
        if (!take(&sh, s->o, split, hist, piece, n, false, err)) goto nomem;
        if (s->o->n_predict && n_out >= s->o->n_predict) break;
        if (moeinf_context_n_past(s->ctx) >= s->n_ctx) {
            end_thinking(&sh);
            fprintf(stderr, "\nmoeinf: context full (-c %d): the answer stops here\n", s->n_ctx);
            break;
        }
        if (moeinf_decode(s->ctx, &id, 1, s->logits, false, err) != MOEINF_OK) goto done;
        s->kv[s->kv_n++] = id;
    }
    size_t n;
    const char *tail = moeinf_text_stream_flush(detok, &n);
    if (!take(&sh, s->o, split, hist, tail, n, false, err) ||
        !take(&sh, s->o, split, hist, NULL, 0, true, err)) {
        goto nomem;
    }
    end_thinking(&sh); /* a thinking never closed */
    char *text = realloc(sh.text, sh.len + 1);
    if (!text) goto nomem;
    text[sh.len] = '\0';
    printf("\n");
    fflush(stdout);
    *answer = text;
    *answer_len = sh.len;
    sh.text = NULL;
    ok = true;
    goto done;
nomem:
    end_thinking(&sh);
    snprintf(err->msg, sizeof err->msg, "out of memory");
done:
    free(sh.text);
    moeinf_reasoning_free(split);
    moeinf_reasoning_free(hist);
    moeinf_text_stream_free(detok);
    return ok;
}

/* Reads one line (without its newline) into *line; false at end of input. A Ctrl-C while
 * reading discards the line and asks again. */
static bool read_line(char **line, size_t *cap, bool tty) {
    for (;;) {
        if (tty) {
            printf("> ");
            fflush(stdout);
        }
        interrupted = 0;
        errno = 0;
        ssize_t n = getline(line, cap, stdin);
        if (n >= 0) {
            while (n > 0 && ((*line)[n - 1] == '\n' || (*line)[n - 1] == '\r'))
                (*line)[--n] = '\0';
            return true;
        }
        if (cli_stop_signal()) return false;
        if (errno == EINTR || interrupted) {
            clearerr(stdin);
            printf("\n");
            continue;
        }
        return false;
    }
}

int cmd_chat(int argc, char **argv) {
    struct chat_opts o = {.sp = moeinf_sampler_params_default(),
                          .split = true,
                          .chat_flags = MOEINF_CHAT_ADD_ASSISTANT};
    o.model.ctx = moeinf_context_params_default();
    o.model.model = moeinf_model_params_default();
    int prc = parse(argc, argv, &o);
    if (prc < 0) return CLI_EXIT_OK;
    if (prc > 0) return prc;
    struct moeinf_error err = {0};
    struct session s = {.o = &o, .n_ctx = o.model.ctx.n_ctx};
    if (o.template_name &&
        moeinf_chat_template_resolve(NULL, o.template_name, &s.tmpl, &err) != MOEINF_OK) {
        fprintf(stderr, "moeinf chat: --chat-template: %s\n", err.msg);
        return CLI_EXIT_USAGE;
    }
    int rc = model_args_open(&o.model, &s.model, &s.ctx);
    if (rc != CLI_EXIT_OK) return rc;
    rc = CLI_EXIT_FAIL;
    struct history h = {0};
    char *line = NULL;
    size_t line_cap = 0;
    if (!s.tmpl && moeinf_chat_template_resolve(s.model, NULL, &s.tmpl, &err) != MOEINF_OK) {
        fprintf(stderr,
                "moeinf: %s: give --chat-template NAME (mistral, chatml, llama3, "
                "deepseek2, deepseek3, olmoe)\n",
                err.msg);
        goto done;
    }
    s.kv = malloc((size_t)s.n_ctx * sizeof *s.kv);
    s.logits = malloc((size_t)moeinf_model_n_vocab(s.model) * sizeof(float));
    if (!s.kv || !s.logits) {
        snprintf(err.msg, sizeof err.msg, "out of memory");
        cli_fail(&err);
        goto done;
    }
    if (moeinf_sampler_init(&o.sp, moeinf_model_n_vocab(s.model), &s.smp, &err) != MOEINF_OK) {
        cli_fail(&err);
        goto done;
    }
    if (o.system && !history_add(&h, "system", o.system, strlen(o.system))) goto done;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_sigint; /* no SA_RESTART: a Ctrl-C interrupts the read */
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    /* with --eamc a SIGTERM or SIGHUP ends the session so that the state can be saved (a
     * Ctrl-C stays the answer's interrupt, /exit or end of input the session's end) */
    if (o.model.experts.eamc) cli_stop_on_signal(false);
    bool tty = isatty(STDIN_FILENO);
    double answering = 0; /* seconds spent answering: --stats' time, not the user's typing */
    while (read_line(&line, &line_cap, tty)) {
        if (!strcmp(line, "/exit")) break;
        if (!line[0]) continue;
        if (!history_add(&h, "user", line, strlen(line))) goto done;
        int32_t *ids = NULL;
        size_t n_ids = 0;
        enum fit fit = fit_context(&s, &h, &ids, &n_ids, &err);
        if (fit == FIT_FAIL) {
            cli_fail(&err);
            goto done;
        }
        if (fit == FIT_REFUSED) { /* the session goes on without this message */
            fprintf(stderr, "moeinf chat: %s\n", err.msg);
            history_remove(&h, h.n - 1, 1);
            continue;
        }
        char *text = NULL;
        size_t len = 0;
        interrupted = 0;
        double t0 = cli_now();
        bool answered = answer(&s, &h, ids, n_ids, &text, &len, &err);
        answering += cli_now() - t0;
        free(ids);
        if (!answered) {
            cli_fail(&err);
            goto done;
        }
        bool added = history_add(&h, "assistant", text, len);
        free(text);
        if (!added) goto done;
        moeinf_context_request_end(s.ctx); /* each answer is one request for the cache */
        if (cli_stop_signal()) break;
    }
    /* the session's expert statistics (--stats, --stats-json), then the warm state */
    rc = expert_args_report(&o.model.experts, s.ctx, answering) &&
                 expert_args_save_state(&o.model.experts, s.ctx)
             ? CLI_EXIT_OK
             : CLI_EXIT_FAIL;
    if (rc == CLI_EXIT_OK) cli_stop_finish();
done:
    signal(SIGINT, SIG_DFL);
    free(line);
    history_free(&h);
    moeinf_sampler_free(s.smp);
    free(s.kv);
    free(s.logits);
    moeinf_context_free(s.ctx);
    moeinf_model_free(s.model);
    return rc;
}
