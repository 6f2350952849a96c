#!/bin/bash
# The DAT layer's instruction counts on this host, without the guest: the
# same driver as tools/bench-instr.sh (tools/instr/instr-dat.c), over our
# registry and the software provider libdaplsock.so.2 on loopback, under
# callgrind with N and 3N operations per phase. Prints, per phase and per
# call, the self cost of every function that spends at least half an
# instruction: the registry's (libdat2) and the core's (dapl_core::*, which
# on this provider also holds the backend code inlined into it) are what a
# change to the registry or the core moves. The sock provider's progress
# thread runs beside the driver, so the process totals move between runs;
# the registry's and the core's own lines do not.
#
#   tools/instr/host.sh [N]          # needs tools/build.sh first; N [20]
#
# (N stays small: the sock provider's queues take a few dozen posts in
# flight.) Dumps are kept in the temp dir it prints.
set -u
root=$(cd "$(dirname "$0")/../.." && pwd)
N=${1:-20}
lib=${INSTR_LIB:-$root/target/release}  # INSTR_LIB: another build, for an A/B
# INSTR_ENV: a command prefix for the driver, e.g. "env DAPL_SOCK_SHM=0" to
# count the TCP path instead of the on-node one.
[ -e "$lib/libdat2.so.2" ] && [ -e "$lib/libdaplsock.so.2" ] || { echo "host.sh: run tools/build.sh first" >&2; exit 2; }
command -v valgrind >/dev/null || { echo "host.sh: valgrind missing" >&2; exit 2; }
dir=$(mktemp -d /tmp/instr-host.XXXXXX)
cc -O2 -g -Wall -Wextra -Werror -I"$root/include" -o "$dir/instr-dat" "$root/tools/instr/instr-dat.c" -L"$lib" -ldat2 || exit 2
printf 'sock-lo u2.0 nonthreadsafe default %s/libdaplsock.so.2 dapl.2.0 "lo 0" ""\n' "$lib" >"$dir/dat.conf"
for k in 1 3; do
	n=$((k * N))
	# Not through env(1): callgrind would measure env, not its child.
	DAT_OVERRIDE=$dir/dat.conf LD_LIBRARY_PATH=$lib ${INSTR_ENV:-} timeout 900 valgrind --tool=callgrind --dump-after=phase_done \
		--callgrind-out-file="$dir/cg.$n" "$dir/instr-dat" sock-lo "$n" "$n" "$k" >"$dir/log.$n" 2>&1 ||
		{ echo "host.sh: instr-dat x$k failed:" >&2; tail -5 "$dir/log.$n" >&2; exit 1; }
done

# selfcost FILE: "object<TAB>function<TAB>Ir" per function of one dump; a
# cost line right after a calls= line is a call's inclusive cost, skipped.
selfcost() {
	awk '
	function nm(s, tab,   id, rest) {
		if (s !~ /^\(/) return s
		id = substr(s, 2, index(s, ")") - 2); rest = substr(s, index(s, ")") + 2)
		if (rest != "") tab[id] = rest
		return tab[id]
	}
	/^ob=/ { ob = nm(substr($0, 4), obs); sub(/.*\//, "", ob); next }
	/^cob=/ { nm(substr($0, 5), obs); next }
	/^fn=/ { fn = nm(substr($0, 4), fns); next }
	/^cfn=/ { nm(substr($0, 5), fns); next }
	/^calls=/ { skip = 1; next }
	/^[0-9+*-]/ { if (skip) { skip = 0; next } c[ob "\t" fn] += $2; next }
	END { for (k in c) print k "\t" c[k] }' "$1"
}

echo "# tools/instr/host.sh N=$N $(date -u '+%Y-%m-%d %H:%M UTC') $(cd "$root" && git rev-parse --short HEAD 2>/dev/null); dumps in $dir"
for phase in post_recv post_send post_write post_read dequeue_hit dequeue_miss wait_present lmr_4K; do
	d=$(grep -o "dump [0-9]* = $phase\$" "$dir/log.$N" | awk '{print $2}')
	[ -n "$d" ] || continue
	per=$((2 * N))
	echo
	echo "## $phase (instructions per call, self)"
	{ selfcost "$dir/cg.$N.$d" | sed 's/^/a\t/'; selfcost "$dir/cg.$((3 * N)).$d" | sed 's/^/b\t/'; } |
		awk -F'\t' -v per="$per" '
		{ k = $2 "\t" $3; v[k] += ($1 == "b" ? $4 : -$4) }
		END { for (k in v) if (v[k] / per >= 0.5 || v[k] / per <= -0.5) printf "%8.1f  %s\n", v[k] / per, k }' |
		sort -rn | sed 's/\t/  /' | head -15
done
