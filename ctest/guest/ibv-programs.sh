#!/bin/sh
# In the guest: the reference DAPL test programs, unmodified, over our
# libdat2.so.2 and our provider libdaplibv.so.2 (issue 3, must-show 1).
#   PROGRAMS  space-separated subset to run (default: all)
set -u
. "$(dirname "$0")/lib.sh"
LIBDIR=$(realpath "${LIBDAT2_DIR:-target/release}")
conf=$WORK/dat.conf
write_conf "$conf" ibv-rxe libdaplibv.so.2 "dum0 0"
write_conf "$WORK/dev.conf" ibv-rxe libdaplibv.so.2 "rxe0 1"
export DAT_OVERRIDE=$conf LD_LIBRARY_PATH=$LIBDIR
P="-P ibv-rxe"
want() { [ -z "${PROGRAMS:-}" ] || echo " $PROGRAMS " | grep -q " $1 "; }

# dapltest: a server until -T Q, clients in between.
dapltest_run() { # NAME CLIENT-ARGS...
    local name=$1; shift
    dapltest -T S -D ibv-rxe >"$WORK/$name.server" 2>&1 &
    local spid=$!
    wait_cm_listen $spid dapltest
    timeout 300 dapltest "$@" >"$WORK/$name.client" 2>&1
    local crc=$?
    timeout 60 dapltest -T Q -s "$GUEST_ADDR" -D ibv-rxe >/dev/null 2>&1
    timeout 30 sh -c "wait $spid" 2>/dev/null || kill $spid 2>/dev/null
    if [ $crc -eq 0 ] && ! grep -qi 'fail\|error' "$WORK/$name.client"; then
        ok "$name"
    else
        fail "$name (rc=$crc)"; grep -in 'fail\|error' "$WORK/$name.client" | head -20
        tail -n 25 "$WORK/$name.client"; tail -n 10 "$WORK/$name.server"
    fi
}

if want dtest; then
    run_pair dtest 180 "dtest $P -s $DTEST_ARGS" "dtest $P -h $GUEST_ADDR $DTEST_ARGS" "Test Complete. PASSED"
    run_pair dtest-polling 180 "dtest $P -s -p $DTEST_ARGS" "dtest $P -h $GUEST_ADDR -p $DTEST_ARGS" "Test Complete. PASSED"
    run_pair dtest-cno 180 "dtest $P -s -c $DTEST_ARGS" "dtest $P -h $GUEST_ADDR -c $DTEST_ARGS" "Test Complete. PASSED"
    DAT_OVERRIDE=$WORK/dev.conf run_pair dtest-devport 180 "dtest $P -s $DTEST_ARGS" "dtest $P -h $GUEST_ADDR $DTEST_ARGS" "Test Complete. PASSED"
fi
if want dtestcm; then
    run_pair dtestcm 300 "dtestcm $P -s -c 20" "dtestcm $P -h $GUEST_ADDR -c 20" "ALL 20 CONNECTED"
fi
if want dtestx; then
    # Both sides swap addresses over TCP 15828 first. RC: write with
    # immediate data, compare-and-swap, fetch-and-add. UD (-u, four
    # resolutions each way on one EP): the client needs -c.
    WAIT_FOR=tcp:15828 run_pair dtestx 180 "dtestx $P -s -b 4096" "dtestx $P -h $GUEST_ADDR -b 4096" "immed/atomic test PASSED"
    # -p: after the RC tests each side queries and prints its IA, EP and EVD
    # counters (dtestx does so only when ia_query advertises DAT_COUNTERS).
    # Each side posted one write with immediate data and two fetch-and-adds
    # and received the other's immediate.
    WAIT_FOR=tcp:15828 run_pair dtestx-counters 180 "dtestx $P -s -p -b 4096" "dtestx $P -h $GUEST_ADDR -p -b 4096" "immed/atomic test PASSED"
    for side in server client; do
        f=$WORK/dtestx-counters.$side
        if grep -q "EP\[0\] Cntrs:" "$f" && grep -q "DCNT_EP_POST_WRITE_IMM = 1$" "$f" &&
            grep -q "DCNT_EP_POST_FETCH_ADD = 2$" "$f" && grep -q "DCNT_EP_RECV_RDMA_IMM = 1$" "$f" &&
            ! grep -q "not built with counters" "$f"; then
            ok "dtestx-counters $side printed its counters"
        else
            fail "dtestx-counters $side printed its counters"; grep -i "cntr\|DCNT_EP" "$f" | head -20
        fi
    done
    WAIT_FOR=tcp:15828 run_pair dtestx-ud 180 "dtestx $P -s -u" "dtestx $P -c -u -h $GUEST_ADDR" "UD test PASSED"
    # The remaining options: -v (verbose), -U N (N UD endpoints each side),
    # -m (the server answers every client endpoint from its own endpoint).
    WAIT_FOR=tcp:15828 run_pair dtestx-verbose 180 "dtestx $P -s -v -b 1024" "dtestx $P -v -h $GUEST_ADDR -b 1024" "immed/atomic test PASSED"
    WAIT_FOR=tcp:15828 run_pair dtestx-ud-U3 180 "dtestx $P -s -u -U 3" "dtestx $P -c -u -U 3 -h $GUEST_ADDR" "UD test PASSED"
    WAIT_FOR=tcp:15828 run_pair dtestx-ud-m 180 "dtestx $P -s -u -m -U 3" "dtestx $P -c -u -m -U 3 -h $GUEST_ADDR" "UD test PASSED"
    out=$(timeout 60 dtestx $P -q 2>&1)
    if echo "$out" | grep -q "DAT_IB_UD=TRUE" && echo "$out" | grep -q "DAT_IB_CMP_AND_SWAP=TRUE"; then
        ok "dtestx-query (dat_ib_open_query/close_query)"
    else
        fail "dtestx-query"; echo "$out" | tail -5
    fi
    # The reference provider fails dtestx -u: its EPs' QPs are made with
    # rdma_create_qp on TCP-space cm ids, which cannot hold a UD QP.
    if probe=$(ctest/build/ud_qp_port_space "$GUEST_ADDR" 2>&1); then
        ok "reference UD failure explained: $(echo $probe | tr '\n' ' ')"
    else
        fail "ud_qp_port_space probe: $probe"
    fi
fi
if want dtestsrq; then
    WAIT_FOR=cm:dtestsrq run_pair dtestsrq 180 "dtestsrq $P -s" "dtestsrq $P -h $GUEST_ADDR" "RC SRQ Test Complete"
fi
if want dapltest; then
    dapltest_run dapltest-T -T T -s "$GUEST_ADDR" -D ibv-rxe -i 20 -t 2 -w 2 -V \
        client SR 1024 server SR 1024 client RW 4096 server RR 4096
    dapltest_run dapltest-P -T P -s "$GUEST_ADDR" -D ibv-rxe -i 200 RW 4096 2
    dapltest_run dapltest-L -T L -D ibv-rxe -m 100 -w 2
    dapltest_run dapltest-Q -T Q -s "$GUEST_ADDR" -D ibv-rxe
fi
finish guest-ibv-programs
