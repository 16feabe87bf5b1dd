"""check_tiny_qwen35.py - a numpy forward pass of a qwen35moe or qwen3next GGUF (F32/F16
weights), held against llama.cpp's goldens for it.

Usage: python3 tools/goldens/check_tiny_qwen35.py MODEL.gguf GOLDEN_DIR
Needs numpy and the `gguf` package. For every "-kvf32-nofa" golden in GOLDEN_DIR it runs the
golden's prompt tokens through the model written out below from the architecture's definition
(not from llama.cpp's code), and prints the largest difference to llama.cpp's logits at every
position, to its per-layer outputs (<id>.layers.f32) and whether the experts chosen agree.
It is an independent check that the tiny models and their goldens mean what
tests/data/README.md says (head mapping, fused ssm_ba layout, IMRoPE = NEOX for text, gates),
and a plain reference for the engine's forward pass. Exit status 1 if a logit differs by more
than 2e-2 or an expert choice differs where the router's gap exceeds 1e-3.

The layer, per token t (one sequence, positions 0..n-1):
  x = embd(token); for each layer: h = x + mixer(rms(x) * attn_norm);
  x = h + moe(rms(h) * post_attention_norm); logits = output(rms(x) * output_norm).
  Gated DeltaNet mixer: qkv = W_qkv y, z = W_gate y; beta = sigmoid(W_beta y),
  g = softplus(W_alpha y + dt_bias) * ssm_a (qwen3next: W_ba y, per key head kh the block
  [beta x r, alpha x r], r = n_v / n_k, value head kh * r + j); causal depthwise conv of qkv
  over the last d_conv tokens (zeros before the first), SiLU; q, k, v split per head; q, k
  scaled to unit L2 norm (x / sqrt(|x|^2 + eps)); value head h reads key head h % n_k
  (qwen35moe) or h // r (qwen3next); q /= sqrt(head_dim); per value head the state S
  [d_k x d_v]: S *= exp(g); d = (v - k^T S) * beta; S += k d^T; o = q^T S;
  out = W_out concat_h(rms(o_h) * ssm_norm * silu(z_h)).
  Full attention: W_q y gives per head [q (d), gate (d)]; k, v; q, k RMS-normed per head
  (attn_q_norm, attn_k_norm); NEOX RoPE on the first n_rot dims (base^(-2i/n_rot));
  causal softmax(q k^T / sqrt(d)) v, query head h reads KV head h // (n_head / n_kv);
  out = W_o (attn * sigmoid(gate)).
  MoE: p = softmax(W_router y); top-k; weights renormalised to sum 1; sum_e w_e
  down_e(silu(gate_e y) * up_e y) + sigmoid(w_shexp_gate . y) * down_s(silu(gate_s y) * up_s y).
"""

import glob
import json
import os
import sys

import numpy as np
import gguf


def load(path):
    r = gguf.GGUFReader(path)
    arch = bytes(r.fields["general.architecture"].parts[-1]).decode()

    def kv(key):
        f = r.fields[f"{arch}.{key}"]
        v = [f.parts[i].tolist() for i in f.data]
        return v if len(v) > 1 else v[0][0]

    hp = {k: kv(k) for k in ("embedding_length", "block_count", "attention.head_count",
                             "attention.head_count_kv", "attention.key_length",
                             "rope.dimension_count", "rope.freq_base",
                             "attention.layer_norm_rms_epsilon", "expert_count",
                             "expert_used_count", "ssm.conv_kernel", "ssm.state_size",
                             "ssm.group_count", "ssm.time_step_rank", "full_attention_interval")}
    t = {}
    for ten in r.tensors:
        if ten.tensor_type not in (gguf.GGMLQuantizationType.F32, gguf.GGMLQuantizationType.F16):
            sys.exit(f"{path}: {ten.name} is {ten.tensor_type.name}; this check reads F32/F16 only")
        shape = [int(x) for x in reversed(ten.shape)]  # numpy order
        t[ten.name] = np.array(ten.data, dtype=np.float32).reshape(shape)
    return arch, hp, t


