#!/usr/bin/env bash
# `moeinf serve` under 1, 2, 4 and 8 concurrent streaming HTTP clients on loopback (a bounded
# load: each client sends K streaming completions one after another, every one its own
# prompt, greedy, max_tokens N; bench/lib/serve_clients.py), on an OLMoE-1B-7B-shaped Q8_0
# file: once resident (the whole file in the page cache, no limit) and once with the expert
# cache at 25 % of the experts inside a memory cgroup, the file evicted first
# (bench/lib/cgroup.sh). Every client count gets a fresh server (with --parallel C where the
# server has --parallel; before continuous batching it runs one request at a time and the
# rest wait in its queue) and an unmeasured warm-up load (C clients, one request each, other
# prompts) before the measured one.
#
#   bench/serve_parallel.sh [-m MODEL] [-t THREADS] [--clients "1 2 4 8"] [-k 2] [-n 32]
#                           [--words 16] [--cache 25] [--runs "resident cache"] [--keep]
#                           [--build DIR] [-- EXTRA SERVE OPTIONS]
#
# Per client count it prints: aggregate decode tokens/s (the tokens after each request's
# first, over the seconds in which at least one request was between its first and its last
# token), p50 and p90 time to first token (from sending the request to its first streamed
# token), MiB read per generated token (/metrics: moeinf_expert_cache_read_bytes_total over
# moeinf_completion_tokens_total; prompt reads included), and the ratios to the 1-client run;
# "wall tok/s": generated tokens over the load's wall time.
# Beside the resident figures: the bound that the iterations' bytes give. Bytes per iteration
# = the weights every pass reads (all but the token embedding and the routed experts: the
# model's tensor table, `moeinf inspect`) + distinct experts per iteration x one expert's
# bytes; the distinct experts are what the cache run at the same client count counted
# (moeinf_expert_cache_accesses_total: one per distinct expert per layer and forward pass)
# over its forward passes (moeinf_batch_tokens_count where the server has it, else estimated:
# one per request's prompt and one per generated token, over C where the server batches, which
# counts too few passes and so gives a bound too high; the table says so); the bound =
# generated tokens / (all the passes' bytes / memory bandwidth), the bandwidth measured here
# (bench_bandwidth, the run's threads, best of before and after), and "of bound" is the
# generated tokens over the load's whole wall time against it (both count the prompts'
# passes). Compute is not in the bound. The resident run's MiB per token is that estimate of the weight bytes it streamed.
#
# MODEL defaults to $MOEINF_BENCH_MODELS/olmoe-shape-16-q8_0.gguf ($MOEINF_BENCH_MODELS
# defaults to bench/models; 7.1 GB). When missing it is written by `moeinf gen-model --preset
# olmoe-1b-7b --type q8_0 --seed 7` (a few minutes) and deleted at exit unless --keep.
# The cgroup's limit: the cache's bytes + every other weight + the KV cache + 512 MiB.
# Needs root for the cgroup run (--runs resident skips it). --build DIR: the binaries of DIR
# as they are (default: build/release, built first).
set -euo pipefail
cd "$(dirname "$0")/.."
models=${MOEINF_BENCH_MODELS:-bench/models}
model="" threads=$(nproc) clients="1 2 4 8" per_client=2 gen=32 words=16 cache_pct=25
runs="resident cache" keep=0 extra=() build=""
while [ $# -gt 0 ]; do
  case "$1" in
    -m) model=$2; shift 2 ;;
    -t) threads=$2; shift 2 ;;
    --clients) clients=$2; shift 2 ;;
    -k) per_client=$2; shift 2 ;;
    -n) gen=$2; shift 2 ;;
    --words) words=$2; shift 2 ;;
    --cache) cache_pct=$2; shift 2 ;;
    --runs) runs=$2; shift 2 ;;
    --keep) keep=1; shift ;;
    --build) build=$2; shift 2 ;;
    --) shift; extra=("$@"); break ;;
    *) echo "usage: $0 [-m MODEL] [-t N] [--clients \"1 2 4 8\"] [-k N] [-n N] [--words N]" \
         "[--cache PCT] [--runs \"resident cache\"] [--keep] [-- SERVE OPTIONS]" >&2
       exit 2 ;;
  esac
done

if [ -z "$build" ]; then
  build=build/release
  cmake --preset release >/dev/null
  cmake --build build/release -j"$(nproc)" --target moeinf bench_bandwidth >/dev/null
fi
bin=$build/moeinf
py=bench/lib/serve_clients.py
out=$(mktemp -d)
made=""
server_pid=""
. bench/lib/cgroup.sh
cleanup() {
  if [ -n "$server_pid" ]; then kill "$server_pid" 2>/dev/null || true; wait "$server_pid" || true; fi
  cgroup_cleanup
  rm -rf "$out"
  if [ -n "$made" ] && [ "$keep" = 0 ]; then rm -f "$made"; fi
}
trap cleanup EXIT

