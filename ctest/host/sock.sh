#!/bin/sh
# On this host, no RDMA device, no root: the sock transport (TCP/UDP) over
# loopback, through our libdat2.so.2, with target/release/libdaplsock.so.2
# (tools/build.sh builds both and the C tests; this runs it if one is
# missing). Runs: the reference DAPL programs (dapl2-utils: dtest, dtestcm, dtestx,
# dtestsrq, dapltest; server and client both on 127.0.0.1), then
# provider_test, rmr_test and conformance. Its dat.conf and the programs'
# outputs go to a temp dir of its own. Cases that cannot apply to a
# software transport are skipped, each with its reason printed. Last line:
# "host-sock: N passed, M failed".
# Both ends are on this host, so connections take the on-node path
# (shared-memory rings, cross-memory attach for large RDMA); suite "paths"
# runs dtest, dtestx, rmr and conformance again over plain TCP
# (DAPL_SOCK_SHM=0) and over the rings without cross-memory attach
# (DAPL_SOCK_CMA=0), and each run checks from the provider's log
# (DAPL_DBG_TYPE=2) that its connections took the path it expects.
#   SOCK_SUITES   space-separated subset of: dtest dtestcm dtestx dtestsrq dapltest provider rmr conformance paths trace
#   SOCK_KEEP=1   keep the temp dir (outputs) and say where
set -u
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
PASS=0
FAIL=0
SKIP=0
WORK=$(mktemp -d /tmp/dat-sock.XXXXXX)
ok()   { PASS=$((PASS + 1)); echo "ok   $*"; }
fail() { FAIL=$((FAIL + 1)); echo "FAIL $*"; }
skip() { SKIP=$((SKIP + 1)); echo "skip $*"; }
want() { [ -z "${SOCK_SUITES:-}" ] || echo " $SOCK_SUITES " | grep -q " $1 "; }
# Loopback only: every connection of this suite stays on this host.
NETDEV=lo
ADDR=127.0.0.1
LIBDIR=$root/target/release
PROV=$LIBDIR/libdaplsock.so.2

if [ ! -e "$LIBDIR/libdat2.so.2" ] || [ ! -e "$PROV" ] || [ ! -x ctest/build/conformance ] || [ ! -e ctest/build/libcountalloc.so ]; then
    echo "# building (tools/build.sh)"
    nice -n 10 tools/build.sh >"$WORK/build.log" 2>&1 ||
        { tail -20 "$WORK/build.log"; echo "host-sock: build failed"; rm -rf "$WORK"; exit 1; }
fi
export LD_LIBRARY_PATH=$LIBDIR
IA=ofa-v2-sock
conf=$WORK/dat.conf
{
    printf '%s u2.0 nonthreadsafe default %s dapl.2.0 "%s 0" ""\n' "$IA" "$PROV" "$NETDEV"
    printf 'sock-addr u2.0 nonthreadsafe default %s dapl.2.0 "%s 0" ""\n' "$PROV" "$ADDR"
    printf 'sock-addr1 u2.0 nonthreadsafe default %s dapl.2.0 "%s 1" ""\n' "$PROV" "$ADDR"
    printf 'sock-badnet u2.0 nonthreadsafe default %s dapl.2.0 "eth9 0" ""\n' "$PROV"
    printf 'sock-foreign u2.0 nonthreadsafe default %s dapl.2.0 "192.0.2.1 0" ""\n' "$PROV"
} >"$conf"
export DAT_OVERRIDE=$conf

# Waits until something listens on TCP port $2 (or process $1 is gone).
wait_listen() {
    for _ in $(seq 200); do
        kill -0 "$1" 2>/dev/null || return 1
        ss -Hltn "sport = :$2" 2>/dev/null | grep -q . && return 0
        sleep 0.05
    done
    return 1
}

