"""make_thinking_qwen3moe.py - a tiny qwen3moe GGUF that thinks by script, for the tests of
reasoning output (tests/test_serve_reasoning.c, tests/test_cli_chat.c).

Usage: python3 tools/goldens/make_thinking_qwen3moe.py OUT.gguf
Needs numpy and the `gguf` package (PyPI). No randomness: the file is the same every time.

Every layer's output is zero (attention output and expert matrices are zero), so the hidden
state at a position is its token's embedding and the next token depends on the current one
only. Each token of the script below has an embedding dimension of its own, every other token
shares dimension 0, and output.weight maps each dimension to the next token of the script with
a margin of about 57 in the logits; so after any prompt the model writes, greedy or sampled,

    <think> hmm, ok</think>  Hello</s>

("<think>" and "</think>" are user-defined tokens, shown as text). Geometry as
make_tiny_qwen3moe.py's, cut to 1 layer and 4 experts (top-2); the small SentencePiece
vocabulary is that file's with the script's tokens added.
"""

import sys

import numpy as np
import gguf

N_EMBD, N_LAYER, N_HEAD, N_HEAD_KV, HEAD_DIM = 32, 1, 4, 2, 16
N_EXPERT, N_USED, N_FF_EXP = 4, 2, 64
SCRIPT = ["<think>", "\u2581hmm,", "\u2581ok", "</think>", "\u2581\u2581", "Hello"]
MARGIN = 10.0  # times sqrt(n_embd) after the final RMSNorm of a one-hot embedding


def vocab():
    tokens, scores, types = ["<unk>", "<s>", "</s>"], [0.0, 0.0, 0.0], [2, 3, 3]
    for b in range(256):
        tokens.append(f"<0x{b:02X}>")
        scores.append(0.0)
        types.append(6)  # byte
    pieces = ["\u2581"] + [chr(c) for c in range(33, 127)]
    pieces += ["\u2581" + chr(c) for c in range(ord("a"), ord("z") + 1)]
    pieces += ["\u2581\u2581", "Hello", "\u2581Hello", "\u2581hmm,", "\u2581ok"]
    for p in pieces:
        if p in tokens:
            continue
        tokens.append(p)
        scores.append(-100.0 + 10.0 * len(p))  # longer pieces merge first
        types.append(1)
    for p in ["<think>", "</think>"]:
        tokens.append(p)
        scores.append(0.0)
        types.append(4)  # user-defined
    return tokens, scores, types


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    tokens, scores, types = vocab()
    n_vocab = len(tokens)
    n_q, n_kv = N_HEAD * HEAD_DIM, N_HEAD_KV * HEAD_DIM
    ids = [tokens.index(p) for p in SCRIPT]
    embd = np.zeros((n_vocab, N_EMBD), np.float32)
    embd[:, 0] = 1.0
    out = np.zeros((n_vocab, N_EMBD), np.float32)
    out[ids[0], 0] = MARGIN  # any other token: the script begins
    for k, t in enumerate(ids):
        embd[t, :] = 0.0
        embd[t, k + 1] = 1.0
        nxt = ids[k + 1] if k + 1 < len(ids) else 2  # then </s>
        out[nxt, k + 1] = MARGIN

    def zeros(*shape):
        return np.zeros(shape, np.float32)

    def ones(n):
        return np.ones(n, np.float32)

    w = gguf.GGUFWriter(sys.argv[1], "qwen3moe")
    w.add_name("thinking-qwen3moe")
    w.add_file_type(0)
    w.add_context_length(2048)
    w.add_embedding_length(N_EMBD)
    w.add_block_count(N_LAYER)
    w.add_head_count(N_HEAD)
    w.add_head_count_kv(N_HEAD_KV)
    w.add_key_length(HEAD_DIM)
    w.add_value_length(HEAD_DIM)
    w.add_rope_freq_base(1e6)
    w.add_layer_norm_rms_eps(1e-6)
    w.add_feed_forward_length(N_FF_EXP * N_USED)
    w.add_expert_feed_forward_length(N_FF_EXP)
    w.add_expert_count(N_EXPERT)
    w.add_expert_used_count(N_USED)
    w.add_vocab_size(n_vocab)
    w.add_tokenizer_model("llama")
    w.add_tokenizer_pre("default")
    w.add_token_list(tokens)
    w.add_token_scores(scores)
    w.add_token_types(types)
    w.add_unk_token_id(0)
    w.add_bos_token_id(1)
    w.add_eos_token_id(2)
    w.add_add_bos_token(True)
    w.add_add_eos_token(False)

    w.add_tensor("token_embd.weight", embd)
    w.add_tensor("output_norm.weight", ones(N_EMBD))
    w.add_tensor("output.weight", out)
    for il in range(N_LAYER):
        p = f"blk.{il}."
        w.add_tensor(p + "attn_norm.weight", ones(N_EMBD))
        w.add_tensor(p + "attn_q.weight", zeros(n_q, N_EMBD))
        w.add_tensor(p + "attn_k.weight", zeros(n_kv, N_EMBD))
        w.add_tensor(p + "attn_v.weight", zeros(n_kv, N_EMBD))
        w.add_tensor(p + "attn_output.weight", zeros(N_EMBD, n_q))
        w.add_tensor(p + "attn_q_norm.weight", ones(HEAD_DIM))
        w.add_tensor(p + "attn_k_norm.weight", ones(HEAD_DIM))
        w.add_tensor(p + "ffn_norm.weight", ones(N_EMBD))
        w.add_tensor(p + "ffn_gate_inp.weight", zeros(N_EXPERT, N_EMBD))
        w.add_tensor(p + "ffn_gate_exps.weight", zeros(N_EXPERT, N_FF_EXP, N_EMBD))
        w.add_tensor(p + "ffn_up_exps.weight", zeros(N_EXPERT, N_FF_EXP, N_EMBD))
        w.add_tensor(p + "ffn_down_exps.weight", zeros(N_EXPERT, N_EMBD, N_FF_EXP))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


if __name__ == "__main__":
    main()
