#!/bin/sh
# bench_sim.sh - replay speed of the expert-cache simulator: accesses per second for each
# policy on the shared traces, trace parsing included, one core.
#
#   bench/bench_sim.sh [BUILD_DIR] [CACHE]     (defaults: build/release, 10%)
#
# Builds BUILD_DIR with the release preset when its binary is missing.
set -eu
cd "$(dirname "$0")/.."
build=${1:-build/release}
cache=${2:-10%}
traces=../shared/traces
if [ ! -x "$build/moeinf" ]; then
    cmake --preset release >/dev/null && cmake --build "$build" -j2 --target moeinf >/dev/null
fi
for trace in llama4_maverick_mmlu deepseek_v2_lite_puffin_prefill; do
    for policy in lru lfu count belady; do
        printf '%-32s ' "$trace"
        "$build/moeinf" sim --trace "$traces/$trace.txt" --cache "$cache" --policy "$policy" \
            --bench | sed -n 's/^bench *//p'
    done
done
