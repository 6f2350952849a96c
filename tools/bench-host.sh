#!/usr/bin/env bash
# Wall-clock benchmark on this host (issue 14, host part): dat-perf over our
# software provider (libdat2.so.2 + libdaplsock.so.2) beside UCX
# (ucx_perftest) and libfabric (fi_pingpong), in one run, on the same
# machine, with the same sizes and iteration counts, several rounds with the
# stacks interleaved; prints a markdown report with the median and spread of
# every figure and a verdict per target. Installs nothing (tools/setup.sh
# does); needs root for its network namespaces, and tools/build.sh first.
#
#   tools/bench-host.sh                       # the full run (5 rounds, 1 B .. 4 MiB)
#   tools/bench-host.sh --smoke               # one small size once per stack; exit 1 if any fails
#   tools/bench-host.sh --rounds 3 --sizes 8,64K,1M --stacks ours,ucx --nets node
#
# Two networks:
#   node  on-node: server and client in one network namespace of ours (its
#         own loopback, so no port of anyone else's is in the way). Ours: the
#         sock provider on "lo 0" (TCP over loopback); UCX: UCX_TLS limited to
#         its shared-memory transports posix,sysv,cma (no self, no tcp);
#         libfabric: the shm provider (fi_pingpong -p shm -e rdm).
#   tcp   two namespaces joined by a veth pair that this script creates and
#         removes (10.198.N.1 <-> 10.198.N.2, N from the pid). Ours: the sock
#         provider on the veth; UCX: UCX_TLS=tcp on the veth; libfabric: the
#         tcp provider on the veth (fi_pingpong -p tcp -e msg, connected like
#         a DAT RC endpoint).
# Server pinned to CPU 0, client to CPU 1 (taskset), for every stack.
#
# What each figure is, for every stack alike (docs/performance.md has the
# full account):
#   latency  ping-pong of one message each way (send/recv; UCX tag_lat;
#            fi_pingpong), the mean over the measured iterations of half the
#            round trip, in microseconds: dat-perf's "avg" of send_lat,
#            ucx_perftest's overall (total average) latency, fi_pingpong's
#            usec/xfer. fi_pingpong has no warm-up; the others run
#            BENCH_WARMUP untimed iterations first.
#   bandwidth a stream of sends with BENCH_WINDOW in flight, MB/s = 2^20 B/s
#            at the sender: dat-perf send_bw --window W, ucx_perftest tag_bw
#            -O W (overall bandwidth). libfabric: Debian 12 packages no
#            fabtests (libfabric-bin has fi_pingpong only), so there is no
#            libfabric streaming figure.
#   rate     the same stream at 8 B, in millions of messages per second:
#            dat-perf msg_rate, ucx_perftest tag_bw -s 8 -O W (overall rate).
# Iterations per size, the same for every stack: ITERS, but for large
# messages BYTES / size, at least BENCH_MIN_ITERS (dat-perf --iter-bytes).
#
# Flags: --smoke, --rounds N, --sizes LIST, --stacks LIST, --nets LIST,
# --modes LIST (lists comma-separated), --keep, --report FILE, --help.
# Environment (flags override; defaults in brackets):
#   BENCH_ROUNDS [5]  BENCH_SIZES [1,2,4,...,4M]  BENCH_STACKS [ours,ucx,ofi]
#   BENCH_NETS [node,tcp]  BENCH_MODES [poll,wait] (ours: dat_evd_dequeue
#   polling or dat_evd_wait)  BENCH_LAT_ITERS [1000]  BENCH_LAT_BYTES [64M]
#   BENCH_BW_ITERS [1000]  BENCH_BW_BYTES [256M]  BENCH_MIN_ITERS [100]
#   BENCH_RATE_ITERS [20000]  BENCH_WARMUP [10]  BENCH_WINDOW [64]
#   BENCH_PIN [1] pin server and client to CPUs 0 and 1
#   BENCH_TCP_CC [cubic] TCP congestion control in the two namespaces of the
#            tcp net, for every stack alike; "host" keeps the host's own.
#            Under BBR, which paces a burst by a timer, a 512 KiB ping-pong
#            runs at one of two speeds, fixed per connection (ours and
#            libfabric's alike: 63-349 and 85-363 us in six runs each on a
#            host whose default was bbr; docs/performance.md, stop 34), and
#            the verdicts at 512 KiB-4 MiB were a coin flip. cubic is
#            Linux's own default. To set it in a namespace the kernel wants
#            it in tcp_allowed_congestion_control: if it is not, it is added
#            for the moment of setting and the list put back at once.
#   BENCH_TIMEOUT [120] seconds per process  BENCH_KEEP [0] keep raw outputs
#   BENCH_OURS_ONE_CONN [0] ours: every size on one connection (else one each)
#   BENCH_BIN [target/release] the build of ours to run
#   BENCH_REPORT  also write the report to this file
set -u
root=$(cd "$(dirname "$0")/.." && pwd)
me=bench-host

