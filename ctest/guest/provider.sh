#!/bin/sh
# In the guest: ctest/build/provider_test against our verbs provider
# libdaplibv.so.2 on rxe0, first through our libdat2.so.2 (every case), then
# through the reference registry (/usr/lib/x86_64-linux-gnu/libdat2.so.2,
# the basic cases): our provider drops into their registry too.
#   LIBDAT2_DIR     where our libdat2.so.2 and libdaplibv.so.2 are (default: target/release)
#   PROVIDER_TEST   the test binary (default: ctest/build/provider_test)
#   PT_CASES        only these cases (space-separated; default: all of each mode)
set -u
. "$(dirname "$0")/lib.sh"
LIBDIR=$(realpath "${LIBDAT2_DIR:-target/release}")
BIN=$(realpath "${PROVIDER_TEST:-ctest/build/provider_test}")
REF_LIBDIR=${REF_LIBDIR:-/usr/lib/x86_64-linux-gnu}
PROV=$LIBDIR/libdaplibv.so.2
NETDEV=${PT_NETDEV:-dum0}
ADAPTER=${PT_ADAPTER:-rxe0}

# One dat.conf for both registries. The library is named by absolute path,
# so the reference registry finds it without our directory on LD_LIBRARY_PATH.
conf=$WORK/dat.conf
{
    printf '# provider_test entries, all libdaplibv.so.2\n'
    printf 'ibv-netdev u2.0 nonthreadsafe default %s dapl.2.0 "%s 0" ""\n' "$PROV" "$NETDEV"
    printf 'ibv-devport u2.0 nonthreadsafe default %s dapl.2.0 "%s 1" ""\n' "$PROV" "$ADAPTER"
    printf 'ibv-addr u2.0 nonthreadsafe default %s dapl.2.0 "%s 0" ""\n' "$PROV" "$GUEST_ADDR"
    printf 'ibv-badnet u2.0 nonthreadsafe default %s dapl.2.0 "eth9 0" ""\n' "$PROV"
    printf 'ibv-badport u2.0 nonthreadsafe default %s dapl.2.0 "%s 2" ""\n' "$PROV" "$ADAPTER"
    printf 'ibv-lo u2.0 nonthreadsafe default %s dapl.2.0 "lo 0" ""\n' "$PROV"
} >"$conf"
# The reference's dat_ia_close looks the entry up again under the provider
# table's device_name, which is "daplibv" whatever the IA is called: an IA
# given that name closes cleanly there (see README, "reference registry").
conf_named=$WORK/dat-named.conf
printf 'daplibv u2.0 nonthreadsafe default %s dapl.2.0 "%s 0" ""\n' "$PROV" "$NETDEV" >"$conf_named"
export DAT_OVERRIDE=$conf PT_ADAPTER=$ADAPTER PT_NETDEV=$NETDEV PT_ADDRESS=$GUEST_ADDR

[ -e "$PROV" ] || fail "no $PROV (build: cargo build --release -p dapl-provider-ibv; ln -sf libdaplibv.so $PROV)"
[ -x "$BIN" ] || fail "no $BIN (make -C ctest all)"

# run_test LABEL LD_LIBRARY_PATH [ARGS]: one ok/fail per case line, output kept.
run_test() {
    label=$1 ldpath=$2
    shift 2
    out=$WORK/$label.out
    # shellcheck disable=SC2086
    LD_LIBRARY_PATH=$ldpath timeout 900 "$BIN" "$@" ${PT_CASES:-} >"$out" 2>&1
    rc=$?
    cat "$out"
    if ! grep -q "^ctest-provider" "$out"; then
        fail "$label: no summary line (rc=$rc)"
        return
    fi
    grep '^ok ' "$out" | while read -r _ name; do echo "$name"; done >"$WORK/$label.ok"
    grep '^FAIL ' "$out" | while read -r _ name; do echo "$name"; done >"$WORK/$label.fail"
    while read -r name; do ok "$label $name"; done <"$WORK/$label.ok"
    while read -r name; do fail "$label $name"; done <"$WORK/$label.fail"
}

if [ -e "$PROV" ] && [ -x "$BIN" ]; then
    # The binary must bind to the registry each run means.
    if LD_LIBRARY_PATH=$LIBDIR ldd "$BIN" | grep -q "$LIBDIR/libdat2.so.2"; then
        ok "provider_test binds to our libdat2.so.2"
    else
        fail "provider_test binds to our libdat2.so.2"
    fi
    run_test ours "$LIBDIR"

    if [ -e "$REF_LIBDIR/libdat2.so.2" ]; then
        if LD_LIBRARY_PATH=$REF_LIBDIR ldd "$BIN" | grep -q "$REF_LIBDIR/libdat2.so.2"; then
            ok "provider_test binds to the reference libdat2.so.2"
        else
            fail "provider_test binds to the reference libdat2.so.2"
        fi
        run_test reference "$REF_LIBDIR" -R
        export DAT_OVERRIDE=$conf_named PT_IA=daplibv
        PT_CASES=close_status
        run_test reference-ia-named-daplibv "$REF_LIBDIR" -R
    else
        echo "no reference registry at $REF_LIBDIR; reference run skipped"
    fi
fi
finish guest-provider
