/*
 * generate.c - the smallest program on the installed moeinf library: load a model, decode a
 * prompt, and print greedily chosen tokens as they come.
 *
 *   cc generate.c $(pkg-config --cflags --libs moeinf) -o generate
 *   ./generate MODEL.gguf "Once upon a time" 16
 */
#include <moeinf.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: %s MODEL PROMPT [N]\n", argv[0]);
        return 2;
    }
    int n_predict = argc > 3 ? (int)strtol(argv[3], NULL, 10) : 16;
    struct moeinf_error err = {0};
    struct moeinf_model *model = NULL;
    struct moeinf_context *ctx = NULL;
    struct moeinf_sampler *smp = NULL;
    struct moeinf_text_stream *text = NULL;
    int32_t *ids = NULL;
    size_t n_ids = 0;
    float *logits = NULL;
    int rc = 1;
    struct moeinf_context_params cp = moeinf_context_params_default();
    cp.n_ctx = 512;
    struct moeinf_sampler_params sp = moeinf_sampler_params_default();
    sp.temp = 0; /* greedy */
    if (moeinf_model_load(argv[1], NULL, &model, &err) != MOEINF_OK ||
        moeinf_context_init(model, &cp, &ctx, &err) != MOEINF_OK ||
        moeinf_sampler_init(&sp, moeinf_model_n_vocab(model), &smp, &err) != MOEINF_OK ||
        moeinf_text_stream_init(model, &text, &err) != MOEINF_OK ||
        moeinf_tokenize(model, argv[2], strlen(argv[2]), true, false, &ids, &n_ids, &err) !=
            MOEINF_OK) {
        goto done;
    }
    logits = malloc((size_t)moeinf_model_n_vocab(model) * sizeof *logits);
    if (!logits || moeinf_decode(ctx, ids, (int)n_ids, logits, false, &err) != MOEINF_OK) {
        goto done;
    }
    printf("%s", argv[2]);
    for (int i = 0; i < n_predict; i++) {
        int32_t id = moeinf_sampler_sample(smp, logits);
        moeinf_sampler_accept(smp, id);
        if (moeinf_token_is_eog(model, id)) break;
        size_t n;
        const char *piece = moeinf_text_stream_push(text, id, &n);
        fwrite(piece, 1, n, stdout);
        if (moeinf_decode(ctx, &id, 1, logits, false, &err) != MOEINF_OK) goto done;
    }
    size_t n;
    const char *tail = moeinf_text_stream_flush(text, &n);
    fwrite(tail, 1, n, stdout);
    printf("\n");
    rc = 0;
done:
    if (rc) fprintf(stderr, "generate: %s\n", err.msg);
    free(logits);
    free(ids);
    moeinf_text_stream_free(text);
    moeinf_sampler_free(smp);
    moeinf_context_free(ctx);
    moeinf_model_free(model);
    return rc;
}