usage() { sed -n '2,/^set -u/p' "$0" | sed 's/^# \{0,1\}//; /^set -u/d'; }

ROUNDS=${BENCH_ROUNDS:-5}
SIZES=${BENCH_SIZES:-}
STACKS=${BENCH_STACKS:-ours,ucx,ofi}
NETS=${BENCH_NETS:-node,tcp}
MODES=${BENCH_MODES:-poll,wait}
LAT_ITERS=${BENCH_LAT_ITERS:-1000}
LAT_BYTES=${BENCH_LAT_BYTES:-64M}
BW_ITERS=${BENCH_BW_ITERS:-1000}
BW_BYTES=${BENCH_BW_BYTES:-256M}
MIN_ITERS=${BENCH_MIN_ITERS:-100}
RATE_ITERS=${BENCH_RATE_ITERS:-20000}
RATE_SIZE=8
WARMUP=${BENCH_WARMUP:-10}
WINDOW=${BENCH_WINDOW:-64}
TIMEOUT=${BENCH_TIMEOUT:-120}
KEEP=${BENCH_KEEP:-0}
ONE_CONN=${BENCH_OURS_ONE_CONN:-0}
REPORT=${BENCH_REPORT:-}
SMOKE=0
# The command line as given, for the report (the loop below shifts it away).
GIVEN="$*"
while [ $# -gt 0 ]; do
	case $1 in
	--smoke) SMOKE=1 ;;
	--rounds) ROUNDS=$2; shift ;;
	--sizes) SIZES=$2; shift ;;
	--stacks) STACKS=$2; shift ;;
	--nets) NETS=$2; shift ;;
	--modes) MODES=$2; shift ;;
	--keep) KEEP=1 ;;
	--report) REPORT=$2; shift ;;
	-h | --help) usage; exit 0 ;;
	*) echo "$me: unknown argument '$1' (--help lists them)" >&2; exit 2 ;;
	esac
	shift
done
if [ $SMOKE = 1 ]; then
	# One small size, once, few iterations: does every stack run here?
	ROUNDS=1 SIZES=${SIZES:-8} LAT_ITERS=200 BW_ITERS=200 RATE_ITERS=2000 TIMEOUT=${BENCH_TIMEOUT:-60}
fi

# bytes SIZE: "4K" -> 4096 (K, M, G binary).
bytes() {
	local s=${1^^} m=1
	case $s in *K) m=1024 ;; *M) m=1048576 ;; *G) m=1073741824 ;; esac
	s=${s%[KMG]}
	[[ $s =~ ^[0-9]+$ ]] || { echo "$me: bad size '$1'" >&2; exit 2; }
	echo $((s * m))
}
if [ -z "$SIZES" ]; then
	SIZES=$(s=1; while [ $s -le 4194304 ]; do printf '%s ' $s; s=$((s * 2)); done)
else
	SIZES=$(for s in ${SIZES//,/ }; do printf '%s ' "$(bytes "$s")"; done)
fi
LAT_BYTES=$(bytes "$LAT_BYTES") BW_BYTES=$(bytes "$BW_BYTES")
STACKS=${STACKS//,/ } NETS=${NETS//,/ } MODES=${MODES//,/ }
for x in $STACKS; do case $x in ours | ucx | ofi) ;; *) echo "$me: unknown stack '$x' (ours, ucx, ofi)" >&2; exit 2 ;; esac; done
for x in $NETS; do case $x in node | tcp) ;; *) echo "$me: unknown net '$x' (node, tcp)" >&2; exit 2 ;; esac; done
for x in $MODES; do case $x in poll | wait) ;; *) echo "$me: unknown mode '$x' (poll, wait)" >&2; exit 2 ;; esac; done
has() { [[ " $1 " == *" $2 "* ]]; }

# Iterations at a size: the rule dat-perf applies with --iter-bytes.
iters_for() { # ITERS BYTES SIZE
	local n=$(($2 / $3)) lo=$MIN_ITERS
	[ $lo -gt $1 ] && lo=$1
	[ $n -lt $lo ] && n=$lo
	[ $n -gt $1 ] && n=$1
	echo $n
}

