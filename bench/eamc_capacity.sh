#!/bin/sh
# eamc_capacity.sh - does a small EAMC capture the patterns? Hit ratio of moe-infinity and
# reuse at 10 % cache against the EAMC's capacity (entries; the traces have 252 and 289
# requests, so 8 entries is ~3 %), each replay starting from an empty collection of that size.
#
#   bench/eamc_capacity.sh [BUILD_DIR]
set -eu
cd "$(dirname "$0")/.."
build=${1:-build/release}
traces=../shared/traces
if [ ! -x "$build/moeinf" ]; then
    cmake --preset release >/dev/null && cmake --build "$build" -j2 --target moeinf >/dev/null
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
ratio() { sed -n 's/.*"hit_ratio": \([0-9.]*\).*/\1/p'; }
printf '| EAMC entries | llama4 moe-infinity | llama4 reuse | deepseek moe-infinity | deepseek reuse |\n'
printf '|---|---|---|---|---|\n'
for cap in 1 2 4 8 16 32 64 128 256; do
    printf '| %d |' "$cap"
    for trace in llama4_maverick_mmlu deepseek_v2_lite_puffin_prefill; do
        for policy in moe-infinity reuse; do
            rm -f "$tmp/e.eamc"
            h=$("$build/moeinf" sim --trace "$traces/$trace.txt" --policy "$policy" --cache 10% \
                --eamc "$tmp/e.eamc" --eamc-capacity "$cap" --json | ratio)
            printf ' %.4f |' "$h"
        done
    done
    printf '\n'
done
