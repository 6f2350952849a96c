#!/usr/bin/env bash
# The main job (README): on a fresh machine, installs what is missing, builds,
# boots the Soft-RoCE guest and runs a DAT program — the reference dtest,
# server and client — through our libdat2.so.2 and our provider libdaplibv.so.2
# over rxe0, showing its output.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
if [ "$(id -u)" = 0 ]; then tools/setup.sh; else sudo tools/setup.sh; fi
tools/build.sh >/dev/null
exec tools/rxe-vm/run-in-guest.sh ctest/guest/demo.sh
