//! A completion queue: a bounded ring of `Completion` records that the
//! progress thread (and the consumer, when it flushes a QP) fill and the
//! consumer's poll reads directly, and an eventfd that turns readable when
//! the queue is armed and a completion arrives.

use super::clock;
use super::device::Shared;
use super::eventfd::{drain, eventfd, signal};
use super::spin::SpinLock;
use super::tune;
use dapl_core::backend::{AsyncEvent, Completion, CqOps};
use dat_abi::*;
use std::collections::VecDeque;
use std::io;
use std::sync::atomic::{AtomicU8, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;

const DISARMED: u8 = 0;
const ANY: u8 = 1;
const SOLICITED: u8 = 2;

pub struct CqInner {
    ring: SpinLock<VecDeque<Completion>>,
    /// Entries in the ring, so an empty poll takes no lock.
    count: AtomicUsize,
    depth: AtomicUsize,
    armed: AtomicU8,
    fd: i32,
    context: AtomicUsize,
    /// Set once overrun: the queue is in error, as a device's would be.
    broken: std::sync::atomic::AtomicBool,
    /// The DAT EVD went (`Shared::forget_async`): no more async events.
    gone: std::sync::atomic::AtomicBool,
    /// The next wait's poll before it sleeps (ns; `tune::next_spin`); when
    /// the last one gave up (`clock::now_ns`; 0: it found its completion,
    /// or one came since); how long after that the next completion came
    /// (ns; 0: none yet), which the arming, or the push that fires the
    /// armed queue, records (`came_after_give_up`). One waiter at a time
    /// (the EVD's claim) reads them.
    spin_ns: AtomicU64,
    gave_up: AtomicU64,
    late: AtomicU64,
    shared: Arc<Shared>,
}

impl CqInner {
    /// Adds a completion; wakes an armed waiter. `solicited`: the sender
    /// asked for a solicited event.
    pub fn push(&self, c: Completion, solicited: bool) {
        if self.count.load(Ordering::Relaxed) >= self.depth.load(Ordering::Relaxed) {
            self.full_at_push();
        }
        // The armed flag is read and cleared under the ring's lock, as
        // `arm` sets it: the lock orders the two, so no fence (a locked
        // instruction) is needed beside it, and `count` is a plain store.
        let fire = {
            let mut r = self.ring.lock();
            if r.len() >= self.depth.load(Ordering::Acquire) {
                drop(r);
                if !self.broken.swap(true, Ordering::AcqRel) {
                    log::warn!("sock CQ overrun (depth {})", self.depth.load(Ordering::Relaxed));
                    self.shared.post_async(&self.gone, AsyncEvent::CqError { context: self.context.load(Ordering::Acquire) });
                }
                return;
            }
            r.push_back(c);
            self.count.store(r.len(), Ordering::Release);
            let want = self.armed.load(Ordering::Relaxed);
            let fire = want == ANY || (want == SOLICITED && (solicited || c.status != DAT_DTO_SUCCESS));
            if fire {
                self.armed.store(DISARMED, Ordering::Relaxed);
            }
            fire
        };
        if fire {
            signal(self.fd);
            self.came_after_give_up();
        }
    }

    /// A completion on a queue armed for a waiter, or there when it armed:
    /// if the waiter's poll gave up before it, how late it came (`late`).
    /// Only then: a look on every push cost a stream's completion 3 to 12
    /// instructions.
    #[cold]
    fn came_after_give_up(&self) {
        // A plain load first: the swap is a locked instruction.
        if self.gave_up.load(Ordering::Relaxed) == 0 {
            return;
        }
        let g = self.gave_up.swap(0, Ordering::Relaxed);
        if g != 0 {
            self.late.store(clock::now_ns().saturating_sub(g).max(1), Ordering::Relaxed);
        }
    }
}

impl CqInner {
    /// A full queue on the progress thread: give the consumer's reaper a
    /// moment to run before calling it an overrun. The progress thread
    /// competes with the consumer for CPUs (a NIC does not), so a reaper
    /// that is only late must not lose completions; one that never comes
    /// still sees the overrun, 100 ms later.
    ///
    /// Out of line for its thread-local lookup (a call into the dynamic
    /// loader from a shared object): inline, the compiler computed the
    /// variable's address ahead of the test that guards it, at every push
    /// (`__tls_get_addr`, 11 instructions and a call a completion in
    /// callgrind's count of an on-node stream).
    #[cold]
    #[inline(never)]
    fn full_at_push(&self) {
        if !super::role::on_progress_thread() {
            return;
        }
        for _ in 0..100 {
            if self.count.load(Ordering::Acquire) < self.depth.load(Ordering::Acquire) || self.broken.load(Ordering::Acquire) {
                return;
            }
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
    }
}

impl Drop for CqInner {
    fn drop(&mut self) {
        // SAFETY: our eventfd, closed once.
        unsafe { libc::close(self.fd) };
    }
}

pub struct Cq(pub Arc<CqInner>);

impl Drop for Cq {
    fn drop(&mut self) {
        // QPs, and the engine through them, may hold the queue a while yet.
        self.0.shared.forget_async(&self.0.gone, self.0.context.load(Ordering::Acquire));
    }
}

impl Cq {
    pub fn create(shared: &Arc<Shared>, depth: i32) -> io::Result<Cq> {
        let depth = depth.max(1) as usize;
        Ok(Cq(Arc::new(CqInner {
            ring: SpinLock::new(VecDeque::with_capacity(depth.min(1 << 16))),
            count: AtomicUsize::new(0),
            depth: AtomicUsize::new(depth),
            armed: AtomicU8::new(DISARMED),
            fd: eventfd()?,
            context: AtomicUsize::new(0),
            broken: std::sync::atomic::AtomicBool::new(false),
            gone: std::sync::atomic::AtomicBool::new(false),
            spin_ns: AtomicU64::new(0),
            gave_up: AtomicU64::new(0),
            late: AtomicU64::new(0),
            shared: shared.clone(),
        })))
    }
}

impl CqOps for Cq {
    #[inline]
    fn poll(&self, out: &mut Completion) -> bool {
        if self.0.count.load(Ordering::Acquire) == 0 {
            // Nothing yet: move what the on-node rings hold from this
            // thread (an armed queue's consumer is about to sleep, so its
            // pass does not count as polling).
            self.0.shared.consumer_pass(self.0.armed.load(Ordering::Relaxed) == DISARMED);
            if self.0.count.load(Ordering::Acquire) == 0 {
                return false;
            }
        }
        let mut r = self.0.ring.lock();
        match r.pop_front() {
            Some(c) => {
                if r.is_empty() {
                    // Back to the buffer's start (std's `clear` puts the
                    // head there): a queue that empties as it fills uses
                    // its first lines again instead of walking its whole
                    // capacity, which faulted in a page every 51 round
                    // trips of a ping-pong (dat-perf's queue of 1,056), 2 µs
                    // each here.
                    r.clear();
                }
                self.0.count.store(r.len(), Ordering::Release);
                *out = c;
                true
            }
            None => false,
        }
    }

    fn linger(&self) -> bool {
        // About to sleep: first poll a little while. A peer on this host
        // answers within microseconds, far less than the two wakeups a
        // sleep costs (the progress thread's, then ours). Polling, by
        // the thread's reckoning (`consumer_pass(true)`), even on a queue
        // a past wait left armed: else the peer rings at every message.
        // How long adapts to how soon its completions came after the last
        // poll gave up (`tune::next_spin`).
        let q = &self.0;
        let base = tune::spin_us().saturating_mul(1000);
        if q.count.load(Ordering::Acquire) != 0 {
            return true;
        }
        if base == 0 {
            return false;
        }
        let dry = q.gave_up.swap(0, Ordering::Relaxed) != 0;
        let spin = tune::next_spin(q.spin_ns.load(Ordering::Relaxed), base, q.late.swap(0, Ordering::Relaxed), dry);
        q.spin_ns.store(spin, Ordering::Relaxed);
        let start = clock::now_ns();
        let mut now = start;
        while q.count.load(Ordering::Acquire) == 0 && now.saturating_sub(start) < spin {
            q.shared.consumer_pass(true);
            std::hint::spin_loop();
            now = clock::now_ns();
        }
        let found = q.count.load(Ordering::Acquire) != 0;
        q.gave_up.store(if found { 0 } else { now.max(1) }, Ordering::Relaxed);
        found
    }

    fn arm(&self, solicited_only: bool) -> bool {
        // Under the ring's lock, as `push` reads it (see there).
        {
            let _r = self.0.ring.lock();
            self.0.armed.store(if solicited_only { SOLICITED } else { ANY }, Ordering::Relaxed);
        }
        // Came between the give-up and the arming: no push fired for it.
        if self.0.count.load(Ordering::Acquire) != 0 {
            self.0.came_after_give_up();
        }
        // The consumer will sleep: peers must ring doorbells again.
        self.0.shared.quiet();
        true
    }

    fn fd(&self) -> i32 {
        self.0.fd
    }

    fn drain_events(&self) {
        drain(self.0.fd);
    }

    fn resize(&self, depth: i32) -> bool {
        let depth = depth.max(1) as usize;
        let r = self.0.ring.lock();
        if depth < r.len() {
            return false;
        }
        self.0.depth.store(depth, Ordering::Release);
        true
    }

    fn set_context(&self, h: DAT_HANDLE) {
        self.0.context.store(h as usize, Ordering::Release);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use super::super::cm::Ev;
    use super::super::device::lock;
    use std::time::Duration;

    fn queued_async(shared: &Shared) -> Vec<usize> {
        lock(&shared.events).iter().filter_map(|e| if let Ev::Async(a) = e { Some(a.context()) } else { None }).collect()
    }

    #[test]
    fn a_queue_that_empties_fills_from_its_first_slot_again() {
        // SAFETY: all-zero sockaddr_in is a valid (unused) address.
        let shared = Arc::new(Shared::new(unsafe { std::mem::zeroed() }).unwrap());
        let cq = Cq::create(&shared, 64).unwrap();
        let front = || cq.0.ring.lock().as_slices().0.as_ptr();
        let mut c = Completion::default();
        cq.0.push(Completion { wr_id: 0, ..Completion::default() }, false);
        let start = front();
        for i in 1..200u64 {
            assert!(cq.poll(&mut c));
            assert_eq!(c.wr_id, i - 1);
            cq.0.push(Completion { wr_id: i, ..Completion::default() }, false);
            assert_eq!(front(), start, "the queue walked on from its first slot");
        }
    }

    fn overrun(cq: &CqInner) {
        cq.broken.store(false, Ordering::Release);
        cq.push(Completion::default(), false);
        cq.push(Completion::default(), false);
    }

    /// A wait's poll before it sleeps doubles after a completion that came
    /// soon after it gave up, and is the base again after none came.
    #[test]
    fn a_waits_poll_grows_on_a_completion_soon_after_it_gave_up_and_not_on_none() {
        // SAFETY: all-zero sockaddr_in is a valid (unused) address.
        let shared = Arc::new(Shared::new(unsafe { std::mem::zeroed() }).unwrap());
        clock::init();
        let cq = Cq::create(&shared, 4).unwrap();
        let base = tune::spin_us() * 1000;
        if base == 0 {
            return;
        }
        let spin = || cq.0.spin_ns.load(Ordering::Relaxed);
        let mut c = Completion::default();
        // As a wait goes: the poll gives up, the queue is armed, the
        // completion fires it.
        assert!(!cq.linger());
        assert_eq!(spin(), base);
        assert!(cq.arm(false));
        cq.0.push(Completion::default(), false);
        assert!(cq.poll(&mut c));
        assert!(!cq.linger());
        assert_eq!(spin(), 2 * base, "a completion right after the give-up");
        // It came before the arming: the arming records it.
        cq.0.push(Completion::default(), false);
        assert!(cq.arm(false));
        assert!(cq.poll(&mut c));
        assert!(!cq.linger());
        assert_eq!(spin(), 4 * base, "a completion between the give-up and the arming");
        // None came (the wait timed out).
        assert!(cq.arm(false));
        assert!(!cq.linger());
        assert_eq!(spin(), base, "no completion since the last give-up");
        // One already there is taken without a poll, and changes nothing.
        cq.0.push(Completion::default(), false);
        assert!(cq.linger());
        assert_eq!(spin(), base);
        // A push on a queue nobody armed records nothing.
        assert!(cq.poll(&mut c));
        assert!(!cq.linger());
        cq.0.push(Completion::default(), false);
        assert!(cq.poll(&mut c));
        assert!(!cq.linger());
        assert_eq!(spin(), base, "an unarmed queue's completion is not a wakeup");
    }

    /// A handle's slot is reused as soon as its object is freed: an overrun
    /// event about a freed EVD, still queued or raised later by a QP that
    /// holds the queue, would be reported about the next EVD in that slot.
    #[test]
    fn a_freed_evds_overrun_is_not_reported_after_it() {
        // SAFETY: all-zero sockaddr_in is a valid (unused) address.
        let shared = Arc::new(Shared::new(unsafe { std::mem::zeroed() }).unwrap());
        let cq = Cq::create(&shared, 1).unwrap();
        cq.set_context(0x1040 as DAT_HANDLE);
        overrun(&cq.0);
        assert_eq!(queued_async(&shared), vec![0x1040]);
        let held = cq.0.clone();
        drop(cq);
        assert_eq!(queued_async(&shared), Vec::<usize>::new(), "the freed EVD's event stayed queued");
        overrun(&held);
        assert_eq!(queued_async(&shared), Vec::<usize>::new(), "an overrun after the free was queued");
    }

    /// The event thread may be handling an event about the EVD being freed:
    /// the free waits for it.
    #[test]
    fn a_free_waits_for_the_event_being_handled() {
        // SAFETY: all-zero sockaddr_in is a valid (unused) address.
        let shared = Arc::new(Shared::new(unsafe { std::mem::zeroed() }).unwrap());
        let cq = Cq::create(&shared, 1).unwrap();
        cq.set_context(0x2040 as DAT_HANDLE);
        shared.dispatching.store(0x2040, Ordering::Release);
        let freeing = std::thread::spawn(move || drop(cq));
        std::thread::sleep(Duration::from_millis(100));
        assert!(!freeing.is_finished(), "the free went on while the event thread handled an event about it");
        shared.dispatching.store(0, Ordering::Release);
        freeing.join().unwrap();
    }
}
