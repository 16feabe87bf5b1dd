#!/usr/bin/env bash
# Long contexts within a memory budget: a DeepSeek-V2-Lite-shaped Q4_K_M file (random weights,
# --preset deepseek-v2-lite, 10.4 GB; multi-head latent attention caches one 512-wide latent
# and a 64-dim rotary key per token and layer: 31 KB a token at F16 over 27 layers) run by
# `moeinf bench --expert-cache auto` at several context sizes in ONE memory cgroup (4 GiB by
# default), the file evicted from the page cache before each run (bench/lib/cgroup.sh). At
# each context a real prefill fills --fill percent of it (pseudo-random token ids, every
# micro-batch's last logits computed), then --n tokens are decoded there. The expert cache
# gets what the cgroup leaves after the resident weights, the KV cache and scratch, so it
# shrinks as the context grows. Per context: prefill and decode tokens/s, the expert cache's
# hit ratio, the KV cache's bytes (layers x context x (latent + rotary key) x 2 bytes, from
# the file's metadata) next to moeinf's own KV-and-scratch figure, the cache's slots, and the
# cgroup's peak memory. Each context runs twice (moeinf bench's warm-up, reported as cold,
# and one measured run, warm).
#
#   bench/long_context.sh [-m MODEL] [--layers 27] [--contexts "4096 16384 32768"]
#                         [--memory-gib 4] [--fill 94] [-n 16] [-t N] [-b 512]
#                         [-- EXTRA MOEINF BENCH OPTIONS]
#
# MODEL defaults to $MOEINF_BENCH_MODELS/dsv2lite-shape-L27-q4_k_m.gguf (bench/offload_deepseek.sh's
# file; $MOEINF_BENCH_MODELS defaults to bench/models), written when missing; --layers writes
# a cut instead, which the output labels (a cut does less work per token: on a small machine
# a 32K prefill of all 27 layers takes hours). Needs root (cgroups).
set -euo pipefail
cd "$(dirname "$0")/.."
models=${MOEINF_BENCH_MODELS:-bench/models}
model="" layers=27 contexts="4096 16384 32768" memory_gib=4 fill=94 gen=16 batch=512
threads=$(nproc) extra=()
usage() {
  echo "usage: $0 [-m MODEL] [--layers N] [--contexts \"4096 16384 32768\"] [--memory-gib G]" \
       "[--fill PERCENT] [-n N] [-t N] [-b N] [-- EXTRA MOEINF BENCH OPTIONS]" >&2
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
    --contexts) contexts=$2 ;;
    --memory-gib) memory_gib=$2 ;;
    --fill) fill=$2 ;;
    -n) gen=$2 ;;
    -t) threads=$2 ;;
    -b) batch=$2 ;;
    *) usage ;;
  esac
  shift 2
done
[ -n "$model" ] || model=$models/dsv2lite-shape-L$layers-q4_k_m.gguf

cmake --preset release >/dev/null && cmake --build build/release -j"$(nproc)" >/dev/null
bin=build/release/moeinf
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
meta() { awk -v k="$1" '$1 == k { print $4 }' <<<"$listing"; }
arch=$(meta general.architecture | tr -d '"')
n_layer=$(meta "$arch.block_count")
kv_lora=$(meta "$arch.attention.kv_lora_rank")
n_rot=$(meta "$arch.rope.dimension_count")
n_ctx_train=$(meta "$arch.context_length")
limit=$(awk -v g="$memory_gib" 'BEGIN { printf "%.0f", g * 1073741824 }')
out=$(mktemp -d)

. bench/lib/cgroup.sh
. bench/lib/report.sh
cgroup_setup
cleanup() {
  cgroup_cleanup
  rm -rf "$out"
}
trap cleanup EXIT
# row KEY COLUMN FILE: that column of the line whose first field is KEY and second a number
row() { awk -v k="$1" -v c="$2" '$1 == k && $2 ~ /^[0-9.]+$/ { print $c; exit }' "$3"; }

echo "model: $model ($(awk -v s="$size" 'BEGIN { printf "%.2f GB", s / 1e9 }'), $n_layer" \
  "layers$([ "$n_layer" = 27 ] || echo ": A CUT of DeepSeek-V2-Lite's 27"); trained context" \
  "$n_ctx_train), threads $threads"
echo "one cgroup of $memory_gib GiB ($(awk -v l="$limit" -v s="$size" \
  'BEGIN { printf "%.0f%%", 100 * l / s }') of the file); --expert-cache auto; prefill" \
  "micro-batch $batch; KV cache F16, $((kv_lora + n_rot)) values (latent $kv_lora + rotary" \
  "key $n_rot) per token and layer"
cpu_line
echo "per context: a prompt of --fill $fill % of it, then $gen decoded tokens; cold = the first" \
  "run (empty cache), warm = the second"
echo
printf "%-6s %-6s %-8s %-13s %-13s %-6s %-12s %-6s %-12s %-6s %-8s\n" ctx prompt "KV MiB" \
  "KV+scr MiB" "cache slots" run "prefill t/s" hit "decode t/s" hit "peak MiB"
for c in $contexts; do
  p=$((c * fill / 100))
  [ $((p + gen + 1)) -le "$c" ] || p=$((c - gen - 1))
  f=$out/ctx-$c.txt
  start=$(date +%s)
  peak=$(run_in_cgroup "$limit" "$f" "$bin" bench -m "$model" -t "$threads" -c "$c" -p "$p" \
         -n "$gen" -r 1 -b "$batch" --expert-cache auto "${extra[@]}") || true
  secs=$(($(date +%s) - start))
  kv=$(awk -v c="$c" -v l="$n_layer" -v w="$((kv_lora + n_rot))" \
       'BEGIN { printf "%.1f", c * l * w * 2 / 1048576 }')
  own=$(sed -n 's/.*KV cache and scratch \([0-9.]*\) MiB.*/\1/p' "$f" | head -1)
  slots=$(sed -n 's/.*expert cache: \([0-9]* of [0-9]*\) experts.*/\1/p' "$f" | head -1)
  for run in cold warm; do
    printf "%-6s %-6s %-8s %-13s %-13s %-6s %-12s %-6s %-12s %-6s %-8s\n" "$c" "$p" "$kv" \
      "${own:--}" "${slots/ of //}" "$run" "$(row "prefill-$run" 4 "$f")" \
      "$(row "prefill-$run" 5 "$f")" "$(row "decode-$run" 4 "$f")" \
      "$(row "decode-$run" 5 "$f")" "$((peak >> 20))"
  done
  if ! grep -q '^decode-warm' "$f"; then
    echo "  (ctx $c failed after ${secs} s:" "$(tail -2 "$f" | tr '\n' ' '))"
  else
    echo "  (ctx $c: ${secs} s for both runs)"
  fi
done
