#!/usr/bin/env bash
# trace_replay.sh - the expert cache in the engine on real routing: for each trace in
# ../shared/traces, a fixed subset of its requests replayed through `moeinf bench
# --route-trace` on a generated model of the trace's MoE geometry, at 10% and 25% cache
# (of all layers x experts), for the policies lru, moe-infinity and the default (reuse), with
# each prefetch depth of $PREFETCH (policy proposals, --prefetch; "ahead" pK in the table;
# gate lookahead is off under a routing replay, since the generated model's routers did not
# make the recorded choices); next to the limit no cache can beat:
#     time per token >= max(compute per token,
#                           offline-optimal misses x expert bytes / disk bandwidth / tokens)
# with the offline-optimal misses from `moeinf sim --policy belady` on the same requests and
# capacity, compute from a resident run of the same requests (the model in memory, no
# cache), and the disk bandwidth from bench/disk_read.c as the engine reads
# (bench/lib/disk_probe.sh: O_DIRECT reads of one expert part at random offsets, as many at
# once as the runs have I/O threads, the file evicted from the page cache first). Prints one
# table.
#
#   PREFETCH="0 2" ROUNDS=3 POLICIES="lru reuse" IO_THREADS=4 bench/trace_replay.sh [-t THREADS]
#                                                                             [--models DIR]
#
# IO_THREADS (default 4, the engine's default) is every run's --io-threads and the probe's
# number of reads at once.
# ROUNDS (default 1) runs every cell that many times, the policies in a rotated order each
# round (this machine's disk and memory bandwidth drift over minutes, and a policy always run
# last in its cell would take the drift alone); the table shows the round with the median
# tokens/s and the range over rounds. POLICIES (default "lru moe-infinity reuse") picks them.
#
# Subsets (positions in file order, from 0; fixed so runs compare):
#   llama4_maverick_mmlu             90-109: 10 abstract_algebra + 10 astronomy questions,
#                                    411 prefill + 2560 decode tokens
#   deepseek_v2_lite_puffin_prefill  0-19: 1321 prefill tokens (the trace has no decode)
#   any other trace                  0-19
# (SUBSET=A-B overrides them all, for a quick check of the script.)
# Models (written to --models, default /work/models, when missing; never inside a git
# worktree): the trace's n_layers, n_experts and top_k, arch llama, Q8_0, with the widths
# shrunk so that the whole script stays short (bench/README.md) and the resident run fits in
# memory:
#   Llama-4 Maverick: real n_embd 5120, expert FFN 8192 (134 MB per expert at Q8_0, 410 GB
#     for 24 x 128 experts: more than this disk holds) -> n_embd 512, FFN 1024 (1.7 MB per
#     expert, 5.2 GB file)
#   DeepSeek-V2-Lite: real n_embd 2048, expert FFN 1408 (9.2 MB per expert, 15 GB: it
#     would fit on the disk, but reading it would take hours here) -> n_embd 512, FFN 352
#     (0.57 MB per expert, 1.0 GB file)
#   other traces: n_embd 512, FFN 512
# Every token runs as its own forward pass (-b 1), as `moeinf sim` replays a trace by
# default and its offline policy (belady) requires: so the engine's accesses are exactly the
# simulator's, and the "sim" column checks that the engine's misses equal the simulator's
# for the same policy (an exact check without reading ahead; prefetched reads finish at times
# that depend on the I/O threads, so with them the engine's counts are its own). Batched prefill (-b 512) changes the access sequence, and no offline optimum
# of batched steps exists yet.
#
# No memory cgroup: the expert cache's size is given (--expert-cache P%), and experts are
# read with O_DIRECT, so the page cache does not hold them (bench/offload.sh measures under
# a cgroup limit). Stall time is the time the compute waited for expert reads
# (stall_seconds of --stats-json).
set -euo pipefail
cd "$(dirname "$0")/.."
threads=$(nproc) models=/work/models
while [ $# -gt 0 ]; do
  case "$1" in
    -t) threads=$2; shift 2 ;;
    --models) models=$2; shift 2 ;;
    *) echo "usage: PREFETCH=\"0 2\" $0 [-t THREADS] [--models DIR]" >&2; exit 2 ;;
  esac
done
prefetch_list=${PREFETCH:-0}
rounds=${ROUNDS:-1}
. bench/lib/disk_probe.sh
io_threads=${IO_THREADS:-$disk_probe_default_io_threads}
sizes="10 25"
policies=${POLICIES:-lru moe-infinity reuse}
traces=../shared/traces

cmake --preset release >/dev/null && cmake --build build/release -j2 >/dev/null
bin=build/release/moeinf
case "$(realpath "$models")" in
  "$(git rev-parse --show-toplevel)"*) echo "trace_replay.sh: --models must be outside the git worktree" >&2; exit 2 ;;
