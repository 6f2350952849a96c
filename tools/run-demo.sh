#!/usr/bin/env bash
# The main job (README): a DAT program over our stack. By default on this
# plain host, no RDMA hardware or guest: installs what is missing, builds,
# and runs the reference dtest, server and client over loopback, through our
# libdat2.so.2 and our software provider libdaplsock.so.2 (TCP/UDP).
#   --guest   instead boot the Soft-RoCE guest and run dtest there over rxe0
#             through our verbs provider libdaplibv.so.2 (the earlier demo)
#   DAPLSOCK_LIB=PATH   the software provider to use (default: the build's
#             target/release/libdaplsock.so.2)
#   DEMO_NO_BUILD=1     use what is already built
# Last line: "demo: PASSED" or "demo: FAILED" (and the exit status).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"

guest=0
for a in "$@"; do
    case "$a" in
        --guest) guest=1 ;;
        -h | --help) sed -n '2,11p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) echo "run-demo: unknown argument '$a' (try --help)" >&2; exit 2 ;;
    esac
done

if [ $guest = 1 ]; then
    if [ "$(id -u)" = 0 ]; then tools/setup.sh; else sudo tools/setup.sh; fi
    tools/build.sh >/dev/null
    exec tools/rxe-vm/run-in-guest.sh ctest/guest/demo.sh
fi

# Packages only when something is missing: with them installed, no root.
need=""
for c in dtest ss timeout; do command -v $c >/dev/null || need="$need $c"; done
[ "${DEMO_NO_BUILD:-0}" = 1 ] || command -v cc >/dev/null || need="$need cc"
if [ -n "$need" ]; then
    echo "run-demo: missing$need: installing packages (tools/setup.sh)"
    if [ "$(id -u)" = 0 ]; then tools/setup.sh; else sudo tools/setup.sh; fi
fi
if [ "${DEMO_NO_BUILD:-0}" != 1 ]; then
    echo "run-demo: building (tools/build.sh)"
    tools/build.sh >/dev/null
fi

LIBDIR=$root/target/release
PROV=$(realpath "${DAPLSOCK_LIB:-$LIBDIR/libdaplsock.so.2}" 2>/dev/null) || PROV=${DAPLSOCK_LIB:-$LIBDIR/libdaplsock.so.2}
[ -e "$LIBDIR/libdat2.so.2" ] || { echo "run-demo: no $LIBDIR/libdat2.so.2 (build failed?)"; echo "demo: FAILED"; exit 1; }
[ -e "$PROV" ] || { echo "run-demo: no software provider at $PROV (build failed? or set DAPLSOCK_LIB)"; echo "demo: FAILED"; exit 1; }

work=$(mktemp -d /tmp/dat-demo.XXXXXX)
spid=""
trap '[ -n "$spid" ] && kill "$spid" 2>/dev/null; rm -rf "$work"' EXIT
printf 'demo-sock u2.0 nonthreadsafe default %s dapl.2.0 "lo 0" ""\n' "$PROV" >"$work/dat.conf"
export DAT_OVERRIDE=$work/dat.conf LD_LIBRARY_PATH=$LIBDIR
ARGS="-b 65536 -B 10"

# dtest's server takes its client's parameters on TCP 15828, a fixed port:
# say so plainly if something else holds it (another test run).
if [ -n "$(ss -Hltn 'sport = :15828' 2>/dev/null)" ]; then
    echo "run-demo: TCP port 15828 (dtest's) is already in use here; try again when it is free"
    echo "demo: FAILED"; exit 1
fi

echo "demo: dat.conf: $(cat "$work/dat.conf")"
echo "demo: dtest $(command -v dtest) uses $(LD_LIBRARY_PATH=$LIBDIR ldd "$(command -v dtest)" | awk '/libdat2/ {print $3}')"
echo "demo: server: dtest -P demo-sock -s $ARGS"
echo "demo: client: dtest -P demo-sock -h 127.0.0.1 $ARGS"
# shellcheck disable=SC2086
timeout 120 dtest -P demo-sock -s $ARGS >"$work/server" 2>&1 &
spid=$!
for _ in $(seq 200); do
    kill -0 $spid 2>/dev/null || break
    [ -n "$(ss -Hltn 'sport = :15828' 2>/dev/null)" ] && break
    sleep 0.05
done
crc=0
# shellcheck disable=SC2086
timeout 120 dtest -P demo-sock -h 127.0.0.1 $ARGS >"$work/client" 2>&1 || crc=$?
src=0
wait $spid || src=$?
spid=""
echo "----- dtest server (exit $src)"; cat "$work/server"
echo "----- dtest client (exit $crc)"; cat "$work/client"
echo "-----"
# dtest exits 0 even when it fails, so its verdict line is what counts.
if [ $src = 0 ] && [ $crc = 0 ] && grep -q "Test Complete. PASSED" "$work/server" && grep -q "Test Complete. PASSED" "$work/client"; then
    echo "demo: PASSED (dtest server and client over loopback through our libdat2.so.2 and libdaplsock.so.2)"
else
    echo "demo: FAILED"
    exit 1
fi
