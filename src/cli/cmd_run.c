/* cmd_run.c - moeinf run: generate text from a prompt, streamed. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "app/model_args.h"
#include "app/text_file.h"
#include "cli/cli.h"

static void usage(FILE *out) {
    struct moeinf_sampler_params d = moeinf_sampler_params_default();
    fprintf(out,
            "usage: moeinf run [-m MODEL] (-p TEXT | -f FILE) [-n N] [options]\n\n"
            "Streams the text generated after the prompt.\n"
            "  -p TEXT            the prompt\n"
            "  -f, --file FILE    the prompt from FILE (- for standard input; one final\n"
            "                     newline dropped), instead of -p\n"
            "  -n N               tokens to generate (default 128)\n"
            "%s"
            "Sampling (applied in this order: repetition penalty, then greedy if temp is 0,\n"
            "else top-k, top-p, min-p, temperature, and a draw):\n"
            "  --repeat-penalty R penalty over the last %d tokens (default %.2f = off)\n"
            "  --temp T           temperature; 0 = greedy (default %.2f)\n"
            "  --top-k K          keep the K most likely; 0 = off (default %d)\n"
            "  --top-p P          nucleus sampling; 1 = off (default %.2f)\n"
            "  --min-p P          drop tokens below P x the top probability; 0 = off (default %.2f)\n"
            "  --seed S           random seed: same seed, same text (default %llu)\n"
            "  --print-ids        end with a line 'ids: ID ID ...' of the generated ids\n"
            "  --record-routing F write the expert routing of every token (prompt and\n"
            "                     generated) to F as a moe-trace v1 file for `moeinf sim`,\n"
            "                     atomically at the end (also when SIGINT/SIGTERM stops the\n"
            "                     generation; a failed run leaves F as it was)\n"
            "  --record-tag TAG   the request's tag in F (one word; default moeinf/run)\n"
            "Generation stops at any end-of-generation token, after N tokens, or when the\n"
            "context (-c) is full (a note on stderr says so). An output (--record-routing,\n"
            "--stats-json, --eamc) may not be an input (-m, -f) or another output.\n",
            model_args_help, d.repeat_last_n, (double)d.repeat_penalty, (double)d.temp, d.top_k,
            (double)d.top_p, (double)d.min_p, (unsigned long long)d.seed);
}

struct run_opts {
    struct model_args model;
    struct moeinf_sampler_params sp;
    const char *prompt;
    size_t prompt_len;
    const char *prompt_file; /* -f FILE */
    char *prompt_buf;        /* its text, malloc'ed */
    const char *record_path;
    const char *record_tag;
    long n_predict;
    bool print_ids;
};

