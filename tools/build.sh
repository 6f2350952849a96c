#!/usr/bin/env bash
# Builds everything: the Rust workspace, libdat2.so.2 (with its DAT_2.0
# symbol versions) and the C tests. Output: target/release/.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
cargo build --release --workspace
tools/link-libdat2.sh release
# dat.conf names providers by soname, as DAPL's libdaplofa.so.2.
ln -sf libdaplibv.so target/release/libdaplibv.so.2
ln -sf libdaplsock.so target/release/libdaplsock.so.2
# dat-trace: the LD_PRELOAD call tracer (tools/dat-trace/dat-trace.c).
${CC:-cc} -O2 -g -Wall -Wextra -Werror -shared -fPIC -Iinclude -o target/release/libdat-trace.so tools/dat-trace/dat-trace.c -ldl
make -C ctest all
