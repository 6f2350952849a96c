#!/bin/bash
# dat-info on Soft-RoCE: run inside the guest (rxe0 on dum0, 10.0.0.1):
#   tools/rxe-vm/run-in-guest.sh tools/dat-info/guest-check.sh
# Needs tools/build.sh (target/release/dat-info and libdat2.so.2). Checks that
# an rdma_cm entry on dum0 opens with real attributes through our libdat2 and
# through the reference one, that an entry naming a missing netdev is
# explained with the netdevs present, and that --generate lists rxe0/dum0.
# Ends with "guest-dat-info: N passed, M failed".
set -u
root=$(cd "$(dirname "$0")/../.." && pwd)
bin=$root/target/release/dat-info
ours=$root/target/release
tmp=$(mktemp -d /tmp/dat-info-guest.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
pass=0 fail=0
check() { # name cmd...
	if "${@:2}"; then echo "guest-dat-info: $1: ok"; pass=$((pass + 1)); else echo "guest-dat-info: $1: FAILED"; fail=$((fail + 1)); fi
}

cat >"$tmp/dat.conf" <<'EOF'
ofa-v2-rxe u2.0 nonthreadsafe default libdaplofa.so.2 dapl.2.0 "dum0 0" ""
ofa-v2-rxe-ip u2.0 nonthreadsafe default libdaplofa.so.2 dapl.2.0 "10.0.0.1 0" ""
ofa-v2-eth9 u2.0 nonthreadsafe default libdaplofa.so.2 dapl.2.0 "eth9 0" ""
EOF

echo "=== dat-info --file dat.conf (our libdat2)"
LD_LIBRARY_PATH=$ours "$bin" --file "$tmp/dat.conf" >"$tmp/out" 2>"$tmp/err"
rc=$?
cat "$tmp/out"
sed 's/^/stderr: /' "$tmp/err"
check "exit 1 (one entry unusable)" [ $rc = 1 ]
check "libdat2 is ours" grep -q "^libdat2: *$ours/libdat2.so.2" "$tmp/out"
check "rxe0 port 1 ACTIVE on dum0" grep -q "^netdevs: .*dum0 (rxe0 port 1 ACTIVE)" "$tmp/out"
check "ofa-v2-rxe usable" grep -q "^ofa-v2-rxe (line 1): usable" "$tmp/out"
check "ofa-v2-rxe-ip usable" grep -q "^ofa-v2-rxe-ip (line 2): usable" "$tmp/out"
check "IA address 10.0.0.1" grep -q "ia_address *10.0.0.1" "$tmp/out"
check "eth9 explained" grep -q "^ofa-v2-eth9 (line 3): NOT USABLE: netdev eth9 absent; present: .*dum0 (rxe0 port 1 ACTIVE)" "$tmp/out"

echo "=== dat-info --ia ofa-v2-rxe -v (reference libdat2 from the system)"
env -u LD_LIBRARY_PATH "$bin" --file "$tmp/dat.conf" --ia ofa-v2-rxe -v >"$tmp/out" 2>"$tmp/err"
rc=$?
cat "$tmp/out"
sed 's/^/stderr: /' "$tmp/err"
check "reference: exit 0" [ $rc = 0 ]
check "reference: libdat2 from the system" grep -q "^libdat2: */usr/lib/.*libdat2.so.2" "$tmp/out"
check "reference: max_rdma_size shown" grep -qE "max_rdma_size +[1-9]" "$tmp/out"

echo "=== dat-info --json --ia ofa-v2-eth9"
LD_LIBRARY_PATH=$ours "$bin" --file "$tmp/dat.conf" --ia ofa-v2-eth9 --json >"$tmp/out" 2>/dev/null
cat "$tmp/out"
check "json status device-absent" grep -q '"status": "device-absent"' "$tmp/out"

echo "=== dat-info --generate"
"$bin" --generate >"$tmp/out"
rc=$?
cat "$tmp/out"
check "generate: exit 0" [ $rc = 0 ]
check "generate: dum0 line" grep -qx 'ofa-v2-dum0 u2.0 nonthreadsafe default libdaplibv.so.2 dapl.2.0 "dum0 0" ""' "$tmp/out"
check "generate: rxe0 port 1 line" grep -qx 'ofa-v2-rxe0-1 u2.0 nonthreadsafe default libdaplibv.so.2 dapl.2.0 "rxe0 1" ""' "$tmp/out"

echo "guest-dat-info: $pass passed, $fail failed"
[ $fail = 0 ]
