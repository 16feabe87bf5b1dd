"""llamacpp_goldens.py - llama.cpp's outputs for a model, as moeinf's tests read them.

Usage: python3 tools/goldens/llamacpp_goldens.py MODEL.gguf OUT_DIR [GOLDEN_ID ...]
(GOLDEN_IDs such as "hello" or "code-kvf32-nofa" limit the output to those; default: all)
Needs llama-cpp-python (pip; the version is recorded in every file). Writes, for each prompt
below and each of two contexts, OUT_DIR/<prompt_id>.json and OUT_DIR/<prompt_id>.logits.f32 in
the format of ../shared/testdata/README.md section 2 (llamacpp-golden-v1), made the way its
section 2.1 says:
  1. the model on CPU with default model parameters (weight repacking on);
  2. tokens from llama_tokenize(add_special = true, parse_special = false);
  3. llama_context_default_params() except n_threads = n_threads_batch = 2: the default
     context (F16 K/V, flash attention "auto") and, for ids ending in "-kvf32-nofa", an F32
     K/V cache with flash attention disabled;
  4. the whole prompt decoded as one batch with logits at every position -> .logits.f32;
  5. 16 greedy tokens (argmax, lowest id on a tie; EOS not special), each decoded alone;
  6. routing: a second context with an eval callback decodes the same prompt and the same
     greedy tokens (teacher-forced) and records each layer's router probabilities
     (ffn_moe_probs-L), chosen experts (ffn_moe_topk-L) and final weights (the last of
     ffn_moe_weights-L, ffn_moe_weights_softmax-L, ffn_moe_weights_norm-L,
     ffn_moe_weights_scaled-L that llama.cpp computes: architectures without
     renormalisation have no _norm tensor; gpt-oss takes the softmax of the k selected
     router logits, _softmax, and its "probs" are the biased router logits); its logits
     are compared with run 4/5;
  7. for a hybrid model (recurrent layers, llama_model_is_hybrid: qwen35moe, qwen3next) or
     gpt-oss and an F32 K/V cache, the same re-run also records, for every prompt position,
     each layer's mixer output (the Gated DeltaNet layer's linear_attn_out-L or the attention
     layer's attn_output-L, gpt-oss's attn_out-L: after wo and its bias, before the residual)
     and its output l_out-L, in OUT_DIR/<prompt_id>.layers.f32 (float32,
     [n_layer][2][n_tokens][n_embd]; the JSON's "layer_outputs" names the tensors).
     deepseek2 and glm4moe get the same file; their graphs name no tensor between wo and the
     residual, so the mixer output is the matrix product of blk.L.attn_output.weight and
     kqv_out-L itself (found by its operands), named "mul_mat(blk.L.attn_output.weight,
     kqv_out-L)" in "layer_outputs";
  8. leading dense layers (deepseek2, glm4moe) have no router: the routing has no entry for
     them, and "dense_layers" lists them; where llama.cpp computes them, each layer's entry
     also has "probs_biased" (ffn_moe_probs_biased-L: the probabilities plus exp_probs_b, which
     choose the experts) and "group_topk" (ffn_moe_group_topk-L: the expert groups kept).
Models of an architecture in ARCH_PROMPTS get those prompts too (gpt-oss: prompts several
sliding windows long).
"""

import ctypes
import json
import os
import re
import sys

import numpy as np
import llama_cpp
import llama_cpp.llama_cpp as L

