"""check_tiny_gptoss.py - a numpy forward pass of a gpt-oss GGUF, held against llama.cpp's goldens.

Usage: python3 tools/goldens/check_tiny_gptoss.py MODEL.gguf GOLDEN_DIR [--ablate NAME]
Needs numpy and the `gguf` package (which also dequantizes MXFP4). It prints what the file
contains (metadata, tensor types), then, for every "-kvf32-nofa" golden in GOLDEN_DIR, runs the
golden's tokens through the model written out below from the architecture's definition (not
from llama.cpp's code) and prints the largest logit difference, the per-layer differences to
<id>.layers.f32, whether the experts chosen agree, and what the prompt exercises: the share
of attention the sinks take, the share of SwiGLU entries the clamps cut, the smallest router
gap. Exit status 1 if a logit differs by more than 2e-2 (F32 experts) or an expert choice
differs where the router's gap exceeds 1e-3. For an MXFP4 file the experts are dequantized
exactly and their inputs rounded to Q8_0 as llama.cpp's CPU MXFP4 dot product does (q8_0
below); a rounding that lands on a tie still moves some prompts' logits by up to 0.3, so the
bound is then 1.0. --ablate drops one feature (sinks, window, yarn, clamp, biases) to show
that the goldens depend on it.

The model, per token t at position t (one sequence):
  x = token_embd[token]; per layer il:
    y = rms(x) * attn_norm  (rms(v) = v / sqrt(mean(v^2) + eps));
    q = Wq y + bq, k = Wk y + bk, v = Wv y + bv, split into heads of head_dim d;
    RoPE NEOX on q and k over all d dims (pairs i, i + d/2), with YaRN: theta_i = t base^(-2i/d),
      freq_scale s = 1 / factor, corr(b) = d ln(orig_ctx / (2 pi b)) / (2 ln base),
      lo = max(0, floor(corr(beta_fast=32))), hi = min(d - 1, ceil(corr(beta_slow=1))),
      ramp_i = 1 - clamp((i - lo) / max(0.001, hi - lo), 0, 1),
      theta = s theta_i (1 - ramp_i) + theta_i ramp_i, cos and sin times 1 + 0.1 ln(factor);
    attention per query head h (KV head h // (n_head / n_head_kv)): a_j = q.k_j / sqrt(d) for
      visible keys j (j <= t, and on sliding layers (il % 2 == 0) t - j < n_swa),
      p_j = exp(a_j) / (exp(sink_h) + sum_j exp(a_j)), out_h = sum_j p_j v_j;
    h = x + Wo concat(out_h) + bo;
    y = rms(h) * post_attention_norm; r = Wr y + br; top-k of r (ties: lower expert id);
      w = softmax of the k selected r; expert e: g = Wg_e y + bg_e, u = Wu_e y + bu_e,
      g' = min(g, 7), u' = clamp(u, -7, 7), a = g' / (1 + exp(-1.702 g')) * (u' + 1),
      out_e = Wd_e a + bd_e; x = h + sum_e w_e out_e;
  logits = output (rms(x) * output_norm).
"""

import argparse
import glob
import json
import os
import sys

import numpy as np
import gguf
from gguf.quants import dequantize

ALPHA, LIMIT = 1.702, 7.0


def load(path):
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
    if arch != "gpt-oss":
        sys.exit(f"{path}: architecture {arch}, not gpt-oss")
    t, types = {}, {}
    for ten in r.tensors:
        shape = [int(x) for x in reversed(ten.shape)]  # numpy order
        types[ten.name] = ten.tensor_type.name
        if ten.tensor_type in (gguf.GGMLQuantizationType.F32, gguf.GGMLQuantizationType.F16):
            t[ten.name] = np.array(ten.data, dtype=np.float64).reshape(shape)
        else:
            t[ten.name] = dequantize(ten.data, ten.tensor_type).astype(np.float64).reshape(shape)
    hp = {k[len("gpt-oss."):]: v for k, v in meta.items() if k.startswith("gpt-oss.")}
    return meta, hp, t, types


def rms(x, w, eps):
    return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps) * w


