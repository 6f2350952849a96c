#!/bin/bash
# dat-perf smoke test on Soft-RoCE: run inside the guest (rxe0 on dum0, 10.0.0.1):
#   tools/rxe-vm/run-in-guest.sh tools/dat-perf/guest-check.sh
# (BENCH_QUICK=1 tools/bench.sh runs the same.) Needs tools/build.sh
# (target/release/dat-perf, libdat2.so.2, libdaplibv.so.2). Runs every
# dat-perf test once, with few iterations, over our stack (our libdat2 and
# libdaplibv.so.2) and over the reference one (system libdat2 and
# libdaplofa.so.2), in polling and blocking mode, checks the figures are
# plausible, that --json is well formed, and that user errors exit non-zero
# with a message. Ends with "dat-perf: N passed, M failed".
set -u
root=$(cd "$(dirname "$0")/../.." && pwd)
bin=$root/target/release/dat-perf
ours=$root/target/release
tmp=$(mktemp -d /tmp/dat-perf-guest.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
pass=0 fail=0
ok() { echo "dat-perf: $1: ok"; pass=$((pass + 1)); }
bad() { echo "dat-perf: $1: FAILED"; fail=$((fail + 1)); }
check() { # name cmd...
	if "${@:2}"; then ok "$1"; else bad "$1"; fi
}
port=20600
# Server and client on different CPUs: two spinning processes sharing one
# vCPU make every ping-pong wait for the guest's timer tick.
pin_server= pin_client=
if [ "$(nproc)" -ge 2 ] && command -v taskset >/dev/null; then
	pin_server="taskset -c 0" pin_client="taskset -c 1"
fi

printf '%s u2.0 nonthreadsafe default %s dapl.2.0 "dum0 0" ""\n' \
	ibv-rxe libdaplibv.so.2 ofa-v2-rxe libdaplofa.so.2 >"$tmp/dat.conf"
export DAT_OVERRIDE=$tmp/dat.conf

# Until a process named dat-perf has an rdma_cm listener (servers print
# before they listen, and a client that comes early is refused).
wait_listen() { # pid
	local i
	for i in $(seq 300); do
		kill -0 "$1" 2>/dev/null || return 1
		rdma resource show cm_id 2>/dev/null | grep -q "state LISTEN .* comm dat-perf " && return 0
		sleep 0.2
	done
	return 1
}

# pair NAME IA CLIENT-ARGS...: one server, one client; output in $tmp/NAME.{server,client}.
pair() {
	local name=$1 ia=$2
	shift 2
	port=$((port + 1))
	timeout 120 $pin_server "$bin" --ia "$ia" --port $port --timeout 20 >"$tmp/$name.server" 2>&1 &
	local spid=$!
	if ! wait_listen $spid; then
		echo "---- $name: server did not listen"; tail -n 20 "$tmp/$name.server"
		wait $spid
		return 1
	fi
	timeout 120 $pin_client "$bin" --ia "$ia" --server 10.0.0.1 --port $port --timeout 20 --quiet "$@" >"$tmp/$name.client" 2>&1
	local crc=$?
	# A server whose client failed would wait for it forever.
	[ $crc -eq 0 ] || kill $spid 2>/dev/null
	wait $spid
	local src=$?
	if [ $crc -ne 0 ] || [ $src -ne 0 ]; then
		echo "---- $name: client rc=$crc, server rc=$src"
		tail -n 30 "$tmp/$name.client"; tail -n 10 "$tmp/$name.server"
		return 1
	fi
	return 0
}

# plausible FILE TEST MODE: every row of that block has positive figures;
# latencies under 10 s, rates under 100 GB/s. Prints how many rows.
plausible() {
	awk -v t="$2" -v m="$3" '
		/^ [a-z_]+: / { cur = $1; sub(":", "", cur); mode = ($0 ~ ", mode " m "$") || m == "-" ; next }
		cur == t && mode && $1 ~ /^[0-9]+$/ {
			n++
			if (NF == 8) for (i = 4; i <= NF; i++) if ($i + 0 <= 0) bad = 1
			if (NF == 8 && ($4 + 0 > 1e7 || $8 + 0 > 1e7)) bad = 1     # latency columns, usec
			if (NF == 7 && ($6 + 0 <= 0 || $5 + 0 > 1e5)) bad = 1        # Mops/s, MB/s
		}
		END { print n + 0; exit(bad || n == 0) }' "$1" >/dev/null
}

all_tests="send_lat write_lat read_lat send_bw write_bw read_bw send_bibw write_bibw read_bibw msg_rate"
for stack in ours reference; do
	if [ $stack = ours ]; then
		export LD_LIBRARY_PATH=$ours ia=ibv-rxe
	else
		unset LD_LIBRARY_PATH; ia=ofa-v2-rxe
	fi
	echo "=== $stack stack ($ia): every test, polling"
	sizes=1,4096
	[ $stack = reference ] && sizes=64
	if pair $stack-poll $ia --test all --sizes $sizes --iters 20 --warmup 2 --window 8; then
		cat "$tmp/$stack-poll.client"
		check "$stack: libdat2 is the $stack one" grep -q "libdat2 $([ $stack = ours ] && echo "$ours" || echo /usr/lib)" "$tmp/$stack-poll.client"
		for t in $all_tests lmr_reg; do
			check "$stack: $t figures" plausible "$tmp/$stack-poll.client" $t "$([ $t = lmr_reg ] && echo - || echo poll)"
		done
	else
		bad "$stack: polling run"
	fi
	echo "=== $stack stack ($ia): blocking mode (dat_evd_wait)"
	if pair $stack-wait $ia --test send_lat,read_lat,send_bw,write_bibw --sizes 64 --iters 20 --warmup 2 --window 8 --mode wait; then
		cat "$tmp/$stack-wait.client"
		for t in send_lat read_lat send_bw write_bibw; do
			check "$stack: $t figures, wait mode" plausible "$tmp/$stack-wait.client" $t wait
		done
	else
		bad "$stack: blocking run"
	fi
done

export LD_LIBRARY_PATH=$ours
echo "=== --json"
if pair json ibv-rxe --test send_lat,write_bw --sizes 64 --iters 20 --warmup 2 --window 4 --json; then
	cat "$tmp/json.client"
	check "json: two results" [ "$(grep -c '"test": ' "$tmp/json.client")" = 2 ]
	check "json: median and mb_per_s" grep -q '"mb_per_s": [0-9]' "$tmp/json.client"
	check "json: no error" grep -q '"error": null' "$tmp/json.client"
	if command -v python3 >/dev/null; then
		check "json: parses" python3 -c 'import json,sys; json.load(open(sys.argv[1]))' "$tmp/json.client"
	fi
else
	bad "json run"
fi

echo "=== native registration cost (ibv_reg_mr on rxe0)"
"$bin" --verbs rxe0 --test ibv_reg --sizes 4K,1M --iters 20 --warmup 2 --quiet >"$tmp/ibv" 2>&1
rc=$?
cat "$tmp/ibv"
check "ibv_reg: exit 0" [ $rc = 0 ]
check "ibv_reg figures" plausible "$tmp/ibv" ibv_reg -

echo "=== user errors"
"$bin" --ia ibv-rxe --server 10.0.0.1 --port 20999 --timeout 5 --quiet >"$tmp/noserver" 2>&1
rc=$?
cat "$tmp/noserver"
check "no server: exit 1" [ $rc = 1 ]
check "no server: says so" grep -q "dat-perf: .*conn_qual 20999" "$tmp/noserver"
"$bin" --ia nonesuch --server 10.0.0.1 --quiet >"$tmp/noia" 2>&1
rc=$?
cat "$tmp/noia"
check "unknown IA: exit 1 with the registry's reason" sh -c "[ $rc = 1 ] && grep -q 'dat_ia_open(nonesuch) failed: DAT_PROVIDER_NOT_FOUND' '$tmp/noia'"
"$bin" --ia ibv-rxe --test bogus >"$tmp/badarg" 2>&1
rc=$?
check "bad argument: exit 2" sh -c "[ $rc = 2 ] && grep -q \"unknown test 'bogus'\" '$tmp/badarg'"
"$bin" --verbs nodev0 --test ibv_reg >"$tmp/nodev" 2>&1
rc=$?
cat "$tmp/nodev"
check "unknown verbs device: exit 1, lists devices" sh -c "[ $rc = 1 ] && grep -q 'no verbs device nodev0; present: .*rxe0' '$tmp/nodev'"

echo "dat-perf: $pass passed, $fail failed"
[ $fail = 0 ]
