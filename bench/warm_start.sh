#!/usr/bin/env bash
# What a warm start (--eamc FILE) does to the first request of a process: its expert-cache hit
# ratio, misses per token and tokens/s, started cold (no file) and warm (a file that earlier
# processes wrote), on the same held-out prompts.
#
#   bench/warm_start.sh [--cache 25%] [--train 8] [-n 64] [--reps 3] [--models "A B"]
#
# Training: --train processes of `moeinf run --eamc FILE`, each one request on a different
# prompt, write and extend FILE (each starts from what the previous one saved). Measuring:
# for each of 4 held-out prompts, `moeinf run` once without --eamc (cold) and once with a copy
# of FILE (warm), --reps times, medians; the hit ratio and misses are the whole request's
# (prompt and decode), tokens/s over the request's tokens. What is saved is the policy's
# learned state (the EAMC, the learned reuse table, recency, co-occurrence), not the cache's
# contents: a warm process still starts with an empty cache, so every expert is read once.
#
# Models (--models): `trained` is the embedded default model (4 layers x 16 experts, top-2,
# trained on text: real routing); `gen` is a generated model (12 layers x 32 experts, top-2,
# random weights, 0.5 GB), written to /work/models/ when missing (outside any worktree).
# Routing replayed from a trace (`bench --route-trace`) is not used here yet.
set -euo pipefail
cd "$(dirname "$0")/.."
cache=25% train=8 gen=64 reps=3 models="trained gen"
while [ $# -gt 0 ]; do
  case "$1" in
    --cache) cache=$2; shift 2 ;;
    --train) train=$2; shift 2 ;;
    -n) gen=$2; shift 2 ;;
    --reps) reps=$2; shift 2 ;;
    --models) models=$2; shift 2 ;;
    *) echo "usage: $0 [--cache 25%] [--train N] [-n N] [--reps N] [--models \"trained gen\"]" >&2
       exit 2 ;;
  esac
done

cmake --preset release >/dev/null && cmake --build build/release -j2 >/dev/null
bin=build/release/moeinf
gen_model=/work/models/warm-12x32-top2-e512-f768-q8_0.gguf
if [[ " $models " == *" gen "* ]] && [ ! -f "$gen_model" ]; then
  mkdir -p /work/models
  echo "writing $gen_model ..." >&2
  "$bin" gen-model -o "$gen_model" --layers 12 --experts 32 --top-k 2 --embd 512 --ff 768 \
    --heads 8 --kv-heads 4 --type q8_0 --seed 11 --threads 2 >/dev/null
fi
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

train_prompts=(
  "The history of the city begins with a small fishing village on the river"
  "In mathematics, a prime number is a natural number greater than one"
  "She opened the door and saw that the garden was covered in snow"
  "The recipe calls for two cups of flour, a pinch of salt and some butter"
  "Scientists observed the comet as it passed close to the sun last year"
  "Once upon a time there was a king who had three daughters"
  "The train left the station at noon and arrived in the capital by evening"
  "Water boils at one hundred degrees Celsius at sea level"
  "He wrote a long letter to his brother about the war and the harvest"
  "The museum holds paintings, sculptures and old maps of the coast"
  "Every morning the baker lit the oven before the sun came up"
  "The committee will meet again next week to discuss the budget"
)
test_prompts=(
  "The old man walked slowly along the road towards the village"
  "A computer program is a sequence of instructions for a machine"
  "The children played in the park until their mother called them home"
  "Farmers in the valley grow wheat, barley and grapes for wine"
)

# One request: hit ratio, misses per token and tokens/s from --stats-json.
measure() { # model eamc-or-empty prompt json
  local args=(run -m "$1" -p "$3" -n "$gen" --temp 0 -t 2 --expert-cache "$cache"
              --stats-json "$4")
  [ -n "$2" ] && args+=(--eamc "$2")
  "$bin" "${args[@]}" >/dev/null 2>&1
}

field() { python3 -c "import json,sys; d=json.load(open(sys.argv[1])); print(d[sys.argv[2]])" "$@"; }

median() { sort -g | awk '{v[NR]=$1} END {print v[int((NR+1)/2)]}'; }

printf "%-8s %-6s %-5s %8s %12s %10s\n" model cache start hit misses/tok tokens/s
for m in $models; do
  case "$m" in
    trained) model=models/trained-moe-Q8_0.gguf ;;
    gen) model=$gen_model ;;
    *) echo "unknown model '$m' (trained, gen)" >&2; exit 2 ;;
  esac
  state=$out/$m.eamc
  for ((i = 0; i < train; i++)); do
    p=${train_prompts[$((i % ${#train_prompts[@]}))]}
    "$bin" run -m "$model" -p "$p" -n "$gen" --temp 0 -t 2 --expert-cache "$cache" \
      --eamc "$state" >/dev/null 2>&1
  done
  for start in cold warm; do
    : >"$out/hit" ; : >"$out/miss" ; : >"$out/tps"
    for p in "${test_prompts[@]}"; do
      for ((r = 0; r < reps; r++)); do
        eamc=""
        if [ $start = warm ]; then eamc=$out/copy.eamc; cp "$state" "$eamc"; fi
        measure "$model" "$eamc" "$p" "$out/s.json"
        tok=$(field "$out/s.json" tokens)
        echo "$(field "$out/s.json" hit_ratio)" >>"$out/hit.$r"
        python3 -c "print($(field "$out/s.json" misses) / $tok)" >>"$out/miss.$r"
        echo "$(field "$out/s.json" tokens_per_second)" >>"$out/tps.$r"
      done
    done
    # per repetition the mean over the prompts, then the median over repetitions
    for ((r = 0; r < reps; r++)); do
      awk '{s+=$1} END {print s/NR}' "$out/hit.$r" >>"$out/hit"
      awk '{s+=$1} END {print s/NR}' "$out/miss.$r" >>"$out/miss"
      awk '{s+=$1} END {print s/NR}' "$out/tps.$r" >>"$out/tps"
      rm -f "$out/hit.$r" "$out/miss.$r" "$out/tps.$r"
    done
    printf "%-8s %-6s %-5s %8.3f %12.2f %10.1f\n" "$m" "$cache" "$start" \
      "$(median <"$out/hit")" "$(median <"$out/miss")" "$(median <"$out/tps")"
  done
done
echo "first request of a process; $train training requests; ${#test_prompts[@]} held-out" \
     "prompts x $reps repetitions, -n $gen, 2 threads, O_DIRECT reads"
