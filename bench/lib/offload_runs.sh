# offload_runs.sh - what the offload benchmarks of one model shape share (offload_qwen36.sh,
# offload_gptoss.sh): the runs of both engines at one memory limit, and reading their figures.
# Source it after bench/lib/cgroup.sh (cgroup_setup done) and after setting bin, model,
# threads, prompt, gen, reps, extra (an array), out (a folder) and has() (whether an engine
# runs); the caller declares the associative arrays pp tg hit mib stall peak, which
# offload_runs fills.

# offload_row KEY COLUMN FILE: that column of the line whose first field is KEY and second a
# number
offload_row() { awk -v k="$1" -v c="$2" '$1 == k && $2 ~ /^[0-9.]+$/ { print $c; exit }' "$3"; }

# offload_ratio A B: A / B as "N.NNx", "-" when either is missing
offload_ratio() {
  awk -v a="$1" -v b="$2" 'BEGIN { if (a > 0 && b > 0) printf "%.2fx", a / b; else print "-" }'
}

# offload_runs KEY LIMIT: moeinf's expert cache (sized by auto) and llama.cpp's mmap (weight
# repacking off: repacked weights are anonymous memory the cgroup cannot evict) in a cgroup of
# LIMIT bytes, the file evicted before each (run_in_cgroup). Fills, under KEY:
#   pp, tg, hit, mib, stall[cold-KEY], [warm-KEY]   moeinf's first run and the median of the
#                                                   others (stall in ms per decoded token)
#   pp, tg[llama-KEY]                               llama.cpp's
#   peak[moeinf-KEY], peak[llama-KEY]               the cgroup's peak memory, MiB
# and leaves each engine's output in $out/moeinf-KEY.txt, $out/llama-KEY.txt.
offload_runs() {
  local l=$1 limit=$2 p run f
  if has moeinf; then
    f=$out/moeinf-$l.txt
    p=$(run_in_cgroup "$limit" "$f" "$bin" bench -m "$model" -t "$threads" -p "$prompt" \
        -n "$gen" -r "$reps" --expert-cache auto "${extra[@]}")
    peak[moeinf-$l]=$((p >> 20))
    for run in cold warm; do
      pp[$run-$l]=$(offload_row "prefill-$run" 4 "$f")
      tg[$run-$l]=$(offload_row "decode-$run" 4 "$f")
      hit[$run-$l]=$(offload_row "decode-$run" 5 "$f")
      mib[$run-$l]=$(offload_row "decode-$run" 7 "$f")
      stall[$run-$l]=$(awk -v s="$(offload_row "decode-$run" 9 "$f")" \
                       'BEGIN { printf "%.1f", s * 1000 }')
    done
  fi
  if has llama; then
    f=$out/llama-$l.txt
    p=$(run_in_cgroup "$limit" "$f" python3 bench/llamacpp_bench.py -m "$model" -t "$threads" \
        -p "$prompt" -n "$gen" -r "$reps" --mmap --no-repack)
    peak[llama-$l]=$((p >> 20))
    pp[llama-$l]=$(offload_row prefill 2 "$f")
    tg[llama-$l]=$(offload_row decode 2 "$f")
  fi
}
