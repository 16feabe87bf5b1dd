#!/usr/bin/env bash
# bench/fit_calibrate.sh - fits the two parameters of `moeinf fit`'s synthetic routing (skew,
# reuse: src/app/fit_routing.c) to each shared trace: the default cache policy's hit ratio at
# caches of 10, 25 and 50 % of the experts on the trace, then on synthetic routings of the
# trace's geometry over a grid of the parameters; prints the grid point with the least squared
# error, with both sets of ratios. Its result is the table CALIB in src/app/fit_routing.c.
#
#   bench/fit_calibrate.sh [MOEINF] [TRACES_DIR]   (default build/dev/moeinf, ../shared/traces)
set -euo pipefail
moeinf=${1:-build/dev/moeinf}
traces=${2:-../shared/traces}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
sizes="10 25 50"
ratios() { # TRACE -> "h10 h25 h50"
  local out=""
  for s in $sizes; do
    out="$out $("$moeinf" sim --trace "$1" --cache "$s%" --json |
      python3 -c 'import json,sys; print("%.4f" % json.load(sys.stdin)["hit_ratio"])')"
  done
  echo $out
}
for t in "$traces"/llama4_maverick_mmlu.txt "$traces"/deepseek_v2_lite_puffin_prefill.txt; do
  [ -f "$t" ] || { echo "missing $t" >&2; exit 1; }
  l=$(awk -F': ' '/^# n_layers:/{print $2; exit}' "$t")
  e=$(awk -F': ' '/^# n_experts:/{print $2; exit}' "$t")
  k=$(awk -F': ' '/^# top_k:/{print $2; exit}' "$t")
  real=$(ratios "$t")
  echo "$(basename "$t"): $l x $e, top $k; hit ratio at $sizes %: $real"
  best="" best_err=""
  for skew in 0.0 0.3 0.6 0.9 1.2 1.5; do
    for reuse in 0.0 0.15 0.3 0.45 0.6 0.75; do
      "$moeinf" fit --synthetic "$l,$e,$k,$skew,$reuse" -o "$tmp/s.txt"
      syn=$(ratios "$tmp/s.txt")
      err=$(python3 -c "import sys; a=[float(x) for x in '$real'.split()]; b=[float(x) for x in '$syn'.split()]; print('%.6f' % sum((x-y)**2 for x,y in zip(a,b)))")
      if [ -z "$best_err" ] || python3 -c "import sys; sys.exit(0 if $err < $best_err else 1)"; then
        best="skew $skew reuse $reuse: $syn" best_err=$err
      fi
    done
  done
  echo "  best fit: $best (squared error $best_err)"
done
