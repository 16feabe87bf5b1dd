#!/usr/bin/env bash
# A DeepSeek-V2-Lite-shaped Q4_K_M file (random weights, --preset deepseek-v2-lite: 27 layers,
# multi-head latent attention, one leading dense layer, 64 experts top-6 plus 2 shared; 10.4 GB)
# in memory cgroups smaller than the file: moeinf's expert cache next to llama.cpp
# (llama-cpp-python, mmap), the same file, the same cgroup limit, the file evicted from the page
# cache before each run (bench/lib/cgroup.sh), equal work (the same prompt and decoded tokens,
# one warm-up and R runs each, last-position logits of every batch). Per run: prefill and
# decode tokens/s, and for moeinf's cache its hit ratio, MiB read and stall per decoded token
# (cold = the first run, warm = the median of the others), and the cgroup's peak memory.
#
#   bench/offload_deepseek.sh [-m MODEL] [--layers 27] [--limits "50 25"] [-t N] [-p 16]
#                             [-n 16] [-r 1] [--engines "moeinf llama"]
#                             [-- EXTRA MOEINF BENCH OPTIONS]
#
# MODEL defaults to $MOEINF_BENCH_MODELS/dsv2lite-shape-L27-q4_k_m.gguf (the file of
# bench/compare_llamacpp.sh --models dsv2lite-q4_k_m --dsv2lite-layers 27; $MOEINF_BENCH_MODELS
# defaults to bench/models), written when missing (seed 7) after checking the disk has room;
# --layers writes a cut instead (labelled as such). --engines "llama" runs only llama.cpp's
# side, "moeinf" only moeinf's. Needs root (cgroups).
#
# llama.cpp runs with mmap and its weight repacking off (llamacpp_bench.py --no-repack):
# repacked weights are anonymous memory that a cgroup smaller than the file cannot evict.
# gen-model's random routers route unevenly (a few experts take most tokens), so the cache
# figures are a best case for moeinf.
set -euo pipefail
cd "$(dirname "$0")/.."
models=${MOEINF_BENCH_MODELS:-bench/models}
model="" layers=27 limits="50 25"
threads=$(nproc) prompt=16 gen=16 reps=1 engines="moeinf llama" extra=()
usage() {
  echo "usage: $0 [-m MODEL] [--layers N] [--limits \"50 25\"] [-t N] [-p N] [-n N] [-r N]" \
       "[--engines \"moeinf llama\"] [-- EXTRA MOEINF BENCH OPTIONS]" >&2
  exit 2
}
while [ $# -gt 0 ]; do
  case "$1" in
    --) shift; extra=("$@"); break ;;
  esac
  [ $# -ge 2 ] || usage
  case "$1" in
    -m) model=$2 ;;
    --layers) layers=$2 ;;
    --limits) limits=$2 ;;
    -t) threads=$2 ;;
    -p) prompt=$2 ;;
    -n) gen=$2 ;;
    -r) reps=$2 ;;
    --engines) engines=$2 ;;
    *) usage ;;
  esac
  shift 2
done
has() { [[ " $engines " == *" $1 "* ]]; }
[ -n "$model" ] || model=$models/dsv2lite-shape-L$layers-q4_k_m.gguf

cmake --preset release >/dev/null && cmake --build build/release -j"$(nproc)" >/dev/null
bin=build/release/moeinf
if has llama; then
  . bench/lib/llamacpp.sh
  llamacpp_install
fi

if [ ! -f "$model" ]; then
  mkdir -p "$(dirname "$model")"
  need=$("$bin" gen-model --preset deepseek-v2-lite --layers "$layers" --type q4_k_m --list |
         awk 'END { print $3 + 100000000 }')
  avail=$(df -B1 --output=avail "$(dirname "$model")" | tail -1)
  if [ "$avail" -lt "$need" ]; then
    echo "$model: needs $((need / 1000000000)) GB free, $(dirname "$model") has" \
      "$((avail / 1000000000)) GB" >&2
    exit 1
  fi
  echo "writing $model ..." >&2
  "$bin" gen-model -o "$model" --preset deepseek-v2-lite --layers "$layers" --type q4_k_m \
    --seed 7 >/dev/null
fi
size=$(stat -L -c %s "$model")
# the whole listing first: awk quitting early would end inspect by SIGPIPE (pipefail)
listing=$("$bin" inspect "$model")
n_layer=$(awk '$1 == "deepseek2.block_count" { n = $4 } END { print n }' <<<"$listing")

declare -A limit_bytes
for l in $limits; do
  limit_bytes[$l]=$(awk -v s="$size" -v p="$l" 'BEGIN { printf "%.0f", s * p / 100 }')
done
out=$(mktemp -d)

. bench/lib/cgroup.sh
. bench/lib/report.sh
cgroup_setup
cleanup() {
  cgroup_cleanup
  rm -rf "$out"
}
trap cleanup EXIT
. bench/lib/offload_runs.sh

declare -A pp tg hit mib stall peak
for l in $limits; do
  offload_runs "$l" "${limit_bytes[$l]}"
done

echo "model: $model ($(awk -v s="$size" 'BEGIN { printf "%.2f GB", s / 1e9 }'), $n_layer" \
  "layers$([ "$n_layer" = 27 ] || echo ": A CUT of DeepSeek-V2-Lite's 27")), threads $threads"
echo "limits: percent of the file"
cpu_line
echo "every run: a $prompt-token prompt, then $gen decoded tokens; one warm-up run and $reps" \
  "measured (equal work for both engines); the file evicted from the page cache before each"
has llama && echo "llama.cpp: llama-cpp-python $LLAMA_CPP_PYTHON_VERSION, mmap, weight" \
  "repacking off"
echo
printf "%-7s %-26s %11s %10s %9s %6s %9s %14s %9s\n" limit run "prefill t/s" "decode t/s" \
  "vs llama" hit MiB/token "stall ms/token" "peak MiB"
for l in $limits; do
  if has moeinf; then
    for run in cold warm; do
      printf "%-7s %-26s %11s %10s %9s %6s %9s %14s %9s\n" "$l%" \
        "moeinf expert cache, $run" "${pp[$run-$l]}" "${tg[$run-$l]}" \
        "$(offload_ratio "${tg[$run-$l]}" "${tg[llama-$l]:-0}")" "${hit[$run-$l]}" \
        "${mib[$run-$l]}" "${stall[$run-$l]}" "${peak[moeinf-$l]}"
    done
  fi
  if has llama; then
    printf "%-7s %-26s %11s %10s %9s %6s %9s %14s %9s\n" "$l%" "llama.cpp mmap" \
      "${pp[llama-$l]}" "${tg[llama-$l]}" "1.00x" "" "" "" "${peak[llama-$l]}"
  fi
done
if has moeinf && has llama; then
  echo
  echo "goal (issue 27): decode at 25% at least 10x llama.cpp's"
fi
