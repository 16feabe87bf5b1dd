/*
 * quant_mix.h - the tensor types gen-model writes: one type for every large matrix, or
 * llama-quantize's Q4_K_M or MXFP4_MOE mix (quant_mix.c), and llama.cpp's general.file_type of
 * each.
 */
#ifndef MOEINF_GEN_QUANT_MIX_H
#define MOEINF_GEN_QUANT_MIX_H

#include <stdbool.h>
#include <stdint.h>

#include "moeinf.h"

/* The type id of a gen-model --type name ("q4_k", "q4_k_m", ...; lower case, as llama-quantize
 * spells them), or -1. */
int moeinf_gen_type_by_name(const char *name);

/* The --type name of a gen-model type or mix, or "unknown". */
const char *moeinf_gen_type_name(int type);

/* The names moeinf_gen_type_by_name knows, for messages: "f32, f16, ...". */
const char *moeinf_gen_type_names(void);

/* True if `type` is a single tensor type gen-model can write (not a mix). */
bool moeinf_gen_type_is_plain(int type);

/* True for the mixes: MOEINF_GEN_TYPE_Q4_K_M and MOEINF_GEN_TYPE_MXFP4_MOE. */
bool moeinf_gen_type_is_mix(int type);

/* The type llama-quantize's MXFP4_MOE gives a large matrix: MXFP4 for the experts (a 3-D
 * tensor, ne[2] > 1), Q8_0 for every other one, the lm_head included (llama.cpp's
 * llama_tensor_get_type; the router stays F32, as every type leaves it). */
int moeinf_mxfp4_moe_type(int64_t ne2);

/* llama.cpp's general.file_type (enum llama_ftype) of a gen-model type or mix. */
uint32_t moeinf_gen_file_type(int type);

/* The type llama-quantize's Q4_K_M gives a large matrix (no imatrix), as llama.cpp's
 * llama_tensor_get_type decides it for a Mixtral-family model:
 *   - the lm_head (output, or token_embd when tied): Q6_K
 *   - attn_v and attn_qkv (llama.cpp counts both as attn_v; a hybrid layer has one of the
 *     two, so its counter is the layer): Q8_0 with 8 experts, else Q6_K on the layers
 *     use_more_bits picks, else Q4_K
 *   - attn_k: Q8_0 with 8 experts, else Q4_K
 *   - attn_output: Q5_K with 8 experts, else Q4_K
 *   - ffn_down(_exps, _shexp): Q6_K on the layers use_more_bits picks, else Q4_K
 *   - everything else (token_embd untied, attn_q, ffn_gate/up(_exps), attn_gate, ssm_out,
 *     ssm_beta/alpha/ba): Q4_K
 * use_more_bits(i, n): i < n/8, or i >= 7n/8, or (i - n/8) % 3 == 2 (integer division).
 * A row (ne0) that is not whole 256-element super-blocks falls back as llama-quantize does:
 * Q4_K -> Q5_0, Q5_K -> Q5_1, Q6_K -> Q8_0 (and the lm_head goes straight to Q8_0).
 * `name` is the tensor name without ".weight" ("blk.3.attn_v", "output"); layer -1 for
 * tensors outside the blocks. */
int moeinf_q4_k_m_type(const char *name, int layer, int n_layer, int n_expert, int64_t ne0,
                       bool is_lm_head);

#endif
