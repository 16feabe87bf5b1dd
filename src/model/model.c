/* model.c - a model's hyper-parameters and weight views through its architecture's table entry
 * (model/arch.h); the tensors every architecture has. */
#include "model/model.h"

#include <stdlib.h>
#include <string.h>

#include "base/escape.h"
#include "base/status.h"
#include "model/arch.h"

const char *moeinf_llm_arch_name(const struct moeinf_llm *llm) {
    return llm->arch->name;
}

/* The architecture general.architecture names, or MOEINF_ERR_UNSUPPORTED listing those known. */
static enum moeinf_status find_arch(const struct moeinf_gguf *g, const struct moeinf_arch **out,
                                    struct moeinf_error *err) {
    struct moeinf_gguf_str name;
    enum moeinf_status st = moeinf_gguf_get_str(g, "general.architecture", &name, err);
    if (st != MOEINF_OK) return st;
    *out = moeinf_arch_find(name.data, (size_t)name.len);
    if (*out) return MOEINF_OK;
    char known[160];
    moeinf_arch_names(known, sizeof known);
    return moeinf_fail(err, MOEINF_ERR_UNSUPPORTED,
                       "%s: architecture '%s' is not supported yet (%s are)", g->path,
                       moeinf_esc(name.data, (size_t)name.len).s, known);
}

/* token_embd, output_norm and output (the lm_head, tied to token_embd when absent). */
static enum moeinf_status bind_io(struct moeinf_arch_loader *ld, struct moeinf_llm *llm) {
    struct moeinf_hparams *hp = &llm->hp;
    enum moeinf_status st =
        moeinf_arch_bind(ld, "token_embd.weight", hp->n_embd, 0, 1, false, &llm->tok_embd);
    if (st != MOEINF_OK) return st;
    if (llm->tok_embd.n_out <= 0 || llm->tok_embd.n_out > (1 << 24)) {
        return moeinf_fail(ld->err, MOEINF_ERR_FORMAT, "%s: invalid vocabulary size %lld",
                           ld->g->path, (long long)llm->tok_embd.n_out);
    }
    hp->n_vocab = (int)llm->tok_embd.n_out;
    if ((st = moeinf_arch_bind_vec(ld, "output_norm.weight", hp->n_embd, false,
                                   &llm->output_norm)) ||
        (st = moeinf_arch_bind(ld, "output.weight", hp->n_embd, hp->n_vocab, 1, true,
                               &llm->output))) {
        return st;
    }
    if (!llm->output.data) llm->output = llm->tok_embd; /* tied lm_head */
    return MOEINF_OK;
}

enum moeinf_status moeinf_llm_init(const struct moeinf_gguf *g, struct moeinf_llm **out,
                                   struct moeinf_error *err) {
    const struct moeinf_arch *arch;
    enum moeinf_status st = find_arch(g, &arch, err);
    if (st != MOEINF_OK) return st;
    struct moeinf_llm *llm = calloc(1, sizeof *llm);
    if (llm) llm->bound = calloc(g->n_tensors ? 2 * (size_t)g->n_tensors : 1, sizeof *llm->bound);
    if (!llm || !llm->bound) {
        st = moeinf_fail(err, MOEINF_ERR_NOMEM, "%s: out of memory", g->path);
        goto fail;
    }
    llm->arch = arch;
    struct moeinf_arch_loader ld = {g, arch->name, llm, err, false};
    struct moeinf_hparams *hp = &llm->hp;
    if ((st = arch->read_hparams(&ld, hp)) || (st = bind_io(&ld, llm))) goto fail;
    llm->layers = calloc((size_t)hp->n_layer, sizeof *llm->layers);
    if (!llm->layers) {
        st = moeinf_fail(err, MOEINF_ERR_NOMEM, "%s: out of memory", g->path);
        goto fail;
    }
    for (int il = 0; il < hp->n_layer; il++) {
        if ((st = arch->bind_layer(&ld, hp, il, &llm->layers[il]))) goto fail;
    }
    *out = llm;
    return MOEINF_OK;
fail:
    moeinf_llm_free(llm);
    return st;
}

void moeinf_llm_free(struct moeinf_llm *llm) {
    if (!llm) return;
    free(llm->bound);
    free(llm->layers);
    free(llm);
}
