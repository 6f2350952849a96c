//! The provider's tunables: each read once from its environment variable
//! (daplsock(5) documents them), a number or the default.

use std::sync::OnceLock;

fn read(cell: &OnceLock<u64>, name: &str, default: u64) -> u64 {
    *cell.get_or_init(|| std::env::var(name).ok().and_then(|v| v.trim().parse().ok()).unwrap_or(default))
}

/// How long a consumer about to sleep on an empty queue polls first
/// (`DAPL_SOCK_SPIN_US`, microseconds; 0: sleep at once). A peer on this
/// host answers within microseconds, far less than the two wakeups a sleep
/// costs.
pub fn spin_us() -> u64 {
    static V: OnceLock<u64> = OnceLock::new();
    read(&V, "DAPL_SOCK_SPIN_US", 20)
}

/// How many times `spin_us` a queue's poll before sleeping grows to while
/// its completions keep coming that soon after it gave up (`next_spin`).
pub const SPIN_GROWTH: u64 = 10;

/// A queue's next poll before sleeping, in nanoseconds, from its last one
/// (`cur`) and the base (`spin_us`). `late`: how long after the last poll
/// gave up the queue's next completion came (0: none came since, or the
/// poll did not give up); `dry`: the last poll gave up and no completion
/// came since (the sleep ended on a timeout, or on another of a CNO's
/// queues). A completion that came within the longest poll
/// (`SPIN_GROWTH` times the base) would have been found by a poll that
/// long, with no sleep: the next poll doubles. One that came later, or
/// none, means the queue's events are far apart: back to the base, so an
/// idle consumer, or a CNO's quiet queue looked at before a busy one,
/// polls no longer than it is told. A stream of sends in wait mode
/// (on-node `dat-perf --test msg_rate --mode wait`) ran at 2.0–3.3 million
/// messages a second polling 20 µs, 3.0–3.9 polling 200, 3.4–3.8 in poll
/// mode.
pub fn next_spin(cur: u64, base: u64, late: u64, dry: bool) -> u64 {
    let max = base.saturating_mul(SPIN_GROWTH);
    let cur = cur.clamp(base, max);
    match late {
        0 if dry => base,
        0 => cur,
        l if l <= max => cur.saturating_mul(2).min(max),
        _ => base,
    }
}

/// The smallest RDMA payload sent by reference (`DAPL_SOCK_CMA_MIN`,
/// bytes): below it two copies through the ring cost less than the
/// target's syscall.
pub fn cma_min() -> u64 {
    static V: OnceLock<u64> = OnceLock::new();
    read(&V, "DAPL_SOCK_CMA_MIN", 8192)
}

/// The smallest on-node send whose payload the receiver pulls by
/// reference into its receive (`DAPL_SOCK_CMA_SEND_MIN`, bytes) while the
/// reader is behind (a stream): one copy instead of two through the ring.
/// Which is faster depends on the host. On an Intel Xeon at 2.5 GHz (stop
/// 35) the ring's two copies, one on each side at once, went faster below
/// 256 KiB (streams of sends, window 64, alternating: ahead in 10 of 14
/// pairs at 64 KiB, 9 of 13 at 128 KiB, medians 9.9 against 8.9 GB/s
/// there); on a Xeon with AVX-512 (stops 41 and 42) by reference took 64
/// KiB from 10.5-12.7 to 15.4-19.4 GB/s (stop 41) and 16 KiB from
/// 10.8-11.2 to 11.3-12.7 (stop 42, 4 alternating pairs of 30,000 sends;
/// 32 KiB even), while 8 KiB fell (10.2-11.5 to 6.6-11.1, 3 runs); the
/// threshold went down to 16 KiB.
pub fn cma_send_min() -> u64 {
    static V: OnceLock<u64> = OnceLock::new();
    read(&V, "DAPL_SOCK_CMA_SEND_MIN", 16 * 1024)
}

/// The smallest on-node send pulled by reference even when it is alone,
/// the reader waiting for it (`DAPL_SOCK_CMA_LONE_MIN`, bytes; never below
/// `cma_send_min`). Through the ring the reader copies a lone send out
/// while the writer copies it in, and on stop 32's host that was faster (a
/// 1 MiB ping-pong 84-86 µs against 128-141 by reference): there this
/// should be above the largest send. On the AVX-512 Xeon of stop 42 one
/// `process_vm_readv` was far ahead at every size from 16 KiB (ping-pong,
/// typical half round trip, 3 alternating pairs, ring against reference:
/// 16 KiB 2.84-2.92 against 1.64-1.81 µs, 64 KiB 6.16-6.48 against
/// 3.44-3.77, 1 MiB 133-135 against 68-72; UCX 1.73, 3.74, 75.1).
pub fn cma_lone_min() -> u64 {
    static V: OnceLock<u64> = OnceLock::new();
    read(&V, "DAPL_SOCK_CMA_LONE_MIN", 16 * 1024)
}

/// Whether an on-node connection's mapping is faulted in whole when it is
/// set up (`DAPL_SOCK_PREFAULT=1`), rather than its control page and the
/// heads of its rings only, the rest page by page as first used (0, the
/// default; `shm::HEAD_IN`). Page by page, a fresh connection's 1
/// KiB ping-pong ran every fourth message about 4.5 µs slower until 1 MiB
/// had gone each way; whole, each end's setup took 1 to 3 ms more in this
/// VM (a 4-rank MPI allreduce run 15 to 40 ms more), and every connection
/// holds its 2 MiB from the start, used or not (faulted in ahead by 128
/// KiB as used, it cost as much as faulting by page).
pub fn prefault() -> bool {
    static V: OnceLock<u64> = OnceLock::new();
    read(&V, "DAPL_SOCK_PREFAULT", 0) != 0
}

