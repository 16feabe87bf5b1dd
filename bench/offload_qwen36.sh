#!/usr/bin/env bash
# The whole Qwen3.6-35B-A3B-shaped Q4_K_M file (about 21 GB: `moeinf gen-model --preset
# qwen3.6-35b-a3b --type q4_k_m`, random weights) in memory cgroups of 8 GiB and 4 GiB:
# moeinf's expert cache next to llama.cpp (llama-cpp-python, mmap), the same file, the same
# cgroup limit, the file evicted from the page cache before each run (bench/lib/cgroup.sh),
# equal work (the same prompt and decoded tokens, one warm-up and R runs each, last-position
# logits of every batch). Per run: prefill and decode tokens/s, and for moeinf's cache its hit
# ratio, MiB read and stall per decoded token (cold = the first run, warm = the median of the
# others), and the cgroup's peak memory.
#
#   bench/offload_qwen36.sh [-m MODEL] [--cut MODEL] [--limits "8 4"] [-t N] [-p 32] [-n 16]
#                           [-r 1] [--engines "moeinf llama"] [-- EXTRA MOEINF BENCH OPTIONS]
#
# The resident speed (the goal: at 8 GiB at least half of it) is NOT measured on the full
# file, which does not fit in memory here: it is the speed of a cut model, run resident (the
# whole file in the page cache, no limit), scaled by the weight bytes each token reads
# ("decode reads" of `moeinf bench`): full = cut x cut bytes per token / full bytes per token,
# for prefill and decode alike. The output says so on its line.
#
# MODEL defaults to $MOEINF_BENCH_MODELS/qwen36-shape-q4_k_m.gguf and the cut to
# $MOEINF_BENCH_MODELS/qwen36-shape-L8-q4_k_m.gguf, the 8-layer file of bench/compare_llamacpp.sh
# ($MOEINF_BENCH_MODELS defaults to bench/models); each is written when missing (seed 7; the
# full one after checking the disk has room: 23 GB free). Any other pair of files works, e.g.
# a small one to try the steps: -m small.gguf --cut small.gguf --limits "1 0.5".
# --limits are GiB (decimals allowed). --engines "llama" runs only llama.cpp's side (and
# skips the resident run), --engines "moeinf" only moeinf's. Needs root (cgroups).
#
# llama.cpp runs with mmap and its weight repacking off (llamacpp_bench.py --no-repack): it
# copies the Q4_K weights it repacks into anonymous memory at load, which a cgroup smaller than
# the file cannot evict, and was killed (out of memory) at 1 and 0.5 GiB on a 2.75 GB cut.
# llama.cpp pages its weights in through mmap; at 4 GiB each token's ~2 GB of weights mostly
# come from the disk again, so its runs are slow (minutes a token on a slow disk): keep -n
# small. gen-model's random routers route unevenly (a few experts take most tokens), so the
# cache figures are a best case for moeinf.
set -euo pipefail
cd "$(dirname "$0")/.."
models=${MOEINF_BENCH_MODELS:-bench/models}
model=$models/qwen36-shape-q4_k_m.gguf cut=$models/qwen36-shape-L8-q4_k_m.gguf
threads=$(nproc) limits="8 4" prompt=32 gen=16 reps=1 engines="moeinf llama" extra=()
usage() {
  echo "usage: $0 [-m MODEL] [--cut MODEL] [--limits \"8 4\"] [-t N] [-p N] [-n N] [-r N]" \
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
    --cut) cut=$2 ;;
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

cmake --preset release >/dev/null && cmake --build build/release -j"$(nproc)" >/dev/null
bin=build/release/moeinf
if has llama; then
  . bench/lib/llamacpp.sh
  llamacpp_install
fi

# ---- the files -----------------------------------------------------------------------------
# gen_file PATH NEED_BYTES GEN-MODEL OPTIONS...: writes PATH when missing, after checking that
# its filesystem has NEED_BYTES free
gen_file() {
  local path=$1 need=$2
  shift 2
  [ -f "$path" ] && return
  mkdir -p "$(dirname "$path")"
  local avail
  avail=$(df -B1 --output=avail "$(dirname "$path")" | tail -1)
  if [ "$avail" -lt "$need" ]; then
    echo "$path: needs $((need / 1000000000)) GB free, $(dirname "$path") has" \
      "$((avail / 1000000000)) GB" >&2
    exit 1
  fi
  echo "writing $path ..." >&2
  "$bin" gen-model -o "$path" "$@" --seed 7 >/dev/null
}
gen_file "$model" 23000000000 --preset qwen3.6-35b-a3b --type q4_k_m
has moeinf && gen_file "$cut" 6000000000 --preset qwen3.6-35b-a3b --layers 8 --type q4_k_m
size=$(stat -c %s "$model")
out=$(mktemp -d)

. bench/lib/cgroup.sh
cgroup_setup
cleanup() {
  cgroup_cleanup
  rm -rf "$out"
}
trap cleanup EXIT
. bench/lib/offload_runs.sh

