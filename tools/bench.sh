#!/bin/bash
# The benchmark: native verbs (perftest) vs dat-perf over our stack (our
# libdat2.so.2 + libdaplibv.so.2) vs dat-perf over the reference stack
# (DAPL's libdat2.so.2 + libdaplofa.so.2), same sizes and iterations, in one
# boot of the Soft-RoCE guest; then the cost of dat_lmr_create+dat_lmr_free
# against ibv_reg_mr+ibv_dereg_mr. Prints one table with every figure and
# the ratios ours/native and ours/reference, and which targets are met.
#
#   tools/bench.sh                  # needs tools/build.sh first
#   BENCH_QUICK=1 tools/bench.sh    # the smoke test instead (tools/dat-perf/guest-check.sh)
#
# Environment (defaults in brackets):
#   BENCH_LAT_SIZES   latency sizes ["64 4096"]
#   BENCH_BW_SIZES    bandwidth sizes ["4096 65536"]
#   BENCH_BIBW_SIZES  bi-directional sizes ["65536"]
#   BENCH_LAT_ITERS   latency iterations [500]
#   BENCH_BW_ITERS    bandwidth and message-rate iterations [1000]
#   BENCH_WARMUP      dat-perf warm-up iterations [100]
#   BENCH_WINDOW      operations in flight for bandwidth [64] (message rate: always 64)
#   BENCH_ROUNDS      interleaved repetitions; each figure is the best round [2]
#   BENCH_LMR_SIZES   registration sizes ["4K 64K 1M 16M 64M"]
#   BENCH_LMR_ITERS   registrations per size (capped at 1 GiB in all per size) [200]
#   BENCH_OUT         also write the table to this file
# Under TCG everything is slow and noisy: compare ratios, not absolute figures.
set -u
root=$(cd "$(dirname "$0")/.." && pwd)

if [ "${BENCH_QUICK:-0}" = 1 ]; then
	script=$root/tools/dat-perf/guest-check.sh
	[ -e /sys/class/infiniband/rxe0 ] && exec "$script"
	exec "$root/tools/rxe-vm/run-in-guest.sh" "$script"
fi
if [ ! -e /sys/class/infiniband/rxe0 ]; then
	export BENCH_LAT_SIZES BENCH_BW_SIZES BENCH_BIBW_SIZES BENCH_LAT_ITERS BENCH_BW_ITERS BENCH_WARMUP \
		BENCH_WINDOW BENCH_ROUNDS BENCH_LMR_SIZES BENCH_LMR_ITERS BENCH_OUT 2>/dev/null
	export RXE_VM_TIMEOUT=${RXE_VM_TIMEOUT:-1800}
	exec "$root/tools/rxe-vm/run-in-guest.sh" "$0" "$@"
fi

# ---- in the guest ----
LAT_SIZES=${BENCH_LAT_SIZES:-64 4096}
BW_SIZES=${BENCH_BW_SIZES:-4096 65536}
BIBW_SIZES=${BENCH_BIBW_SIZES:-65536}
LAT_ITERS=${BENCH_LAT_ITERS:-500}
BW_ITERS=${BENCH_BW_ITERS:-1000}
WARMUP=${BENCH_WARMUP:-100}
WINDOW=${BENCH_WINDOW:-64}
ROUNDS=${BENCH_ROUNDS:-2}
LMR_SIZES=${BENCH_LMR_SIZES:-4K 64K 1M 16M 64M}
LMR_ITERS=${BENCH_LMR_ITERS:-200}
DEV=rxe0
ADDR=10.0.0.1
bin=$root/target/release/dat-perf
ours=$root/target/release
[ -x "$bin" ] || { echo "bench: $bin missing: run tools/build.sh" >&2; exit 2; }
command -v ib_send_lat >/dev/null || { echo "bench: perftest (ib_send_lat) not installed" >&2; exit 2; }

