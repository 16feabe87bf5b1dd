"""make_tiny_deepseek2.py - a tiny random-weight deepseek2 GGUF in DeepSeek-V2-Lite's layout.

Usage: python3 tools/goldens/make_tiny_deepseek2.py OUT.gguf
Needs numpy and the `gguf` package (PyPI, 0.19.0). The file is deterministic (numpy seed 2702).

The other deepseek2 layout than ../shared/testdata/models/tiny-deepseek2-F32.gguf (which has the
split attn_k_b/attn_v_b tensors, q_lora and sigmoid routing): as llama.cpp 0.3.36 loads it
(src/models/deepseek2.cpp),
  - legacy attention: one attn_kv_b per layer and NO attention.key_length_mla /
    value_length_mla keys, so llama.cpp takes its non-MLA path (full multi-head attention with
    K and V decompressed per head; its K/V cache holds n_head * (nope + rope) keys and
    n_head * v values per token). attention.key_length = nope + rope = 32 + 32,
    attention.value_length = v = 32, head_count = head_count_kv = 4, kv_lora_rank 64,
    rope.dimension_count 32 (the rope part of each query/key head, its LAST 32 dims; RoPE type
    NORM: adjacent pairs).
  - no q_lora: plain attn_q (attention.q_lora_rank is written as 0: llama.cpp requires the key
    unless the model has 26 or 27 layers, and takes 0 as "no q_lora").
  - 3 layers, leading_dense_block_count 1 (layer 0 a dense SwiGLU FFN of feed_forward_length
    128), layers 1-2 MoE: 16 experts of width 32 (expert_feed_forward_length), top 4, in 4
    expert groups of which the best 2 are kept (expert_group_count 4,
    expert_group_used_count 2), softmax gating (expert_gating_func 1), expert_weights_norm
    false, expert_weights_scale 1.0, no exp_probs_b; 2 shared experts (one FFN of width 64).
  - YaRN as DeepSeek-V2-Lite has it: rope.scaling.type yarn, rope.scaling.factor 4,
    rope.scaling.original_context_length 16 (so that the golden prompts with their greedy
    tokens run past it; llama.cpp's YaRN does not depend on the position anyway),
    rope.scaling.yarn_log_multiplier 0.0707 (the converter writes 0.1 * mscale_all_dim with
    mscale_all_dim 0.707; llama.cpp divides it by 0.1 again), rope.freq_base 10000;
    context_length 4096.
n_embd 256 (so that Q4_K_M gives the n_embd-wide rows K-quants).

Tensors (numpy shapes; ggml's are reversed): token_embd [V, 256] F16, output_norm [256],
output [V, 256] F16 (untied); per layer blk.N.: attn_norm [256], attn_q [4 * 64, 256] (per
head [nope 32 | rope 32]), attn_kv_a_mqa [64 + 32, 256] ([compressed kv | shared rope key]),
attn_kv_a_norm [64], attn_kv_b [4 * (32 + 32), 64] (per head: 32 rows of k_nope, then 32 rows
of v), attn_output [256, 4 * 32], ffn_norm [256]; layer 0: ffn_gate, ffn_up [128, 256],
ffn_down [256, 128]; layers 1-2: ffn_gate_inp [16, 256], ffn_gate_exps, ffn_up_exps
[16, 32, 256], ffn_down_exps [16, 256, 32], ffn_gate_shexp, ffn_up_shexp [64, 256],
ffn_down_shexp [256, 64].

Weights: matrices ~ s N(0, 1) / sqrt(fan_in) with s = 1 (router 2); RMSNorm weights
1 + 0.1 N(0, 1); token_embd ~ N(0, 0.1) stored F16; output ~ N(0, 8 / sqrt(256)) stored F16
(as make_tiny_qwen35.py, for a spread of logits); everything else F32.

Vocabulary: a small byte-level BPE (tokenizer.ggml.model gpt2, pre "deepseek-llm" as
DeepSeek-V2-Lite's): the 256 byte symbols in GPT-2's byte-to-unicode order, then the results
of up to 200 merges learned (deterministically, tools/tokenizer/tiny_bpe.py) from the short
text below (it runs out after 164: 422 tokens in all), then <｜begin▁of▁sentence｜> (BOS) and <｜end▁of▁sentence｜> (EOS, PAD), both control;
add_bos_token true.
"""

