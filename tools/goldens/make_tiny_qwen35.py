"""make_tiny_qwen35.py - tiny random-weight qwen35moe and qwen3next GGUFs for moeinf's tests.

Usage: python3 tools/goldens/make_tiny_qwen35.py --arch qwen35moe|qwen3next OUT.gguf
Needs numpy and the `gguf` package (PyPI, 0.19.0). The file is deterministic (numpy seed 3535
for qwen35moe, 3580 for qwen3next).

Both are hybrid models: 4 layers, layers 0-2 Gated DeltaNet (linear attention), layer 3 full
attention (full_attention_interval 4), n_embd 256 (so that Q4_K_M gives the n_embd-wide rows
K-quants), every layer a MoE with a shared expert behind a sigmoid gate.
  - linear layers: 2 key heads, 4 value heads (n_v_heads > n_k_heads, so the head mapping is
    exercised: qwen35moe tiles the key heads over the value heads, qwen3next repeats each),
    head dim 32 (ssm.state_size), conv kernel 4; ssm_a = -exp(A_log) with A_log ~ U(-1, 0.5),
    ssm_dt.bias ~ -1 + 0.2 N(0, 1) (a decay exp(softplus(.) * ssm_a) of about 0.3-0.9 per
    token), conv1d weights ~ N(0, 1/sqrt(4)).
    qwen35moe: attn_qkv, attn_gate, ssm_beta, ssm_alpha; qwen3next: attn_qkv, attn_gate and the
    fused ssm_ba.
  - full attention: 4 query heads, 2 KV heads, head_dim 64 (key_length, not n_embd / n_head),
    attn_q giving query and output gate per head, per-head q/k RMSNorm, partial RoPE over
    rope.dimension_count 16 of 64 (base 1e7); qwen35moe: IMRoPE with rope.dimension_sections
    [3, 3, 2, 0] (for text, NEOX rotation of the first 16 dims), qwen3next: NEOX.
  - MoE: qwen35moe 8 experts top-2, qwen3next 10 experts top-4; expert width 32, shared
    expert width 64; softmax router, top-k renormalised (llama.cpp always does for these).

Weights as make_tiny_qwen3moe.py draws them: matrices ~ N(0, 1/sqrt(fan_in)) with the router
x2, RMSNorm weights 1 + 0.1 N(0, 1) (q/k and ssm_norm too), token_embd ~ N(0, 0.1) stored F16,
an untied output.weight ~ N(0, 8/sqrt(n_embd)) stored F16; everything else F32.

Vocabulary: a small byte-level BPE ("gpt2", as Qwen's): the 256 byte symbols in GPT-2's
byte-to-unicode order, then the results of the merges learned (deterministically) from the
short text below, then <|endoftext|>, <|im_start|>, <|im_end|> (control) and <think>,
</think> (user-defined). Pre-tokenizer "qwen35" for qwen35moe and "qwen2" for qwen3next, as
llama.cpp's converter names them for real files; no BOS added, EOS <|im_end|>.
"""

import argparse
import collections
import re

import os
import sys

import numpy as np
import gguf

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tokenizer"))
from tiny_bpe import gpt2_bytes, learn_merges  # noqa: E402

N_EMBD, N_LAYER, INTERVAL = 256, 4, 4
N_HEAD, N_HEAD_KV, HEAD_DIM, N_ROT = 4, 2, 64, 16
N_K_HEADS, N_V_HEADS, SSM_HEAD_DIM, D_CONV = 2, 4, 32, 4
N_FF_EXP, N_FF_SHEXP = 32, 64
ARCHS = {  # seed, n_expert, n_expert_used, tokenizer pre
    "qwen35moe": (3535, 8, 2, "qwen35"),
    "qwen3next": (3580, 10, 4, "qwen2"),
}
N_MERGES = 200
CORPUS = (
    "The model reads the file and returns the tokens of the text. A new list holds the items "
    "in the order of the sequence; the function adds each item to the list. Small models "
    "are fast, and the tests run them in a second. "
    "def main():\n    return 0\n"
    "for item in items:\n    print(item)\n"
    "if a > b:\n    return a\nelse:\n    return b\n"
    "The cat sat on the mat. We went to the caf\u00e9 and had a coffee. "
    "<|im_start|>user\nWhat is the time?<|im_end|>\n<|im_start|>assistant\n<think>\n"
)
SPECIALS = [("<|endoftext|>", 3), ("<|im_start|>", 3), ("<|im_end|>", 3), ("<think>", 4),
            ("</think>", 4)]


