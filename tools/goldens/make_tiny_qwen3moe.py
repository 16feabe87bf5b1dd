"""make_tiny_qwen3moe.py - a tiny random-weight qwen3moe GGUF for moeinf's golden tests.

Usage: python3 tools/goldens/make_tiny_qwen3moe.py OUT.gguf [--vl | --minimax]
Needs numpy and the `gguf` package (PyPI). The file is deterministic (numpy seed 5678).

--vl writes the same weights as arch qwen3vlmoe (Qwen3-VL's text model): interleaved
multi-section RoPE over the whole head with rope.dimension_sections [4, 2, 2, 0], which leaves
pair 7 of 8 to the fourth section (position 0 for text: unrotated), as Qwen3-VL's [24, 20, 20,
0] leaves pairs 61 and 62 of 64; a RoPE base of 100 instead of 1e6, so that the unrotated pair
would have turned by up to 0.9 radians over the 49-token prompt (at 1e6 it turns by 3e-4 per
position, too little for a test to tell); and n_deepstack_layers 1 (no deepstack tensors: text
adds zeros).

--minimax writes arch minimax-m2 (MiniMax-M2's layout, llama.cpp's src/models/minimax-m2.cpp)
from the same stream: RMSNorm over the whole q and k projections (attn_q_norm [64],
attn_k_norm [32] instead of per head), partial RoPE (rope.dimension_count 8 of the heads' 16),
sigmoid routing (expert_gating_func 2) with a selection bias exp_probs_b.bias [16] ~ N(0, 0.3)
per layer, drawn after the layer's other tensors; llama.cpp renormalises the chosen weights
whatever the file says, and reads no expert_weights_scale for this architecture;
feed_forward_length is the experts' width, as MiniMax-M2's converter writes it.

Geometry: n_embd 32, 2 layers, 4 query heads / 2 KV heads with head_dim 16 (key_length is
given explicitly and differs from n_embd / n_head, as in Qwen3-30B-A3B), 16 experts, top-4,
expert width 64, per-head q/k RMSNorm, RoPE base 1e6, no shared expert.

Weights are drawn as ../shared/testdata/README.md section 1.6 says for the tiny models there:
matrices ~ N(0, 1/sqrt(fan_in)) with the router x2, RMSNorm weights 1 + 0.1 N(0, 1) (q/k norms
too), token_embd ~ N(0, 0.1) stored F16, an untied output.weight ~ N(0, 8/sqrt(n_embd)) stored
F16; everything else F32.

Vocabulary: a small SentencePiece ("llama") one, so that the file stays small and moeinf's
tokenizer can read its prompts: <unk>, <s>, </s>, the 256 byte tokens <0xNN>, then the
printable ASCII characters and "\u2581"-prefixed letters and a few words, scored so that
longer pieces win. BOS is added.
"""

import sys

import numpy as np
import gguf

SEED = 5678
N_EMBD, N_LAYER, N_HEAD, N_HEAD_KV, HEAD_DIM = 32, 2, 4, 2, 16
N_EXPERT, N_USED, N_FF_EXP = 16, 4, 64
WORDS = ["Hello", "world", "def", "add", "return", "the", "function", "list", "items", "new",
         "in", "of", "a", "b", "sequence", "Caf", "na", "ve"]


def vocab():
    tokens, scores, types = ["<unk>", "<s>", "</s>"], [0.0, 0.0, 0.0], [2, 3, 3]
    for b in range(256):
        tokens.append(f"<0x{b:02X}>")
        scores.append(0.0)
        types.append(6)  # byte
    pieces = ["\u2581"] + [chr(c) for c in range(33, 127)]
    pieces += ["\u2581" + chr(c) for c in range(ord("a"), ord("z") + 1)]
    pieces += ["\u2581" + chr(c) for c in range(ord("A"), ord("Z") + 1)]
    for w in WORDS:
        pieces += [w, "\u2581" + w]
    pieces += ["\u2581\u2581", "\u2581\u2581\u2581\u2581", "):", "(a", ", b"]
    seen = set()
    for p in pieces:
        if p in seen:
            continue
        seen.add(p)
        tokens.append(p)
        scores.append(-100.0 + 10.0 * len(p))  # longer pieces merge first
        types.append(1)
    return tokens, scores, types