# ---- what must be there: nothing is installed here -------------------------
fail_setup() { echo "$me: $*"; echo "$me: 0 passed, 1 failed"; exit 1; }
if [ "$(id -u)" != 0 ]; then
	echo "$me: skipped: not root (network namespaces need CAP_NET_ADMIN)"
	exit 0
fi
need=(ip ss taskset timeout python3)
has "$STACKS" ucx && need+=(ucx_perftest)
has "$STACKS" ofi && need+=(fi_pingpong)
for t in "${need[@]}"; do
	command -v "$t" >/dev/null || fail_setup "no '$t' on this host (tools/setup.sh installs it: iproute2, util-linux, ucx-utils, libfabric-bin)"
done
BIN=${BENCH_BIN:-$root/target/release}  # BENCH_BIN: another build (dat-perf, libdat2.so.2, libdaplsock.so.2), for an A/B
PROV=$BIN/libdaplsock.so.2
if has "$STACKS" ours; then
	for f in "$BIN/dat-perf" "$BIN/libdat2.so.2" "$PROV"; do
		[ -e "$f" ] || fail_setup "no $f (run tools/build.sh)"
	done
fi
PIN_S= PIN_C=
if [ "${BENCH_PIN:-1}" = 1 ] && [ "$(nproc)" -ge 2 ]; then PIN_S="taskset -c 0" PIN_C="taskset -c 1"; fi

# ---- our own scratch: temp dir, namespaces, processes; all removed on exit --
WORK=$(mktemp -d /tmp/bench-host.XXXXXX)
RAW=$WORK/raw
mkdir -p "$RAW"
NS_NODE=bh-node-$$ NS_S=bh-srv-$$ NS_C=bh-cli-$$
VETH_S=bhs$$ VETH_C=bhc$$
NET=10.198.$(($$ % 250 + 1))
ADDR_S=$NET.1 ADDR_C=$NET.2
PIDS=" "
made_ns=""
RESTORE_ALLOWED=
# The host's list as it was, if we widened it (for no longer than setting takes).
restore_allowed() {
	[ -n "$RESTORE_ALLOWED" ] && echo "$RESTORE_ALLOWED" >/proc/sys/net/ipv4/tcp_allowed_congestion_control
	RESTORE_ALLOWED=
}
cleanup() {
	restore_allowed
	local p
	for p in $PIDS; do kill "$p" 2>/dev/null; done
	for p in $PIDS; do
		for _ in 1 2 3 4 5 6 7 8 9 10; do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
		kill -9 "$p" 2>/dev/null
	done
	for ns in $made_ns; do ip netns del "$ns" 2>/dev/null; done
	if [ "$KEEP" = 1 ]; then echo "$me: raw outputs kept in $WORK" >&2; else rm -rf "$WORK"; fi
}
trap cleanup EXIT
trap 'echo "$me: interrupted" >&2; exit 130' INT TERM HUP

mkns() { ip netns add "$1" || fail_setup "cannot create network namespace $1"; made_ns="$made_ns $1"; ip -n "$1" link set lo up; }
if has "$NETS" node; then mkns "$NS_NODE"; fi
if has "$NETS" tcp; then
	mkns "$NS_S"
	mkns "$NS_C"
	# Made inside the server namespace and one end moved: the host's own
	# namespace never holds or routes to these addresses.
	ip -n "$NS_S" link add "$VETH_S" type veth peer name "$VETH_C" || fail_setup "no veth support"
	ip -n "$NS_S" link set "$VETH_C" netns "$NS_C" || fail_setup "cannot move $VETH_C"
	ip -n "$NS_S" addr add "$ADDR_S/24" dev "$VETH_S"
	ip -n "$NS_C" addr add "$ADDR_C/24" dev "$VETH_C"
	ip -n "$NS_S" link set "$VETH_S" up
	ip -n "$NS_C" link set "$VETH_C" up
	# Usable once both ends have carrier (veth: as soon as both are up).
	for _ in $(seq 50); do
		ip -n "$NS_S" link show "$VETH_S" | grep -q LOWER_UP && ip -n "$NS_C" link show "$VETH_C" | grep -q LOWER_UP && break
		sleep 0.1
	done
