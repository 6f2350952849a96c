#!/usr/bin/env bash
# Installs the built tree (tools/build.sh) the way a C library installs:
# libdat2.so.2 with its soname and development links, the providers
# libdaplibv.so.2 and libdaplsock.so.2, include/dat2/*.h, dat-info and
# dat-perf, the man pages, and a dat.conf for this host from
# `dat-info --generate` (into
# $sysconfdir/dat.conf if there is none, else beside it as
# dat.conf.daplibv: an existing dat.conf is never touched).
#
# Everything installed is listed in $datadir/libdat2-rs/manifest, and
# --uninstall removes exactly that: the files (a dat.conf only if it is
# still as installed), the links, and the directories the install created.
#
#   tools/install.sh [options]             DESTDIR=/stage tools/install.sh ...
#   tools/install.sh --uninstall [--prefix DIR ...]
#
# Options (GNU-style defaults):
#   --prefix DIR      /usr/local
#   --libdir DIR      PREFIX/lib
#   --bindir DIR      PREFIX/bin
#   --includedir DIR  PREFIX/include
#   --datadir DIR     PREFIX/share         (man pages: DATADIR/man)
#   --sysconfdir DIR  /etc                 (the registry reads /etc/dat.conf)
#   --dapl-names      also name the provider libdaplofa.so.2 (a link), so
#                     dat.conf entries written for DAPL's rdma_cm provider
#                     load ours; only for replacing DAPL, as the .deb does
#   --package         stage for a package (tools/make-deb.sh): strip, gzip
#                     the man pages, no dat.conf and no manifest
#   --uninstall       remove what the manifest lists
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
out=${CARGO_TARGET_DIR:-$root/target}/release

prefix=/usr/local libdir= bindir= includedir= datadir= sysconfdir=/etc
dapl_names=0 package=0 uninstall=0
while [ $# -gt 0 ]; do
    case $1 in
        --prefix|--libdir|--bindir|--includedir|--datadir|--sysconfdir)
            [ $# -ge 2 ] || { echo "install: $1 needs a directory" >&2; exit 2; }
            v=${1#--}; printf -v "$v" '%s' "$2"; shift 2 ;;
        --prefix=*|--libdir=*|--bindir=*|--includedir=*|--datadir=*|--sysconfdir=*)
            v=${1%%=*}; v=${v#--}; printf -v "$v" '%s' "${1#*=}"; shift ;;
        --dapl-names) dapl_names=1; shift ;;
        --package) package=1; shift ;;
        --uninstall) uninstall=1; shift ;;
        -h|--help) sed -n '2,/^set -e/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
        *) echo "install: unknown option $1 (--help)" >&2; exit 2 ;;
    esac
