//! Results: perftest-style text tables and JSON.

use crate::args::{Mode, Test};
use tool_common::Json;
use crate::stats::{Summary, mb_per_s, mops, summarize};

#[derive(Debug, Clone, PartialEq)]
pub enum Figures {
    /// Per-iteration times, microseconds.
    Times(Summary),
    /// Bytes moved (both directions for bi-directional tests) and operations, in `secs`.
    Rate { bytes: f64, ops: f64, secs: f64 },
}

#[derive(Debug, Clone, PartialEq)]
pub struct Row {
    pub test: Test,
    pub size: u64,
    pub iters: u64,
    pub warmup: u64,
    pub window: u32,
    /// Every how many posts one asked for a completion (1 for latency).
    pub signal: u32,
    pub mode: Mode,
    pub figures: Figures,
}

impl Row {
    pub fn times(test: Test, size: u64, iters: u64, warmup: u64, mode: Mode, samples: &[f64]) -> Result<Row, String> {
        let s = summarize(samples).ok_or_else(|| format!("{} {size} B: no samples", test.name()))?;
        Ok(Row { test, size, iters, warmup, window: 1, signal: 1, mode, figures: Figures::Times(s) })
    }
}

fn describe(t: Test) -> &'static str {
    match t {
        Test::SendLat => "send/recv ping-pong latency, half the round trip",
        Test::WriteLat => "RDMA write ping-pong latency (memory polled), half the round trip",
        Test::ReadLat => "RDMA read latency, whole read",
        Test::SendBw => "send bandwidth",
        Test::WriteBw => "RDMA write bandwidth",
        Test::ReadBw => "RDMA read bandwidth",
        Test::SendBibw => "send bi-directional bandwidth (both directions added)",
        Test::WriteBibw => "RDMA write bi-directional bandwidth (both directions added)",
        Test::ReadBibw => "RDMA read bi-directional bandwidth (both directions added)",
        Test::MsgRate => "send message rate",
        Test::LmrReg => "dat_lmr_create + dat_lmr_free",
        Test::IbvReg => "ibv_reg_mr + ibv_dereg_mr (native verbs)",
    }
}

const RULE: &str = "---------------------------------------------------------------------------------------------";

/// Prints rows as they come: a header when the test or mode changes, a
/// rule at the end, so a long run shows each figure as soon as it exists.
#[derive(Default)]
pub struct Printer {
    last: Option<(Test, Mode, u32)>,
}

impl Printer {
    pub fn row(&mut self, r: &Row) -> String {
        let mut out = String::new();
        if self.last != Some((r.test, r.mode, r.signal)) {
            self.last = Some((r.test, r.mode, r.signal));
            out.push_str(RULE);
            out.push('\n');
            // The header, not a column: scripts (tools/bench.sh, guest-check.sh)
            // tell rows apart by their field count and read the mode at its end.
            let signal = if r.signal > 1 { format!(", a completion every {} posts", r.signal) } else { String::new() };
            let mode = if r.test.is_local() { String::new() } else { format!(", mode {}", r.mode.name()) };
            out.push_str(&format!(" {}: {}{signal}{mode}\n", r.test.name(), describe(r.test)));
            match r.figures {
                Figures::Times(_) => out.push_str(&format!(
                    " {:<10} {:>11} {:>9} {:>14} {:>16} {:>12} {:>12} {:>12}\n",
                    "#bytes", "#iterations", "#warmup", "t_min[usec]", "t_typical[usec]", "t_p99[usec]", "t_avg[usec]", "t_max[usec]"
                )),
                Figures::Rate { .. } => out.push_str(&format!(
                    " {:<10} {:>11} {:>9} {:>8} {:>19} {:>16} {:>10}\n",
                    "#bytes", "#iterations", "#warmup", "window", "BW average[MB/sec]", "MsgRate[Mops/s]", "time[s]"
                )),
            }
        }
        match &r.figures {
            Figures::Times(s) => out.push_str(&format!(
                " {:<10} {:>11} {:>9} {:>14.2} {:>16.2} {:>12.2} {:>12.2} {:>12.2}\n",
                r.size, r.iters, r.warmup, s.min, s.median, s.p99, s.avg, s.max
            )),
            Figures::Rate { bytes, ops, secs } => out.push_str(&format!(
                " {:<10} {:>11} {:>9} {:>8} {:>19.2} {:>16.4} {:>10.3}\n",
                r.size,
                r.iters,
                r.warmup,
                r.window,
                mb_per_s(*bytes, *secs),
                mops(*ops, *secs),
                secs
            )),
        }
        out
    }