static int parse(int argc, char **argv, struct run_opts *o) {
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage(stdout);
            return -1;
        }
        int r = model_args_parse("run", &o->model, argc, argv, &i);
        if (r < 0) return CLI_EXIT_USAGE;
        if (r > 0) continue;
        if (!strcmp(a, "--print-ids")) {
            o->print_ids = true;
            continue;
        }
        const char *val = NULL;
        if (!strcmp(a, "-p") || !strcmp(a, "-f") || !strcmp(a, "--file") || !strcmp(a, "-n") || !strcmp(a, "--temp") || !strcmp(a, "--top-k") ||
            !strcmp(a, "--top-p") || !strcmp(a, "--min-p") || !strcmp(a, "--repeat-penalty") ||
            !strcmp(a, "--seed") || !strcmp(a, "--record-routing") || !strcmp(a, "--record-tag")) {
            if (!(val = cli_option_value("run", argc, argv, &i))) return CLI_EXIT_USAGE;
        } else {
            fprintf(stderr, "moeinf run: unknown argument '%s'\n", a);
            usage(stderr);
            return CLI_EXIT_USAGE;
        }
        long v;
        bool ok = true;
        if (!strcmp(a, "-p")) {
            o->prompt = val;
        } else if (!strcmp(a, "-f") || !strcmp(a, "--file")) {
            o->prompt_file = val;
        } else if (!strcmp(a, "--record-routing")) {
            o->record_path = val;
        } else if (!strcmp(a, "--record-tag")) {
            o->record_tag = val;
            if (!*val || strpbrk(val, " \t\r\n")) {
                fprintf(stderr, "moeinf run: --record-tag '%s' must be one word\n", val);
                return CLI_EXIT_USAGE;
            }
        } else if (!strcmp(a, "-n")) {
            ok = cli_parse_long("run", a, val, 0, 1 << 24, &o->n_predict);
        } else if (!strcmp(a, "--temp")) {
            ok = cli_parse_float("run", a, val, 0.0, 100.0, &o->sp.temp);
        } else if (!strcmp(a, "--top-k")) {
            ok = cli_parse_long("run", a, val, 0, 1 << 24, &v);
            o->sp.top_k = (int)v;
        } else if (!strcmp(a, "--top-p")) {
            ok = cli_parse_float("run", a, val, 1e-6, 1.0, &o->sp.top_p);
        } else if (!strcmp(a, "--min-p")) {
            ok = cli_parse_float("run", a, val, 0.0, 1.0, &o->sp.min_p);
        } else if (!strcmp(a, "--repeat-penalty")) {
            ok = cli_parse_float("run", a, val, 1e-3, 100.0, &o->sp.repeat_penalty);
        } else if (!strcmp(a, "--seed")) {
            ok = cli_parse_u64("run", a, val, &o->sp.seed);
        }
        if (!ok) return CLI_EXIT_USAGE;
    }
    if (o->prompt && o->prompt_file) {
        fprintf(stderr, "moeinf run: -p and -f both give the prompt: use one\n");
        return CLI_EXIT_USAGE;
    }
    if (!o->prompt && !o->prompt_file) {
        fprintf(stderr, "moeinf run: -p TEXT or -f FILE is required\n");
        usage(stderr);
        return CLI_EXIT_USAGE;
    }
    if (o->prompt) o->prompt_len = strlen(o->prompt);
    if (o->record_tag && !o->record_path) {
        fprintf(stderr, "moeinf run: --record-tag needs --record-routing FILE\n");
        return CLI_EXIT_USAGE;
    }
    return 0;
}

static void write_bytes(const char *s, size_t n) {
    if (n) {
        fwrite(s, 1, n, stdout);
        fflush(stdout);
    }
}

/* The model and context (model_args_open, the outputs checked against the inputs first), and
 * the prompt of -f; prints why it failed and returns the exit code. */
static int open_run(struct run_opts *o, struct moeinf_model **model, struct moeinf_context **ctx) {
    o->model.outputs[0] = (struct cli_file){"--record-routing", o->record_path};
    if (o->prompt_file && strcmp(o->prompt_file, "-") != 0) {
        o->model.inputs[0] = (struct cli_file){"-f", o->prompt_file};
    }
    int rc = model_args_open(&o->model, model, ctx);
    if (rc != CLI_EXIT_OK) return rc;
    if (o->prompt_file) {
        struct moeinf_error err = {0};
        if (cli_read_text_file(o->prompt_file, &o->prompt_buf, &o->prompt_len, &err) !=
            MOEINF_OK) {
            moeinf_context_free(*ctx);
            moeinf_model_free(*model);
            *ctx = NULL;
            *model = NULL;
            return cli_fail(&err);
        }
        o->prompt = o->prompt_buf;
    }
    /* with an output written at the end, a signal stops generation so that what was done is
     * written (the routing, --stats-json) or saved (--eamc) before the process dies of it */
    if (o->model.experts.eamc || o->model.experts.stats_json || o->record_path) {
        cli_stop_on_signal(true);
    }
    return CLI_EXIT_OK;
}

