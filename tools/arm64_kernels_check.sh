#!/usr/bin/env bash
# The arm64 kernel check that CI runs: tests/test_quant.c, which compares every kernel table
# with the scalar twins bit for bit, cross-compiled for Linux arm64 and run under qemu-user,
# so that the arm64 tables (src/quant/kernels_neon.c, kernels_dotprod.c and kernels_arm*.h,
# compiled on arm64 only) are built with -Werror and checked on every change. It links statically, so the cross toolchain is all it
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
cc=(aarch64-linux-gnu-gcc -std=c11 -D_GNU_SOURCE -O2 -g "${warnings[@]}" -Isrc -Iinclude -Itests)
# kernels_dotprod.c with its own flag, as CMakeLists.txt compiles it
"${cc[@]}" -march=armv8.2-a+dotprod -c src/quant/kernels_dotprod.c -o "$out/kernels_dotprod.o"
quant=()
for f in src/quant/*.c; do
  [ "$f" = src/quant/kernels_dotprod.c ] || quant+=("$f")
done
"${cc[@]}" -static tests/test_quant.c "${quant[@]}" "$out/kernels_dotprod.o" src/base/*.c \
  src/gguf/*.c -lm -lpthread -o "$out/test_quant"

# clang-tidy (.clang-tidy) over the files the x86 build leaves out, read as arm64 code.
if command -v clang-tidy >/dev/null 2>&1; then
  tidy=(clang-tidy -quiet)
  target=(--target=aarch64-linux-gnu -isystem /usr/aarch64-linux-gnu/include -D_GNU_SOURCE
    -std=c11 -Isrc -Iinclude)
  "${tidy[@]}" src/quant/kernels_neon.c src/quant/kernels.c -- "${target[@]}"
  "${tidy[@]}" src/quant/kernels_dotprod.c -- "${target[@]}" -march=armv8.2-a+dotprod
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
# qemu-aarch64's default CPU ("max") has the dot product extension, so both tables run.
if ! grep -qx 'tables: scalar neon dotprod' "$log"; then
  echo "arm64_kernels_check: test_quant did not check the neon and dotprod tables" \
    "(see its tables: line)" >&2
  exit 1
fi
echo "arm64_kernels_check: the neon and dotprod tables equal the scalar twins" \
  "(test_quant under qemu-aarch64)"
