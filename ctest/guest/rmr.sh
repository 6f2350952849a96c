#!/bin/sh
# In the guest: ctest/build/rmr_test, the RMR (memory window) tests of our
# verbs provider libdaplibv.so.2 on rxe0, through our libdat2.so.2. One IA,
# one process per case: EP A connects to the IA's own address and EP B is
# accepted, then A writes and reads through windows B binds.
#   LIBDAT2_DIR  where our libdat2.so.2 and libdaplibv.so.2 are (default: target/release)
#   RMR_TEST     the test binary (default: ctest/build/rmr_test)
#   RT_CASES     only these cases (space-separated; default: all)
#   RT_WINDOW_BOUNDS  enforced|unenforced (default: unenforced on rxe*, see below)
# Build first: cargo build --release -p dat-abi -p dat-registry -p dapl-provider-ibv &&
#   tools/link-libdat2.sh release && ln -sf libdaplibv.so target/release/libdaplibv.so.2 &&
#   make -C ctest all
set -u
. "$(dirname "$0")/lib.sh"
LIBDIR=$(realpath "${LIBDAT2_DIR:-target/release}")
BIN=$(realpath "${RMR_TEST:-ctest/build/rmr_test}")
NETDEV=${RT_NETDEV:-dum0}
ADAPTER=${RT_ADAPTER:-rxe0}

# What the device offers: rxe has memory windows (type 1 and 2B).
if command -v ibv_devinfo >/dev/null; then
    caps=$(ibv_devinfo -v -d "$ADAPTER" 2>/dev/null)
    echo "# $ADAPTER: $(echo "$caps" | grep -E '^[[:space:]]*max_mw:' | tr -s ' \t' ' ')" \
        "caps:$(echo "$caps" | grep -oE 'MEM_WINDOW[A-Z0-9_]*' | sort -u | tr '\n' ' ')"
fi

# The library by soname through LD_LIBRARY_PATH, as a user would.
conf=$WORK/dat.conf
printf 'ibv-netdev u2.0 nonthreadsafe default libdaplibv.so.2 dapl.2.0 "%s 0" ""\n' "$NETDEV" >"$conf"
export DAT_OVERRIDE=$conf
# rxe does not bound an access through a window to the window's range (its
# responder, check_rkey in rxe_resp.c, checks only the underlying MR's), so
# there a write outside the window but inside the LMR gets through; the test
# marks those cases instead of failing them. RT_WINDOW_BOUNDS=enforced overrides.
case $ADAPTER in
    rxe*) export RT_WINDOW_BOUNDS=${RT_WINDOW_BOUNDS:-unenforced} ;;
esac

if [ ! -e "$LIBDIR/libdaplibv.so.2" ]; then
    fail "no $LIBDIR/libdaplibv.so.2 (cargo build --release -p dapl-provider-ibv; ln -sf libdaplibv.so $LIBDIR/libdaplibv.so.2)"
elif [ ! -x "$BIN" ]; then
    fail "no $BIN (make -C ctest all)"
else
    out=$WORK/rmr.out
    # shellcheck disable=SC2086
    # Streamed, so a run cut short by a timeout still shows its cases.
    LD_LIBRARY_PATH=$LIBDIR timeout 900 "$BIN" -i ibv-netdev ${RT_CASES:-} 2>&1 | tee "$out"
    rc=$(tail -n 1 "$out" | grep -q '^ctest-rmr:.* 0 failed' && echo 0 || echo 1)
    if ! grep -q "^ctest-rmr:" "$out"; then
        fail "rmr_test: no summary line (rc=$rc)"
    else
        for name in $(grep '^ok ' "$out" | awk '{print $2}'); do ok "rmr $name"; done
        for name in $(grep '^FAIL ' "$out" | awk '{print $2}'); do fail "rmr $name"; done
    fi
fi
finish guest-rmr
