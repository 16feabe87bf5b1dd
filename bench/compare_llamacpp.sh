#!/usr/bin/env bash
# Prefill and decode tokens/s of moeinf next to llama.cpp (llama-cpp-python) on the same GGUF
# files and thread count, and moeinf's decode rate as a fraction of the memory-bandwidth limit
# (weight bytes read per token / streaming-read bandwidth measured here, same threads).
#
#   bench/compare_llamacpp.sh [-t THREADS] [-p 64] [-n 32] [-r 3] [--rounds 3] [--types "q8_0 q4_0"]
#
# Each engine runs `rounds` times, alternating moeinf and llama.cpp so that a noisy spell on a
# shared machine hits both; each round is one warm-up plus -r repetitions (median), and the
# table keeps each engine's best round. The bandwidth is likewise the best of its passes.
#
# Models (about 1.3 and 2.4 GB) are written once by `moeinf gen-model` into bench/models/:
# a Mixtral-shaped MoE (8 layers, 8 experts, top-2, n_embd 2048, expert FFN 5632, 16 heads,
# 4 KV heads) with the llama SentencePiece vocabulary. Installs llama-cpp-python on first use
# (it compiles llama.cpp natively, a few minutes). Ratios are measured in one run: these
# machines are shared and noisy, so compare ratios, not absolute figures across runs.
set -euo pipefail
cd "$(dirname "$0")/.."
threads=$(nproc) prompt=64 gen=32 reps=3 rounds=3 types="q8_0 q4_0"
while [ $# -gt 0 ]; do
  case "$1" in
    -t) threads=$2; shift 2 ;;
    -p) prompt=$2; shift 2 ;;
    -n) gen=$2; shift 2 ;;
    -r) reps=$2; shift 2 ;;
    --rounds) rounds=$2; shift 2 ;;
    --types) types=$2; shift 2 ;;
    *) echo "usage: $0 [-t THREADS] [-p N] [-n N] [-r N] [--types \"q8_0 q4_0\"]" >&2; exit 2 ;;
  esac
done

python3 -c "import llama_cpp" 2>/dev/null || pip install --quiet llama-cpp-python
cmake --preset release >/dev/null && cmake --build build/release -j"$(nproc)" >/dev/null
bin=build/release/moeinf
vocab=../shared/testdata/tokenizer/ggml-vocab-llama-spm.gguf
[ -f "$vocab" ] || vocab=""
mkdir -p bench/models

bw=$(build/release/bench_bandwidth -t "$threads" -s 2048 2>/dev/null)
printf "streaming-read bandwidth, %s threads: %s GB/s\n\n" "$threads" "$bw"
printf "%-6s %8s | %10s %10s %6s | %10s %10s %6s | %8s %6s\n" type GB \
  "pp moeinf" "pp llama" ratio "tg moeinf" "tg llama" ratio "tg GB/s" "of bw"
for t in $types; do
  model=bench/models/mixtral-shape-$t.gguf
  if [ ! -f "$model" ]; then
    "$bin" gen-model -o "$model" --layers 8 --experts 8 --top-k 2 --embd 2048 --ff 5632 \
      --heads 16 --kv-heads 4 --type "$t" --seed 7 ${vocab:+--vocab-from "$vocab"} >/dev/null
  fi
  size=$(stat -c %s "$model")
  pp_o=0 tg_o=0 pp_l=0 tg_l=0
  for ((round = 0; round < rounds; round++)); do
    ours=$("$bin" bench -m "$model" -t "$threads" -p "$prompt" -n "$gen" -r "$reps")
    peer=$(python3 bench/llamacpp_bench.py -m "$model" -t "$threads" -p "$prompt" -n "$gen" -r "$reps")
    pp_o=$(awk -v b="$pp_o" '$1=="prefill"{print ($4 > b ? $4 : b)}' <<<"$ours")
    tg_o=$(awk -v b="$tg_o" '$1=="decode"{print ($4 > b ? $4 : b)}' <<<"$ours")
    pp_l=$(awk -v b="$pp_l" '$1=="prefill"{print ($2 > b ? $2 : b)}' <<<"$peer")
    tg_l=$(awk -v b="$tg_l" '$1=="decode"{print ($2 > b ? $2 : b)}' <<<"$peer")
  done
  gbtok=$(sed -n 's/.*decode reads \([0-9.]*\) GB.*/\1/p' <<<"$ours")
  awk -v t="$t" -v s="$size" -v po="$pp_o" -v pl="$pp_l" -v to="$tg_o" -v tl="$tg_l" \
      -v g="$gbtok" -v bw="$bw" 'BEGIN {
    printf "%-6s %8.2f | %10.1f %10.1f %5.2fx | %10.2f %10.2f %5.2fx | %8.2f %5.0f%%\n",
      t, s / 1e9, po, pl, po / pl, to, tl, to / tl, to * g, 100 * to * g / bw }'
done