tmp=$(mktemp -d /tmp/bench.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
res=$tmp/results    # lines: source test size mode metric value
printf '%s u2.0 nonthreadsafe default %s dapl.2.0 "dum0 0" ""\n' \
	ibv-rxe libdaplibv.so.2 ofa-v2-rxe libdaplofa.so.2 >"$tmp/dat.conf"
export DAT_OVERRIDE=$tmp/dat.conf
port=21000
started=$(date +%s)
# Server and client on different CPUs. Left to the scheduler, two spinning
# processes sometimes share one vCPU and every ping-pong then waits for the
# guest's timer tick (4 ms), for perftest and dat-perf alike.
pin_server= pin_client=
if [ "$(nproc)" -ge 2 ] && command -v taskset >/dev/null; then
	pin_server="taskset -c 0" pin_client="taskset -c 1"
fi
log() { echo "bench [$(($(date +%s) - started)) s] $*" >&2; }

wait_tcp() { # pid port
	local i
	for i in $(seq 300); do
		kill -0 "$1" 2>/dev/null || return 1
		[ -n "$(ss -Hltn "sport = :$2" 2>/dev/null)" ] && return 0
		sleep 0.1
	done
	return 1
}
wait_cm() { # pid
	local i
	for i in $(seq 300); do
		kill -0 "$1" 2>/dev/null || return 1
		rdma resource show cm_id 2>/dev/null | grep -q "state LISTEN .* comm dat-perf " && return 0
		sleep 0.1
	done
	return 1
}

# perftest NAME KIND(lat|bw) SIZE MODE PROGRAM ARGS...: one server/client
# pair; records the typical latency or the average MB/s and Mpps.
perftest() {
	local name=$1 kind=$2 size=$3 mode=$4 prog=$5
	shift 5
	port=$((port + 1))
	timeout 300 $pin_server "$prog" -d $DEV -F -p $port -s "$size" "$@" >"$tmp/pt.server" 2>&1 &
	local spid=$!
	wait_tcp $spid $port
	timeout 300 $pin_client "$prog" -d $DEV -F -p $port -s "$size" "$@" $ADDR >"$tmp/pt.client" 2>&1
	local rc=$?
	# A server whose client failed would wait for it forever.
	[ $rc -eq 0 ] || kill $spid 2>/dev/null
	wait $spid
	# The row after the "#bytes" header.
	local row
	row=$(awk '/#bytes/ { getline; print; exit }' "$tmp/pt.client")
	if [ $rc -ne 0 ] || [ -z "$row" ]; then
		log "perftest $prog -s $size $*: failed (rc=$rc)"; tail -n 5 "$tmp/pt.client" >&2
		return
	fi
	set -- $row
	if [ "$kind" = lat ]; then
		# bytes iters t_min t_max t_typical t_avg t_stdev p99 p99.9
		echo "native $name $size $mode lat $5" >>"$res"
	else
		# bytes iters BW_peak BW_average MsgRate
		echo "native $name $size $mode bw $4" >>"$res"
		echo "native $name $size $mode mops $5" >>"$res"
	fi
}

# datperf STACK ARGS...: one dat-perf server/client pair over STACK (ours or
# ref); records every row of the client's table.
datperf() {
	local stack=$1 ia
	shift
	if [ "$stack" = ours ]; then ia=ibv-rxe; export LD_LIBRARY_PATH=$ours; else ia=ofa-v2-rxe; unset LD_LIBRARY_PATH; fi
	port=$((port + 1))
	timeout 600 $pin_server "$bin" --ia $ia --port $port --timeout 60 --quiet >"$tmp/dp.server" 2>&1 &
	local spid=$!
	wait_cm $spid
	timeout 600 $pin_client "$bin" --ia $ia --server $ADDR --port $port --timeout 60 --quiet "$@" >"$tmp/dp.client" 2>&1
	local rc=$?
	[ $rc -eq 0 ] || kill $spid 2>/dev/null
	wait $spid
	unset LD_LIBRARY_PATH
	[ $rc -eq 0 ] || { log "dat-perf $stack $*: failed (rc=$rc)"; tail -n 5 "$tmp/dp.client" "$tmp/dp.server" >&2; }
	rows $stack "$tmp/dp.client"
}

# rows SOURCE FILE: dat-perf's table into results.
rows() {
	awk -v src="$1" '
		/^ [a-z_]+: / { t = $1; sub(":", "", t); m = "-"; if (match($0, /, mode [a-z]+$/)) m = substr($0, RSTART + 7); next }
		$1 ~ /^[0-9]+$/ && NF == 8 { print src, t, $1, m, "lat", $5 }
		$1 ~ /^[0-9]+$/ && NF == 7 { print src, t, $1, m, "bw", $5; print src, t, $1, m, "mops", $6 }
	' "$2" >>"$res"
}

both() { datperf ours "$@"; datperf ref "$@"; }
csv() { echo "$*" | tr ' ' ','; }

for round in $(seq "$ROUNDS"); do
	log "round $round/$ROUNDS: latency, polling"
	for s in $LAT_SIZES; do
		perftest send_lat lat $s poll ib_send_lat -n $LAT_ITERS
		perftest write_lat lat $s poll ib_write_lat -n $LAT_ITERS
		perftest read_lat lat $s poll ib_read_lat -n $LAT_ITERS
	done
	both --test send_lat,write_lat,read_lat --sizes "$(csv $LAT_SIZES)" --iters $LAT_ITERS --warmup $WARMUP
	log "round $round/$ROUNDS: latency, blocking"
	for s in $LAT_SIZES; do
		perftest send_lat lat $s wait ib_send_lat -n $LAT_ITERS -e
	done
	both --test send_lat --mode wait --sizes "$(csv $LAT_SIZES)" --iters $LAT_ITERS --warmup $WARMUP
	log "round $round/$ROUNDS: bandwidth"
	for s in $BW_SIZES; do
		perftest send_bw bw $s poll ib_send_bw -n $BW_ITERS -t $WINDOW
		perftest write_bw bw $s poll ib_write_bw -n $BW_ITERS -t $WINDOW
		perftest read_bw bw $s poll ib_read_bw -n $BW_ITERS -t $WINDOW
	done
	both --test send_bw,write_bw,read_bw --sizes "$(csv $BW_SIZES)" --iters $BW_ITERS --warmup $WARMUP --window $WINDOW
	log "round $round/$ROUNDS: bi-directional bandwidth"
	for s in $BIBW_SIZES; do
		perftest send_bibw bw $s poll ib_send_bw -n $BW_ITERS -t $WINDOW -b
		perftest write_bibw bw $s poll ib_write_bw -n $BW_ITERS -t $WINDOW -b
		perftest read_bibw bw $s poll ib_read_bw -n $BW_ITERS -t $WINDOW -b
	done
	both --test send_bibw,write_bibw,read_bibw --sizes "$(csv $BIBW_SIZES)" --iters $BW_ITERS --warmup $WARMUP --window $WINDOW
	log "round $round/$ROUNDS: message rate"
	perftest msg_rate bw 64 poll ib_send_bw -n $BW_ITERS -t 64
	both --test msg_rate --sizes 64 --iters $BW_ITERS --warmup $WARMUP --window 64
done

log "registration cost"
lmr_sizes=$(csv $LMR_SIZES)
LD_LIBRARY_PATH=$ours timeout 600 $pin_client "$bin" --ia ibv-rxe --test lmr_reg --sizes "$lmr_sizes" --iters $LMR_ITERS --warmup 10 --quiet >"$tmp/lmr.ours" 2>&1
rows ours "$tmp/lmr.ours"
timeout 600 $pin_client "$bin" --ia ofa-v2-rxe --test lmr_reg --sizes "$lmr_sizes" --iters $LMR_ITERS --warmup 10 --quiet >"$tmp/lmr.ref" 2>&1
rows ref "$tmp/lmr.ref"
timeout 600 $pin_client "$bin" --verbs $DEV --test ibv_reg --sizes "$lmr_sizes" --iters $LMR_ITERS --warmup 10 --quiet >"$tmp/lmr.native" 2>&1
# The native figures stand in the lmr_reg row.
rows native "$tmp/lmr.native"
sed -i 's/^native ibv_reg /native lmr_reg /' "$res"
log "done"

# ---- the table ----
table() {
	awk -v lat_sizes="$LAT_SIZES" '
	function better(metric, a, b) { return metric == "lat" ? (a < b) : (a > b) }
	# Message rate is read in Mops/s, the rest in MB/s.
	($2 == "msg_rate") != ($5 == "mops") && $5 != "lat" { next }
	{
		key = $2 SUBSEP $3 SUBSEP $4 SUBSEP $5
		if (!(key in seen)) { seen[key] = 1; order[++n] = key }
		v = $6 + 0
		if (!(($1, key) in best) || better($5, v, best[$1, key])) best[$1, key] = v
	}
	function fig(src, key) { return ((src, key) in best) ? sprintf(key ~ /mops$/ ? "%.4f" : "%.2f", best[src, key]) : "-" }
	function ratio(a, b, key) { return ((a, key) in best) && ((b, key) in best) && best[b, key] > 0 ? sprintf("%.3f", best[a, key] / best[b, key]) : "-" }
	function verdict(key, t, size, mode, metric,   rn, rr) {
		rn = ((("ours", key) in best) && (("native", key) in best)) ? best["ours", key] / best["native", key] : -1
		rr = ((("ours", key) in best) && (("ref", key) in best)) ? best["ours", key] / best["ref", key] : -1
		if (rn < 0 && rr < 0) return ""
		if ((t == "send_lat" || t == "write_lat") && size == 64 && mode == "poll") return (rn <= 1.05 ? "met" : "MISSED") " (<=1.05 x native)"
		if (t ~ /_bw$|_bibw$/ && size >= 65536 && metric == "bw") return (rn >= 0.98 ? "met" : "MISSED") " (>=0.98 x native)"
		if (t == "msg_rate" && metric == "mops") return (rr >= 1 && rn >= 0.90 ? "met" : "MISSED") " (>=ref, >=0.90 x native)"
		if (t == "send_lat" && mode == "wait") return (rr <= 1.0 ? "met" : "MISSED") " (<=1.00 x ref)"
		if (t == "lmr_reg") return (rn <= 1.10 ? "met" : "MISSED") " (<=1.10 x native)"
		return ""
	}
	END {
		printf "%-11s %9s %-5s %-11s %12s %12s %12s %12s %10s  %s\n", "test", "bytes", "mode", "figure", "native", "ours", "reference", "ours/native", "ours/ref", "target"
		for (i = 1; i <= n; i++) {
			split(order[i], k, SUBSEP)
			unit = k[4] == "lat" ? (k[1] == "lmr_reg" ? "create+free us" : "typical us") : (k[4] == "bw" ? "MB/s" : "Mops/s")
			printf "%-11s %9s %-5s %-11s %12s %12s %12s %12s %10s  %s\n", k[1], k[2], k[3] == "-" ? "" : k[3], unit,
				fig("native", order[i]), fig("ours", order[i]), fig("ref", order[i]),
				ratio("ours", "native", order[i]), ratio("ours", "ref", order[i]), verdict(order[i], k[1], k[2] + 0, k[3], k[4])
		}
	}' "$res"
}

{
	echo "dat-perf benchmark, $(date -u '+%Y-%m-%d %H:%M UTC'), kernel $(uname -r), Soft-RoCE $DEV in a QEMU TCG guest"
	echo "native: perftest $(ib_send_lat --version 2>/dev/null | head -1 | awk '{print $NF}'); ours: $ours/libdat2.so.2 + libdaplibv.so.2;" \
		"reference: $(readlink -f /usr/lib/x86_64-linux-gnu/libdat2.so.2) + libdaplofa.so.2"
	echo "latency iterations $LAT_ITERS, bandwidth iterations $BW_ITERS, dat-perf warm-up $WARMUP, window $WINDOW, best of $ROUNDS rounds;" \
		"registration: up to $LMR_ITERS per size"
	echo "latency: perftest t_typical / dat-perf median (usec; lat tests half round trip, read whole); MB/s = 2^20 B/s"
	echo
	table
} | tee "$tmp/table"
[ -n "${BENCH_OUT:-}" ] && cp "$tmp/table" "$BENCH_OUT"
exit 0
