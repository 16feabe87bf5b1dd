#!/usr/bin/env bash
# Decode speed of a model larger than the memory budget: moeinf's expert cache next to
# moeinf's own resident speed (outside the cgroup, the whole file in the page cache), moeinf's
# mmap path and llama.cpp (llama-cpp-python, default mmap), the last three inside the same
# memory cgroup on the same file, evicted from the page cache before each run; and the limit
# no cache can beat at the bytes the cache read: max(compute time per token, from the resident
# run; the bytes read per token over the disk bandwidth measured here as the engine reads:
# bench/lib/disk_probe.sh, O_DIRECT reads of one expert part, as many at once as the runs'
# --io-threads), since reads on I/O threads overlap compute; and the same limit at the fewest misses any cache of that size
# could have on the same accesses: the first round records its routing (`bench
# --record-routing`) and `moeinf sim --policy belady` replays it.
#
#   bench/offload.sh [-m MODEL] [-t THREADS] [--budgets "50 25"] [-p 64] [-n 128] [--slow-n N]
#                    [--rounds 2] [--no-mmap-path] [-- EXTRA MOEINF OPTIONS]
#
# MODEL defaults to $MOEINF_BENCH_MODELS/olmoe-shape-16-q8_0.gguf ($MOEINF_BENCH_MODELS
# defaults to bench/models; OLMoE-1B-7B geometry, Q8_0, 7.3 GB;
# written by `moeinf gen-model --preset olmoe-1b-7b --type q8_0` when missing, which takes a
# few minutes). Each budget is a percentage of the file size and becomes the cgroup's limit
# (a child of this shell's own memory cgroup, v1 or v2, removed at exit); moeinf runs with
# `--expert-cache auto`, which sizes its cache from that limit. For each run the table gives
# decode tokens/s and the cgroup's peak memory (page cache included). moeinf's cache runs
# report their cold first run and warm runs apart (`moeinf bench --expert-cache`). The mmap
# paths decode as many tokens as the cache runs (-n), so that the ratios compare equal work;
# at 25 % they page slowly and take most of a run's time (bench/README.md says how long).
# --slow-n N shortens them for a quick look, and
# the table then says that its ratios to the mmap paths are not equal work. --no-mmap-path
# skips moeinf's own mmap path (as slow as llama.cpp's at 25 %; the table shows "-" for it).
# Needs root.
#
# gen-model's random weights route very unevenly (a few experts take most tokens), so these
# cache figures are a best case; real routing is replayed in the offloaded-experts part 2.
set -euo pipefail
cd "$(dirname "$0")/.."
models=${MOEINF_BENCH_MODELS:-bench/models}
model=$models/olmoe-shape-16-q8_0.gguf threads=$(nproc) budgets="50 25"
prompt=64 gen=128 slow_gen="" rounds=2 mmap_path=1 extra=()
while [ $# -gt 0 ]; do
  case "$1" in
    -m) model=$2; shift 2 ;;
    -t) threads=$2; shift 2 ;;
    --budgets) budgets=$2; shift 2 ;;
    -p) prompt=$2; shift 2 ;;
    -n) gen=$2; shift 2 ;;
    --slow-n) slow_gen=$2; shift 2 ;;
    --rounds) rounds=$2; shift 2 ;;
    --no-mmap-path) mmap_path=0; shift ;;
    --) shift; extra=("$@"); break ;;
    *) echo "usage: $0 [-m MODEL] [-t N] [--budgets \"50 25\"] [-p N] [-n N] [--slow-n N]" \
         "[--rounds N] [--no-mmap-path]" >&2
       exit 2 ;;
  esac
done

slow_gen=${slow_gen:-$gen}

cmake --preset release >/dev/null && cmake --build build/release -j"$(nproc)" >/dev/null
bin=build/release/moeinf
. bench/lib/llamacpp.sh
llamacpp_install
mkdir -p "$(dirname "$model")"
if [ ! -f "$model" ]; then
  echo "writing $model ..." >&2
  "$bin" gen-model -o "$model" --preset olmoe-1b-7b --type q8_0 --seed 7 >/dev/null
fi
size=$(stat -c %s "$model")
out=$(mktemp -d)

# ---- the memory cgroup -----------------------------------------------------------------------
. bench/lib/cgroup.sh
cgroup_setup
cleanup() {
  cgroup_cleanup
  rm -rf "$out"
}
trap cleanup EXIT

field() { awk -v k="$1" -v c="$2" '$1 == k && $2 ~ /^[0-9.]+$/ { print $c }' "$3"; }

