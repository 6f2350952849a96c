//! Streams of sends, RDMA writes or RDMA reads with up to `window` in
//! flight: bandwidth, bi-directional bandwidth and message rate.

use crate::args::Op;
use crate::conn::{Kind, Session};
use crate::progress::Progress;
use crate::proto::TestReq;
use std::time::Instant;

/// The measured stretch of a stream.
pub struct Span {
    pub start: Instant,
    pub end: Instant,
}

/// Posts warmup+iters operations (if `sender`) and waits for the receives
/// the plan expects. The clock starts when the warm-up operations have
/// completed, so the measured part runs with the pipeline already full.
pub fn stream(s: &mut Session, req: &TestReq, sender: bool, progress: &mut Progress) -> Result<Span, String> {
    let n = if sender { req.warmup + req.iters } else { 0 };
    let op = req.test.op();
    let kind = match op {
        Op::Send => Kind::SendData,
        Op::Write => Kind::Write,
        Op::Read => Kind::Read,
    };
    let window = req.window as u64;
    let rx_total = s.rx_expected();
    let (mut posted, mut done) = (0u64, 0u64);
    let mut start = (req.warmup == 0 || !sender).then(Instant::now);
    loop {
        while posted < n && posted - done < window {
            match op {
                Op::Send => s.post_send(req.size)?,
                Op::Write => s.post_write(req.size)?,
                Op::Read => s.post_read(req.size)?,
            }
            posted += 1;
        }
        if done == n && s.rx_done() >= rx_total {
            break;
        }
        if s.next_data()? == kind {
            done += 1;
            if done == req.warmup && start.is_none() {
                start = Some(Instant::now());
            }
            progress.tick(done);
        }
    }
    let end = Instant::now();
    Ok(Span { start: start.unwrap_or(end), end })
}
