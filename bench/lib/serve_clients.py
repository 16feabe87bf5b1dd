#!/usr/bin/env python3
"""Concurrent streaming clients for `moeinf serve` (bench/serve_parallel.sh). Standard library
only.

  serve_clients.py load --url URL --clients C --requests K --max-tokens N [--prompt-words W]
                        [--client-offset O] [--api-key KEY] [--json FILE]
      C threads, each sending K streaming /v1/completions requests one after another (greedy,
      max_tokens N, every request its own prompt), with /metrics read before and after.
      Prints one JSON object (and writes it to FILE): per request its status, time to the
      first streamed token, generated tokens (the stream's usage) and the times its decode
      began and ended; the load's figures (below); and the /metrics counters' differences.
      Aggregate decode tokens/s: the tokens after each request's first, over the seconds in
      which at least one request was between its first and its last token (the union of those
      intervals), as the server's moeinf_decode_tokens_per_second counts.

  serve_clients.py model < `moeinf inspect MODEL` output
      The weight bytes one forward pass reads, from the tensor table: prints JSON with
      dense_bytes (every tensor but the token embedding and the routed experts: read once per
      iteration whatever its tokens), expert_bytes (one routed expert of one layer: its gate,
      up and down parts), n_experts, moe_layers, expert_total (all routed experts' bytes) and
      kv_bytes_per_token (K and V of one position over all layers, f16).
"""
import argparse
import http.client
import json
import math
import re
import sys
import threading
import time
import urllib.parse

WORDS = ("the quick brown fox jumps over a lazy dog while seven red kites circle above "
         "an old stone bridge near the river where children learn to count stars and "
         "sing about winter mornings full of bread milk honey and warm light").split()


def prompt_for(client, req, words):
    """A prompt of `words` words, different for every (client, request) pair."""
    seed = client * 7919 + req * 104729 + 17
    out = [f"Story {client}.{req}:"]
    for i in range(words):
        seed = (seed * 1103515245 + 12345) & 0x7FFFFFFF
        out.append(WORDS[(seed >> 8) % len(WORDS)])
    return " ".join(out)


def get_metrics(url, key):
    """/metrics as {name_with_labels: value} (empty when unreachable)."""
    u = urllib.parse.urlsplit(url)
    try:
        c = http.client.HTTPConnection(u.hostname, u.port, timeout=30)
        c.request("GET", "/metrics", headers=auth(key))
        r = c.getresponse()
        text = r.read().decode()
        c.close()
    except OSError:
        return {}
    out = {}
    for line in text.splitlines():
        if line.startswith("#") or not line.strip():
            continue
        name, _, value = line.rpartition(" ")
        try:
            out[name] = float(value)
        except ValueError:
            pass
    return out


def auth(key):
    return {"Authorization": f"Bearer {key}"} if key else {}


def stream_request(url, key, prompt, max_tokens):
    """One streaming completion; returns its record."""
    u = urllib.parse.urlsplit(url)
    body = json.dumps({"prompt": prompt, "max_tokens": max_tokens, "temperature": 0,
                       "stream": True, "stream_options": {"include_usage": True}})
    rec = {"status": 0, "ttft": None, "tokens": 0, "first": None, "last": None, "error": None}
    t0 = time.monotonic()
    rec["sent"] = t0
    try:
        c = http.client.HTTPConnection(u.hostname, u.port, timeout=600)
        h = {"Content-Type": "application/json"}
        h.update(auth(key))
        c.request("POST", "/v1/completions", body=body, headers=h)
        r = c.getresponse()
        rec["status"] = r.status
        if r.status != 200:
            rec["error"] = r.read().decode(errors="replace")[:200]
            c.close()
            return rec
        pieces = 0
        while True:
            line = r.readline()
            if not line:
                break
            line = line.strip()
            if not line.startswith(b"data: "):
                continue
            data = line[6:]
            if data == b"[DONE]":
                break
            ev = json.loads(data)
            if ev.get("choices"):
                now = time.monotonic()
                if rec["first"] is None:
                    rec["first"] = now
                    rec["ttft"] = now - t0
                rec["last"] = now
                pieces += 1
            if ev.get("usage"):
                rec["tokens"] = ev["usage"].get("completion_tokens", 0)
            if ev.get("error"):
                rec["error"] = str(ev["error"])[:200]
        if not rec["tokens"]:
            rec["tokens"] = pieces
        c.close()
    except (OSError, http.client.HTTPException, ValueError) as e:
        rec["error"] = f"{type(e).__name__}: {e}"
    rec["end"] = time.monotonic()
    return rec


def percentile(xs, p):
    """The p-th percentile of xs by nearest rank (the ceil(p / 100 n)-th smallest: of two
    values, p50 is the smaller); None when empty."""
    if not xs:
        return None
    xs = sorted(xs)
    k = max(0, min(len(xs) - 1, math.ceil(p / 100 * len(xs) - 1e-9) - 1))
    return xs[k]


