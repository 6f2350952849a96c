#!/bin/sh
# Runs the probe example inside the Soft-RoCE guest:
#   cargo build --release -p rdma-core-sys --examples
#   tools/rxe-vm/run-in-guest.sh rdma-core-sys/examples/probe-guest.sh
set -e
rdma link show 2>/dev/null || true
exec target/release/examples/probe rxe0 1
