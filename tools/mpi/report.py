#!/usr/bin/env python3
"""report.py RESULTS PLAN [KNOWN]: the side-by-side table of an MPI run
(guest-mpi.sh's RESULTS for its PLAN) and the summary line the test command
counts. A planned run with no result (the guest timed out) is a failure.

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
    items = set()
    for line in open(path):
        f = line.split()
        if f and not f[0].startswith("#"):
            # MV2_ settings name the run, as guest-mpi.sh names it.
            envs = [a for a in f[3:] if a.startswith("MV2_") and "=" in a]
            items.add((f[0], int(f[1]), f[2] + (f"[{','.join(envs)}]" if envs else "")))
    return items


def main():
    runs, figs = load(sys.argv[1])
    planned = load_plan(sys.argv[2])
    known = load_known(sys.argv[3] if len(sys.argv) > 3 else None)
    items = sorted(planned | {k[:3] for k in runs})
    passed = failed = skipped = 0
    failures = []
    per_group = collections.defaultdict(lambda: [0, 0, 0])  # runs, ours, ref
    print("| run | ranks | ours | reference | ours s | ref s |")
    print("| --- | --- | --- | --- | --- | --- |")
    for kind, np, name in items:
        o = runs.get((kind, np, name, OURS))
        r = runs.get((kind, np, name, REF))
        group = f"{kind} {'osu' if kind == 'osu' else name.split('/')[0]} np={np}"
        g = per_group[group]
        g[0] += 1
        g[1] += bool(o and o[0] == "pass")
        g[2] += bool(r and r[0] == "pass")
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
            failed += 1
            note = " **ours only**" if r and r[0] == "pass" else ""
            failures.append(f"{kind} {name}@{np} ({o[0] if o else 'no result'}, rc {o[2] if o else '-'};"
                            f" reference {r[0] if r else 'no result'})")
        def show(x, i):
            if x is None:
                return "-"
            if i == 1:
                return f"{x[1]:.1f}"
            return x[0] + (f" (try {x[3]})" if x[3] > 1 else "")
        print(f"| {kind} {name} | {np} | {show(o, 0)}{note} | {show(r, 0)} | {show(o, 1)} | {show(r, 1)} |")
    print()
    print("| group | runs | passed on ours | passed on reference |")
    print("| --- | --- | --- | --- |")
    for group, (n, o, r) in sorted(per_group.items()):
        print(f"| {group} | {n} | {o} | {r} |")
    tot = [sum(g[i] for g in per_group.values()) for i in range(3)]
    print(f"| all | {tot[0]} | {tot[1]} | {tot[2]} |")
    if figs:
        print()
        print("| OSU benchmark | ranks | size | ours | reference | ours/ref |")
        print("| --- | --- | --- | --- | --- | --- |")
        for (name, np, size), v in sorted(figs.items()):
            o, r = v.get(OURS), v.get(REF)
            ratio = f"{o / r:.2f}" if o is not None and r else "-"
            fmt = lambda x: "-" if x is None else f"{x:.2f}"
            print(f"| {name} | {np} | {size} | {fmt(o)} | {fmt(r)} | {ratio} |")
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
