#!/bin/sh
# cache_policies.sh - hit ratio of every cache policy at 5, 10, 25 and 50 % cache on both shared
# traces, over all requests and over the held-out second half (--warmup: the first half is
# replayed but not counted), with the fraction of the LRU -> Belady gap that each online policy
# closes. Markdown on stdout. bench/README.md says how long it takes.
#
#   bench/cache_policies.sh [BUILD_DIR]        (default build/release, built when missing)
set -eu
cd "$(dirname "$0")/.."
build=${1:-build/release}
traces=../shared/traces
if [ ! -x "$build/moeinf" ]; then
    cmake --preset release >/dev/null && cmake --build "$build" -j2 --target moeinf >/dev/null
fi
policies=lru,lfu,count,moe-infinity,reuse,belady
for t in llama4_maverick_mmlu:252 deepseek_v2_lite_puffin_prefill:289; do
    trace=${t%%:*}
    n=${t##*:}
    for part in all heldout; do
        warm=0
        [ "$part" = heldout ] && warm=$((n / 2))
        printf '\n%s, %s (requests %d..%d counted)\n\n' "$trace" "$part" "$warm" "$((n - 1))"
        "$build/moeinf" sim --trace "$traces/$trace.txt" --sweep --sizes 5%,10%,25%,50% \
            --policies "$policies" --warmup "$warm" --json |
            awk -v pols="$policies" '
            /"policy"/ {
                match($0, /"policy": "[^"]*"/); p = substr($0, RSTART + 11, RLENGTH - 12)
                match($0, /"cache_experts": [0-9]+/); c = substr($0, RSTART + 17, RLENGTH - 17)
                match($0, /"hit_ratio": [0-9.]+/); h = substr($0, RSTART + 13, RLENGTH - 13)
                r[c, p] = h; if (!(c in seen)) { seen[c] = 1; sizes[++ns] = c }
            }
            END {
                np = split(pols, P, ",")
                printf "| cache |"; for (i = 1; i <= np; i++) printf " %s |", P[i]
                printf " reuse: gap closed |\n|---|"; for (i = 1; i <= np; i++) printf "---|"
                printf "---|\n"
                for (s = 1; s <= ns; s++) {
                    c = sizes[s]; printf "| %s |", c
                    for (i = 1; i <= np; i++) printf " %.3f |", r[c, P[i]]
                    gap = r[c, "belady"] - r[c, "lru"]
                    if (gap > 0) printf " %.0f%% |\n", 100 * (r[c, "reuse"] - r[c, "lru"]) / gap
                    else printf " - |\n"
                }
            }'
    done
done
