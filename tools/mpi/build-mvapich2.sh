#!/usr/bin/env bash
# build-mvapich2.sh [TARBALL]: builds MVAPICH2 1.7 with its uDAPL channel
# (ch3:mrail, DAT 2.0) against this tree's include/dat2 and libdat2.so.2,
# hydra as process manager, plus its OSU benchmarks and the MPICH2 test
# directories tools/mpi/run-mpi.sh runs. The result lives in a cache outside
# the clone, keyed by the hash of everything that goes into it, so a second
# run costs nothing. Prints the install prefix on its last line.
#
# Environment: MPI_TARBALL (default ../shared/mpi/mvapich2-1.7.tar.xz),
# MPI_CACHE (default ${XDG_CACHE_HOME:-~/.cache}/dat-mpi).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
tarball=${1:-${MPI_TARBALL:-$root/../shared/mpi/mvapich2-1.7.tar.xz}}
[ -f "$tarball" ] || { echo "build-mvapich2: no tarball at $tarball" >&2; exit 2; }
tarball=$(realpath "$tarball")
cache=${MPI_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/dat-mpi}

# The test directories built (run-mpi.sh says why these).
test_dirs=(init pt2pt coll rma comm datatype)

# What a build depends on: the release, our edits and this script, and the
# DAT headers it compiles against (libdat2.so.2 is only linked: its ABI is
# the headers').
key=$( {
    sha256sum "$tarball" | cut -d' ' -f1
    cat "$here/mvapich2-edits.sh" "$0"
    echo "osu ${OSU_DIV:-} ${OSU_MAX_LOG2:-}"
    cat "$root"/include/dat2/*.h
} | sha256sum | cut -c1-16)
prefix=$cache/mvapich2-1.7-$key
if [ -f "$prefix/.complete" ]; then
    echo "build-mvapich2: cached in $prefix" >&2
    echo "$prefix"
    exit 0
fi

[ -e "$root/target/release/libdat2.so.2" ] || { echo "build-mvapich2: build libdat2.so.2 first (tools/build.sh)" >&2; exit 1; }
# The link step looks for -ldat2; only the versioned name is guaranteed.
libdir=$(mktemp -d "${TMPDIR:-/tmp}/mv2-libdat2.XXXXXX")
ln -s "$root/target/release/libdat2.so.2" "$libdir/libdat2.so"
ln -s "$root/target/release/libdat2.so.2" "$libdir/libdat2.so.2"

work=$(mktemp -d "${TMPDIR:-/tmp}/mv2-build.XXXXXX")
trap 'rm -rf "$work" "$libdir"' EXIT
rm -rf "$prefix"
mkdir -p "$prefix"
log=$prefix/build.log
echo "build-mvapich2: building into $prefix (log: $log)" >&2
tar -C "$work" -xJf "$tarball"
src=$work/mvapich2-1.7
"$here/mvapich2-edits.sh" "$src"

# -fcommon: 2011 code defines globals in headers. The registration cache is
# off because its ptmalloc hooks do not initialise on glibc >= 2.34
# (MPI_Init fails with "Error initializing MVAPICH2 malloc library").
# Fortran, C++, ROMIO and MPE are not needed by the tests and cost build time.
(
    cd "$src"
    ./configure --prefix="$prefix" \
        --with-device=ch3:mrail --with-rdma=udapl --with-dapl-version=2.0 \
        --with-dapl-include="$root/include" --with-dapl-libpath="$libdir" \
        --with-pm=hydra --disable-registration-cache \
        --disable-f77 --disable-fc --disable-cxx --disable-romio --disable-mpe \
        CFLAGS="-O2 -fcommon -w"
    # Serial: the library's archive step races under -j.
    make
    make install
    for d in "${test_dirs[@]}"; do
        make -C test/mpi/util
        make -C "test/mpi/$d"
    done
) >"$log" 2>&1 || { echo "build-mvapich2: failed; last lines of $log:" >&2; tail -n 30 "$log" >&2; exit 1; }

# Keep the built test programs with their testlists, beside the install.
mkdir -p "$prefix/tests"
for d in "${test_dirs[@]}"; do
    (cd "$src/test/mpi" && find "$d" -maxdepth 1 -type f \( -perm -u+x -o -name testlist \) -print0 |
        xargs -0 cp --parents -t "$prefix/tests")
done
# The OSU programs, wherever the release's install put them.
mkdir -p "$prefix/osu"
find "$src/osu_benchmarks" -maxdepth 1 -type f -name 'osu_*' -perm -u+x -exec cp -t "$prefix/osu" {} +
touch "$prefix/.complete"
# Older builds (other keys) are dead weight, ~300 MB each.
find "$cache" -mindepth 1 -maxdepth 1 -name 'mvapich2-1.7-*' ! -path "$prefix" -mmin +${MPI_CACHE_PRUNE_MIN:-60} \
    -exec rm -rf {} + 2>/dev/null || true
echo "$prefix"
