#!/usr/bin/env python3
"""The report of tools/bench-host.sh: reads its work directory (env.txt,
config.json, runs.txt, load.txt, raw/NAME.out) and prints markdown: the
header, one table per figure and network with the median over rounds and
the spread (min-max), the ratio of ours to the best of the others, and a
verdict per target of issue 14. Ends with "bench-host: N passed, M failed"
(one count per server/client run that ran and gave a figure); exits 1 if any
did not.

    python3 tools/bench-host-table.py WORKDIR
"""
import json
import re
import statistics
import sys

FIGS = ("lat", "lat50", "bw", "rate")
NET_TITLE = {
    "node": "On-node",
    "tcp": "TCP across two network namespaces (veth)",
}
OTHERS = {
    "node": {"ucx": "UCX posix,sysv,cma", "ofi": "libfabric shm"},
    "tcp": {"ucx": "UCX tcp", "ofi": "libfabric tcp"},
}
OURS_WHAT = {"node": "sock provider, lo", "tcp": "sock provider, veth"}
LOWER_IS_BETTER = {"lat": True, "lat50": True, "bw": False, "rate": False}


def iters_for(iters, budget, size, floor):
    """Iterations at a size: dat-perf's --iter-bytes rule (args.rs iters_for)."""
    return max(min(budget // size, iters), min(floor, iters))


def fmt(v):
    if v >= 100:
        return f"{v:.0f}"
    if v >= 10:
        return f"{v:.1f}"
    if v >= 1:
        return f"{v:.2f}"
    if v >= 0.1:
        return f"{v:.3f}"
    return f"{v:.4f}"


def size_str(s):
    for unit, b in (("M", 1 << 20), ("K", 1 << 10)):
        if s >= b and s % b == 0:
            return f"{s // b}{unit}"
    return str(s)


class Bench:
    def __init__(self, work):
        self.work = work
        self.cfg = json.load(open(f"{work}/config.json"))
        self.env = {}
        for line in open(f"{work}/env.txt"):
            k, _, v = line.rstrip("\n").partition("=")
            self.env[k] = v
        self.load = [line.split() for line in open(f"{work}/load.txt") if line.strip()]
        self.values = {}  # (net, variant, fig, size) -> [value per round]
        self.passed = 0
        self.problems = []

    def expected_iters(self, fig, size):
        c = self.cfg
        if fig == "lat":
            return iters_for(c["lat_iters"], c["lat_bytes"], size, c["min_iters"])
        if fig == "bw":
            return iters_for(c["bw_iters"], c["bw_bytes"], size, c["min_iters"])
        return c["rate_iters"]

    def sizes(self, fig):
        return [self.cfg["rate_size"]] if fig == "rate" else self.cfg["sizes"]

    def expected_iters_any(self, fig, size):
        return self.expected_iters("lat" if fig == "lat50" else fig, size)

    # ---- parsing each tool's output ----
    def parse_ours(self, fig, text, size=None):
        doc = json.loads(text)
        if doc.get("error"):
            raise ValueError(f"dat-perf error: {doc['error']}")
        key = {"lat": "avg", "bw": "mb_per_s", "rate": "mops"}[fig]
        test = {"lat": "send_lat", "bw": "send_bw", "rate": "msg_rate"}[fig]
        got = {}
        for row in doc["results"]:
            if row["test"] != test:
                raise ValueError(f"unexpected test {row['test']}")
            want = self.expected_iters(fig, row["size"])
            if row["iterations"] != want:
                raise ValueError(f"{row['size']} B ran {row['iterations']} iterations, not {want}")
            got[row["size"]] = float(row[key])
            if fig == "lat":
                got[("lat50", row["size"])] = float(row["median"])
        # One size per run (a connection each), or every size in one.
        wanted = [size] if size is not None else self.sizes(fig)
        if size is not None and set(k for k in got if not isinstance(k, tuple)) != {size}:
            raise ValueError(f"expected {size} B alone, got {sorted(k for k in got if not isinstance(k, tuple))}")
        missing = [s for s in wanted if s not in got]
        if missing:
            raise ValueError(f"no figure for sizes {missing}")
        return got

    def parse_ucx(self, fig, size, text):
        # -v: "iterations,50.0_percentile_lat,avg_lat,overall_lat,avg_bw,overall_bw,avg_mr,overall_mr";
        # the last line is the final one (progress lines may come before it).
        rows = [l.strip() for l in text.splitlines() if re.match(r"^\s*\d+,", l)]
        if not rows:
            raise ValueError("no result line from ucx_perftest")
        cols = rows[-1].split(",")
        if int(cols[0]) != self.expected_iters(fig, size):
            raise ValueError(f"ran {cols[0]} iterations, not {self.expected_iters(fig, size)}")
        v = {"lat": float(cols[3]), "bw": float(cols[5]), "rate": float(cols[7]) / 1e6}[fig]
        got = {size: v}
        if fig == "lat":
            got[("lat50", size)] = float(cols[1])
        return got

    def parse_ofi(self, fig, size, text):
        # bytes #sent #ack total time MB/sec usec/xfer Mxfers/sec
        for line in text.splitlines():
            m = re.match(r"^\S+\s+\S+\s+[=+-]\S+\s+\S+\s+[\d.]+s\s+[\d.]+\s+([\d.]+)\s+[\d.]+\s*$", line)
            if m:
                return {size: float(m.group(1))}
        raise ValueError("no result line from fi_pingpong")

    def read_runs(self):
        for line in open(f"{self.work}/runs.txt"):
            name, status, *why = line.split()
            parts = name.split(".")
            net, stack, fig = parts[1], parts[2], parts[3]
            if status != "ok":
                self.problems.append(f"{name}: did not complete ({' '.join(why)})")
                continue
            try:
                text = open(f"{self.work}/raw/{name}.out", errors="replace").read()
                if stack.startswith("ours"):
                    got = self.parse_ours(fig, text, None if parts[4] == "all" else int(parts[4]))
                elif stack == "ucx":
                    got = self.parse_ucx(fig, int(parts[4]), text)
                else:
                    got = self.parse_ofi(fig, int(parts[4]), text)
                for size, v in got.items():
                    if not v > 0 and not isinstance(size, tuple):
                        raise ValueError(f"{size} B: figure {v} is not positive")
            except (ValueError, KeyError, IndexError, OSError) as e:
                self.problems.append(f"{name}: {e}")
                continue
            self.passed += 1
            for size, v in got.items():
                f = fig
                if isinstance(size, tuple):  # a second figure from the same run
                    f, size = size
                self.values.setdefault((net, stack, f, size), []).append(v)

    # ---- summaries ----
    def variants(self, net, fig):
        """(key, column title) of every stack measured for this figure."""
        out = []
        stacks = self.cfg["stacks"].split()
        if "ours" in stacks:
            out += [(f"ours-{m}", f"ours {m}") for m in self.cfg["modes"].split()]
        for s in ("ucx", "ofi"):
            if s in stacks and not (s == "ofi" and fig != "lat"):
                out.append((s, OTHERS[net][s]))
        return out

    def med(self, net, variant, fig, size):
        v = self.values.get((net, variant, fig, size))
        return statistics.median(v) if v else None

    def cell(self, net, variant, fig, size):
        v = self.values.get((net, variant, fig, size))
        if not v:
            return "—"
        m = statistics.median(v)
        return fmt(m) if len(v) == 1 else f"{fmt(m)} ({fmt(min(v))}–{fmt(max(v))})"

    def best(self, net, fig, size, ours):
        """(value, label) of the best median among ours (modes) or the others."""
        lower = LOWER_IS_BETTER[fig]
        cands = []
        for key, title in self.variants(net, fig):
            if key.startswith("ours") != ours:
                continue
            m = self.med(net, key, fig, size)
            if m is not None:
                cands.append((m, title))
        if not cands:
            return None, None
        return (min if lower else max)(cands)

    def ratio(self, net, fig, size):
        o, ol = self.best(net, fig, size, True)
        b, bl = self.best(net, fig, size, False)
        if o is None or b is None:
            return None, o, ol, b, bl
        return o / b, o, ol, b, bl

    def table(self, net, fig):
        cols = self.variants(net, fig)
        if not cols:
            return []
        unit = {"lat": "µs, mean half round trip", "lat50": "µs, median of the per-iteration half round trips; fi_pingpong reports none", "bw": "MB/s = 2^20 B/s, window %d" % self.cfg["window"],
                "rate": "million messages/s, %d B, window %d" % (self.cfg["rate_size"], self.cfg["window"])}[fig]
        name = {"lat": "Ping-pong latency", "lat50": "Ping-pong latency, typical", "bw": "Bandwidth", "rate": "Message rate"}[fig]
        out = [f"{name} ({unit}); median of rounds (min–max):", ""]
        head = ["bytes", "iterations"] + [t for _, t in cols] + ["ours / best other"]
        out.append("| " + " | ".join(head) + " |")
        out.append("| " + " | ".join(["---:"] * 2 + ["---:"] * len(cols) + ["---:"]) + " |")
        for size in self.sizes(fig):
            r, *_ = self.ratio(net, fig, size)
            row = [size_str(size), str(self.expected_iters_any(fig, size))]
            row += [self.cell(net, k, fig, size) for k, _ in cols]
            row.append("—" if r is None else f"{r:.2f}")
            out.append("| " + " | ".join(row) + " |")
        out.append("")
        return out

    def verdict(self, title, net, fig, sizes, target_note):
        """One target line: met if ours' best mode is at least even with the best other at every size."""
        lower = LOWER_IS_BETTER[fig]
        rows = [(s, *self.ratio(net, fig, s)) for s in sizes]
        rows = [r for r in rows if r[1] is not None]
        if not rows:
            return f"| {title} | — | — | — | not measured |"
        ok = [r for r in rows if (r[1] <= 1.0 if lower else r[1] >= 1.0)]
        worst = max(rows, key=lambda r: r[1]) if lower else min(rows, key=lambda r: r[1])
        s, ratio, o, ol, b, bl = worst
        where = f" at {size_str(s)}" if len(rows) > 1 else ""
        met = len(ok) == len(rows)
        verdict = "**met**" if met else "**missed**"
        count = f" ({len(ok)} of {len(rows)} sizes)" if len(rows) > 1 else ""
        return (f"| {title} | {fmt(o)} ({ol}){where} | {fmt(b)} ({bl}) | {ratio:.3f} | "
                f"{verdict}{count}, {target_note} |")

    def report(self):
        c, e = self.cfg, self.env
        out = ["# Host benchmark: ours beside UCX and libfabric", ""]
        out.append(f"- when: {e.get('started')}, {e.get('took', '?')} for {c['rounds']} round(s); command `{e.get('command')}`")
        out.append(f"- machine: {e.get('cpu')}, kernel {e.get('host_kernel')}; pinning: {e.get('pinning')}")
        if e.get('tcp_cc'):
            out.append(f"- TCP congestion control: {e['tcp_cc']}")
        out.append(f"- load: at start `{e.get('uptime_start', '').strip()}`; at end `{e.get('uptime_end', '').strip()}`")
        if self.load:
            out.append("- load average (1, 5, 15 min) after each round: " +
                       "; ".join(f"round {l[0]}: {' '.join(l[1:4])}" for l in self.load))
        # tools/line-probe.c: on-node figures move with it (a VM's vCPUs are
        # placed anew now and then); tables compare at about the same figure.
        lines = [e.get('line_start', '')] + [l[4] for l in self.load if len(l) > 4]
        if any(x not in ('', 'n/a', '?') for x in lines):
            out.append("- a cache line between the pinned CPUs, one way (ns; tools/line-probe.c): at start "
                       + lines[0] + (", after each round " + ", ".join(lines[1:]) if len(lines) > 1 else ""))
        out.append(f"- ours: {e.get('ours')}, commit {e.get('commit')}")
        out.append(f"- others: {e.get('packages')}")
        out.append(f"- iterations per size, every stack: min(N, max({c['min_iters']}, B / size)) with latency "
                   f"N = {c['lat_iters']}, B = {size_str(c['lat_bytes'])}; bandwidth N = {c['bw_iters']}, "
                   f"B = {size_str(c['bw_bytes'])}; message rate {c['rate_iters']}; warm-up {c['warmup']} "
                   f"(fi_pingpong has none); window {c['window']}")
        out.append("")
        for net in c["nets"].split():
            out.append(f"## {NET_TITLE[net]}")
            out.append("")
            for fig in FIGS:
                out += self.table(net, fig)
        out += ["## Targets", "",
                "Ours is the better of its modes (median over rounds) at each size; best other is the best of "
                "the others' medians. Latency ratio ≤ 1 and bandwidth/rate ratio ≥ 1 meet a target.", "",
                "| target | ours | best other | ours / best | verdict |", "| --- | ---: | ---: | ---: | --- |"]
        nets = c["nets"].split()
        big = [s for s in c["sizes"] if s >= 65536]
        rs = c["rate_size"]
        if "node" in nets:
            out.append(self.verdict("on-node latency, 8 B", "node", "lat", [s for s in c["sizes"] if s == 8], "≤ best shared memory"))
            out.append(self.verdict("(on-node latency, 8 B, typical)", "node", "lat50", [s for s in c["sizes"] if s == 8], "informative: per-iteration median, UCX only"))
            out.append(self.verdict("on-node bandwidth, ≥ 64 KiB", "node", "bw", big, "≥ 1.0× best (UCX only: no libfabric stream test)"))
            out.append(self.verdict(f"on-node message rate, {rs} B window {c['window']}", "node", "rate", [rs], "≥ best (UCX only)"))
        if "tcp" in nets:
            out.append(self.verdict("TCP latency, 8 B", "tcp", "lat", [s for s in c["sizes"] if s == 8], "≤ best tcp"))
            out.append(self.verdict("(TCP latency, 8 B, typical)", "tcp", "lat50", [s for s in c["sizes"] if s == 8], "informative: per-iteration median, UCX only"))
            out.append(self.verdict("TCP latency, every size", "tcp", "lat", c["sizes"], "≤ best tcp"))
            out.append(self.verdict("TCP bandwidth, ≥ 64 KiB", "tcp", "bw", big, "≥ best tcp (UCX only)"))
            out.append(self.verdict(f"TCP message rate, {rs} B window {c['window']}", "tcp", "rate", [rs], "≥ best (UCX only)"))
        out.append("")
        if self.problems:
            out.append("Runs that gave no figure:")
            out += [f"- {p}" for p in self.problems]
            out.append("")
        out.append(f"bench-host: {self.passed} passed, {len(self.problems)} failed")
        return "\n".join(out)


def main():
    if len(sys.argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    b = Bench(sys.argv[1])
    b.read_runs()
    print(b.report())
    return 1 if b.problems or b.passed == 0 else 0


if __name__ == "__main__":
    sys.exit(main())
