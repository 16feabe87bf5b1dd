/*
 * model_ids_only.h - a model loaded as moeinf_model_load does, but without its vocabulary,
 * for tests of files whose tokenizer moeinf cannot read yet (byte-level BPE, `gpt2`: the
 * tiny qwen2moe and olmoe models). Such tests feed token ids (from the goldens) and never
 * tokenize; moeinf_model_free handles the missing vocabulary.
 */
#ifndef MOEINF_TEST_MODEL_IDS_ONLY_H
#define MOEINF_TEST_MODEL_IDS_ONLY_H

#include <stdlib.h>

#include "engine.h"

static inline enum moeinf_status test_model_load_ids_only(const char *path, bool offload,
                                                          struct moeinf_model **out,
                                                          struct moeinf_error *err) {
    struct moeinf_model *m = calloc(1, sizeof *m);
    if (!m) return MOEINF_ERR_NOMEM;
    enum moeinf_status st = moeinf_gguf_open_mode(path, MOEINF_MAP_FILE, &m->gguf, err);
    if (st == MOEINF_OK) st = moeinf_llm_init(m->gguf, &m->llm, err);
    if (st == MOEINF_OK && offload) st = moeinf_resident_load(m->llm, m->gguf, &m->resident, err);
    if (st != MOEINF_OK) {
        moeinf_model_free(m);
        return st;
    }
    *out = m;
    return MOEINF_OK;
}

#endif
