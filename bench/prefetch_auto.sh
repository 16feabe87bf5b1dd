#!/usr/bin/env bash
# Reading ahead that decides for itself (--prefetch auto --lookahead auto, the defaults)
# against none (--prefetch 0 --lookahead 0), in alternated runs of `moeinf bench`: per round
# one run of each, in an order that alternates from round to round, each a fresh process. For
# each model it prints every round's decode tokens/s and stall ms per token (the warm run's,
# the median of -r R), the ratios auto / off of the round, and their median and range over the
# rounds (the range is the noise), then what auto decided in its last run (--stats: each
# source's precision on the experts that had to be read, the layers where it was on). Demand
# misses per token are printed too: where auto stays off in every layer its cache decides what
# off's does, so they are equal and only the predictions' compute differs. With --fixed K a
# third run per round reads ahead always (--prefetch K --lookahead 1), and its ratios to off
# are printed too.
#
#   bench/prefetch_auto.sh [--rounds 5] [-t THREADS] [-p 16] [-n 128] [-r 3]
#                          [--random MODEL] [--random-budget 25] [--trained MODEL]
#                          [--trained-cache 25] [--trained-ff N] [--only random|trained]
#                          [--fixed K]
#
# random: gen-model's random weights, the OLMoE-1B-7B shape cut to 4 layers (written to
#   $MOEINF_BENCH_MODELS/olmoe-L4-q8_0.gguf when missing: `moeinf gen-model --preset
#   olmoe-1b-7b --layers 4 --type q8_0 --seed 7`, 1.9 GB), in a memory cgroup of
#   --random-budget % of the file with the file evicted before each run and
#   `--expert-cache auto` (bench/lib/cgroup.sh; needs root). Its routing is nearly unpredictable
#   from layer to layer: auto should stay off and cost nothing.
# trained: the trained default model (models/trained-moe-Q8_0.gguf), too small for a cgroup:
#   `--expert-cache P%` of its experts, O_DIRECT reads (no page cache). Its experts are 39 KB,
#   so a read costs its fixed overhead more than its bytes; --trained-ff N widens them first
#   (tools/train/widen_experts.py: N hidden units per expert, the extra ones all zero, so the
#   model routes and predicts exactly as the trained one; written to
#   $MOEINF_BENCH_MODELS/trained-moe-ffN-Q8_0.gguf when missing; 6400: 3.9 MB experts, 252 MB).
set -euo pipefail
cd "$(dirname "$0")/.."
models=${MOEINF_BENCH_MODELS:-bench/models}
random=$models/olmoe-L4-q8_0.gguf trained=models/trained-moe-Q8_0.gguf
rounds=5 threads=$(nproc) prompt=16 gen=128 reps=3 random_budget=25 trained_cache=25 only=""
fixed="" trained_ff=""
while [ $# -gt 0 ]; do
  case "$1" in
    --rounds) rounds=$2; shift 2 ;;
    -t) threads=$2; shift 2 ;;
    -p) prompt=$2; shift 2 ;;
    -n) gen=$2; shift 2 ;;
    -r) reps=$2; shift 2 ;;
    --random) random=$2; shift 2 ;;
    --random-budget) random_budget=$2; shift 2 ;;
    --trained) trained=$2; shift 2 ;;
    --trained-cache) trained_cache=$2; shift 2 ;;
    --trained-ff) trained_ff=$2; shift 2 ;;
    --only) only=$2; shift 2 ;;
    --fixed) fixed=$2; shift 2 ;;
    *) echo "usage: $0 [--rounds N] [-t N] [-p N] [-n N] [-r N] [--random MODEL]" \
         "[--random-budget P] [--trained MODEL] [--trained-cache P] [--trained-ff N]" \
         "[--only random|trained] [--fixed K]" >&2
       exit 2 ;;
  esac
done
cmake --preset release >/dev/null && cmake --build build/release -j"$(nproc)" --target moeinf >/dev/null
bin=build/release/moeinf
out=$(mktemp -d)
. bench/lib/cgroup.sh
. bench/lib/report.sh
cgroup_setup
trap 'cgroup_cleanup; rm -rf "$out"' EXIT

# one run: MODE (off|auto|fixed) KIND (random|trained) LOG
run_one() {
  local mode=$1 kind=$2 log=$3 args=(--stats)
  [ "$mode" = off ] && args+=(--prefetch 0 --lookahead 0)
  [ "$mode" = fixed ] && args+=(--prefetch "$fixed" --lookahead 1)
  if [ "$kind" = random ]; then
    local size limit
    size=$(stat -c %s "$random")
    limit=$((size * random_budget / 100))
    model=$random run_in_cgroup "$limit" "$log" "$bin" bench -m "$random" -t "$threads" \
      -p "$prompt" -n "$gen" -r "$reps" --expert-cache auto "${args[@]}" >/dev/null
  else
    "$bin" bench -m "$trained" -t "$threads" -p "$prompt" -n "$gen" -r "$reps" \
      --expert-cache "$trained_cache%" "${args[@]}" >"$log" 2>&1
  fi
}

# decode-warm tokens/s, stall ms and demand misses per token of a bench log
figures() { awk '$1 == "decode-warm" { printf "%s %.4f %s\n", $4, $9 * 1e3, $6 }' "$1"; }

