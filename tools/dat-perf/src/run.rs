//! The two sides of a run. The client walks its test list and, per test and
//! size, tells the server what to do; the server only follows.
//!
//! Per test: client posts its data receives (and the control receive for
//! Fin after them), sends Test; server posts its data receives (and the
//! control receive for Done after them), answers Ack; both run their side;
//! client sends Done; server posts the receive for the next Test, answers Fin;
//! client posts the receive for the next Ack.

use crate::args::{Args, Mode, Op, Test};
use crate::bandwidth;
use crate::conn::Session;
use crate::dat::Dat;
use crate::latency;
use crate::progress::Progress;
use crate::proto::{Ctrl, NAK_BAD_TEST, NAK_TOO_BIG, TestReq};
use crate::report::{Figures, Row};
use std::time::Duration;

/// Data receives a side needs for a test of `n` operations.
pub fn rx_total(test: Test, server: bool, n: u64) -> u64 {
    match test {
        Test::SendLat | Test::SendBibw => n,
        Test::SendBw | Test::MsgRate if server => n,
        _ => 0,
    }
}

/// Why a test of this size cannot run on these endpoints, if it cannot.
pub fn check_fit(req: &TestReq, ours: (u64, u32), peer: (u64, u32), max_message: u64, max_rdma: u64) -> Result<(), String> {
    let name = req.test.name();
    if req.size > ours.0 || req.size > peer.0 {
        return Err(format!("{name}: size {} exceeds the registered buffers ({} here, {} on the server)", req.size, ours.0, peer.0));
    }
    let limit = if req.test.op() == Op::Send { max_message } else { max_rdma };
    if limit > 0 && req.size > limit {
        let what = if req.test.op() == Op::Send { "max_message_size" } else { "max_rdma_size" };
        return Err(format!("{name}: size {} exceeds the IA's {what} {limit}", req.size));
    }
    let depth = ours.1.min(peer.1);
    if !req.test.is_latency() && req.window + 8 > depth {
        return Err(format!("{name}: window {} does not fit queue depth {depth} (here {}, server {})", req.window, ours.1, peer.1));
    }
    Ok(())
}

/// What the client's own argument checks rule out, checked again on the
/// server against a client of another build.
pub fn check_req(req: &TestReq) -> Result<(), String> {
    if req.iters == 0 {
        return Err("the client asked for zero iterations".into());
    }
    // A stream waits for signaled completions only, so a full window must hold one.
    if !req.test.is_latency() && (req.signal == 0 || req.signal > req.window) {
        return Err(format!("the client asked for a completion every {} posts with a window of {}", req.signal, req.window));
    }
    Ok(())
}

fn expect(s: &mut Session, want: Ctrl) -> Result<(), String> {
    match s.wait_ctrl()? {
        c if c == want => Ok(()),
        Ctrl::Nak(NAK_TOO_BIG) => Err("the server cannot run this test: size or window beyond its buffers or queues".into()),
        Ctrl::Nak(code) => Err(format!("the server refused the test (code {code})")),
        c => Err(format!("protocol error: expected {want:?}, got {c:?}")),
    }
}

/// Buffers sized for the largest message any network test will use.
fn area_for(args: &Args) -> u64 {
    args.tests.iter().filter(|t| !t.is_local()).flat_map(|t| args.sizes_for(*t)).max().unwrap_or(64).max(64)
}

/// Runs one test; returns its row and, for a latency test, the time of
/// each measured iteration (µs).
fn client_test(s: &mut Session, req: TestReq, quiet: bool) -> Result<(Row, Vec<f64>), String> {
    let n = req.warmup + req.iters;
    s.begin_rx(req.size, rx_total(req.test, false, n))?;
    if req.test == Test::WriteLat {
        s.buf().set(req.size as usize - 1, 0);
    }
    s.send_ctrl(Ctrl::Test(req))?;
    expect(s, Ctrl::Ack)?;
    let mut progress = Progress::new(format!("{} {} B", req.test.name(), req.size), n, !quiet);
    let mut samples = Vec::new();
    let row = if req.test.is_latency() {
        samples = latency::client(s, &req, &mut progress)?;
        Row::times(req.test, req.size, req.iters, req.warmup, req.mode, &samples)?
    } else {
        let span = bandwidth::stream(s, &req, true, &mut progress)?;
        let dirs = if req.test.bidirectional() { 2.0 } else { 1.0 };
        let ops = req.iters as f64 * dirs;
        Row {
            test: req.test,
            size: req.size,
            iters: req.iters,
            warmup: req.warmup,
            window: req.window,
            signal: req.signal,
            mode: req.mode,
            figures: Figures::Rate { bytes: ops * req.size as f64, ops, secs: (span.end - span.start).as_secs_f64() },
        }
    };
    drop(progress);
    s.send_ctrl(Ctrl::Done)?;
    expect(s, Ctrl::Fin)?;
    s.post_ctrl_recv()?;
    Ok((row, samples))
}