/// The smallest TCP message after which a polling consumer asks epoll
/// whether its stream has more (`DAPL_SOCK_READY_MIN`, bytes) rather than
/// reading the stream at every empty poll. A `read` that finds the socket
/// empty holds the socket's lock, and a segment arriving meanwhile waits
/// in its backlog for the reader to release it. Over a veth, pinned, cubic,
/// mean half round trip, 2 alternating pairs: 16 KiB 6.30-6.51 µs asking
/// against 7.02-7.04 reading, 4 KiB 4.20-4.43 against 4.57-4.58, 2 KiB
/// 3.83-3.90 against 4.09, 1.5 KiB 3.82-3.86 against 3.99-4.18 (reading,
/// one in five took 1.3 µs longer); but 1.25 KiB 4.26-4.39 against 4.18-4.26
/// and 1 KiB 3.99-4.07 against 3.65-3.76, 8 bytes 3.95 against 3.56: the
/// second system call a message.
pub fn ready_min() -> u64 {
    static V: OnceLock<u64> = OnceLock::new();
    read(&V, "DAPL_SOCK_READY_MIN", 1536)
}

/// After how long polling in vain a consumer yields its CPU once
/// (`DAPL_SOCK_YIELD_US`, microseconds; 0: never), in nanoseconds.
pub fn yield_ns() -> u64 {
    static V: OnceLock<u64> = OnceLock::new();
    read(&V, "DAPL_SOCK_YIELD_US", 20).saturating_mul(1000)
}

/// How long a message that arrived before its receive waits once the
/// receive is posted (`DAPL_SOCK_RNR_US`, microseconds; 0: it is taken at
/// once), in nanoseconds: the 0.64 ms of InfiniBand's receiver-not-ready
/// timer code 12.
pub fn rnr_ns() -> u64 {
    static V: OnceLock<u64> = OnceLock::new();
    read(&V, "DAPL_SOCK_RNR_US", 640).saturating_mul(1000)
}

/// How many short posts a TCP stream keeps back at most while the
/// consumer posts a burst (`DAPL_SOCK_BATCH`; 0: every post is written at
/// once): they go out together, in one TCP segment, at its next empty
/// poll, its sleep or the progress thread's tick (1 ms), whichever comes
/// first.
pub fn batch() -> u64 {
    static V: OnceLock<u64> = OnceLock::new();
    read(&V, "DAPL_SOCK_BATCH", 16)
}

/// When a polling consumer yields (`yield_ns`): it counts from the first
/// pass that moved nothing, and starts again at every pass that moved a
/// frame and at every yield.
#[derive(Default)]
pub struct YieldClock {
    since: u64,
}

impl YieldClock {
    /// A pass at `now` (ns) moved a frame or not: whether to yield after
    /// it, `after` ns (0: never) having gone by with none moved.
    pub fn due(&mut self, moved: bool, now: u64, after: u64) -> bool {
        if moved || after == 0 {
            self.since = 0;
            return false;
        }
        if self.since == 0 {
            self.since = now;
            return false;
        }
        if now.saturating_sub(self.since) < after {
            return false;
        }
        self.since = now;
        true
    }
}

#[cfg(test)]
mod tests {
    use super::{SPIN_GROWTH, YieldClock, next_spin};

    #[test]
    fn a_wait_polls_longer_while_its_completions_come_soon_and_the_base_otherwise() {
        let (base, max) = (20_000, 20_000 * SPIN_GROWTH);
        // First wait, or one after a poll that found its completion: as it was.
        assert_eq!(next_spin(0, base, 0, false), base);
        assert_eq!(next_spin(80_000, base, 0, false), 80_000);
        // The completion came within the longest poll after it gave up:
        // doubles, up to that.
        let mut s = base;
        for want in [40_000, 80_000, 160_000, max, max] {
            s = next_spin(s, base, max, false);
            assert_eq!(s, want);
        }
        assert_eq!(next_spin(40_000, base, 1, false), 80_000);
        // Later than that, or none came: the base again.
        assert_eq!(next_spin(s, base, max + 1, false), base);
        assert_eq!(next_spin(s, base, 0, true), base);
        // Whatever it held before, it stays within [base, max].
        assert_eq!(next_spin(u64::MAX, base, 0, false), max);
        assert_eq!(next_spin(1, base, 0, false), base);
    }

    #[test]
    fn yields_once_per_period_of_passes_that_moved_nothing() {
        let mut c = YieldClock::default();
        // The first empty pass starts the clock; a yield only once 20 us passed.
        assert!(!c.due(false, 1_000, 20_000));
        assert!(!c.due(false, 20_999, 20_000));
        assert!(c.due(false, 21_000, 20_000));
        // It counts again from the yield.
        assert!(!c.due(false, 30_000, 20_000));
        assert!(c.due(false, 41_000, 20_000));
        // A pass that moved a frame stops the clock: the next empty one restarts it.
        assert!(!c.due(true, 70_000, 20_000));
        assert!(!c.due(false, 80_000, 20_000));
        assert!(!c.due(false, 99_999, 20_000));
        assert!(c.due(false, 100_000, 20_000));
        // 0: never.
        assert!(!c.due(false, 10_000_000, 0));
        assert!(!c.due(false, 90_000_000, 0));
    }
}