if [ -z "$model" ]; then
  model=$models/olmoe-shape-16-q8_0.gguf
  if [ ! -f "$model" ]; then
    mkdir -p "$models"
    free_gb=$(df -P --block-size=1G "$models" | awk 'NR == 2 { print $4 }')
    if [ "$free_gb" -lt 9 ]; then
      echo "$models: ${free_gb} GB free; the model needs 7.1 GB (and 2 to spare)" >&2
      exit 1
    fi
    echo "writing $model ..." >&2
    made=$model
    "$bin" gen-model -o "$model" --preset olmoe-1b-7b --type q8_0 --seed 7 >/dev/null
  fi
fi
size=$(stat -c %s "$model")
"$bin" inspect "$model" | python3 "$py" model >"$out/model.json"
mj() { python3 -c "import json, sys; print(json.load(open('$out/model.json'))['$1'])"; }
dense=$(mj dense_bytes) expert=$(mj expert_bytes) expert_total=$(mj expert_total)
kv_tok=$(mj kv_bytes_per_token)

parallel=0
# the help into a variable first: grep -q leaving early would kill the writer (SIGPIPE), which
# pipefail counts as a failure
serve_help=$("$bin" serve --help 2>&1 || true)
case $serve_help in *--parallel*) parallel=1 ;; esac
max_c=0
for c in $clients; do [ "$c" -gt "$max_c" ] && max_c=$c; done
# context per sequence: the prompt (about 2 tokens a word) and the generation, with room
per_seq=$(((words * 2 + 16 + gen + 63) / 64 * 64))

bw() { "$build"/bench_bandwidth -t "$threads" -s 1024 2>/dev/null; }
bw_a=$(bw)

# start_server LOG CGROUP_LIMIT(0: none) ARGS...: starts `moeinf serve` in the background,
# waits for its port ($port)
start_server() {
  local log=$1 limit=$2
  shift 2
  if [ "$limit" != 0 ]; then
    cgroup_make "$limit"
    bash -c 'echo $$ >"$0/cgroup.procs" && exec "$@"' "$cg" "$bin" serve -m "$model" \
      --port 0 "$@" >"$log" 2>&1 &
  else
    "$bin" serve -m "$model" --port 0 "$@" >"$log" 2>&1 &
  fi
  server_pid=$!
  port=""
  for _ in $(seq 600); do
    port=$(sed -n 's/^moeinf: listening on http:\/\/127.0.0.1:\([0-9]*\)$/\1/p' "$log")
    [ -n "$port" ] && return 0
    kill -0 "$server_pid" 2>/dev/null || break
    sleep 0.5
  done
  echo "the server did not start:" >&2
  tail -5 "$log" >&2
  exit 1
}

# stop_server: SIGTERM, wait; prints the cgroup's peak bytes (0 without one)
stop_server() {
  kill "$server_pid"
  wait "$server_pid" || true
  server_pid=""
  if [ -n "${cg:-}" ]; then
    if [ "$cgv" = 1 ]; then cat "$cg/memory.max_usage_in_bytes"; else cat "$cg/memory.peak"; fi
    for _ in $(seq 50); do rmdir "$cg" 2>/dev/null && break; sleep 0.1; done # threads leaving
    cg=""
  else
    echo 0
  fi
}

for run in $runs; do
  if [ "$run" = cache ]; then
    cgroup_setup
  else
    cat "$model" >/dev/null
  fi
  for c in $clients; do
    args=(-t "$threads" -c $((per_seq * c)) --queue $((max_c * per_client + 8)) \
          --max-conns-per-ip 0)
    [ "$parallel" = 1 ] && args+=(--parallel "$c")
    limit=0
    if [ "$run" = cache ]; then
      args+=(--expert-cache "$cache_pct%")
      limit=$((expert_total * cache_pct / 100 + dense + kv_tok * per_seq * c + (512 << 20)))
    fi
    start_server "$out/server-$run-$c.log" "$limit" "${args[@]}" "${extra[@]}"
    url=http://127.0.0.1:$port
    # warm-up: other prompts (client ids past the measured ones), not measured
    python3 "$py" load --url "$url" --clients "$c" --requests 1 --max-tokens "$gen" \
      --prompt-words "$words" --client-offset 1000 >/dev/null
    python3 "$py" load --url "$url" --clients "$c" --requests "$per_client" \
      --max-tokens "$gen" --prompt-words "$words" --json "$out/$run-$c.json" >/dev/null
    echo "$(stop_server)" >"$out/peak-$run-$c"
    echo "$run, $c clients: $(python3 -c "import json; d = json.load(open('$out/$run-$c.json'))
print('%.2f tok/s, ttft p50 %.2f s' % (d['decode_tok_s'], d['ttft_p50']))")" >&2
  done
done
bw_b=$(bw)
bwbest=$(awk -v a="$bw_a" -v b="$bw_b" 'BEGIN { print (a > b ? a : b) }')

echo "model: $model ($(awk -v s="$size" 'BEGIN { printf "%.2f GB", s / 1e9 }')), threads $threads"
echo "cpu: $(lscpu | sed -n 's/^Model name: *//p' | head -1), $(nproc) CPUs this process may use"
echo "server: $("$bin" --version 2>&1 | head -1), $([ "$parallel" = 1 ] && \
  echo "--parallel C (C = the clients)" || echo "no --parallel: one request at a time, the rest queued")"
