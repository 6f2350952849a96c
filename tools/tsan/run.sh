#!/bin/bash
# ThreadSanitizer over the core and the sock provider: data races between a
# consumer's threads, and between a consumer and the provider's progress
# thread, in the code that shares memory without locks (completion slots,
# rings, counters, the engine's hand-over).
#
#   tools/tsan/run.sh            # after tools/build.sh; about 10 minutes
#
# What runs, each with the provider built by nightly rustc with
# -Zsanitizer=thread (std rebuilt with it: -Zbuild-std) into target/tsan:
#   1. the unit tests of dapl-core and dapl-provider-sock;
#   2. the conformance suite (ctest/build/conformance, not instrumented)
#      over that libdaplsock.so.2, on the on-node path with cross-memory
#      attach, on its rings alone (DAPL_SOCK_CMA=0) and over TCP
#      (DAPL_SOCK_SHM=0);
#   3. dat-fuzz on the sock target for TSAN_FUZZ_SECS seconds [120];
#   4. with TSAN_GUEST=1 (default when tools/rxe-vm can run), the verbs
#      provider built the same way, under the conformance suite in the
#      Soft-RoCE guest (ctest/guest/conformance.sh, shorter soak and kill
#      rounds: TCG under the sanitizer is slow).
# A shared library cannot carry rustc's TSan runtime, so the programs in 2
# and 3 get GCC's (libtsan.so.2) preloaded, with tsan-shim.c for the entry
# points that runtime lacks; the build's --cfg tsan turns on the edges of
# dapl-core/src/tsan.rs, and suppressions.txt says what is not ours to
# judge. Last line: "tsan: ... reports, ... failed";
# exit 1 if ThreadSanitizer reported anything or a case failed.
# Not in the test command: it needs the nightly toolchain and rust-src
#   rustup toolchain install nightly --component rust-src
#   apt-get install libtsan2
# Environment: TSAN_FUZZ_SECS, TSAN_CASES (conformance cases; default all
# but those skipped below), TSAN_GUEST_CASES (the guest's; default all),
# TSAN_GUEST=0|1, TSAN_KEEP=1 (keep the outputs and say where).
set -u
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
triple=x86_64-unknown-linux-gnu
runtime=/usr/lib/x86_64-linux-gnu/libtsan.so.2
if ! rustup component list --toolchain nightly --installed 2>/dev/null | grep -q '^rust-src'; then
	echo "tsan: needs the nightly toolchain with rust-src: rustup toolchain install nightly --component rust-src" >&2
	exit 2
fi
[ -e "$runtime" ] || { echo "tsan: needs GCC's ThreadSanitizer runtime $runtime (apt-get install libtsan2)" >&2; exit 2; }
for f in target/release/libdat2.so.2 target/release/dat-fuzz ctest/build/conformance; do
	[ -e "$f" ] || { echo "tsan: $f is missing: run tools/build.sh first" >&2; exit 2; }
done

work=$(mktemp -d /tmp/dat-tsan.XXXXXX)
# Removed however the run ends (a failed build exits early too), unless kept.
finish() {
	if [ "${TSAN_KEEP:-0}" = 1 ]; then note "outputs kept in $work"; else rm -rf "$work"; fi
}
trap finish EXIT
reports=0
failed=0
note() { echo "tsan: $*"; }
# judge LOG LABEL SUMMARY_PREFIX: counts a conformance run's failed cases
# (none found: the run died) and its reports.
judge() {
	local summary n
	summary=$(grep "^$3 [0-9]* passed" "$1" | tail -1)
	if [ -z "$summary" ]; then
		failed=$((failed + 1))
		note "$2: no summary line (killed or crashed)"
		tail -20 "$1"
	else
		note "$2: ${summary#"$3" }"
		n=$(sed -n 's/.* \([0-9]*\) failed.*/\1/p' <<<"$summary")
		failed=$((failed + ${n:-1}))
		grep -A3 '^FAIL' "$1" | head -30
	fi
	count "$1" "$2"
}

