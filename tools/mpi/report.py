#!/usr/bin/env python3
"""report.py RESULTS PLAN [KNOWN]: the side-by-side table of an MPI run
(guest-mpi.sh's RESULTS for its PLAN) and the summary line the test command
counts. A planned run with no result on ours (the guest timed out) is a
failure.

The reference runs the plan's lines marked ref (an argument "ref",
guest-mpi.sh), or every line with MPI_REF_ALL=1 (run-mpi.sh --full). A line
it does not run shows "not run" in its column and counts in no comparison
with it: the group table counts the runs made on the reference and which of
them passed, and the comparison line (passed on both, failed on one or
both) counts only runs with a result on both providers. A line the
reference should have run and has no result for shows "no result" and is
counted apart, neither as its pass nor as its failure.

A run counts as passed when it passed on our provider. It counts as failed
when it failed on ours, unless it failed on the reference provider too and
KNOWN names it (with the reason, which README repeats), or every try of it
on ours ended with MVAPICH2's stale eager-RDMA header (guest-mpi.sh): such a
run is counted as skipped, and shown.
"""
import collections
import os
import sys

# The provider judged, and the one it is compared with (run-mpi.sh --host:
# the software provider, with no reference beside it).
OURS = os.environ.get("MPI_OURS", "mpi-ours")
REF = os.environ.get("MPI_REF", "mpi-ref")
# Every line on the reference (run-mpi.sh --full), not only those marked ref.
REF_ALL = os.environ.get("MPI_REF_ALL", "0") == "1"


def load(path):
    runs, figs = {}, collections.defaultdict(dict)
    load.hangs = collections.Counter()
    for line in open(path):
        f = line.split()
        if not f:
            continue
        if f[0] == "run":
            _, prov, kind, np, name, verdict, secs, rc, tries = f
            runs[(kind, int(np), name, prov)] = (verdict, float(secs), int(rc), int(tries))
        elif f[0] == "hang":
            load.hangs[f[1]] += 1
        elif f[0] == "fig":
            _, prov, np, name, size, value = f
            figs[(name, int(np), int(size))][prov] = float(value)
    return runs, figs


def load_known(path):
    known = {}
    if path:
        for line in open(path):
            line = line.strip()
            if line and not line.startswith("#"):
                key, _, why = line.partition(" ")
                known[key] = why.strip()
    return known


def load_plan(path):
    """Each planned run, and whether the reference runs it too."""
    items = {}
    for line in open(path):
        f = line.split()
        if f and not f[0].startswith("#"):
            # MV2_ settings name the run, as guest-mpi.sh names it.
            envs = [a for a in f[3:] if a.startswith("MV2_") and "=" in a]
            item = (f[0], int(f[1]), f[2] + (f"[{','.join(envs)}]" if envs else ""))
            items[item] = items.get(item, False) or REF_ALL or "ref" in f[3:]
    return items


