#!/usr/bin/env bash
# gpt-oss-shaped MXFP4 files (random weights; experts MXFP4, the other matrices Q8_0, as the
# published GGUFs) in memory cgroups smaller than the file: moeinf's expert cache next to
# llama.cpp (llama-cpp-python, mmap), the same file, the same cgroup limit, the file evicted
# from the page cache before each run (bench/lib/cgroup.sh), equal work (the same prompt and
# decoded tokens, one warm-up and R runs each, last-position logits of every batch). Per run:
# prefill and decode tokens/s, and for moeinf's cache its hit ratio, MiB read and stall per
# decoded token (cold = the first run, warm = the median of the others), and the cgroup's
# peak memory.
#
#   bench/offload_gptoss.sh [--shape 20b|120b-cut] [-m MODEL] [--limits "50 25"]
#                           [--big-layers 12] [--memory-gib 16] [-t N] [-p 16] [-n 16] [-r 1]
#                           [--engines "moeinf llama"] [-- EXTRA MOEINF BENCH OPTIONS]
#
# --shape 20b (the default): the whole gpt-oss-20b-shaped file (--preset gpt-oss-20b, 12.1 GB)
# in cgroups of --limits percent of its size.
# --shape 120b-cut: the whole gpt-oss-120b (--preset gpt-oss-120b, 36 layers, about 63 GB)
# does not fit on a disk with ~69 GB free next to the rest, so this measures a CUT-LAYER file
# (--big-layers of the 36, 12 by default: about 22 GB) in one cgroup with the same ratio of
# memory to file as --memory-gib GiB (16) to the whole 120b file. The whole file's size is the
# cut's plus (36 - layers) times one layer's bytes (the blk.0 tensors, from `moeinf inspect`).
# The cut keeps the whole embedding and lm_head (1.2 GB), so its resident share is larger than
# the whole file's; the output labels the run as a cut.
#
# MODEL defaults to $MOEINF_BENCH_MODELS/gptoss20b-shape-L24-mxfp4_moe.gguf (the file of
# bench/compare_llamacpp.sh --models gptoss20b-mxfp4_moe) or gptoss120b-shape-L12-mxfp4_moe.gguf
# ($MOEINF_BENCH_MODELS defaults to bench/models); each is written when missing (seed 7),
# after checking the disk has room. --engines "llama" runs only llama.cpp's side, "moeinf"
# only moeinf's. Needs root (cgroups).
#
# llama.cpp runs with mmap and its weight repacking off (llamacpp_bench.py --no-repack):
# repacked weights are anonymous memory that a cgroup smaller than the file cannot evict.
# gen-model's random routers route unevenly (a few experts take most tokens), so the cache
# figures are a best case for moeinf.
set -euo pipefail
cd "$(dirname "$0")/.."
models=${MOEINF_BENCH_MODELS:-bench/models}
shape=20b model="" limits="50 25" big_layers=12 memory_gib=16
threads=$(nproc) prompt=16 gen=16 reps=1 engines="moeinf llama" extra=()
usage() {
  echo "usage: $0 [--shape 20b|120b-cut] [-m MODEL] [--limits \"50 25\"] [--big-layers N]" \
       "[--memory-gib G] [-t N] [-p N] [-n N] [-r N] [--engines \"moeinf llama\"]" \
       "[-- EXTRA MOEINF BENCH OPTIONS]" >&2
  exit 2
}
while [ $# -gt 0 ]; do
  case "$1" in
    --) shift; extra=("$@"); break ;;
  esac
  [ $# -ge 2 ] || usage
  case "$1" in
    --shape) shape=$2 ;;
    -m) model=$2 ;;
    --limits) limits=$2 ;;
    --big-layers) big_layers=$2 ;;
    --memory-gib) memory_gib=$2 ;;
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
case "$shape" in
  20b) [ -n "$model" ] || model=$models/gptoss20b-shape-L24-mxfp4_moe.gguf
       gen_args=(--preset gpt-oss-20b --layers 24) need=13000000000 ;;
  120b-cut) [ -n "$model" ] || model=$models/gptoss120b-shape-L$big_layers-mxfp4_moe.gguf
            gen_args=(--preset gpt-oss-120b --layers "$big_layers")
            need=$((1300000000 + big_layers * 1730000000)) ;;
  *) usage ;;