# the weight bytes (GB) a decoded token reads, from a `moeinf bench` output
gb_per_token() { sed -n 's/.*decode reads \([0-9.]*\) GB.*/\1/p' "$1"; }

# ---- moeinf resident, on the cut model, scaled to the full one by bytes per token ----------
if has moeinf; then
  cat "$cut" >/dev/null # the whole cut file in the page cache: the resident speed
  "$bin" bench -m "$cut" -t "$threads" -p "$prompt" -n "$gen" -r 2 >"$out/resident-cut.txt"
fi

# ---- the cgroup runs -------------------------------------------------------------------------
declare -A pp tg hit mib stall peak
for l in $limits; do
  limit=$(awk -v g="$l" 'BEGIN { printf "%.0f", g * 1073741824 }')
  offload_runs "$l" "$limit"
done

# the resident speed of the full file: the cut's, scaled by bytes per token (the full file's
# from the header of its first cache run)
if has moeinf; then
  gb_cut=$(gb_per_token "$out/resident-cut.txt")
  gb_full=$(gb_per_token "$out/moeinf-${limits%% *}.txt")
  scale=$(awk -v c="$gb_cut" -v f="$gb_full" 'BEGIN { printf "%.6f", c / f }')
  res_pp=$(awk -v t="$(offload_row prefill 4 "$out/resident-cut.txt")" -v s="$scale" \
           'BEGIN { printf "%.2f", t * s }')
  res_tg=$(awk -v t="$(offload_row decode 4 "$out/resident-cut.txt")" -v s="$scale" \
           'BEGIN { printf "%.2f", t * s }')
fi

# ---- the table -------------------------------------------------------------------------------
echo "model: $model ($(awk -v s="$size" 'BEGIN { printf "%.2f GB", s / 1e9 }')), threads $threads"
echo "every run: a $prompt-token prompt, then $gen decoded tokens; one warm-up run and $reps" \
  "measured (equal work for both engines); the file evicted from the page cache before each"
has llama && echo "llama.cpp: llama-cpp-python $LLAMA_CPP_PYTHON_VERSION, mmap, weight" \
  "repacking off (repacked Q4_K copies are anonymous memory the cgroup cannot evict: with" \
  "them llama.cpp is killed at these limits)"
if has moeinf; then
  if [ "$cut" -ef "$model" ]; then
    echo "moeinf resident: prefill $res_pp, decode $res_tg tok/s, measured on the file itself" \
      "(the whole file in the page cache, no limit)"
  else
    echo "moeinf resident: prefill $res_pp, decode $res_tg tok/s: NOT MEASURED, scaled from the" \
      "cut model $cut run resident (prefill $(offload_row prefill 4 "$out/resident-cut.txt")," \
      "decode $(offload_row decode 4 "$out/resident-cut.txt") tok/s) by bytes per token" \
      "($gb_cut GB cut / $gb_full GB full)"
  fi
fi
echo
# the ratios' columns: decode against llama.cpp and against resident, then prefill's two
row='%-6s %-26s %11s %10s %9s %11s %9s %11s %6s %9s %14s %9s\n'
# shellcheck disable=SC2059 # the format is the one table's, kept in one variable
printf "$row" limit run "prefill t/s" "decode t/s" "tg/llama" "tg/resident" "pp/llama" \
  "pp/resident" hit MiB/token "stall ms/token" "peak MiB"
for l in $limits; do
  if has moeinf; then
    for run in cold warm; do
      # shellcheck disable=SC2059
      printf "$row" "${l}G" "moeinf expert cache, $run" "${pp[$run-$l]}" "${tg[$run-$l]}" \
        "$(offload_ratio "${tg[$run-$l]}" "${tg[llama-$l]:-0}")" \
        "$(offload_ratio "${tg[$run-$l]}" "$res_tg")" \
        "$(offload_ratio "${pp[$run-$l]}" "${pp[llama-$l]:-0}")" \
        "$(offload_ratio "${pp[$run-$l]}" "$res_pp")" \
        "${hit[$run-$l]}" "${mib[$run-$l]}" "${stall[$run-$l]}" "${peak[moeinf-$l]}"
    done
  fi
  if has llama; then
    # shellcheck disable=SC2059
    printf "$row" "${l}G" "llama.cpp mmap" "${pp[llama-$l]}" "${tg[llama-$l]}" "1.00x" \
      "$(offload_ratio "${tg[llama-$l]}" "${res_tg:-0}")" "1.00x" \
      "$(offload_ratio "${pp[llama-$l]}" "${res_pp:-0}")" "" "" "" "${peak[llama-$l]}"
  fi
done
if has moeinf && has llama; then
  echo
  echo "goals: issue 25 (the Qwen3.6 file): decode at 4G at least 10x llama.cpp's, at 8G at" \
    "least 0.50x of the (scaled) resident speed; issue 29 (the OLMoE Q8_0 file): at 50 % decode" \
    "at least 0.85x resident and 5x llama.cpp, at 25 % at least 0.7x resident and 10x" \
    "llama.cpp, and prefill at least 3x llama.cpp's"
fi
