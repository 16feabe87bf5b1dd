#!/bin/sh
# routing_study.sh - the routing study of the trained default model (docs/CACHE_POLICY.md,
# "Routing of a trained model"), regenerated from scratch:
#   tools/study/routing_study.sh [BUILD_DIR]        (default build/release; run from anywhere)
# 1. prompts: 40 paragraphs (their first half, at most 32 words) of each document that tools/train held apart
#    (never trained on) with at least 40 paragraphs; subject = the document;
# 2. one `moeinf run` per prompt (32 tokens, default sampling) with --record-routing and
#    --record-tag SUBJECT/N, joined in prompt order with `moeinf trace concat`;
# 3. `moeinf trace heatmap` (two requests drawn to docs/, the skew of every request),
#    `moeinf trace stats`, `moeinf sim --sweep` (every policy; plot in docs/);
# 4. routing_study.py: EAM matching by subject and the gate lookahead's precision/recall.
# Everything lands in tools/study/work/ (report.md gathers it); the figures in docs/.
# Needs the training environment (tools/train/venv.sh makes it) and the corpus package
# download (as tools/train does); about 5 minutes on two cores.
set -eu
root=$(cd "$(dirname "$0")/../.." && pwd)
build=${1:-$root/build/release}
bin="$build/moeinf"
model="$root/models/trained-moe-Q8_0.gguf"
work="$root/tools/study/work"
py="$root/tools/train/.venv/bin/python"
[ -x "$bin" ] || { echo "routing_study.sh: $bin missing: cmake --workflow --preset release" >&2; exit 1; }
"$root/tools/train/venv.sh"
rm -rf "$work"
mkdir -p "$work/req"

"$py" "$root/tools/study/routing_study.py" prompts "$work/prompts.tsv"
tab=$(printf '\t')
i=0
: >"$work/ids.tsv"
while IFS="$tab" read -r subject text; do
    "$bin" run -m "$model" -p "$text" -n 32 -t 1 --print-ids \
        --record-routing "$work/req/$i.txt" --record-tag "$subject/$i" >"$work/out.txt"
    prompt_ids=$("$bin" tokenize -m "$model" "$text")
    gen_ids=$(sed -n 's/^ids://p' "$work/out.txt")
    printf '%s\t%s%s\n' "$subject" "$prompt_ids" "$gen_ids" >>"$work/ids.tsv"
    i=$((i + 1))
done <"$work/prompts.tsv"
n=$i
files=$(i=0; while [ $i -lt $n ]; do printf '%s ' "$work/req/$i.txt"; i=$((i + 1)); done)
# shellcheck disable=SC2086 # one word per file
"$bin" trace concat -o "$work/trace.txt" $files
T="$work/trace.txt"

{
    echo "# Routing study of the trained default model"
    echo
    echo "$n requests; trace: $T"
    echo
    echo "## trace heatmap (skew per layer)"
    "$bin" trace heatmap --trace "$T" --index 0 -o "$root/docs/heatmap-trained-req0.svg" 2>&1
    "$bin" trace heatmap --trace "$T" --index $((n / 2)) -o "$root/docs/heatmap-trained-mid.svg" 2>&1
    echo
    echo "## trace stats"
    "$bin" trace stats --trace "$T"
    echo
    echo "## sim --sweep (all accesses, then decode only)"
    "$bin" sim --trace "$T" --sweep --sizes 5%,10%,25%,50% --plot "$root/docs/sim-hit-ratio-trained.svg"
    "$bin" sim --trace "$T" --sweep --sizes 5%,10%,25%,50% --phase decode
    echo
    "$py" "$root/tools/study/routing_study.py" analyze "$model" "$T" "$work/ids.tsv"
} >"$work/report.md"
# Mean skew over every request (one heatmap run each, as docs/SIM.md#what-the-shared-traces-show).
i=0
while [ $i -lt "$n" ]; do
    "$bin" trace heatmap --trace "$T" --index $i --layers 2>&1
    i=$((i + 1))
done >"$work/heatmaps.txt"
{
    echo
    echo "## skew per layer, means over the $n requests (trace heatmap --layers)"
    echo
    "$py" "$root/tools/study/routing_study.py" skew "$work/heatmaps.txt"
} >>"$work/report.md"
echo "wrote $work/report.md and $work/heatmaps.txt"
