/*
 * fuzz_model.c - the model loader on arbitrary bytes: the GGUF reader, then moeinf_llm_init
 * and moeinf_vocab_init_from_gguf on whatever opens. What loads must keep the loader's
 * promises: every weight view lies inside the input, hyper-parameters are in their ranges.
 * A vocabulary that loads tokenizes and detokenizes a fixed text with ids in range; a model
 * small enough to run in a few milliseconds evaluates two tokens (the forward pass must not
 * read or write out of bounds whatever the file says).
 */
#include <string.h>

#include "compute/pool.h"
#include "fuzz.h"
#include "gguf/gguf.h"
#include "model/forward.h"
#include "model/model.h"
#include "quant/quant.h"
#include "tokenizer/vocab.h"

#define PATH "fuzz.gguf"

static void check_weight(const struct moeinf_weight *w, const uint8_t *data, size_t size) {
    if (!w->data) return;
    FUZZ_REQUIRE(w->data >= data && w->n_in > 0 && w->n_out > 0 && w->n_mat > 0);
    size_t off = (size_t)(w->data - data);
    FUZZ_REQUIRE(off <= size && w->mat_bytes == w->row_bytes * (size_t)w->n_out);
    FUZZ_REQUIRE((uint64_t)w->n_mat <= (size - off) / (w->mat_bytes ? w->mat_bytes : 1));
}

static void check_vec(const float *v, int n, const uint8_t *data, size_t size) {
    FUZZ_REQUIRE(v && (const uint8_t *)v >= data);
    size_t off = (size_t)((const uint8_t *)v - data);
    FUZZ_REQUIRE(off <= size && (size_t)n <= (size - off) / sizeof(float));
}

static void check_llm(const struct moeinf_llm *llm, const uint8_t *data, size_t size) {
    const struct moeinf_hparams *hp = &llm->hp;
    FUZZ_REQUIRE(hp->n_embd > 0 && hp->n_layer > 0 && hp->n_head > 0 && hp->n_head_kv > 0);
    FUZZ_REQUIRE(hp->n_head % hp->n_head_kv == 0 && hp->head_dim > 0 && hp->n_rot > 0);
    FUZZ_REQUIRE(hp->n_rot <= hp->head_dim && hp->n_vocab > 0 && hp->n_ff > 0);
    FUZZ_REQUIRE(hp->n_expert == 0 || (hp->n_expert_used > 0 && hp->n_expert_used <= hp->n_expert &&
                                       hp->n_expert_used <= MOEINF_MAX_EXPERT_USED));
    check_weight(&llm->tok_embd, data, size);
    check_weight(&llm->output, data, size);
    check_vec(llm->output_norm, hp->n_embd, data, size);
    for (int il = 0; il < hp->n_layer; il++) {
        const struct moeinf_layer *lay = &llm->layers[il];
        const struct moeinf_weight *ws[] = {&lay->wq,      &lay->wk,        &lay->wv,
                                            &lay->wo,      &lay->router,    &lay->gate_exps,
                                            &lay->up_exps, &lay->down_exps, &lay->ffn_gate,
                                            &lay->ffn_up,  &lay->ffn_down};
        for (size_t i = 0; i < sizeof ws / sizeof ws[0]; i++)
            check_weight(ws[i], data, size);
        check_vec(lay->attn_norm, hp->n_embd, data, size);
        check_vec(lay->ffn_norm, hp->n_embd, data, size);
    }
}

/* Two tokens through the forward pass, when the model is tiny (the fuzzer's own limits on
 * time and memory must not be what stops a run). */
