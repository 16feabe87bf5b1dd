/* engine_text.c - the tokenizer half of moeinf.h: tokenize, pieces, special ids, and the
 * streaming text of generated ids. */
#include <stdlib.h>
#include <string.h>

#include "base/status.h"
#include "engine/engine.h"
#include "tokenizer/vocab.h"

enum moeinf_status moeinf_tokenize(const struct moeinf_model *model, const char *text, size_t len,
                                   bool add_special, bool parse_special, int32_t **out_ids,
                                   size_t *n_out, struct moeinf_error *err) {
    return moeinf_vocab_tokenize(model->vocab, text, len, add_special, parse_special, out_ids,
                                 n_out, err);
}

const char *moeinf_token_piece(const struct moeinf_model *model, int32_t id, bool special,
                               size_t *len) {
    return moeinf_vocab_piece(model->vocab, id, special, len);
}

int32_t moeinf_token_bos(const struct moeinf_model *model) {
    return moeinf_vocab_bos(model->vocab);
}

int32_t moeinf_token_eos(const struct moeinf_model *model) {
    return moeinf_vocab_eos(model->vocab);
}

bool moeinf_token_is_eog(const struct moeinf_model *model, int32_t id) {
    return moeinf_vocab_is_eog(model->vocab, id);
}

#define MAX_SHOWN 8

struct moeinf_text_stream {
    const struct moeinf_vocab *vocab;
    struct moeinf_detok detok;
    char *buf; /* room for the longest piece plus the held bytes */
    size_t cap;
    int32_t shown[MAX_SHOWN]; /* control tokens shown as their text (moeinf_text_stream_show) */
    size_t n_shown;
};

enum moeinf_status moeinf_text_stream_init(const struct moeinf_model *model,
                                           struct moeinf_text_stream **out,
                                           struct moeinf_error *err) {
    struct moeinf_text_stream *s = calloc(1, sizeof *s);
    if (!s) return moeinf_fail(err, MOEINF_ERR_NOMEM, "out of memory");
    s->vocab = model->vocab;
    moeinf_detok_init(&s->detok);
    s->cap = MOEINF_DETOK_OUT_MAX(256);
    s->buf = malloc(s->cap);
    if (!s->buf) {
        free(s);
        return moeinf_fail(err, MOEINF_ERR_NOMEM, "out of memory");
    }
    *out = s;
    return MOEINF_OK;
}

void moeinf_text_stream_free(struct moeinf_text_stream *s) {
    if (!s) return;
    free(s->buf);
    free(s);
}

void moeinf_text_stream_show(struct moeinf_text_stream *s, const char *const *texts) {
    s->n_shown = 0;
    for (size_t i = 0; texts && texts[i] && s->n_shown < MAX_SHOWN; i++) {
        int32_t id = moeinf_vocab_find(s->vocab, texts[i], strlen(texts[i]));
        if (id >= 0) s->shown[s->n_shown++] = id;
    }
}

const char *moeinf_text_stream_push(struct moeinf_text_stream *s, int32_t id, size_t *len) {
    bool show = false;
    for (size_t i = 0; i < s->n_shown && !show; i++)
        show = s->shown[i] == id;
    size_t n = 0;
    const char *piece = moeinf_vocab_piece(s->vocab, id, show, &n);
    if (MOEINF_DETOK_OUT_MAX(n) > s->cap) {
        char *grown = realloc(s->buf, MOEINF_DETOK_OUT_MAX(n));
        if (!grown) { /* keep streaming what fits rather than fail mid-generation */
            n = s->cap / 3 - MOEINF_DETOK_HOLD;
        } else {
            s->buf = grown;
            s->cap = MOEINF_DETOK_OUT_MAX(n);
        }
    }
    *len = moeinf_detok_push(&s->detok, piece, n, s->buf);
    return s->buf;
}

const char *moeinf_text_stream_flush(struct moeinf_text_stream *s, size_t *len) {
    *len = moeinf_detok_flush(&s->detok, s->buf);
    return s->buf;
}
