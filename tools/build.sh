#!/usr/bin/env bash
# Builds everything: the Rust workspace, libdat2.so.2 (with its DAT_2.0
# symbol versions) and the C tests. Output: target/release/.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
cargo build --release --workspace
tools/link-libdat2.sh release
make -C ctest all
