#!/usr/bin/env bash
# hunt-hangs.sh TEST NP RUNS [SECONDS]: runs one MPICH test (TEST relative to
# the build's tests/, e.g. pt2pt/sendrecv1) RUNS times on this host over the
# software provider, with on-demand connections (MV2_ON_DEMAND_THRESHOLD=1;
# MV2_X=V in the environment adds or overrides). A run still going after
# SECONDS (default 20) is a hang: every rank's threads are dumped with gdb
# (bt.PID) beside the run's output, then the run is killed (a run the dumps
# themselves ended is named so: see below). Prints one line
# per hang or failure and a summary; DAPL_DBG_TYPE=2 puts the provider's
# connection events in each run's output; HUNT_TRACE=1 runs every rank under
# tools/dat-trace (its DAT connection calls and events, one file per rank,
# kept with a hang's stacks). The build is build-mvapich2.sh's
# (MPI_PREFIX overrides). Found the two MVAPICH2 races mvapich2-edits.sh
# mends (README, "MPI over our stack").
set -uo pipefail
[ $# -ge 3 ] || { sed -n '2,14p' "$0" >&2; exit 2; }
test=$1 np=$2 runs=$3 limit=${4:-20}
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
prefix=${MPI_PREFIX:-$("$here/build-mvapich2.sh" | tail -n 1)} || exit 1
command -v gdb >/dev/null || { echo "hunt-hangs: needs gdb" >&2; exit 2; }
out=$(mktemp -d "${TMPDIR:-/tmp}/hunt-hangs.XXXXXX")
cat >"$out/dat.conf" <<CONF
mpi-sock u2.0 nonthreadsafe default libdaplsock.so.2 dapl.2.0 "lo 0" ""
CONF
# HUNT_LIB: another build (libdat2.so.2, libdaplsock.so.2), for an A/B.
export DAT_OVERRIDE=$out/dat.conf LD_LIBRARY_PATH=${HUNT_LIB:-$root/target/release}
export MV2_USE_SHARED_MEM=0 HYDRA_IFACE=lo MV2_DAPL_PROVIDER=mpi-sock
export MV2_ON_DEMAND_THRESHOLD=${MV2_ON_DEMAND_THRESHOLD:-1}
prog=$(basename "$test")
cd "$prefix/tests/$(dirname "$test")" || exit 2
trace=
if [ "${HUNT_TRACE:-0}" = 1 ]; then
    [ -e "$root/target/release/libdat-trace.so" ] || { echo "hunt-hangs: HUNT_TRACE needs tools/build.sh first" >&2; exit 2; }
    trace=$out/trace
    export LD_PRELOAD=$root/target/release/libdat-trace.so DAT_TRACE_DIR=$trace
    mkdir -p "$trace"
fi
hangs=0 fails=0
for i in $(seq 1 "$runs"); do
    [ -n "$trace" ] && rm -f "$trace"/dat-trace.*
    # Its own session: on a hang, exactly this run's processes are dumped and killed.
    setsid "$prefix/bin/mpiexec" -bootstrap fork -n "$np" "./$prog" >"$out/run.out" 2>&1 &
    pid=$!
    ticks=0
    while kill -0 "$pid" 2>/dev/null && [ $ticks -lt $((limit * 10)) ]; do sleep 0.1; ticks=$((ticks + 1)); done
    if kill -0 "$pid" 2>/dev/null; then
        hangs=$((hangs + 1))
        d=$out/hang$hangs
        mkdir -p "$d"
        # gdb's attach stops the rank, and a thread asleep in epoll_wait
        # returns EINTR when it goes on: a run that then finishes had a
        # thread in that rank sleeping through a wakeup it missed (how
        # stop 25's hang was found). The ranks after it are not dumped.
        woke=
        for p in $(pgrep -s "$pid" -x "$prog"); do
            gdb -p "$p" -batch -ex "thread apply all bt" >"$d/bt.$p" 2>&1
            sleep 1
            if ! kill -0 "$pid" 2>/dev/null; then woke=$p; break; fi
        done
        cp "$out/run.out" "$d/"
        [ -n "$trace" ] && cp "$trace"/dat-trace.* "$d/" 2>/dev/null
        kill -9 -- -"$pid" 2>/dev/null
        if [ -n "$woke" ]; then
            echo "run $i: hang, ended once rank $woke was stopped and went on (a missed wakeup there); stacks in $d"
        else
            echo "run $i: hang, stacks in $d"
        fi
    elif ! grep -q '^ *No Errors' "$out/run.out"; then
        fails=$((fails + 1))
        cp "$out/run.out" "$out/fail$i.out"
        echo "run $i: failed, output in $out/fail$i.out"
    fi
    wait "$pid" 2>/dev/null
done
echo "hunt-hangs: $test at $np ranks: $hangs hangs, $fails failures in $runs runs ($out)"
