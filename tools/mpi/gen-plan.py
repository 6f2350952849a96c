#!/usr/bin/env python3
"""gen-plan.py PREFIX: the full MPI plan (guest-mpi.sh's PLAN format) for a
build of build-mvapich2.sh: the OSU benchmarks, and every test of the MPICH2
directories it built at 2 ranks (testlist asks for 1 or 2) or 4 ranks
(testlist asks for 3 or more). Left out, with the reason, as comments:
tests whose result is an exit status or a timeout (resultTest=: they test
the process manager, not the transport) and tests the build did not make.
plan-ci.txt is the part of this that fits CI's time."""
import os
import sys

OSU = """\
# OSU point-to-point (exactly 2 ranks), multi-pair (2 and 4), one-sided
# (2 ranks: put/get drive RDMA write/read), collectives (2 and 4).
osu 2 osu_latency
osu 2 osu_bw
osu 2 osu_bibw
osu 2 osu_mbw_mr
osu 4 osu_mbw_mr
osu 2 osu_multi_lat
osu 4 osu_multi_lat
osu 2 osu_put_latency
osu 2 osu_get_latency
osu 2 osu_put_bw
osu 2 osu_get_bw
osu 2 osu_put_bibw
osu 2 osu_acc_latency
osu 2 osu_passive_put_latency
osu 2 osu_passive_get_latency
osu 2 osu_passive_put_bw
osu 2 osu_passive_get_bw
osu 2 osu_passive_acc_latency
osu 2 osu_alltoall
osu 4 osu_alltoall
osu 2 osu_bcast
osu 4 osu_bcast
"""


def main():
    prefix = sys.argv[1]
    print(OSU, end="")
    seen = set()
    for d in ("init", "pt2pt", "coll", "rma", "comm", "datatype"):
        print(f"# {d}")
        for line in open(os.path.join(prefix, "tests", d, "testlist")):
            f = line.split()
            if not f or f[0].startswith("#"):
                continue
            name, np, opts = f[0], int(f[1]), f[2:]
            args = [o[4:] for o in opts if o.startswith("arg=")]
            if any(o.startswith("resultTest=") for o in opts):
                print(f"# left out {d}/{name}: its result is an exit status or a timeout")
                continue
            if not os.access(os.path.join(prefix, "tests", d, name), os.X_OK):
                print(f"# left out {d}/{name}: not built")
                continue
            limits = [o[len("timeLimit="):] for o in opts if o.startswith("timeLimit=")]
            args += [f"timeout={limits[0]}"] if limits else []
            run = 2 if np <= 2 else 4
            key = (d, name, run, tuple(args))
            if key not in seen:
                seen.add(key)
                print(" ".join(["test", str(run), f"{d}/{name}", *args]))


if __name__ == "__main__":
    main()