# run_pair NAME SECONDS PORT "SERVER CMD" "CLIENT CMD" PATTERN: passes when
# both exit 0 and both outputs contain PATTERN.
run_pair() {
    name=$1 secs=$2 port=$3 server=$4 client=$5 pattern=$6
    timeout "$secs" stdbuf -oL -eL sh -c "$server" >"$WORK/$name.server" 2>&1 &
    spid=$!
    wait_listen $spid "$port"
    timeout "$secs" stdbuf -oL -eL sh -c "$client" >"$WORK/$name.client" 2>&1
    crc=$?
    wait $spid
    src=$?
    if [ $crc -eq 0 ] && [ $src -eq 0 ] && grep -q "$pattern" "$WORK/$name.client" && grep -q "$pattern" "$WORK/$name.server"; then
        ok "$name"
    else
        fail "$name (server rc=$src, client rc=$crc)"
        echo "---- $name server output"; tail -n 20 "$WORK/$name.server"
        echo "---- $name client output"; tail -n 20 "$WORK/$name.client"
    fi
}

# check_path LABEL PATH FILE...: the provider's log lines in FILEs (run
# with DAPL_DBG_TYPE=2) name at least one connection, and every one took
# PATH: "cma yes" / "cma no" (on-node rings, with or without cross-memory
# attach; both ends agreeing on early wraps) or "tcp".
check_path() {
    label=$1 path=$2; shift 2
    lines=$(cat "$@" 2>/dev/null | grep -o 'sock: connection [0-9]* (id [0-9]*, [a-z]*): .*')
    n=$(echo "$lines" | grep -c .)
    case $path in
        tcp) good=$(echo "$lines" | grep -c '): tcp$') ;;
        *) good=$(echo "$lines" | grep -c "): on-node shared memory, $path, early wraps yes\$") ;;
    esac
    # A peer killed during the handshake (conformance peer_killed_rounds)
    # cannot be probed for cross-memory attach: that end says "cma no".
    gone=0
    [ "$path" = "cma yes" ] && gone=$(cat "$@" 2>/dev/null | grep -c 'cross-memory attach to pid [0-9]*: No such process')
    if [ "$n" -gt 0 ] && [ $((n - good)) -le "$gone" ]; then
        note=
        [ "$good" -lt "$n" ] && note=" ($((n - good)) more whose peer was gone before the probe)"
        ok "$label path: $good of $n connection ends on $path$note"
    else
        fail "$label path: $good of $n connection ends on $path"
        echo "$lines" | sort | uniq -c | head -5
    fi
}

P="-P $IA"
DTEST_ARGS=${DTEST_ARGS:--b 65536 -B 10}
if want dtest; then
    # dtest's server takes its client's parameters over TCP 15828 first.
    run_pair dtest 120 15828 "DAPL_DBG_TYPE=2 dtest $P -s $DTEST_ARGS" "DAPL_DBG_TYPE=2 dtest $P -h $ADDR $DTEST_ARGS" "Test Complete. PASSED"
    check_path dtest "cma yes" "$WORK/dtest.server" "$WORK/dtest.client"
    run_pair dtest-polling 120 15828 "dtest $P -s -p $DTEST_ARGS" "dtest $P -h $ADDR -p $DTEST_ARGS" "Test Complete. PASSED"
    run_pair dtest-cno 120 15828 "dtest $P -s -c $DTEST_ARGS" "dtest $P -h $ADDR -c $DTEST_ARGS" "Test Complete. PASSED"
    run_pair dtest-defaults 300 15828 "dtest $P -s" "dtest $P -h $ADDR" "Test Complete. PASSED"
fi
if want dtestcm; then
    # dtestcm takes its client over TCP 15828 first, as dtest.
    run_pair dtestcm 300 15828 "dtestcm $P -s -c 20" "dtestcm $P -h $ADDR -c 20" "ALL 20 CONNECTED"
