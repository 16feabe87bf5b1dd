/*
 * resident.h - the weights that stay in memory when routed experts are offloaded: embeddings,
 * attention, norms, routers and the lm_head are read once from the file into anonymous
 * memory, so that neither the page cache nor the mapping holds the file and the memory
 * budget is what the process really uses. The routed experts' views lose their data (reads
 * of them go through the expert cache, offload/tier.h) but keep their shapes; their file
 * extents are returned for the expert store.
 */
#ifndef MOEINF_MODEL_RESIDENT_H
#define MOEINF_MODEL_RESIDENT_H

#include <stdint.h>

#include "gguf/gguf.h"
#include "model/model.h"
#include "moeinf.h"
#include "offload/store.h"

struct moeinf_resident {
    uint8_t *arena; /* the copies, each 64-byte aligned, in one moeinf_huge_alloc block */
    uint64_t bytes; /* its size */
    struct moeinf_store_layer *experts; /* (n_layer) where each layer's experts lie */
};

/*
 * Copies every weight of llm but the routed experts out of g's file into anonymous memory
 * and rebinds the views to the copies (a tied lm_head keeps sharing token_embd), then drops
 * the file from the page cache, reporting the bytes read to progress (may be NULL).
 * MOEINF_ERR_ARG for a dense model; read errors otherwise.
 */
enum moeinf_status moeinf_resident_load(struct moeinf_llm *llm, const struct moeinf_gguf *g,
                                        const struct moeinf_progress *progress,
                                        struct moeinf_resident **out, struct moeinf_error *err);
void moeinf_resident_free(struct moeinf_resident *r);

#endif
