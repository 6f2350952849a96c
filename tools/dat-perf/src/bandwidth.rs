//! Streams of sends, RDMA writes or RDMA reads with up to `window` in
//! flight: bandwidth, bi-directional bandwidth and message rate.

use crate::args::Op;
use crate::conn::{Kind, Post, Session};
use crate::progress::Progress;
use crate::proto::TestReq;
use std::time::Instant;

/// The measured stretch of a stream.
pub struct Span {
    pub start: Instant,
    pub end: Instant,
}

/// Whether post `i` (0-based) of a stream of `n`, the first `warmup` of
/// them untimed, asks for a completion: every `every`-th one, and the last
/// of the warm-up and of the stream, whose completions start and stop the
/// clock.
pub fn signaled(i: u64, n: u64, warmup: u64, every: u64) -> bool {
    i % every == every - 1 || i + 1 == warmup || i + 1 == n
}

/// Posts done after a signaled completion whose cookie carries `seq`, with
/// `done` before it. Completions come in posting order, so it closes every
/// post up to its own. `seq` is the post's index modulo 2^32; the window
/// keeps fewer than 2^32 posts past `done`, so the index is the first at or
/// after `done` with that remainder.
pub fn done_after(done: u64, seq: u32) -> u64 {
    done + u64::from(seq.wrapping_sub(done as u32)) + 1
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
    let every = req.signal.max(1) as u64;
    let rx_total = s.rx_expected();
    let (mut posted, mut done) = (0u64, 0u64);
    let mut start = (req.warmup == 0 || !sender).then(Instant::now);
    loop {
        while posted < n && posted - done < window {
            let p = Post { seq: posted as u32, signaled: signaled(posted, n, req.warmup, every) };
            match op {
                Op::Send => s.post_send(req.size, p)?,
                Op::Write => s.post_write(req.size, p)?,
                Op::Read => s.post_read(req.size, p)?,
            }
            posted += 1;
        }
        if done == n && s.rx_done() >= rx_total {
            break;
        }
        let (k, seq) = s.next_data_seq()?;
        if k == kind {
            let after = done_after(done, seq);
            if after > posted {
                return Err(format!("{kind:?} completion for post {} when {done} of {posted} were done", after - 1));
            }
            done = after;
            if done >= req.warmup && start.is_none() {
                start = Some(Instant::now());
            }
            progress.tick(done);
        }
    }
    let end = Instant::now();
    Ok(Span { start: start.unwrap_or(end), end })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pattern(n: u64, warmup: u64, every: u64) -> Vec<u64> {
        (0..n).filter(|&i| signaled(i, n, warmup, every)).collect()
    }

    #[test]
    fn which_posts_are_signaled() {
        assert_eq!(pattern(5, 2, 1), [0, 1, 2, 3, 4]);
        assert_eq!(pattern(10, 0, 4), [3, 7, 9]);
        assert_eq!(pattern(10, 3, 4), [2, 3, 7, 9]);
        assert_eq!(pattern(8, 4, 4), [3, 7]);
        assert_eq!(pattern(3, 0, 64), [2]);
        assert_eq!(pattern(1, 1, 16), [0]);
    }

    /// Any `window` posts in a row past the last completion hold a
    /// signaled one, or end the stream with one: the window never stalls.
    #[test]
    fn a_full_window_holds_a_signaled_post() {
        for (n, warmup, window) in [(1000, 100, 64), (37, 5, 8), (7, 0, 3), (64, 64, 16)] {
            for every in 1..=window {
                let sig = pattern(n, warmup, every);
                assert_eq!(sig.last(), Some(&(n - 1)));
                if warmup > 0 {
                    assert!(sig.contains(&(warmup - 1)));
                }
                for first in 0..n {
                    let last = (first + window - 1).min(n - 1);
                    assert!(sig.iter().any(|&i| (first..=last).contains(&i)), "n {n} warmup {warmup} every {every} from {first}");
                }
            }
        }
    }

    #[test]
    fn done_after_a_completion() {
        assert_eq!(done_after(0, 0), 1);
        assert_eq!(done_after(0, 15), 16);
        assert_eq!(done_after(16, 31), 32);
        assert_eq!(done_after(100, 100), 101);
        // Past 2^32 posts the cookie holds the index modulo 2^32.
        let base = 3u64 << 32;
        assert_eq!(done_after(base - 10, 5), base + 6);
        assert_eq!(done_after(base + 7, 7), base + 8);
        assert_eq!(done_after(base - 1, u32::MAX), base);
        // A completion for a post already done reads as one 2^32 ahead,
        // which the stream rejects as beyond what it posted.
        assert_eq!(done_after(10, 5), 10 + (1 << 32) - 4);
    }

    /// Replays a stream's accounting as the provider would complete it:
    /// in order, only signaled posts reported.
    #[test]
    fn accounting_reaches_every_post() {
        for (n, warmup, window, every) in [(1000u64, 100u64, 64u64, 16u64), (50, 7, 8, 8), (10, 0, 4, 3), (5, 5, 1, 1)] {
            let (mut posted, mut done, mut reported) = (0u64, 0u64, 0u64);
            let mut warm_done_at = None;
            while done < n {
                while posted < n && posted - done < window {
                    posted += 1;
                }
                let next = (reported..posted).find(|&i| signaled(i, n, warmup, every)).expect("a signaled post in flight");
                reported = next + 1;
                let after = done_after(done, next as u32);
                assert!(after <= posted);
                done = after;
                if done >= warmup && warm_done_at.is_none() {
                    warm_done_at = Some(done);
                }
            }
            assert_eq!(done, n);
            if warmup > 0 {
                // The clock starts with the warm-up's last post, not after it.
                assert_eq!(warm_done_at, Some(warmup));
            }
        }
    }
}
