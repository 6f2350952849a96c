#!/bin/sh
# In the guest: the reference DAPL programs and provider (libdaplofa) run
# unmodified on our libdat2.so.2 (issue 2, must-show 1).
#   LIBDAT2_DIR  where our libdat2.so.2 is (default: target/release)
set -u
. "$(dirname "$0")/lib.sh"
LIBDIR=$(realpath "${LIBDAT2_DIR:-target/release}")
conf=$WORK/dat.conf
write_conf "$conf" ofa-v2-rxe libdaplofa.so.2 "dum0 0"
export DAT_OVERRIDE=$conf LD_LIBRARY_PATH=$LIBDIR

# The binaries must really bind to our registry, not Debian's.
if ldd "$(command -v dtest)" | grep -q "$LIBDIR/libdat2.so.2"; then
    ok "dtest binds to our libdat2.so.2"
else
    fail "dtest binds to our libdat2.so.2"; ldd "$(command -v dtest)"
fi
if DAT_DBG_TYPE=0x8 dtest -P no-such-ia 2>&1 | grep -q 'dat-registry'; then
    ok "our registry answers (its log line seen)"
else
    fail "our registry answers (its log line seen)"
fi

run_pair dtest 180 "dtest -P ofa-v2-rxe -s $DTEST_ARGS" "dtest -P ofa-v2-rxe -h $GUEST_ADDR $DTEST_ARGS" "Test Complete. PASSED"
run_pair dtest-polling 180 "dtest -P ofa-v2-rxe -s -p $DTEST_ARGS" "dtest -P ofa-v2-rxe -h $GUEST_ADDR -p $DTEST_ARGS" "Test Complete. PASSED"

# dapltest transaction test with data validation; the server runs until a
# quit request (-T Q), so it is stopped by the client side here.
dapltest -T S -D ofa-v2-rxe >"$WORK/dapltest.server" 2>&1 &
spid=$!
wait_cm_listen $spid dapltest
timeout 300 dapltest -T T -s "$GUEST_ADDR" -D ofa-v2-rxe -i 20 -t 2 -w 2 -V \
    client SR 1024 server SR 1024 client RW 4096 server RR 4096 >"$WORK/dapltest.client" 2>&1
crc=$?
timeout 60 dapltest -T Q -s "$GUEST_ADDR" -D ofa-v2-rxe >/dev/null 2>&1
timeout 30 sh -c "wait $spid" 2>/dev/null || kill $spid 2>/dev/null
# dapltest prints no PASSED line: success is exit 0 with the client's closing line.
if [ $crc -eq 0 ] && grep -q 'End of Work' "$WORK/dapltest.client"; then
    ok "dapltest -T T -V (2 threads x 2 EPs, SR/RW/RR)"
else
    fail "dapltest -T T -V (rc=$crc)"; tail -n 30 "$WORK/dapltest.client"; tail -n 10 "$WORK/dapltest.server"
fi
finish guest-ref-provider
