#!/usr/bin/env bash
# bench/io_tax.sh - what reading from the disk costs the computation on this machine. moeinf
# decodes MODEL resident (the whole file in memory, -p 0, N tokens), alone and beside
# bench_disk_read reading the same file with O_DIRECT at each given rate, the rates alternated
# in each of R rounds. Per rate it prints the median decode tokens/s, its ratio to the runs
# without a reader, and the steal time of each run: /proc/stat's count of the time this
# machine's CPUs were ready to run but the host (a virtual machine's) ran something else.
#
#   bench/io_tax.sh -m MODEL [-t THREADS] [-n 128] [-r 3] [--rates "0 200 550"]
#                   [--size 2228224] [--depth 4]
#
# Why: an offloaded run reads experts while it computes. On a machine whose disk costs the CPU
# nothing but a few interrupts, the reads take nothing from the computation; on a virtual
# machine whose host serves the disk on the CPUs the guest runs on, they do. Read rates are
# MB/s (1e6 bytes); take them from an offloaded run (`moeinf bench --expert-cache`: MiB read
# per token x tokens/s). An offloaded run cannot come nearer its resident speed than the
# ratio measured here at its own read rate, whatever its cache does. --size is one read (the
# default: an expert part of the OLMoE-shaped Q8_0 file), --depth the reads in flight (the
# engine's I/O threads). Reads into huge pages, at random 4 KiB-aligned offsets. MODEL must fit
# in memory with room to spare (the resident run reads it into memory).
set -euo pipefail
cd "$(dirname "$0")/.."
model="" threads=$(nproc) gen=128 rounds=3 rates="0 200 550" size=2228224 depth=4
usage() {
  echo "usage: $0 -m MODEL [-t N] [-n N] [-r N] [--rates \"0 200 550\"] [--size BYTES]" \
       "[--depth N]" >&2
  exit 2
}
while [ $# -gt 0 ]; do
  [ $# -ge 2 ] || usage
  case "$1" in
    -m) model=$2 ;;
    -t) threads=$2 ;;
    -n) gen=$2 ;;
    -r) rounds=$2 ;;
    --rates) rates=$2 ;;
    --size) size=$2 ;;
    --depth) depth=$2 ;;
    *) usage ;;
  esac
  shift 2
done
if [ -z "$model" ] || [ ! -f "$model" ]; then usage; fi
cmake --preset release >/dev/null
cmake --build build/release -j"$(nproc)" --target moeinf bench_disk_read >/dev/null
bin=build/release/moeinf reader=build/release/bench_disk_read
out=$(mktemp -d)
reader_pid=""
cleanup() {
  if [ -n "$reader_pid" ]; then kill "$reader_pid" 2>/dev/null || true; fi
  rm -rf "$out"
}
trap cleanup EXIT
. bench/lib/report.sh

hz=$(getconf CLK_TCK)
steal_ticks() { awk '$1 == "cpu" { print $9 }' /proc/stat; }

cat "$model" >/dev/null # the resident load reads it from the page cache, not the disk
declare -A tg steal
for ((round = 1; round <= rounds; round++)); do
  for rate in $rates; do
    if awk -v r="$rate" 'BEGIN { exit !(r > 0) }'; then
      "$reader" "$model" "$size" 86400 "$depth" pread huge "$rate" >/dev/null 2>"$out/reader" &
      reader_pid=$!
    fi
    s0=$(steal_ticks)
    "$bin" bench -m "$model" -t "$threads" -p 0 -n "$gen" -r 1 >"$out/run" 2>&1
    s1=$(steal_ticks)
    if [ -n "$reader_pid" ]; then
      if ! kill "$reader_pid" 2>/dev/null; then # it ended early: the run had no reader
        echo "the reader stopped during the run (rate $rate):" >&2
        cat "$out/reader" >&2
        exit 1
      fi
      wait "$reader_pid" 2>/dev/null || true
      reader_pid=""
    fi
    t=$(awk '$1 == "decode" && $2 ~ /^[0-9]+$/ { print $4; exit }' "$out/run")
    [ -n "$t" ] || { echo "no decode figure from: $bin bench -m $model" >&2; cat "$out/run" >&2; exit 1; }
    tg[$rate]="${tg[$rate]:-} $t"
    steal[$rate]="${steal[$rate]:-} $(awk -v d=$((s1 - s0)) -v hz="$hz" 'BEGIN { printf "%.1f", d / hz }')"
  done
done

base=$(tr ' ' '\n' <<<"${tg[0]:-}" | grep . | median || true)
echo "$(cpu_line), threads $threads"
echo "model: $model; resident decode of $gen tokens (-p 0), one warm-up and one measured run" \
  "each; $rounds rounds, the rates alternated in each"
echo "reader: bench_disk_read, O_DIRECT reads of $size bytes, $depth in flight, paced to the rate"
echo
printf "%-10s %12s %13s %30s %s\n" "read MB/s" "decode t/s" "vs no reader" "steal s/run (median)" "decode t/s of each round"
for rate in $rates; do
  m=$(tr ' ' '\n' <<<"${tg[$rate]}" | grep . | median)
  s=$(tr ' ' '\n' <<<"${steal[$rate]}" | grep . | median)
  ratio=$(awk -v a="$m" -v b="${base:-0}" 'BEGIN { if (b > 0) printf "%.2fx", a / b; else print "-" }')
  printf "%-10s %12s %13s %30s %s\n" "$rate" "$m" "$ratio" "$s" "${tg[$rate]# }"
done