fi
if want dtestx; then
    run_pair dtestx 120 15828 "dtestx $P -s -b 4096" "dtestx $P -h $ADDR -b 4096" "immed/atomic test PASSED"
    run_pair dtestx-counters 120 15828 "dtestx $P -s -p -b 4096" "dtestx $P -h $ADDR -p -b 4096" "immed/atomic test PASSED"
    run_pair dtestx-ud 120 15828 "dtestx $P -s -u" "dtestx $P -c -u -h $ADDR" "UD test PASSED"
    # The remaining options: -v (verbose), -U N (N UD endpoints each side),
    # -m (the server answers every client endpoint from its own endpoint).
    run_pair dtestx-verbose 120 15828 "dtestx $P -s -v -b 1024" "dtestx $P -v -h $ADDR -b 1024" "immed/atomic test PASSED"
    run_pair dtestx-ud-U3 120 15828 "dtestx $P -s -u -U 3" "dtestx $P -c -u -U 3 -h $ADDR" "UD test PASSED"
    run_pair dtestx-ud-m 120 15828 "dtestx $P -s -u -m -U 3" "dtestx $P -c -u -m -U 3 -h $ADDR" "UD test PASSED"
    out=$(timeout 60 dtestx $P -q 2>&1)
    if echo "$out" | grep -q "DAT_IB_UD=TRUE" && echo "$out" | grep -q "DAT_IB_CMP_AND_SWAP=TRUE"; then
        ok "dtestx-query"
    else
        fail "dtestx-query"; echo "$out" | tail -5
    fi
fi
if want dtestsrq; then
    # dtestsrq listens through the CM only, on TCP 45248.
    run_pair dtestsrq 120 45248 "dtestsrq $P -s" "dtestsrq $P -h $ADDR" "RC SRQ Test Complete"
fi
if want dapltest; then
    # dapltest's server listens on its qualifier (TCP 62000) until -T Q.
    dapltest_run() { # NAME CLIENT-ARGS...
        name=$1; shift
        dapltest -T S -D $IA >"$WORK/$name.server" 2>&1 &
        spid=$!
        wait_listen $spid 62000
        timeout 300 dapltest "$@" >"$WORK/$name.client" 2>&1
        crc=$?
        timeout 60 dapltest -T Q -s $ADDR -D $IA >/dev/null 2>&1
        timeout 30 sh -c "wait $spid" 2>/dev/null || kill $spid 2>/dev/null
        # The limit test (-T L) posts until a queue is full: that refusal
        # is the limit it measures, not a failure.
        if [ $crc -eq 0 ] && ! grep -i 'fail\|error' "$WORK/$name.client" |
            grep -qv '^LimitTest: dat_ep_post_recv fails: DAT_INSUFFICIENT_RESOURCES DAT_RESOURCE_TEP$'; then
            ok "$name"
        else
            fail "$name (rc=$crc)"; grep -in 'fail\|error' "$WORK/$name.client" | head -10
            tail -n 15 "$WORK/$name.client"; tail -n 10 "$WORK/$name.server"
        fi
    }
    dapltest_run dapltest-T -T T -s $ADDR -D $IA -i 20 -t 2 -w 2 -V client SR 1024 server SR 1024 client RW 4096 server RR 4096
    dapltest_run dapltest-P -T P -s $ADDR -D $IA -i 200 RW 4096 2
    # -T L's qualifiers fold to TCP 43414-43513, inside this host's
    # ephemeral range: a socket holding one of them without SO_REUSEADDR
    # (dtest's own side channel above leaves its end in TIME_WAIT for a
    # minute) makes dat_psp_create answer DAT_CONN_QUAL_IN_USE, rightly.
    # Not our provider's (its sockets allow the reuse): wait them out.
    held=""
    for i in $(seq 130); do
        held=$(ss -Htan '( sport >= :43414 and sport <= :43513 )' 2>/dev/null)
        [ -z "$held" ] && break
        sleep 0.5
    done
    [ $i -gt 1 ] && echo "# waited $(( (i - 1) / 2 ))s for TCP 43414-43513 to be free (dapltest -T L's ports)${held:+; still held: $held}"
    dapltest_run dapltest-L -T L -D $IA -m 100 -w 2
    dapltest_run dapltest-Q -T Q -s $ADDR -D $IA
fi

