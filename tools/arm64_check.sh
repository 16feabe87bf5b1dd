#!/usr/bin/env bash
# The arm64 build and tests on an x86-64 Debian machine: cross-compiled with -Werror by Debian's
# gcc-aarch64-linux-gnu (cmake/aarch64-linux-gnu.cmake) into build/arm64, then ctest with every
# test run under qemu-user. arm64 has no SIMD kernel table yet, so the kernels run their scalar
# table; the build checks that the code and its warnings are portable, the tests that it
# computes the same results there. Not part of CI: under qemu the suite takes about half an
# hour on 2 cores (test_golden alone 5 minutes, test_offload over 10).
#
#   tools/arm64_check.sh [CTEST ARGUMENTS]    e.g. -R 'test_quant|test_golden', or -E test_offload
#
# Needs (Debian 12, as root):
#   dpkg --add-architecture arm64 && apt-get update
#   apt-get install gcc-aarch64-linux-gnu qemu-user qemu-user-binfmt \
#     libpcre2-dev:arm64 libmicrohttpd-dev:arm64 libcjson-dev:arm64
# Tests that start the `moeinf` binary through a shell need the kernel to run arm64 binaries
# through qemu (binfmt_misc, which qemu-user-binfmt registers where systemd runs; elsewhere
# this script registers it from /usr/lib/binfmt.d when it can).
#
# Known differences under qemu (docs/BUILD.md): test_offload_io's page-cache check fails
# (qemu-user ignores madvise(MADV_RANDOM), so the kernel reads ahead through the model's
# mapping), and test_serve_load's memory bound (the RSS measured is qemu's process).
set -euo pipefail
cd "$(dirname "$0")/.."

for tool in aarch64-linux-gnu-gcc qemu-aarch64; do
  if ! command -v "$tool" >/dev/null 2>&1; then
    echo "arm64_check: $tool is missing; see the packages at the top of $0" >&2
    exit 2
  fi
done
if [ ! -e /lib/ld-linux-aarch64.so.1 ]; then
  echo "arm64_check: /lib/ld-linux-aarch64.so.1 is missing: install libc6:arm64" >&2
  exit 2
fi

binfmt=/proc/sys/fs/binfmt_misc
if [ ! -e "$binfmt/qemu-aarch64" ] && [ -r /usr/lib/binfmt.d/qemu-aarch64.conf ]; then
  [ -e "$binfmt/register" ] || mount -t binfmt_misc binfmt_misc "$binfmt" 2>/dev/null || true
  if [ -w "$binfmt/register" ]; then
    cat /usr/lib/binfmt.d/qemu-aarch64.conf >"$binfmt/register" 2>/dev/null || true
  fi
fi
if [ ! -e "$binfmt/qemu-aarch64" ]; then
  echo "arm64_check: arm64 binaries cannot run through a shell here (binfmt_misc):" \
    "the tests that start moeinf will fail" >&2
fi

export CMAKE_BUILD_PARALLEL_LEVEL="${CMAKE_BUILD_PARALLEL_LEVEL:-$(nproc)}"
cmake -S . -B build/arm64 -DCMAKE_TOOLCHAIN_FILE=cmake/aarch64-linux-gnu.cmake \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build build/arm64
ctest --test-dir build/arm64 -j"$(nproc)" --output-on-failure "$@"