import argparse
import collections
import os
import re
import sys

import numpy as np
import gguf

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tokenizer"))
from tiny_bpe import gpt2_bytes, learn_merges  # noqa: E402

SEED = 2702
N_EMBD, N_LAYER, N_DENSE = 256, 3, 1
N_HEAD, NOPE, ROPE, V_DIM, KV_LORA = 4, 32, 32, 32, 64
N_FF, N_FF_EXP, N_SHARED = 128, 32, 2
N_EXPERT, N_USED, N_GROUPS, N_GROUPS_USED = 16, 4, 4, 2
YARN_FACTOR, YARN_ORIG_CTX, YARN_LOG_MUL = 4.0, 16, 0.0707
N_MERGES = 200
CORPUS = (
    "The model reads the file and returns the tokens of the text. A new list holds the items "
    "in the order of the sequence; the function adds each item to the list. Small models "
    "are fast, and the tests run them in a second. "
    "def main():\n    return 0\n"
    "for item in items:\n    print(item)\n"
    "if a > b:\n    return a\nelse:\n    return b\n"
    "The cat sat on the mat. We went to the caf\u00e9 and had a coffee. "
    "User: What is the time?\n\nAssistant: It is 12 o'clock.\n"
)
BOS, EOS = "<\uff5cbegin\u2581of\u2581sentence\uff5c>", "<\uff5cend\u2581of\u2581sentence\uff5c>"