def main():
    runs, figs = load(sys.argv[1])
    planned = load_plan(sys.argv[2])
    known = load_known(sys.argv[3] if len(sys.argv) > 3 else None)
    items = sorted(set(planned) | {k[:3] for k in runs})
    has_ref = REF != "none"
    passed = failed = skipped = 0
    failures = []
    # runs, passed on ours, made on the reference, passed on the reference
    per_group = collections.defaultdict(lambda: [0, 0, 0, 0])
    # Runs with a result on both: passed on both, failed on the reference
    # only, on ours only, on both; and runs the reference should have made
    # but has no result for.
    both = collections.Counter()
    ref_missing = 0
    not_on_ref = set()
    print("| run | ranks | ours | reference | ours s | ref s |")
    print("| --- | --- | --- | --- | --- | --- |")
    for kind, np, name in items:
        o = runs.get((kind, np, name, OURS))
        r = runs.get((kind, np, name, REF))
        # A result on the reference counts whatever the plan says.
        ref_planned = has_ref and (r is not None or planned.get((kind, np, name), False))
        if r is None and has_ref and not ref_planned:
            not_on_ref.add((kind, np, name))
        group = f"{kind} {'osu' if kind == 'osu' else name.split('/')[0]} np={np}"
        g = per_group[group]
        g[0] += 1
        g[1] += bool(o and o[0] == "pass")
        g[2] += r is not None
        g[3] += bool(r and r[0] == "pass")
        if r is not None:
            ok_o, ok_r = bool(o and o[0] == "pass"), r[0] == "pass"
            both[{(True, True): "both pass", (True, False): "reference only",
                  (False, True): "ours only", (False, False): "both fail"}[(ok_o, ok_r)]] += 1
        elif ref_planned:
            ref_missing += 1
        note = ""
        if o and o[0] == "pass":
            passed += 1
        elif o and o[0] == "stale":
            skipped += 1
            note = " (stale eager-RDMA header on every try)"
        elif r is not None and r[0] != "pass" and f"{name}@{np}" in known:
            skipped += 1
            note = f" (both fail: {known[f'{name}@{np}']})"
        else:
            # Failed on ours: a failure whether or not the reference ran it.
            failed += 1
            note = " **ours only**" if r and r[0] == "pass" else ""
            if r is None and f"{name}@{np}" in known:
                note = " (listed as failing on both, but the reference did not run it: mark it ref)"
            ref_said = r[0] if r else ("no result" if ref_planned else "not run")
            failures.append(f"{kind} {name}@{np} ({o[0] if o else 'no result'}, rc {o[2] if o else '-'};"
                            f" reference {ref_said})")
        def show(x, i, planned=True):
            # No result: "no result" where the run was planned (the guest
            # timed out), "not run" where the plan has it on ours alone, "-"
            # in the reference's column when there is no reference (--host).
            if x is None:
                if i == 1 or not planned and not has_ref:
                    return "-"
                return "no result" if planned else "not run"
            if i == 1:
                return f"{x[1]:.1f}"
            return x[0] + (f" (try {x[3]})" if x[3] > 1 else "")
        print(f"| {kind} {name} | {np} | {show(o, 0)}{note} | {show(r, 0, ref_planned)} | {show(o, 1)} | {show(r, 1)} |")
    print()
    print("| group | runs | passed on ours | run on reference | passed on reference |")
    print("| --- | --- | --- | --- | --- |")
    for group, (n, o, rn, r) in sorted(per_group.items()):
        print(f"| {group} | {n} | {o} | {rn} | {r} |")
    tot = [sum(g[i] for g in per_group.values()) for i in range(4)]
    print(f"| all | {tot[0]} | {tot[1]} | {tot[2]} | {tot[3]} |")
    if has_ref:
        print(f"\nreference: {tot[2]} of {tot[0]} runs made on it"
              f" ({'every line, MPI_REF_ALL=1' if REF_ALL else 'the lines the plan marks ref; MPI_REF_ALL=1 or --full for all'});"
              f" of those, passed on both {both['both pass']}, failed on the reference only {both['reference only']},"
              f" on ours only {both['ours only']}, on both {both['both fail']}"
              + (f"; no result on the reference where the plan has it: {ref_missing}" if ref_missing else ""))
    if figs:
        print()
        print("| OSU benchmark | ranks | size | ours | reference | ours/ref |")
        print("| --- | --- | --- | --- | --- | --- |")
        for (name, np, size), v in sorted(figs.items()):
            o, r = v.get(OURS), v.get(REF)
            ratio = f"{o / r:.2f}" if o is not None and r else "-"
            fmt = lambda x: "-" if x is None else f"{x:.2f}"
            ref_fig = "not run" if r is None and ("osu", np, name) in not_on_ref else fmt(r)
            print(f"| {name} | {np} | {size} | {fmt(o)} | {ref_fig} | {ratio} |")
        print("\n(latency in µs: lower is better; bandwidth in MB/s: higher is better; "
              "TCG guest figures are informative only)")
    hangs = load.hangs
    retried = {p: sum(1 for k, v in runs.items() if k[3] == p and v[3] > 1 and k[0] != "control") - hangs[p]
               for p in (OURS, REF)}
    stale = {p: sum(1 for k, v in runs.items() if k[3] == p and v[0] == "stale") for p in (OURS, REF)}
    print(f"\nruns tried again after a stale eager-RDMA header: ours {retried[OURS]}, reference {retried[REF]}; "
          f"stale on every try: ours {stale[OURS]}, reference {stale[REF]}")
    if sum(hangs.values()):
        print(f"runs tried again after a hang (timeout): ours {hangs[OURS]}, reference {hangs[REF]}")
    print()
    # Last, next to the count, so that a log's tail names what failed.
    for f in failures:
        print(f"mpi: failed on ours: {f}")
    print(f"mpi: {passed} passed, {failed} failed, {skipped} skipped")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
