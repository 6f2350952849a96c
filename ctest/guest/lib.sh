# Shared helpers for scripts that run inside the Soft-RoCE guest
# (tools/rxe-vm/run-in-guest.sh). Source it; call `finish NAME` at the end.

PASS=0
FAIL=0
GUEST_ADDR=${GUEST_ADDR:-10.0.0.1}
WORK=$(mktemp -d /tmp/dat-guest.XXXXXX)

ok()   { PASS=$((PASS + 1)); echo "ok   $*"; }
fail() { FAIL=$((FAIL + 1)); echo "FAIL $*"; }

# write_conf FILE NAME LIBRARY PARAMS: one dat.conf entry.
write_conf() {
    printf '%s u2.0 nonthreadsafe default %s dapl.2.0 "%s" ""\n' "$2" "$3" "$4" >"$1"
}

# wait_tcp_listen PID PORT: until something listens on TCP PORT (dtest's
# server hands its parameters out over TCP 15828) or PID exits. TCG guests
# are slow enough that a fixed sleep is not enough.
wait_tcp_listen() {
    local hex i
    hex=$(printf ':%04X ' "$2")
    for i in $(seq 300); do
        kill -0 "$1" 2>/dev/null || return 1
        grep -q "$hex[0-9A-F:]* 0A " /proc/net/tcp /proc/net/tcp6 2>/dev/null && return 0
        sleep 0.2
    done
    return 1
}

# wait_rdma_listen PID: until PID has an rdma_cm channel open (its listener
# is being set up), then a second for it to be bound.
wait_rdma_listen() {
    local i
    for i in $(seq 300); do
        kill -0 "$1" 2>/dev/null || return 1
        ls -l "/proc/$1/fd" 2>/dev/null | grep -q rdma_cm && { sleep 1; return 0; }
        sleep 0.2
    done
    return 1
}

# run_pair NAME SECONDS "SERVER CMD" "CLIENT CMD" PATTERN:
# starts the server, waits for its TCP parameter port, runs the client, and
# passes when both exit 0 and both outputs contain PATTERN.
run_pair() {
    local name=$1 secs=$2 server=$3 client=$4 pattern=$5
    timeout "$secs" sh -c "$server" >"$WORK/$name.server" 2>&1 &
    local spid=$!
    wait_tcp_listen $spid "${DTEST_PORT:-15828}"
    timeout "$secs" sh -c "$client" >"$WORK/$name.client" 2>&1
    local crc=$?
    wait $spid
    local src=$?
    if [ $crc -eq 0 ] && [ $src -eq 0 ] && grep -q "$pattern" "$WORK/$name.client" &&
        grep -q "$pattern" "$WORK/$name.server"; then
        ok "$name"
    else
        fail "$name (server rc=$src, client rc=$crc)"
        echo "---- $name server output"; tail -n 30 "$WORK/$name.server"
        echo "---- $name client output"; tail -n 30 "$WORK/$name.client"
    fi
}

finish() {
    echo "$1: $PASS passed, $FAIL failed"
    rm -rf "$WORK"
    [ "$FAIL" -eq 0 ]
}
