# bench/lib/report.sh - sourced by the benchmark scripts: what their reports share.
# shellcheck shell=bash
#
#   median <FILE            the median of the numbers in FILE, one a line (of an even count,
#                           the mean of the middle two)
#   cpu_field NAME          the first value of NAME in /proc/cpuinfo ('model name', model, ...)
#   cpu_line [EXTRA]        "CPU: NAME (family F, model M, stepping S[, EXTRA]), N CPUs": the
#                           line that names the CPU a table was measured on

median() {
  sort -g | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}

cpu_field() { sed -n "s/^$1[[:space:]]*: //p" /proc/cpuinfo | head -1; }

cpu_line() {
  echo "CPU: $(cpu_field 'model name') (family $(cpu_field 'cpu family'), model $(cpu_field model)," \
    "stepping $(cpu_field stepping)${1:+, $1}), $(nproc) CPUs"
}
