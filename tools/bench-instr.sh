#!/bin/bash
# Deterministic instruction counts (issue 14): user-space instructions per
# call, from callgrind, for native verbs, our stack and the reference stack
# (DAPL's libdat2.so.2 + libdaplofa.so.2), all in one boot of the Soft-RoCE
# guest, measured twice; prints one markdown table with the targets.
#
#   tools/bench-instr.sh            # needs tools/build.sh first
#
# Method. tools/instr/instr-verbs.c and instr-dat.c run the same phases in
# one process over two RC endpoints connected to each other: N post_recv,
# N post_send, N dequeues that find a completion, N waits on a completion
# already there, N dequeues of an empty EVD, N RDMA writes, N RDMA reads,
# then LMR_N create+free at each size, then CM_N connect cycles (make both
# QPs/EPs, connect, accept, established on both sides, disconnect on both
# sides, destroy/free). callgrind --dump-after=phase_done writes one dump per
# phase, counting the whole process, all threads (the providers do part of
# connection set-up in their own threads). Each driver runs with N, LMR_N,
# CM_N and with three times each; the figure is (Ir(3N) - Ir(N)) / 2N per
# phase, so set-up and first-call costs (lazy binding, first touch) cancel.
# The loop around each call costs the same few instructions in both drivers
# (shown as "driver" in the per-object table). Valgrind's start-up under TCG
# is about a minute, hence one process per stack and count.
#
# Environment (defaults in brackets):
#   INSTR_N       operations per phase in the short run [200] (long run: 3x)
#   INSTR_LMR_N   create+free per size in the short run [10]
#   INSTR_CM_N    connect cycles in the short run [3]
#   INSTR_RUNS    repetitions of the whole set, compared line by line [2]
#   INSTR_STACKS  which stacks to count [native ours ref]; e.g. "ours" alone
#                 while working on our stack (the table leaves the others "-")
#   INSTR_DIR     where dumps and the table are kept [/tmp/bench-instr.PID]
#   INSTR_OUT     also copy the table to this file
set -u
root=$(cd "$(dirname "$0")/.." && pwd)
N=${INSTR_N:-200}
LMR_N=${INSTR_LMR_N:-10}
CM_N=${INSTR_CM_N:-3}
RUNS=${INSTR_RUNS:-2}
STACKS=${INSTR_STACKS:-native ours ref}

if [ "${1:-}" != --in-guest ]; then
	# ---- on the host: build the drivers, run the guest, then analyse ----
	[ -e "$root/target/release/libdat2.so.2" ] || { echo "bench-instr: run tools/build.sh first" >&2; exit 2; }
	bin=$root/target/instr
	mkdir -p "$bin"
	cc -O2 -g -Wall -Wextra -Werror -o "$bin/instr-verbs" "$root/tools/instr/instr-verbs.c" -lrdmacm -libverbs || exit 2
	cc -O2 -g -Wall -Wextra -Werror -I"$root/include" -o "$bin/instr-dat" "$root/tools/instr/instr-dat.c" \
		-L"$root/target/release" -ldat2 || exit 2
	INSTR_DIR=${INSTR_DIR:-/tmp/bench-instr.$$}
	mkdir -p "$INSTR_DIR"
	export INSTR_N=$N INSTR_LMR_N=$LMR_N INSTR_CM_N=$CM_N INSTR_RUNS=$RUNS INSTR_STACKS=$STACKS INSTR_DIR
	started=$(date +%s)
	if [ -e /sys/class/infiniband/rxe0 ]; then
		"$0" --in-guest || exit $?
	else
		RXE_VM_TIMEOUT=${RXE_VM_TIMEOUT:-3600} "$root/tools/rxe-vm/run-in-guest.sh" "$0" --in-guest || exit $?
	fi
	echo "bench-instr: guest part took $(($(date +%s) - started)) s; dumps in $INSTR_DIR" >&2
	"$root/tools/instr/analyse.sh" "$INSTR_DIR" | tee "$INSTR_DIR/table.md"
	[ -n "${INSTR_OUT:-}" ] && cp "$INSTR_DIR/table.md" "$INSTR_OUT"
	exit 0
fi

# ---- in the guest ----
dir=$INSTR_DIR
bin=$root/target/instr
ours=$root/target/release
printf '%s u2.0 nonthreadsafe default %s dapl.2.0 "dum0 0" ""\n' \
	ibv-rxe libdaplibv.so.2 ofa-v2-rxe libdaplofa.so.2 >"$dir/dat.conf"
export DAT_OVERRIDE=$dir/dat.conf
started=$(date +%s)
log() { echo "bench-instr [$(($(date +%s) - started)) s] $*" >&2; }
{
	echo "date $(date -u '+%Y-%m-%d %H:%M UTC')"
	echo "kernel $(uname -r)"
	echo "valgrind $(valgrind --version)"
	echo "reference $(readlink -f /usr/lib/x86_64-linux-gnu/libdat2.so.2) $(readlink -f /usr/lib/x86_64-linux-gnu/libdaplofa.so.2)"
	echo "ours $(cd "$root" && git rev-parse --short HEAD 2>/dev/null)"
	echo "n $N lmr_n $LMR_N cm_n $CM_N runs $RUNS"
} >"$dir/meta"

# cg RUN STACK K: one driver run under callgrind with K times N, LMR_N and
# CM_N; dumps land in $dir/RUN.STACK.all.K*N.P, P = phase (named in the .log).
cg() {
	local run=$1 stack=$2 k=$3
	local count=$((k * N)) lmrc=$((k * LMR_N)) cmc=$((k * CM_N))
	local out=$dir/$run.$stack.all.$count
	local -a cmd
	# Not through env(1): callgrind would measure env, not its child.
	unset LD_LIBRARY_PATH
	case $stack in
	native) cmd=("$bin/instr-verbs" 10.0.0.1 "$count" "$lmrc" "$cmc") ;;
	ours) cmd=("$bin/instr-dat" ibv-rxe "$count" "$lmrc" "$cmc"); export LD_LIBRARY_PATH=$ours ;;
	ref) cmd=("$bin/instr-dat" ofa-v2-rxe "$count" "$lmrc" "$cmc") ;;
	esac
	# --vgdb=no: valgrind's gdbserver FIFOs cannot be made on the 9p root.
	if ! timeout 1200 valgrind --tool=callgrind --vgdb=no --dump-after=phase_done \
		--callgrind-out-file="$out" "${cmd[@]}" >"$out.log" 2>&1; then
		log "FAILED: $stack x$k"; tail -n 15 "$out.log" >&2
		unset LD_LIBRARY_PATH
		return 1
	fi
	unset LD_LIBRARY_PATH
	grep 'dequeue_hit misses' "$out.log" >&2
}

for run in $(seq "$RUNS"); do
	for stack in $STACKS; do
		for k in 1 3; do
			log "run $run: $stack x$k"
			cg "$run" "$stack" $k
		done
	done
done
log done
