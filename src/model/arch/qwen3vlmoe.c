/*
 * qwen3vlmoe.c - arch `qwen3vlmoe` (Qwen3-VL-30B-A3B, Qwen3-VL-235B-A22B), text only.
 * llama.cpp: src/models/qwen3vlmoe.cpp.
 *   attention  as qwen3moe's, with interleaved multi-section RoPE (IMRoPE) over the whole head:
 *              a text token's time, height and width sections rotate as NEOX, the pairs left to
 *              the fourth section keep their values (position 0 for text)
 *   FFN        as qwen3moe's: top-k of a softmax router, renormalised
 *   not run    vision, which llama.cpp keeps in a separate projector file; and deepstack
 *              (n_deepstack_layers), which adds to the first layers' outputs the extra
 *              channels of an image's input embeddings: zero for text tokens, as llama.cpp
 *              pads them
 */
#include "model/arch.h"

/* qwen3moe's hyper-parameters (read under this file's arch name), then IMRoPE in place of its
 * NEOX RoPE. */
static enum moeinf_status read_hparams(struct moeinf_arch_loader *ld, struct moeinf_hparams *hp) {
    enum moeinf_status st = moeinf_arch_qwen3moe.read_hparams(ld, hp);
    return st != MOEINF_OK ? st : moeinf_arch_read_imrope(ld, hp);
}

static enum moeinf_status bind_layer(struct moeinf_arch_loader *ld, const struct moeinf_hparams *hp,
                                     int il, struct moeinf_layer *lw) {
    return moeinf_arch_bind_std_layer(ld, hp, il, false, lw);
}

const struct moeinf_arch moeinf_arch_qwen3vlmoe = {
    .name = "qwen3vlmoe",
    .read_hparams = read_hparams,
    .bind_layer = bind_layer,
};
