#!/usr/bin/env python3
"""A load test of `moeinf serve` (run by tests/test_serve_load.c, or by hand):

  serve_load.py --bin MOEINF [--model FILE] [--clients 64] [--requests 3] [--seed 1]
                [--long-words 100] [--no-rss-check] [-- EXTRA SERVE OPTIONS]

Starts `moeinf serve` (the embedded default model unless --model) on a free loopback port with
--queue 48 --max-conns-per-ip 0, then C clients (threads, released together) each send R
completions with mixed prompt lengths (3, 12, 50 or 100 words: up to about 150 tokens), streamed or not,
and some leave on purpose: right after sending (while queued) or after the first streamed
event (mid-stream). Asserts:
  - every answer is 200 (a complete answer: JSON with a choice, or a stream ending in [DONE]
    after a chunk with a finish_reason), 503 with a JSON error (the queue is full), or the
    client's own disconnect; nothing else (a refused or reset connection, a 5xx but 503, a
    stream cut short, a timeout) is allowed;
  - the server's rejections counted in /metrics (moeinf_requests_rejected_total) are at
    least the 503s for a full queue that the staying clients saw (a 503 for too many open
    connections is not a rejected request);
  - the server's peak RSS (VmHWM) stays within idle RSS + C x 1 MiB, idle RSS being its RSS
    after one warm-up request (weights, KV cache, scratch, code: everything a request needs
    once): the load may add at most 1 MiB per client (a connection's thread stack, the
    connection's buffers, a job's text), however many requests pass;
  - afterwards the queue drains (/metrics: moeinf_queue_depth and moeinf_busy 0), the server
    answers the first greedy request again with the same text as before the load, and it
    exits 0 on SIGTERM.
Why these settings: all clients share 127.0.0.1, and the default --max-conns-per-ip 8 would
refuse connections 9..C outright (closed without an HTTP answer, the per-address abuse
limit, not what is tested here), so it is off. --queue 48: at most 48 requests wait, so with
64 clients released at once some get 503 (queue full) and most are served; the server takes
queue + parallel + 32 >= 80 connections (server.c: queue + parallel + 16 served, 16 more
answered 503 "too many open connections"), room for 64 clients and connections that clients
left but the server has not yet closed.
Prints a summary line; exit 0 when every check passes, 1 otherwise (each failure on stderr),
77 when the server cannot be started for want of something outside the test.
"""
import argparse
import http.client
import json
import os
import random
import re
import signal
import socket
import subprocess
import sys
import threading
import time

WORDS = ("a small red fox ran past the old mill and the miller's cat watched it go "
         "while rain fell on the green hills near the quiet town by the sea").split()
GREEDY = {"prompt": "Once upon a time", "max_tokens": 12, "temperature": 0}


def rss_kib(pid, field):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    return -1


def request(port, method, path, body=None, timeout=120):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    c.request(method, path, body=json.dumps(body) if body is not None else None,
              headers={"Content-Type": "application/json"} if body is not None else {})
    r = c.getresponse()
    data = r.read()
    c.close()
    return r.status, data


def metrics(port):
    st, data = request(port, "GET", "/metrics")
    out = {}
    for line in data.decode().splitlines():
        if line and not line.startswith("#"):
            k, _, v = line.rpartition(" ")
            out[k] = float(v)
    return out


def text_of(data):
    d = json.loads(data)
    return d["choices"][0]["text"]


