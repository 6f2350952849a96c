#!/bin/sh
# In the guest: interoperability of our verbs provider libdaplibv.so.2
# (issue 3, must-shows 2 and 3).
#  (2) the reference registry (/usr/lib/x86_64-linux-gnu/libdat2.so.2) loads
#      our provider: the reference dtest, server and client, passes on it.
#  (3) on the wire: one side on our registry + our provider, the other on
#      the reference registry + the reference provider libdaplofa.so.2, both
#      ways round: dtest, dtest -p, dtestcm -c 10, dapltest -T T -V; and a
#      small probe built here for what those do not exercise: request, accept
#      and reject private data, and a conn_qual above 0xffff.
#   LIBDAT2_DIR  where our libdat2.so.2 and libdaplibv.so.2 are (default: target/release)
#   REF_LIBDIR   the reference libraries (default: /usr/lib/x86_64-linux-gnu)
#   INTEROP_KEEP a directory to copy all program outputs to
#   CASES        space-separated subset of: ms2 dtest dtest-p dtestcm dapltest pdata (default: all)
set -u
. "$(dirname "$0")/lib.sh"
LIBDIR=$(realpath "${LIBDAT2_DIR:-target/release}")
REF_LIBDIR=${REF_LIBDIR:-/usr/lib/x86_64-linux-gnu}
PROV=$LIBDIR/libdaplibv.so.2
want() { [ -z "${CASES:-}" ] || echo " $CASES " | grep -q " $1 "; }

# One dat.conf for both registries; our provider is named by absolute path so
# the reference registry finds it without our directory on LD_LIBRARY_PATH.
conf=$WORK/dat.conf
{
    printf 'ibv-rxe u2.0 nonthreadsafe default %s dapl.2.0 "dum0 0" ""\n' "$PROV"
    printf 'ofa-v2-rxe u2.0 nonthreadsafe default libdaplofa.so.2 dapl.2.0 "dum0 0" ""\n'
} >"$conf"
export DAT_OVERRIDE=$conf
unset LD_LIBRARY_PATH
# run_pair's default listener wait, set explicitly (set -u: lib.sh expands it).
WAIT_FOR=${WAIT_FOR:-tcp:15828}
# Each side's environment: ours (our registry first on the search path) or
# the reference (no LD_LIBRARY_PATH: the system libdat2.so.2).
OURS="env LD_LIBRARY_PATH=$LIBDIR"
REF="env -u LD_LIBRARY_PATH"
# ia_of/env_of SIDE: the IA name and the env prefix for side ours or ref.
ia_of() { case $1 in ours) echo ibv-rxe ;; ref) echo ofa-v2-rxe ;; esac; }
env_of() { case $1 in ours) echo "$OURS" ;; ref) echo "$REF" ;; esac; }

[ -e "$PROV" ] || fail "no $PROV (cargo build --release -p dapl-provider-ibv; ln -sf libdaplibv.so $PROV)"

# The programs bind to the registry each side means.
binds() { # LABEL LDPATH EXPECTED-LIBDAT2 (compared after realpath: /lib is /usr/lib)
    local got
    got=$(env ${2:+LD_LIBRARY_PATH=$2} ldd "$(command -v dtest)" | awk '$1 == "libdat2.so.2" { print $3 }')
    if [ -n "$got" ] && [ "$(realpath "$got")" = "$(realpath "$3")" ]; then
        ok "$1 ($got)"
    else
        fail "$1 (got ${got:-none})"
    fi
}
binds "dtest binds to the reference libdat2.so.2 without LD_LIBRARY_PATH" "" "$REF_LIBDIR/libdat2.so.2"
binds "dtest binds to our libdat2.so.2 with LD_LIBRARY_PATH=$LIBDIR" "$LIBDIR" "$LIBDIR/libdat2.so.2"