esac
mkdir -p "$models"
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

# jget FILE KEY...: the values of top-level keys of a JSON object file, space-separated
jget() {
  python3 - "$@" <<'EOF'
import json, sys
d = json.load(open(sys.argv[1]))
print(" ".join(str(d.get(k)) for k in sys.argv[2:]))
EOF
}
header() { awk -v k="# $2:" 'index($0, k) == 1 { print $3; exit }' "$1"; }

load0=$(cut -d' ' -f1-3 /proc/loadavg)
t_start=$(date +%s)
rows=$out/rows.txt
declare -A sim_of # the simulator's misses per policy, for the current trace and size
: >"$rows"
for trace in "$traces"/*.txt; do
  name=$(basename "$trace" .txt)
  case "$name" in
    llama4_maverick_mmlu) subset=90-109 embd=512 ff=1024 ;;
    deepseek_v2_lite_puffin_prefill) subset=0-19 embd=512 ff=352 ;;
    *) subset=0-19 embd=512 ff=512 ;;
  esac
  subset=${SUBSET:-$subset} # a quick check of the script: SUBSET=0-1
  L=$(header "$trace" n_layers) E=$(header "$trace" n_experts) K=$(header "$trace" top_k)
  model=$models/trace-shape-${L}x${E}-top${K}-e${embd}-f${ff}-q8_0.gguf
  if [ ! -f "$model" ]; then
    echo "writing $model ..." >&2
    "$bin" gen-model -o "$model" --layers "$L" --experts "$E" --top-k "$K" --embd "$embd" \
      --ff "$ff" --heads 8 --kv-heads 2 --type q8_0 --seed 7 --threads "$threads" >/dev/null
  fi
  echo "  $name: requests $subset, model $model" >>"$out/models.txt"
  sub=$out/$name-sub.txt
  "$bin" trace filter --trace "$trace" -o "$sub" --indices "$subset" >/dev/null
  run=("$bin" bench -m "$model" -t "$threads" -b 1 --route-trace "$trace" --trace-requests "$subset"
       --io-threads "$io_threads")
  # one expert's bytes and the slot size (a third of it is the probe's read) from a one-request
  # run
  first=${subset%-*}
  "$bin" bench -m "$model" -t "$threads" -b 1 --route-trace "$trace" --trace-requests "$first" \
    --io-threads "$io_threads" --expert-cache 10% --prefetch 0 --lookahead 0 \
    --stats-json "$out/probe.json" >/dev/null 2>&1
  read -r slot eb misses0 < <(jget "$out/probe.json" slot_bytes expert_bytes misses)
  expert_bytes=$((eb / misses0))
  # disk bandwidth as the engine reads: the best of two measurements, the file evicted first
  disk=0
  for _ in 1 2; do
    dd if="$model" iflag=nocache count=0 status=none
    read -r d depth part < <(disk_probe "$model" "$slot" "$io_threads" 3 2>/dev/null)
    disk=$(awk -v a="$d" -v b="$disk" 'BEGIN { print (a > b) ? a : b }')
  done
  echo "  $name: disk probe: O_DIRECT reads of $part bytes (one expert part), $depth at once" \
    "(--io-threads $io_threads): $disk GB/s" >>"$out/models.txt"
  # compute per token: the same requests, resident (the file read into the page cache first)
  cat "$model" >/dev/null
  "${run[@]}" >"$out/resident.txt"
  res_tps=$(awk '$1 == "all" { print $4 }' "$out/resident.txt")
  for size in $sizes; do
    read -r opt_misses opt_tokens < <("$bin" sim --trace "$sub" --cache "$size%" \
      --policy belady --json >"$out/belady.json" && jget "$out/belady.json" misses tokens)
    limit_tps=$(awk -v r="$res_tps" -v m="$opt_misses" -v t="$opt_tokens" -v b="$expert_bytes" \
      -v d="$disk" 'BEGIN { c = 1 / r; io = m * b / (d * 1e9) / t;
                            printf "%.2f", 1 / (c > io ? c : io) }')
    for ((round = 0; round < rounds; round++)); do
     # each round starts with the next policy, so that none always runs first in a drift
     order=$(awk -v r="$round" '{ n = split($0, p, " ");
       for (i = 0; i < n; i++) printf "%s ", p[(i + r) % n + 1] }' <<<"$policies")
     for policy in $order; do
      for pf in $prefetch_list; do
        # shellcheck disable=SC2043 # one value now: the loop is where a lookahead would go
        for la in 0; do # gate lookahead is off under a routing replay (moeinf bench --help)
          j=$out/run.json
          "${run[@]}" --expert-cache "$size%" --policy "$policy" --prefetch "$pf" \
            --lookahead "$la" --stats-json "$j" >"$out/run.txt" 2>"$out/run.err"
          read -r tps hit misses bytes tokens _ ss cache_experts < <(jget "$j" \
            tokens_per_second hit_ratio misses bytes_read tokens read_seconds stall_seconds \
            cache_experts)
          check="-"
          if [ "$pf" = 0 ] && [ "$la" = 0 ]; then # the simulator's replay without prefetch
            if [ "$round" = 0 ]; then
              "$bin" sim --trace "$sub" --cache "$size%" --policy "$policy" --json >"$out/sim.json"
              sim_of[$policy]=$(jget "$out/sim.json" misses)
            fi
            sim_misses=${sim_of[$policy]}
            check="= sim"
            [ "$sim_misses" != "$misses" ] && check="sim $sim_misses"
          fi
          echo "$name $size $cache_experts $policy p$pf $tps $hit $ss $bytes $tokens" \
            "$misses $check|$limit_tps $opt_misses $res_tps $disk $expert_bytes" >>"$rows"
          echo "$name $size% $policy prefetch $pf: $tps tok/s, hit $hit" \
            "($(date +%T))" >&2
        done
      done
     done
    done
  done
done
t_end=$(date +%s)
load1=$(cut -d' ' -f1-3 /proc/loadavg)

echo "moeinf bench --route-trace, -b 1, $threads threads, --io-threads $io_threads, $(nproc) CPUs;" \
  "$((t_end - t_start)) s;" \
  "load average $load0 at the start, $load1 at the end"
printf "%-32s %5s %6s %-13s %6s %8s %6s %9s %9s %9s %-12s %9s %7s %s\n" trace cache slots policy ahead \
  "tok/s" hit "stall ms" "MiB/tok" "misses" "engine=sim" "limit t/s" "of lim" \
  "$([ "$rounds" -gt 1 ] && echo "tok/s over $rounds rounds")"
# one row per (trace, size, policy, prefetch): the round with the median tok/s (the lower of
# the middle two for an even count), and the range over rounds appended
median_rows() {
  awk -F'|' '{ split($1, a, " "); k = a[1] " " a[2] " " a[4] " " a[5]
    if (!(k in n)) order[++keys] = k
    i = ++n[k]; line[k, i] = $0; tps[k, i] = a[6] }
  END {
    for (q = 1; q <= keys; q++) {
      k = order[q]; m = n[k]
      for (i = 1; i <= m; i++) idx[i] = i
      for (i = 2; i <= m; i++) # insertion sort by tok/s: a few rounds
        for (j = i; j > 1 && tps[k, idx[j]] < tps[k, idx[j - 1]]; j--) {
          x = idx[j]; idx[j] = idx[j - 1]; idx[j - 1] = x }
      printf "%s %.2f %.2f\n", line[k, idx[int((m + 1) / 2)]], tps[k, idx[1]], tps[k, idx[m]]
    }
  }' "$rows"
}
while IFS='|' read -r a b; do
  read -r name size slots policy pf tps hit ss bytes tokens misses check <<<"$a"
  read -r limit_tps opt_misses res_tps disk eb lo hi <<<"$b"
  range=""
  [ "$rounds" -gt 1 ] && range="$lo-$hi"
  awk -v n="$name" -v s="$size%" -v sl="$slots" -v p="$policy" -v pf="$pf" -v tps="$tps" \
    -v h="$hit" -v ss="$ss" -v by="$bytes" -v t="$tokens" -v m="$misses" -v c="$check" \
    -v l="$limit_tps" -v r="$range" 'BEGIN { printf "%-32s %5s %6d %-13s %6s %8.2f %6.3f %9.2f %9.2f %9d %-12s %9.2f %6.0f%% %s\n",
      n, s, sl, p, pf, tps, h, 1000 * ss / t, by / t / 1048576, m, c, l, 100 * tps / l, r }'
done < <(median_rows)
echo
echo "models (trace-shape-LAYERSxEXPERTS-topK-eEMBD-fFFN) and disk probes:"
cat "$out/models.txt"
echo "limit = 1 / max(compute s/token, belady misses x expert bytes / disk / tokens):"
awk -F'|' '{ split($1, a, " "); split($2, b, " ");
  key = a[1] " " a[2]; if (key in seen) next; seen[key] = 1
  printf "  %-32s %3s%%: belady %d misses over %d tokens; resident %.2f tok/s; disk %.3f GB/s;" \
    " expert %.2f MiB\n", a[1], a[2], b[2], a[10], b[3], b[4], b[5] / 1048576 }' "$rows"
