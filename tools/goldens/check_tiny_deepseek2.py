"""check_tiny_deepseek2.py - a numpy forward pass of a deepseek2 GGUF, held against llama.cpp's goldens.

Usage: python3 tools/goldens/check_tiny_deepseek2.py MODEL.gguf GOLDEN_DIR [--ablate NAME]
Needs numpy and the `gguf` package (which also dequantizes K-quants). It prints what the file
contains (metadata, tensor types), then, for every "-kvf32-nofa" golden in GOLDEN_DIR, runs the
golden's tokens through the model written out below from the architecture's definition
(DeepSeek-V2/V3's, not llama.cpp's code) and prints the largest logit difference, the
per-layer differences to <id>.layers.f32, whether the experts chosen agree and the smallest
router gap. Exit status 1 if a logit differs by more than 2e-2 (F32 files) or an expert choice
differs where the router's gap exceeds 1e-3. For quantized files the weights are dequantized
exactly and each matrix product's input is rounded as llama.cpp's CPU dot products round it
(act_round: Q8_K for K-quant weights, Q8_0 for Q5_0/Q8_0, F16 for F16; not for the MLA
layout's attn_k_b/attn_v_b); a rounding that lands on a near-tie still moves some logits, so
the bound is then 1.0. --ablate drops one feature to show that the goldens
depend on it: groups (no expert-group limit), groupmax (a group's score its largest S, as
DeepSeek-V2's own group_limited_greedy has it, not the sum of its 2 largest), logmul (YaRN's
log multiplier ignored in the attention scale), ropescale (cos and sin times 1 + 0.1 ln f
although the file has the log multiplier), yarn (no YaRN at all), kvb (attn_kv_b read per head as [v | k] instead of
[k | v]; the split layout: attn_k_b transposed per head), neox (RoPE pairs (i, i + d/2)
instead of adjacent), bias (no exp_probs_b), shared (no shared experts).

Both layouts of the file: MLA (attention.key_length_mla present: per-head attn_k_b, attn_v_b)
and legacy (attn_kv_b). Per token t at position t (one sequence):
  x = token_embd[token]; per layer il < block_count - nextn_predict_layers:
    y = rms(x) * attn_norm  (rms(v) = v / sqrt(mean(v^2) + eps));
    q = q_lora ? W_qb (rms(W_qa y) * q_a_norm) : W_q y, per head [nope | rope] (k = nope + rope,
      rope = rope.dimension_count); [c | k_r] = W_kva y (kv_lora + rope);
      c = rms(c) * kv_a_norm;
    K_h = [Wk_h c | rope(k_r)] (k_r shared by the heads), V_h = Wv_h c, where legacy attn_kv_b
      gives, per head, nope rows of Wk_h then v rows of Wv_h, and the MLA layout's attn_k_b
      [n_head][kv_lora][nope] holds Wk_h transposed, attn_v_b [n_head][v][kv_lora] Wv_h;
    RoPE on q's rope part and on k_r: type NORM, adjacent pairs (2i, 2i + 1) rotated by
      theta_i = t base^(-2i/rope); with YaRN (factor f, original context o, beta_fast 32,
      beta_slow 1): corr(b) = rope ln(o / (2 pi b)) / (2 ln base), lo = max(0, floor(corr(32))),
      hi = min(rope - 1, ceil(corr(1))), ramp_i = 1 - clamp((i - lo) / max(0.001, hi - lo)),
      theta = theta_i (1 - ramp_i) / f + theta_i ramp_i; cos and sin unscaled when the file has
      yarn_log_multiplier (DeepSeek's mscale = mscale_all_dim makes their ratio 1), else times
      1 + 0.1 ln f;
    scores a_hj = q_h . K_hj * s for j <= t, s = m^2 / sqrt(k) with m = 1 + 0.1 L ln f,
      L = yarn_log_multiplier / 0.1 (the converter stores 0.1 * mscale_all_dim), m = 1 without
      YaRN; p = softmax_j(a); out_h = sum_j p_hj V_hj;
    h = x + W_o concat(out_h); y = rms(h) * ffn_norm;
    layers il < leading_dense_block_count: x = h + W_d (silu(W_g y) * W_u y);
    else: r = W_r y, P = softmax(r) (expert_gating_func 1 or absent) or sigmoid(r) (2);
      S = P + exp_probs_b (if present); with expert_group_count G > 1: groups of n_expert / G
      consecutive experts, a group's score the sum of its 2 largest S, the experts outside
      the expert_group_used_count best groups removed; the top expert_used_count of S (ties:
      lower id); weights w = P[top]; if expert_weights_norm: w /= sum(w); times
      expert_weights_scale (if not 0); x = h + sum_e w_e W_d,e (silu(W_g,e y) * W_u,e y)
      + W_d,s (silu(W_g,s y) * W_u,s y) (the shared experts: one FFN, no gate);
  logits = output (rms(x) * output_norm) (output absent: token_embd), the final hidden state
  rounded to F16 first when output is F16 (as llama.cpp's CPU F16 matrix product does).
"""