/// Client: connects, runs every network test at every size, returns the rows.
pub fn client(dat: &Dat, args: &Args, on_row: &mut dyn FnMut(&Row)) -> Result<Vec<Row>, String> {
    let ia = args.ia.as_deref().expect("checked by args");
    let server = args.server.as_deref().expect("client");
    let mut s = Session::open(dat, ia, args.depth, args.mode, Duration::from_secs(args.timeout_s))?;
    let area = area_for(args);
    s.register_data(area)?;
    s.connect(server, args.port)?;
    let hello = s.hello();
    s.send_ctrl(hello)?;
    let peer = s.wait_ctrl()?;
    s.set_peer(peer)?;
    let mut out = match &args.samples {
        Some(path) => Some(std::io::BufWriter::new(std::fs::File::create(path).map_err(|e| format!("--samples {path}: {e}"))?)),
        None => None,
    };
    let mut rows = Vec::new();
    for &test in args.tests.iter().filter(|t| !t.is_local()) {
        for size in args.sizes_for(test) {
            let req = TestReq { test, size, iters: args.iters_for(size), warmup: args.warmup, window: args.window, signal: args.signal, mode: args.mode };
            check_fit(&req, (s.area, s.depth), (s.peer.len, s.peer.depth), s.max_message(), s.max_rdma())?;
            let (row, samples) = client_test(&mut s, req, args.quiet).map_err(|e| format!("{} {size} B: {e}", test.name()))?;
            if let Some(out) = out.as_mut() {
                write_samples(out, test, size, &samples).map_err(|e| format!("--samples: {e}"))?;
            }
            on_row(&row);
            rows.push(row);
        }
    }
    s.send_ctrl(Ctrl::Quit)?;
    s.flush_ctrl_sends()?;
    Ok(rows)
}

fn write_samples(out: &mut impl std::io::Write, test: Test, size: u64, samples: &[f64]) -> std::io::Result<()> {
    for (i, us) in samples.iter().enumerate() {
        writeln!(out, "{} {size} {i} {us:.3}", test.name())?;
    }
    out.flush()
}

fn serve_test(s: &mut Session, req: TestReq) -> Result<(), String> {
    if let Err(e) = check_fit(&req, (s.area, s.depth), (s.peer.len, s.peer.depth), s.max_message(), s.max_rdma()) {
        s.send_ctrl(Ctrl::Nak(NAK_TOO_BIG))?;
        s.flush_ctrl_sends()?;
        return Err(e);
    }
    if let Err(e) = check_req(&req) {
        s.send_ctrl(Ctrl::Nak(NAK_BAD_TEST))?;
        s.flush_ctrl_sends()?;
        return Err(e);
    }
    s.mode = req.mode;
    let n = req.warmup + req.iters;
    s.begin_rx(req.size, rx_total(req.test, true, n))?;
    if req.test == Test::WriteLat {
        s.buf().set(req.size as usize - 1, 0);
    }
    s.send_ctrl(Ctrl::Ack)?;
    if req.test.is_latency() {
        latency::server(s, &req)?;
    } else {
        let mut quiet = Progress::new(String::new(), n, false);
        bandwidth::stream(s, &req, req.test.bidirectional(), &mut quiet)?;
    }
    match s.wait_ctrl()? {
        Ctrl::Done => {}
        c => return Err(format!("protocol error: expected Done, got {c:?}")),
    }
    s.post_ctrl_recv()?;
    s.send_ctrl(Ctrl::Fin)
}