# ---- the limits of this machine, measured in this run --------------------------------------
# The disk (as the engine reads: O_DIRECT reads of one expert part at random offsets, as many
# at once as the runs' --io-threads; bench/lib/disk_probe.sh) and the compute time of a token
# (a resident run, the whole file in the page cache, no limit) are measured before and after
# the cgroup runs; the best of each makes the limit, so that it is an upper bound.
. bench/lib/disk_probe.sh
io_threads=$(disk_probe_io_threads "${extra[@]}")
dd if="$model" iflag=nocache count=0 status=none
expert_bytes=$("$bin" bench -m "$model" -t "$threads" -p 1 -n 1 -r 1 --expert-cache 50% \
               --stats-json "$out/probe.json" 2>&1 | sed -n 's/.* slots x \([0-9.]*\) MiB.*/\1/p')
slot=$(sed -n 's/.*"slot_bytes": \([0-9]*\).*/\1/p' "$out/probe.json")
measure_limits() { # appends "disk GB/s" and "resident decode tok/s" to $out/limits.txt
  dd if="$model" iflag=nocache count=0 status=none
  read -r d depth part < <(disk_probe "$model" "$slot" "$io_threads" 4 2>/dev/null)
  echo "disk $d" >>"$out/limits.txt"
  cat "$model" >/dev/null
  "$bin" bench -m "$model" -t "$threads" -p "$prompt" -n "$gen" -r 2 >"$out/resident.txt"
  echo "resident $(field decode 4 "$out/resident.txt")" >>"$out/limits.txt"
}
best() { awk -v k="$1" '$1 == k && $2 > b { b = $2 } END { print b }' "$out/limits.txt"; }
measure_limits

