#!/usr/bin/env bash
# Two hosts' worth of TCP on one machine: two network namespaces joined by a
# veth pair, the reference DAPL programs (dapl2-utils) with their server in
# one namespace and their client in the other, over the software provider
# libdaplsock.so.2 through our libdat2.so.2. Unlike host/sock.sh (loopback),
# every byte here crosses a real netdev pair, and the IA is named both by
# that netdev ("<veth> 0") and by its IPv4 address ("10.199.X.n 0").
# The dtest run checks from the provider's log that its connection stayed on
# TCP: different network namespaces are different hosts, even on one machine.
# Last: a peer-death check (server killed -9 mid-run; the client must fail
# within a bounded time, not hang).
# Needs root and `ip netns`; without them it prints why and "skipped".
# Last line: "netns: N passed, M failed".
#   DAPLSOCK_LIB    the provider (default: target/release/libdaplsock.so.2)
#   LIBDAT2_DIR     where libdat2.so.2 is (default: target/release)
#   NETNS_SUITES    space-separated subset of: dtest dtestx dtestcm dtestsrq dapltest death
#   NETNS_KEEP=1    keep the outputs' temp dir
set -u
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"

skipped() { echo "netns: skipped: $*"; exit 0; }
[ "$(id -u)" = 0 ] || skipped "not root (namespaces and veth need CAP_NET_ADMIN)"
command -v ip >/dev/null || skipped "no 'ip' command (iproute2)"
for p in dtest dtestx dtestcm dtestsrq dapltest ss timeout stdbuf; do
    command -v $p >/dev/null || skipped "no '$p' (tools/setup.sh installs dapl2-utils, iproute2, coreutils)"
done

PROV_SRC=${DAPLSOCK_LIB:-$root/target/release/libdaplsock.so.2}
LIBDIR=$(realpath "${LIBDAT2_DIR:-$root/target/release}")
# Missing build output is a failure, not a skip: this machine can run it.
[ -e "$PROV_SRC" ] || { echo "netns: no provider at $PROV_SRC (run tools/build.sh, or set DAPLSOCK_LIB)"; echo "netns: 0 passed, 1 failed"; exit 1; }
[ -e "$LIBDIR/libdat2.so.2" ] || { echo "netns: no $LIBDIR/libdat2.so.2 (run tools/build.sh)"; echo "netns: 0 passed, 1 failed"; exit 1; }

PASS=0
FAIL=0
WORK=$(mktemp -d /tmp/dat-netns.XXXXXX)
ok()   { PASS=$((PASS + 1)); echo "ok   $*"; }
fail() { FAIL=$((FAIL + 1)); echo "FAIL $*"; }
want() { [ -z "${NETNS_SUITES:-}" ] || echo " $NETNS_SUITES " | grep -q " $1 "; }

# Names carry our pid so that concurrent runs (or a stale one) don't clash;
# interface names must fit IFNAMSIZ (15 chars).
NS_S=dat-srv-$$
NS_C=dat-cli-$$
VETH_S=dvs$$
VETH_C=dvc$$
# 10.199.0.0/16 is private and used by nothing else here; one /24 per pid.
NET=10.199.$(($$ % 250 + 1))
ADDR_S=$NET.1
ADDR_C=$NET.2
BG_PIDS=""