PROMPTS = {
    "hello": "Hello world",
    "prose": "The function returns a new list of the items in the sequence.",
    "code": "def add(a, b):\n    return a + b\n",
    "unicode": "Caf\u00e9 na\u00efve \u65e5\u672c\u8a9e \U0001f680\U0001f525!",
}
# prompts several times gpt-oss's sliding window long (the tiny model's is 16 tokens)
ARCH_PROMPTS = {
    "gpt-oss": {
        "window": "The model reads the file and returns the tokens of the text. A new list holds "
                  "the items in the order of the sequence; the function adds each item to the "
                  "list, and the window slides over the last sixteen tokens while the sink takes "
                  "what the keys do not.",
        "long": "It's 2026 and we've got 128 experts, 36 layers and 4096 positions. def main():\n"
                "    for item in items:\n        print(item)\n    return 0\nThe cat sat on the "
                "mat. We went to the caf\u00e9 and had a coffee, then read the file again: every "
                "token attends to the sixteen before it in the sliding layers and to all of them "
                "in the full ones. Small models are fast, and the tests run them in a second; if "
                "a > b: return a, else: return b.",
    },
}
N_GREEDY = 16
MAX_TOKENS = 400  # the prompt and its greedy tokens fit the default context (512)
GGML_TYPE_F32, GGML_TYPE_F16, GGML_TYPE_I32 = 0, 1, 26

_ggml = ctypes.CDLL(os.path.join(os.path.dirname(llama_cpp.__file__), "lib", "libggml-base.so"))
_ggml.ggml_get_name.restype = ctypes.c_char_p
_ggml.ggml_get_name.argtypes = [ctypes.c_void_p]
_ggml.ggml_op_name.restype = ctypes.c_char_p
_ggml.ggml_op_name.argtypes = [ctypes.c_int]
# architectures whose per-layer outputs are recorded although they are not hybrid, and how
# their attention output after wo is found: by its tensor name or as the unnamed product of
# blk.L.attn_output.weight (WO_PRODUCT)
WO_PRODUCT = "wo-product"
LAYER_ARCHS = {"gpt-oss": "name", "deepseek2": WO_PRODUCT, "glm4moe": WO_PRODUCT}


class GgmlTensor(ctypes.Structure):
    """The head of struct ggml_tensor (ggml.h) up to its name; checked against ggml_get_name."""
    _fields_ = [
        ("type", ctypes.c_int), ("buffer", ctypes.c_void_p),
        ("ne", ctypes.c_int64 * 4), ("nb", ctypes.c_size_t * 4),
        ("op", ctypes.c_int), ("op_params", ctypes.c_int32 * 16), ("flags", ctypes.c_int32),
        ("src", ctypes.c_void_p * 10), ("view_src", ctypes.c_void_p),
        ("view_offs", ctypes.c_size_t), ("data", ctypes.c_void_p), ("name", ctypes.c_char * 64),
    ]


def tensor_rows(ptr):
    """A 2-D or 3-D F32 or I32 tensor on the CPU as a numpy array [ne2 * ne1][ne0] (strides
    honoured; ffn_moe_weights-L is [1, k, n_tokens])."""
    t = GgmlTensor.from_address(ptr)
    if t.name != _ggml.ggml_get_name(ptr):
        raise RuntimeError("struct ggml_tensor layout does not match this libggml")
    dtype = {GGML_TYPE_F32: np.float32, GGML_TYPE_I32: np.int32}[t.type]
    ne0, ne1, ne2 = t.ne[0], t.ne[1], t.ne[2]
    size = (ne2 - 1) * t.nb[2] + (ne1 - 1) * t.nb[1] + ne0 * t.nb[0]
    raw = (ctypes.c_uint8 * size).from_address(t.data)
    a = np.lib.stride_tricks.as_strided(np.frombuffer(raw, dtype=dtype), (ne2, ne1, ne0),
                                        (t.nb[2], t.nb[1], t.nb[0]))
    return a.reshape(ne2 * ne1, ne0).copy()


_log_lines = []


@ctypes.CFUNCTYPE(None, ctypes.c_int, ctypes.c_char_p, ctypes.c_void_p)
def _log(level, text, user):
    _log_lines.append(text.decode("utf-8", "replace"))