done
for d in prefix sysconfdir; do
    case ${!d} in /*) ;; *) echo "install: --$d must be absolute" >&2; exit 2 ;; esac
done
libdir=${libdir:-$prefix/lib}
bindir=${bindir:-$prefix/bin}
includedir=${includedir:-$prefix/include}
datadir=${datadir:-$prefix/share}
mandir=$datadir/man
dest=${DESTDIR:-}
manifest=$datadir/libdat2-rs/manifest

# After a real install or uninstall into the system, refresh the linker cache.
refresh_ld_cache() {
    if [ -z "$dest" ] && [ "$(id -u)" = 0 ] && command -v ldconfig >/dev/null; then
        ldconfig
    fi
}

# Removes what manifest $1 lists. Lines: "f SHA256 PATH", "l TARGET PATH",
# "d - PATH" (paths without DESTDIR, in install order).
remove_listed() {
    local list=$1 kind sum path kept=0
    local dirs=()
    while read -r kind sum path; do
        case $kind in
            f)
                [ -e "$dest$path" ] || continue
                if [ "$(sha256sum <"$dest$path" | cut -d' ' -f1)" = "$sum" ]; then
                    rm -f "$dest$path"
                else
                    echo "install: keeping $dest$path: changed since it was installed"
                    kept=1
                fi ;;
            l)
                if [ -L "$dest$path" ] && [ "$(readlink "$dest$path")" = "$sum" ]; then
                    rm -f "$dest$path"
                fi ;;
            d) dirs+=("$path") ;;
        esac
    done <"$list"
    # Created directories, deepest first, once they are empty.
    local i
    for ((i = ${#dirs[@]} - 1; i >= 0; i--)); do
        rmdir "$dest${dirs[i]}" 2>/dev/null || true
    done
    return $kept
}

if [ "$uninstall" = 1 ]; then
    [ -f "$dest$manifest" ] || { echo "install: no manifest at $dest$manifest; nothing installed there?" >&2; exit 1; }
    list=$(mktemp)
    trap 'rm -f "$list"' EXIT
    cp "$dest$manifest" "$list"
    # The manifest goes first, so the directory holding it can go at the end.
    rm -f "$dest$manifest"
    rc=0
    remove_listed "$list" || rc=$?
    refresh_ld_cache
    echo "install: removed what $dest$manifest listed"
    exit $rc
fi

for f in libdat2.so.2.0.0 libdaplibv.so libdaplsock.so dat-info dat-perf; do
    [ -e "$out/$f" ] || { echo "install: $out/$f missing; run tools/build.sh first" >&2; exit 1; }
done

# A reinstall first takes away what the last one put there.
if [ "$package" = 0 ] && [ -f "$dest$manifest" ]; then
    prev=$(mktemp)
    cp "$dest$manifest" "$prev"
    rm -f "$dest$manifest"
    remove_listed "$prev" || true
    rm -f "$prev"
fi

entries=()
# A DESTDIR is the staging root: made if missing, never listed.
[ -z "$dest" ] || mkdir -p "$dest"
# mkdirs DIR: creates DIR and its missing parents, noting each one made.
mkdirs() {
    local d=$1 missing=()
    while [ "$d" != / ] && [ ! -d "$dest$d" ]; do
        missing=("$d" "${missing[@]}")
        d=$(dirname "$d")
    done
    for d in "${missing[@]}"; do
        mkdir "$dest$d"
        entries+=("d - $d")
    done
}
# put MODE SRC PATH: installs a file (stripped when packaging binaries).
put() {
    local mode=$1 src=$2 path=$3
    mkdirs "$(dirname "$path")"
    install -m "$mode" "$src" "$dest$path"
    if [ "$package" = 1 ] && [ "$mode" = 755 ]; then
        strip --strip-unneeded "$dest$path"
    fi
    entries+=("f $(sha256sum <"$dest$path" | cut -d' ' -f1) $path")
}
# link TARGET PATH
link() {
    mkdirs "$(dirname "$2")"
    ln -sfn "$1" "$dest$2"
    entries+=("l $1 $2")
}

put 755 "$out/libdat2.so.2.0.0" "$libdir/libdat2.so.2.0.0"
link libdat2.so.2.0.0 "$libdir/libdat2.so.2"
link libdat2.so.2 "$libdir/libdat2.so"
# Cargo names the provider libdaplibv.so; its soname is libdaplibv.so.2.
put 755 "$out/libdaplibv.so" "$libdir/libdaplibv.so.2.0.0"
link libdaplibv.so.2.0.0 "$libdir/libdaplibv.so.2"
# The sock provider (TCP/UDP, no RDMA device; docs/sock.md), likewise.
put 755 "$out/libdaplsock.so" "$libdir/libdaplsock.so.2.0.0"
link libdaplsock.so.2.0.0 "$libdir/libdaplsock.so.2"
if [ "$dapl_names" = 1 ]; then
    # dat.conf names libraries by file; our provider reads DAPL's rdma_cm
    # ia_params ("<netdev> 0", "<address> 0") and speaks its wire format.
    link libdaplibv.so.2 "$libdir/libdaplofa.so.2"
fi
for h in "$root"/include/dat2/*.h; do
    put 644 "$h" "$includedir/dat2/$(basename "$h")"
done
put 755 "$out/dat-info" "$bindir/dat-info"
put 755 "$out/dat-perf" "$bindir/dat-perf"
for page in "$root"/man/*.[1-8]; do
    name=$(basename "$page")
    section=${name##*.}
    if [ "$package" = 1 ]; then
        gz=$(mktemp)
        gzip -9n <"$page" >"$gz"
        put 644 "$gz" "$mandir/man$section/$name.gz"
        rm -f "$gz"
    else
        put 644 "$page" "$mandir/man$section/$name"
    fi
done

if [ "$package" = 0 ]; then
    gen=$(mktemp)
    # Exit status 1 only says nothing RDMA-capable was found; the comments
    # it prints say so, and the file is still the right start.
    "$out/dat-info" --generate >"$gen" || true
    if [ -e "$dest$sysconfdir/dat.conf" ]; then
        put 644 "$gen" "$sysconfdir/dat.conf.daplibv"
        echo "install: $dest$sysconfdir/dat.conf exists and is kept; entries for this host are in $dest$sysconfdir/dat.conf.daplibv"
    else
        put 644 "$gen" "$sysconfdir/dat.conf"
    fi
    rm -f "$gen"
    mkdirs "$(dirname "$manifest")"
    printf '%s\n' "${entries[@]}" >"$dest$manifest"
fi
refresh_ld_cache
echo "install: installed into ${dest:-/} (prefix $prefix, libdir $libdir)"
