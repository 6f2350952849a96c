#!/bin/bash
# guest-mpi.sh PREFIX RESULTS PLAN: in the Soft-RoCE guest (or, for the
# software provider alone, MPI_PROVIDERS=mpi-sock, on the host), runs MVAPICH2's
# OSU benchmarks and MPICH2 tests (built by build-mvapich2.sh into PREFIX)
# over our libdat2.so.2, once with our provider and once with the reference
# libdaplofa.so.2, each picked by IA name from one dat.conf. PLAN has one run
# a line, "KIND NP NAME [ARGS...]" (KIND osu or test; NAME relative to
# PREFIX/osu or PREFIX/tests; an argument timeout=SECONDS sets that run's
# limit, else MPI_RUN_TIMEOUT; an argument MV2_X=V is set in that run's
# environment and named in its result (NAME[MV2_X=V]); the argument ref
# runs the line on the reference provider too (MPI_REF, default mpi-ref),
# else it runs on ours alone, unless MPI_REF_ALL=1 (run-mpi.sh --full);
# KIND control runs a test with an IA name that
# dat.conf does not have, and passes when MPI_Init fails: proof that the
# runs go through DAT). Appends to RESULTS, one line a run:
#   run PROVIDER KIND NP NAME pass|fail SECONDS RC
# and for OSU figures: fig PROVIDER NP NAME SIZE VALUE
# Run logs go to RESULTS.logs/.
set -u
prefix=$1 results=$2 plan=$3
root=$(cd "$(dirname "$0")/../.." && pwd)
work=$(mktemp -d /tmp/dat-mpi.XXXXXX)
logs=$results.logs
mkdir -p "$logs"

# Both providers under our registry; MV2_DAPL_PROVIDER picks the IA name.
cat >"$work/dat.conf" <<CONF
mpi-ours u2.0 nonthreadsafe default libdaplibv.so.2 dapl.2.0 "dum0 0" ""
mpi-ref u2.0 nonthreadsafe default libdaplofa.so.2 dapl.2.0 "dum0 0" ""
mpi-sock u2.0 nonthreadsafe default libdaplsock.so.2 dapl.2.0 "lo 0" ""
CONF
export DAT_OVERRIDE=$work/dat.conf
export LD_LIBRARY_PATH=$root/target/release
# Every message through DAT: no shared-memory path between local ranks.
export MV2_USE_SHARED_MEM=0
# Hydra's proxies find the launcher over TCP; the guest's only interfaces
# are lo and dum0 (on the host, run-mpi.sh --host, lo keeps it local too).
export HYDRA_IFACE=lo
providers=${MPI_PROVIDERS:-mpi-ours mpi-ref}
# The reference runs the plan's lines marked ref, or every line.
ref=${MPI_REF:-mpi-ref} ref_all=${MPI_REF_ALL:-0}
# The slowest run of the CI plan takes about 45 s; a hung run (the reference
# provider hangs now and then) should not cost CI more than this.
secs=${MPI_RUN_TIMEOUT:-150}

# run_once PROV KIND NP PROG LIMIT TAG ARGS...: one mpiexec; sets verdict, rc, t.
run_once() {
    local prov=$1 kind=$2 np=$3 prog=$4 limit=$5 tag=$6
    shift 6
    # "$@": the program's arguments after the MV2_ settings (env runs both).
    local start end ms
    start=$(date +%s%N)
    # A test's working directory is its own directory, as runtests has it.
    (cd "$(dirname "$prog")" &&
        MV2_DAPL_PROVIDER=$prov timeout -k 5 "$limit" \
            env "${envs[@]}" "$prefix/bin/mpiexec" -bootstrap fork -n "$np" "$prog" "$@") \
        </dev/null >"$logs/$tag.out" 2>&1
    rc=$?
    end=$(date +%s%N)
    ms=$(( (end - start) / 1000000 ))
    t=$((ms / 1000)).$(printf %03d $((ms % 1000)))
    verdict=fail
    case "$kind" in
        # An OSU program passes when it printed a figure for its largest size.
        osu) [ $rc -eq 0 ] && tail -n 1 "$logs/$tag.out" | grep -qE '^[0-9]+[[:space:]]+[0-9.]+' && verdict=pass ;;
        # MPICH tests print " No Errors" from rank 0 when every check held.
        test) [ $rc -eq 0 ] && grep -q '^ *No Errors' "$logs/$tag.out" && verdict=pass ;;
        # Expected: MPI_Init fails, naming the provider it could not open.
        control) [ $rc -ne 0 ] && ! grep -q '^ *No Errors' "$logs/$tag.out" && verdict=pass ;;
    esac
}

