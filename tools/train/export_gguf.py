"""export_gguf.py - writes trained weights as a GGUF file that moeinf and llama.cpp load.

Arch `llama` with routed experts (Mixtral-style), a SentencePiece ("llama") vocabulary with
byte fallback, tied lm_head (no output.weight: token_embd serves both), and a ChatML chat
template. Types: "f32" keeps every tensor F32; "q8_0" stores every matrix Q8_0 and keeps the
norms and the router (ffn_gate_inp) F32, as llama-quantize does.

Shapes: GGUF lists dimensions innermost first, numpy outermost first, so a matrix that maps
n_in to n_out is a numpy array [n_out, n_in] here and ne = [n_in, n_out] in the file.
"""

import numpy as np
import gguf

# ChatML: <|im_start|>role\ncontent<|im_end|>\n per message, then the assistant's turn.
CHAT_TEMPLATE = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)

T = gguf.TokenType


def vocab_arrays(sp):
    """Pieces, scores and llama.cpp token types of a sentencepiece model, by id."""
    tokens, scores, types = [], [], []
    for i in range(sp.get_piece_size()):
        tokens.append(sp.id_to_piece(i).encode("utf-8"))
        scores.append(sp.get_score(i))
        if sp.is_unknown(i):
            types.append(T.UNKNOWN)
        elif sp.is_control(i):
            types.append(T.CONTROL)
        elif sp.is_unused(i):
            types.append(T.UNUSED)
        elif sp.is_byte(i):
            types.append(T.BYTE)
        else:
            types.append(T.NORMAL)
    return tokens, scores, types


def tensors(cfg, params):
    """(name, numpy array [n_out, n_in] or [n_expert, n_out, n_in] or [n]) in file order."""
    p = {k: np.asarray(v, np.float32) for k, v in params.items() if k != "layers"}
    yield "token_embd.weight", p["token_embd"]
    yield "output_norm.weight", p["output_norm"]
    for il, lp in enumerate(params["layers"]):
        lp = {k: np.asarray(v, np.float32) for k, v in lp.items()}
        b = f"blk.{il}."
        yield b + "attn_norm.weight", lp["attn_norm"]
        yield b + "attn_q.weight", lp["wq"].T
        yield b + "attn_k.weight", lp["wk"].T
        yield b + "attn_v.weight", lp["wv"].T
        yield b + "attn_output.weight", lp["wo"].T
        yield b + "ffn_norm.weight", lp["ffn_norm"]
        yield b + "ffn_gate_inp.weight", lp["router"].T
        yield b + "ffn_gate_exps.weight", lp["w_gate"].transpose(0, 2, 1)
        yield b + "ffn_up_exps.weight", lp["w_up"].transpose(0, 2, 1)
        yield b + "ffn_down_exps.weight", lp["w_down"].transpose(0, 2, 1)


def write(path, cfg, params, sp, qtype, name, description):
    q8 = qtype == "q8_0"
    w = gguf.GGUFWriter(path, "llama")
    w.add_name(name)
    w.add_description(description)
    w.add_file_type(gguf.LlamaFileType.MOSTLY_Q8_0 if q8 else gguf.LlamaFileType.ALL_F32)
    w.add_quantization_version(gguf.GGML_QUANT_VERSION)
    w.add_context_length(cfg.n_ctx)
    w.add_embedding_length(cfg.n_embd)
    w.add_block_count(cfg.n_layer)
    w.add_feed_forward_length(cfg.n_ff)
    w.add_head_count(cfg.n_head)
    w.add_head_count_kv(cfg.n_head_kv)
    w.add_key_length(cfg.head_dim)
    w.add_value_length(cfg.head_dim)
    w.add_rope_dimension_count(cfg.head_dim)
    w.add_rope_freq_base(cfg.rope_base)
    w.add_layer_norm_rms_eps(cfg.rms_eps)
    w.add_expert_count(cfg.n_expert)
    w.add_expert_used_count(cfg.n_expert_used)
    w.add_vocab_size(cfg.n_vocab)
    tokens, scores, types = vocab_arrays(sp)
    w.add_tokenizer_model("llama")
    w.add_tokenizer_pre("default")
    w.add_token_list(tokens)
    w.add_token_scores(scores)
    w.add_token_types(types)
    w.add_bos_token_id(sp.bos_id())
    w.add_eos_token_id(sp.eos_id())
    w.add_unk_token_id(sp.unk_id())
    w.add_add_bos_token(True)
    w.add_add_eos_token(False)
    w.add_add_space_prefix(True)
    w.add_chat_template(CHAT_TEMPLATE)
    for tname, arr in tensors(cfg, params):
        arr = np.ascontiguousarray(arr, np.float32)
        keep_f32 = arr.ndim == 1 or tname.endswith("ffn_gate_inp.weight")
        if q8 and not keep_f32:
            qt = gguf.GGMLQuantizationType.Q8_0
            w.add_tensor(tname, gguf.quants.quantize(arr, qt), raw_dtype=qt)
        else:
            w.add_tensor(tname, arr)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
