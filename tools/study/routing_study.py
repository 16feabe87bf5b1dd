"""routing_study.py - the parts of the routing study that moeinf's tools do not compute.

  prompts OUT.tsv    the study prompts: paragraphs of the documents that tools/train held
                     apart (its "study" split: never trained on), PER_DOC from each document
                     with at least PER_DOC paragraphs, cut to its first half (at most
                     MAX_WORDS words), so that the model continues it rather than ends; one line
                     "subject<TAB>text" each, subject = the document (e.g. library/uuid).
  analyze MODEL TRACE IDS.tsv
                     reads the trace `moeinf run --record-routing` wrote for those prompts
                     (concatenated, in prompt order) and each request's token ids (prompt and
                     generated, from --print-ids), and prints as Markdown:
                     1. EAM matching by subject: cosine similarity of request EAMs
                        (M[l][e] = tokens that layer l routed to expert e, prefill and decode
                        together) between requests of one subject and of different subjects,
                        and how often a request's most similar other request is of its subject;
                     2. gate lookahead: layer l+1's router applied to layer l's output
                        (normalised with layer l+1's ffn_norm) predicts layer l+1's top-k:
                        precision and recall at k = 1..4 per layer, against the experts the
                        engine chose (the trace), next to two baselines: the k experts layer
                        l+1 uses most over the whole study, and uniform chance (k / E).
  skew HEATMAPS.txt  means over requests of what `moeinf trace heatmap --layers` printed for
                     each: top-1 share and distinct experts per phase (next to uniform
                     routing of the same tokens) and per layer.
The forward pass for (2) is numpy float32 on the dequantized GGUF (arch llama, as llama.cpp
computes it); the experts it chooses are checked against the trace (agreement printed).
"""

import collections
import json
import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
PER_DOC = int(os.environ.get("STUDY_PER_DOC", "40"))  # smaller for a quick try of the script
MAX_WORDS = 32


