"""make_tiny_gptoss.py - a tiny random-weight gpt-oss GGUF (F32) and its MXFP4 quantization.

Usage: python3 tools/goldens/make_tiny_gptoss.py F32_OUT.gguf [MXFP4_OUT.gguf]
Needs numpy, the `gguf` package (PyPI, 0.19.0) and, for the second file, llama-cpp-python
(0.3.36). The F32 file is deterministic (numpy seed 2026); the second is llama.cpp's own
quantizer (llama_model_quantize, ftype MOSTLY_MXFP4_MOE) run on it with overrides that keep
every non-expert tensor F32 (without them MXFP4_MOE makes token_embd, output, attn_q/k/v/output
Q8_0; ffn_gate_inp, norms, sinks and biases stay F32 in any case). The experts
(ffn_gate_exps, ffn_up_exps, ffn_down_exps .weight) become MXFP4.

Architecture "gpt-oss" as llama.cpp 0.3.36 loads it (src/models/openai-moe.cpp):
  4 layers, n_embd 96 (3 MXFP4 blocks per row), 4 query heads and 2 KV heads of head_dim 64
  (n_head * head_dim = 256 != n_embd, as in the real models), 8 experts, top 4, expert width
  64; layers 0 and 2 slide (window 16), layers 1 and 3 attend to everything (llama.cpp's
  default pattern 2: layer il slides iff il % 2 == 0; no sliding_window_pattern key written).

Metadata written (prefix "gpt-oss."), exactly:
  context_length 131072, embedding_length 96, block_count 4, feed_forward_length 64,
  expert_feed_forward_length 64, attention.head_count 4, attention.head_count_kv 2,
  attention.key_length 64, attention.value_length 64, attention.layer_norm_rms_epsilon 1e-5,
  attention.sliding_window 16, rope.freq_base 150000.0, rope.scaling.type "yarn",
  rope.scaling.factor 32.0, rope.scaling.original_context_length 4096,
  rope.scaling.yarn_beta_fast 32.0, rope.scaling.yarn_beta_slow 1.0, expert_count 8,
  expert_used_count 4; general.file_type 0 (F32 file; the quantizer writes 38).
  These are the real models' values for the rope (llama.cpp's converter writes the two beta
  keys from the HF config). llama.cpp 0.3.36 does NOT read yarn_beta_fast/slow, yarn_attn_factor
  or yarn_ext_factor for gpt-oss (only grok and mistral3 read them); it uses its defaults
  beta_fast 32, beta_slow 1, ext_factor 1 (type yarn), and attn_factor: the context's
  get_mscale(32) / (1 + 0.1 ln 32) = 1, times rope.scaling.attn_factor (not written: 1), which
  ggml's rope multiplies by 1 + 0.1 ln(32), so cos and sin are scaled by 1.3466 (q.k by 1.813).
  With head_dim 64, base 150000 and original context 4096 the YaRN ramp runs over dimension
  pairs 8..18 (pairs below 8 keep their frequency, pairs above 18 are divided by 32).
Tokenizer: "gpt2" with pre "gpt-4o"; 256 byte symbols (GPT-2's byte-to-unicode, in that
  order), then the results of N_MERGES merges learned from CORPUS (split with the gpt-4o
  pre-tokenizer pattern, harmony special tokens removed first), then the control tokens
  <|startoftext|> <|endoftext|> <|return|> <|constrain|> <|channel|> <|start|> <|end|>
  <|message|> <|call|> (o200k_harmony's order). BOS <|startoftext|>, EOS <|return|>, PAD
  <|endoftext|>, add_bos_token false. llama.cpp makes <|channel|> <|message|> <|start|>
  <|constrain|> USER_DEFINED at load and drops <|end|> from its end-of-generation set (since
  <|return|> and <|call|> exist).

Tensors (numpy shapes; ggml's are reversed): token_embd [V, 96], output_norm [96],
output [V, 96]; per layer blk.N.: attn_norm, post_attention_norm [96]; attn_q [256, 96] + bias
[256], attn_k, attn_v [128, 96] + bias [128], attn_output [96, 256] + bias [96], attn_sinks
[4], ffn_gate_inp [8, 96] + bias [8], ffn_gate_exps, ffn_up_exps [8, 64, 96] + bias [8, 64],
ffn_down_exps [8, 96, 64] + bias [8, 96].

Weights: matrices ~ s N(0, 1) / sqrt(fan_in) with s = 1 (attention, output layer 4), 2 (router),
3 (expert gate and up, so that a few per cent of the entries pass the SwiGLU clamp at 7 and the
up clamp at -7), 0.5 (expert down); biases ~ N(0, 0.5) (q/k/v/o, router, gate/up), N(0, 0.2)
(down); RMSNorm weights 1 + 0.1 N(0, 1); token_embd ~ N(0, 1); sinks ~ 1 + 1.5 N(0, 1) per head
(check_tiny_gptoss.py prints how much attention they take).
"""

