#!/bin/bash
# In the guest: a site switching to ours by installing it (issue 13).
#  1. tools/install.sh into a DESTDIR (prefix /usr, multiarch libdir): the
#     files, links and sonames are there, the man pages render, and the
#     dat.conf it generated names this host's rxe0/dum0.
#  2. The reference dtest, server and client, runs on the installed tree
#     only: LD_LIBRARY_PATH names the DESTDIR's libdir and nothing else, and
#     the server's memory map shows libdat2.so.2 and the provider loaded
#     from there, nothing from the build tree.
#  3. An existing dat.conf is kept (the host's entries go beside it).
#  4. --uninstall leaves the DESTDIR empty.
#  5. The .deb (tools/make-deb.sh): its Provides/Conflicts/Replaces, and
#     dtest on its unpacked tree through a DAPL-style entry naming
#     libdaplofa.so.2, which the package points at our provider.
# Ends with "guest-install: N passed, M failed".
set -u
. "$(dirname "$0")/lib.sh"
root=$(cd "$(dirname "$0")/../.." && pwd)
multiarch=$(dpkg-architecture -qDEB_HOST_MULTIARCH 2>/dev/null || gcc -print-multiarch)
libdir=/usr/lib/$multiarch
args=(--prefix /usr --libdir "$libdir" --sysconfdir /etc)
# The trees go to the guest's own tmpfs when it has one: writing through 9p
# under TCG is slow. Reading the build tree stays on the share.
fast=$(mktemp -d /dev/shm/dat-install.XXXXXX 2>/dev/null || mktemp -d "$WORK/fast.XXXXXX")
trap 'rm -rf "$fast"' EXIT
export TMPDIR=$fast
stage=$fast/stage

check() { # NAME CMD...: ok when CMD succeeds
    local name=$1; shift
    if "$@"; then ok "$name"; else fail "$name"; fi
}

soname_is() { # FILE SONAME
    [ "$(readelf -d "$1" 2>/dev/null | sed -n 's/.*(SONAME).*\[\(.*\)\]/\1/p')" = "$2" ]
}

man_renders() { # PAGE: man -l formats it without a warning
    local out err
    err=$(LC_ALL=C.UTF-8 MANWIDTH=80 man --warnings -l "$1" 2>&1 >"$WORK/man.out")
    out=$(cat "$WORK/man.out")
    [ -z "$err" ] && echo "$out" | grep -q "^NAME" && [ "$(echo "$out" | wc -l)" -gt 20 ]
}

# dtest_on NAME LIBDIR CONF IA: the reference dtest pair with LIBDIR as the
# only library path; passes when both finish and the server had libdat2
# and the provider mapped from under LIBDIR's tree, nothing from $root.
dtest_on() {
    local name=$1 lib=$2 conf=$3 ia=$4 tree
    tree=$(dirname "$(dirname "$lib")")
    # shellcheck disable=SC2086
    env -u LD_LIBRARY_PATH LD_LIBRARY_PATH="$lib" DAT_OVERRIDE="$conf" \
        stdbuf -oL dtest -P "$ia" -s $DTEST_ARGS >"$WORK/$name.server" 2>&1 &
    local spid=$!
    if ! wait_tcp_listen $spid 15828; then
        fail "$name: server did not start"; tail -n 20 "$WORK/$name.server"
        kill $spid 2>/dev/null; wait $spid 2>/dev/null
        return
    fi
    grep -o '/[^ ]*\.so[^ ]*' "/proc/$spid/maps" | sort -u >"$WORK/$name.maps"
    # shellcheck disable=SC2086
    env -u LD_LIBRARY_PATH LD_LIBRARY_PATH="$lib" DAT_OVERRIDE="$conf" \
        timeout 180 dtest -P "$ia" -h "$GUEST_ADDR" $DTEST_ARGS >"$WORK/$name.client" 2>&1
    local crc=$?
    timeout 60 sh -c "while kill -0 $spid 2>/dev/null; do sleep 0.2; done" || kill $spid 2>/dev/null
    wait $spid
    local src=$?
    if [ $crc -eq 0 ] && [ $src -eq 0 ] && grep -q "PASSED" "$WORK/$name.client"; then
        ok "$name: dtest server and client passed"
    else
        fail "$name: dtest (server rc=$src, client rc=$crc)"
        tail -n 15 "$WORK/$name.server"; tail -n 15 "$WORK/$name.client"
    fi
    local dat prov
    dat=$(grep '/libdat2\.so' "$WORK/$name.maps")
    prov=$(grep -E '/libdap(libv|lofa)\.so' "$WORK/$name.maps")
    if [ -n "$dat" ] && [ -n "$prov" ] && ! grep -v "^$tree/" <<<"$dat
$prov" | grep -q . && ! grep -q "^$root/" "$WORK/$name.maps"; then
        ok "$name: libdat2 and the provider came from $tree only ($(basename "$dat"), $(basename "$prov"))"
    else
        fail "$name: libraries the server mapped"; cat "$WORK/$name.maps"
    fi
}

# ---- 1. install into a DESTDIR
if DESTDIR=$stage "$root/tools/install.sh" "${args[@]}" >"$WORK/install.out" 2>&1; then
    ok "tools/install.sh into DESTDIR"
else
    fail "tools/install.sh into DESTDIR"; cat "$WORK/install.out"