def cmd_prompts(out_path):
    sys.path.insert(0, os.path.join(HERE, "..", "train"))
    import corpus

    c = corpus.build(os.path.join(HERE, "..", "train", "work"))
    by_doc = collections.OrderedDict()
    for s in c["study"]:
        by_doc.setdefault(s["doc"], []).append(s["text"])
    n = 0
    with open(out_path, "w", encoding="utf-8") as f:
        for doc, pars in by_doc.items():
            if len(pars) < PER_DOC:
                continue
            subject = doc.replace(".rst.txt", "")
            for p in pars[:PER_DOC]:
                words = p.replace("\t", " ").split()
                words = words[: min(MAX_WORDS, len(words) // 2)]
                f.write(f"{subject}\t{' '.join(words)}\n")
                n += 1
    print(f"{n} prompts from {sum(len(p) >= PER_DOC for p in by_doc.values())} documents",
          file=sys.stderr)


def read_trace(path):
    """[(tag, [(phase, [[experts of layer 0], ...]) per token])], n_layers, n_experts, top_k."""
    reqs, meta, cur, cur_id = [], {}, None, None
    tags = []
    for line in open(path):
        if line.startswith("# req "):
            tags.append(line.split()[3])
        elif line.startswith("# ") and ":" in line:
            k, v = line[2:].split(":", 1)
            meta[k.strip()] = v.strip()
        elif line[0].isdigit():
            rid, phase, _, ex = line.split()
            if rid != cur_id:
                cur, cur_id = [], rid
                reqs.append(cur)
            cur.append((phase, [[int(e) for e in g.split(",")] for g in ex.split("|")]))
    return list(zip(tags, reqs)), int(meta["n_layers"]), int(meta["n_experts"]), int(meta["top_k"])


def eam(tokens, L, E):
    m = np.zeros((L, E))
    for _, layers in tokens:
        for il, ex in enumerate(layers):
            m[il, ex] += 1
    return m.ravel()


def eam_matching(reqs, L, E):
    subj = [t.rsplit("/", 1)[0] for t, _ in reqs]
    v = np.array([eam(toks, L, E) for _, toks in reqs])
    v = v / np.linalg.norm(v, axis=1, keepdims=True)
    sim = v @ v.T
    n = len(reqs)
    same = np.array([[subj[i] == subj[j] for j in range(n)] for i in range(n)])
    off = ~np.eye(n, dtype=bool)
    s_same, s_diff = sim[same & off].mean(), sim[~same].mean()
    np.fill_diagonal(sim, -np.inf)
    nn = sim.argmax(axis=1)
    hit = np.mean([subj[i] == subj[nn[i]] for i in range(n)])
    counts = collections.Counter(subj)
    chance = np.mean([(counts[s] - 1) / (n - 1) for s in subj])
    print("| requests | subjects | cosine, same subject | cosine, other subjects | nearest request "
          "of the same subject | chance |")
    print("|---|---|---|---|---|---|")
    print(f"| {n} | {len(counts)} | {s_same:.3f} | {s_diff:.3f} | {hit:.3f} | {chance:.3f} |")
    return {"requests": n, "subjects": len(counts), "cos_same": s_same, "cos_diff": s_diff,
            "nearest_same": hit, "chance": chance}


class Model:
    """The GGUF's weights dequantized to float32, and llama.cpp's arch-llama forward pass."""

    def __init__(self, path):
        import gguf

        r = gguf.GGUFReader(path)
        f = {x.name: x for x in r.fields.values()}

        def val(key):
            fld = f[key]
            return fld.parts[fld.data[0]][0]

        self.L = int(val("llama.block_count"))
        self.H = int(val("llama.attention.head_count"))
        self.Hkv = int(val("llama.attention.head_count_kv"))
        self.E = int(val("llama.expert_count"))
        self.K = int(val("llama.expert_used_count"))
        self.eps = float(val("llama.attention.layer_norm_rms_epsilon"))
        self.base = float(val("llama.rope.freq_base"))
        self.w = {}
        for t in r.tensors:
            a = gguf.quants.dequantize(t.data, t.tensor_type).astype(np.float32)
            self.w[t.name] = a.reshape([int(x) for x in reversed(t.shape)])

    def norm(self, x, w):
        return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + self.eps) * w

    def rope(self, x):  # [T, H, hd], adjacent pairs
        T, _, hd = x.shape
        ang = np.arange(T)[:, None] * self.base ** (-np.arange(0, hd, 2) / hd)
        c, s = np.cos(ang)[:, None, :], np.sin(ang)[:, None, :]
        x0, x1 = x[..., 0::2], x[..., 1::2]
        return np.stack([x0 * c - x1 * s, x0 * s + x1 * c], axis=-1).reshape(x.shape)

    def topk(self, logits, k):
        p = np.exp(logits - logits.max(-1, keepdims=True))
        return np.argsort(-p, axis=-1, kind="stable")[:, :k]

    def run(self, ids):
        """Per layer: the chosen experts [T, K] and the lookahead scores for the next layer
        (router of l+1 on layer l's output) [T, E]."""
        w, T = self.w, len(ids)
        x = w["token_embd.weight"][ids]
        chosen, ahead = [], []
        mask = np.triu(np.full((T, T), -np.inf), 1)
        for il in range(self.L):
            b = f"blk.{il}."
            h = self.norm(x, w[b + "attn_norm.weight"])
            q = (h @ w[b + "attn_q.weight"].T).reshape(T, self.H, -1)
            k = (h @ w[b + "attn_k.weight"].T).reshape(T, self.Hkv, -1)
            v = (h @ w[b + "attn_v.weight"].T).reshape(T, self.Hkv, -1)
            q, k = self.rope(q), self.rope(k)
            g = self.H // self.Hkv
            out = np.zeros_like(q)
            for hh in range(self.H):
                s = q[:, hh] @ k[:, hh // g].T / np.sqrt(q.shape[-1]) + mask
                a = np.exp(s - s.max(-1, keepdims=True))
                out[:, hh] = (a / a.sum(-1, keepdims=True)) @ v[:, hh // g]
            x = x + out.reshape(T, -1) @ w[b + "attn_output.weight"].T
            h = self.norm(x, w[b + "ffn_norm.weight"])
            logits = h @ w[b + "ffn_gate_inp.weight"].T
            p = np.exp(logits - logits.max(-1, keepdims=True))
            p /= p.sum(-1, keepdims=True)
            sel = np.argsort(-p, axis=-1, kind="stable")[:, : self.K]
            chosen.append(sel)
            y = np.zeros_like(x)
            for t in range(T):
                ws = p[t, sel[t]] / p[t, sel[t]].sum()
                for e, we in zip(sel[t], ws):
                    gt = w[b + "ffn_gate_exps.weight"][e] @ h[t]
                    up = w[b + "ffn_up_exps.weight"][e] @ h[t]
                    y[t] += we * (w[b + "ffn_down_exps.weight"][e] @ (gt / (1 + np.exp(-gt)) * up))
            x = x + y
            if il + 1 < self.L:
                nb = f"blk.{il + 1}."
                ahead.append(self.norm(x, w[nb + "ffn_norm.weight"]) @ w[nb + "ffn_gate_inp.weight"].T)
        return chosen, ahead


def lookahead(model_path, reqs, ids_path, L, E, K):
    m = Model(model_path)
    ids = [[int(t) for t in line.split("\t")[1].split()] for line in open(ids_path)]
    assert len(ids) == len(reqs), f"{len(ids)} id lines for {len(reqs)} requests"
    ks = [1, 2, 3, 4]
    inter = np.zeros((L - 1, len(ks)))
    inter_pop = np.zeros((L - 1, len(ks)))
    n_tok, agree, total = 0, 0, 0
    prev_hit, prev_n = np.zeros(L - 1), 0  # the previous token's experts as the guess
    freq = np.zeros((L, E))
    for _, toks in reqs:
        for _, layers in toks:
            for il, ex in enumerate(layers):
                freq[il, ex] += 1
    popular = np.argsort(-freq, axis=1, kind="stable")
    for (tag, toks), seq in zip(reqs, ids):
        T = len(toks)  # the trace has every evaluated token; the last generated one is not
        chosen, ahead = m.run(np.array(seq[:T]))
        for il in range(L):
            actual = [set(t[1][il]) for t in toks]
            agree += sum(set(chosen[il][t]) == actual[t] for t in range(T))
            total += T
            if il == 0:
                continue
            order = np.argsort(-ahead[il - 1], axis=1, kind="stable")
            for ki, k in enumerate(ks):
                inter[il - 1, ki] += sum(len(set(order[t, :k]) & actual[t]) for t in range(T))
                inter_pop[il - 1, ki] += sum(len(set(popular[il, :k]) & actual[t])
                                             for t in range(T))
            prev_hit[il - 1] += sum(len(actual[t - 1] & actual[t]) for t in range(1, T))
        n_tok += T
        prev_n += T - 1
    print(f"\nThe numpy forward pass chose the engine's experts for {agree / total:.4f} of "
          f"{total} (token, layer) pairs (this float32 pass does not copy the engine's Q8_0 "
          f"activation rounding, which decides close router calls).\n")
    print("| predicted layer | " + " | ".join(f"P@{k} / R@{k}" for k in ks) + " |")
    print("|---|" + "---|" * len(ks))
    res = {}
    for il in range(1, L):
        cells, pops = [], []
        for ki, k in enumerate(ks):
            prec, rec = inter[il - 1, ki] / (n_tok * k), inter[il - 1, ki] / (n_tok * K)
            pp, pr = inter_pop[il - 1, ki] / (n_tok * k), inter_pop[il - 1, ki] / (n_tok * K)
            cells.append(f"{prec:.3f} / {rec:.3f} ({pp:.3f} / {pr:.3f})")
            res[f"layer{il}_k{k}"] = {"precision": prec, "recall": rec, "pop_precision": pp,
                                      "pop_recall": pr}
        print(f"| {il} (from layer {il - 1}) | " + " | ".join(cells) + " |")
    print("\nThe previous token's experts at the same layer as the guess (k = 2): precision "
          + ", ".join(f"layer {il}: {prev_hit[il - 1] / (prev_n * K):.3f}" for il in range(1, L))
          + ".")
    for il in range(1, L):
        res[f"layer{il}_previous_token_p2"] = prev_hit[il - 1] / (prev_n * K)
    print("\nIn parentheses: the popularity baseline (layer l+1's k most used experts over the "
          f"whole study). Uniform chance: precision = recall x {K} / k = {K}/{E} at k = {K}.")
    return res


def cmd_analyze(model_path, trace_path, ids_path):
    reqs, L, E, K = read_trace(trace_path)
    print("### EAM matching by subject\n")
    a = eam_matching(reqs, L, E)
    print("\n### Gate lookahead from the previous layer's output\n")
    b = lookahead(model_path, reqs, ids_path, L, E, K)
    with open(os.path.splitext(trace_path)[0] + "-analysis.json", "w") as f:
        json.dump({"eam": a, "lookahead": b}, f, indent=1)


def cmd_skew(path):
    summary = collections.defaultdict(list)  # (phase, column) -> values over requests
    per_layer = collections.defaultdict(list)  # (phase, layer, column)
    phase, last = None, None
    for line in open(path):
        f = line.split()
        if not f:
            continue
        if f[0] in ("prefill", "decode", "all") and len(f) >= 6 and f[1].isdigit():
            last = f[0]
            summary[(last, "top1")].append(float(f[2]))
            summary[(last, "distinct")].append(float(f[5]))
        elif f[0] == "uniform" and last:
            summary[(last, "top1_uniform")].append(float(f[1]))
            summary[(last, "distinct_uniform")].append(float(f[3]))
        elif len(f) == 3 and f[1] == "per" and f[2] == "layer":
            phase = f[0].rstrip(",")
        elif phase and f[0].isdigit() and len(f) == 4:
            per_layer[(phase, int(f[0]), "top1")].append(float(f[1]))
            per_layer[(phase, int(f[0]), "distinct")].append(float(f[3]))
    mean = lambda v: sum(v) / len(v)  # noqa: E731
    print("| phase | requests | top-1 share | uniform | distinct experts per layer | uniform |")
    print("|---|---|---|---|---|---|")
    for ph in ("prefill", "decode", "all"):
        if summary[(ph, "top1")]:
            print(f"| {ph} | {len(summary[(ph, 'top1')])} | {mean(summary[(ph, 'top1')]):.3f} | "
                  f"{mean(summary[(ph, 'top1_uniform')]):.3f} | "
                  f"{mean(summary[(ph, 'distinct')]):.1f} | "
                  f"{mean(summary[(ph, 'distinct_uniform')]):.1f} |")
    layers = sorted({k[1] for k in per_layer})
    print("\nper layer, all tokens of a request (mean over requests): top-1 share / distinct experts\n")
    print("| phase | " + " | ".join(f"layer {il}" for il in layers) + " |")
    print("|---|" + "---|" * len(layers))
    for ph in ("prefill", "decode", "all"):
        cells = [f"{mean(per_layer[(ph, il, 'top1')]):.3f} / {mean(per_layer[(ph, il, 'distinct')]):.1f}"
                 for il in layers if per_layer[(ph, il, "top1")]]
        if cells:
            print(f"| {ph} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "prompts":
        cmd_prompts(sys.argv[2])
    elif len(sys.argv) == 3 and sys.argv[1] == "skew":
        cmd_skew(sys.argv[2])
    elif len(sys.argv) == 5 and sys.argv[1] == "analyze":
        cmd_analyze(*sys.argv[2:])
    else:
        sys.exit(__doc__)