if want trace; then
    # tools/dat-trace in front of our registry: dtest's calls and events,
    # one file per process, every line there (sequence numbers unbroken).
    TR=$WORK/trace
    mkdir -p "$TR"
    tr="LD_PRELOAD=$LIBDIR/libdat-trace.so DAT_TRACE_DIR=$TR"
    run_pair dtest-traced 120 15828 "$tr dtest $P -s $DTEST_ARGS" "$tr dtest $P -h $ADDR $DTEST_ARGS" "Test Complete. PASSED"
    srv=$(grep -l psp_create "$TR"/dat-trace.* 2>/dev/null | head -1)
    cli=$(grep -l ep_connect "$TR"/dat-trace.* 2>/dev/null | head -1)
    has() { grep -q -- "$2" "$1" 2>/dev/null; }
    if [ "$(ls "$TR" | wc -l)" -eq 2 ] && [ -n "$srv" ] && [ -n "$cli" ] &&
        has "$srv" 'psp_create qual [0-9]* evd 0x[0-9a-f]* -> 0 psp 0x' &&
        has "$srv" 'CONNECTION_REQUEST cr 0x' && has "$srv" 'cr_accept 0x[0-9a-f]* ep 0x[0-9a-f]* -> 0$' &&
        has "$srv" 'CONNECTION 0x4001 ep' && has "$srv" 'CONNECTION 0x4005 ep' && has "$srv" 'ia_close 0x[0-9a-f]* -> 0$' &&
        has "$cli" 'ep_connect 0x[0-9a-f]* qual [0-9]* pdata [0-9]* bytes.* -> 0$' &&
        has "$cli" 'CONNECTION 0x4001 ep' && has "$cli" 'ep_disconnect 0x[0-9a-f]* -> 0$' && has "$cli" 'ia_close 0x[0-9a-f]* -> 0$' &&
        [ -z "$(awk '$1 != FNR - 1' "$srv" "$cli")" ]; then
        ok "dat-trace: dtest's connection calls and events, both processes"
    else
        fail "dat-trace: dtest's trace"
        for f in "$TR"/*; do echo "---- $f"; head -20 "$f"; done
    fi
fi

# count_cases LABEL FILE: one ok/FAIL per case line of a C suite's output.
count_cases() {
    for name in $(grep '^ok ' "$2" | awk '{print $2}'); do ok "$1 $name"; done
    for name in $(grep '^FAIL ' "$2" | awk '{print $2}'); do fail "$1 $name"; done
}

if want provider; then
    BIN=ctest/build/provider_test
    # Cases about verbs devices and ports, which a sock IA does not have.
    PT_SKIP="open_netdev_without_rdma:lo~has~no~RDMA~device,~but~sock~runs~on~lo~(it~must~open:~see~open_styles)
open_bad_port:about~a~verbs~device~port~number;~sock~ia_params~name~a~netdev~or~an~address~only
ia_query:compares~the~IA~limits~with~ibv_query_device~of~a~verbs~adapter;~sock~has~none"
    run=
    for c in $("$BIN" -l 2>/dev/null | awk '{print $1}'); do
        why=$(echo "$PT_SKIP" | grep "^$c:" | cut -d: -f2- | tr '~' ' ')
        if [ -n "$why" ]; then skip "provider $c: $why"; else run="$run $c"; fi
    done
    out=$WORK/provider.out
    # shellcheck disable=SC2086
    PT_IA=$IA PT_IA_DEV=sock-addr1 PT_IA_ADDR=sock-addr PT_IA_BADNET=sock-badnet PT_IA_BADPORT=sock-foreign \
    PT_IA_LO=sock-foreign PT_PROVIDER=daplsock PT_ADAPTER=$NETDEV PT_ADDRESS=$ADDR PT_NETDEV=$NETDEV \
        timeout 900 "$BIN" $run >"$out" 2>&1
    grep -v '^ok ' "$out"
    grep -q '^ctest-provider' "$out" || fail "provider_test: no summary line"
    count_cases provider "$out"
fi
# run_rmr LABEL PATH: rmr_test, with the provider's log in its output
# (RT_VERBOSE: stderr not captured) for check_path.
run_rmr() {
    out=$WORK/$1.out
    RT_IA=$IA RT_VERBOSE=1 DAPL_DBG_TYPE=2 timeout 900 ctest/build/rmr_test >"$out" 2>&1
    grep -v '^ok \|^daplsock ' "$out"
    grep -q '^ctest-rmr:' "$out" || fail "rmr_test ($1): no summary line"
    count_cases "$1" "$out"
    check_path "$1" "$2" "$out"
}
if want rmr; then
    run_rmr rmr "cma yes"
fi
# run_conformance LABEL PATH (CONF_SOAK_SECS from the environment).
run_conformance() {
    BIN=ctest/build/conformance
    # Cases that look at verbs objects or at the guest's network.
    CONF_SKIP="abrupt_close_releases:counts~verbs~objects~(rdma~resource~show);~sock~makes~none~to~count"
    ip -4 addr 2>/dev/null | grep -q "inet 10\.0\.0\.1/" ||
        CONF_SKIP="$CONF_SKIP
longest_ia_name:its~dat.conf~names~the~guest~address~10.0.0.1,~which~this~host~does~not~have"
    run=
    for c in $("$BIN" -l | awk '{print $2}'); do
        why=$(echo "$CONF_SKIP" | grep "^$c:" | cut -d: -f2- | tr '~' ' ')
        if [ -n "$why" ]; then skip "conformance $c: $why"; else run="$run $c"; fi
    done
    out=$WORK/$1.out
    # libcountalloc.so counts heap allocations for fastpath_allocates_nothing.
    # shellcheck disable=SC2086
    CONF_IA=$IA CONF_IA2=sock-addr CONF_WINDOW_BOUNDS=enforced CONF_SOAK_SECS=${CONF_SOAK_SECS:-20} \
    CONF_VERBOSE=1 DAPL_DBG_TYPE=2 LD_PRELOAD=$root/ctest/build/libcountalloc.so timeout 1500 "$BIN" $run >"$out" 2>&1
    grep -v '^ok \|^# stat \|^daplsock \|^dat-registry WARN' "$out"
    grep -q '^ctest-conformance:' "$out" || fail "conformance ($1): no summary line (killed or crashed)"
    count_cases "$1" "$out"
    check_path "$1" "$2" "$out"
}
if want conformance; then
    run_conformance conformance "cma yes"
fi
if want paths; then
    for mode in tcp ring; do
        case $mode in
            tcp) export DAPL_SOCK_SHM=0; path=tcp ;;
            ring) export DAPL_SOCK_CMA=0; path="cma no" ;;
        esac
        run_pair dtest-$mode 120 15828 "DAPL_DBG_TYPE=2 dtest $P -s $DTEST_ARGS" "DAPL_DBG_TYPE=2 dtest $P -h $ADDR $DTEST_ARGS" "Test Complete. PASSED"
        check_path dtest-$mode "$path" "$WORK/dtest-$mode.server" "$WORK/dtest-$mode.client"
        run_pair dtestx-$mode 120 15828 "DAPL_DBG_TYPE=2 dtestx $P -s -b 4096" "DAPL_DBG_TYPE=2 dtestx $P -h $ADDR -b 4096" "immed/atomic test PASSED"
        check_path dtestx-$mode "$path" "$WORK/dtestx-$mode.server" "$WORK/dtestx-$mode.client"
        run_rmr rmr-$mode "$path"
        CONF_SOAK_SECS=${CONF_SOAK_SECS:-5} run_conformance conformance-$mode "$path"
        unset DAPL_SOCK_SHM DAPL_SOCK_CMA
    done
fi

echo "host-sock: $PASS passed, $FAIL failed ($SKIP skipped, reasons above)"
[ "${SOCK_KEEP:-0}" = 1 ] && echo "# outputs kept in $WORK" || rm -rf "$WORK"
[ "$FAIL" -eq 0 ]