fi
L=$stage$libdir
check "libdat2.so.2.0.0 has soname libdat2.so.2" soname_is "$L/libdat2.so.2.0.0" libdat2.so.2
check "libdat2.so.2 -> libdat2.so.2.0.0" test "$(readlink "$L/libdat2.so.2")" = libdat2.so.2.0.0
check "libdat2.so -> libdat2.so.2 (for -ldat2)" test "$(readlink "$L/libdat2.so")" = libdat2.so.2
check "libdaplibv.so.2.0.0 has soname libdaplibv.so.2" soname_is "$L/libdaplibv.so.2.0.0" libdaplibv.so.2
check "libdaplibv.so.2 -> libdaplibv.so.2.0.0" test "$(readlink "$L/libdaplibv.so.2")" = libdaplibv.so.2.0.0
check "libdaplsock.so.2.0.0 has soname libdaplsock.so.2" soname_is "$L/libdaplsock.so.2.0.0" libdaplsock.so.2
check "libdaplsock.so.2 -> libdaplsock.so.2.0.0" test "$(readlink "$L/libdaplsock.so.2")" = libdaplsock.so.2.0.0
check "libdat2 exports dat_ia_openv@DAT_2.0" sh -c "nm -D --defined-only '$L/libdat2.so.2.0.0' | grep -q ' dat_ia_openv@@DAT_2.0$'"
check "include/dat2: the 11 public headers" test "$(ls "$stage/usr/include/dat2"/*.h | wc -l)" = 11
check "dat-info and dat-perf in bindir" test -x "$stage/usr/bin/dat-info" -a -x "$stage/usr/bin/dat-perf"
for page in man1/dat-info.1 man1/dat-perf.1 man5/daplibv.5 man5/daplsock.5; do
    check "man -l renders $page" man_renders "$stage/usr/share/man/$page"
done
conf=$stage/etc/dat.conf
ia=$(awk '!/^#/ && /"dum0 0"/ { print $1; exit }' "$conf" 2>/dev/null)
check "installed dat.conf (dat-info --generate) has a dum0 entry" test -n "$ia"
check "installed dat.conf has an rxe0 port entry" grep -q '^[^#].*libdaplibv.so.2.*"rxe0 1"' "$conf"
check "the manifest lists every installed file" test "$(grep -c '^[fl] ' "$stage/usr/share/libdat2-rs/manifest")" = \
    "$(find "$stage" \( -type f -o -type l \) ! -name manifest | wc -l)"

# ---- 2. dtest on the installed tree only
[ -n "$ia" ] && dtest_on installed "$L" "$conf" "$ia"

# ---- 3. an existing dat.conf is kept
kept=$fast/kept
mkdir -p "$kept/etc"
echo "# the site's own" >"$kept/etc/dat.conf"
DESTDIR=$kept "$root/tools/install.sh" "${args[@]}" >/dev/null 2>&1
check "existing dat.conf untouched" test "$(cat "$kept/etc/dat.conf")" = "# the site's own"
check "host entries beside it in dat.conf.daplibv" grep -q '"dum0 0"' "$kept/etc/dat.conf.daplibv"
DESTDIR=$kept "$root/tools/install.sh" "${args[@]}" --uninstall >/dev/null 2>&1
check "uninstall keeps the site's dat.conf and removes the rest" \
    test "$(cd "$kept" && find . -mindepth 1 | sort | tr '\n' ' ')" = "./etc ./etc/dat.conf "

# ---- 4. uninstall
if DESTDIR=$stage "$root/tools/install.sh" "${args[@]}" --uninstall >"$WORK/uninstall.out" 2>&1; then
    ok "tools/install.sh --uninstall"
else
    fail "tools/install.sh --uninstall"; cat "$WORK/uninstall.out"
fi
left=$(find "$stage" -mindepth 1)
if [ -z "$left" ]; then ok "uninstall left the DESTDIR empty"; else fail "uninstall left: $left"; fi

# ---- 5. the Debian package
if deb=$("$root/tools/make-deb.sh" "$fast/deb" 2>"$WORK/deb.err"); then
    ok "tools/make-deb.sh built $(basename "$deb")"
    field() { dpkg-deb -f "$deb" "$1"; }
    check "deb Provides libdapl2 and libdapl-dev" sh -c "dpkg-deb -f '$deb' Provides | grep -q 'libdapl2 (= 2.1.10)' && dpkg-deb -f '$deb' Provides | grep -q 'libdapl-dev'"
    check "deb Conflicts/Replaces libdapl2, libdapl-dev" test "$(field Conflicts)|$(field Replaces)" = "libdapl2, libdapl-dev|libdapl2, libdapl-dev"
    check "deb does not ship /etc/dat.conf" sh -c "! dpkg-deb -c '$deb' | grep -q 'etc/dat.conf'"
    dpkg-deb -x "$deb" "$fast/debroot"
    check "deb: libdaplofa.so.2 names our provider" test "$(readlink -f "$fast/debroot$libdir/libdaplofa.so.2")" = \
        "$fast/debroot$libdir/libdaplibv.so.2.0.0"
    # An entry as DAPL's own dat.conf writes it, unchanged.
    write_conf "$WORK/dapl.conf" ofa-v2-dum0 libdaplofa.so.2 "dum0 0"
    dtest_on deb "$fast/debroot$libdir" "$WORK/dapl.conf" ofa-v2-dum0
else
    fail "tools/make-deb.sh"; cat "$WORK/deb.err"
fi

finish guest-install