import argparse
import collections
import ctypes

import os
import sys

import numpy as np
import gguf
import regex

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tokenizer"))
from tiny_bpe import gpt2_bytes, learn_merges  # noqa: E402

SEED = 2026
N_EMBD, N_LAYER = 96, 4
N_HEAD, N_HEAD_KV, HEAD_DIM = 4, 2, 64
N_EXPERT, N_USED, N_FF_EXP = 8, 4, 64
N_SWA = 16
N_CTX_TRAIN, ROPE_BASE, YARN_FACTOR, YARN_ORIG_CTX = 131072, 150000.0, 32.0, 4096
RMS_EPS = 1e-5
N_MERGES = 240
# gpt-4o's pattern as its tokenizer.json writes it (llama.cpp's comment in llama-vocab.cpp)
GPT4O_PAT = (r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?"
             r"|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?"
             r"|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+")
SPECIALS = ["<|startoftext|>", "<|endoftext|>", "<|return|>", "<|constrain|>", "<|channel|>",
            "<|start|>", "<|end|>", "<|message|>", "<|call|>"]
CORPUS = (
    "The model reads the file and returns the tokens of the text. A new list holds the items "
    "in the order of the sequence; the function adds each item to the list. Small models "
    "are fast, and the tests run them in a second. The window slides over the last sixteen "
    "tokens, and the sink takes what the keys do not. "
    "def main():\n    return 0\n"
    "for item in items:\n    print(item)\n"
    "if a > b:\n    return a\nelse:\n    return b\n"
    "It's 2026 and we've got 128 experts, 36 layers and 4096 positions. "
    "The cat sat on the mat. We went to the caf\u00e9 and had a coffee. "
    "<|start|>system<|message|>You are ChatGPT, a large language model.\n"
    "Reasoning: medium\n\n# Valid channels: analysis, commentary, final.<|end|>"
    "<|start|>developer<|message|># Instructions\n\nAnswer briefly.<|end|>"
    "<|start|>user<|message|>What is the time?<|end|>"
    "<|start|>assistant<|channel|>analysis<|message|>The user asks for the time.<|end|>"
    "<|start|>assistant<|channel|>final<|message|>It is noon.<|return|>"
)


def vocab():
    b2u = gpt2_bytes()
    tokens = [b2u[b] for b in sorted(b2u, key=lambda b: ord(b2u[b]))]
    text = regex.sub("|".join(regex.escape(s) for s in SPECIALS), "\n", CORPUS)
    words = collections.Counter(tuple(b2u[b] for b in w.encode("utf-8"))
                                for w in regex.findall(GPT4O_PAT, text))
    merges = learn_merges(words, N_MERGES)
    tokens += [a + b for a, b in merges]
    if len(set(tokens)) != len(tokens):
        raise RuntimeError("a merge produced a token twice")
    types = [1] * len(tokens) + [3] * len(SPECIALS)
    return tokens + SPECIALS, types, [a + " " + b for a, b in merges]


