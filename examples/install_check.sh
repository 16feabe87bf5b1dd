#!/usr/bin/env bash
# Installs a build tree into a temporary prefix and builds examples/generate.c against that
# copy through pkg-config, linked shared and static; both must print what `moeinf run` prints.
# usage: examples/install_check.sh BUILD_DIR MODEL
set -euo pipefail
build=$1 model=$2
src=$(cd "$(dirname "$0")" && pwd)
prefix=$(mktemp -d)
trap 'rm -rf "$prefix"' EXIT
cmake --install "$build" --prefix "$prefix" >/dev/null
pc=$(dirname "$(find "$prefix" -name moeinf.pc)")
export PKG_CONFIG_PATH=$pc
libdir=$(pkg-config --variable=libdir moeinf)
test -e "$libdir/libmoeinf.a"
readelf -d "$libdir/libmoeinf.so" | grep -q 'SONAME.*libmoeinf.so.0'
cc -std=c11 -Wall -Werror "$src/generate.c" $(pkg-config --cflags --libs moeinf) -o "$prefix/gen-shared"
cc -std=c11 -Wall -Werror "$src/generate.c" $(pkg-config --cflags moeinf) \
  "$libdir/libmoeinf.a" $(pkg-config --static --libs-only-l moeinf | sed 's/-lmoeinf//') \
  -o "$prefix/gen-static"
want=$("$prefix/bin/moeinf" run -m "$model" -p "Once upon a time" -n 8 --temp 0 -c 512 2>/dev/null)
got_shared=$(LD_LIBRARY_PATH=$libdir "$prefix/gen-shared" "$model" "Once upon a time" 8)
got_static=$("$prefix/gen-static" "$model" "Once upon a time" 8)
[ "$got_shared" = "$want" ] || { echo "shared example: '$got_shared' != '$want'"; exit 1; }
[ "$got_static" = "$want" ] || { echo "static example: '$got_static' != '$want'"; exit 1; }
"$prefix/bin/moeinf" --version
echo "install check ok: $prefix (headers, libmoeinf.a, libmoeinf.so.0, moeinf.pc, moeinf)"
