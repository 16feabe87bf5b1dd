/* engine_model.c - the model half of moeinf.h: loading a model (the GGUF file, its
 * architecture's weights, the resident copies when experts are offloaded, the vocabulary)
 * and what it tells about itself. */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "base/le.h"
#include "base/memlimit.h"
#include "base/status.h"
#include "engine/engine.h"
#include "experts/eam.h"
#include "tokenizer/vocab.h"

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

/* The model's identity for the EAMC file (experts/eam.h says why the routers): a hash of the
 * geometry and of every MoE layer's router weights, in the manner of FNV-1a 64 but over 8-byte
 * words with a shift that carries high bits down (tens of MiB on a large model); the label is
 * general.name, else the architecture. The routers are in memory already (resident, or pages
 * of the mapping the first token reads anyway). */
static uint64_t id_mix(uint64_t h, const uint8_t *p, size_t n) {
    const uint64_t prime = 0x100000001b3ull;
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        h = (h ^ moeinf_le_u64(p + i)) * prime;
        h ^= h >> 29;
    }
    for (; i < n; i++)
        h = (h ^ p[i]) * prime;
    return h;
}

static void model_identity(struct moeinf_model *m) {
    const struct moeinf_hparams *hp = &m->llm->hp;
    uint8_t geo[16];
    moeinf_le_put_u32(geo, (uint32_t)hp->n_layer);
    moeinf_le_put_u32(geo + 4, (uint32_t)hp->n_expert);
    moeinf_le_put_u32(geo + 8, (uint32_t)hp->n_expert_used);
    moeinf_le_put_u32(geo + 12, (uint32_t)hp->n_embd);
    uint64_t h = id_mix(0xcbf29ce484222325ull, geo, sizeof geo);
    for (int il = 0; il < hp->n_layer; il++) {
        const struct moeinf_weight *r = &m->llm->layers[il].router;
        if (m->llm->layers[il].ffn == MOEINF_FFN_MOE && r->data)
            h = id_mix(h, r->data, r->mat_bytes);
    }
    m->id.kind = MOEINF_MODEL_ID_ROUTERS;
    m->id.hash = h;
    struct moeinf_gguf_str name = {NULL, 0};
    char label[MOEINF_MODEL_NAME_BYTES];
    if (moeinf_gguf_get_str_opt(m->gguf, "general.name", &name, NULL) == MOEINF_OK && name.data &&
        name.len > 0) {
        snprintf(label, sizeof label, "%.*s",
                 (int)(name.len < sizeof label ? name.len : sizeof label), name.data);
    } else {
        snprintf(label, sizeof label, "%s", moeinf_llm_arch_name(m->llm));
    }
    moeinf_model_id_set_name(&m->id, label);
}

enum moeinf_status moeinf_model_load(const char *path, const struct moeinf_model_params *params,
                                     struct moeinf_model **out, struct moeinf_error *err) {
    struct moeinf_model *m = calloc(1, sizeof *m);
    if (!m) return moeinf_fail(err, MOEINF_ERR_NOMEM, "%s: out of memory", path);
    atomic_init(&m->expert_held, 0);
    bool offload = params && params->offload_experts;
    struct moeinf_progress progress = {params ? params->progress : NULL,
                                       params ? params->progress_user : NULL};
    bool vocab_only = params && params->vocab_only;
    enum moeinf_load_mode load = params ? params->load_mode : MOEINF_LOAD_AUTO;
    if (offload || vocab_only) load = MOEINF_LOAD_MAP; /* only parts of the file are read */
    if (load == MOEINF_LOAD_AUTO) load = auto_load_mode(path);
    m->load_mode = offload ? MOEINF_LOAD_READ : load;
    enum moeinf_map_mode mode = load == MOEINF_LOAD_READ ? MOEINF_MAP_READ
                                : offload                ? MOEINF_MAP_FILE_RANDOM
                                                         : MOEINF_MAP_FILE;
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
    if (m->llm && m->llm->hp.n_expert > 0) model_identity(m);
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
    /* the first layer with experts (a model may lead with dense ones) */
    const struct moeinf_layer *lw = &model->llm->layers[hp->n_layer_dense_lead];
    const struct moeinf_weight *ffn = hp->n_expert > 0 ? &lw->gate_exps : &lw->ffn_gate;
    int n = snprintf(buf, size,
                     "%s: %d layers, n_embd %d, %d heads (%d kv, dim %d), %d experts (top %d), "
                     "ff %d, vocab %d, ffn type %s",
                     moeinf_llm_arch_name(model->llm), hp->n_layer, hp->n_embd, hp->n_head,
                     hp->n_head_kv, hp->head_dim, hp->n_expert, hp->n_expert_used, hp->n_ff,
                     hp->n_vocab, moeinf_type_traits_get(ffn->type)->name);
    int n_swa = 0;
    for (int il = 0; il < hp->n_layer; il++)
        n_swa += model->llm->layers[il].swa;
    if (n_swa > 0 && n > 0 && (size_t)n < size) {
        n += snprintf(buf + n, size - (size_t)n, ", sliding window %d on %d layers", hp->n_swa,
                      n_swa);
    }
    if (hp->mla_kv > 0 && n > 0 && (size_t)n < size) {
        n += snprintf(buf + n, size - (size_t)n, ", latent attention (kv rank %d, q rank %d)",
                      hp->mla_kv, hp->mla_q);
    }
    if (hp->n_layer_dense_lead > 0 && n > 0 && (size_t)n < size) {
        snprintf(buf + n, size - (size_t)n, ", %d dense layer%s first", hp->n_layer_dense_lead,
                 hp->n_layer_dense_lead > 1 ? "s" : "");
    }
}

uint64_t moeinf_model_decode_bytes(const struct moeinf_model *model) {
    const struct moeinf_llm *llm = model->llm;
    if (!llm) return 0;
    const struct moeinf_hparams *hp = &llm->hp;
    uint64_t total = llm->tok_embd.row_bytes + llm->output.mat_bytes;
    for (int il = 0; il < hp->n_layer; il++) {
        const struct moeinf_layer *lw = &llm->layers[il];
        total += lw->wq.mat_bytes + lw->wk.mat_bytes + lw->wv.mat_bytes + lw->wo.mat_bytes;
        total += lw->ssm_qkv.mat_bytes + lw->ssm_z.mat_bytes + lw->ssm_in.mat_bytes +
                 lw->ssm_beta.mat_bytes + lw->ssm_alpha.mat_bytes + lw->ssm_ba.mat_bytes +
                 lw->ssm_out.mat_bytes;
        if (lw->ffn == MOEINF_FFN_MOE) {
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