def vocab():
    b2u = gpt2_bytes()
    tokens = [b2u[b] for b in sorted(b2u, key=lambda b: ord(b2u[b]))]
    words = collections.Counter(
        tuple(b2u[b] for b in w.encode("utf-8"))
        for w in re.findall(r"'s|'t|'re|'ve|'m|'ll|'d| ?[^\W\d_]+| ?\d| ?[^\s\w]+|\s+(?!\S)|\s+",
                            CORPUS))
    merges = learn_merges(words, N_MERGES)
    tokens += [a + b for a, b in merges]
    types = [1] * len(tokens)
    for text, ty in SPECIALS:
        tokens.append(text)
        types.append(ty)
    return tokens, types, [a + " " + b for a, b in merges]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--arch", required=True, choices=sorted(ARCHS))
    ap.add_argument("out")
    args = ap.parse_args()
    arch = args.arch
    seed, n_expert, n_used, pre = ARCHS[arch]
    rng = np.random.default_rng(seed)
    tokens, types, merges = vocab()
    n_vocab = len(tokens)
    key_dim, value_dim = N_K_HEADS * SSM_HEAD_DIM, N_V_HEADS * SSM_HEAD_DIM
    conv_dim = 2 * key_dim + value_dim

    def mat(n_out, n_in, scale=1.0):  # numpy shape [n_out, n_in] = ggml [n_in, n_out]
        return (rng.standard_normal((n_out, n_in)) * scale / np.sqrt(n_in)).astype(np.float32)

    def norm(n):
        return (1.0 + 0.1 * rng.standard_normal(n)).astype(np.float32)

    w = gguf.GGUFWriter(args.out, arch)
    w.add_name("tiny-" + arch)
    w.add_file_type(0)
    w.add_context_length(4096)
    w.add_embedding_length(N_EMBD)
    w.add_block_count(N_LAYER)
    w.add_feed_forward_length(N_FF_EXP * n_used)
    w.add_head_count(N_HEAD)
    w.add_head_count_kv(N_HEAD_KV)
    w.add_key_length(HEAD_DIM)
    w.add_value_length(HEAD_DIM)
    w.add_rope_dimension_count(N_ROT)
    if arch == "qwen35moe":
        w.add_rope_dimension_sections([3, 3, 2, 0])
    w.add_rope_freq_base(1e7)
    w.add_layer_norm_rms_eps(1e-6)
    w.add_expert_count(n_expert)
    w.add_expert_used_count(n_used)
    w.add_expert_feed_forward_length(N_FF_EXP)
    w.add_expert_shared_feed_forward_length(N_FF_SHEXP)
    w.add_ssm_conv_kernel(D_CONV)
    w.add_ssm_state_size(SSM_HEAD_DIM)
    w.add_ssm_group_count(N_K_HEADS)
    w.add_ssm_time_step_rank(N_V_HEADS)
    w.add_ssm_inner_size(value_dim)
    w.add_full_attention_interval(INTERVAL)
    w.add_vocab_size(n_vocab)
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre(pre)
    w.add_token_list(tokens)
    w.add_token_types(types)
    w.add_token_merges(merges)
    special = {t: i for i, t in enumerate(tokens) if i >= n_vocab - len(SPECIALS)}
    w.add_bos_token_id(special["<|endoftext|>"])
    w.add_eos_token_id(special["<|im_end|>"])
    w.add_pad_token_id(special["<|endoftext|>"])
    w.add_add_bos_token(False)

    w.add_tensor("token_embd.weight",
                 (0.1 * rng.standard_normal((n_vocab, N_EMBD))).astype(np.float16))
    w.add_tensor("output_norm.weight", norm(N_EMBD))
    w.add_tensor("output.weight",
                 (8.0 / np.sqrt(N_EMBD) * rng.standard_normal((n_vocab, N_EMBD))).astype(np.float16))
    for il in range(N_LAYER):
        p = f"blk.{il}."
        w.add_tensor(p + "attn_norm.weight", norm(N_EMBD))
        w.add_tensor(p + "post_attention_norm.weight", norm(N_EMBD))
        if (il + 1) % INTERVAL == 0:  # full attention
            w.add_tensor(p + "attn_q.weight", mat(2 * N_HEAD * HEAD_DIM, N_EMBD))  # [q, gate] per head
            w.add_tensor(p + "attn_k.weight", mat(N_HEAD_KV * HEAD_DIM, N_EMBD))
            w.add_tensor(p + "attn_v.weight", mat(N_HEAD_KV * HEAD_DIM, N_EMBD))
            w.add_tensor(p + "attn_output.weight", mat(N_EMBD, N_HEAD * HEAD_DIM))
            w.add_tensor(p + "attn_q_norm.weight", norm(HEAD_DIM))
            w.add_tensor(p + "attn_k_norm.weight", norm(HEAD_DIM))
        else:  # Gated DeltaNet
            w.add_tensor(p + "attn_qkv.weight", mat(conv_dim, N_EMBD))
            w.add_tensor(p + "attn_gate.weight", mat(value_dim, N_EMBD))
            if arch == "qwen35moe":
                w.add_tensor(p + "ssm_beta.weight", mat(N_V_HEADS, N_EMBD))
                w.add_tensor(p + "ssm_alpha.weight", mat(N_V_HEADS, N_EMBD))
            else:  # per key head: [beta x ratio, alpha x ratio]
                w.add_tensor(p + "ssm_ba.weight", mat(2 * N_V_HEADS, N_EMBD))
            # numpy [conv_dim, d_conv] = ggml [d_conv, conv_dim]
            w.add_tensor(p + "ssm_conv1d.weight",
                         (rng.standard_normal((conv_dim, D_CONV)) / np.sqrt(D_CONV)).astype(np.float32))
            w.add_tensor(p + "ssm_dt.bias", (-1.0 + 0.2 * rng.standard_normal(N_V_HEADS)).astype(np.float32))
            w.add_tensor(p + "ssm_a", (-np.exp(rng.uniform(-1.0, 0.5, N_V_HEADS))).astype(np.float32))
            w.add_tensor(p + "ssm_norm.weight", norm(SSM_HEAD_DIM))
            w.add_tensor(p + "ssm_out.weight", mat(N_EMBD, value_dim))
        w.add_tensor(p + "ffn_gate_inp.weight", mat(n_expert, N_EMBD, 2.0))
        # numpy [n_expert, n_out, n_in] = ggml [n_in, n_out, n_expert]
        w.add_tensor(p + "ffn_gate_exps.weight", np.stack([mat(N_FF_EXP, N_EMBD) for _ in range(n_expert)]))
        w.add_tensor(p + "ffn_up_exps.weight", np.stack([mat(N_FF_EXP, N_EMBD) for _ in range(n_expert)]))
        w.add_tensor(p + "ffn_down_exps.weight", np.stack([mat(N_EMBD, N_FF_EXP) for _ in range(n_expert)]))
        w.add_tensor(p + "ffn_gate_inp_shexp.weight", mat(1, N_EMBD)[0])  # ggml [n_embd]
        w.add_tensor(p + "ffn_gate_shexp.weight", mat(N_FF_SHEXP, N_EMBD))
        w.add_tensor(p + "ffn_up_shexp.weight", mat(N_FF_SHEXP, N_EMBD))
        w.add_tensor(p + "ffn_down_shexp.weight", mat(N_EMBD, N_FF_SHEXP))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


if __name__ == "__main__":
    main()
