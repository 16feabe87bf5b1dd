"""check_tiny_glm4moe.py - a numpy forward pass of a glm4moe GGUF, held against llama.cpp's goldens.

Usage: python3 tools/goldens/check_tiny_glm4moe.py MODEL.gguf GOLDEN_DIR [--ablate NAME]
Needs numpy and the `gguf` package. Output, exit status and bounds as check_tiny_deepseek2.py's
(whose loading, RoPE, MoE and comparison it uses). --ablate drops one feature to show that the
goldens depend on it: qkbias (no q/k/v biases), qknorm (no per-head q/k RMSNorm), partial
(RoPE over the whole head, not rope.dimension_count dims), adjacent (RoPE pairs (2i, 2i + 1)
instead of NEOX's (i, i + n_rot/2)), bias (no exp_probs_b), wnorm (the top-k weights not
renormalised), scale (expert_weights_scale ignored), shared (no shared expert).

The model (GLM-4.5's), per token t at position t (one sequence):
  x = token_embd[token]; per layer il < block_count - nextn_predict_layers (the trailing
  next-token-prediction blocks are not used):
    y = rms(x) * attn_norm  (rms(v) = v / sqrt(mean(v^2) + eps));
    q = W_q y + b_q, k = W_k y + b_k, v = W_v y + b_v, split into heads of head_dim d
      (attention.key_length); q_h = rms(q_h) * attn_q_norm, k_h = rms(k_h) * attn_k_norm
      (per head, when the file has them);
    RoPE NEOX on the first n_rot = rope.dimension_count dims of each q and k head: pairs
      (i, i + n_rot/2), i < n_rot/2, rotated by t base^(-2i/n_rot); the other d - n_rot dims
      unchanged;
    attention per query head h (KV head h // (n_head / n_head_kv)): a_j = q.k_j / sqrt(d),
      j <= t, softmax, out_h = sum_j p_j v_j;
    h = x + W_o concat(out_h); y = rms(h) * post_attention_norm;
    layers il < leading_dense_block_count: x = h + W_d (silu(W_g y) * W_u y);
    else the MoE of check_tiny_deepseek2.py with sigmoid gating when expert_gating_func is
      absent: P = sigmoid(W_r y), S = P + exp_probs_b, top-k of S, w = P[top],
      renormalised (expert_weights_norm), times expert_weights_scale, plus the shared expert;
  logits = output (rms(x) * output_norm), the hidden state rounded to F16 for an F16 output.
"""

import argparse
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from check_tiny_deepseek2 import (check, ffn, lin, lm_head, load, moe, report,  # noqa: E402
                                  rms, rope_angles, rope_apply)

ABLATIONS = ["qkbias", "qknorm", "partial", "adjacent", "bias", "wnorm", "scale", "shared"]


def forward(hp, t, types, tokens, ablate=None):
    n = len(tokens)
    eps = hp["attention.layer_norm_rms_epsilon"]
    n_head, n_kv, d = hp["attention.head_count"], hp["attention.head_count_kv"], hp["attention.key_length"]
    n_rot = d if ablate == "partial" else hp["rope.dimension_count"]
    c, s, _ = rope_angles(hp, n, n_rot, True)
    c, s = c[:, None, :], s[:, None, :]
    hp_moe = dict(hp)
    if ablate == "wnorm":
        hp_moe["expert_weights_norm"] = False
    if ablate == "scale":
        hp_moe["expert_weights_scale"] = 0.0
    n_layer = hp["block_count"] - hp.get("nextn_predict_layers", 0)
    x = t["token_embd.weight"][tokens]
    layers, routing, gaps = [], {}, []
    for il in range(n_layer):
        p = f"blk.{il}."
        y = rms(x, t[p + "attn_norm.weight"], eps)

        def proj(name, heads):
            a = lin(t, p + name + ".weight", y)
            if p + name + ".bias" in t and ablate != "qkbias":
                a = a + t[p + name + ".bias"]
            return a.reshape(n, heads, d)

        q, k, v = proj("attn_q", n_head), proj("attn_k", n_kv), proj("attn_v", n_kv)
        if p + "attn_q_norm.weight" in t and ablate != "qknorm":
            q = rms(q, t[p + "attn_q_norm.weight"], eps)
            k = rms(k, t[p + "attn_k_norm.weight"], eps)
        q = np.concatenate([rope_apply(q[..., :n_rot], c, s, ablate != "adjacent"), q[..., n_rot:]], -1)
        k = np.concatenate([rope_apply(k[..., :n_rot], c, s, ablate != "adjacent"), k[..., n_rot:]], -1)
        vis = np.arange(n)[None, :] <= np.arange(n)[:, None]
        att = np.zeros((n, n_head, d))
        for h in range(n_head):
            g = h // (n_head // n_kv)
            a = np.where(vis, q[:, h] @ k[:, g].T / np.sqrt(d), -np.inf)
            e = np.exp(a - a.max(1, keepdims=True))
            att[:, h] = (e / e.sum(1, keepdims=True)) @ v[:, g]
        mix = lin(t, p + "attn_output.weight", att.reshape(n, n_head * d))
        h_ = x + mix
        y = rms(h_, t[p + "post_attention_norm.weight"], eps)
        if il < hp.get("leading_dense_block_count", 0):
            x = h_ + ffn(t, p, y)
        else:
            out, probs, top, gap = moe(hp_moe, t, p, y, ablate, 2)
            x = h_ + out
            routing[il] = (probs, top)
            gaps.append(gap)
        layers.append((mix, x))
    return lm_head(t, x, eps), layers, routing, min(gaps)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("model")
    ap.add_argument("golden_dir")
    ap.add_argument("--ablate", choices=ABLATIONS)
    args = ap.parse_args()
    meta, hp, t, types = load(args.model, "glm4moe")
    report(args.model, meta, types)
    sys.exit(0 if check(args, forward, hp, t, types) else 1)


if __name__ == "__main__":
    main()
