#!/usr/bin/env bash
# The test command's fuzz section (tools/run-tests.sh): a short run of
# dat-fuzz on each target under valgrind memcheck — the core on the mock
# backend, then the sock provider over loopback with connections — each
# with a fresh time-based seed (printed, with the command to replay it).
# Prints both "fuzz figures (...)" lines, a combined "fuzz figures:" line,
# and "fuzz: P passed, F failed" (one per target).
#
#   FUZZ_MOCK_SECS (40) FUZZ_SOCK_SECS (80)  seconds of sequences per target
#   FUZZ_VALGRIND=0                          run natively (about 4x the calls)
set -uo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
bin=target/release/dat-fuzz
work=$(mktemp -d /tmp/dat-fuzz-test.XXXXXX)
trap 'rm -rf "$work"' EXIT
passed=0 failed=0

if [ ! -x "$bin" ]; then
    echo "fuzz: no $bin (tools/build.sh)"
    echo "fuzz: 0 passed, 1 failed"
    exit 1
fi
runner=()
if [ "${FUZZ_VALGRIND:-1}" != 0 ]; then
    # memcheck is the use-after-free detector (see README); its reports fail the run.
    runner=(valgrind -q --error-exitcode=99 --leak-check=no --trace-children=yes)
fi

run() {
    local name=$1
    shift
    echo "--- dat-fuzz --target $name $*"
    "${runner[@]}" "$bin" --target "$name" "$@" >"$work/$name.out" 2>&1
    local rc=$?
    # A finding prints its minimal sequence; keep the output short otherwise.
    if [ "$rc" -eq 0 ]; then
        grep -E '^fuzz' "$work/$name.out"
        passed=$((passed + 1))
    else
        cat "$work/$name.out"
        echo "dat-fuzz --target $name: exit status $rc"
        failed=$((failed + 1))
    fi
}

run mock --seconds "${FUZZ_MOCK_SECS:-40}" --confs 5
run sock --seconds "${FUZZ_SOCK_SECS:-80}" --confs 3

# One line for both, what the test command's summary shows.
cat "$work"/*.out | python3 -c '
import re, sys
summed = ["sequences", "calls", "connections established", "completions checked", "bytes verified", "findings"]
per = ["distinct call/outcome pairs", "distinct event/status pairs"]
tot, each = dict.fromkeys(summed, 0), {k: [] for k in per}
for line in sys.stdin:
    m = re.match(r"fuzz figures \(fuzz-(\w+)\)", line)
    if not m:
        continue
    for k in summed + per:
        v = re.search(r"(\d+) " + re.escape(k), line)
        if v and k in tot:
            tot[k] += int(v.group(1))
        elif v:
            each[k].append(v.group(1) + " " + m.group(1))
print("fuzz figures: " + ", ".join(f"{tot[k]} {k}" for k in summed) + "; "
      + "; ".join(k + " " + "/".join(each[k]) for k in per) + " (both targets)")
'
echo "fuzz: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