def write_f32(path):
    rng = np.random.default_rng(SEED)
    tokens, types, merges = vocab()
    n_vocab = len(tokens)
    q_dim, kv_dim = N_HEAD * HEAD_DIM, N_HEAD_KV * HEAD_DIM

    def mat(n_out, n_in, scale=1.0):  # numpy shape [n_out, n_in] = ggml [n_in, n_out]
        return (rng.standard_normal((n_out, n_in)) * scale / np.sqrt(n_in)).astype(np.float32)

    def vec(shape, scale, mean=0.0):
        return (mean + scale * rng.standard_normal(shape)).astype(np.float32)

    def norm(n):
        return vec(n, 0.1, 1.0)

    w = gguf.GGUFWriter(path, "gpt-oss")
    w.add_name("tiny-gptoss")
    w.add_file_type(0)
    w.add_context_length(N_CTX_TRAIN)
    w.add_embedding_length(N_EMBD)
    w.add_block_count(N_LAYER)
    w.add_feed_forward_length(N_FF_EXP)
    w.add_expert_feed_forward_length(N_FF_EXP)
    w.add_head_count(N_HEAD)
    w.add_head_count_kv(N_HEAD_KV)
    w.add_key_length(HEAD_DIM)
    w.add_value_length(HEAD_DIM)
    w.add_layer_norm_rms_eps(RMS_EPS)
    w.add_sliding_window(N_SWA)
    w.add_rope_freq_base(ROPE_BASE)
    w.add_rope_scaling_type(gguf.RopeScalingType.YARN)
    w.add_rope_scaling_factor(YARN_FACTOR)
    w.add_rope_scaling_orig_ctx_len(YARN_ORIG_CTX)
    w.add_rope_scaling_yarn_beta_fast(32.0)
    w.add_rope_scaling_yarn_beta_slow(1.0)
    w.add_expert_count(N_EXPERT)
    w.add_expert_used_count(N_USED)
    w.add_vocab_size(n_vocab)
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre("gpt-4o")
    w.add_token_list(tokens)
    w.add_token_types(types)
    w.add_token_merges(merges)
    ids = {t: i for i, t in enumerate(tokens)}
    w.add_bos_token_id(ids["<|startoftext|>"])
    w.add_eos_token_id(ids["<|return|>"])
    w.add_pad_token_id(ids["<|endoftext|>"])
    w.add_add_bos_token(False)

    w.add_tensor("token_embd.weight", vec((n_vocab, N_EMBD), 1.0))
    w.add_tensor("output_norm.weight", norm(N_EMBD))
    w.add_tensor("output.weight", mat(n_vocab, N_EMBD, 4.0))
    for il in range(N_LAYER):
        p = f"blk.{il}."
        w.add_tensor(p + "attn_norm.weight", norm(N_EMBD))
        w.add_tensor(p + "post_attention_norm.weight", norm(N_EMBD))
        w.add_tensor(p + "attn_q.weight", mat(q_dim, N_EMBD))
        w.add_tensor(p + "attn_q.bias", vec(q_dim, 0.5))
        w.add_tensor(p + "attn_k.weight", mat(kv_dim, N_EMBD))
        w.add_tensor(p + "attn_k.bias", vec(kv_dim, 0.5))
        w.add_tensor(p + "attn_v.weight", mat(kv_dim, N_EMBD))
        w.add_tensor(p + "attn_v.bias", vec(kv_dim, 0.5))
        w.add_tensor(p + "attn_output.weight", mat(N_EMBD, q_dim))
        w.add_tensor(p + "attn_output.bias", vec(N_EMBD, 0.5))
        w.add_tensor(p + "attn_sinks.weight", vec(N_HEAD, 1.5, 1.0))
        w.add_tensor(p + "ffn_gate_inp.weight", mat(N_EXPERT, N_EMBD, 2.0))
        w.add_tensor(p + "ffn_gate_inp.bias", vec(N_EXPERT, 0.5))
        # numpy [n_expert, n_out, n_in] = ggml [n_in, n_out, n_expert]
        w.add_tensor(p + "ffn_gate_exps.weight",
                     np.stack([mat(N_FF_EXP, N_EMBD, 3.0) for _ in range(N_EXPERT)]))
        w.add_tensor(p + "ffn_gate_exps.bias", vec((N_EXPERT, N_FF_EXP), 0.5))
        w.add_tensor(p + "ffn_up_exps.weight",
                     np.stack([mat(N_FF_EXP, N_EMBD, 3.0) for _ in range(N_EXPERT)]))
        w.add_tensor(p + "ffn_up_exps.bias", vec((N_EXPERT, N_FF_EXP), 0.5))
        w.add_tensor(p + "ffn_down_exps.weight",
                     np.stack([mat(N_EMBD, N_FF_EXP, 0.5) for _ in range(N_EXPERT)]))
        w.add_tensor(p + "ffn_down_exps.bias", vec((N_EXPERT, N_EMBD), 0.2))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def quantize_mxfp4(src, dst):
    import llama_cpp.llama_cpp as L

    keep = [b"^token_embd\\.weight$", b"^output\\.weight$",
            b"\\.attn_(q|k|v|output)\\.weight$"]
    ov = (L.llama_model_tensor_override * (len(keep) + 1))()
    for i, pat in enumerate(keep):
        ov[i].pattern = pat
        ov[i].type = 0  # GGML_TYPE_F32
    ov[len(keep)].pattern = None
    p = L.llama_model_quantize_default_params()
    p.ftype = L.LLAMA_FTYPE_MOSTLY_MXFP4_MOE
    p.nthread = 2
    p.token_embedding_type = 0
    p.output_tensor_type = 0
    p.tt_overrides = ctypes.cast(ov, type(p.tt_overrides))
    rc = L.llama_model_quantize(src.encode(), dst.encode(), p)
    if rc != 0:
        raise SystemExit(f"llama_model_quantize failed ({rc})")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("f32_out")
    ap.add_argument("mxfp4_out", nargs="?")
    args = ap.parse_args()
    write_f32(args.f32_out)
    if args.mxfp4_out:
        quantize_mxfp4(args.f32_out, args.mxfp4_out)


if __name__ == "__main__":
    main()
