#!/bin/bash
# System calls and context switches of both ends of a dat-perf run over the
# software provider on this host, on-node ("lo 0"), server on CPU 0 and
# client on CPU 1, counted by perf's tracepoints (no strace: it slows a
# run by 3x and changes who waits for whom). sendto counts the on-node
# doorbells (one byte each), futex the engine lock's contention.
#
#   tools/instr/syscalls.sh [LIBDIR] [ITERS] [TEST]
#
# LIBDIR holds the libdaplsock.so.2 to use (default: target/release), so
# two builds can be compared in turn; TEST defaults to msg_rate (8 B,
# window 64), ITERS to 200000. Needs perf and tools/build.sh.
set -u
root=$(cd "$(dirname "$0")/../.." && pwd)
bin=$root/target/release
prov=${1:-$bin}
iters=${2:-200000}
test=${3:-msg_rate}
command -v perf >/dev/null || { echo "syscalls.sh: perf missing" >&2; exit 2; }
[ -e "$prov/libdaplsock.so.2" ] || { echo "syscalls.sh: no $prov/libdaplsock.so.2" >&2; exit 2; }
dir=$(mktemp -d /tmp/syscalls.XXXXXX)
printf 'sock-lo u2.0 nonthreadsafe default %s/libdaplsock.so.2 dapl.2.0 "lo 0" ""\n' "$prov" >"$dir/dat.conf"
# Below the ephemeral ports (see ctest/common/casefork.c).
port=$((32000 + RANDOM % 200))
ev=syscalls:sys_enter_sendto,syscalls:sys_enter_recvfrom,syscalls:sys_enter_epoll_wait,syscalls:sys_enter_futex,syscalls:sys_enter_write,sched:sched_switch,task-clock
export DAT_OVERRIDE=$dir/dat.conf LD_LIBRARY_PATH=$bin
perf stat -x, -e "$ev" -o "$dir/server" taskset -c 0 "$bin/dat-perf" --ia sock-lo --port "$port" --quiet --timeout 30 >/dev/null 2>&1 &
srv=$!
sleep 0.3
rate=$(perf stat -x, -e "$ev" -o "$dir/client" taskset -c 1 "$bin/dat-perf" --ia sock-lo --server 127.0.0.1 --port "$port" \
	--timeout 30 --test "$test" --sizes 8 --iters "$iters" 2>&1 | awk '$1 == "8" { print $(NF - 1) }')
wait "$srv"
echo "$test 8 B x $iters: ${rate:-failed}"
for side in server client; do
	printf '%s: ' "$side"
	grep -v '^#' "$dir/$side" | awk -F, 'NF > 2 { sub(/.*:/, "", $3); sub(/^sys_enter_/, "", $3); printf "%s %s  ", $3, $1 }'
	echo
done
rm -rf "$dir"