# count LOG LABEL: adds LOG's ThreadSanitizer reports to the total (the
# conformance harness prints a case's output indented, hence no anchor).
count() {
	local n
	n=$(grep -c 'WARNING: ThreadSanitizer' "$1")
	reports=$((reports + n))
	[ "$n" = 0 ] || { note "$2: $n report(s):"; grep -A12 'WARNING: ThreadSanitizer' "$1" | cut -c1-200 | head -60; }
}

# cargo SUBCOMMAND ARGS...: nightly, instrumented, std rebuilt, into target/tsan.
tcargo() {
	local sub=$1
	shift
	RUSTFLAGS="-Zsanitizer=thread --cfg tsan" cargo +nightly "$sub" -Zbuild-std --target "$triple" --release \
		--target-dir "$root/target/tsan" "$@"
}
note "building (nightly, -Zsanitizer=thread, target/tsan)"
if ! tcargo build -p dapl-provider-sock >"$work/build.log" 2>&1 ||
	! tcargo test --no-run -p dapl-core -p dapl-provider-sock >>"$work/build.log" 2>&1; then
	tail -20 "$work/build.log"
	note "build failed"
	exit 1
fi

# 1. Unit tests: rustc links its own runtime into these executables.
for t in dapl-core dapl-provider-sock; do
	log=$work/unit-$t.log
	# --lib: rustdoc's doctests would link an uninstrumented std.
	if tcargo test -p "$t" --lib >"$log" 2>&1; then
		note "unit $t: $(grep -h '^test result' "$log" | head -1)"
	else
		failed=$((failed + 1))
		note "unit $t: FAILED"
		grep -h '^test result\|panicked' "$log" | head -5
	fi
	count "$log" "unit $t"
done

# 2 and 3 share a directory holding our registry and the instrumented provider.
lib=$work/lib
mkdir -p "$lib"
cp -P target/release/libdat2.so* "$lib/"
cp "target/tsan/$triple/release/libdaplsock.so" "$lib/libdaplsock.so.2"
cc -O1 -fno-builtin -shared -fPIC -o "$lib/tsan-shim.so" tools/tsan/tsan-shim.c || exit 1
{
	printf 'sock-lo u2.0 nonthreadsafe default %s dapl.2.0 "lo 0" ""\n' "$lib/libdaplsock.so.2"
	printf 'sock-addr u2.0 nonthreadsafe default %s dapl.2.0 "127.0.0.1 0" ""\n' "$lib/libdaplsock.so.2"
} >"$lib/dat.conf"
preload="$runtime $lib/tsan-shim.so"
# history_size: older accesses kept, so both sides of a report have stacks.
export TSAN_OPTIONS="halt_on_error=0 history_size=4 second_deadlock_stack=1 suppressions=$root/tools/tsan/suppressions.txt"
# The conformance harness's temp dirs land here (its system("rm") fails under the runtime).
export TMPDIR=$work

# Cases whose checks do not hold here, for reasons other than races.
skip="abrupt_close_releases longest_ia_name pz_lmr_errors fastpath_allocates_nothing fastpath_polling_makes_no_other_syscalls"
# abrupt_close_releases: counts verbs objects (rdma resource show); the sock provider makes none.
# longest_ia_name: names the guest's address 10.0.0.1.
# fastpath_allocates_nothing: counts allocations through a preloaded malloc,
#   which would take the heap from the runtime's own.
# fastpath_polling_makes_no_other_syscalls: counts a thread's system calls,
#   the runtime's own among them.
# pz_lmr_errors: expects a 1 TiB region past a 64 KiB buffer to be refused as
#   unmapped; ThreadSanitizer maps its shadow memory there, so it is mapped.
cases=${TSAN_CASES:-$(ctest/build/conformance -l | awk '{print $2}' | grep -vxF -f <(tr ' ' '\n' <<<"$skip"))}
for mode in cma ring tcp; do
	log=$work/conformance-$mode.log
	case $mode in
		cma) env=() ;;
		ring) env=(DAPL_SOCK_CMA=0) ;;
		tcp) env=(DAPL_SOCK_SHM=0) ;;
	esac
	# shellcheck disable=SC2086
	env "${env[@]}" DAT_OVERRIDE="$lib/dat.conf" LD_LIBRARY_PATH="$lib" LD_PRELOAD="$preload" \
		CONF_IA=sock-lo CONF_IA2=sock-addr CONF_SOAK_SECS=5 \
		timeout 1800 ctest/build/conformance $cases >"$log" 2>&1
	judge "$log" "conformance ($mode)" ctest-conformance:
