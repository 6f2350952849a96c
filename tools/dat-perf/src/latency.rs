//! Ping-pong and read latency. Every iteration is timed from the previous
//! one's, so posting, reaping and reposting are all in the figure. The
//! clock is read, a ping-pong's receive reposted and the progress line
//! ticked right after the post, while the message flies: before it, they
//! delayed every message (the clock about 20 ns, the repost about 250
//! instructions a side on-node).
//! The last sample, after the last answer, holds no post: one in the run.

use crate::args::Test;
use crate::conn::{Kind, Post, Session};
use crate::progress::Progress;
use crate::proto::TestReq;
use std::time::{Duration, Instant};

/// Changes every iteration and is never 0, which is what a cleared target holds.
fn marker(i: u64) -> u8 {
    (i % 255) as u8 + 1
}

/// Spins until the last byte of our target area holds `m`, reaping our own
/// completions meanwhile; returns how many RDMA writes completed.
fn await_marker(s: &mut Session, size: u64, m: u8) -> Result<u64, String> {
    let at = (size - 1) as usize;
    let mut completed = 0;
    let mut spins = 0u32;
    let mut deadline: Option<Instant> = None;
    while s.buf().get(at) != m {
        if let Some(Kind::Write) = s.poll_data()? {
            completed += 1;
        }
        spins += 1;
        if spins & 4095 == 0 {
            let now = Instant::now();
            match deadline {
                None => deadline = Some(now + s.timeout),
                Some(d) if now > d => return Err(format!("peer's RDMA write did not arrive within {} s", s.timeout.as_secs())),
                _ => {}
            }
        }
    }
    Ok(completed)
}

/// Waits until `n` completions of `kind` have been seen in all.
fn reap(s: &mut Session, kind: Kind, seen: &mut u64, n: u64) -> Result<(), String> {
    while *seen < n {
        if s.next_data()? == kind {
            *seen += 1;
        }
    }
    Ok(())
}

fn micros(d: Duration) -> f64 {
    d.as_secs_f64() * 1e6
}

/// Client side; returns one sample per measured iteration, in microseconds.
pub fn client(s: &mut Session, req: &TestReq, progress: &mut Progress) -> Result<Vec<f64>, String> {
    let n = req.warmup + req.iters;
    let size = req.size;
    let mut stamps: Vec<Instant> = Vec::with_capacity(n as usize + 1);
    // Touched before the clock starts: a page of stamps faulted in on the
    // way, one in 256 iterations, about 2 µs each on the benchmark host.
    stamps.resize(n as usize + 1, Instant::now());
    stamps.clear();
    let mut done = 0u64;
    match req.test {
        Test::SendLat => {
            s.lazy_refill();
            for i in 0..n {
                s.post_send(size, Post::EACH)?;
                stamps.push(Instant::now());
                s.refill()?;
                progress.tick(i);
                while s.rx_done() < i + 1 {
                    if s.next_data()? == Kind::SendData {
                        done += 1;
                    }
                }
            }
            stamps.push(Instant::now());
            reap(s, Kind::SendData, &mut done, n)?;
            s.refill()?;
        }
        Test::WriteLat => {
            let src = (s.area + size - 1) as usize;
            for i in 0..n {
                s.buf().set(src, marker(i));
                s.post_write(size, Post::EACH)?;
                stamps.push(Instant::now());
                progress.tick(i);
                done += await_marker(s, size, marker(i))?;
            }
            stamps.push(Instant::now());
            reap(s, Kind::Write, &mut done, n)?;
        }
        Test::ReadLat => {
            for i in 0..n {
                s.post_read(size, Post::EACH)?;
                stamps.push(Instant::now());
                progress.tick(i);
                reap(s, Kind::Read, &mut done, i + 1)?;
            }
            stamps.push(Instant::now());
        }
        t => return Err(format!("{} is not a latency test", t.name())),
    }
    // Half the round trip for ping-pongs, as perftest reports them.
    let div = if req.test == Test::ReadLat { 1.0 } else { 2.0 };
    Ok(stamps.windows(2).skip(req.warmup as usize).map(|w| micros(w[1] - w[0]) / div).collect())
}

/// Server side: the pong half of send_lat and write_lat; read_lat needs nothing.
pub fn server(s: &mut Session, req: &TestReq) -> Result<(), String> {
    let n = req.warmup + req.iters;
    let size = req.size;
    let mut done = 0u64;
    match req.test {
        Test::SendLat => {
            s.lazy_refill();
            for i in 0..n {
                while s.rx_done() < i + 1 {
                    if s.next_data()? == Kind::SendData {
                        done += 1;
                    }
                }
                s.post_send(size, Post::EACH)?;
                s.refill()?;
            }
            reap(s, Kind::SendData, &mut done, n)?;
            s.refill()
        }
        Test::WriteLat => {
            let src = (s.area + size - 1) as usize;
            for i in 0..n {
                done += await_marker(s, size, marker(i))?;
                s.buf().set(src, marker(i));
                s.post_write(size, Post::EACH)?;
            }
            reap(s, Kind::Write, &mut done, n)
        }
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::marker;

    #[test]
    fn markers_never_zero_and_change() {
        for i in 0..1000 {
            assert_ne!(marker(i), 0);
            assert_ne!(marker(i), marker(i + 1));
        }
    }
}