echo "load: C clients x $per_client streaming requests, prompts of $words words (each its own)," \
  "max_tokens $gen, temperature 0; after a warm-up of C requests"
echo "memory bandwidth (bench_bandwidth -t $threads, best of before and after): $bwbest GB/s"
echo "per pass: $(awk -v d="$dense" 'BEGIN { printf "%.1f", d / 1048576 }') MiB of weights" \
  "outside the routed experts, $(awk -v e="$expert" 'BEGIN { printf "%.2f", e / 1048576 }')" \
  "MiB per distinct expert and layer"
python3 - "$out" "$clients" "$runs" "$dense" "$expert" "$bwbest" "$cache_pct" "$parallel" <<'EOF'
import json, os, sys
out, clients, runs, dense, expert, bw, pct, parallel = sys.argv[1:]
parallel = parallel == "1"
estimated = []
clients = [int(c) for c in clients.split()]
runs = runs.split()
dense, expert, bw = float(dense), float(expert), float(bw) * 1e9

def load(run, c):
    p = os.path.join(out, f"{run}-{c}.json")
    return json.load(open(p)) if os.path.exists(p) else None

def passes(d, c):
    """forward passes of the load: the server's count, else one per request's prompt and one
    per generated token, over the clients decoding together where the server batches
    (estimated: they are not all decoding all the time)"""
    m = d["metrics_delta"]
    if "moeinf_batch_tokens_count" in m:
        return m["moeinf_batch_tokens_count"]
    if parallel and c > 1 and c not in estimated:
        estimated.append(c)
    return m.get("moeinf_completion_tokens_total", 0) / (c if parallel else 1) + \
        m.get("moeinf_completions_total", 0)

def bound(c):
    """generated tokens per second that the passes' bytes allow at the resident speed"""
    d = load("cache", c)
    if not d or "moeinf_expert_cache_accesses_total" not in d["metrics_delta"]:
        return None, None, None
    m = d["metrics_delta"]
    n = passes(d, c)
    toks = m.get("moeinf_completion_tokens_total")
    if n <= 0 or not toks:
        return None, None, None
    experts = m["moeinf_expert_cache_accesses_total"] / n
    total = n * dense + m["moeinf_expert_cache_accesses_total"] * expert
    return toks / (total / bw), experts, total / toks

for run in runs:
    title = ("resident (file in the page cache, no limit; MiB/tok: the weights streamed, "
             "estimated as for the bound)" if run == "resident" else
             f"expert cache {pct} % of the experts, memory cgroup, file evicted first "
             "(MiB/tok: read from the file)")
    print(f"\n{run}: {title}")
    hdr = f"{'clients':>7} {'decode tok/s':>12} {'x 1 client':>10} {'wall tok/s':>10} {'ttft p50 s':>10} " \
          f"{'p90 s':>7} {'p50 x 1':>7} {'MiB read/tok':>12} {'hit':>5} {'peak MiB':>8}"
    if run == "resident":
        hdr += f" {'bound tok/s':>11} {'of bound':>8} {'experts/pass':>12}"
    print(hdr)
    base = load(run, clients[0])
    for c in clients:
        d = load(run, c)
        if not d:
            continue
        m = d["metrics_delta"]
        toks = m.get("moeinf_completion_tokens_total", 0)
        mib = m.get("moeinf_expert_cache_read_bytes_total")
        acc = m.get("moeinf_expert_cache_accesses_total")
        hit = m.get("moeinf_expert_cache_hits_total")
        peak = int(open(os.path.join(out, f"peak-{run}-{c}")).read().strip() or 0) >> 20
        b, e, per_tok = bound(c) if run == "resident" else (None, None, None)
        if mib is None and per_tok is not None:
            mib = per_tok * toks  # resident: the weights streamed (estimated)
        line = f"{c:>7} {d['decode_tok_s']:>12.2f} {d['decode_tok_s'] / base['decode_tok_s']:>10.2f} " \
               f"{d['tok_s_wall']:>10.2f} " \
               f"{d['ttft_p50']:>10.3f} {d['ttft_p90']:>7.3f} {d['ttft_p50'] / base['ttft_p50']:>7.2f} " \
               + (f"{mib / toks / 1048576:>12.1f}" if mib is not None and toks else f"{'-':>12}") \
               + (f" {hit / acc:>5.2f}" if acc else f" {'-':>5}") \
               + (f" {peak:>8}" if peak else f" {'-':>8}")
        if run == "resident":
            line += (f" {b:>11.2f} {d['tok_s_wall'] / b:>8.2f} {e:>12.1f}" if b else
                     f" {'-':>11} {'-':>8} {'-':>12}")
        if d["ok"] != d["requests"]:
            line += f"  ({d['requests'] - d['ok']} failed: {d['failed'][0]})"
        print(line)
if estimated:
    print(f"\nbound at {', '.join(map(str, estimated))} clients: the server's /metrics has no "
          "moeinf_batch_tokens histogram, so its forward passes are estimated as generated "
          "tokens / clients + requests (a lower bound on passes: a higher bound on speed)")
EOF