fi
host_cc=$(cat /proc/sys/net/ipv4/tcp_congestion_control 2>/dev/null || echo unknown)
TCP_CC=${BENCH_TCP_CC:-cubic}
CC_NOTE="$host_cc (the host's)"
if has "$NETS" tcp && [ "$TCP_CC" != host ] && [ "$TCP_CC" != "$host_cc" ]; then
	avail=/proc/sys/net/ipv4/tcp_available_congestion_control allowed=/proc/sys/net/ipv4/tcp_allowed_congestion_control
	grep -qw -- "$TCP_CC" $avail || modprobe "tcp_$TCP_CC" 2>/dev/null
	grep -qw -- "$TCP_CC" $avail || fail_setup "TCP congestion control '$TCP_CC' is not in this kernel ($(cat $avail)); BENCH_TCP_CC=host keeps the host's"
	was=$(cat $allowed)
	[[ " $was " == *" $TCP_CC "* ]] || { echo "$was $TCP_CC" >$allowed && RESTORE_ALLOWED=$was; }
	for ns in "$NS_S" "$NS_C"; do
		ip netns exec "$ns" sysctl -qw "net.ipv4.tcp_congestion_control=$TCP_CC" || fail_setup "cannot set $TCP_CC in $ns"
	done
	restore_allowed
	CC_NOTE="$TCP_CC in the tcp net's namespaces (the host's: $host_cc)"
fi

# dat.conf entries, one file per side, in our temp dir.
printf 'bh-lo u2.0 nonthreadsafe default %s dapl.2.0 "lo 0" ""\n' "$PROV" >"$WORK/node.conf"
printf 'bh-veth u2.0 nonthreadsafe default %s dapl.2.0 "%s 0" ""\n' "$PROV" "$VETH_S" >"$WORK/srv.conf"
printf 'bh-veth u2.0 nonthreadsafe default %s dapl.2.0 "%s 0" ""\n' "$PROV" "$VETH_C" >"$WORK/cli.conf"

# Per network: server namespace, client namespace, address to dial, and
# the environment each side's stack needs.
side() { # NET server|client STACK -> "NS ENV..."
	local net=$1 who=$2 stack=$3 ns dev conf
	if [ "$net" = node ]; then
		ns=$NS_NODE dev=lo conf=$WORK/node.conf
	elif [ "$who" = server ]; then
		ns=$NS_S dev=$VETH_S conf=$WORK/srv.conf
	else
		ns=$NS_C dev=$VETH_C conf=$WORK/cli.conf
	fi
	case $stack in
	ours) echo "$ns LD_LIBRARY_PATH=$BIN DAT_OVERRIDE=$conf" ;;
	ucx)
		if [ "$net" = node ]; then
			echo "$ns UCX_TLS=posix,sysv,cma UCX_WARN_UNUSED_ENV_VARS=n"
		else
			echo "$ns UCX_TLS=tcp UCX_NET_DEVICES=$dev UCX_WARN_UNUSED_ENV_VARS=n"
		fi
		;;
	ofi) [ "$net" = node ] && echo "$ns FI_PROVIDER=shm" || echo "$ns FI_PROVIDER=tcp FI_TCP_IFACE=$dev" ;;
	esac
}
addr_of() { [ "$1" = node ] && echo 127.0.0.1 || echo "$ADDR_S"; }

