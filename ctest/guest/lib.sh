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

# Servers print their "ready" lines before they really listen, and under
# TCG a client that comes early fails, so poll for the listener itself.
# dtest's server takes its client over TCP 15828 first; dapltest listens
# through rdma_cm.
# wait_tcp_listen PID PORT
wait_tcp_listen() {
    local i
    for i in $(seq 300); do
        kill -0 "$1" 2>/dev/null || return 1
        [ -n "$(ss -Hltn "sport = :$2" 2>/dev/null)" ] && return 0
        sleep 0.2
    done
    return 1
}

# wait_cm_listen PID COMM: until a process named COMM has an rdma_cm listener.
wait_cm_listen() {
    local i
    for i in $(seq 300); do
        kill -0 "$1" 2>/dev/null || return 1
        rdma resource show cm_id 2>/dev/null | grep -q "state LISTEN .* comm $2 " && return 0
        sleep 0.2
    done
    return 1
}

# dtest's defaults (4 MiB buffers, 2000 writes) take minutes under TCG.
DTEST_ARGS=${DTEST_ARGS:--b 65536 -B 10}

# run_pair NAME SECONDS "SERVER CMD" "CLIENT CMD" PATTERN:
# starts the server, waits for its TCP parameter port, runs the client, and
# passes when both exit 0 and both outputs contain PATTERN.
run_pair() {
    local name=$1 secs=$2 server=$3 client=$4 pattern=$5
    # Line-buffered, so a program killed by the timeout still shows its output.
    timeout "$secs" stdbuf -oL -eL sh -c "$server" >"$WORK/$name.server" 2>&1 &
    local spid=$!
    # WAIT_FOR=cm:COMM for servers that only listen through rdma_cm
    # (dtestsrq, dtestx), else dtest's TCP parameter port.
    local wait_for=${WAIT_FOR:-tcp:15828}
    case "$wait_for" in
        cm:*) wait_cm_listen $spid "${wait_for#cm:}" ;;
        tcp:*) wait_tcp_listen $spid "${wait_for#tcp:}" ;;
    esac
    timeout "$secs" stdbuf -oL -eL sh -c "$client" >"$WORK/$name.client" 2>&1
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