def make_context(model, kv_f32, cb=None):
    p = L.llama_context_default_params()
    p.n_threads = p.n_threads_batch = 2
    if kv_f32:
        p.type_k = p.type_v = GGML_TYPE_F32
        p.flash_attn_type = L.LLAMA_FLASH_ATTN_TYPE_DISABLED
    if cb is not None:
        p.cb_eval = cb
    _log_lines.clear()
    ctx = L.llama_init_from_model(model, p)
    if not ctx:
        raise RuntimeError("llama_init_from_model failed")
    log = "".join(_log_lines)
    # llama.cpp resolves "auto" while it builds the context and logs the outcome.
    fa = "disabled" if kv_f32 else "unknown"
    for outcome in ("enabled", "disabled"):
        if not kv_f32 and re.search(r"Flash Attention " + outcome, log, re.IGNORECASE):
            fa = outcome
    info = {"n_ctx": p.n_ctx or L.llama_n_ctx(ctx), "n_batch": p.n_batch, "n_ubatch": p.n_ubatch,
            "n_threads": 2, "type_k": "f32" if kv_f32 else "f16", "type_v": "f32" if kv_f32 else "f16",
            "flash_attn": "disabled" if kv_f32 else "auto", "flash_attn_resolved": fa,
            "cpu_weight_repack": True}
    return ctx, info


def decode(ctx, tokens, pos0, all_logits, n_vocab):
    n = len(tokens)
    batch = L.llama_batch_init(n, 0, 1)
    for i, tok in enumerate(tokens):
        batch.token[i] = tok
        batch.pos[i] = pos0 + i
        batch.n_seq_id[i] = 1
        batch.seq_id[i][0] = 0
        batch.logits[i] = all_logits or i == n - 1
    batch.n_tokens = n
    if L.llama_decode(ctx, batch) != 0:
        raise RuntimeError("llama_decode failed")
    rows = []
    for i in range(n):
        if all_logits or i == n - 1:
            ptr = L.llama_get_logits_ith(ctx, i)
            rows.append(np.ctypeslib.as_array(ptr, shape=(n_vocab,)).copy())
    L.llama_batch_free(batch)
    return np.array(rows, np.float32)


def piece(vocab, tok):
    buf = ctypes.create_string_buffer(256)
    n = L.llama_token_to_piece(vocab, tok, buf, len(buf), 0, True)
    return buf.raw[:n].hex()


def top5(row):
    idx = sorted(range(len(row)), key=lambda i: (-row[i], i))[:5]
    return [[int(i), float(row[i])] for i in idx]


def argmax(row):
    return int(np.argmax(row))  # the first (lowest id) of equal maxima


def run(model, vocab, n_vocab, text, kv_f32):
    raw = text.encode("utf-8")
    toks = (L.llama_token * MAX_TOKENS)()
    n = L.llama_tokenize(vocab, raw, len(raw), toks, MAX_TOKENS, True, False)
    if n < 0:
        raise RuntimeError(f"prompt of more than {MAX_TOKENS} tokens")
    tokens = [toks[i] for i in range(n)]
    ctx, info = make_context(model, kv_f32)
    logits = decode(ctx, tokens, 0, True, n_vocab)
    greedy, top, margin, top1 = [], [], [], []
    row = logits[-1]
    for s in range(N_GREEDY):
        tok = argmax(row)
        t5 = top5(row)
        greedy.append(tok)
        top.append(t5)
        top1.append(t5[0][1])
        margin.append(t5[0][1] - t5[1][1])
        if s + 1 < N_GREEDY:
            row = decode(ctx, [tok], len(tokens) + s, False, n_vocab)[0]
    L.llama_free(ctx)
    return tokens, logits, greedy, top, margin, top1, info


def wo_product(ptr):
    """For the matrix product of blk.L.attn_output.weight and an activation: (L, its name as
    "mul_mat(WEIGHT, ACTIVATION)"); else None."""
    t = GgmlTensor.from_address(ptr)
    if _ggml.ggml_op_name(t.op) != b"MUL_MAT" or not t.src[0] or not t.src[1]:
        return None
    w = _ggml.ggml_get_name(t.src[0]).decode()
    m = re.match(r"blk\.(\d+)\.attn_output\.weight$", w)
    if not m:
        return None
    return int(m.group(1)), f"mul_mat({w}, {_ggml.ggml_get_name(t.src[1]).decode()})"


