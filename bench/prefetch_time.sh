#!/bin/sh
# prefetch_time.sh - modelled time per token (moeinf sim's time model) with and without
# prefetch, at 10 % and 25 % cache on both traces. Expert bytes are the routed experts at
# Q4_K (4.5 bits per weight): Llama-4-Maverick 3 x 5120 x 8192 weights = 70,778,880 bytes,
# DeepSeek-V2-Lite 3 x 2048 x 1408 = 4,866,048 bytes. Compute per token is the decode time of
# the active weights read from RAM at 29 GB/s: 17B active x 4.5 bits = 330 ms, 2.4B = 47 ms.
# BANDWIDTH is the slow tier's GB/s, default 0.9 (a disk measured with `dd if=BIGFILE
# of=/dev/null bs=4M iflag=direct`; both figures' origin: docs/CACHE_POLICY.md#prefetch); set
# BANDWIDTH=... to model another disk.
#
#   bench/prefetch_time.sh [BUILD_DIR]
set -eu
cd "$(dirname "$0")/.."
build=${1:-build/release}
bw=${BANDWIDTH:-0.9}
traces=../shared/traces
if [ ! -x "$build/moeinf" ]; then
    cmake --preset release >/dev/null && cmake --build "$build" -j2 --target moeinf >/dev/null
fi
field() { sed -n "s/.*\"$1\": \([0-9.]*\).*/\1/p"; }
printf '| trace | cache | policy | prefetch | hit ratio | prefetch loads | prefetch hits | wasted | ms/token |\n'
printf '|---|---|---|---|---|---|---|---|---|\n'
for t in llama4_maverick_mmlu:70778880:330 deepseek_v2_lite_puffin_prefill:4866048:47; do
    trace=${t%%:*}
    rest=${t#*:}
    bytes=${rest%%:*}
    ms=${rest#*:}
    for cache in 10% 25%; do
        for run in lru:0 moe-infinity:0 moe-infinity:1 reuse:0 reuse:1 reuse:2; do
            policy=${run%%:*}
            k=${run#*:}
            out=$("$build/moeinf" sim --trace "$traces/$trace.txt" --policy "$policy" \
                --cache "$cache" --prefetch "$k" --expert-bytes "$bytes" --bandwidth "$bw" \
                --compute-ms "$ms" --json)
            printf '| %s | %s | %s | %s | %.4f | %s | %s | %s | %.1f |\n' "$trace" "$cache" \
                "$policy" "$k" "$(echo "$out" | field hit_ratio)" \
                "$(echo "$out" | field prefetch_loads)" "$(echo "$out" | field prefetch_hits)" \
                "$(echo "$out" | field wasted_prefetches)" "$(echo "$out" | field ms_per_token)"
        done
    done
done
