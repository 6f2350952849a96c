#!/usr/bin/env bash
# run-mpi.sh [--host] [PLAN | --full]: MVAPICH2 1.7's uDAPL channel over our
# libdat2.so.2 in the Soft-RoCE guest. Builds MVAPICH2 (cached,
# build-mvapich2.sh), runs the OSU benchmarks and MPICH2 tests of PLAN
# (default tools/mpi/plan-ci.txt; --full: every test, gen-plan.py)
# with our provider, and the plan's lines marked ref also with the
# reference libdaplofa.so.2, in one boot, and prints the side-by-side table
# and "mpi: N passed, M failed, K skipped". MPI_REF_ALL=1 runs every line on
# the reference too; --full does so unless MPI_REF_ALL=0 (then its plan,
# which marks no line, runs on ours alone).
# Without the tarball (../shared/mpi/) it says so and passes: the MPI part
# is optional outside CI. MPI_KEEP=DIR keeps the results and logs there.
# --host: the same plan on this host, no guest, over the software provider
# libdaplsock.so.2 (IA mpi-sock, "lo 0") alone: there is no reference
# provider that runs without RDMA to set beside it.
set -uo pipefail
host=0
if [ "${1:-}" = --host ]; then host=1; shift; fi
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
tarball=${MPI_TARBALL:-$root/../shared/mpi/mvapich2-1.7.tar.xz}
plan_arg=${1:-$here/plan-ci.txt}
if [ ! -f "$tarball" ]; then
    echo "mpi: no MVAPICH2 tarball at $tarball; MPI runs skipped"
    exit 0
fi
prefix=$("$here/build-mvapich2.sh" "$tarball" | tail -n 1) || { echo "mpi: 0 passed, 1 failed (build)"; exit 1; }
out=${MPI_KEEP:-$(mktemp -d "${TMPDIR:-/tmp}/dat-mpi-run.XXXXXX")}
mkdir -p "$out"
if [ "$plan_arg" = --full ]; then
    python3 "$here/gen-plan.py" "$prefix" >"$out/plan"
    plan=$out/plan
    export MPI_REF_ALL=${MPI_REF_ALL:-1}
else
    plan=$(realpath "$plan_arg")
    export MPI_REF_ALL=${MPI_REF_ALL:-0}
fi
: >"$out/results"
# A run that times out is tried once more, and the table counts and shows
# it; a second timeout fails the run (guest-mpi.sh, README).
export MPI_HANG_TRIES=${MPI_HANG_TRIES:-2}
if [ $host = 1 ]; then
    export MPI_PROVIDERS=mpi-sock MPI_OURS=mpi-sock MPI_REF=none
    export MPI_RUN_TIMEOUT=${MPI_RUN_TIMEOUT:-150}
    # The whole plan, 4-rank runs too: four ranks spinning on two cores
    # each give their CPU away after polling in vain for a moment
    # (DAPL_SOCK_YIELD_US, daplsock(5)), so osu_bcast takes about a second
    # where it took 28 s and rma/putfence1 2 s where it took 21-32 s.
    "$here/guest-mpi.sh" "$prefix" "$out/results" "$plan"
    grc=$?
else
    # MVAPICH2's eager-RDMA fast path is off in the guest, for both
    # providers: its receiver spins on the last word of a slot and reads the
    # message in front of it once that word is non-zero, and rxe under TCG
    # copies a write into memory one byte at a time, so that word is seen
    # torn (a 320-byte length read as 64) and the receiver takes a wrong
    # header: the run hangs or aborts ("Control shouldn't reach here"). The
    # conformance probe write_tail_whole measures it in the same guest, on
    # the reference as on ours (README, "MPI over our stack"). MPI_FAST_PATH=1
    # keeps it on. On the host (--host) the software provider places a
    # write's last word last and whole, and the fast path stays on.
    # (run-in-guest.sh runs on the host itself when it has an RDMA device:
    # there the fast path stays on.)
    if [ "${MPI_FAST_PATH:-0}" != 1 ] && { [ "${RXE_VM_FORCE:-0}" = 1 ] || ! compgen -G '/sys/class/infiniband/*' >/dev/null; }; then
        export MV2_USE_RDMA_FAST_PATH=0
        echo "mpi: eager-RDMA fast path off in the guest (MV2_USE_RDMA_FAST_PATH=0; MPI_FAST_PATH=1 keeps it)"
    fi
    # The runs made: each line once on ours, and once more on the reference
    # when it is marked ref or MPI_REF_ALL=1 (a control line runs once for
    # both, guest-mpi.sh). They take about 20 s each under TCG; allow for
    # twice that.
    runs=$(awk -v all="$MPI_REF_ALL" '
        $0 !~ /^[[:space:]]*(#|$)/ {
            n++
            if ($1 != "control") {
                r = (all == 1)
                for (i = 4; i <= NF; i++) if ($i == "ref") r = 1
                n += r
            }
        }
        END { print n + 0 }' "$plan")
    echo "mpi: $runs runs planned in the guest (MPI_REF_ALL=$MPI_REF_ALL)"
    export RXE_VM_TIMEOUT=${RXE_VM_TIMEOUT:-$((300 + runs * 40))}
    "$root/tools/rxe-vm/run-in-guest.sh" "$here/guest-mpi.sh" "$prefix" "$out/results" "$plan"
    grc=$?
fi
python3 "$here/report.py" "$out/results" "$plan" "$here/known-failures.txt" | tee "$out/table.md"
rc=${PIPESTATUS[0]}
[ -n "${MPI_KEEP:-}" ] || rm -rf "$out"
[ "$grc" -eq 0 ] || { echo "mpi: guest exited $grc"; exit 1; }
exit "$rc"