def routing(model, n_vocab, n_layer, tokens, greedy, kv_f32, logits, greedy_top, hybrid):
    """Router tensors of a teacher-forced re-run; the largest logit difference to run 4/5;
    for a hybrid model (hybrid = "name" or WO_PRODUCT: how the mixer output is found), each
    layer's mixer output and output at the prompt positions."""
    calls = []  # per decode: {layer: {"probs", "topk", "weights"}}
    want = re.compile(r"ffn_moe_(probs|probs_biased|group_topk|topk|weights|weights_softmax|"
                      r"weights_norm|weights_scaled)-(\d+)$")
    want_layer = re.compile(r"(linear_attn_out|attn_output|attn_out|l_out)-(\d+)$"
                            if hybrid == "name" else r"(l_out)-(\d+)$")
    layer_out = {}  # (kind, layer) -> [n_tokens][n_embd], prompt decode only

    @L.ggml_backend_sched_eval_callback
    def cb(t, ask, user):
        name = _ggml.ggml_get_name(t).decode()
        m = want.match(name)
        ml = want_layer.match(name) if hybrid else None
        wo = wo_product(t) if hybrid == WO_PRODUCT else None
        if ask:
            return m is not None or ml is not None or wo is not None
        if wo and len(calls) == 1:
            layer_out[("mixer", wo[0])] = (wo[1], tensor_rows(t))
        if ml and len(calls) == 1:
            kind = "l_out" if ml.group(1) == "l_out" else "mixer"
            layer_out[(kind, int(ml.group(2)))] = (ml.group(0), tensor_rows(t))
        if m:
            kind = m.group(1)
            rows = tensor_rows(t)
            if kind.startswith("weights"):
                rows = rows.reshape(-1, rows.shape[-1] if rows.ndim > 1 else 1)
            calls[-1].setdefault(int(m.group(2)), {})[kind] = rows
        return True

    ctx, _ = make_context(model, kv_f32, cb)
    calls.append({})
    diff = float(np.max(np.abs(decode(ctx, tokens, 0, True, n_vocab) - logits)))
    for s in range(N_GREEDY - 1):
        calls.append({})
        row = decode(ctx, [greedy[s]], len(tokens) + s, False, n_vocab)[0]
        ids = [e[0] for e in greedy_top[s + 1]]
        diff = max(diff, float(np.max(np.abs(row[ids] - [e[1] for e in greedy_top[s + 1]]))))
    L.llama_free(ctx)

    def layer_rows(call, il):
        got = call[il]
        final = [k for k in ("weights_scaled", "weights_norm", "weights_softmax", "weights")
                 if k in got][0]
        r = {"topk": got["topk"].tolist(), "weights": got[final].reshape(got["topk"].shape).tolist(),
             "weights_from": f"ffn_moe_{final}-{il}", "probs": got["probs"].tolist()}
        for k in ("probs_biased", "group_topk"):
            if k in got:
                r[k] = got[k].tolist()
        return r

    moe_layers = [il for il in range(n_layer) if il in calls[0]]
    prompt = {str(il): layer_rows(calls[0], il) for il in moe_layers}
    steps = {}
    for il in moe_layers:
        rows = [layer_rows(c, il) for c in calls[1:]]
        steps[str(il)] = {k: [r[k][0] for r in rows] if k != "weights_from" else rows[0][k]
                          for k in ("topk", "weights", "weights_from", "probs", "probs_biased",
                                    "group_topk") if k in rows[0]}
    route = {"logits_max_abs_diff_vs_main_run": diff, "prompt": prompt, "greedy_steps": steps}
    if len(moe_layers) < n_layer:
        route["dense_layers"] = [il for il in range(n_layer) if il not in moe_layers]
    layers = None
    if hybrid:
        names = [layer_out[(k, il)][0] for il in range(n_layer) for k in ("mixer", "l_out")]
        layers = np.stack([layer_out[(k, il)][1] for il in range(n_layer) for k in ("mixer", "l_out")])
        if layers.shape[1] != len(tokens):
            raise RuntimeError(f"layer outputs of {layers.shape[1]} rows for {len(tokens)} tokens")
        layers = (names, layers.reshape(n_layer, 2, len(tokens), -1).astype(np.float32))
    return route, layers


