#!/bin/bash
# The analysis half of tools/bench-instr.sh: reads the callgrind dumps in DIR
# and prints the markdown tables. Runs on the host (fast) after the guest.
#
#   tools/instr/analyse.sh DIR
#
# Per op and stack: (Ir(3N) - Ir(N)) / 2N from the op's phase dump, for each
# run; the table shows run 1, and whether every run is within 1% of run 1.
set -u
dir=$1
read -r _ N _ LMR_N _ CM_N _ RUNS < <(grep '^n ' "$dir/meta")

# cgsum FILE: self cost per object and per function of one callgrind dump
# ("ob OBJ IR", "fn OBJ FN IR", "total IR"). A cost line right after a calls=
# line is the inclusive cost of that call, already counted in the callee, so
# it is skipped. Names are compressed as "(id) name" on first use, "(id)" after,
# and cob=/cfn= lines define names too.
cgsum() {
	awk '
	function nm(s, tab,   id, rest) {
		if (s !~ /^\(/) return s
		id = substr(s, 2, index(s, ")") - 2); rest = substr(s, index(s, ")") + 2)
		if (rest != "") tab[id] = rest
		return tab[id]
	}
	function short(o) {
		if (o ~ /libdat2/) return "registry"
		if (o ~ /libdaplibv|libdaplofa/) return "provider"
		# before libibverbs: the rxe library lives in a libibverbs/ directory
		if (o ~ /librxe/) return "rxe"
		if (o ~ /libibverbs/) return "libibverbs"
		if (o ~ /librdmacm/) return "librdmacm"
		if (o ~ /libc\.so|ld-linux|libpthread/) return "libc"
		if (o ~ /instr-/) return "driver"
		sub(/.*\//, "", o); return o
	}
	/^ob=/ { ob = short(nm(substr($0, 4), obs)); next }
	/^cob=/ { nm(substr($0, 5), obs); next }
	/^fn=/ { fn = nm(substr($0, 4), fns); next }
	/^cfn=/ { nm(substr($0, 5), fns); next }
	/^calls=/ { skip = 1; next }
	/^[0-9+*-]/ {
		if (skip) { skip = 0; next }
		c = $2 + 0; obj[ob] += c; f[ob "\t" fn] += c; tot += c; next
	}
	END {
		print "total", tot + 0
		for (o in obj) print "ob", o, obj[o]
		for (k in f) { split(k, p, "\t"); gsub(/ /, "_", p[2]); print "fn", p[1], p[2], f[k] }
	}' "$1"
}

# All dumps into one file of: run stack mode count phase kind key... ir
all=$dir/sums
: >"$all"
for lg in "$dir"/*.all.*.log; do
	base=${lg%.log}
	IFS=. read -r run stack mode count <<<"${base##*/}"
	# The driver names each dump on stderr, in order: "dump K = PHASE".
	grep -o 'dump [0-9]* = [A-Za-z_0-9]*' "$lg" | while read -r _ k _ name; do
		[ -e "$base.$k" ] || continue
		cgsum "$base.$k" | sed "s|^|$run $stack $mode $count $name |" >>"$all"
	done
done

awk -v N="$N" -v LMR_N="$LMR_N" -v CM_N="$CM_N" -v RUNS="$RUNS" '
function per(op) { return op ~ /^lmr_/ ? LMR_N : (op == "connect_cycle" ? CM_N : N) }
# lines: run stack mode count phase kind ...
{
	run = $1; st = $2; c = $4 + 0; op = $5; kind = $6
	small = (c == N); big = (c == 3 * N)
	if (!small && !big) next
	sign = big ? 1 : -1
	if (kind == "total") v[run, st, op] += sign * $7
	else if (kind == "ob") ob[run, st, op, $7] += sign * $8
	else if (kind == "fn") { k = $7 " " $8; fn[run, st, op, k] += sign * $9; fnames[st, op, k] = 1 }
	obnames[$7] = kind == "ob"
	seen[run, st, op] = 1
}
# Library instructions: the whole process minus the driver code (its
# loop and the building of the arguments of each call, which differ between the
# verbs and DAT drivers and are not a cost of the stacks).
function val(run, st, op) { return ((run, st, op) in seen) ? (v[run, st, op] - ob[run, st, op, "driver"]) / (2 * per(op)) : "" }
function f1(x) { return x == "" ? "-" : sprintf("%.1f", x) }
function target(op, o, n, r,   t, ok) {
	if (o == "" ) return "-"
	t = ""; ok = 1
	if (op ~ /^post_|^dequeue_/) { t = "<= native+60, <= ref"; ok = (n != "" && o - n <= 60) && (r == "" || o <= r) }
	else if (op ~ /^lmr_/) { t = "<= native+300, <= ref"; ok = (n != "" && o - n <= 300) && (r == "" || o <= r) }
	else { t = "<= ref"; ok = (r != "" && o <= r) }
	return t " | " (ok ? "yes" : "**no**")
}
END {
	nops = split("post_send post_recv post_write post_read dequeue_hit dequeue_miss wait_present lmr_4K lmr_64K lmr_1M lmr_16M lmr_64M connect_cycle", ops, " ")
	label["post_send"] = "post send (64 B)"; label["post_recv"] = "post recv"
	label["post_write"] = "post RDMA write (64 B)"; label["post_read"] = "post RDMA read (64 B)"
	label["dequeue_hit"] = "dequeue, finds an event"; label["dequeue_miss"] = "dequeue, empty EVD"
	label["wait_present"] = "`dat_evd_wait`, event already there"
	label["connect_cycle"] = "connect+accept cycle (whole process)"
	print "| operation | native | ours | reference | ours - native | ours / ref | ours: DAT layer | target | met | runs agree (<= 1%) |"
	print "| --- | ---: | ---: | ---: | ---: | ---: | ---: | --- | --- | --- |"
	for (i = 1; i <= nops; i++) {
		op = ops[i]
		lab = (op in label) ? label[op] : "LMR create+free " substr(op, 5)
		n = val(1, "native", op); o = val(1, "ours", op); r = val(1, "ref", op)
		# The DAT layer: what ours spends outside libibverbs, the rxe
		# library and the driver loop (registry, provider, libc it calls).
		dl = ""
		if (o != "") dl = o - (ob[1, "ours", op, "libibverbs"] + ob[1, "ours", op, "rxe"]) / (2 * per(op))
		agree = "yes"; worst = 0
		for (s = 1; s <= 3; s++) {
			st = s == 1 ? "native" : (s == 2 ? "ours" : "ref")
			a = val(1, st, op)
			for (rr = 2; rr <= RUNS; rr++) {
				b = val(rr, st, op)
				if (a == "" || b == "") continue
				d = (a == 0 ? (b == 0 ? 0 : 1) : (b - a) / a); if (d < 0) d = -d
				if (d > worst) worst = d
				if (d > 0.01) agree = "**no**"
			}
		}
		printf "| %s | %s | %s | %s | %s | %s | %s | %s | %s (max %.2f%%) |\n", lab, f1(n), f1(o), f1(r),
			(o != "" && n != "") ? f1(o - n) : "-", (o != "" && r != "" && r > 0) ? sprintf("%.2f", o / r) : "-",
			f1(dl), target(op, o, n, r), agree, 100 * worst
	}
	print ""
	print "Per object, run 1 (instructions per operation):"
	print ""
	print "| operation | stack | registry | provider | libibverbs | rxe | librdmacm | libc | driver | other |"
	print "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"
	for (i = 1; i <= nops; i++) {
		op = ops[i]
		for (s = 1; s <= 3; s++) {
			st = s == 1 ? "native" : (s == 2 ? "ours" : "ref")
			if (!((1, st, op) in seen)) continue
			other = v[1, st, op]
			line = sprintf("| %s | %s", op, st)
			nc = split("registry provider libibverbs rxe librdmacm libc driver", cols, " ")
			for (j = 1; j <= nc; j++) { x = ob[1, st, op, cols[j]]; other -= x; line = line sprintf(" | %.1f", x / (2 * per(op))) }
			printf "%s | %.1f |\n", line, other / (2 * per(op))
		}
	}
	# Top functions of each stack for the two hot calls.
	nt = split("post_send dequeue_hit dequeue_miss", hot, " ")
	for (h = 1; h <= nt; h++) for (s = 2; s <= 3; s++) {
		st = s == 2 ? "ours" : "ref"; op = hot[h]
		print ""
		print "Top functions (self instructions per call), " st ", " op ":"
		print ""
		m = 0
		for (k in fnames) { split(k, kk, SUBSEP); if (kk[1] == st && kk[2] == op) { m++; key[m] = kk[3]; cost[m] = fn[1, st, op, kk[3]] / (2 * per(op)) } }
		# selection sort, the lists are short
		for (a = 1; a <= m; a++) for (b = a + 1; b <= m; b++) if (cost[b] > cost[a]) { t = cost[a]; cost[a] = cost[b]; cost[b] = t; t = key[a]; key[a] = key[b]; key[b] = t }
		for (a = 1; a <= m && a <= 15; a++) if (cost[a] >= 0.5) printf "    %8.1f  %s\n", cost[a], key[a]
		delete key; delete cost
	}
}' "$all"
