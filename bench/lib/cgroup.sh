# bench/lib/cgroup.sh - sourced by the benchmark scripts: runs a command inside a fresh memory
# cgroup (a child of this shell's own, v1 or v2) with the model file evicted from the page
# cache first. Needs root. The caller sets $model and calls cgroup_setup once; the child
# group is removed after each run and at exit.
#
#   cgroup_setup
#   peak=$(run_in_cgroup LIMIT_BYTES LOG CMD...)   # CMD's output in LOG; prints peak bytes
#   cgroup_make LIMIT_BYTES                         # the group alone, for a command run apart

cgroup_setup() {
  if own=$(awk -F: '$2=="memory"{print $3}' /proc/self/cgroup) && [ -n "$own" ] &&
     [ -d /sys/fs/cgroup/memory ]; then
    cgv=1 cg_parent=/sys/fs/cgroup/memory${own%/}
  else
    cgv=2 cg_parent=/sys/fs/cgroup$(awk -F: '$1=="0"{print $3}' /proc/self/cgroup)
    cg_parent=${cg_parent%/}
  fi
  cg=""
}

cgroup_cleanup() {
  [ -n "${cg:-}" ] && [ -d "$cg" ] && rmdir "$cg" 2>/dev/null || true
}

# evict FILE: drop it from the page cache
evict() { dd if="$1" iflag=nocache count=0 status=none; sync; }

# cgroup_make LIMIT_BYTES: a fresh child group $cg of that memory limit (no swap), and $model
# evicted; a command joins it with: bash -c 'echo $$ >"$0/cgroup.procs" && exec "$@"' "$cg" CMD...
cgroup_make() {
  cg=$cg_parent/moeinf-bench-$$
  [ -d "$cg" ] && rmdir "$cg"
  mkdir "$cg"
  if [ "$cgv" = 1 ]; then
    echo "$1" >"$cg/memory.limit_in_bytes"
  else
    echo "$1" >"$cg/memory.max"
    echo 0 >"$cg/memory.swap.max" 2>/dev/null || true
  fi
  evict "$model"
}

run_in_cgroup() {
  local limit=$1 log=$2
  shift 2
  cgroup_make "$limit"
  local rc=0
  bash -c 'echo $$ >"$0/cgroup.procs" && exec "$@"' "$cg" "$@" >"$log" 2>&1 || rc=$?
  if [ $rc != 0 ]; then
    echo "failed (exit $rc$([ $rc = 137 ] && echo ', killed: out of memory in the cgroup')): $*" >&2
    tail -5 "$log" >&2
  fi
  if [ "$cgv" = 1 ]; then cat "$cg/memory.max_usage_in_bytes"; else cat "$cg/memory.peak"; fi
  rmdir "$cg"
  cg=""
}