def main():
    if len(sys.argv) not in (2, 3) or (len(sys.argv) == 3 and sys.argv[2] not in ("--vl", "--minimax")):
        sys.exit(__doc__)
    vl = sys.argv[2:] == ["--vl"]
    minimax = sys.argv[2:] == ["--minimax"]
    rng = np.random.default_rng(SEED)
    tokens, scores, types = vocab()
    n_vocab = len(tokens)
    n_q, n_kv = N_HEAD * HEAD_DIM, N_HEAD_KV * HEAD_DIM

    def mat(n_out, n_in, scale=1.0):  # numpy shape [n_out, n_in] = ggml [n_in, n_out]
        return (rng.standard_normal((n_out, n_in)) * scale / np.sqrt(n_in)).astype(np.float32)

    def norm(n):
        return (1.0 + 0.1 * rng.standard_normal(n)).astype(np.float32)

    arch = "qwen3vlmoe" if vl else "minimax-m2" if minimax else "qwen3moe"
    w = gguf.GGUFWriter(sys.argv[1], arch)
    w.add_name("tiny-" + arch)
    w.add_file_type(0)
    w.add_context_length(2048)
    w.add_embedding_length(N_EMBD)
    w.add_block_count(N_LAYER)
    w.add_head_count(N_HEAD)
    w.add_head_count_kv(N_HEAD_KV)
    w.add_key_length(HEAD_DIM)
    w.add_value_length(HEAD_DIM)
    w.add_rope_freq_base(100.0 if vl else 1e6)
    if vl:
        w.add_rope_dimension_count(HEAD_DIM)
        w.add_rope_dimension_sections([4, 2, 2, 0])
        w.add_num_deepstack_layers(1)
    if minimax:
        w.add_rope_dimension_count(HEAD_DIM // 2)
        w.add_expert_gating_func(gguf.ExpertGatingFuncType.SIGMOID)
    w.add_layer_norm_rms_eps(1e-6)
    # MiniMax-M2's converter writes intermediate_size, an expert's width, as both lengths
    w.add_feed_forward_length(N_FF_EXP if minimax else N_FF_EXP * N_USED)
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

    w.add_tensor("token_embd.weight",
                 (0.1 * rng.standard_normal((n_vocab, N_EMBD))).astype(np.float16))
    w.add_tensor("output_norm.weight", norm(N_EMBD))
    w.add_tensor("output.weight",
                 (8.0 / np.sqrt(N_EMBD) * rng.standard_normal((n_vocab, N_EMBD))).astype(np.float16))
    for il in range(N_LAYER):
        p = f"blk.{il}."
        w.add_tensor(p + "attn_norm.weight", norm(N_EMBD))
        w.add_tensor(p + "attn_q.weight", mat(n_q, N_EMBD))
        w.add_tensor(p + "attn_k.weight", mat(n_kv, N_EMBD))
        w.add_tensor(p + "attn_v.weight", mat(n_kv, N_EMBD))
        w.add_tensor(p + "attn_output.weight", mat(N_EMBD, n_q))
        w.add_tensor(p + "attn_q_norm.weight", norm(n_q if minimax else HEAD_DIM))
        w.add_tensor(p + "attn_k_norm.weight", norm(n_kv if minimax else HEAD_DIM))
        w.add_tensor(p + "ffn_norm.weight", norm(N_EMBD))
        w.add_tensor(p + "ffn_gate_inp.weight", mat(N_EXPERT, N_EMBD, 2.0))
        # numpy [n_expert, n_out, n_in] = ggml [n_in, n_out, n_expert]
        w.add_tensor(p + "ffn_gate_exps.weight", np.stack([mat(N_FF_EXP, N_EMBD) for _ in range(N_EXPERT)]))
        w.add_tensor(p + "ffn_up_exps.weight", np.stack([mat(N_FF_EXP, N_EMBD) for _ in range(N_EXPERT)]))
        w.add_tensor(p + "ffn_down_exps.weight", np.stack([mat(N_EMBD, N_FF_EXP) for _ in range(N_EXPERT)]))
        if minimax:
            w.add_tensor(p + "exp_probs_b.bias", (0.3 * rng.standard_normal(N_EXPERT)).astype(np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


if __name__ == "__main__":
    main()