def vocab():
    b2u = gpt2_bytes()
    tokens = [b2u[b] for b in sorted(b2u, key=lambda b: ord(b2u[b]))]
    words = collections.Counter(
        tuple(b2u[b] for b in w.encode("utf-8"))
        for w in re.findall(r"[\r\n]|\s?[^\W\d_]+|\s?[!-/:-~]+|\s+$|\d+|\s+", CORPUS))
    merges = learn_merges(words, N_MERGES)
    tokens += [a + b for a, b in merges]
    types = [1] * len(tokens)
    for text in (BOS, EOS):
        tokens.append(text)
        types.append(3)
    return tokens, types, [a + " " + b for a, b in merges]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("out")
    args = ap.parse_args()
    rng = np.random.default_rng(SEED)
    tokens, types, merges = vocab()
    n_vocab = len(tokens)

    def mat(n_out, n_in, scale=1.0):  # numpy shape [n_out, n_in] = ggml [n_in, n_out]
        return (rng.standard_normal((n_out, n_in)) * scale / np.sqrt(n_in)).astype(np.float32)

    def norm(n):
        return (1.0 + 0.1 * rng.standard_normal(n)).astype(np.float32)

    def experts(n_out, n_in):  # numpy [n_expert, n_out, n_in] = ggml [n_in, n_out, n_expert]
        return np.stack([mat(n_out, n_in) for _ in range(N_EXPERT)])

    w = gguf.GGUFWriter(args.out, "deepseek2")
    w.add_name("tiny-deepseek2lite")
    w.add_file_type(0)
    w.add_context_length(4096)
    w.add_embedding_length(N_EMBD)
    w.add_block_count(N_LAYER)
    w.add_feed_forward_length(N_FF)
    w.add_head_count(N_HEAD)
    w.add_head_count_kv(N_HEAD)
    w.add_key_length(NOPE + ROPE)
    w.add_value_length(V_DIM)
    w.add_layer_norm_rms_eps(1e-6)
    w.add_rope_dimension_count(ROPE)
    w.add_rope_freq_base(10000.0)
    w.add_rope_scaling_type(gguf.RopeScalingType.YARN)
    w.add_rope_scaling_factor(YARN_FACTOR)
    w.add_rope_scaling_orig_ctx_len(YARN_ORIG_CTX)
    w.add_rope_scaling_yarn_log_mul(YARN_LOG_MUL)
    w.add_leading_dense_block_count(N_DENSE)
    w.add_q_lora_rank(0)
    w.add_kv_lora_rank(KV_LORA)
    w.add_expert_feed_forward_length(N_FF_EXP)
    w.add_expert_count(N_EXPERT)
    w.add_expert_used_count(N_USED)
    w.add_expert_shared_count(N_SHARED)
    w.add_expert_weights_scale(1.0)
    w.add_expert_weights_norm(False)
    w.add_expert_gating_func(gguf.ExpertGatingFuncType.SOFTMAX)
    w.add_expert_group_count(N_GROUPS)
    w.add_expert_group_used_count(N_GROUPS_USED)
    w.add_vocab_size(n_vocab)
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre("deepseek-llm")
    w.add_token_list(tokens)
    w.add_token_types(types)
    w.add_token_merges(merges)
    w.add_bos_token_id(tokens.index(BOS))
    w.add_eos_token_id(tokens.index(EOS))
    w.add_pad_token_id(tokens.index(EOS))
    w.add_add_bos_token(True)
    w.add_add_eos_token(False)

    w.add_tensor("token_embd.weight",
                 (0.1 * rng.standard_normal((n_vocab, N_EMBD))).astype(np.float16))
    w.add_tensor("output_norm.weight", norm(N_EMBD))
    w.add_tensor("output.weight",
                 (8.0 / np.sqrt(N_EMBD) * rng.standard_normal((n_vocab, N_EMBD))).astype(np.float16))
    for il in range(N_LAYER):
        p = f"blk.{il}."
        w.add_tensor(p + "attn_norm.weight", norm(N_EMBD))
        w.add_tensor(p + "attn_q.weight", mat(N_HEAD * (NOPE + ROPE), N_EMBD))
        w.add_tensor(p + "attn_kv_a_mqa.weight", mat(KV_LORA + ROPE, N_EMBD))
        w.add_tensor(p + "attn_kv_a_norm.weight", norm(KV_LORA))
        w.add_tensor(p + "attn_kv_b.weight", mat(N_HEAD * (NOPE + V_DIM), KV_LORA))
        w.add_tensor(p + "attn_output.weight", mat(N_EMBD, N_HEAD * V_DIM))
        w.add_tensor(p + "ffn_norm.weight", norm(N_EMBD))
        if il < N_DENSE:
            w.add_tensor(p + "ffn_gate.weight", mat(N_FF, N_EMBD))
            w.add_tensor(p + "ffn_up.weight", mat(N_FF, N_EMBD))
            w.add_tensor(p + "ffn_down.weight", mat(N_EMBD, N_FF))
        else:
            w.add_tensor(p + "ffn_gate_inp.weight", mat(N_EXPERT, N_EMBD, 2.0))
            w.add_tensor(p + "ffn_gate_exps.weight", experts(N_FF_EXP, N_EMBD))
            w.add_tensor(p + "ffn_up_exps.weight", experts(N_FF_EXP, N_EMBD))
            w.add_tensor(p + "ffn_down_exps.weight", experts(N_EMBD, N_FF_EXP))
            w.add_tensor(p + "ffn_gate_shexp.weight", mat(N_FF_EXP * N_SHARED, N_EMBD))
            w.add_tensor(p + "ffn_up_shexp.weight", mat(N_FF_EXP * N_SHARED, N_EMBD))
            w.add_tensor(p + "ffn_down_shexp.weight", mat(N_EMBD, N_FF_EXP * N_SHARED))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


if __name__ == "__main__":
    main()
