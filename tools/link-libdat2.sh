#!/usr/bin/env bash
# Links libdat2.so.2 from the dat-registry staticlib.
#
# rustc's cdylib link passes its own anonymous version script, which makes
# ld ignore ours, so the exports would carry no DAT_2.0 version. Linking the
# staticlib with cc gives us the soname and the version script we need.
#
# usage: tools/link-libdat2.sh [debug|release]   (default: release)
set -euo pipefail
profile=${1:-release}
root=$(cd "$(dirname "$0")/.." && pwd)
target=${CARGO_TARGET_DIR:-$root/target}
out=$target/$profile
map=$root/dat-registry/libdat2.map
archive=$out/libdat_registry.a
[ -f "$archive" ] || { echo "link-libdat2: $archive missing; run cargo build first" >&2; exit 1; }

# Every exported name must be pulled out of the archive explicitly.
undefs=()
while read -r sym; do undefs+=("-Wl,--undefined=$sym"); done < <(sed -n 's/^ *\([a-z_0-9]*\);$/\1/p' "$map")

${CC:-cc} -shared -o "$out/libdat2.so.2.0.0" \
    -Wl,-soname,libdat2.so.2 -Wl,--version-script="$map" \
    -Wl,--gc-sections -Wl,--no-undefined -Wl,-z,relro,-z,now \
    "${undefs[@]}" "$archive" \
    -lgcc_s -lutil -lrt -lpthread -lm -ldl -lc
ln -sf libdat2.so.2.0.0 "$out/libdat2.so.2"
ln -sf libdat2.so.2 "$out/libdat2.so"
echo "link-libdat2: $out/libdat2.so.2"