cleanup() {
    # Our own background programs first: a process inside a namespace keeps
    # it alive after `ip netns del`.
    for p in $BG_PIDS; do kill -9 "$p" 2>/dev/null; done
    ip netns del "$NS_S" 2>/dev/null
    ip netns del "$NS_C" 2>/dev/null
    if [ "${NETNS_KEEP:-0}" = 1 ]; then echo "# outputs kept in $WORK"; else rm -rf "$WORK"; fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

ip netns add "$NS_S" 2>"$WORK/err" || skipped "cannot create a network namespace: $(cat "$WORK/err")"
ip netns add "$NS_C" || skipped "cannot create a second network namespace"
# Create the pair inside the server namespace and move one end, so the
# host's own namespace never holds (or routes to) these interfaces.
ip -n "$NS_S" link add "$VETH_S" type veth peer name "$VETH_C" 2>"$WORK/err" || skipped "no veth support: $(cat "$WORK/err")"
ip -n "$NS_S" link set "$VETH_C" netns "$NS_C" || { echo "netns: cannot move $VETH_C"; exit 1; }
ip -n "$NS_S" addr add "$ADDR_S/24" dev "$VETH_S"
ip -n "$NS_C" addr add "$ADDR_C/24" dev "$VETH_C"
for ns in "$NS_S" "$NS_C"; do ip -n "$ns" link set lo up; done
# Ephemeral ports above the ports the programs listen on, as in the guest
# (tools/rxe-vm/guest-stage2.sh): dtest's own side channel (a plain TCP
# socket to 15828, without SO_REUSEADDR) leaves its ephemeral port in
# TIME_WAIT for a minute, and dapltest -T L's qualifiers fold to TCP
# 43414-43513: once in CI (11-29) #27's port was such a socket's, and
# dat_rsp_create / dat_psp_create got DAT_CONN_QUAL_IN_USE, rightly.
for ns in "$NS_S" "$NS_C"; do
    ip netns exec "$ns" sh -c 'echo "53000 60999" >/proc/sys/net/ipv4/ip_local_port_range' ||
        { echo "netns: cannot set $ns's ip_local_port_range"; exit 1; }
done
ip -n "$NS_S" link set "$VETH_S" up
ip -n "$NS_C" link set "$VETH_C" up
# The link is usable once each side reaches the other (veth carrier, DAD-free IPv4).
for _ in $(seq 50); do
    ip netns exec "$NS_C" ping -c1 -W1 "$ADDR_S" >/dev/null 2>&1 && break
    sleep 0.1
done
echo "# $NS_S: $VETH_S $ADDR_S <-> $NS_C: $VETH_C $ADDR_C"

PROV=$WORK/libdaplsock.so.2
cp "$PROV_SRC" "$PROV" || exit 1
# The same IA names on both sides, each naming its own namespace's veth or
# address: sock-dev by netdev, sock-ip by IPv4 address.
conf() { # FILE NETDEV ADDR
    {
        printf 'sock-dev u2.0 nonthreadsafe default %s dapl.2.0 "%s 0" ""\n' "$PROV" "$2"
        printf 'sock-ip u2.0 nonthreadsafe default %s dapl.2.0 "%s 0" ""\n' "$PROV" "$3"
    } >"$1"
}
conf "$WORK/srv.conf" "$VETH_S" "$ADDR_S"
conf "$WORK/cli.conf" "$VETH_C" "$ADDR_C"
export LD_LIBRARY_PATH=$LIBDIR
# in_srv/in_cli CMD...: run in that namespace with that side's dat.conf.
in_srv() { DAT_OVERRIDE=$WORK/srv.conf ip netns exec "$NS_S" "$@"; }
in_cli() { DAT_OVERRIDE=$WORK/cli.conf ip netns exec "$NS_C" "$@"; }

# wait_listen PID PORT: until the server namespace listens on TCP PORT (or PID is gone).
wait_listen() {
    for _ in $(seq 300); do
        kill -0 "$1" 2>/dev/null || return 1
        ip netns exec "$NS_S" ss -Hltn "sport = :$2" 2>/dev/null | grep -q . && return 0
        sleep 0.05
    done
    return 1
}

# run_pair NAME SECONDS PORT "SERVER ARGS" "CLIENT ARGS" PATTERN: passes when
# both exit 0 and both outputs contain PATTERN.
run_pair() {
    local name=$1 secs=$2 port=$3 server=$4 client=$5 pattern=$6
    # shellcheck disable=SC2086
    in_srv timeout "$secs" stdbuf -oL -eL $server >"$WORK/$name.server" 2>&1 &
    local spid=$!
    BG_PIDS="$BG_PIDS $spid"
    wait_listen $spid "$port"
    # shellcheck disable=SC2086
    in_cli timeout "$secs" stdbuf -oL -eL $client >"$WORK/$name.client" 2>&1
    local crc=$?
    wait $spid
    local src=$?
    if [ $crc -eq 0 ] && [ $src -eq 0 ] && grep -q "$pattern" "$WORK/$name.client" && grep -q "$pattern" "$WORK/$name.server"; then
        ok "$name"
    else
        fail "$name (server rc=$src, client rc=$crc)"
        echo "---- $name server output"; tail -n 20 "$WORK/$name.server"
        echo "---- $name client output"; tail -n 20 "$WORK/$name.client"
    fi
}

DTEST_ARGS=${DTEST_ARGS:--b 65536 -B 10}
if want dtest; then
    # dtest's server takes its client's parameters over TCP 15828 first.
    # With the provider's log, to check the path: the two ends share this
    # host's boot and uid but not a network namespace, so they are two hosts
    # to the provider and stay on TCP (no shared-memory rings).
    export DAPL_DBG_TYPE=2
    run_pair dtest 120 15828 "dtest -P sock-dev -s $DTEST_ARGS" "dtest -P sock-dev -h $ADDR_S $DTEST_ARGS" "Test Complete. PASSED"
    unset DAPL_DBG_TYPE
    paths=$(cat "$WORK/dtest.server" "$WORK/dtest.client" | grep -o 'sock: connection [0-9]* (id [0-9]*, [a-z]*): .*')
    n=$(echo "$paths" | grep -c .)
    if [ "$n" -eq 2 ] && [ "$(echo "$paths" | grep -c '): tcp$')" -eq 2 ]; then
        ok "dtest path: both ends on tcp"
    else
        fail "dtest path: expected both ends on tcp"; echo "$paths"
    fi
    run_pair dtest-ipaddr 120 15828 "dtest -P sock-ip -s $DTEST_ARGS" "dtest -P sock-ip -h $ADDR_S $DTEST_ARGS" "Test Complete. PASSED"
    run_pair dtest-polling 120 15828 "dtest -P sock-dev -s -p $DTEST_ARGS" "dtest -P sock-dev -h $ADDR_S -p $DTEST_ARGS" "Test Complete. PASSED"
    run_pair dtest-cno 120 15828 "dtest -P sock-dev -s -c $DTEST_ARGS" "dtest -P sock-dev -h $ADDR_S -c $DTEST_ARGS" "Test Complete. PASSED"
fi
if want dtestx; then
    # RC: write with immediate data, compare-and-swap, fetch-and-add; -p
    # adds the counters. UD (-u): datagrams between the namespaces.
    run_pair dtestx 120 15828 "dtestx -P sock-dev -s -b 4096" "dtestx -P sock-dev -h $ADDR_S -b 4096" "immed/atomic test PASSED"
    run_pair dtestx-counters 120 15828 "dtestx -P sock-dev -s -p -b 4096" "dtestx -P sock-dev -h $ADDR_S -p -b 4096" "immed/atomic test PASSED"
    run_pair dtestx-ud 120 15828 "dtestx -P sock-dev -s -u" "dtestx -P sock-dev -c -u -h $ADDR_S" "UD test PASSED"
    run_pair dtestx-ud-ipaddr 120 15828 "dtestx -P sock-ip -s -u" "dtestx -P sock-ip -c -u -h $ADDR_S" "UD test PASSED"
fi
if want dtestcm; then
    run_pair dtestcm 300 15828 "dtestcm -P sock-dev -s -c 20" "dtestcm -P sock-dev -h $ADDR_S -c 20" "ALL 20 CONNECTED"
fi
if want dtestsrq; then
    # dtestsrq listens through the CM only, on TCP 45248.
    run_pair dtestsrq 120 45248 "dtestsrq -P sock-dev -s" "dtestsrq -P sock-dev -h $ADDR_S" "RC SRQ Test Complete"
fi

# dapltest: a server (listening on its qualifier, TCP 62000) until -T Q.
dapltest_run() { # NAME IA CLIENT-ARGS...
    local name=$1 ia=$2; shift 2
    in_srv dapltest -T S -D "$ia" >"$WORK/$name.server" 2>&1 &
    local spid=$!
    BG_PIDS="$BG_PIDS $spid"
    wait_listen $spid 62000
    in_cli timeout 300 dapltest "$@" >"$WORK/$name.client" 2>&1
    local crc=$?
    in_cli timeout 60 dapltest -T Q -s "$ADDR_S" -D "$ia" >/dev/null 2>&1
    timeout 30 sh -c "while kill -0 $spid 2>/dev/null; do sleep 0.1; done" || kill $spid 2>/dev/null
    # The limit test (-T L) posts until a queue is full: that refusal is the
    # limit it measures, not a failure.
    if [ $crc -eq 0 ] && ! grep -i 'fail\|error' "$WORK/$name.client" |
        grep -qv '^LimitTest: dat_ep_post_recv fails: DAT_INSUFFICIENT_RESOURCES DAT_RESOURCE_TEP$'; then
        ok "$name"
    else
        fail "$name (rc=$crc)"; grep -in 'fail\|error' "$WORK/$name.client" | head -10
        tail -n 15 "$WORK/$name.client"; tail -n 10 "$WORK/$name.server"
    fi
}
if want dapltest; then
    # -V: the transaction test checks the data it received.
    dapltest_run dapltest-T sock-dev -T T -s "$ADDR_S" -D sock-dev -i 20 -t 2 -w 2 -V client SR 1024 server SR 1024 client RW 4096 server RR 4096
    dapltest_run dapltest-T-ipaddr sock-ip -T T -s "$ADDR_S" -D sock-ip -i 20 -t 2 -w 2 -V client SR 1024 server SR 1024 client RW 4096 server RR 4096
    dapltest_run dapltest-P sock-dev -T P -s "$ADDR_S" -D sock-dev -i 200 RW 4096 2
    dapltest_run dapltest-L sock-dev -T L -D sock-dev -m 100 -w 2
    dapltest_run dapltest-Q sock-dev -T Q -s "$ADDR_S" -D sock-dev
fi

if want death; then
    # Peer death: a long dtest run, its server killed -9 once the client is well into it. The
    # client must notice (its TCP connection resets) and exit reporting the
    # failure within DEATH_SECS: a hang, or a success, would both be wrong.
    # dtest exits 0 even when it prints "Test Complete. FAILED" (so do the
    # other dapl2-utils programs), hence its verdict line is what is checked.
    DEATH_SECS=${DEATH_SECS:-60}
    # 2 x 8192 RDMA writes of 4 MiB each way: tens of seconds of traffic,
    # far more than the few before the kill, and the client always waits on
    # DTO completions (not -W, whose client spins on memory that a dead
    # peer never writes: dtest's own hang, not the provider's).
    DEATH_ARGS=${DEATH_ARGS:--b 4194304 -B 8192}
    # ip netns exec execs the program itself, so $! is dtest's own pid.
    DAT_OVERRIDE=$WORK/srv.conf ip netns exec "$NS_S" dtest -P sock-dev -s $DEATH_ARGS >"$WORK/death.server" 2>&1 &
    spid=$!
    BG_PIDS="$BG_PIDS $spid"
    wait_listen $spid 15828
    in_cli timeout $((DEATH_SECS + 10)) dtest -P sock-dev -h "$ADDR_S" $DEATH_ARGS >"$WORK/death.client" 2>&1 &
    cpid=$!
    BG_PIDS="$BG_PIDS $cpid"
    # Kill once the two are connected and traffic flows: the server holds
    # established TCP connections to the client.
    for _ in $(seq 100); do
        ip netns exec "$NS_S" ss -Htn state established 2>/dev/null | grep -q "$ADDR_C" && break
        sleep 0.1
    done
    sleep 2
    if ! kill -0 $cpid 2>/dev/null; then
        fail "peer-death: the client ended before the server was killed"; tail -n 10 "$WORK/death.client"
    else
        { kill -9 $spid; wait $spid; } 2>/dev/null
        start=$(date +%s)
        wait $cpid
        crc=$?
        took=$(($(date +%s) - start))
        # 124: timeout(1) had to stop it, i.e. it hung.
        if [ $crc -ne 124 ] && [ $took -le "$DEATH_SECS" ] && grep -q "Test Complete. FAILED" "$WORK/death.client" &&
            ! grep -q "Test Complete. PASSED" "$WORK/death.client"; then
            ok "peer-death: client reported FAILED and exited ${took}s after the server's kill -9 ($(grep -m1 -i 'error' "$WORK/death.client"))"
        else
            fail "peer-death: client rc=$crc ${took}s after the server's kill -9 (want it to report FAILED and exit within ${DEATH_SECS}s)"
            tail -n 15 "$WORK/death.client"
        fi
    fi
fi

echo "netns: $PASS passed, $FAIL failed"
[ "$FAIL" -eq 0 ]
