#!/usr/bin/env bash
# The test command (README, CI): installs what is missing, builds, and runs
# every suite — Rust unit tests, the C registry tests, the ABI comparison with
# the reference DAPL, the sock provider on this host, the Soft-RoCE guest
# tests and MPI (MVAPICH2) over our stack — then prints one line
# "tests: N passed, M failed" adding up all of them.
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
log=$(mktemp -d /tmp/dat-tests.XXXXXX)

start=$SECONDS
if [ "$(id -u)" = 0 ]; then tools/setup.sh; else sudo tools/setup.sh; fi || exit 1
tools/build.sh || { echo "tests: build failed"; exit 1; }
first=$SECONDS

passed=0 failed=0 broken=() took=()
# section NAME CMD...: runs a suite, shows its output, and adds the counts
# from its summary line(s). A suite that exits non-zero without reporting a
# failure still counts as one failure.
section() {
    local name=$1; shift
    local t0=$SECONDS
    echo "=== $name"
    "$@" 2>&1 | tee "$log/$name.out"
    local rc=${PIPESTATUS[0]}
    took+=("$name $((SECONDS - t0))")
    local p f
    read -r p f < <(python3 - "$log/$name.out" <<'PY'
import re, sys
# cargo prints one "test result" line per test binary: those add up. Other
# suites print "name: N passed, M failed" lines, nested scripts once each
# and the outer script last with the whole count: that last line is the
# suite's figure.
p = f = 0
last = None
for line in open(sys.argv[1], errors="replace"):
    m = re.search(r"test result: \w+\. (\d+) passed; (\d+) failed", line)
    if m:
        p += int(m.group(1)); f += int(m.group(2))
        continue
    m = re.search(r"^[\w. -]+: (\d+) passed, (\d+) failed", line)
    if m:
        last = (int(m.group(1)), int(m.group(2)))
if last:
    p += last[0]; f += last[1]
print(p, f)
PY
)
    if [ "$rc" -ne 0 ] && [ "$f" -eq 0 ]; then f=1; fi
    passed=$((passed + p)); failed=$((failed + f))
    [ "$f" -eq 0 ] || broken+=("$name")
}

section unit cargo test --release --workspace
# The stateful fuzzer (tools/dat-fuzz): random call sequences under memcheck,
# 40 s into the core on the mock backend, 80 s through the sock provider over
# loopback with connections; one count per target.
section fuzz tools/dat-fuzz/test.sh
section ctest make -C ctest run
section abi python3 tools/abi-check/abi_check.py \
    --ours-include include --ref-include /usr/include \
    --ours-lib target/release/libdat2.so.2 --ref-lib /usr/lib/x86_64-linux-gnu/libdat2.so.2
# The sock provider (libdaplsock.so.2) on this host over loopback: no guest.
section host-sock ctest/host/sock.sh
section host-netns ctest/host/netns.sh
# The host benchmark's smoke mode: one small size once per stack (ours, UCX,
# libfabric), on-node and across namespaces; fails if any of them cannot run.
# The benchmark itself (tools/bench-host.sh, no flag) is not a test.
section host-bench-smoke tools/bench-host.sh --smoke
# MVAPICH2 over the sock provider on this host (no guest), the CI plan
# with the reference's column empty; skipped without the team's tarball.
section host-mpi tools/mpi/run-mpi.sh --host
section guest-ref-provider tools/rxe-vm/run-in-guest.sh ctest/guest/ref-provider.sh
section guest-dat-info tools/rxe-vm/run-in-guest.sh tools/dat-info/guest-check.sh
section guest-provider tools/rxe-vm/run-in-guest.sh ctest/guest/provider.sh
section guest-ibv-programs tools/rxe-vm/run-in-guest.sh ctest/guest/ibv-programs.sh
section guest-interop tools/rxe-vm/run-in-guest.sh ctest/guest/interop.sh
section guest-rmr tools/rxe-vm/run-in-guest.sh ctest/guest/rmr.sh
section guest-dat-perf tools/rxe-vm/run-in-guest.sh tools/dat-perf/guest-check.sh
section guest-conformance tools/rxe-vm/run-in-guest.sh ctest/guest/conformance.sh
# The stateful fuzzer over the verbs provider (90 s, a fresh seed), natively in the guest.
section guest-fuzz tools/rxe-vm/run-in-guest.sh tools/dat-fuzz/guest-check.sh
section guest-install tools/rxe-vm/run-in-guest.sh ctest/guest/install.sh
# MVAPICH2 over our stack (and over the reference provider, side by side,
# on the plan's lines marked ref: one of each kind; MPI_REF_ALL=1 for all),
# when the team's tarball is beside the clone (../shared/mpi/).
section guest-mpi tools/mpi/run-mpi.sh

# The figures lines of the suites that print them (conformance, fuzzer).
grep -h '^conformance figures:\|^fuzz figures:' "$log"/*.out 2>/dev/null
# CI keeps the head and tail of this output: say here, at the tail, what
# failed in each failing suite (its failure lines and the indented lines
# under them), so a failure on a machine we cannot reach can be read.
for name in "${broken[@]}"; do
    echo "--- what failed in $name:"
    awk '/FAIL|: fail \(|failed on ours|timed out|panicked|guest exited/ && !/[0-9]+ passed, [0-9]+ failed/ { print; n = 16; next }
         n > 0 && /^[ \t>]/ { print; n--; next } { n = 0 }' "$log/$name.out" | head -n 60
done
# Where the run's time went (the budget is CI's: under 60 minutes).
echo "time: set-up and build $((first - start)) s; suites (s): ${took[*]}; all $((SECONDS - start)) s"
rm -rf "$log"
[ ${#broken[@]} -eq 0 ] || echo "failing suites: ${broken[*]}"
echo "tests: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