PORT=21000
RUNS=$WORK/runs.txt
: >"$RUNS"
nfail=0
# pair NAME NET STACK "SERVER ARGS" "CLIENT ARGS": one server, one client,
# each in its namespace, pinned, under a timeout; the client's stdout goes
# to raw/NAME.out. {PORT} and {ADDR} in the args are filled in here.
pair() {
	local name=$1 net=$2 stack=$3 sargs=$4 cargs=$5
	local ss cs sns cns spid cpid src crc
	PORT=$((PORT + 1))
	sargs=${sargs//\{PORT\}/$PORT} cargs=${cargs//\{PORT\}/$PORT}
	cargs=${cargs//\{ADDR\}/$(addr_of "$net")}
	read -r sns ss <<<"$(side "$net" server "$stack")"
	read -r cns cs <<<"$(side "$net" client "$stack")"
	# shellcheck disable=SC2086
	ip netns exec "$sns" env $ss timeout "$TIMEOUT" $PIN_S $sargs >"$RAW/$name.server" 2>&1 &
	spid=$!
	PIDS="$PIDS$spid "
	local up=0
	for _ in $(seq 200); do
		kill -0 $spid 2>/dev/null || break
		if ip netns exec "$sns" ss -Hltn "sport = :$PORT" 2>/dev/null | grep -q .; then up=1; break; fi
		sleep 0.05
	done
	crc=1
	if [ $up = 1 ]; then
		# shellcheck disable=SC2086
		ip netns exec "$cns" env $cs timeout "$TIMEOUT" $PIN_C $cargs >"$RAW/$name.out" 2>"$RAW/$name.err" &
		cpid=$!
		PIDS="$PIDS$cpid "
		wait $cpid
		crc=$?
		PIDS=${PIDS/ $cpid / }
	else
		echo "server did not listen on $PORT" >"$RAW/$name.err"
	fi
	# A server whose client failed would wait for it until its timeout.
	[ $crc = 0 ] || kill $spid 2>/dev/null
	wait $spid
	src=$?
	PIDS=${PIDS/ $spid / }
	if [ $crc = 0 ] && [ $src = 0 ]; then
		echo "$name ok" >>"$RUNS"
	else
		nfail=$((nfail + 1))
		echo "$name fail client=$crc server=$src" >>"$RUNS"
		echo "$me: $name FAILED (client rc=$crc, server rc=$src)" >&2
		tail -n 5 "$RAW/$name.err" "$RAW/$name.server" 2>/dev/null | sed 's/^/    /' >&2
	fi
}

csv() { echo "$*" | tr ' ' ','; }
ALL_SIZES=$(csv $SIZES)

# One figure of one stack on one network at one size (SIZE "all": every
# size on one connection). Like ucx_perftest and fi_pingpong here, each
# size runs on a connection of its own: a TCP stream's history changes its
# next size's latency, for every stack (over the veth, 4 KiB ping-pong
# means: ours 6.7-6.8 us after 2 KiB on the same connection, 5.4-5.6 on a
# fresh one; fi_pingpong -S all 7.2-9.4 after 1 and 2 KiB, -S 4096 alone
# 5.7-5.8). BENCH_OURS_ONE_CONN=1 runs every size on one connection, as
# dat-perf does by itself.
run_ours() { # ROUND NET FIG SIZE
	local r=$1 net=$2 fig=$3 s=$4 mode test these
	these=$s
	[ "$s" = all ] && these=$ALL_SIZES
	for mode in $MODES; do
		case $fig in
		lat) test="--test send_lat --sizes $these --iters $LAT_ITERS --iter-bytes $LAT_BYTES" ;;
		bw) test="--test send_bw --sizes $these --iters $BW_ITERS --iter-bytes $BW_BYTES --window $WINDOW" ;;
		rate) test="--test msg_rate --sizes $these --iters $RATE_ITERS --window $WINDOW" ;;
		esac
		pair "r$r.$net.ours-$mode.$fig.$s" "$net" ours \
			"$BIN/dat-perf --ia $(ia_of "$net") --port {PORT} --quiet --json --timeout 30" \
			"$BIN/dat-perf --ia $(ia_of "$net") --server {ADDR} --port {PORT} --quiet --json --timeout 30 --min-iters $MIN_ITERS --warmup $WARMUP --mode $mode $test"
	done
}
ia_of() { [ "$1" = node ] && echo bh-lo || echo bh-veth; }

run_ucx() { # ROUND NET FIG SIZE
	local r=$1 net=$2 fig=$3 s=$4 n
	case $fig in
	lat)
		n=$(iters_for "$LAT_ITERS" "$LAT_BYTES" "$s")
		pair "r$r.$net.ucx.lat.$s" "$net" ucx "ucx_perftest -p {PORT}" "ucx_perftest {ADDR} -p {PORT} -t tag_lat -s $s -n $n -w $WARMUP -v" ;;
	bw)
		n=$(iters_for "$BW_ITERS" "$BW_BYTES" "$s")
		pair "r$r.$net.ucx.bw.$s" "$net" ucx "ucx_perftest -p {PORT}" "ucx_perftest {ADDR} -p {PORT} -t tag_bw -s $s -n $n -w $WARMUP -O $WINDOW -v" ;;
	rate) pair "r$r.$net.ucx.rate.$s" "$net" ucx "ucx_perftest -p {PORT}" \
		"ucx_perftest {ADDR} -p {PORT} -t tag_bw -s $s -n $RATE_ITERS -w $WARMUP -O $WINDOW -v" ;;
	esac
}

run_ofi() { # ROUND NET FIG SIZE
	local r=$1 net=$2 fig=$3 s=$4 n prov
	[ "$fig" = lat ] || return 0 # fi_pingpong is all Debian ships
	[ "$net" = node ] && prov="-p shm -e rdm" || prov="-p tcp -e msg"
	n=$(iters_for "$LAT_ITERS" "$LAT_BYTES" "$s")
	pair "r$r.$net.ofi.lat.$s" "$net" ofi "fi_pingpong $prov -I $n -S $s -B {PORT}" "fi_pingpong $prov -I $n -S $s -P {PORT} {ADDR}"
}