    /// The closing rule, if anything was printed.
    pub fn end(&self) -> String {
        if self.last.is_some() { format!("{RULE}\n") } else { String::new() }
    }
}

/// One block per test and mode, in the order the rows came.
#[cfg(test)]
pub fn text(rows: &[Row]) -> String {
    let mut p = Printer::default();
    let mut out: String = rows.iter().map(|r| p.row(r)).collect();
    out.push_str(&p.end());
    out
}

pub fn row_json(r: &Row) -> Json {
    let mut o = Json::obj();
    o.set("test", r.test.name()).set("size", r.size).set("iterations", r.iters).set("warmup", r.warmup);
    if !r.test.is_local() {
        o.set("mode", r.mode.name());
    }
    match &r.figures {
        Figures::Times(s) => {
            o.set("unit", "usec")
                .set("min", s.min)
                .set("median", s.median)
                .set("p99", s.p99)
                .set("avg", s.avg)
                .set("max", s.max);
        }
        Figures::Rate { bytes, ops, secs } => {
            o.set("window", r.window)
                .set("signal", r.signal)
                .set("bytes", *bytes)
                .set("ops", *ops)
                .set("seconds", *secs)
                .set("mb_per_s", mb_per_s(*bytes, *secs))
                .set("mops", mops(*ops, *secs));
        }
    }
    o
}

/// The whole run: where it ran, then every row.
pub fn json(header: Vec<(&str, Json)>, rows: &[Row]) -> Json {
    let mut o = Json::obj();
    o.set("tool", "dat-perf");
    for (k, v) in header {
        o.set(k, v);
    }
    o.set("results", Json::Arr(rows.iter().map(row_json).collect()));
    o
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rows() -> Vec<Row> {
        vec![
            Row::times(Test::SendLat, 64, 4, 1, Mode::Poll, &[1.0, 2.0, 3.0, 10.0]).unwrap(),
            Row {
                test: Test::WriteBw,
                size: 65536,
                iters: 100,
                warmup: 10,
                window: 64,
                signal: 1,
                mode: Mode::Wait,
                figures: Figures::Rate { bytes: 100.0 * 65536.0, ops: 100.0, secs: 0.5 },
            },
        ]
    }

    #[test]
    fn text_table() {
        let t = text(&rows());
        assert!(t.contains(" send_lat: send/recv ping-pong latency, half the round trip, mode poll\n"), "{t}");
        assert!(t.contains("t_typical[usec]"));
        let lat = t.lines().find(|l| l.starts_with(" 64 ")).unwrap();
        let f: Vec<&str> = lat.split_whitespace().collect();
        assert_eq!(f, ["64", "4", "1", "1.00", "2.50", "10.00", "4.00", "10.00"]);
        let bw = t.lines().find(|l| l.starts_with(" 65536 ")).unwrap();
        let f: Vec<&str> = bw.split_whitespace().collect();
        assert_eq!(f, ["65536", "100", "10", "64", "12.50", "0.0002", "0.500"]);
        assert!(t.contains(" write_bw: RDMA write bandwidth, mode wait\n"));
    }

    #[test]
    fn json_rows() {
        let j = json(vec![("ia", Json::from("ibv-rxe"))], &rows()).render();
        assert!(j.starts_with("{\n  \"tool\": \"dat-perf\",\n  \"ia\": \"ibv-rxe\",\n  \"results\": ["), "{j}");
        assert!(j.contains("\"test\": \"send_lat\""));
        assert!(j.contains("\"median\": 2.500"));
        assert!(j.contains("\"p99\": 10.000"));
        assert!(j.contains("\"mb_per_s\": 12.500"));
        assert!(j.contains("\"mops\": 0.000"));
        assert!(j.contains("\"mode\": \"wait\""));
    }

    #[test]
    fn signal_in_header_and_json() {
        let mut r = rows();
        assert!(!text(&r).contains("completion every"));
        assert!(json(vec![], &r).render().contains("\"signal\": 1"));
        r[1].signal = 16;
        let t = text(&r);
        assert!(t.contains(" write_bw: RDMA write bandwidth, a completion every 16 posts, mode wait\n"), "{t}");
        let bw = t.lines().find(|l| l.starts_with(" 65536 ")).unwrap();
        assert_eq!(bw.split_whitespace().count(), 7);
        let j = json(vec![], &r).render();
        assert!(j.contains("\"signal\": 16"), "{j}");
        // Latency rows carry neither window nor signal.
        assert_eq!(j.matches("\"signal\"").count(), 1);
    }

    #[test]
    fn empty() {
        assert_eq!(text(&[]), "");
        assert!(Row::times(Test::ReadLat, 1, 0, 0, Mode::Poll, &[]).is_err());
    }
}