def union_seconds(intervals):
    total = 0.0
    end = None
    start = None
    for a, b in sorted(intervals):
        if end is None or a > end:
            if end is not None:
                total += end - start
            start, end = a, b
        else:
            end = max(end, b)
    if end is not None:
        total += end - start
    return total


def load(a):
    before = get_metrics(a.url, a.api_key)
    recs = [[] for _ in range(a.clients)]

    def client(i):
        for j in range(a.requests):
            prompt = prompt_for(a.client_offset + i, j, a.prompt_words)
            recs[i].append(stream_request(a.url, a.api_key, prompt, a.max_tokens))

    t0 = time.monotonic()
    threads = [threading.Thread(target=client, args=(i,)) for i in range(a.clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.monotonic() - t0
    after = get_metrics(a.url, a.api_key)
    flat = [r for rs in recs for r in rs]
    good = [r for r in flat if r["status"] == 200 and not r["error"] and r["first"] is not None]
    tokens = sum(r["tokens"] for r in good)
    decode_tokens = sum(max(0, r["tokens"] - 1) for r in good)
    decode_wall = union_seconds([(r["first"], r["last"]) for r in good])
    ttft = [r["ttft"] for r in good]
    delta = {k: after[k] - before.get(k, 0.0) for k in after if not k.endswith("_per_second")}
    gauges = {k: v for k, v in after.items() if k.endswith("_per_second")}
    out = {
        "clients": a.clients, "requests": len(flat), "ok": len(good),
        "failed": [r["error"] or r["status"] for r in flat if r not in good][:5],
        "wall_s": wall, "tokens": tokens, "decode_tokens": decode_tokens,
        "decode_wall_s": decode_wall,
        "decode_tok_s": decode_tokens / decode_wall if decode_wall > 0 else 0.0,
        "tok_s_wall": tokens / wall if wall > 0 else 0.0,
        "ttft_p50": percentile(ttft, 50), "ttft_p90": percentile(ttft, 90), "ttft": sorted(ttft),
        "metrics_delta": delta, "metrics_gauges": gauges,
    }
    text = json.dumps(out, indent=1, sort_keys=True)
    if a.json:
        with open(a.json, "w") as f:
            f.write(text + "\n")
    print(text)
    return 0 if len(good) == len(flat) else 1


def model(_a):
    text = sys.stdin.read()
    meta = {}
    for m in re.finditer(r"^\s+(\S+)\s+(?:u32|i32|u64|f32)\s+=\s+(\S+)$", text, re.M):
        meta[m.group(1)] = m.group(2)
    arch = re.search(r'general\.architecture\s+string\s+=\s+"([^"]+)"', text).group(1)
    dense = 0
    exps = {}
    n_experts = 0
    for m in re.finditer(r"^\s+\d+\s+(\S+)\s+\S+\s+\[([0-9, ]+)\]\s+\d+\s+(\d+)$", text, re.M):
        name, shape, size = m.group(1), [int(x) for x in m.group(2).split(",")], int(m.group(3))
        if name == "token_embd.weight":
            continue  # one row per token
        if "_exps." in name:
            layer = name.split(".")[1]
            exps[layer] = exps.get(layer, 0) + size
            n_experts = shape[-1]
        else:
            dense += size
    n_layer = int(meta[f"{arch}.block_count"])
    heads_kv = int(meta.get(f"{arch}.attention.head_count_kv",
                            meta.get(f"{arch}.attention.head_count", 1)))
    head_k = int(meta.get(f"{arch}.attention.key_length", 0)) or (
        int(meta[f"{arch}.embedding_length"]) // int(meta[f"{arch}.attention.head_count"]))
    head_v = int(meta.get(f"{arch}.attention.value_length", 0)) or head_k
    total = sum(exps.values())
    print(json.dumps({
        "dense_bytes": dense,
        "expert_bytes": total // max(1, len(exps) * n_experts),
        "n_experts": n_experts, "moe_layers": len(exps), "expert_total": total,
        "kv_bytes_per_token": n_layer * heads_kv * (head_k + head_v) * 2,
    }))
    return 0


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    lp = sub.add_parser("load")
    lp.add_argument("--url", required=True)
    lp.add_argument("--clients", type=int, required=True)
    lp.add_argument("--requests", type=int, default=4)
    lp.add_argument("--max-tokens", type=int, default=64)
    lp.add_argument("--prompt-words", type=int, default=12)
    lp.add_argument("--client-offset", type=int, default=0,
                    help="number the clients from this (other prompts)")
    lp.add_argument("--api-key")
    lp.add_argument("--json")
    sub.add_parser("model")
    a = p.parse_args()
    return load(a) if a.cmd == "load" else model(a)


if __name__ == "__main__":
    sys.exit(main())