int cmd_run(int argc, char **argv) {
    struct run_opts o = {.sp = moeinf_sampler_params_default(), .n_predict = 128};
    o.model.ctx = moeinf_context_params_default();
    o.model.model = moeinf_model_params_default();
    int prc = parse(argc, argv, &o);
    if (prc < 0) return CLI_EXIT_OK;
    if (prc > 0) return prc;

    struct moeinf_model *model = NULL;
    struct moeinf_context *ctx = NULL;
    struct moeinf_error err = {0};
    int orc = open_run(&o, &model, &ctx);
    if (orc != CLI_EXIT_OK) return orc;
    struct moeinf_sampler *smp = NULL;
    struct moeinf_text_stream *detok = NULL;
    int32_t *prompt = NULL;
    int32_t *out_ids = NULL;
    float *logits = NULL;
    size_t n_prompt = 0;
    int n_out = 0;
    int rc = CLI_EXIT_FAIL;
    double t0 = 0.0;
    struct cli_progress prog = {0};
    bool wrote = false; /* text on stdout: an error ends its line first */
    const int n_vocab = moeinf_model_n_vocab(model);
    if (moeinf_sampler_init(&o.sp, n_vocab, &smp, &err) != MOEINF_OK ||
        moeinf_text_stream_init(model, &detok, &err) != MOEINF_OK ||
        moeinf_tokenize(model, o.prompt, o.prompt_len, true, false, &prompt, &n_prompt,
                        &err) != MOEINF_OK ||
        (o.record_path &&
         moeinf_context_record_open(ctx, o.record_path, o.record_tag ? o.record_tag : "moeinf/run",
                                    &err) != MOEINF_OK)) {
        goto done;
    }
    logits = malloc((size_t)n_vocab * sizeof(float));
    out_ids = malloc(((size_t)o.n_predict + 1) * sizeof(int32_t));
    if (!logits || !out_ids) {
        snprintf(err.msg, sizeof err.msg, "out of memory");
        goto done;
    }
    if (n_prompt == 0) {
        snprintf(err.msg, sizeof err.msg, "the prompt is empty and the model adds no BOS");
        goto done;
    }
    if (n_prompt > (size_t)o.model.ctx.n_ctx) {
        snprintf(err.msg, sizeof err.msg, "the prompt has %zu tokens, more than the context (-c %d)",
                 n_prompt, o.model.ctx.n_ctx);
        goto done;
    }
    write_bytes(o.prompt, o.prompt_len);
    wrote = true;
    /* a progress line only when the text goes elsewhere than the terminal */
    prog = cli_progress_start();
    prog.on = prog.on && !isatty(STDOUT_FILENO);
    t0 = cli_now();
    if (moeinf_decode(ctx, prompt, (int)n_prompt, logits, false, &err) != MOEINF_OK) goto done;
    for (size_t i = 0; i < n_prompt; i++) moeinf_sampler_accept(smp, prompt[i]);
    size_t len;
    const char *s;
    while (n_out < o.n_predict && !cli_stop_signal()) {
        int32_t id = moeinf_sampler_sample(smp, logits);
        moeinf_sampler_accept(smp, id);
        out_ids[n_out++] = id;
        if (moeinf_token_is_eog(model, id)) break;
        s = moeinf_text_stream_push(detok, id, &len);
        write_bytes(s, len);
        if (n_out == o.n_predict) break;
        if (moeinf_context_n_past(ctx) >= o.model.ctx.n_ctx) {
            s = moeinf_text_stream_flush(detok, &len);
            write_bytes(s, len);
            fprintf(stderr, "\nmoeinf: context full (-c %d): generation stopped\n",
                    o.model.ctx.n_ctx);
            break;
        }
        if (moeinf_decode(ctx, &id, 1, logits, false, &err) != MOEINF_OK) goto done;
        cli_progress_tokens(&prog, "run", n_out, o.n_predict, cli_now() - t0);
    }
    cli_progress_end(&prog);
    s = moeinf_text_stream_flush(detok, &len);
    write_bytes(s, len);
    printf("\n");
    if (o.print_ids) {
        printf("ids:");
        for (int i = 0; i < n_out; i++) printf(" %d", out_ids[i]);
        printf("\n");
    }
    if (moeinf_context_record_close(ctx, &err) != MOEINF_OK) goto done;
    double seconds = cli_now() - t0; /* the work, not the save */
    if (!expert_args_save_state(&o.model.experts, ctx)) {
        err.msg[0] = '\0'; /* the message is out */
        goto done;
    }
    rc = CLI_EXIT_OK;
    if (!expert_args_report(&o.model.experts, ctx, seconds)) {
        rc = CLI_EXIT_FAIL; /* the message is out */
        err.msg[0] = '\0';
    }
    if (rc == CLI_EXIT_OK) cli_stop_finish(); /* a signal stopped it: all written, die of it */
done:
    cli_progress_end(&prog);
    if (rc != CLI_EXIT_OK) {
        if (wrote) printf("\n");
        fflush(stdout);
        if (err.msg[0]) cli_fail(&err);
        moeinf_context_record_discard(ctx); /* a failed run leaves the file as it was */
    }
    expert_args_close(&o.model.experts);
    free(o.prompt_buf);
    free(logits);
    free(out_ids);
    free(prompt);
    moeinf_text_stream_free(detok);
    moeinf_sampler_free(smp);
    moeinf_context_free(ctx);
    moeinf_model_free(model);
    return rc;
}
