#!/usr/bin/env bash
# The arm64 kernel check that CI runs: tests/test_quant.c, which compares every kernel table
# with the scalar twins bit for bit, cross-compiled for Linux arm64 and run under qemu-user,
# so that the NEON table (src/quant/kernels_neon*.c, compiled on arm64 only) is built with
# -Werror and checked on every change. It links statically, so the cross toolchain is all it
# needs (Debian: gcc-aarch64-linux-gnu qemu-user); clang-tidy, where installed, reads those
# files as arm64 code. tools/arm64_check.sh builds and tests the whole tree, which also needs
# the arm64 libraries.
#
# Usage: tools/arm64_kernels_check.sh [OUTPUT_FOLDER]   (default build/arm64-kernels)
# ../shared (or MOEINF_SHARED) gives test_quant its real-data case.
set -euo pipefail
cd "$(dirname "$0")/.."

for tool in aarch64-linux-gnu-gcc qemu-aarch64; do
  if ! command -v "$tool" >/dev/null 2>&1; then
    echo "arm64_kernels_check: $tool is missing (Debian: gcc-aarch64-linux-gnu qemu-user)" >&2
    exit 2
  fi
done

out=${1:-build/arm64-kernels}
mkdir -p "$out"
# CMakeLists.txt's MOEINF_WARNINGS for GCC, and its RelWithDebInfo build (-O2, asserts on).
warnings=(-Wall -Wextra -Werror -Wshadow -Wstrict-prototypes -Wmissing-prototypes -Wformat=2
  -Wvla -Wundef -Wpointer-arith -Wno-format-truncation)
aarch64-linux-gnu-gcc -std=c11 -D_GNU_SOURCE -O2 -g -static "${warnings[@]}" \
  -Isrc -Iinclude -Itests tests/test_quant.c src/quant/*.c src/base/*.c src/gguf/*.c \
  -lm -lpthread -o "$out/test_quant"

# clang-tidy (.clang-tidy) over the files the x86 build leaves out, read as arm64 code.
if command -v clang-tidy >/dev/null 2>&1; then
  clang-tidy -quiet src/quant/kernels_neon*.c src/quant/kernels.c -- --target=aarch64-linux-gnu \
    -isystem /usr/aarch64-linux-gnu/include -D_GNU_SOURCE -std=c11 -Isrc -Iinclude
fi

export MOEINF_SHARED=${MOEINF_SHARED:-$(cd .. && pwd)/shared}
log="$out/test_quant.log"
status=0
qemu-aarch64 "$out/test_quant" >"$log" 2>&1 || status=$?
cat "$log"
if [ "$status" -ne 0 ]; then
  echo "arm64_kernels_check: test_quant failed under qemu-aarch64 (exit $status)" >&2
  exit 1
fi
# A run that found no NEON table would compare the scalar table with itself and pass.
if ! grep -qx 'tables: scalar neon' "$log"; then
  echo "arm64_kernels_check: test_quant did not check the neon table (see its tables: line)" >&2
  exit 1
fi
echo "arm64_kernels_check: the neon table equals the scalar twins (test_quant under qemu-aarch64)"
