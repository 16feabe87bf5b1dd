/* engine.c - implements the model and context half of moeinf.h by composing the modules. */
#include "engine/engine.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "base/memlimit.h"
#include "base/status.h"
#include "tokenizer/vocab.h"

struct moeinf_model_params moeinf_model_params_default(void) {
    struct moeinf_model_params p = {0};
    return p;
}

struct moeinf_context_params moeinf_context_params_default(void) {
    struct moeinf_context_params p = {
        .n_ctx = 4096,
        .n_batch = 512,
        .n_threads = 0,
        .kv_type = MOEINF_KV_F16,
        .expert_io_threads = MOEINF_EXPERT_IO_THREADS_DEFAULT,
        .expert_prefetch = MOEINF_EXPERT_PREFETCH_DEFAULT,
        .expert_lookahead = MOEINF_EXPERT_LOOKAHEAD_DEFAULT,
    };
    return p;
}

/* READ when the file and room to spare fit in the memory this process may use (see
 * moeinf.h), else MAP. Any doubt (no size, no limit known) maps: a mapping cannot run out
 * of memory, a read of a file larger than memory would. */
static enum moeinf_load_mode auto_load_mode(const char *path) {
    struct stat sb;
    if (stat(path, &sb) != 0 || !S_ISREG(sb.st_mode)) return MOEINF_LOAD_MAP;
    uint64_t room;
    if (!moeinf_memory_room(&room)) return MOEINF_LOAD_MAP;
    return moeinf_load_fits((uint64_t)sb.st_size, room) ? MOEINF_LOAD_READ : MOEINF_LOAD_MAP;
}

enum moeinf_status moeinf_model_load(const char *path, const struct moeinf_model_params *params,
                                     struct moeinf_model **out, struct moeinf_error *err) {
    struct moeinf_model *m = calloc(1, sizeof *m);
    if (!m) return moeinf_fail(err, MOEINF_ERR_NOMEM, "%s: out of memory", path);
    bool offload = params && params->offload_experts;
    struct moeinf_progress progress = {params ? params->progress : NULL,
                                       params ? params->progress_user : NULL};
    bool vocab_only = params && params->vocab_only;
    enum moeinf_load_mode load = params ? params->load_mode : MOEINF_LOAD_AUTO;
    if (offload || vocab_only) load = MOEINF_LOAD_MAP; /* only parts of the file are read */
    if (load == MOEINF_LOAD_AUTO) load = auto_load_mode(path);
    m->load_mode = offload ? MOEINF_LOAD_READ : load;
    enum moeinf_map_mode mode = load == MOEINF_LOAD_READ ? MOEINF_MAP_READ : MOEINF_MAP_FILE;
    enum moeinf_status st = moeinf_gguf_open_mode(path, mode, &progress, &m->gguf, err);
    if (st == MOEINF_OK && !vocab_only) st = moeinf_llm_init(m->gguf, &m->llm, err);
    if (st == MOEINF_OK && offload && !vocab_only) {
        st = moeinf_resident_load(m->llm, m->gguf, &progress, &m->resident, err);
    }
    if (st == MOEINF_OK) st = moeinf_vocab_init_from_gguf(m->gguf, &m->vocab, err);
    if (st == MOEINF_OK && m->llm && moeinf_vocab_n_tokens(m->vocab) != m->llm->hp.n_vocab) {
        st = moeinf_fail(err, MOEINF_ERR_FORMAT,
                         "%s: the vocabulary has %d tokens but token_embd has %d rows", path,
                         moeinf_vocab_n_tokens(m->vocab), m->llm->hp.n_vocab);
    }
    if (st != MOEINF_OK) {
        moeinf_model_free(m);
        return st;
    }
    *out = m;
    return MOEINF_OK;
}

void moeinf_model_free(struct moeinf_model *model) {
    if (!model) return;
    moeinf_vocab_free(model->vocab);
    moeinf_resident_free(model->resident);
    moeinf_llm_free(model->llm);
    moeinf_gguf_free(model->gguf);
    free(model);
}

enum moeinf_load_mode moeinf_model_load_mode(const struct moeinf_model *model) {
    return model->load_mode;
}

int moeinf_model_n_vocab(const struct moeinf_model *model) {
    return model->llm ? model->llm->hp.n_vocab : moeinf_vocab_n_tokens(model->vocab);
}

