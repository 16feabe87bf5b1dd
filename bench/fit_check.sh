#!/usr/bin/env bash
# bench/fit_check.sh - `moeinf fit`'s predictions next to measured runs: three models (an
# OLMoE-shaped Q8_0 file cut to 4 layers, 1.8 GB; Qwen3-30B-A3B-shaped and DeepSeek-V2-Lite-
# shaped Q4_0 files cut to 3 and 8 layers, 1.1 and 2.6 GB) resident and in memory cgroups of 50 % and 25 % of
# what fit says a resident run needs, with the --expert-cache fit suggests. Per row: fit's
# predicted decode and prefill tokens/s, the measured ones (`moeinf bench`, the warm median
# with an expert cache), and predicted / measured; under each row fit's split of the time (the
# figures the constants in src/app/fit.c were fitted to). The hit ratio behind the offloaded
# predictions comes from the simulator on the routing a resident run of the same file
# recorded (fit --trace; gen-model's random routers do not route like trained ones, so the
# synthetic routing fitted to trained models' traces is printed beside it, not used). The fit
# of each row probes the machine again (--reprobe) just before that row's run, since the
# machine's load moves the figures; its `machine` line is printed under the row. Beside each
# offloaded row, the rate its warm prefill read experts at (MiB read over the 4 I/O threads'
# read seconds), to set against the `disk` figure fit predicted prefill's reads from.
#
#   bench/fit_check.sh [-t THREADS] [-p 512] [-n 32] [-r 1] [--keep]
#
# The files are written to $MOEINF_BENCH_MODELS/fit (default bench/models/fit) when missing,
# after checking the disk has room, and deleted at the end unless --keep. The model file is
# evicted from the page cache before every run (bench/lib/cgroup.sh). Needs root (cgroups).
set -euo pipefail
cd "$(dirname "$0")/.."
dir=${MOEINF_BENCH_MODELS:-bench/models}/fit
threads=$(nproc) prompt=512 gen=32 reps=1 keep=0
while [ $# -gt 0 ]; do
  case "$1" in
    -t) threads=$2; shift ;;
    -p) prompt=$2; shift ;;
    -n) gen=$2; shift ;;
    -r) reps=$2; shift ;;
    --keep) keep=1 ;;
    *) echo "usage: $0 [-t N] [-p N] [-n N] [-r N] [--keep]" >&2; exit 2 ;;
  esac
  shift