# --- must-show 2: reference registry + our provider, both ends.
if want ms2; then
    # LD_DEBUG=files proves at run time who loaded whom.
    lddbg="LD_DEBUG=files LD_DEBUG_OUTPUT=$WORK/ms2.ld"
    run_pair refreg+ours-dtest 180 \
        "$REF $lddbg dtest -P ibv-rxe -s $DTEST_ARGS" \
        "$REF $lddbg dtest -P ibv-rxe -h $GUEST_ADDR $DTEST_ARGS" "Test Complete. PASSED"
    n=0 want_reg=$(realpath "$REF_LIBDIR/libdat2.so.2")
    for f in "$WORK"/ms2.ld.*; do
        by=$(sed -n "s|.*file=$PROV .*dynamically loaded by \([^ ]*\) .*|\1|p" "$f" 2>/dev/null | head -n 1)
        [ -n "$by" ] && [ "$(realpath "$by")" = "$want_reg" ] && n=$((n + 1))
    done
    if [ "$n" -ge 2 ]; then
        ok "refreg+ours-dtest: both dtests loaded $PROV from $REF_LIBDIR/libdat2.so.2"
    else
        fail "refreg+ours-dtest: $PROV loaded by the reference registry in $n of 2 processes"
        grep -h "libdat2\|libdapl" "$WORK"/ms2.ld.* 2>/dev/null | head
    fi
    run_pair refreg+ours-dtest-p 180 \
        "$REF dtest -P ibv-rxe -s -p $DTEST_ARGS" \
        "$REF dtest -P ibv-rxe -h $GUEST_ADDR -p $DTEST_ARGS" "Test Complete. PASSED"
fi

# --- must-show 3: wire interop, server on one stack, client on the other.
# each_way FUNC: FUNC ours ref; FUNC ref ours
each_way() { "$1" ours ref; "$1" ref ours; }

w_dtest() { # SERVER-SIDE CLIENT-SIDE [EXTRA]
    local s=$1 c=$2 x=${3:-}
    run_pair "wire-$s-server-$c-client-dtest${x:+$x}" 180 \
        "$(env_of "$s") dtest -P $(ia_of "$s") -s $x $DTEST_ARGS" \
        "$(env_of "$c") dtest -P $(ia_of "$c") -h $GUEST_ADDR $x $DTEST_ARGS" \
        "DAPL Test Complete. PASSED"
}
w_dtest_p() { w_dtest "$1" "$2" -p; }
w_dtestcm() {
    local s=$1 c=$2
    run_pair "wire-$s-server-$c-client-dtestcm-c10" 300 \
        "$(env_of "$s") dtestcm -P $(ia_of "$s") -s -c 10" \
        "$(env_of "$c") dtestcm -P $(ia_of "$c") -h $GUEST_ADDR -c 10" \
        "ALL 10 CONNECTED"
}
# dapltest: server until -T Q (sent from the client's side), transaction
# test with data validation in between.
w_dapltest() {
    local s=$1 c=$2 name="wire-$1-server-$2-client-dapltest-TT-V"
    local f="$WORK/$name"
    # shellcheck disable=SC2046
    $(env_of "$s") dapltest -T S -D $(ia_of "$s") >"$f.server" 2>&1 &
    local spid=$!
    wait_cm_listen $spid dapltest
    # shellcheck disable=SC2046
    timeout 300 $(env_of "$c") dapltest -T T -s "$GUEST_ADDR" -D $(ia_of "$c") -i 20 -t 2 -w 2 -V \
        client SR 1024 server SR 1024 client RW 4096 server RR 4096 >"$f.client" 2>&1
    local crc=$?
    # shellcheck disable=SC2046
    timeout 60 $(env_of "$c") dapltest -T Q -s "$GUEST_ADDR" -D $(ia_of "$c") >"$f.quit" 2>&1
    local qrc=$?
    local i=0
    while kill -0 $spid 2>/dev/null && [ $i -lt 150 ]; do sleep 0.2; i=$((i + 1)); done
    kill -0 $spid 2>/dev/null && { kill $spid; qrc="$qrc, server killed"; }
    wait $spid 2>/dev/null
    if [ $crc -eq 0 ] && grep -q 'End of Work' "$f.client" && ! grep -qi 'fail\|error' "$f.client"; then
        ok "$name"
    else
        fail "$name (rc=$crc)"; grep -in 'fail\|error' "$f.client" | head -20
        echo "---- client"; tail -n 25 "$f.client"; echo "---- server"; tail -n 15 "$f.server"
    fi
    echo "     (dapltest -T Q from the $c side: rc=$qrc)"
}

