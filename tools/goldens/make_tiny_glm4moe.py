"""make_tiny_glm4moe.py - a tiny random-weight glm4moe GGUF (GLM-4.5's layout) for moeinf's tests.

Usage: python3 tools/goldens/make_tiny_glm4moe.py OUT.gguf
Needs numpy and the `gguf` package (PyPI, 0.19.0). The file is deterministic (numpy seed 4545).

As llama.cpp 0.3.36 loads it (src/models/glm4-moe.cpp):
  - block_count 4 with nextn_predict_layers 1: the model's layers are 0-2; layer 3 is a
    complete next-token-prediction (MTP) block at the end (its attention, norms and MoE
    tensors like any MoE layer, plus blk.3.nextn.eh_proj [256, 512], nextn.enorm,
    nextn.hnorm, nextn.shared_head_norm [256]; no nextn.embed_tokens or shared_head_head,
    which are optional), which llama.cpp leaves unloaded for generation.
  - attention: 4 query heads, 2 KV heads, head_dim 32 (attention.key_length =
    value_length = 32, n_head * head_dim = 128, not n_embd), attn_q/k/v with biases,
    per-head RMSNorm attn_q_norm / attn_k_norm [32] (GLM-4.5's use_qk_norm), partial RoPE:
    rope.dimension_count 16 = head_dim / 2 (as GLM-4.5's partial_rotary_factor 0.5), NEOX
    (the first 16 dims of each head rotate as 8 pairs (i, i + 8); the other 16 do not),
    base 1e6; scale 1/sqrt(32). post_attention_norm is the norm before the FFN.
  - leading_dense_block_count 1: layer 0 a dense SwiGLU FFN of feed_forward_length 128;
    layers 1-2 (and the MTP block) MoE: 16 experts of width 16 (expert_feed_forward_length),
    top 4, sigmoid gating (expert_gating_func 2) with the selection bias exp_probs_b.bias
    [16], expert_weights_norm true, expert_weights_scale 2.5; one shared expert
    (expert_shared_count 1: an FFN of width 16, ffn_*_shexp), added without a gate.
n_embd 256 (so that Q4_K_M gives the n_embd-wide rows K-quants); context_length 4096.

Tensors (numpy shapes; ggml's are reversed): token_embd [V, 256] F16, output_norm [256],
output [V, 256] F16 (untied); per layer blk.N.: attn_norm, post_attention_norm [256],
attn_q [128, 256] + bias [128], attn_k, attn_v [64, 256] + bias [64], attn_output [256, 128],
attn_q_norm, attn_k_norm [32]; layer 0: ffn_gate, ffn_up [128, 256], ffn_down [256, 128];
layers 1-3: ffn_gate_inp [16, 256], exp_probs_b.bias [16], ffn_gate_exps, ffn_up_exps
[16, 16, 256], ffn_down_exps [16, 256, 16], ffn_gate_shexp, ffn_up_shexp [16, 256],
ffn_down_shexp [256, 16]; layer 3 also the nextn tensors above.

Weights: matrices ~ s N(0, 1) / sqrt(fan_in) with s = 1 (router 2); q/k/v biases ~ N(0, 0.5);
exp_probs_b ~ N(0, 0.3) (of the order of the spread of the sigmoid probabilities, so that the
bias changes some choices); RMSNorm weights 1 + 0.1 N(0, 1) (q/k norms too); token_embd
~ N(0, 0.1) stored F16; output ~ N(0, 8 / sqrt(256)) stored F16 (as make_tiny_qwen35.py,
for a spread of logits); everything else F32.

Vocabulary: a small byte-level BPE (tokenizer.ggml.model gpt2, pre "glm4" as GLM-4.5's; llama.cpp
ignores the merges' order for whole words in the vocabulary with this pre-tokenizer): the 256
byte symbols in GPT-2's byte-to-unicode order, then the results of up to 200 merges learned
(deterministically, tools/tokenizer/tiny_bpe.py) from the short text below (159: 427 tokens in
all), then
<|endoftext|> [MASK] [gMASK] [sMASK] <sop> <eop> <|system|> <|user|> <|assistant|>
<|observation|> (control) and <think> </think> (user-defined), in GLM-4.5's order. No BOS
(llama.cpp drops it for glm4), EOS and PAD <|endoftext|>, EOT <|user|>, EOM <|observation|>.
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

SEED = 4545
N_EMBD, N_LAYER, N_NEXTN, N_DENSE = 256, 4, 1, 1
N_HEAD, N_HEAD_KV, HEAD_DIM, N_ROT = 4, 2, 32, 16
N_FF, N_FF_EXP, N_SHARED = 128, 16, 1
N_EXPERT, N_USED = 16, 4
N_MERGES = 200
CORPUS = (
    "The model reads the file and returns the tokens of the text. A new list holds the items "
    "in the order of the sequence; the function adds each item to the list. Small models "
    "are fast, and the tests run them in a second. "
    "def main():\n    return 0\n"
    "for item in items:\n    print(item)\n"
    "if a > b:\n    return a\nelse:\n    return b\n"
    "The cat sat on the mat. We went to the caf\u00e9 and had a coffee. "
    "<|user|>\nWhat is the time?<|assistant|>\n<think>The user asks.</think>\nIt is 12.\n"
)
SPECIALS = [("<|endoftext|>", 3), ("[MASK]", 3), ("[gMASK]", 3), ("[sMASK]", 3), ("<sop>", 3),
            ("<eop>", 3), ("<|system|>", 3), ("<|user|>", 3), ("<|assistant|>", 3),
            ("<|observation|>", 3), ("<think>", 4), ("</think>", 4)]


def vocab():
    b2u = gpt2_bytes()
    tokens = [b2u[b] for b in sorted(b2u, key=lambda b: ord(b2u[b]))]
    text = CORPUS
    for s, _ in SPECIALS:
        text = text.replace(s, " ")
    words = collections.Counter(
        tuple(b2u[b] for b in w.encode("utf-8"))
        for w in re.findall(r"'s|'t|'re|'ve|'m|'ll|'d|[^\r\n\w]?[^\W\d_]+|\d{1,3}| ?[^\s\w]+[\r\n]*"
                            r"|\s*[\r\n]+|\s+(?!\S)|\s+", text))
    merges = learn_merges(words, N_MERGES)
    tokens += [a + b for a, b in merges]
    types = [1] * len(tokens)
    for s, ty in SPECIALS:
        tokens.append(s)
        types.append(ty)
    return tokens, types, [a + " " + b for a, b in merges]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("out")
    args = ap.parse_args()
    rng = np.random.default_rng(SEED)
    tokens, types, merges = vocab()
    n_vocab = len(tokens)
    q_dim, kv_dim = N_HEAD * HEAD_DIM, N_HEAD_KV * HEAD_DIM

    def mat(n_out, n_in, scale=1.0):  # numpy shape [n_out, n_in] = ggml [n_in, n_out]
        return (rng.standard_normal((n_out, n_in)) * scale / np.sqrt(n_in)).astype(np.float32)

    def vec(n, scale, mean=0.0):
        return (mean + scale * rng.standard_normal(n)).astype(np.float32)

    def norm(n):
        return vec(n, 0.1, 1.0)

    def experts(n_out, n_in):  # numpy [n_expert, n_out, n_in] = ggml [n_in, n_out, n_expert]
        return np.stack([mat(n_out, n_in) for _ in range(N_EXPERT)])

    w = gguf.GGUFWriter(args.out, "glm4moe")
    w.add_name("tiny-glm4moe")
    w.add_file_type(0)
    w.add_context_length(4096)
    w.add_embedding_length(N_EMBD)
    w.add_block_count(N_LAYER)
    w.add_nextn_predict_layers(N_NEXTN)
    w.add_feed_forward_length(N_FF)
    w.add_head_count(N_HEAD)
    w.add_head_count_kv(N_HEAD_KV)
    w.add_key_length(HEAD_DIM)
    w.add_value_length(HEAD_DIM)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_rope_dimension_count(N_ROT)
    w.add_rope_freq_base(1e6)
    w.add_leading_dense_block_count(N_DENSE)
    w.add_expert_feed_forward_length(N_FF_EXP)
    w.add_expert_count(N_EXPERT)
    w.add_expert_used_count(N_USED)
    w.add_expert_shared_count(N_SHARED)
    w.add_expert_weights_scale(2.5)
    w.add_expert_weights_norm(True)
    w.add_expert_gating_func(gguf.ExpertGatingFuncType.SIGMOID)
    w.add_vocab_size(n_vocab)
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre("glm4")
    w.add_token_list(tokens)
    w.add_token_types(types)
    w.add_token_merges(merges)
    ids = {t: i for i, t in enumerate(tokens)}
    w.add_eos_token_id(ids["<|endoftext|>"])
    w.add_pad_token_id(ids["<|endoftext|>"])
    w.add_eot_token_id(ids["<|user|>"])
    w.add_eom_token_id(ids["<|observation|>"])

    w.add_tensor("token_embd.weight",
                 (0.1 * rng.standard_normal((n_vocab, N_EMBD))).astype(np.float16))
    w.add_tensor("output_norm.weight", norm(N_EMBD))
    w.add_tensor("output.weight",
                 (8.0 / np.sqrt(N_EMBD) * rng.standard_normal((n_vocab, N_EMBD))).astype(np.float16))
    for il in range(N_LAYER):
        p = f"blk.{il}."
        w.add_tensor(p + "attn_norm.weight", norm(N_EMBD))
        w.add_tensor(p + "attn_q.weight", mat(q_dim, N_EMBD))
        w.add_tensor(p + "attn_q.bias", vec(q_dim, 0.5))
        w.add_tensor(p + "attn_k.weight", mat(kv_dim, N_EMBD))
        w.add_tensor(p + "attn_k.bias", vec(kv_dim, 0.5))
        w.add_tensor(p + "attn_v.weight", mat(kv_dim, N_EMBD))
        w.add_tensor(p + "attn_v.bias", vec(kv_dim, 0.5))
        w.add_tensor(p + "attn_output.weight", mat(N_EMBD, q_dim))
        w.add_tensor(p + "attn_q_norm.weight", norm(HEAD_DIM))
        w.add_tensor(p + "attn_k_norm.weight", norm(HEAD_DIM))
        w.add_tensor(p + "post_attention_norm.weight", norm(N_EMBD))
        if il < N_DENSE:
            w.add_tensor(p + "ffn_gate.weight", mat(N_FF, N_EMBD))
            w.add_tensor(p + "ffn_up.weight", mat(N_FF, N_EMBD))
            w.add_tensor(p + "ffn_down.weight", mat(N_EMBD, N_FF))
        else:
            w.add_tensor(p + "ffn_gate_inp.weight", mat(N_EXPERT, N_EMBD, 2.0))
            w.add_tensor(p + "exp_probs_b.bias", vec(N_EXPERT, 0.3))
            w.add_tensor(p + "ffn_gate_exps.weight", experts(N_FF_EXP, N_EMBD))
            w.add_tensor(p + "ffn_up_exps.weight", experts(N_FF_EXP, N_EMBD))
            w.add_tensor(p + "ffn_down_exps.weight", experts(N_EMBD, N_FF_EXP))
            w.add_tensor(p + "ffn_gate_shexp.weight", mat(N_FF_EXP * N_SHARED, N_EMBD))
            w.add_tensor(p + "ffn_up_shexp.weight", mat(N_FF_EXP * N_SHARED, N_EMBD))
            w.add_tensor(p + "ffn_down_shexp.weight", mat(N_EMBD, N_FF_EXP * N_SHARED))
        if il >= N_LAYER - N_NEXTN:
            w.add_tensor(p + "nextn.eh_proj.weight", mat(N_EMBD, 2 * N_EMBD))
            w.add_tensor(p + "nextn.enorm.weight", norm(N_EMBD))
            w.add_tensor(p + "nextn.hnorm.weight", norm(N_EMBD))
            w.add_tensor(p + "nextn.shared_head_norm.weight", norm(N_EMBD))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


if __name__ == "__main__":
    main()