def one_client(port, rnd, n_req, long_words, results, start):
    start.wait()
    for _ in range(n_req):
        n_words = rnd.choice([3, 12, long_words // 2, long_words])
        prompt = " ".join(rnd.choice(WORDS) for _ in range(n_words))
        stream = rnd.random() < 0.7
        leave = rnd.choice(["stay", "stay", "stay", "queued", "midstream"])
        if leave == "midstream" and not stream:
            leave = "stay"
        body = {"prompt": prompt, "max_tokens": rnd.choice([4, 8, 16]), "temperature": 0.8,
                "seed": rnd.randrange(1 << 30), "stream": stream}
        results.append(do_request(port, body, leave))


def do_request(port, body, leave):
    """One request; returns (outcome, detail): outcome 200, 503, 'cancel' or 'bad'."""
    payload = json.dumps(body).encode()
    try:
        s = socket.create_connection(("127.0.0.1", port), timeout=120)
    except OSError as e:
        return "bad", f"connect: {e}"
    try:
        s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                  b"Content-Type: application/json\r\nConnection: close\r\n"
                  + f"Content-Length: {len(payload)}\r\n\r\n".encode() + payload)
        if leave == "queued":
            return "cancel", "left after sending"
        f = s.makefile("rb")
        status_line = f.readline().decode(errors="replace")
        m = re.match(r"HTTP/1\.[01] (\d{3}) ", status_line)
        if not m:
            return "bad", f"status line {status_line!r}"
        status = int(m.group(1))
        headers = {}
        while True:
            line = f.readline().decode(errors="replace")
            if line in ("\r\n", "\n", ""):
                break
            k, _, v = line.partition(":")
            headers[k.strip().lower()] = v.strip()
        if status == 503:
            data = read_body(f, headers)
            err = json.loads(data).get("error")
            if not err:
                return "bad", f"503 without an error object: {data[:100]!r}"
            return 503, "queue" if "(--queue)" in err.get("message", "") else "connections"
        if status != 200:
            return "bad", f"status {status}: {read_body(f, headers)[:200]!r}"
        if not body["stream"]:
            d = json.loads(read_body(f, headers))
            if not d.get("choices") or d["choices"][0].get("finish_reason") not in ("stop",
                                                                                    "length"):
                return "bad", f"answer without a finished choice: {d}"
            return 200, ""
        # a stream: chunked transfer of SSE events
        events = 0
        finished = False
        for ev in sse_events(f, headers):
            if leave == "midstream":
                return "cancel", "left mid-stream"
            if ev == b"[DONE]":
                return (200, "") if finished else ("bad", "[DONE] without a finish_reason")
            d = json.loads(ev)
            if "error" in d:
                return "bad", f"error event {d}"
            events += 1
            for ch in d.get("choices", []):
                if ch.get("finish_reason") in ("stop", "length"):
                    finished = True
        return "bad", f"stream ended without [DONE] after {events} events"
    except (OSError, ValueError) as e:
        return "bad", f"{type(e).__name__}: {e}"
    finally:
        s.close()


def read_body(f, headers):
    if headers.get("transfer-encoding", "").lower() == "chunked":
        return b"".join(chunks(f))
    n = int(headers.get("content-length", "0"))
    return f.read(n)


def chunks(f):
    while True:
        size = int(f.readline().split(b";")[0].strip() or b"0", 16)
        if size == 0:
            f.readline()
            return
        data = f.read(size)
        f.readline()
        yield data


def sse_events(f, headers):
    buf = b""
    src = chunks(f) if headers.get("transfer-encoding", "").lower() == "chunked" else \
        iter(lambda: f.read1(4096), b"")
    for data in src:
        buf += data
        while b"\n\n" in buf:
            ev, buf = buf.split(b"\n\n", 1)
            if ev.startswith(b"data: "):
                yield ev[6:]


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--bin", required=True)
    p.add_argument("--model")
    p.add_argument("--clients", type=int, default=64)
    p.add_argument("--requests", type=int, default=3)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--long-words", type=int, default=100,
                   help="the longest prompts' words (a quarter of the prompts; another quarter "
                   "half as long)")
    p.add_argument("--no-rss-check", action="store_true",
                   help="skip the RSS bound (sanitizer builds: their shadow memory)")
    p.add_argument("extra", nargs="*")
    a = p.parse_args()
    failures = []

    def fail(msg):
        failures.append(msg)
        print(f"serve_load: FAIL: {msg}", file=sys.stderr)

    cmd = [a.bin, "serve", "--port", "0", "--queue", "48", "--max-conns-per-ip", "0",
           "-c", "1024", "-t", "2"]
    if a.model:
        cmd += ["-m", a.model]
    cmd += a.extra
    srv = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    line = srv.stdout.readline()
    m = re.search(r"listening on http://127\.0\.0\.1:(\d+)", line)
    if not m:
        srv.kill()
        print(f"serve_load: the server did not start: {line!r} {srv.stderr.read()[:500]}",
              file=sys.stderr)
        return 1
    port = int(m.group(1))
    drain = threading.Thread(target=lambda: srv.stderr.read(), daemon=True)
    drain.start()

    st, data = request(port, "POST", "/v1/completions", GREEDY)
    if st != 200:
        fail(f"warm-up request: {st} {data[:200]!r}")
        srv.kill()
        return 1
    before = text_of(data)
    idle = rss_kib(srv.pid, "VmRSS")
    m0 = metrics(port)

    results = []
    start = threading.Event()
    rnd = random.Random(a.seed)
    threads = [threading.Thread(target=one_client,
                                args=(port, random.Random(rnd.randrange(1 << 30)), a.requests,
                                      a.long_words, results, start))
               for _ in range(a.clients)]
    for t in threads:
        t.start()
    t0 = time.monotonic()
    start.set()
    for t in threads:
        t.join()
    wall = time.monotonic() - t0

    counts = {}
    for outcome, detail in results:
        counts[outcome] = counts.get(outcome, 0) + 1
        if outcome == "bad":
            fail(f"answer: {detail}")
    if len(results) != a.clients * a.requests:
        fail(f"{len(results)} outcomes for {a.clients * a.requests} requests")

    # the queue drains: what the clients left is cancelled or finishes
    for _ in range(300):
        m1 = metrics(port)
        if m1.get("moeinf_queue_depth") == 0 and m1.get("moeinf_busy") == 0:
            break
        time.sleep(0.1)
    else:
        fail(f"the queue did not drain: depth {m1.get('moeinf_queue_depth')}, "
             f"busy {m1.get('moeinf_busy')}")
    rejected = m1["moeinf_requests_rejected_total"] - m0["moeinf_requests_rejected_total"]
    cancelled = m1["moeinf_requests_cancelled_total"] - m0["moeinf_requests_cancelled_total"]
    queue_full = sum(1 for o, d in results if o == 503 and d == "queue")
    if rejected < queue_full:
        fail(f"/metrics counts {rejected:.0f} rejected, the clients saw {queue_full} 503s "
             "for a full queue")

    st, data = request(port, "POST", "/v1/completions", GREEDY)
    after = text_of(data) if st == 200 else None
    if st != 200 or after != before:
        fail(f"the final request: {st}, {after!r} != {before!r} before the load")
    peak = rss_kib(srv.pid, "VmHWM")
    bound = idle + a.clients * 1024
    if not a.no_rss_check and peak > bound:
        fail(f"peak RSS {peak} KiB > bound {bound} KiB (idle {idle} KiB + {a.clients} x 1 MiB)")

    srv.send_signal(signal.SIGTERM)
    try:
        rc = srv.wait(timeout=60)
    except subprocess.TimeoutExpired:
        srv.kill()
        rc = "none within 60 s"
    if rc != 0:
        fail(f"the server's exit code after SIGTERM: {rc}")

    print(f"serve_load: {len(results)} requests from {a.clients} clients in {wall:.1f} s: "
          f"{counts.get(200, 0)} answered 200, {counts.get(503, 0)} 503 ({queue_full} queue full, "
          f"{counts.get(503, 0) - queue_full} too many connections), "
          f"{counts.get('cancel', 0)} left by their client, {counts.get('bad', 0)} bad; "
          f"server: {rejected:.0f} rejected, {cancelled:.0f} cancelled; RSS idle {idle >> 10} "
          f"MiB, peak {peak >> 10} MiB, bound {bound >> 10} MiB"
          f"{' (not checked)' if a.no_rss_check else ''}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
