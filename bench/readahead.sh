#!/usr/bin/env bash
# What reading ahead does to offloaded decode: moeinf bench with the expert cache at memory
# budgets (a cgroup limit, the file evicted before each run, `--expert-cache auto`), for a list
# of settings of --io-threads, --prefetch and --lookahead. One table: the warm run's decode
# tokens/s, hit ratio, demand misses, MiB read and stall ms per token, and the precision /
# recall of each prediction source (from --stats, over all runs). This is how the defaults
# (include/moeinf.h, MOEINF_EXPERT_*_DEFAULT) were chosen.
#
#   bench/readahead.sh [-m MODEL] [-t THREADS] [--budgets "50 25"] [-p 64] [-n 128]
#                      [--configs "io=0 io=2,la=1 io=2,pf=2,la=1 ..."] [--percent] [-r 1]
#
# --percent: no cgroup; each budget is the cache size as a percentage of all experts
# (--expert-cache P%), for models too small for a cgroup limit (the trained default model).
# -r R: warm runs (the median is reported; default 1).
#
# MODEL defaults to $MOEINF_BENCH_MODELS/olmoe-shape-16-q8_0.gguf (bench/offload.sh says how it
# is made). A config is comma-separated key=value: io (--io-threads), pf (--prefetch),
# la (--lookahead), policy. Needs root (cgroup).
set -euo pipefail
cd "$(dirname "$0")/.."
models=${MOEINF_BENCH_MODELS:-bench/models}
model=$models/olmoe-shape-16-q8_0.gguf threads=$(nproc) budgets="50 25" prompt=64 gen=128
percent=0 reps=1
configs="io=0,la=0 io=1,la=0 io=2,la=0 io=2,la=1 io=2,la=2 io=2,pf=2,la=0 io=2,pf=2,la=1 io=4,la=1"
while [ $# -gt 0 ]; do
  case "$1" in
    -m) model=$2; shift 2 ;;
    -t) threads=$2; shift 2 ;;
    --budgets) budgets=$2; shift 2 ;;
    -p) prompt=$2; shift 2 ;;
    -n) gen=$2; shift 2 ;;
    --configs) configs=$2; shift 2 ;;
    --percent) percent=1; shift ;;
    -r) reps=$2; shift 2 ;;
    *) echo "usage: $0 [-m MODEL] [-t N] [--budgets \"50 25\"] [-p N] [-n N] [--configs \"...\"]" >&2
       exit 2 ;;
  esac
done
[ -f "$model" ] || { echo "$0: $model not found (see bench/offload.sh)" >&2; exit 1; }
cmake --preset release >/dev/null && cmake --build build/release -j"$(nproc)" >/dev/null
bin=build/release/moeinf
size=$(stat -c %s "$model")
out=$(mktemp -d)
. bench/lib/cgroup.sh
cgroup_setup
trap 'cgroup_cleanup; rm -rf "$out"' EXIT

echo "model: $model ($(awk -v s="$size" 'BEGIN{printf "%.2f GB", s/1e9}')), threads $threads," \
  "prompt $prompt, decode $gen; median warm run of $reps (a fresh process per row$(
  [ $percent = 1 ] && echo ", cache P% of experts, no cgroup" || echo ", file evicted"))"
printf "%-7s %-24s %10s %7s %8s %9s %9s %16s %16s\n" budget settings "decode t/s" hit \
  "misses" "MiB/tok" "stall ms" "policy P/R" "lookahead P/R"
for b in $budgets; do
  limit=$((size * b / 100))
  for c in $configs; do
    args=()
    for kv in ${c//,/ }; do
      k=${kv%%=*} v=${kv#*=}
      case $k in
        io) args+=(--io-threads "$v") ;;
        pf) args+=(--prefetch "$v") ;;
        la) args+=(--lookahead "$v") ;;
        policy) args+=(--policy "$v") ;;
        *) echo "$0: unknown setting $k" >&2; exit 2 ;;
      esac
    done
    log=$out/run.txt
    if [ $percent = 1 ]; then
      "$bin" bench -m "$model" -t "$threads" -p "$prompt" -n "$gen" -r "$reps" \
        --expert-cache "$b%" --stats "${args[@]}" >"$log" 2>&1
    else
      run_in_cgroup "$limit" "$log" "$bin" bench -m "$model" -t "$threads" -p "$prompt" \
        -n "$gen" -r "$reps" --expert-cache auto --stats "${args[@]}" >/dev/null
    fi
    read -r tps hit miss mib stall < <(awk '$1 == "decode-warm" { print $4, $5, $6, $7, $9 }' "$log")
    pr() {
      local v
      v=$(sed -n "s/^$1: precision \([0-9.]*\), recall \([0-9.]*\).*/\1\/\2/p" "$log")
      echo "${v:--}"
    }
    printf "%-7s %-24s %10s %7s %8s %9s %9.2f %16s %16s\n" "$b%" "$c" "$tps" "$hit" "$miss" \
      "$mib" "$(awk -v s="$stall" 'BEGIN { print s * 1000 }')" "$(pr 'policy prefetch')" \
      "$(pr 'gate lookahead')"
  done
done