int moeinf_model_n_ctx_train(const struct moeinf_model *model) {
    return model->llm ? model->llm->hp.n_ctx_train : 0;
}

void moeinf_model_desc(const struct moeinf_model *model, char *buf, size_t size) {
    if (!model->llm) {
        snprintf(buf, size, "vocabulary only: %d tokens", moeinf_vocab_n_tokens(model->vocab));
        return;
    }
    const struct moeinf_hparams *hp = &model->llm->hp;
    const struct moeinf_layer *lw = &model->llm->layers[0];
    const struct moeinf_weight *ffn = hp->n_expert > 0 ? &lw->gate_exps : &lw->ffn_gate;
    snprintf(buf, size,
             "%s: %d layers, n_embd %d, %d heads (%d kv, dim %d), %d experts (top %d), "
             "ff %d, vocab %d, ffn type %s",
             moeinf_llm_arch_name(model->llm), hp->n_layer, hp->n_embd, hp->n_head, hp->n_head_kv,
             hp->head_dim, hp->n_expert, hp->n_expert_used, hp->n_ff, hp->n_vocab,
             moeinf_type_traits_get(ffn->type)->name);
}

uint64_t moeinf_model_decode_bytes(const struct moeinf_model *model) {
    const struct moeinf_llm *llm = model->llm;
    if (!llm) return 0;
    const struct moeinf_hparams *hp = &llm->hp;
    uint64_t total = llm->tok_embd.row_bytes + llm->output.mat_bytes;
    for (int il = 0; il < hp->n_layer; il++) {
        const struct moeinf_layer *lw = &llm->layers[il];
        total += lw->wq.mat_bytes + lw->wk.mat_bytes + lw->wv.mat_bytes + lw->wo.mat_bytes;
        if (hp->n_expert > 0) {
            total += lw->router.mat_bytes;
            total += (uint64_t)hp->n_expert_used *
                     (lw->gate_exps.mat_bytes + lw->up_exps.mat_bytes + lw->down_exps.mat_bytes);
            total += lw->gate_shexp.mat_bytes + lw->up_shexp.mat_bytes + lw->down_shexp.mat_bytes;
        } else {
            total += lw->ffn_gate.mat_bytes + lw->ffn_up.mat_bytes + lw->ffn_down.mat_bytes;
        }
    }
    return total;
}

enum moeinf_status moeinf_context_init(struct moeinf_model *model,
                                       const struct moeinf_context_params *params,
                                       struct moeinf_context **out, struct moeinf_error *err) {
    if (!model->llm)
        return moeinf_fail(err, MOEINF_ERR_ARG, "the model was loaded with vocab_only: no weights");
    if (params->n_ctx < 1 || params->n_ctx > (1 << 24)) {
        return moeinf_fail(err, MOEINF_ERR_ARG, "context size %d is out of range", params->n_ctx);
    }
    if (params->n_batch < 1 || params->n_threads < 0 ||
        (params->kv_type != MOEINF_KV_F16 && params->kv_type != MOEINF_KV_F32)) {
        return moeinf_fail(err, MOEINF_ERR_ARG, "invalid batch size, thread count or KV type");
    }
    const struct moeinf_kernels *kern = NULL;
    enum moeinf_status st = moeinf_kernels_from_env(&kern, err);
    if (st != MOEINF_OK) return st;
    struct moeinf_context *ctx = calloc(1, sizeof *ctx);
    if (!ctx) return moeinf_fail(err, MOEINF_ERR_NOMEM, "out of memory for the context");
    ctx->model = model;
    ctx->params = *params;
    if (ctx->params.n_batch > ctx->params.n_ctx) ctx->params.n_batch = ctx->params.n_ctx;
    ctx->kern = kern;
    int n_threads = params->n_threads > 0 ? params->n_threads : moeinf_cpu_count();
    st = moeinf_pool_init(n_threads, &ctx->pool, err);
    if (st == MOEINF_OK) {
        struct moeinf_fwd_params fp = {
            .n_ctx = params->n_ctx,
            .n_batch = params->n_batch,
            .kv_f16 = params->kv_type == MOEINF_KV_F16,
            .pool = ctx->pool,
            .kern = ctx->kern,
        };
        st = moeinf_fwd_init(model->llm, &fp, &ctx->fwd, err);
    }
    if (st == MOEINF_OK) st = moeinf_engine_expert_cache_init(ctx, err);
    if (st != MOEINF_OK) {
        moeinf_context_free(ctx);
        return st;
    }
    *out = ctx;
    return MOEINF_OK;
}