bench_kind() {
  local kind=$1 desc
  if [ "$kind" = random ]; then
    desc="$random, cgroup $random_budget % of the file, file evicted, --expert-cache auto"
  else
    desc="$trained, --expert-cache $trained_cache%"
  fi
  echo "== $kind: $desc; -p $prompt -n $gen -r $reps -t $threads, $rounds rounds"
  echo "(stall: ms per decoded token; misses: demand misses per decoded token)"
  printf "%-6s %-9s %10s %10s %10s %10s %10s %10s %8s %8s\n" round order "off tok/s" \
    "auto tok/s" "off stall" "auto stall" "off miss" "auto miss" "tok/s x" "stall x"
  : >"$out/tps" && : >"$out/stall" && : >"$out/ftps" && : >"$out/fstall"
  for r in $(seq 1 "$rounds"); do
    local order="off auto"
    [ -n "$fixed" ] && order="off auto fixed"
    [ $((r % 2)) = 0 ] && order=$(echo "$order" | tr ' ' '\n' | tac | tr '\n' ' ')
    order=$(echo $order)
    for m in $order; do run_one "$m" "$kind" "$out/$m.log"; done
    read -r t_off s_off m_off < <(figures "$out/off.log")
    read -r t_auto s_auto m_auto < <(figures "$out/auto.log")
    local rt rs
    rt=$(awk -v a="$t_auto" -v b="$t_off" 'BEGIN { printf "%.3f", a / b }')
    rs=$(awk -v a="$s_auto" -v b="$s_off" 'BEGIN { printf "%.3f", (b > 0 ? a / b : 0) }')
    echo "$rt" >>"$out/tps" && echo "$rs" >>"$out/stall"
    printf "%-6s %-9s %10s %10s %10s %10s %10s %10s %8s %8s\n" "$r" "${order// /,}" "$t_off" \
      "$t_auto" "$s_off" "$s_auto" "$m_off" "$m_auto" "$rt" "$rs"
    if [ -n "$fixed" ]; then
      local t_fix s_fix m_fix
      read -r t_fix s_fix m_fix < <(figures "$out/fixed.log")
      rt=$(awk -v a="$t_fix" -v b="$t_off" 'BEGIN { printf "%.3f", a / b }')
      rs=$(awk -v a="$s_fix" -v b="$s_off" 'BEGIN { printf "%.3f", (b > 0 ? a / b : 0) }')
      echo "$rt" >>"$out/ftps" && echo "$rs" >>"$out/fstall"
      printf "%-6s %-9s %10s %10s %10s %10s %10s %10s %8s %8s\n" "" "fixed $fixed" "" "$t_fix" \
        "" "$s_fix" "" "$m_fix" "$rt" "$rs"
    fi
  done
  echo "auto / off, tokens/s: median $(median <"$out/tps"), range $(sort -g "$out/tps" | head -1)" \
    "- $(sort -g "$out/tps" | tail -1)"
  echo "auto / off, stall per token: median $(median <"$out/stall"), range" \
    "$(sort -g "$out/stall" | head -1) - $(sort -g "$out/stall" | tail -1)"
  if [ -n "$fixed" ]; then
    echo "fixed $fixed / off, tokens/s: median $(median <"$out/ftps"), range" \
      "$(sort -g "$out/ftps" | head -1) - $(sort -g "$out/ftps" | tail -1)"
    echo "fixed $fixed / off, stall per token: median $(median <"$out/fstall"), range" \
      "$(sort -g "$out/fstall" | head -1) - $(sort -g "$out/fstall" | tail -1)"
  fi
  echo "auto's last run:"
  grep -E '^(policy prefetch|gate lookahead|auto wall-time|I/O threads idle)' "$out/auto.log" |
    sed 's/^/  /'
}

if [ "$only" != trained ]; then
  if [ ! -f "$random" ]; then
    mkdir -p "$(dirname "$random")"
    "$bin" gen-model -o "$random" --preset olmoe-1b-7b --layers 4 --type q8_0 --seed 7 >/dev/null
  fi
  bench_kind random
fi
if [ "$only" != random ]; then
  if [ -n "$trained_ff" ]; then
    wide=$models/trained-moe-ff$trained_ff-Q8_0.gguf
    if [ ! -f "$wide" ]; then
      mkdir -p "$models"
      python3 tools/train/widen_experts.py --in "$trained" --ff "$trained_ff" "$wide.tmp"
      mv "$wide.tmp" "$wide"
    fi
    # the zero units must change nothing: the same logits, byte for byte, on a short prompt
    ids=$("$bin" tokenize -m "$trained" "The module defines the following functions" | xargs)
    "$bin" logits -m "$trained" --ids "$ids" -o "$out/narrow.bin" >/dev/null
    "$bin" logits -m "$wide" --ids "$ids" -o "$out/wide.bin" >/dev/null
    if ! cmp -s "$out/narrow.bin" "$out/wide.bin"; then
      echo "prefetch_auto.sh: $wide computes other logits than $trained" >&2
      exit 1
    fi
    trained=$wide
  fi
  bench_kind trained
fi
exit 0