def yarn_cos_sin(hp, n, d, ablate):
    base = hp["rope.freq_base"]
    i = np.arange(d // 2)
    theta_e = np.arange(n)[:, None] * base ** (-2.0 * i / d)
    mscale = 1.0
    theta = theta_e
    if hp.get("rope.scaling.type") == "yarn" and ablate != "yarn":
        factor, orig = hp["rope.scaling.factor"], hp["rope.scaling.original_context_length"]

        def corr(b):
            return d * np.log(orig / (2 * np.pi * b)) / (2 * np.log(base))

        lo, hi = max(0.0, np.floor(corr(32.0))), min(d - 1.0, np.ceil(corr(1.0)))
        ramp = 1 - np.clip((i - lo) / max(0.001, hi - lo), 0, 1)
        theta = theta_e / factor * (1 - ramp) + theta_e * ramp
        mscale = 1 + 0.1 * np.log(factor)
    return np.cos(theta) * mscale, np.sin(theta) * mscale


def q8_0(a):
    """a as ggml's Q8_0 stores it: per block of 32, d = max|a| / 127, q = round(a 127 / max|a|),
    the value q * F16(d) (llama.cpp's CPU path for MXFP4 dot products quantizes activations so)."""
    b = a.reshape(-1, 32).astype(np.float32)
    amax = np.abs(b).max(1, keepdims=True)
    d = amax / np.float32(127)
    idv = np.where(amax > 0, np.float32(127) / np.where(amax > 0, amax, 1), 0).astype(np.float32)
    q = np.round(b * idv)  # x86 takes 127 / max (not 1 / d) and rounds half to even
    return (q * d.astype(np.float16).astype(np.float64)).reshape(a.shape)


def forward(hp, t, tokens, ablate=None, q8=False):
    n = len(tokens)
    eps = hp["attention.layer_norm_rms_epsilon"]
    n_head, n_kv, d = hp["attention.head_count"], hp["attention.head_count_kv"], hp["attention.key_length"]
    n_swa, n_used = hp["attention.sliding_window"], hp["expert_used_count"]
    c, s = yarn_cos_sin(hp, n, d, ablate)
    c, s = c[:, None, :], s[:, None, :]

    def rope(a):
        a0, a1 = a[..., :d // 2], a[..., d // 2:]
        return np.concatenate([a0 * c - a1 * s, a0 * s + a1 * c], axis=-1)

    def b(name):
        return np.zeros_like(t[name]) if ablate == "biases" else t[name]

    x = t["token_embd.weight"][tokens]
    layers, routing = [], []
    stats = {"sink": [], "clamp": 0, "entries": 0, "gap": np.inf}
    for il in range(hp["block_count"]):
        p = f"blk.{il}."
        y = rms(x, t[p + "attn_norm.weight"], eps)
        q = (y @ t[p + "attn_q.weight"].T + b(p + "attn_q.bias")).reshape(n, n_head, d)
        k = (y @ t[p + "attn_k.weight"].T + b(p + "attn_k.bias")).reshape(n, n_kv, d)
        v = (y @ t[p + "attn_v.weight"].T + b(p + "attn_v.bias")).reshape(n, n_kv, d)
        q, k = rope(q), rope(k)
        pos = np.arange(n)
        vis = pos[None, :] <= pos[:, None]
        if il % 2 == 0 and ablate != "window":
            vis &= pos[:, None] - pos[None, :] < n_swa
        att = np.zeros((n, n_head, d))
        for h in range(n_head):
            g = h // (n_head // n_kv)
            a = np.where(vis, q[:, h] @ k[:, g].T / np.sqrt(d), -np.inf)
            sink = -np.inf if ablate == "sinks" else t[p + "attn_sinks.weight"][h]
            m = np.maximum(a.max(1), sink)[:, None]
            e = np.exp(a - m)
            den = e.sum(1, keepdims=True) + np.exp(sink - m)
            att[:, h] = (e / den) @ v[:, g]
            stats["sink"].append(float(np.mean(np.exp(sink - m) / den)))
        mix = att.reshape(n, n_head * d) @ t[p + "attn_output.weight"].T + b(p + "attn_output.bias")
        h_ = x + mix
        y = rms(h_, t[p + "post_attention_norm.weight"], eps)
        r = y @ t[p + "ffn_gate_inp.weight"].T + b(p + "ffn_gate_inp.bias")
        top = np.argsort(-r, axis=1, kind="stable")[:, :n_used]
        srt = -np.sort(-r, axis=1)
        stats["gap"] = min(stats["gap"], float(np.min(srt[:, n_used - 1] - srt[:, n_used])))
        moe = np.zeros_like(h_)
        for j in range(n):
            sel = r[j, top[j]]
            wsel = np.exp(sel - sel.max())
            wsel /= wsel.sum()
            yj = q8_0(y[j]) if q8 else y[j]
            for e_, we in zip(top[j], wsel):
                gg = t[p + "ffn_gate_exps.weight"][e_] @ yj + b(p + "ffn_gate_exps.bias")[e_]
                uu = t[p + "ffn_up_exps.weight"][e_] @ yj + b(p + "ffn_up_exps.bias")[e_]
                stats["clamp"] += int(np.sum(gg > LIMIT) + np.sum(np.abs(uu) > LIMIT))
                stats["entries"] += gg.size
                if ablate != "clamp":
                    gg, uu = np.minimum(gg, LIMIT), np.clip(uu, -LIMIT, LIMIT)
                act = gg / (1 + np.exp(-ALPHA * gg)) * (uu + 1)
                if q8:
                    act = q8_0(act)
                moe[j] += we * (t[p + "ffn_down_exps.weight"][e_] @ act + b(p + "ffn_down_exps.bias")[e_])
        x = h_ + moe
        layers.append((mix, x))
        routing.append((r, top))
    logits = rms(x, t["output_norm.weight"], eps) @ t["output.weight"].T
    return logits, layers, routing, stats


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("model")
    ap.add_argument("golden_dir")
    ap.add_argument("--ablate", choices=["sinks", "window", "yarn", "clamp", "biases"])
    args = ap.parse_args()
    meta, hp, t, types = load(args.model)
    print(f"{os.path.basename(args.model)}:")
    for k, v in meta.items():
        if not k.startswith("tokenizer.ggml.") or not isinstance(v, str) or not v.startswith("["):
            print(f"  {k} = {v}")
    by_type = {}
    for name, ty in types.items():
        by_type.setdefault(ty, []).append(name)
    for ty, names in sorted(by_type.items()):
        print(f"  {ty}: {len(names)} tensors ({', '.join(sorted({n.split('.', 2)[-1] if n.startswith('blk.') else n for n in names}))})")
    mxfp4 = any(ty == "MXFP4" for ty in types.values())
    bound = 1.0 if mxfp4 else 2e-2
    bad = False
    for path in sorted(glob.glob(os.path.join(args.golden_dir, "*-kvf32-nofa.json"))):
        g = json.load(open(path))
        n, n_vocab = g["n_tokens"], g["n_vocab"]
        ref = np.fromfile(os.path.join(args.golden_dir, g["logits_file"]), "<f4").reshape(n, n_vocab)
        logits, layers, routing, st = forward(hp, t, g["tokens"], args.ablate, mxfp4)
        d_logit = float(np.abs(logits - ref).max())
        line = f"{g['prompt_id']}: {n} tokens, max |logit diff| {d_logit:.3g} (logits' range {ref.min():.1f}..{ref.max():.1f})"
        if "layer_outputs" in g:
            lo = g["layer_outputs"]
            ref_l = np.fromfile(os.path.join(args.golden_dir, lo["file"]), "<f4").reshape(lo["shape"])
            rel = [float(np.abs(m - ref_l[il, 0]).max() / np.abs(ref_l[il, 0]).max())
                   for il, (m, _) in enumerate(layers)]
            line += ", attn_out max rel diff per layer " + " ".join(f"{r:.2g}" for r in rel)
        flips = 0
        for il, (r, top) in enumerate(routing):
            gr = g["routing"]["prompt"][str(il)]
            for j in range(n):
                srt = np.sort(np.array(gr["probs"][j]))[::-1]
                k = len(top[j])
                if srt[k - 1] - srt[k] > 1e-3 and sorted(top[j]) != sorted(gr["topk"][j]):
                    flips += 1
        line += (f", expert choices differing (gap > 1e-3): {flips}; sinks take {np.mean(st['sink']):.2f} of the "
                 f"attention (per layer and head {min(st['sink']):.2f}..{max(st['sink']):.2f}), clamps cut "
                 f"{st['clamp']} of {2 * st['entries']} gate/up entries, smallest router gap {st['gap']:.3g}")
        print(line)
        bad = bad or d_logit > bound or flips > 0
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
