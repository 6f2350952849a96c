#!/usr/bin/env bash
# Builds a Debian package from the same layout tools/install.sh installs
# (--prefix /usr, the multiarch libdir), which stands in for DAPL:
#   Provides/Conflicts/Replaces libdapl2 and libdapl-dev, so
#   `apt install ./libdat2-rs_*.deb` swaps them out and dapl2-utils (dtest,
#   dapltest) keeps working on ours. The provider is also installed as
#   libdaplofa.so.2, so dat.conf entries written for DAPL's rdma_cm provider
#   keep working. /etc/dat.conf is not shipped: the postinst writes one from
#   `dat-info --generate` if there is none, else dat.conf.daplibv beside it.
#
#   tools/make-deb.sh [OUTDIR]     (default: target/deb; needs tools/build.sh first)
# Prints the path of the .deb.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
outdir=${1:-$root/target/deb}
name=libdat2-rs
# The DAPL version whose ABI and behaviour this stands in for.
dapl_version=2.1.10
version=$(sed -n 's/^version = "\(.*\)"/\1/p' "$root/Cargo.toml" | head -1)
arch=$(dpkg --print-architecture)
multiarch=$(dpkg-architecture -qDEB_HOST_MULTIARCH 2>/dev/null || gcc -print-multiarch)
libdir=/usr/lib/$multiarch

stage=$(mktemp -d "${TMPDIR:-/tmp}/make-deb.XXXXXX")
trap 'rm -rf "$stage"' EXIT
tree=$stage/tree
mkdir -p "$tree"
DESTDIR=$tree "$root/tools/install.sh" --package --dapl-names --prefix /usr --libdir "$libdir" --sysconfdir /etc >/dev/null

doc=$tree/usr/share/doc/$name
mkdir -p "$doc"
cat >"$doc/copyright" <<COPY
Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/
Upstream-Name: $name
Comment: a DAT 2.0 (uDAPL) registry and verbs provider, binary-compatible with OFED DAPL 2.1

Files: *
License: MIT or Apache-2.0
COPY

# Shared library dependencies, as dpkg-shlibdeps works them out.
mkdir -p "$stage/debian"
printf 'Source: %s\n\nPackage: %s\nArchitecture: any\n' "$name" "$name" >"$stage/debian/control"
depends=$(cd "$stage" && dpkg-shlibdeps -O \
    "tree$libdir/libdat2.so.2.0.0" "tree$libdir/libdaplibv.so.2.0.0" "tree$libdir/libdaplsock.so.2.0.0" tree/usr/bin/dat-info tree/usr/bin/dat-perf 2>/dev/null |
    sed -n 's/^shlibs:Depends=//p')
rm -rf "$stage/debian"

mkdir -p "$tree/DEBIAN"
size=$(du -sk --exclude=DEBIAN "$tree" | cut -f1)
cat >"$tree/DEBIAN/control" <<CTRL
Package: $name
Version: $version
Architecture: $arch
Maintainer: libdat2-rs developers <root@localhost>
Installed-Size: $size
Depends: $depends
Provides: libdapl2 (= $dapl_version), libdapl-dev (= $dapl_version)
Conflicts: libdapl2, libdapl-dev
Replaces: libdapl2, libdapl-dev
Section: libs
Priority: optional
Description: DAT 2.0 (uDAPL) registry and verbs provider, a drop-in for DAPL
 libdat2.so.2 with DAPL 2.1's symbols and headers, and the provider
 libdaplibv.so.2 over rdma-core verbs and rdma_cm (also answering to
 libdaplofa.so.2), and libdaplsock.so.2 over TCP and UDP sockets for
 hosts with no RDMA device. Programs built for DAPL, dtest and dapltest
 included, run on it unchanged. Includes dat-info, to check dat.conf, and dat-perf.
CTRL
# Programs linked against this libdat2 depend on a package that has it.
printf 'libdat2 2 %s (>= %s)\n' "$name" "$version" >"$tree/DEBIAN/shlibs"
printf 'activate-noawait ldconfig\n' >"$tree/DEBIAN/triggers"
cat >"$tree/DEBIAN/postinst" <<'POST'
#!/bin/sh
set -e
if [ "$1" = configure ]; then
    if [ ! -e /etc/dat.conf ]; then
        dat-info --generate >/etc/dat.conf.new || true
        mv /etc/dat.conf.new /etc/dat.conf
        mkdir -p /var/lib/libdat2-rs
        sha256sum /etc/dat.conf | cut -d' ' -f1 >/var/lib/libdat2-rs/dat.conf.sha256
        echo "libdat2-rs: wrote /etc/dat.conf for this host (dat-info --generate)"
    else
        dat-info --generate >/etc/dat.conf.daplibv || true
        echo "libdat2-rs: /etc/dat.conf kept; entries for this host are in /etc/dat.conf.daplibv; 'dat-info' checks /etc/dat.conf"
    fi
fi
POST
cat >"$tree/DEBIAN/postrm" <<'POST'
#!/bin/sh
set -e
if [ "$1" = purge ]; then
    rm -f /etc/dat.conf.daplibv
    # The dat.conf the postinst wrote goes too, unless it was edited since.
    if [ -f /var/lib/libdat2-rs/dat.conf.sha256 ] && [ -f /etc/dat.conf ] &&
        [ "$(sha256sum /etc/dat.conf | cut -d' ' -f1)" = "$(cat /var/lib/libdat2-rs/dat.conf.sha256)" ]; then
        rm -f /etc/dat.conf
    fi
    rm -rf /var/lib/libdat2-rs
fi
POST
chmod 755 "$tree/DEBIAN/postinst" "$tree/DEBIAN/postrm"
chmod 644 "$tree/DEBIAN/control" "$tree/DEBIAN/shlibs" "$tree/DEBIAN/triggers"

mkdir -p "$outdir"
deb=$outdir/${name}_${version}_$arch.deb
dpkg-deb --root-owner-group -Zxz --build "$tree" "$deb" >/dev/null
echo "$deb"