done
cmake --preset release >/dev/null && cmake --build build/release -j"$(nproc)" --target moeinf >/dev/null
bin=build/release/moeinf
mkdir -p "$dir"
. bench/lib/cgroup.sh
cgroup_setup
made=()
cleanup() {
  cgroup_cleanup
  if [ "$keep" = 0 ]; then for f in "${made[@]}"; do rm -f "$f"; done; fi
  return 0
}
trap cleanup EXIT
models=(
  "olmoe-L4-q8_0|--preset olmoe-1b-7b --layers 4 --type q8_0"
  "qwen3-L3-q4_0|--preset qwen3-30b-a3b --layers 3 --type q4_0"
  "dsv2lite-L8-q4_0|--preset deepseek-v2-lite --layers 8 --type q4_0"
)
ctx=$((prompt + gen + 1))
field() { awk -v k="$2" '$1 == k {print $4; exit}' "$1"; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.2f", a / b; else print "-" }'; }
pred() { # fit output, label -> "decode prefill"
  grep "^$2 " "$1" | sed -E 's/.*decode ([0-9.]+) tok\/s, prefill ([0-9.]+) tok\/s.*/\1 \2/'
}
echo "moeinf fit against moeinf bench: -p $prompt -n $gen -r $reps -t $threads, $(date -u '+%Y-%m-%d %H:%M UTC')"
printf "%-20s %-9s %-26s %6s | %8s %8s %6s | %8s %8s %6s | %s\n" model budget expert-cache hit \
  "dec pred" "dec meas" ratio "pre pred" "pre meas" ratio "synthetic: hit, dec pred"
for entry in "${models[@]}"; do
  name=${entry%%|*} opts=${entry#*|}
  model=$dir/$name.gguf
  if [ ! -f "$model" ]; then
    # shellcheck disable=SC2086
    need=$("$bin" gen-model $opts --list -o /dev/null | awk '/bytes of weights/ {print $3; exit}')
    free=$(df -B1 --output=avail "$dir" | tail -1)
    if [ -n "$need" ] && [ "$need" -gt $((free - (4 << 30))) ]; then
      echo "$name: needs $need bytes, the disk has $free free" >&2; exit 1
    fi
    # shellcheck disable=SC2086
    "$bin" gen-model $opts --seed 7 -o "$model" >/dev/null
    made+=("$model")
  fi
  trace=$dir/$name.routing.txt
  made+=("$trace")
  log=$(mktemp) fitlog=$(mktemp)
  "$bin" fit -m "$model" -t "$threads" --ctx "$ctx" --reprobe >"$fitlog"
  evict "$model"
  "$bin" bench -m "$model" -p "$prompt" -n "$gen" -r "$reps" -t "$threads" \
    --record-routing "$trace" >"$log" 2>&1
  need=$(awk '$1 == "need" {print $3; exit}' "$fitlog")
  read -r pd pp < <(pred "$fitlog" need)
  md=$(field "$log" decode) mp=$(field "$log" prefill)
  printf "%-20s %-9s %-26s %6s | %8s %8s %6s | %8s %8s %6s |\n" "$name" resident - 1 \
    "$pd" "$md" "$(ratio "$pd" "$md")" "$pp" "$mp" "$(ratio "$pp" "$mp")"
  grep '^  time' "$fitlog" | head -1
  grep '^machine' "$fitlog"
  for pct in 50 25; do
    budget=$((need * pct / 100))
    syn=$("$bin" fit -m "$model" -t "$threads" --ctx "$ctx" --memory "$budget" |
      grep '^at budget' | sed -E 's/.*hit ratio ([0-9.]+): decode ([0-9.]+).*/\1, \2/')
    "$bin" fit -m "$model" -t "$threads" --ctx "$ctx" --trace "$trace" --memory "$budget" \
      --reprobe >"$fitlog"
    cache=$(grep -o -- '--expert-cache [0-9]*M' "$fitlog" | awk '{print $2}')
    hit=$(grep '^at budget' "$fitlog" | sed -E 's/.*hit ratio ([0-9.]+).*/\1/')
    read -r pd pp < <(pred "$fitlog" "at")
    peak=$(run_in_cgroup "$budget" "$log" "$bin" bench -m "$model" -p "$prompt" -n "$gen" \
      -r "$reps" -t "$threads" --expert-cache "$cache")
    md=$(field "$log" decode-warm) mp=$(field "$log" prefill-warm)
    mh=$(awk '$1 == "decode-warm" {print $5; exit}' "$log")
    # prefill's read rate: MiB read over the read seconds of the 4 I/O threads (the default)
    prd=$(awk '$1 == "prefill-warm" && $8 > 0 { printf "%.2f", $7 * 1048576 / ($8 / 4) / 1e9; exit }' "$log")
    printf "%-20s %-9s %-26s %6s | %8s %8s %6s | %8s %8s %6s | %s (measured hit %s, peak %d MiB, prefill reads %s GB/s)\n" \
      "$name" "$pct% $((budget >> 20))M" "--expert-cache $cache" "$hit" \
      "$pd" "$md" "$(ratio "$pd" "$md")" "$pp" "$mp" "$(ratio "$pp" "$mp")" "$syn" "$mh" \
      $((peak >> 20)) "${prd:--}"
    grep '^  time' "$fitlog" | tail -1
    grep '^machine' "$fitlog"
    grep '^  disk, misses' "$fitlog" || true
  done
  rm -f "$log" "$fitlog"
done