declare -A tg hit mib peak acct belady
for b in $budgets; do
  limit=$((size * b / 100))
  # moeinf, expert cache sized by auto from the cgroup limit; $rounds rounds (each a fresh
  # process, so each has its own cold run), each run's best kept: a noisy spell on this
  # shared machine then hits one round, not the figure
  peak[cache-$b]=0
  for ((round = 0; round < rounds; round++)); do
    # the first round records its routing, for the fewest misses possible (below)
    rec=()
    [ "$round" = 0 ] && rec=(--record-routing "$out/route-$b.trace")
    p=$(run_in_cgroup "$limit" "$out/cache-$b.txt" "$bin" bench -m "$model" -t "$threads" \
        -p "$prompt" -n "$gen" -r 2 --expert-cache auto "${extra[@]}" "${rec[@]}")
    [ $((p >> 20)) -gt "${peak[cache-$b]}" ] && peak[cache-$b]=$((p >> 20))
    for run in cold warm; do
      read -r t h m < <(awk -v k="decode-$run" '$1 == k { print $4, $5, $7 }' "$out/cache-$b.txt")
      if awk -v a="$t" -v b="${tg[$run-$b]:-0}" 'BEGIN { exit !(a > b) }'; then
        tg[$run-$b]=$t hit[$run-$b]=$h mib[$run-$b]=$m
      fi
    done
  done
  # Belady (offline optimal) on the same accesses and cache size: the decode misses per token
  # of the warm runs (the cold run replayed first, uncounted); prefill is replayed per token
  # (belady cannot batch), which changes the cache at the start of decode a little
  slots=$(sed -n 's/.*expert cache: \([0-9]*\) of.*/\1/p' "$out/cache-$b.txt")
  belady[$b]=$("$bin" sim --trace "$out/route-$b.trace" --cache "$slots" --policy belady \
                --warmup 1 --json | python3 -c 'import json, sys
d = json.load(sys.stdin)
print("%.2f" % ((d["decode_accesses"] - d["decode_hits"]) / d["decode_tokens"]))')
  acct[$b]=$(sed -n 's/.* = \([0-9.]*\) MiB; resident weights \([0-9.]*\) MiB, KV cache and scratch \([0-9.]*\) MiB.*/\1 \2 \3/p' "$out/cache-$b.txt")
  # moeinf's mmap path and llama.cpp's, same cgroup and file
  if [ "$mmap_path" = 1 ]; then
    p=$(run_in_cgroup "$limit" "$out/mmap-$b.txt" "$bin" bench -m "$model" -t "$threads" \
        -p "$prompt" -n "$slow_gen" -r 1)
    peak[mmap-$b]=$((p >> 20))
    tg[mmap-$b]=$(field decode 4 "$out/mmap-$b.txt")
  else
    peak[mmap-$b]=- tg[mmap-$b]=-
  fi
  p=$(run_in_cgroup "$limit" "$out/llama-$b.txt" python3 bench/llamacpp_bench.py -m "$model" \
      -t "$threads" -p "$prompt" -n "$slow_gen" -r 1 --mmap)
  peak[llama-$b]=$((p >> 20))
  tg[llama-$b]=$(field decode 2 "$out/llama-$b.txt")
done
measure_limits
disk=$(best disk)
res=$(best resident)

echo "model: $model ($(awk -v s="$size" 'BEGIN{printf "%.2f GB", s/1e9}')), threads $threads"
echo "disk: O_DIRECT reads of one expert part ($(awk -v p="$part" 'BEGIN{printf "%.2f", p/1048576}')" \
  "MiB, a third of a ${expert_bytes} MiB slot) at random offsets, $depth at once (the runs'" \
  "--io-threads $io_threads), best of 2: $disk GB/s"
echo "resident decode (no limit, file in the page cache), best of 2: $res tok/s"
echo "llama.cpp: llama-cpp-python $(python3 -c 'import llama_cpp; print(llama_cpp.__version__)')"
if [ "$slow_gen" -eq "$gen" ]; then
  echo "every run: a $prompt-token prompt, then $gen decoded tokens (equal work)"
else
  echo "NOT EQUAL WORK: the cache runs decode $gen tokens, the mmap paths only $slow_gen" \
    "(--slow-n); their ratios compare rates over different token counts"
fi
echo
printf "%-7s %-28s %10s %11s %10s %10s %8s %10s %9s\n" budget run "decode t/s" \
  "vs resident" "vs mmap" "vs llama" "hit" "MiB/token" "peak MiB"
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (a > 0 && b > 0) printf "%.2fx", a / b; else print "-" }'; }
printf "%-7s %-28s %10s %11s\n" "-" "moeinf resident (no limit)" "$res" "1.00x"
for b in $budgets; do
  limit_mib=$(((size * b / 100) >> 20))
  for run in cold warm; do
    printf "%-7s %-28s %10s %11s %10s %10s %8s %10s %9s\n" "$b%" "moeinf expert cache, $run" \
      "${tg[$run-$b]}" "$(ratio "${tg[$run-$b]}" "$res")" \
      "$(ratio "${tg[$run-$b]}" "${tg[mmap-$b]}")" \
      "$(ratio "${tg[$run-$b]}" "${tg[llama-$b]}")" "${hit[$run-$b]}" "${mib[$run-$b]}" \
      "${peak[cache-$b]}"
  done
  # the limit at the warm run's bytes: compute and reads overlap, so the slower of the two
  lim=$(awk -v r="$res" -v m="${mib[warm-$b]}" -v d="$disk" \
        'BEGIN { c = 1 / r; io = m * 1048576 / (d * 1e9); printf "%.2f", 1 / (c > io ? c : io) }')
  printf "%-7s %-28s %10s %11s %10s %10s\n" "$b%" "limit at these bytes (warm)" "$lim" \
    "$(ratio "$lim" "$res")" "$(ratio "$lim" "${tg[mmap-$b]}")" "$(ratio "$lim" "${tg[llama-$b]}")"
  # the same at Belady's misses: what no cache of this size can beat on these accesses
  bmib=$(awk -v n="${belady[$b]}" -v e="$expert_bytes" 'BEGIN { printf "%.1f", n * e }')
  blim=$(awk -v r="$res" -v m="$bmib" -v d="$disk" \
         'BEGIN { c = 1 / r; io = m * 1048576 / (d * 1e9); printf "%.2f", 1 / (c > io ? c : io) }')
  printf "%-7s %-28s %10s %11s %10s %10s %8s %10s\n" "$b%" "limit at Belady's misses" "$blim" \
    "$(ratio "$blim" "$res")" "$(ratio "$blim" "${tg[mmap-$b]}")" \
    "$(ratio "$blim" "${tg[llama-$b]}")" "" "$bmib"
  printf "%-7s %-28s %10s %11s %10s %10s %8s %10s %9s\n" "$b%" "moeinf mmap" "${tg[mmap-$b]}" \
    "$(ratio "${tg[mmap-$b]}" "$res")" "1.00x" "" "" "" "${peak[mmap-$b]}"
  printf "%-7s %-28s %10s %11s %10s %10s %8s %10s %9s\n" "$b%" "llama.cpp mmap" "${tg[llama-$b]}" \
    "$(ratio "${tg[llama-$b]}" "$res")" "$(ratio "${tg[llama-$b]}" "${tg[mmap-$b]}")" "1.00x" \
    "" "" "${peak[llama-$b]}"
  read -r slots_mib res_mib ctx_mib <<<"${acct[$b]}"
  echo "        Belady: ${belady[$b]} decode misses per token on the recorded accesses" \
    "(the warm runs), against $(awk -v m="${mib[warm-$b]}" -v e="$expert_bytes" \
    'BEGIN { printf "%.2f", m / e }') read by the warm run"
  echo "        warm run at $(ratio "${tg[warm-$b]}" "$lim") of the limit; cgroup limit" \
    "$limit_mib MiB; expert cache $slots_mib + resident $res_mib + KV/scratch $ctx_mib + 64" \
    "= $(awk -v a="$slots_mib" -v b="$res_mib" -v c="$ctx_mib" 'BEGIN{printf "%.0f", a+b+c+64}')" \
    "MiB; peak ${peak[cache-$b]} MiB"
done
