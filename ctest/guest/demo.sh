#!/bin/sh
# In the guest: dtest server and client over rxe0, through our libdat2.so.2
# and our provider libdaplibv.so.2.
set -u
. "$(dirname "$0")/lib.sh"
LIBDIR=$(realpath "${LIBDAT2_DIR:-target/release}")
# Our provider by default; DEMO_PROVIDER_LIB=libdaplofa.so.2 runs DAPL's instead.
PROVIDER_LIB=${DEMO_PROVIDER_LIB:-libdaplibv.so.2}
conf=$WORK/dat.conf
write_conf "$conf" demo-rxe "$PROVIDER_LIB" "dum0 0"
export DAT_OVERRIDE=$conf LD_LIBRARY_PATH=$LIBDIR
echo "demo: dat.conf: $(cat "$conf")"
echo "demo: dtest uses $(ldd "$(command -v dtest)" | awk '/libdat2/ {print $3}')"
timeout 120 dtest -P demo-rxe -s $DTEST_ARGS >"$WORK/server" 2>&1 &
spid=$!
wait_tcp_listen $spid 15828
timeout 120 dtest -P demo-rxe -h "$GUEST_ADDR" $DTEST_ARGS >"$WORK/client" 2>&1
wait $spid
echo "----- dtest server"; cat "$WORK/server"
echo "----- dtest client"; cat "$WORK/client"
if grep -q "Test Complete. PASSED" "$WORK/server" && grep -q "Test Complete. PASSED" "$WORK/client"; then ok "dtest over rxe0"; else fail "dtest over rxe0"; fi
finish demo
