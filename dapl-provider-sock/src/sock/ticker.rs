//! The progress thread's tick while consumers poll: a timerfd in its quiet
//! set, which each polling consumer's passes push back (`arm_in`). While
//! they come the thread sleeps through; once they stop, it wakes a tick
//! later and takes over. An epoll timeout instead woke the thread every
//! tick on the CPU of the consumer it was pinned beside: two context
//! switches that a TCP ping-pong paid for in one message per tick.

use super::eventfd::drain;
use std::io;

pub struct Ticker {
    fd: i32,
}

impl Ticker {
    pub fn new() -> io::Result<Ticker> {
        // SAFETY: plain syscall; checked.
        let fd = unsafe { libc::timerfd_create(libc::CLOCK_MONOTONIC, libc::TFD_NONBLOCK | libc::TFD_CLOEXEC) };
        if fd < 0 { Err(io::Error::last_os_error()) } else { Ok(Ticker { fd }) }
    }

    /// What the thread's quiet set watches.
    pub fn fd(&self) -> i32 {
        self.fd
    }

    /// Fires `ns` from now, not before, whatever it was set to; a firing
    /// not yet taken is dropped (the fd reads empty again).
    pub fn arm_in(&self, ns: u64) {
        let t = libc::itimerspec {
            it_interval: libc::timespec { tv_sec: 0, tv_nsec: 0 },
            it_value: libc::timespec { tv_sec: (ns / 1_000_000_000) as libc::time_t, tv_nsec: (ns % 1_000_000_000) as libc::c_long },
        };
        // SAFETY: our timerfd and a valid itimerspec; the old value is not asked for.
        unsafe { libc::timerfd_settime(self.fd, 0, &t, std::ptr::null_mut()) };
    }

    /// Takes a firing: the fd is no longer readable (an 8-byte count, read
    /// as an eventfd's).
    pub fn take(&self) {
        drain(self.fd);
    }
}

impl Drop for Ticker {
    fn drop(&mut self) {
        // SAFETY: our timerfd, closed once.
        unsafe { libc::close(self.fd) };
    }
}

#[cfg(test)]
mod tests {
    use super::Ticker;
    use super::super::eventfd::{readable, readable_within};

    fn fires_within_a_second(t: &Ticker) -> bool {
        readable_within(t.fd(), 1000)
    }

    #[test]
    fn fires_once_its_time_came_unless_pushed_back() {
        const MS: u64 = 1_000_000;
        let nap = |ms| std::thread::sleep(std::time::Duration::from_millis(ms));
        let t = Ticker::new().unwrap();
        assert!(!readable(t.fd()), "a ticker fired before it was armed");
        // Pushed back 60 ms into its 100: at 120 ms it has not fired (it
        // would have at 100 had the push not moved it).
        t.arm_in(100 * MS);
        nap(60);
        t.arm_in(100 * MS);
        nap(60);
        assert!(!readable(t.fd()), "a ticker pushed back fired on its first time");
        assert!(fires_within_a_second(&t), "a ticker did not fire once its time came");
        t.take();
        assert!(!readable(t.fd()), "a firing taken still reads");
        // Armed again over a firing not taken: that firing is dropped.
        t.arm_in(MS);
        assert!(fires_within_a_second(&t));
        t.arm_in(1000 * MS);
        assert!(!readable(t.fd()), "arming left an old firing readable");
    }
}