static void run_forward(const struct moeinf_llm *llm) {
    const struct moeinf_hparams *hp = &llm->hp;
    const int64_t width = (int64_t)hp->n_head * hp->head_dim + hp->n_embd + hp->n_ff +
                          (int64_t)hp->n_head_kv * hp->head_dim + hp->n_expert;
    if (width > 4096 || hp->n_layer > 8 || hp->n_vocab > 4096) return;
    struct moeinf_error err = {0};
    struct moeinf_pool *pool = NULL;
    struct moeinf_fwd *fwd = NULL;
    FUZZ_REQUIRE(moeinf_pool_init(1, &pool, &err) == MOEINF_OK);
    struct moeinf_fwd_params fp = {
        .n_ctx = 4, .n_batch = 2, .kv_f16 = true, .pool = pool, .kern = moeinf_kernels_best()};
    FUZZ_REQUIRE(moeinf_fwd_init(llm, &fp, &fwd, &err) == MOEINF_OK);
    float *logits = malloc(2 * (size_t)hp->n_vocab * sizeof *logits);
    FUZZ_REQUIRE(logits);
    const int32_t ids[3] = {0, hp->n_vocab - 1, hp->n_vocab / 2};
    (void)moeinf_fwd_eval(fwd, ids, 2, 0, logits, true, NULL);
    (void)moeinf_fwd_eval(fwd, ids + 2, 1, 2, logits, false, NULL);
    free(logits);
    moeinf_fwd_free(fwd);
    moeinf_pool_free(pool);
}

static void use_vocab(const struct moeinf_vocab *v) {
    static const char text[] = " Hello <s>wor\xe2\x96\x81ld</s><unk> \xc3\xa9\xff\n\t<0x41> ";
    int32_t n_vocab = moeinf_vocab_n_tokens(v);
    FUZZ_REQUIRE(n_vocab > 0);
    for (int parse = 0; parse < 2; parse++) {
        int32_t *ids = NULL;
        size_t n = 0;
        struct moeinf_error err = {0};
        enum moeinf_status st =
            moeinf_vocab_tokenize(v, text, sizeof text - 1, true, parse, &ids, &n, &err);
        if (st != MOEINF_OK) {
            FUZZ_REQUIRE(st == MOEINF_ERR_FORMAT && err.msg[0] && ids == NULL);
            continue;
        }
        for (size_t i = 0; i < n; i++)
            FUZZ_REQUIRE(ids[i] >= 0 && ids[i] < n_vocab);
        char *out = NULL;
        size_t n_out = 0;
        FUZZ_REQUIRE(moeinf_vocab_detokenize(v, ids, n, true, parse, &out, &n_out, &err) ==
                     MOEINF_OK);
        free(out);
        free(ids);
    }
    for (int32_t id = -1; id <= n_vocab && id < 4096; id++) {
        size_t len = 0;
        const char *p = moeinf_vocab_piece(v, id, id & 1, &len);
        FUZZ_REQUIRE(p != NULL);
        if (len) {
            volatile char c = p[len - 1];
            (void)c;
        }
        (void)moeinf_vocab_is_eog(v, id);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    struct moeinf_gguf *g = NULL;
    struct moeinf_error err = {0};
    if (moeinf_gguf_open_buffer(data, size, PATH, &g, &err) != MOEINF_OK) return 0;

    struct moeinf_llm *llm = NULL;
    enum moeinf_status st = moeinf_llm_init(g, &llm, &err);
    if (st == MOEINF_OK) {
        check_llm(llm, data, size);
        run_forward(llm);
        moeinf_llm_free(llm);
    } else {
        FUZZ_REQUIRE(llm == NULL && strncmp(err.msg, PATH ": ", strlen(PATH) + 2) == 0);
        FUZZ_REQUIRE(!strchr(err.msg, '\n'));
    }

    struct moeinf_vocab *v = NULL;
    st = moeinf_vocab_init_from_gguf(g, &v, &err);
    if (st == MOEINF_OK) {
        use_vocab(v);
        moeinf_vocab_free(v);
    } else {
        FUZZ_REQUIRE(v == NULL && strncmp(err.msg, PATH ": ", strlen(PATH) + 2) == 0);
    }
    moeinf_gguf_free(g);
    return 0;
}