esac

cmake --preset release >/dev/null && cmake --build build/release -j"$(nproc)" >/dev/null
bin=build/release/moeinf
if has llama; then
  . bench/lib/llamacpp.sh
  llamacpp_install
fi

if [ ! -f "$model" ]; then
  mkdir -p "$(dirname "$model")"
  avail=$(df -B1 --output=avail "$(dirname "$model")" | tail -1)
  if [ "$avail" -lt "$need" ]; then
    echo "$model: needs $((need / 1000000000)) GB free, $(dirname "$model") has" \
      "$((avail / 1000000000)) GB" >&2
    exit 1
  fi
  echo "writing $model ..." >&2
  "$bin" gen-model -o "$model" "${gen_args[@]}" --type mxfp4_moe --seed 7 >/dev/null
fi
size=$(stat -L -c %s "$model")

# the limits in bytes, and what they stand for
declare -A limit_bytes
if [ "$shape" = 20b ]; then
  for l in $limits; do
    limit_bytes[$l]=$(awk -v s="$size" -v p="$l" 'BEGIN { printf "%.0f", s * p / 100 }')
  done
  what="limits: percent of the file"
else
  # the whole listing first: awk quitting early would end inspect by SIGPIPE (pipefail)
  listing=$("$bin" inspect "$model")
  n_layer=$(awk '$1 == "gpt-oss.block_count" { n = $4 } END { print n }' <<<"$listing")
  layer=$(awk '$2 ~ /^blk\.0\./ { s += $NF } END { printf "%.0f", s }' <<<"$listing")
  full=$(awk -v s="$size" -v n="$n_layer" -v l="$layer" 'BEGIN { printf "%.0f", s + (36 - n) * l }')
  limits="cut"
  limit_bytes[cut]=$(awk -v s="$size" -v f="$full" -v g="$memory_gib" \
                     'BEGIN { printf "%.0f", g * 1073741824 * s / f }')
  what="CUT-LAYER FILE: $n_layer of gpt-oss-120b's 36 layers; limit ${memory_gib} GiB x"
  what+=" $(awk -v s="$size" 'BEGIN { printf "%.2f", s / 1e9 }') GB cut / $(awk -v f="$full" \
         'BEGIN { printf "%.2f", f / 1e9 }') GB whole 120b-shaped file (one layer"
  what+=" $(awk -v l="$layer" 'BEGIN { printf "%.3f", l / 1e9 }') GB)"
fi
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
  limit=${limit_bytes[$l]}
  offload_runs "$l" "$limit"
done

label() { # the limit column: percent or the cut's GiB
  awk -v b="${limit_bytes[$1]}" -v l="$1" 'BEGIN { printf "%s", (l == "cut" ? sprintf("%.2fG", b / 1073741824) : l "%") }'
}
echo "model: $model ($(awk -v s="$size" 'BEGIN { printf "%.2f GB", s / 1e9 }')), threads $threads"
echo "$what"
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
      printf "%-7s %-26s %11s %10s %9s %6s %9s %14s %9s\n" "$(label "$l")" \
        "moeinf expert cache, $run" "${pp[$run-$l]}" "${tg[$run-$l]}" \
        "$(offload_ratio "${tg[$run-$l]}" "${tg[llama-$l]:-0}")" "${hit[$run-$l]}" \
        "${mib[$run-$l]}" \
        "${stall[$run-$l]}" "${peak[moeinf-$l]}"
    done
  fi
  if has llama; then
    printf "%-7s %-26s %11s %10s %9s %6s %9s %14s %9s\n" "$(label "$l")" "llama.cpp mmap" \
      "${pp[llama-$l]}" "${tg[llama-$l]}" "1.00x" "" "" "" "${peak[llama-$l]}"
  fi
done
if has moeinf && has llama && [ "$shape" = 20b ]; then
  echo
  echo "goal (issue 26): decode at 25% at least 10x llama.cpp's"
fi