/// Server: accepts one client and follows it until it quits.
pub fn server(dat: &Dat, args: &Args, quiet: bool) -> Result<u64, String> {
    let ia = args.ia.as_deref().expect("checked by args");
    let mut s = Session::open(dat, ia, args.depth, Mode::Poll, Duration::from_secs(args.timeout_s))?;
    if !quiet {
        eprintln!("dat-perf: server on IA {ia}, conn_qual {}, waiting for a client", args.port);
    }
    s.accept(args.port)?;
    let hello = s.wait_ctrl()?;
    s.set_peer(hello)?;
    // The client says how large its messages get; our buffers match.
    let area = s.peer.len;
    if area == 0 || area > crate::args::MAX_SIZE {
        return Err(format!("the client asked for a {area}-byte buffer"));
    }
    s.register_data(area)?;
    let hello = s.hello();
    s.send_ctrl(hello)?;
    let mut tests = 0;
    loop {
        match s.wait_ctrl()? {
            Ctrl::Test(req) => {
                serve_test(&mut s, req).map_err(|e| format!("{} {} B: {e}", req.test.name(), req.size))?;
                tests += 1;
            }
            Ctrl::Quit => break,
            c => return Err(format!("protocol error: expected a test request, got {c:?}")),
        }
    }
    if s.strays > 0 && !quiet {
        eprintln!("dat-perf: note: {} data completions arrived between tests", s.strays);
    }
    Ok(tests)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req(test: Test, size: u64, window: u32) -> TestReq {
        TestReq { test, size, iters: 10, warmup: 1, window, signal: 1, mode: Mode::Poll }
    }

    #[test]
    fn requests() {
        assert!(check_req(&req(Test::SendBw, 64, 64)).is_ok());
        assert!(check_req(&TestReq { signal: 64, ..req(Test::MsgRate, 8, 64) }).is_ok());
        assert!(check_req(&TestReq { signal: 65, ..req(Test::MsgRate, 8, 64) }).unwrap_err().contains("every 65 posts"));
        assert!(check_req(&TestReq { signal: 0, ..req(Test::ReadBibw, 8, 64) }).is_err());
        // Latency tests post one at a time and signal each: no window to fit.
        assert!(check_req(&TestReq { signal: 16, ..req(Test::SendLat, 8, 1) }).is_ok());
        assert!(check_req(&TestReq { iters: 0, ..req(Test::SendBw, 8, 64) }).unwrap_err().contains("zero"));
    }

    #[test]
    fn samples_are_one_line_per_iteration() {
        let mut out = Vec::new();
        write_samples(&mut out, Test::SendLat, 4096, &[4.25, 10.5]).unwrap();
        assert_eq!(String::from_utf8(out).unwrap(), "send_lat 4096 0 4.250\nsend_lat 4096 1 10.500\n");
    }

    #[test]
    fn receive_plans() {
        assert_eq!(rx_total(Test::SendLat, false, 7), 7);
        assert_eq!(rx_total(Test::SendLat, true, 7), 7);
        assert_eq!(rx_total(Test::SendBw, false, 7), 0);
        assert_eq!(rx_total(Test::SendBw, true, 7), 7);
        assert_eq!(rx_total(Test::MsgRate, true, 7), 7);
        assert_eq!(rx_total(Test::SendBibw, false, 7), 7);
        assert_eq!(rx_total(Test::WriteBibw, true, 7), 0);
        assert_eq!(rx_total(Test::ReadLat, true, 7), 0);
    }

    #[test]
    fn fits() {
        let ok = |r: &TestReq| check_fit(r, (65536, 512), (65536, 512), 1 << 30, 1 << 30);
        assert!(ok(&req(Test::SendBw, 65536, 64)).is_ok());
        assert!(ok(&req(Test::SendBw, 65537, 64)).unwrap_err().contains("registered buffers"));
        assert!(ok(&req(Test::SendBw, 64, 505)).unwrap_err().contains("queue depth"));
        assert!(ok(&req(Test::SendLat, 64, 505)).is_ok());
        assert!(check_fit(&req(Test::WriteBw, 4096, 1), (1 << 20, 512), (1 << 20, 512), 1 << 30, 1024).unwrap_err().contains("max_rdma_size"));
        assert!(check_fit(&req(Test::SendLat, 4096, 1), (1 << 20, 512), (1 << 20, 512), 1024, 0).unwrap_err().contains("max_message_size"));
        assert!(check_fit(&req(Test::MsgRate, 64, 64), (64, 512), (64, 64), 0, 0).unwrap_err().contains("server 64"));
    }
}