want dtest && each_way w_dtest
want dtest-p && each_way w_dtest_p
want dtestcm && each_way w_dtestcm
want dapltest && each_way w_dapltest
# --- private data and connection qualifiers on the wire, both ways round:
# a small DAT program (built here against include/dat2, bound at run time
# to whichever libdat2.so.2 the side's LD_LIBRARY_PATH picks) connects with
# request private data; the server checks it, then accepts or rejects with
# its own, which the client checks. A conn_qual above 0xffff checks that
# both providers map it to the same rdma_cm port.
build_pdx() {
    cat >"$WORK/pdx.c" <<'PDX_EOF'
/* pdx: connection private data and conn_qual across providers.
 *   pdx -s IA QUAL accept|reject        server: one CR, check its pdata, accept/reject with pdata
 *   pdx -c IA ADDR QUAL accept|reject   client: connect with pdata, check the answer */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>
#include <dat2/udat.h>

static const char REQ[] = "pdx-request-0123456789";
static const char ACC[] = "pdx-accept-abcdefghij";
static const char REJ[] = "pdx-reject-ABCDEFGHIJ";
#define CHECK(x) do { DAT_RETURN r_ = (x); if (r_ != DAT_SUCCESS) { const char *a_ = "", *b_ = ""; \
    dat_strerror(r_, &a_, &b_); printf("pdx: %s: %s %s (0x%x)\n", #x, a_, b_, r_); return 2; } } while (0)

static void hexdump(const char *what, const void *p, int n) {
    const unsigned char *c = p; int i;
    printf("pdx: %s (%d bytes):", what, n);
    for (i = 0; i < n && i < 32; i++) printf(" %02x", c[i]);
    printf("  \"");
    for (i = 0; i < n && i < 32; i++) putchar(c[i] >= 32 && c[i] < 127 ? c[i] : '.');
    printf("\"\n");
}
static int has(const void *p, int n, const char *want) {
    return p && n >= (int)strlen(want) && !memcmp(p, want, strlen(want));
}
static const char *evname(DAT_EVENT_NUMBER e) {
    switch (e) {
    case DAT_CONNECTION_EVENT_ESTABLISHED: return "ESTABLISHED";
    case DAT_CONNECTION_EVENT_PEER_REJECTED: return "PEER_REJECTED";
    case DAT_CONNECTION_EVENT_NON_PEER_REJECTED: return "NON_PEER_REJECTED";
    case DAT_CONNECTION_EVENT_ACCEPT_COMPLETION_ERROR: return "ACCEPT_COMPLETION_ERROR";
    case DAT_CONNECTION_EVENT_DISCONNECTED: return "DISCONNECTED";
    case DAT_CONNECTION_EVENT_BROKEN: return "BROKEN";
    case DAT_CONNECTION_EVENT_TIMED_OUT: return "TIMED_OUT";
    case DAT_CONNECTION_EVENT_UNREACHABLE: return "UNREACHABLE";
    case DAT_CONNECTION_REQUEST_EVENT: return "CONNECTION_REQUEST";
    default: return "other";
    }
}

static void show_ep(DAT_EP_HANDLE ep) {
    DAT_EP_PARAM p; struct sockaddr_in *l, *r;
    if (dat_ep_query(ep, DAT_EP_FIELD_ALL, &p) != DAT_SUCCESS) { printf("pdx: dat_ep_query failed\n"); return; }
    l = (struct sockaddr_in *)p.local_ia_address_ptr; r = (struct sockaddr_in *)p.remote_ia_address_ptr;
    printf("pdx: ep_query local_port_qual 0x%llx (addr port %u) remote_port_qual 0x%llx (addr port %u)\n",
           (unsigned long long)p.local_port_qual, l ? ntohs(l->sin_port) : 0,
           (unsigned long long)p.remote_port_qual, r ? ntohs(r->sin_port) : 0);
}

int main(int argc, char **argv) {
    DAT_IA_HANDLE ia; DAT_EVD_HANDLE aevd = DAT_HANDLE_NULL, dto, conn, cr_evd;
    DAT_PZ_HANDLE pz; DAT_EP_HANDLE ep; DAT_EVENT ev; DAT_COUNT nmore;
    int server, reject, bad = 0;
    if (argc < 5) return 2;
    server = !strcmp(argv[1], "-s");
    reject = !strcmp(argv[argc - 1], "reject");
    DAT_CONN_QUAL qual = strtoull(argv[server ? 3 : 4], NULL, 0);
    setvbuf(stdout, NULL, _IONBF, 0);
    CHECK(dat_ia_open(argv[2], 8, &aevd, &ia));
    CHECK(dat_pz_create(ia, &pz));
    CHECK(dat_evd_create(ia, 8, DAT_HANDLE_NULL, DAT_EVD_DTO_FLAG, &dto));
    CHECK(dat_evd_create(ia, 8, DAT_HANDLE_NULL, DAT_EVD_CONNECTION_FLAG, &conn));
    CHECK(dat_ep_create(ia, pz, dto, dto, conn, NULL, &ep));
    if (server) {
        DAT_PSP_HANDLE psp; DAT_CR_PARAM crp; DAT_CR_HANDLE cr;
        CHECK(dat_evd_create(ia, 8, DAT_HANDLE_NULL, DAT_EVD_CR_FLAG, &cr_evd));
        CHECK(dat_psp_create(ia, qual, cr_evd, DAT_PSP_CONSUMER_FLAG, &psp));
        printf("pdx: listening on conn_qual 0x%llx\n", (unsigned long long)qual);
        CHECK(dat_evd_wait(cr_evd, 60000000, 1, &ev, &nmore));
        if (ev.event_number != DAT_CONNECTION_REQUEST_EVENT) { printf("pdx: event 0x%x\n", ev.event_number); return 1; }
        cr = ev.event_data.cr_arrival_event_data.cr_handle;
        printf("pdx: CR arrival conn_qual 0x%llx\n", (unsigned long long)ev.event_data.cr_arrival_event_data.conn_qual);
        CHECK(dat_cr_query(cr, DAT_CSP_FIELD_ALL, &crp));
        hexdump("request private data", crp.private_data, crp.private_data_size);
        if (!has(crp.private_data, crp.private_data_size, REQ)) { printf("pdx: BAD request private data\n"); bad = 1; }
        if (reject) {
            CHECK(dat_cr_reject(cr, sizeof REJ, (DAT_PVOID)REJ));
            printf("pdx: rejected\n");
            return bad;
        }
        CHECK(dat_cr_accept(cr, ep, sizeof ACC, (DAT_PVOID)ACC));
        CHECK(dat_evd_wait(conn, 60000000, 1, &ev, &nmore));
        printf("pdx: server event %s\n", evname(ev.event_number));
        if (ev.event_number != DAT_CONNECTION_EVENT_ESTABLISHED) return 1;
        show_ep(ep);
        CHECK(dat_evd_wait(conn, 60000000, 1, &ev, &nmore));
        printf("pdx: server event %s\n", evname(ev.event_number));
        if (ev.event_number != DAT_CONNECTION_EVENT_DISCONNECTED) bad = 1;
    } else {
        struct sockaddr_in sin; DAT_CONNECTION_EVENT_DATA *cd = &ev.event_data.connect_event_data;
        memset(&sin, 0, sizeof sin);
        sin.sin_family = AF_INET;
        inet_pton(AF_INET, argv[3], &sin.sin_addr);
        CHECK(dat_ep_connect(ep, (DAT_IA_ADDRESS_PTR)&sin, qual, 20000000, sizeof REQ, (DAT_PVOID)REQ,
                             DAT_QOS_BEST_EFFORT, DAT_CONNECT_DEFAULT_FLAG));
        CHECK(dat_evd_wait(conn, 60000000, 1, &ev, &nmore));
        printf("pdx: client event %s\n", evname(ev.event_number));
        hexdump("event private data", cd->private_data, cd->private_data_size);
        if (reject) {
            if (ev.event_number != DAT_CONNECTION_EVENT_PEER_REJECTED) bad = 1;
            if (!has(cd->private_data, cd->private_data_size, REJ)) { printf("pdx: BAD reject private data\n"); bad = 1; }
            return bad;
        }
        if (ev.event_number != DAT_CONNECTION_EVENT_ESTABLISHED) return 1;
        show_ep(ep);
        if (!has(cd->private_data, cd->private_data_size, ACC)) { printf("pdx: BAD accept private data\n"); bad = 1; }
        CHECK(dat_ep_disconnect(ep, DAT_CLOSE_GRACEFUL_FLAG));
        CHECK(dat_evd_wait(conn, 60000000, 1, &ev, &nmore));
        printf("pdx: client event %s\n", evname(ev.event_number));
        if (ev.event_number != DAT_CONNECTION_EVENT_DISCONNECTED) bad = 1;
    }
    printf("pdx: %s\n", bad ? "FAILED" : "PASSED");
    return bad;
}
PDX_EOF
    cc -O -I "$TOP/include" -o "$WORK/pdx" "$WORK/pdx.c" -L "$LIBDIR" -ldat2
}
w_pdx() { # SERVER-SIDE CLIENT-SIDE QUAL accept|reject
    local s=$1 c=$2 q=$3 m=$4 name="wire-$1-server-$2-client-pdata-$4-qual$3"
    local f="$WORK/$name"
    # shellcheck disable=SC2046
    timeout 90 $(env_of "$s") "$WORK/pdx" -s $(ia_of "$s") "$q" "$m" >"$f.server" 2>&1 &
    local spid=$!
    wait_cm_listen $spid pdx
    # shellcheck disable=SC2046
    timeout 90 $(env_of "$c") "$WORK/pdx" -c $(ia_of "$c") "$GUEST_ADDR" "$q" "$m" >"$f.client" 2>&1
    local crc=$?
    local i=0
    while kill -0 $spid 2>/dev/null && [ $i -lt 50 ]; do sleep 0.2; i=$((i + 1)); done
    kill $spid 2>/dev/null
    wait $spid
    local src=$?
    if [ $crc -eq 0 ] && [ $src -eq 0 ]; then
        ok "$name"
    else
        fail "$name (server rc=$src, client rc=$crc)"
        echo "---- server"; cat "$f.server"; echo "---- client"; cat "$f.client"
    fi
}
if want pdata; then
    TOP=$(realpath "$(dirname "$0")/../..")
    if build_pdx; then
        for args in "0x4321 accept" "0x4321 reject" "0x12345 accept"; do
            # shellcheck disable=SC2086
            { w_pdx ours ref $args; w_pdx ref ours $args; }
        done
        # the same checks within one stack, to tell wire problems from others
        for args in "0x4321 reject" "0x12345 accept"; do
            # shellcheck disable=SC2086
            { w_pdx ref ref $args; w_pdx ours ours $args; }
        done
    else
        fail "building the private-data probe"
    fi
fi
# INTEROP_KEEP=DIR: keep every program's output there (finish removes $WORK).
[ -n "${INTEROP_KEEP:-}" ] && mkdir -p "$INTEROP_KEEP" && cp -r "$WORK"/. "$INTEROP_KEEP"/
finish guest-interop