# MVAPICH2's eager RDMA path polls the last word of each message and reads
# the header in front of it; under Soft-RoCE in this guest that word is seen
# torn and the header read from the wrong place, on both providers alike, so
# run-mpi.sh turns the path off in the guest (README, "MPI over our stack").
# Should a run still end with that message (MPI_FAST_PATH=1), and only such
# a run, it is tried again, up
# to MPI_TRIES times in all (default 3); the results say so, and a run that
# ends so every time is reported as "stale", neither passed nor failed.
FASTPATH_FLAKE="Control shouldn't reach here in prototype"
max_tries=${MPI_TRIES:-3}

cp "$plan" "$work/plan"   # the plan may be edited while the guest runs
while read -r kind np name rest; do
    case "$kind" in ''|'#'*) continue ;; esac
    limit=$secs args=() envs=() on_ref=$ref_all
    for a in $rest; do
        case "$a" in
            ref) on_ref=1 ;;
            timeout=*) limit=${a#timeout=} ;;
            MV2_*=*) envs+=("$a") ;;
            *) args+=("$a") ;;
        esac
    done
    case "$kind" in
        osu) prog=$prefix/osu/$name ;;
        test|control) prog=$prefix/tests/$name ;;
        *) echo "guest-mpi: bad plan line: $kind" >&2; continue ;;
    esac
    line_providers=$providers
    if [ "$on_ref" != 1 ]; then
        line_providers=
        for p in $providers; do [ "$p" = "$ref" ] || line_providers="$line_providers $p"; done
    fi
    run_providers=$line_providers
    [ "$kind" = control ] && run_providers=mpi-missing
    [ ${#envs[@]} -eq 0 ] || name="$name[$(IFS=,; echo "${envs[*]}")]"
    for prov in $run_providers; do
        tag=$(echo "$prov-$np-$name" | tr '/[]=,' '_____')
        tries=1
        run_once "$prov" "$kind" "$np" "$prog" "$limit" "$tag" "${args[@]}"
        while [ $verdict = fail ] && grep -q "$FASTPATH_FLAKE" "$logs/$tag.out" && [ $tries -lt "$max_tries" ]; do
            echo "mpi-guest: $prov $kind np=$np $name: stale eager-RDMA header, trying again"
            mv "$logs/$tag.out" "$logs/$tag.try$tries.out"
            tries=$((tries + 1))
            run_once "$prov" "$kind" "$np" "$prog" "$limit" "$tag" "${args[@]}"
        done
        # Every try ended so: the environment's fault, not the provider's
        # (it strikes the reference alike); reported apart, not as a pass.
        if [ $verdict = fail ] && grep -q "$FASTPATH_FLAKE" "$logs/$tag.out"; then verdict=stale; fi
        # MPI_HANG_TRIES=2 (run-mpi.sh sets it): a run that timed out is
        # tried once more, and counted ("hang" lines, report.py) and shown
        # with its output's tail. MVAPICH2's on-demand connections hung so
        # until two races of its own were edited out (README, "MPI over our
        # stack"); a hang now is news, and a second one fails the run.
        if [ $verdict = fail ] && [ "$rc" -eq 124 ] && [ "$kind" != control ] && [ "${MPI_HANG_TRIES:-1}" -gt 1 ]; then
            echo "mpi-guest: $prov $kind np=$np $name: timed out after ${t%.*} s; its output's tail, then one more try:"
            tail -n 15 "$logs/$tag.out" | sed 's/^/    | /'
            echo "hang $prov $np $name" >>"$results"
            mv "$logs/$tag.out" "$logs/$tag.hang.out"
            tries=$((tries + 1))
            run_once "$prov" "$kind" "$np" "$prog" "$limit" "$tag" "${args[@]}"
        fi
        if [ "$kind" = control ]; then
            for p in $line_providers; do echo "run $p $kind $np $name $verdict $t $rc $tries" >>"$results"; done
        else
            echo "run $prov $kind $np $name $verdict $t $rc $tries" >>"$results"
        fi
        echo "mpi-guest: $prov $kind np=$np $name: $verdict (${t%.*} s, rc $rc, try $tries)"
        if [ "$kind" = osu ]; then
            awk -v p="$prov" -v n="$np" -v b="$name" \
                '/^[0-9]+[ \t]+[0-9.]+/ { print "fig", p, n, b, $1, $2 }' "$logs/$tag.out" >>"$results"
        fi
        [ $verdict = pass ] || tail -n 15 "$logs/$tag.out" | sed 's/^/    | /'
    done
done <"$work/plan"
rm -rf "$work"
