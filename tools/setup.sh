#!/usr/bin/env bash
# Installs everything the build, the tests and the Soft-RoCE guest need on a
# fresh Debian 12 machine (run as root). Safe to run again.
set -euo pipefail
export DEBIAN_FRONTEND=noninteractive

packages=(
    # build: C compiler for the link step and ctest; libclang for bindgen
    gcc make clang libclang-dev pkg-config
    # rdma-core, for the verbs provider and the tools that check it
    libibverbs-dev librdmacm-dev libibumad-dev rdma-core ibverbs-providers ibverbs-utils rdmacm-utils
    perftest iproute2 kmod
    # the reference DAPL: headers for the ABI test, registry/provider/tests to run against
    libdapl2 libdapl-dev dapl2-utils
    # the Soft-RoCE guest: a kernel with rdma_rxe, QEMU, and a static busybox for its initramfs
    qemu-system-x86 linux-image-amd64 busybox-static cpio file gzip xz-utils
    python3
    # install and packaging: dpkg-deb/dpkg-shlibdeps, and man to check the pages
    dpkg-dev man-db
    # the fuzzer's short run goes under memcheck, which catches use-after-free on stable Rust
    valgrind
    # tools/bench-host.sh: UCX (ucx_perftest) and libfabric (fi_pingpong) to measure beside
    # ours; taskset (util-linux) pins their server and client
    ucx-utils libfabric-bin util-linux
)

missing=()
for p in "${packages[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ] || [ "${CI:-}" = true ] || [ "${SETUP_FORCE:-0}" = 1 ]; then
    echo "setup: installing ${missing[*]}"
    apt-get update
    apt-get install -y --no-install-recommends "${packages[@]}"
else
    echo "setup: all packages present"
fi
command -v cargo >/dev/null || { echo "setup: cargo not found; install a Rust toolchain (rustup) first" >&2; exit 1; }