def tidy(x):
    """Floats to 9 significant digits (enough to round-trip float32), recursively."""
    if isinstance(x, float):
        return float(f"{x:.9g}")
    if isinstance(x, dict):
        return {k: tidy(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [tidy(v) for v in x]
    return x


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    model_path, out_dir, only = sys.argv[1], sys.argv[2], set(sys.argv[3:])
    os.makedirs(out_dir, exist_ok=True)
    L.llama_log_set(_log, None)
    L.llama_backend_init()
    mp = L.llama_model_default_params()
    model = L.llama_model_load_from_file(model_path.encode(), mp)
    if not model:
        sys.exit(f"{model_path}: llama.cpp cannot load it")
    vocab = L.llama_model_get_vocab(model)
    n_vocab = L.llama_vocab_n_tokens(vocab)
    n_layer = L.llama_model_n_layer(model)
    buf = ctypes.create_string_buffer(64)
    L.llama_model_meta_val_str(model, b"general.architecture", buf, len(buf))
    arch = buf.value.decode()
    layers_wanted = "name" if L.llama_model_is_hybrid(model) else LAYER_ARCHS.get(arch)
    for pid, text in {**PROMPTS, **ARCH_PROMPTS.get(arch, {})}.items():
        for kv_f32 in (False, True):
            gid = pid + ("-kvf32-nofa" if kv_f32 else "")
            if only and gid not in only:
                continue
            tokens, logits, greedy, top, margin, top1, info = run(model, vocab, n_vocab, text, kv_f32)
            route, layers = routing(model, n_vocab, n_layer, tokens, greedy, kv_f32, logits, top,
                                    layers_wanted if kv_f32 else None)
            g = {
                "format": "llamacpp-golden-v1",
                "llama_cpp_commit": None,
                "llama_cpp_python_version": llama_cpp.__version__,
                "model_file": os.path.basename(model_path),
                "prompt_id": gid, "prompt": text, "prompt_utf8_hex": text.encode().hex(),
                "tokenize": {"add_special": True, "parse_special": False},
                "context": info, "n_vocab": n_vocab, "n_tokens": len(tokens), "tokens": tokens,
                "token_pieces_hex": [piece(vocab, t) for t in tokens],
                "logits_file": gid + ".logits.f32", "logits_dtype": "float32-le",
                "logits_shape": [len(tokens), n_vocab],
                "argmax_per_position": [argmax(r) for r in logits],
                "top5_per_position": [top5(r) for r in logits],
                "greedy": {"tokens": greedy, "top1_logit": top1, "margin_to_second": margin,
                           "pieces_hex": [piece(vocab, t) for t in greedy], "top5": top},
                "routing": route,
            }
            if layers is not None:
                g["layer_outputs"] = {"file": gid + ".layers.f32", "dtype": "float32-le",
                                      "shape": list(layers[1].shape), "tensors": layers[0]}
                layers[1].astype("<f4").tofile(os.path.join(out_dir, gid + ".layers.f32"))
            logits.astype("<f4").tofile(os.path.join(out_dir, gid + ".logits.f32"))
            with open(os.path.join(out_dir, gid + ".json"), "w") as f:
                f.write(json.dumps(tidy(g), indent=1))
            print(f"{gid}: {len(tokens)} tokens, flash attention {info['flash_attn_resolved']}, "
                  f"routing re-run max |diff| {route['logits_max_abs_diff_vs_main_run']:.3g}")
    L.llama_model_free(model)


if __name__ == "__main__":
    main()
