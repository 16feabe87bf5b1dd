#!/bin/sh
# workload_shift.sh - a change of workload: the Llama-4 trace holds 100 MMLU abstract_algebra
# requests, then 152 astronomy ones. Hit ratio per window of W requests (cache, EAMC and
# learned state carried over, as in a server) for lru, moe-infinity and reuse at 10 % cache,
# and reuse's lead over LRU, so one can see how many requests after the switch the lead takes
# to come back. A window ending at request k replays the first k requests and counts the
# last W (--warmup k - W).
#
#   bench/workload_shift.sh [BUILD_DIR] [W]      (defaults build/release, 10)
set -eu
cd "$(dirname "$0")/.."
build=${1:-build/release}
w=${2:-10}
trace=../shared/traces/llama4_maverick_mmlu.txt
if [ ! -x "$build/moeinf" ]; then
    cmake --preset release >/dev/null && cmake --build "$build" -j2 --target moeinf >/dev/null
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# The first k requests of the trace (count keys dropped: they describe the whole file).
head_requests() {
    awk -v k="$1" '
    /^# (n_requests|n_tokens|n_prefill_tokens|n_decode_tokens):/ { next }
    /^# req / { if (++nreq <= k) print; next }
    /^#/ { print; next }
    { if (nr == 0 || $1 != last) { nr++; last = $1 } if (nr > k) exit; print }' "$trace"
}
ratio() { sed -n 's/.*"hit_ratio": \([0-9.]*\).*/\1/p'; }
printf '| requests | subject | lru | moe-infinity | reuse | reuse - lru |\n|---|---|---|---|---|---|\n'
k=$w
while [ "$k" -le 250 ]; do
    head_requests "$k" >"$tmp/t.txt"
    subject=astronomy
    [ "$k" -le 100 ] && subject=abstract_algebra
    line="| $((k - w))..$((k - 1)) | $subject |"
    for policy in lru moe-infinity reuse; do
        h=$("$build/moeinf" sim --trace "$tmp/t.txt" --policy "$policy" --cache 307 \
            --warmup $((k - w)) --json | ratio)
        eval "h_$(echo "$policy" | tr - _)=$h"
        line="$line $(printf '%.3f' "$h") |"
    done
    # shellcheck disable=SC2154 # h_reuse and h_lru: set by the eval in the loop above
    printf '%s %s |\n' "$line" "$(awk -v a="$h_reuse" -v b="$h_lru" 'BEGIN { printf "%+.3f", a - b }')"
    k=$((k + w))
done