done

secs=${TSAN_FUZZ_SECS:-120}
log=$work/fuzz.log
# --confs 0: the dat.conf part starts a child process per file, each of
# which would start the runtime again, and one run in four died in the
# runtime with "failed to allocate 0x1ec3000021000 bytes" (exit 66), the
# size of the shadow a process maps at its start (docs/threads.md); those
# children parse files on one thread anyway.
LD_PRELOAD="$preload" timeout $((secs + 600)) target/release/dat-fuzz --target sock --lib-dir "$lib" \
	--seconds "$secs" --confs 0 >"$log" 2>&1
rc=$?
last=$(grep '^fuzz: [0-9]* sequences' "$log" | tail -1)
if [ "$rc" != 0 ] || [ -z "$last" ]; then
	failed=$((failed + 1))
	note "dat-fuzz ($secs s): exit $rc"
	grep -v '^daplsock WARN' "$log" | tail -20
else
	note "dat-fuzz ($secs s): ${last#fuzz: }"
fi
count "$log" "dat-fuzz"

guest=${TSAN_GUEST:-}
if [ -z "$guest" ]; then
	guest=0
	command -v "${RXE_VM_QEMU:-qemu-system-x86_64}" >/dev/null && guest=1
fi
if [ "$guest" = 1 ]; then
	log=$work/guest.log
	if ! tcargo build -p dapl-provider-ibv >>"$work/build.log" 2>&1; then
		tail -20 "$work/build.log"
		note "build of the verbs provider failed"
		exit 1
	fi
	glib=$work/guest-lib
	mkdir -p "$glib"
	cp -P target/release/libdat2.so* "$glib/"
	cp "target/tsan/$triple/release/libdaplibv.so" "$glib/libdaplibv.so.2"
	# The guest script runs CONFORMANCE itself: this runs it with the runtime.
	printf '#!/bin/sh\nLD_PRELOAD="%s" TSAN_OPTIONS="%s" exec %s "$@"\n' "$preload" "$TSAN_OPTIONS" "$root/ctest/build/conformance" >"$glib/conformance"
	chmod +x "$glib/conformance"
	# The guest script's own default, less abrupt_close_releases: it counts
	# verbs objects with `rdma resource show`, which it starts through
	# popen, and under the runtime that start fails. (write_tail_whole
	# probes TCG, not a provider: the script runs it only when named;
	# fastpath_allocates_nothing counts through a malloc of its own,
	# not preloaded here: COUNTALLOC=; fastpath_polling_makes_no_other_syscalls
	# would count the runtime's system calls with the provider's.)
	gcases=$(ctest/build/conformance -l | awk '{print $2}' | grep -vx -e abrupt_close_releases -e write_tail_whole -e fastpath_allocates_nothing \
		-e fastpath_polling_makes_no_other_syscalls |
		sort -u | tr '\n' ' ')
	RXE_VM_TIMEOUT=${RXE_VM_TIMEOUT:-3000} LIBDAT2_DIR=$glib CONFORMANCE=$glib/conformance COUNTALLOC= CONF_CASES=${TSAN_GUEST_CASES:-$gcases} \
		CONF_SOAK_SECS=10 CONF_LOAD_EPS=32 CONF_KILL_ROUNDS=5 \
		tools/rxe-vm/run-in-guest.sh ctest/guest/conformance.sh >"$log" 2>&1
	judge "$log" "guest conformance (verbs)" conformance:
fi

note "$reports ThreadSanitizer reports, $failed failed"
[ "$reports" = 0 ] && [ "$failed" = 0 ]
