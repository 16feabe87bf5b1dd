# bench/lib/disk_probe.sh - sourced by the benchmark scripts: the disk's read bandwidth as the
# expert loader reads (src/offload/loader.c): O_DIRECT reads of one expert part at random
# offsets, as many at once as the engine has I/O threads. The loader hands an expert's three
# parts (gate, up, down) to its --io-threads threads one part each, so its reads are part-sized
# (a third of a slot: the slot holds each part's 4 KiB-aligned window; exact where the three
# parts have one type, their mean where they differ) and up to --io-threads of them are in
# flight; with --io-threads 0 the compute thread reads, one read at a time. A probe of one
# read at a time under-states what the loader gets from a disk that serves several reads at
# once, so a limit built on it could be beaten.
#
#   read -r gbps depth part < <(disk_probe FILE SLOT_BYTES IO_THREADS [SECONDS])
#
# Prints "GB/s depth part_bytes" on one line (GB = 1e9 bytes); bench_disk_read's own line
# ("O_DIRECT pread reads of N bytes, D in flight: X GB/s") goes to stderr. The program is
# $BENCH_DISK_READ (default build/release/bench_disk_read). The caller evicts FILE from the
# page cache first where O_DIRECT may be refused.

# The engine's default number of I/O threads (MOEINF_EXPERT_IO_THREADS_DEFAULT, moeinf.h).
disk_probe_default_io_threads=4

# The --io-threads value among the arguments given ("$@"), else the default.
disk_probe_io_threads() {
  local io=$disk_probe_default_io_threads
  while [ $# -gt 0 ]; do
    case "$1" in
      --io-threads) io=$2; shift ;;
      --io-threads=*) io=${1#*=} ;;
    esac
    shift
  done
  echo "$io"
}

disk_probe() {
  local file=$1 slot=$2 io=$3 seconds=${4:-3}
  local depth=$((io > 0 ? io : 1))
  local part=$(((slot / 3 + 4095) / 4096 * 4096))
  local gbps
  gbps=$("${BENCH_DISK_READ:-build/release/bench_disk_read}" "$file" "$part" "$seconds" \
         "$depth" pread) || return 1
  echo "$gbps $depth $part"
}
