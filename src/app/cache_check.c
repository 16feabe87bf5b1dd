/*
 * cache_check.c - an expert cache too small for the model, refused before the model loads:
 * the slots a size gives are counted from the GGUF header alone (the tensor table says where
 * each layer's experts lie and how large they are), as the tier will count them (see
 * expert_args.h, expert_args_check_cache).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "app/args.h"
#include "app/expert_args.h"
#include "gguf/gguf.h"
#include "offload/store.h"

/* The file's geometry: MoE layers (those with expert tensors among the blocks that run:
 * leading dense layers and trailing next-token-prediction blocks are not the cache's), experts
 * per layer, top-k, and one slot's bytes (0 when the header does not say, e.g. an architecture
 * without merged expert tensors). */
struct geometry {
    uint32_t n_layer, n_expert, top_k;
    uint64_t slot_bytes;
};

static bool read_geometry(const struct moeinf_gguf *g, struct geometry *out) {
    struct moeinf_gguf_str arch;
    char key[160];
    struct moeinf_error err = {0};
    if (moeinf_gguf_get_str(g, "general.architecture", &arch, &err) != MOEINF_OK || arch.len > 64) {
        return false;
    }
    const char *names[3] = {"block_count", "expert_count", "expert_used_count"};
    uint32_t *dst[3] = {&out->n_layer, &out->n_expert, &out->top_k};
    for (int i = 0; i < 3; i++) {
        snprintf(key, sizeof key, "%.*s.%s", (int)arch.len, arch.data, names[i]);
        if (moeinf_gguf_get_u32(g, key, dst[i], &err) != MOEINF_OK) return false;
    }
    if (out->n_expert == 0 || out->top_k == 0 || out->n_layer == 0 || out->n_layer > 4096) {
        return false;
    }
    uint32_t nextn = 0;
    snprintf(key, sizeof key, "%.*s.nextn_predict_layers", (int)arch.len, arch.data);
    if (moeinf_gguf_find_key(g, key) >= 0 &&
        (moeinf_gguf_get_u32(g, key, &nextn, &err) != MOEINF_OK || nextn >= out->n_layer)) {
        return false;
    }
    const uint32_t n_blocks = out->n_layer - nextn;
    struct moeinf_store_layer *layers = calloc(n_blocks, sizeof *layers);
    if (!layers) return false;
    bool ok = true;
    uint32_t n_moe = 0;
    const char *parts[MOEINF_EXPERT_PARTS] = {"gate", "up", "down"};
    for (uint32_t il = 0; ok && il < n_blocks; il++) {
        snprintf(key, sizeof key, "blk.%u.ffn_gate_up_exps.weight", il);
        /* gate and up fused: each expert's gate rows, then its up rows (model/arch_bind.c) */
        const struct moeinf_gguf_tensor *fused = moeinf_gguf_find_tensor(g, key);
        snprintf(key, sizeof key, "blk.%u.ffn_gate_exps.weight", il);
        if (!fused && !moeinf_gguf_find_tensor(g, key) && n_moe == 0) continue; /* dense lead */
        for (int p = 0; p < MOEINF_EXPERT_PARTS; p++) {
            const bool half = fused && p < 2;
            snprintf(key, sizeof key, "blk.%u.ffn_%s_exps.weight", il, half ? "gate_up" : parts[p]);
            const struct moeinf_gguf_tensor *t = moeinf_gguf_find_tensor(g, key);
            if (!t || t->n_bytes % ((half ? 2u : 1u) * (uint64_t)out->n_expert) != 0) ok = false;
            if (!ok) break;
            const uint64_t stride = t->n_bytes / out->n_expert;
            layers[n_moe].stride[p] = stride;
            layers[n_moe].bytes[p] = half ? stride / 2 : stride;
            layers[n_moe].off[p] = t->offset + (half && p == 1 ? stride / 2 : 0);
        }
        n_moe++;
    }
    out->n_layer = n_moe;
    if (ok && n_moe > 0)
        out->slot_bytes = moeinf_store_slot_bytes_for(layers, (int)n_moe, (int)out->n_expert);
    free(layers);
    return ok && out->slot_bytes > 0;
}

int expert_args_check_cache(const char *cmd, const char *path,
                            const struct moeinf_context_params *cp) {
    const struct moeinf_expert_cache_size *size = &cp->expert_cache;
    if (!path ||
        (size->kind != MOEINF_EXPERT_CACHE_BYTES && size->kind != MOEINF_EXPERT_CACHE_PERCENT)) {
        return CLI_EXIT_OK;
    }
    struct moeinf_gguf *g = NULL;
    struct moeinf_error err = {0};
    /* a file that does not open is the model load's to report */
    if (moeinf_gguf_open(path, &g, &err) != MOEINF_OK) return CLI_EXIT_OK;
    struct geometry geo = {0};
    bool known = read_geometry(g, &geo);
    moeinf_gguf_free(g);
    if (!known) return CLI_EXIT_OK; /* the library checks it with the model */
    const uint64_t total = (uint64_t)geo.n_layer * geo.n_expert;
    const uint64_t slots =
        size->kind == MOEINF_EXPERT_CACHE_BYTES
            ? size->bytes / geo.slot_bytes
            : (uint64_t)llround(size->percent / 100.0 * (double)total); /* as the engine */
    if (slots >= geo.top_k) return CLI_EXIT_OK;
    const double mib = 1024.0 * 1024.0;
    fprintf(stderr,
            "moeinf %s: --expert-cache: %llu slot%s of %.2f MiB, too small: one token uses %u "
            "experts per layer, so at least %u slots (%.1f MiB) are needed\n",
            cmd, (unsigned long long)slots, slots == 1 ? "" : "s", (double)geo.slot_bytes / mib,
            geo.top_k, geo.top_k, (double)geo.slot_bytes * geo.top_k / mib);
    return CLI_EXIT_USAGE;
}