def rms(x, w, eps):
    return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps) * w


def silu(x):
    return x / (1.0 + np.exp(-x))


def sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


def forward(arch, hp, t, tokens):
    n = len(tokens)
    eps = hp["attention.layer_norm_rms_epsilon"]
    x = t["token_embd.weight"][tokens].astype(np.float64)
    n_k, n_v, dh = hp["ssm.group_count"], hp["ssm.time_step_rank"], hp["ssm.state_size"]
    ratio, d_conv = n_v // n_k, hp["ssm.conv_kernel"]
    n_head, n_kv = hp["attention.head_count"], hp["attention.head_count_kv"]
    hd = hp["attention.key_length"]
    n_rot, base = hp["rope.dimension_count"], hp["rope.freq_base"]
    n_used = hp["expert_used_count"]
    layers, routing = [], []
    for il in range(hp["block_count"]):
        p = f"blk.{il}."
        y = rms(x, t[p + "attn_norm.weight"], eps)
        if (il + 1) % hp["full_attention_interval"] != 0:
            qkv = y @ t[p + "attn_qkv.weight"].T
            z = (y @ t[p + "attn_gate.weight"].T).reshape(n, n_v, dh)
            if arch == "qwen35moe":
                beta = sigmoid(y @ t[p + "ssm_beta.weight"].T)
                alpha = y @ t[p + "ssm_alpha.weight"].T
            else:
                ba = (y @ t[p + "ssm_ba.weight"].T).reshape(n, n_k, 2 * ratio)
                beta = sigmoid(ba[:, :, :ratio].reshape(n, n_v))
                alpha = ba[:, :, ratio:].reshape(n, n_v)
            g = np.logaddexp(0.0, alpha + t[p + "ssm_dt.bias"]) * t[p + "ssm_a"]
            w = t[p + "ssm_conv1d.weight"]  # [conv_dim, d_conv]; the last column: this token
            padded = np.concatenate([np.zeros((d_conv - 1, qkv.shape[1])), qkv])
            conv = silu(sum(padded[j:j + n] * w[:, j] for j in range(d_conv)))
            kd = n_k * dh
            q = conv[:, :kd].reshape(n, n_k, dh)
            k = conv[:, kd:2 * kd].reshape(n, n_k, dh)
            v = conv[:, 2 * kd:].reshape(n, n_v, dh)
            q = q / np.sqrt(np.sum(q * q, -1, keepdims=True) + eps) / np.sqrt(dh)
            k = k / np.sqrt(np.sum(k * k, -1, keepdims=True) + eps)
            kh = [h % n_k if arch == "qwen35moe" else h // ratio for h in range(n_v)]
            o = np.zeros((n, n_v, dh))
            for h in range(n_v):
                S = np.zeros((dh, dh))
                for j in range(n):
                    kk, qq = k[j, kh[h]], q[j, kh[h]]
                    S *= np.exp(g[j, h])
                    d = (v[j, h] - kk @ S) * beta[j, h]
                    S += np.outer(kk, d)
                    o[j, h] = qq @ S
            o = rms(o, t[p + "ssm_norm.weight"], eps) * silu(z)
            mix = o.reshape(n, n_v * dh) @ t[p + "ssm_out.weight"].T
        else:
            qg = (y @ t[p + "attn_q.weight"].T).reshape(n, n_head, 2 * hd)
            q, gate = qg[:, :, :hd], qg[:, :, hd:]
            k = (y @ t[p + "attn_k.weight"].T).reshape(n, n_kv, hd)
            v = (y @ t[p + "attn_v.weight"].T).reshape(n, n_kv, hd)
            q = rms(q, t[p + "attn_q_norm.weight"], eps)
            k = rms(k, t[p + "attn_k_norm.weight"], eps)
            half = n_rot // 2
            theta = np.arange(n)[:, None] * base ** (-2.0 * np.arange(half) / n_rot)
            c, s = np.cos(theta)[:, None, :], np.sin(theta)[:, None, :]

            def rope(a):
                a = a.copy()
                a0, a1 = a[..., :half].copy(), a[..., half:n_rot].copy()
                a[..., :half], a[..., half:n_rot] = a0 * c - a1 * s, a0 * s + a1 * c
                return a

            q, k = rope(q), rope(k)
            att = np.zeros((n, n_head, hd))
            for h in range(n_head):
                g_kv = h // (n_head // n_kv)
                sc = q[:, h] @ k[:, g_kv].T / np.sqrt(hd)
                sc = np.where(np.tril(np.ones((n, n), bool)), sc, -np.inf)
                pr = np.exp(sc - sc.max(1, keepdims=True))
                att[:, h] = (pr / pr.sum(1, keepdims=True)) @ v[:, g_kv]
            mix = (att * sigmoid(gate)).reshape(n, n_head * hd) @ t[p + "attn_output.weight"].T
        h_ = x + mix
        y = rms(h_, t[p + "post_attention_norm.weight"], eps)
        logit = y @ t[p + "ffn_gate_inp.weight"].T
        pr = np.exp(logit - logit.max(1, keepdims=True))
        pr /= pr.sum(1, keepdims=True)
        top = np.argsort(-pr, axis=1, kind="stable")[:, :n_used]
        moe = np.zeros_like(h_)
        for j in range(n):
            wsel = pr[j, top[j]] / pr[j, top[j]].sum()
            for e, we in zip(top[j], wsel):
                a = silu(t[p + "ffn_gate_exps.weight"][e] @ y[j]) * (
                    t[p + "ffn_up_exps.weight"][e] @ y[j])
                moe[j] += we * (t[p + "ffn_down_exps.weight"][e] @ a)
        sh = silu(y @ t[p + "ffn_gate_shexp.weight"].T) * (y @ t[p + "ffn_up_shexp.weight"].T)
        sh_gate = sigmoid(y @ t[p + "ffn_gate_inp_shexp.weight"])[:, None]
        sh = (sh @ t[p + "ffn_down_shexp.weight"].T) * sh_gate
        x = h_ + moe + sh
        layers.append((mix, x))
        routing.append((pr, top))
    logits = rms(x, t["output_norm.weight"], eps) @ t["output.weight"].T
    return logits, layers, routing


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    arch, hp, t = load(sys.argv[1])
    bad = False
    for path in sorted(glob.glob(os.path.join(sys.argv[2], "*-kvf32-nofa.json"))):
        g = json.load(open(path))
        n, n_vocab = g["n_tokens"], g["n_vocab"]
        ref = np.fromfile(os.path.join(sys.argv[2], g["logits_file"]), "<f4").reshape(n, n_vocab)
        logits, layers, routing = forward(arch, hp, t, g["tokens"])
        d_logit = float(np.abs(logits - ref).max())
        line = f"{g['prompt_id']}: {n} tokens, max |logit diff| {d_logit:.3g}"
        if "layer_outputs" in g:
            lo = g["layer_outputs"]
            ref_l = np.fromfile(os.path.join(sys.argv[2], lo["file"]), "<f4").reshape(lo["shape"])
            rel = [float(np.abs(m - ref_l[il, 0]).max() / np.abs(ref_l[il, 0]).max())
                   for il, (m, _) in enumerate(layers)]
            line += ", mixer output max rel diff per layer " + " ".join(f"{r:.2g}" for r in rel)
        flips = 0
        for il, (pr, top) in enumerate(routing):
            r = g["routing"]["prompt"][str(il)]
            for j in range(n):
                s = np.sort(np.array(r["probs"][j]))[::-1]
                if s[len(top[j]) - 1] - s[len(top[j])] > 1e-3 and sorted(top[j]) != sorted(r["topk"][j]):
                    flips += 1
        line += f", expert choices differing (gap > 1e-3): {flips}"
        print(line)
        bad = bad or d_logit > 2e-2 or flips > 0
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