# ---- the header: where and when --------------------------------------------
pkgver() { dpkg-query -W -f='${Version}' "$1" 2>/dev/null || echo none; }
# A cache line's trip between the two pinned CPUs (tools/line-probe.c), at
# the start and after each round: a VM's vCPUs are placed anew now and
# then, and every on-node figure moves with it.
PROBE=
if [ -n "$PIN_S" ] && cc -O2 -pthread -o "$WORK/line-probe" "$root/tools/line-probe.c" 2>/dev/null; then
	PROBE=$WORK/line-probe
fi
line_ns() { if [ -n "$PROBE" ]; then "$PROBE" 0 1 2>/dev/null || echo "?"; else echo "n/a"; fi; }
{
	echo "started=$(date -u '+%Y-%m-%d %H:%M UTC')"
	echo "host_kernel=$(uname -r)"
	echo "cpu=$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1) x $(nproc)"
	echo "uptime_start=$(uptime)"
	echo "line_start=$(line_ns)"
	echo "commit=$(git -C "$root" rev-parse --short HEAD 2>/dev/null)$(git -C "$root" diff --quiet 2>/dev/null || echo +changes)"
	echo "packages=ucx-utils $(pkgver ucx-utils), libucx0 $(pkgver libucx0), libfabric1 $(pkgver libfabric1), libfabric-bin $(pkgver libfabric-bin)"
	echo "ours=$BIN/libdat2.so.2 + $PROV, $BIN/dat-perf"
	echo "pinning=${PIN_S:-none} server, ${PIN_C:-none} client"
	has "$NETS" tcp && echo "tcp_cc=$CC_NOTE"
	echo "command=$0 $GIVEN"
} >"$WORK/env.txt"
cat >"$WORK/config.json" <<EOF
{"rounds": $ROUNDS, "sizes": [$(csv $SIZES)], "stacks": "$STACKS", "nets": "$NETS", "modes": "$MODES",
 "lat_iters": $LAT_ITERS, "lat_bytes": $LAT_BYTES, "bw_iters": $BW_ITERS, "bw_bytes": $BW_BYTES,
 "min_iters": $MIN_ITERS, "rate_iters": $RATE_ITERS, "rate_size": $RATE_SIZE, "warmup": $WARMUP,
 "window": $WINDOW, "smoke": $SMOKE}
EOF

# ---- the rounds: at each size every stack in turn, the order turning each
# round. Size by size, not stack by stack: this host has minutes (and
# stretches of seconds) in which one stack's TCP ping-pong runs 20-30%
# slower than in the next (a size sweep of one stack took half a minute),
# and run back to back at each size every stack meets the same ones.
started=$(date +%s)
: >"$WORK/load.txt"
for r in $(seq "$ROUNDS"); do
	read -ra order <<<"$STACKS"
	k=$(((r - 1) % ${#order[@]}))
	order=("${order[@]:k}" "${order[@]:0:k}")
	echo "$me: round $r/$ROUNDS (order ${order[*]}), $(uptime | sed 's/.*load/load/')" >&2
	for net in $NETS; do
		for fig in lat bw rate; do
			sizes=$SIZES
			[ "$fig" = rate ] && sizes=$RATE_SIZE
			if [ "$ONE_CONN" = 1 ] && has "${order[*]}" ours; then
				run_ours "$r" "$net" "$fig" all
			fi
			for s in $sizes; do
				for stack in "${order[@]}"; do
					[ "$stack" = ours ] && [ "$ONE_CONN" = 1 ] && continue
					"run_$stack" "$r" "$net" "$fig" "$s"
				done
			done
		done
	done
	echo "$r $(cut -d' ' -f1-3 /proc/loadavg) $(line_ns)" >>"$WORK/load.txt"
done
echo "took=$(($(date +%s) - started)) s" >>"$WORK/env.txt"
echo "uptime_end=$(uptime)" >>"$WORK/env.txt"

python3 "$root/tools/bench-host-table.py" "$WORK" >"$WORK/report.md"
trc=$?
cat "$WORK/report.md"
[ -n "$REPORT" ] && cp "$WORK/report.md" "$REPORT"
[ $trc = 0 ] && [ $nfail = 0 ]