void moeinf_context_free(struct moeinf_context *ctx) {
    if (!ctx) return;
    moeinf_context_record_close(ctx, NULL);
    if (ctx->tier) moeinf_tier_request_end(ctx->tier);
    moeinf_tier_free(ctx->tier);
    moeinf_fwd_free(ctx->fwd);
    moeinf_pool_free(ctx->pool);
    free(ctx);
}

void moeinf_context_reset(struct moeinf_context *ctx) {
    ctx->n_past = 0;
}

int moeinf_context_n_past(const struct moeinf_context *ctx) {
    return ctx->n_past;
}

int moeinf_context_n_threads(const struct moeinf_context *ctx) {
    return moeinf_pool_size(ctx->pool);
}

const char *moeinf_context_kernels(const struct moeinf_context *ctx) {
    return ctx->kern->name;
}

enum moeinf_status moeinf_decode(struct moeinf_context *ctx, const int32_t *ids, int n,
                                 float *logits, bool all_logits, struct moeinf_error *err) {
    const int n_vocab = ctx->model->llm->hp.n_vocab;
    /* a routing replay set for this call (engine_replay.h) is used by this call only */
    const int32_t *replay = ctx->route_replay;
    bool prefill = replay ? ctx->route_replay_prefill : n > 1;
    ctx->route_replay = NULL;
    if (n <= 0) return moeinf_fail(err, MOEINF_ERR_ARG, "decode needs at least one token");
    if (n > ctx->params.n_ctx - ctx->n_past) {
        return moeinf_fail(err, MOEINF_ERR_CONTEXT,
                           "context full: %d tokens in context + %d new exceed -c %d", ctx->n_past,
                           n, ctx->params.n_ctx);
    }
    for (int i = 0; i < n; i++) {
        if (ids[i] < 0 || ids[i] >= n_vocab) {
            return moeinf_fail(err, MOEINF_ERR_ARG, "token id %d is outside the vocabulary [0, %d)",
                               ids[i], n_vocab);
        }
    }
    if (replay && n != ctx->route_replay_n) {
        return moeinf_fail(err, MOEINF_ERR_ARG,
                           "the routing replay holds %d tokens but decode was given %d",
                           ctx->route_replay_n, n);
    }
    const struct moeinf_hparams *hp = &ctx->model->llm->hp;
    const size_t replay_row = (size_t)hp->n_layer * (size_t)hp->n_expert_used;
    int n_batch = ctx->params.n_batch;
    /* A decode that starts at position 0 starts a request (as the routing record counts), and
     * so does the first decode after moeinf_context_request_end. */
    if (ctx->tier && (ctx->n_past == 0 || !ctx->tier->in_request)) {
        moeinf_tier_request_begin(ctx->tier);
    }
    for (int i0 = 0; i0 < n; i0 += n_batch) {
        int m = n - i0 < n_batch ? n - i0 : n_batch;
        bool last = i0 + m == n;
        float *out = NULL;
        if (logits && all_logits) out = logits + (size_t)i0 * n_vocab;
        if (logits && !all_logits && last) out = logits;
        if (ctx->tier) {
            moeinf_tier_iteration_begin(ctx->tier,
                                        prefill ? MOEINF_PHASE_PREFILL : MOEINF_PHASE_DECODE, m);
        }
        if (replay) moeinf_fwd_set_route_replay(ctx->fwd, replay + (size_t)i0 * replay_row);
        enum moeinf_status est =
            moeinf_fwd_eval(ctx->fwd, ids + i0, m, ctx->n_past, out, all_logits, err);
        if (replay) moeinf_fwd_set_route_replay(ctx->fwd, NULL);
        if (ctx->tier) moeinf_tier_iteration_end(ctx->tier);
        if (est != MOEINF_OK) return est;
        enum moeinf_status fst = moeinf_fwd_check_finite(ctx->fwd, out, all_logits ? m : 1, err);
        if (fst != MOEINF_OK) return fst; /* rather than sample from NaN: nothing appended */
        int pos0 = ctx->n_past;
        ctx->n_past += m; /* the tokens are in the context even if recording them fails */
        if (ctx->record) {
            enum moeinf_status st = moeinf_record_eval(ctx, m, pos0, prefill, err);
            if (st != MOEINF_OK) return st;
        }
    }
    return MOEINF_OK;
}
