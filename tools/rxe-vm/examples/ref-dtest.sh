#!/bin/bash
# Reference uDAPL check on Soft-RoCE: the stock libdapl2 (libdaplofa.so.2,
# the rdma_cm provider) with dtest and dapltest from dapl2-utils, against
# rxe0 on dum0 (10.0.0.1).  Meant to run inside the guest:
#   tools/rxe-vm/run-in-guest.sh tools/rxe-vm/examples/ref-dtest.sh
# Exits 0 only if every check passed.
#
# dtest's defaults (4 MiB buffers, 2000 RDMA writes) take ~5 minutes under
# TCG, so small sizes are used unless DTEST_ARGS says otherwise.
set -u
IP=10.0.0.1
PROV=ofa-v2-rxe
T=${REF_DTEST_TIMEOUT:-180}
DTEST_ARGS=${DTEST_ARGS:--b 65536 -B 10}

tmp=$(mktemp -d /tmp/rxe-ref.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
echo "$PROV u2.0 nonthreadsafe default libdaplofa.so.2 dapl.2.0 \"dum0 0\" \"\"" >"$tmp/dat.conf"
export DAT_OVERRIDE=$tmp/dat.conf

fails=0
check() { # name ok(0/1)
	if [ "$2" = 0 ]; then echo "ref-dtest: $1: ok"; else echo "ref-dtest: $1: FAILED"; fails=$((fails + 1)); fi
}

# Readiness: a client that comes too early fails (dtest: "Failed to get
# server parameters"; dapltest: REJ reason 8, no listener), and the servers
# print their "ready" lines before they really listen, so poll instead.
# dtest's server first takes the client over TCP port 15828 (then uses
# rdma_cm); dapltest's server listens through rdma_cm (on port 62000).
wait_tcp_listen() { # port pid (pid: the server, or its timeout wrapper)
	for _ in $(seq 300); do
		kill -0 "$2" 2>/dev/null || return 1
		[ -n "$(ss -Hltn "sport = :$1" 2>/dev/null)" ] && return 0
		sleep 0.2
	done
	return 1
}
wait_cm_listen() { # comm pid
	for _ in $(seq 300); do
		kill -0 "$2" 2>/dev/null || return 1
		rdma resource show cm_id 2>/dev/null | grep -q "state LISTEN .* comm $1 " && return 0
		sleep 0.2
	done
	return 1
}

echo "=== dtest $DTEST_ARGS (send/recv, RDMA write/read, ping-pong)"
# shellcheck disable=SC2086
timeout "$T" dtest -P "$PROV" -s $DTEST_ARGS >"$tmp/dtest-server" 2>&1 &
spid=$!
wait_tcp_listen 15828 $spid || echo "ref-dtest: dtest server did not start listening"
# shellcheck disable=SC2086
timeout "$T" dtest -P "$PROV" -h "$IP" $DTEST_ARGS 2>&1 | tee "$tmp/dtest-client"
wait $spid
echo "--- dtest server output:"
cat "$tmp/dtest-server"
# dtest exits 0 even when it prints FAILED: judge by the output.
grep -q 'DAPL Test Complete. PASSED' "$tmp/dtest-client"; check "dtest client" $?
grep -q 'DAPL Test Complete. PASSED' "$tmp/dtest-server"; check "dtest server" $?

echo "=== dapltest transaction test (client SR 256, server SR 256)"
timeout "$T" dapltest -T S -D "$PROV" >"$tmp/dapltest-server" 2>&1 &
spid=$!
wait_cm_listen dapltest $spid || echo "ref-dtest: dapltest server did not start listening"
timeout "$T" dapltest -T T -D "$PROV" -s "$IP" -i 100 -t 1 -w 1 -V client SR 256 server SR 256 2>&1 |
	tee "$tmp/dapltest-client"
rc=${PIPESTATUS[0]}
[ "$rc" = 0 ] && ! grep -qiE 'error|bad connection|fail' "$tmp/dapltest-client"
check "dapltest -T T client (exit $rc)" $?
# The server loops until a client asks it to quit.
wait_cm_listen dapltest $spid
timeout "$T" dapltest -T Q -D "$PROV" -s "$IP"
check "dapltest -T Q" $?
wait $spid
rc=$?
echo "--- dapltest server output:"
cat "$tmp/dapltest-server"
check "dapltest server (exit $rc)" $rc

echo "ref-dtest: $fails failure(s)"
[ $fails = 0 ]
