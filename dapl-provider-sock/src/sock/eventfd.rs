//! Eventfds: the wakeups of the progress thread, the CM event thread and
//! the CQ completion channels, and the progress thread's doorbell.

use std::io;
use std::sync::atomic::{AtomicBool, Ordering};

pub fn eventfd() -> io::Result<i32> {
    // SAFETY: plain syscall; checked.
    let fd = unsafe { libc::eventfd(0, libc::EFD_NONBLOCK | libc::EFD_CLOEXEC) };
    if fd < 0 { Err(io::Error::last_os_error()) } else { Ok(fd) }
}

pub fn signal(fd: i32) {
    let one: u64 = 1;
    // SAFETY: 8 bytes to an eventfd; a full counter only means it is already signalled.
    unsafe { libc::write(fd, &one as *const u64 as *const libc::c_void, 8) };
}

pub fn drain(fd: i32) {
    let mut v: u64 = 0;
    // SAFETY: 8 bytes from a non-blocking eventfd.
    unsafe { libc::read(fd, &mut v as *mut u64 as *mut libc::c_void, 8) };
}

/// An eventfd rung at most once until it is answered: a consumer posting
/// while the progress thread holds the engine kicks it once, not once per
/// post (a write(2) each).
pub struct Doorbell {
    fd: i32,
    rung: AtomicBool,
}

impl Doorbell {
    pub fn new() -> io::Result<Doorbell> {
        Ok(Doorbell { fd: eventfd()?, rung: AtomicBool::new(false) })
    }

    /// What the waiting side polls.
    pub fn fd(&self) -> i32 {
        self.fd
    }

    /// Call after queueing the work. An RMW, as `answer`'s clear: a ring
    /// that finds the bell rung is ordered before that clear, so what the
    /// answerer does after it sees the work queued before the ring.
    #[inline]
    pub fn ring(&self) {
        if !self.rung.swap(true, Ordering::AcqRel) {
            signal(self.fd);
        }
    }

    /// The waiting side takes the ring, then looks at all queued work.
    /// Drained first, then cleared: cleared first, a ring in between would
    /// be drained with the flag left set, and no later ring would signal.
    pub fn answer(&self) {
        drain(self.fd);
        self.rung.swap(false, Ordering::AcqRel);
    }
}

impl Drop for Doorbell {
    fn drop(&mut self) {
        // SAFETY: our eventfd, closed once.
        unsafe { libc::close(self.fd) };
    }
}

/// Whether `fd` turns readable within `ms` milliseconds (0: now), for
/// the tests of the modules whose wakeups are fds.
#[cfg(test)]
pub(super) fn readable_within(fd: i32, ms: i32) -> bool {
    let mut p = libc::pollfd { fd, events: libc::POLLIN, revents: 0 };
    // SAFETY: one pollfd of ours.
    unsafe { libc::poll(&mut p, 1, ms) == 1 }
}

#[cfg(test)]
pub(super) fn readable(fd: i32) -> bool {
    readable_within(fd, 0)
}

/// A connected pair of non-blocking Unix stream sockets, standing in for a
/// connection's stream in tests.
#[cfg(test)]
pub(super) fn socketpair() -> [i32; 2] {
    let mut sv = [0i32; 2];
    // SAFETY: a socketpair into our array.
    assert_eq!(unsafe { libc::socketpair(libc::AF_UNIX, libc::SOCK_STREAM | libc::SOCK_NONBLOCK, 0, sv.as_mut_ptr()) }, 0);
    sv
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::sync::atomic::AtomicU64;


    #[test]
    fn rings_once_until_answered() {
        let b = Doorbell::new().unwrap();
        assert!(!readable(b.fd()));
        b.ring();
        b.ring();
        assert!(readable(b.fd()));
        b.answer();
        assert!(!readable(b.fd()));
        b.ring();
        assert!(readable(b.fd()));
    }

    #[test]
    fn no_ring_is_lost_to_a_racing_answer() {
        // Producers queue work and ring; the waiter sleeps in poll(2) on the
        // eventfd alone, answers, and takes all queued work. A lost ring
        // leaves work queued with the waiter asleep: the poll times out.
        const N: u64 = 100_000;
        let b = Arc::new(Doorbell::new().unwrap());
        let queued = Arc::new(AtomicU64::new(0));
        let producers: Vec<_> = (0..2)
            .map(|_| {
                let (b, q) = (b.clone(), queued.clone());
                std::thread::spawn(move || {
                    for _ in 0..N / 2 {
                        q.fetch_add(1, Ordering::Release);
                        b.ring();
                    }
                })
            })
            .collect();
        let mut taken = 0u64;
        while taken < N {
            let mut p = libc::pollfd { fd: b.fd(), events: libc::POLLIN, revents: 0 };
            // SAFETY: one pollfd of ours.
            let n = unsafe { libc::poll(&mut p, 1, 5000) };
            assert_eq!(n, 1, "asleep with {} of {N} taken and {} queued", taken, queued.load(Ordering::Acquire));
            b.answer();
            taken += queued.swap(0, Ordering::AcqRel);
        }
        for p in producers {
            p.join().unwrap();
        }
        assert_eq!(taken + queued.load(Ordering::Acquire), N);
    }
}