import argparse
import glob
import json
import os
import sys

import numpy as np
import gguf
from gguf.quants import dequantize

ABLATIONS = ["groups", "groupmax", "logmul", "ropescale", "yarn", "kvb", "neox", "bias", "shared"]


def load(path, want_arch):
    r = gguf.GGUFReader(path)

    def val(f):
        if f.types and f.types[0] == gguf.GGUFValueType.STRING:
            if len(f.data) > 1:
                return f"[{len(f.data)} strings]"
            return bytes(f.parts[f.data[0]]).decode()
        v = [f.parts[i].tolist() for i in f.data]
        if len(v) > 8:
            return f"[{len(v)} values]"
        return v if len(v) > 1 else v[0][0]

    meta = {f.name: val(f) for f in r.fields.values() if not f.name.startswith("GGUF.")}
    arch = meta["general.architecture"]
    if arch != want_arch:
        sys.exit(f"{path}: architecture {arch}, not {want_arch}")
    t, types = Weights(), {}
    t.types = types
    for ten in r.tensors:
        shape = [int(x) for x in reversed(ten.shape)]  # numpy order
        types[ten.name] = ten.tensor_type.name
        if ten.tensor_type in (gguf.GGMLQuantizationType.F32, gguf.GGMLQuantizationType.F16):
            t[ten.name] = np.array(ten.data, dtype=np.float64).reshape(shape)
        else:
            t[ten.name] = dequantize(ten.data, ten.tensor_type).astype(np.float64).reshape(shape)
    hp = {k[len(arch) + 1:]: v for k, v in meta.items() if k.startswith(arch + ".")}
    return meta, hp, t, types


class Weights(dict):
    """Tensors by name (numpy order, float64) with their GGUF types in .types."""
    types = {}


def q8_0(a):
    """a rounded as ggml's CPU code quantizes it to Q8_0 (x86): per block of 32,
    q = round(a 127 / max|a|) (half to even), times d = max|a| / 127 rounded to F16."""
    b = a.reshape(-1, 32).astype(np.float32)
    amax = np.abs(b).max(1, keepdims=True)
    d = amax / np.float32(127)
    idv = np.where(amax > 0, np.float32(127) / np.where(amax > 0, amax, 1), 0).astype(np.float32)
    return (np.round(b * idv) * d.astype(np.float16).astype(np.float64)).reshape(a.shape)


def q8_k(a):
    """a rounded as ggml quantizes it to Q8_K: per block of 256, iscale = -127 / m (m the entry
    of largest magnitude), q = min(127, round(iscale a)), times d = 1 / iscale (float32)."""
    b = a.reshape(-1, 256).astype(np.float32)
    m = np.take_along_axis(b, np.abs(b).argmax(1)[:, None], 1)
    iscale = np.where(m != 0, np.float32(-127) / np.where(m != 0, m, 1), 0).astype(np.float32)
    q = np.minimum(127, np.round(b * iscale))
    d = np.where(iscale != 0, np.float32(1) / np.where(iscale != 0, iscale, 1), 0).astype(np.float32)
    return (q * d.astype(np.float64)).reshape(a.shape)


def act_round(a, ty):
    """A matrix product's input as llama.cpp's CPU backend rounds it for a weight of type ty."""
    if ty.endswith("_K"):
        return q8_k(a)
    if ty in ("Q4_0", "Q5_0", "Q8_0"):
        return q8_0(a)
    if ty == "F16":
        return a.astype(np.float16).astype(np.float64)
    return a


def lin(t, name, a, e=None):
    """a @ W.T for the weight `name` (expert e of it if given), a rounded as llama.cpp does."""
    w = t[name] if e is None else t[name][e]
    return act_round(a, t.types[name]) @ w.T


def rms(x, w, eps):
    return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps) * w


def rope_angles(hp, n, d, use_yarn, scale_anyway=False):
    """cos, sin [n][d/2] of RoPE over d dims at positions 0..n-1, with YaRN when the file has
    it and use_yarn; and the YaRN factor (1 without)."""
    base = hp.get("rope.freq_base", 10000.0)
    i = np.arange(d // 2)
    theta = np.arange(n)[:, None] * base ** (-2.0 * i / d)
    factor, mscale = 1.0, 1.0
    if hp.get("rope.scaling.type") == "yarn" and use_yarn:
        factor, orig = hp["rope.scaling.factor"], hp["rope.scaling.original_context_length"]

        def corr(b):
            return d * np.log(orig / (2 * np.pi * b)) / (2 * np.log(base))

        lo, hi = max(0.0, np.floor(corr(32.0))), min(d - 1.0, np.ceil(corr(1.0)))
        ramp = 1 - np.clip((i - lo) / max(0.001, hi - lo), 0, 1)
        theta = theta / factor * (1 - ramp) + theta * ramp
        if not hp.get("rope.scaling.yarn_log_multiplier") or scale_anyway:
            mscale = 1 + 0.1 * np.log(factor)
    return np.cos(theta) * mscale, np.sin(theta) * mscale, factor


def rope_apply(a, c, s, neox):
    """RoPE on the last axis of a [n][heads][d] with cos, sin [n][1][d/2]: NORM rotates the
    adjacent pairs (2i, 2i + 1), NEOX the pairs (i, i + d/2)."""
    d = a.shape[-1]
    if neox:
        a0, a1 = a[..., :d // 2], a[..., d // 2:]
        return np.concatenate([a0 * c - a1 * s, a0 * s + a1 * c], axis=-1)
    a0, a1 = a[..., 0::2], a[..., 1::2]
    out = np.empty_like(a)
    out[..., 0::2] = a0 * c - a1 * s
    out[..., 1::2] = a0 * s + a1 * c
    return out


def silu(a):
    return a / (1 + np.exp(-a))


def ffn(t, p, y, suffix=""):
    a = silu(lin(t, p + f"ffn_gate{suffix}.weight", y)) * lin(t, p + f"ffn_up{suffix}.weight", y)
    return lin(t, p + f"ffn_down{suffix}.weight", a)


def moe(hp, t, p, y, ablate, default_gating):
    """The MoE FFN of one layer (routed and shared experts) for y [n][n_embd]; also the
    router's probabilities, the experts chosen and the smallest gap at the k-th choice."""
    n_expert, k = hp["expert_count"], hp["expert_used_count"]
    gating = hp.get("expert_gating_func") or default_gating
    r = lin(t, p + "ffn_gate_inp.weight", y)
    if gating == 1:
        e = np.exp(r - r.max(1, keepdims=True))
        probs = e / e.sum(1, keepdims=True)
    else:
        probs = 1 / (1 + np.exp(-r))
    sel = probs.copy()
    if p + "exp_probs_b.bias" in t and ablate != "bias":
        sel = sel + t[p + "exp_probs_b.bias"]
    n_groups = hp.get("expert_group_count", 0)
    if n_groups > 1 and ablate != "groups":
        g = sel.reshape(len(y), n_groups, n_expert // n_groups)
        score = -np.sort(-g, axis=2)[:, :, :1 if ablate == "groupmax" else 2].sum(2)
        keep = np.argsort(-score, axis=1, kind="stable")[:, :hp["expert_group_used_count"]]
        mask = np.full(g.shape, -np.inf)
        for j in range(len(y)):
            mask[j, keep[j]] = 0
        sel = (g + mask).reshape(len(y), n_expert)
    top = np.argsort(-sel, axis=1, kind="stable")[:, :k]
    srt = -np.sort(-sel, axis=1)
    gap = float(np.min(srt[:, k - 1] - srt[:, k]))
    w = np.take_along_axis(probs, top, 1)
    if hp.get("expert_weights_norm"):
        w = w / np.maximum(w.sum(1, keepdims=True), 6.103515625e-5)
    scale = hp.get("expert_weights_scale", 0.0)
    if scale not in (0.0, 1.0):
        w = w * scale
    out = np.zeros_like(y)
    for j in range(len(y)):
        for e_, we in zip(top[j], w[j]):
            a = silu(lin(t, p + "ffn_gate_exps.weight", y[j], e_)) * lin(t, p + "ffn_up_exps.weight", y[j], e_)
            out[j] += we * lin(t, p + "ffn_down_exps.weight", a, e_)
    if p + "ffn_up_shexp.weight" in t and ablate != "shared":
        out += ffn(t, p, y, "_shexp")
    return out, probs, top, gap


def lm_head(t, x, eps):
    name = "output.weight" if "output.weight" in t else "token_embd.weight"
    return lin(t, name, rms(x, t["output_norm.weight"], eps))


def forward(hp, t, types, tokens, ablate=None):
    n = len(tokens)
    eps = hp["attention.layer_norm_rms_epsilon"]
    n_head = hp["attention.head_count"]
    n_rot = hp["rope.dimension_count"]
    kv_lora = hp["attention.kv_lora_rank"]
    mla = "attention.key_length_mla" in hp
    k_dim = hp["attention.key_length_mla" if mla else "attention.key_length"]
    v_dim = hp["attention.value_length_mla" if mla else "attention.value_length"]
    nope = k_dim - n_rot
    c, s, factor = rope_angles(hp, n, n_rot, ablate != "yarn", ablate == "ropescale")
    c, s = c[:, None, :], s[:, None, :]
    log_mul = hp.get("rope.scaling.yarn_log_multiplier", 0.0) / 0.1
    m = 1 + 0.1 * log_mul * np.log(factor) if ablate not in ("logmul", "yarn") else 1.0
    kq_scale = m * m / np.sqrt(k_dim)
    n_layer = hp["block_count"] - hp.get("nextn_predict_layers", 0)
    x = t["token_embd.weight"][tokens]
    layers, routing, gaps = [], {}, []
    for il in range(n_layer):
        p = f"blk.{il}."
        y = rms(x, t[p + "attn_norm.weight"], eps)
        if hp.get("attention.q_lora_rank"):
            q = lin(t, p + "attn_q_b.weight",
                    rms(lin(t, p + "attn_q_a.weight", y), t[p + "attn_q_a_norm.weight"], eps))
        else:
            q = lin(t, p + "attn_q.weight", y)
        q = q.reshape(n, n_head, k_dim)
        kv = lin(t, p + "attn_kv_a_mqa.weight", y)
        cc = rms(kv[:, :kv_lora], t[p + "attn_kv_a_norm.weight"], eps)
        k_r = rope_apply(kv[:, None, kv_lora:], c, s, ablate == "neox")  # [n][1][rope]
        q_pe = rope_apply(q[:, :, nope:], c, s, ablate == "neox")
        if mla:
            wk = t[p + "attn_k_b.weight"].transpose(0, 2, 1)  # [head][nope][kv_lora]
            if ablate == "kvb" and nope == kv_lora:
                wk = t[p + "attn_k_b.weight"]
            wv = t[p + "attn_v_b.weight"]  # [head][v][kv_lora]
        else:
            cc = act_round(cc, t.types[p + "attn_kv_b.weight"])
            w = t[p + "attn_kv_b.weight"].reshape(n_head, nope + v_dim, kv_lora)
            wk, wv = w[:, :nope], w[:, nope:]
            if ablate == "kvb":
                wv, wk = w[:, :v_dim], w[:, v_dim:]
        k_nope = np.einsum("hdc,jc->jhd", wk, cc)
        v = np.einsum("hdc,jc->jhd", wv, cc)
        att = np.zeros((n, n_head, v_dim))
        vis = np.arange(n)[None, :] <= np.arange(n)[:, None]
        for h in range(n_head):
            a = (q[:, h, :nope] @ k_nope[:, h].T + q_pe[:, h] @ k_r[:, 0].T) * kq_scale
            a = np.where(vis, a, -np.inf)
            e = np.exp(a - a.max(1, keepdims=True))
            att[:, h] = (e / e.sum(1, keepdims=True)) @ v[:, h]
        mix = lin(t, p + "attn_output.weight", att.reshape(n, n_head * v_dim))
        h_ = x + mix
        y = rms(h_, t[p + "ffn_norm.weight"], eps)
        if il < hp.get("leading_dense_block_count", 0):
            x = h_ + ffn(t, p, y)
        else:
            out, probs, top, gap = moe(hp, t, p, y, ablate, 1)
            x = h_ + out
            routing[il] = (probs, top)
            gaps.append(gap)
        layers.append((mix, x))
    return lm_head(t, x, eps), layers, routing, min(gaps)


def report(model, meta, types):
    print(f"{os.path.basename(model)}:")
    for k, v in meta.items():
        if not k.startswith("tokenizer.ggml.") or not isinstance(v, str) or not v.startswith("["):
            print(f"  {k} = {v}")
    by_type = {}
    for name, ty in types.items():
        by_type.setdefault(ty, []).append(name)
    for ty, names in sorted(by_type.items()):
        short = sorted({n.split('.', 2)[-1] if n.startswith('blk.') else n for n in names})
        print(f"  {ty}: {len(names)} tensors ({', '.join(short)})")


def check(args, forward_fn, hp, t, types):
    """Runs every -kvf32-nofa golden of args.golden_dir through forward_fn; True if all agree."""
    quantized = any(ty not in ("F32", "F16") for ty in types.values())
    bound = 1.0 if quantized else 2e-2
    ok = True
    paths = sorted(glob.glob(os.path.join(args.golden_dir, "*-kvf32-nofa.json")))
    if not paths:
        sys.exit(f"{args.golden_dir}: no -kvf32-nofa goldens")
    for path in paths:
        g = json.load(open(path))
        n, n_vocab = g["n_tokens"], g["n_vocab"]
        ref = np.fromfile(os.path.join(args.golden_dir, g["logits_file"]), "<f4").reshape(n, n_vocab)
        logits, layers, routing, gap = forward_fn(hp, t, types, g["tokens"], args.ablate)
        d_logit = float(np.abs(logits - ref).max())
        line = (f"{g['prompt_id']}: {n} tokens, max |logit diff| {d_logit:.3g} (logits' range "
                f"{ref.min():.1f}..{ref.max():.1f})")
        if "layer_outputs" in g:
            lo = g["layer_outputs"]
            ref_l = np.fromfile(os.path.join(args.golden_dir, lo["file"]), "<f4").reshape(lo["shape"])
            rel = [float(np.abs(m - ref_l[il, 0]).max() / np.abs(ref_l[il, 0]).max())
                   for il, (m, _) in enumerate(layers)]
            rel_out = [float(np.abs(o - ref_l[il, 1]).max() / np.abs(ref_l[il, 1]).max())
                       for il, (_, o) in enumerate(layers)]
            line += (", attention output max rel diff per layer " + " ".join(f"{r:.2g}" for r in rel)
                     + ", layer output " + " ".join(f"{r:.2g}" for r in rel_out))
        flips = 0
        for il, (probs, top) in routing.items():
            gr = g["routing"]["prompt"][str(il)]
            sel = np.array(gr.get("probs_biased", gr["probs"]))
            for j in range(n):
                if "group_topk" in gr:  # the gap among the experts of the groups kept
                    per = len(sel[j]) // hp["expert_group_count"]
                    kept = [e for gi in gr["group_topk"][j] for e in range(gi * per, gi * per + per)]
                    srt = np.sort(sel[j][kept])[::-1]
                else:
                    srt = np.sort(sel[j])[::-1]
                k = len(top[j])
                if srt[k - 1] - srt[k] > 1e-3 and sorted(top[j]) != sorted(gr["topk"][j]):
                    flips += 1
        line += f", expert choices differing (gap > 1e-3): {flips}, smallest router gap {gap:.3g}"
        print(line)
        ok = ok and d_logit <= bound and flips == 0
    return ok


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("model")
    ap.add_argument("golden_dir")
    ap.add_argument("--ablate", choices=ABLATIONS)
    args = ap.parse_args()
    meta, hp, t, types = load(args.model, "deepseek2")
    report(args.model, meta, types)
    sys.exit(0 if check(args, forward, hp, t, types) else 1)


if __name__ == "__main__":
    main()
