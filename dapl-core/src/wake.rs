//! An eventfd: how software events and unwaitable/trigger calls wake a
//! thread sleeping in dat_evd_wait or dat_cno_wait; and how those two sleep
//! so that the consumer may cancel the sleeping thread (`dat_abi::cancel`).

use dat_abi::DAT_RETURN;
use dat_abi::cancel;
use dat_abi::status::{INTERNAL, guard_or};
use std::sync::atomic::{AtomicBool, Ordering};

unsafe extern "C-unwind" {
    // A cancellation point: a cancelled thread unwinds out of it.
    fn poll(fds: *mut libc::pollfd, nfds: libc::nfds_t, timeout: libc::c_int) -> libc::c_int;
}

pub struct Wake(i32);

impl Wake {
    pub fn new() -> Option<Wake> {
        // SAFETY: plain syscall; checked.
        let fd = unsafe { libc::eventfd(0, libc::EFD_NONBLOCK | libc::EFD_CLOEXEC) };
        (fd >= 0).then_some(Wake(fd))
    }

    pub fn fd(&self) -> i32 {
        self.0
    }

    pub fn signal(&self) {
        let one: u64 = 1;
        // SAFETY: writing 8 bytes to our eventfd; a full counter only means already signalled.
        unsafe { libc::write(self.0, &one as *const u64 as *const libc::c_void, 8) };
    }

    pub fn clear(&self) {
        let mut v: u64 = 0;
        // SAFETY: reading 8 bytes from our non-blocking eventfd.
        unsafe { libc::read(self.0, &mut v as *mut u64 as *mut libc::c_void, 8) };
    }
}

impl Drop for Wake {
    fn drop(&mut self) {
        // SAFETY: our fd, closed once.
        unsafe { libc::close(self.0) };
    }
}

/// Fds a sleep polls from the stack (more from the heap): an EVD's wait,
/// and a CNO's of up to 16 EVDs (its own fd and two per EVD).
pub const POLL_ON_STACK: usize = 33;

/// Sleeps until one of `fds` is readable or `timeout_us` passes (None:
/// forever), and says which of the first 64 turned readable (bit i for
/// fds[i]); 0 on timeout. Out of line: inlined into a wait, its poll set
/// was made ready on the way to a sleep the wait mostly does not take
/// (verbs `dat_evd_wait` with its event there: 8 instructions).
#[inline(never)]
pub fn sleep_on_which(fds: &[i32], timeout_us: Option<u64>) -> u64 {
    let mut pfds = [libc::pollfd { fd: -1, events: libc::POLLIN, revents: 0 }; POLL_ON_STACK];
    let mut more: Vec<libc::pollfd>;
    let set: &mut [libc::pollfd] = if fds.len() <= pfds.len() {
        for (p, &fd) in pfds.iter_mut().zip(fds) {
            p.fd = fd;
        }
        &mut pfds[..fds.len()]
    } else {
        more = fds.iter().map(|&fd| libc::pollfd { fd, events: libc::POLLIN, revents: 0 }).collect();
        &mut more
    };
    let ms = match timeout_us {
        None => -1,
        Some(us) => us.div_ceil(1000).min(i32::MAX as u64) as i32,
    };
    loop {
        // SAFETY: poll over our own array (negative fds are skipped by poll).
        let n = unsafe { poll(set.as_mut_ptr(), set.len() as libc::nfds_t, ms) };
        if n >= 0 {
            return set.iter().take(64).enumerate().filter(|(_, p)| p.revents != 0).fold(0, |m, (i, _)| m | 1 << i);
        }
        if std::io::Error::last_os_error().raw_os_error() != Some(libc::EINTR) {
            return 0;
        }
    }
}

/// One round of a blocking wait: finished, or sleep on these fds (negative
/// ones are skipped) for at most this many microseconds (None: no limit).
pub enum Step<F> {
    Done(DAT_RETURN),
    Sleep(F, Option<u64>),
}

/// Runs a wait a round at a time: each round under the panic guard with
/// cancellation deferred, each sleep outside it, where the unwind of a
/// thread the consumer cancels passes through (the caller is C-unwind).
/// A round is told which fds woke the sleep before it (0 at first).
pub fn cancellable<F: AsRef<[i32]>>(name: &str, mut round: impl FnMut(u64) -> Step<F>) -> DAT_RETURN {
    let first = cancel::deferred(|| guard_or(name, Step::Done(INTERNAL), || round(0)));
    go_on(name, first, round)
}

/// `cancellable` once its first round has run (`first`, which a caller
/// may run together with its own checks, under one deferral).
pub fn go_on<F: AsRef<[i32]>>(name: &str, first: Step<F>, mut round: impl FnMut(u64) -> Step<F>) -> DAT_RETURN {
    let mut step = first;
    loop {
        match step {
            Step::Done(r) => return r,
            Step::Sleep(fds, left) => {
                let woke = sleep_on_which(fds.as_ref(), left);
                step = cancel::deferred(|| guard_or(name, Step::Done(INTERNAL), || round(woke)));
            }
        }
    }
}

/// A waiter's claim on an object (only one may wait at a time): given back
/// when the wait returns, and when a cancelled waiter unwinds.
pub struct Claim<'a>(&'a AtomicBool);

impl<'a> Claim<'a> {
    /// None: someone else is waiting.
    pub fn take(flag: &'a AtomicBool) -> Option<Claim<'a>> {
        (!flag.swap(true, Ordering::AcqRel)).then_some(Claim(flag))
    }
}

impl Drop for Claim<'_> {
    fn drop(&mut self) {
        self.0.store(false, Ordering::Release);
    }
}

/// When a DAT wait with a timeout in microseconds must give up. The clock
/// is first read when the wait is about to sleep, not at the call: a wait
/// that finds its event at once reads no clock (in a guest whose clock
/// source is emulated, one read is a system call), and the time the first,
/// non-blocking check took (microseconds) is not counted against the timeout.
pub(crate) struct Deadline {
    timeout_us: dat_abi::DAT_TIMEOUT,
    end: std::cell::Cell<Option<std::time::Instant>>,
}

impl Deadline {
    pub fn new(timeout_us: dat_abi::DAT_TIMEOUT) -> Deadline {
        Deadline { timeout_us, end: std::cell::Cell::new(None) }
    }

    /// Microseconds left (None: no limit), or Err once it has passed.
    pub fn remaining(&self) -> Result<Option<u64>, ()> {
        if self.timeout_us == dat_abi::DAT_TIMEOUT_INFINITE {
            return Ok(None);
        }
        let now = std::time::Instant::now();
        let end = match self.end.get() {
            Some(end) => end,
            None => {
                let end = now + std::time::Duration::from_micros(self.timeout_us as u64);
                self.end.set(Some(end));
                end
            }
        };
        if now >= end { Err(()) } else { Ok(Some((end - now).as_micros() as u64)) }
    }
}

#[cfg(test)]
mod tests {
    use super::Deadline;

    #[test]
    fn deadlines_start_at_the_first_look() {
        assert_eq!(Deadline::new(dat_abi::DAT_TIMEOUT_INFINITE).remaining(), Ok(None));
        assert_eq!(Deadline::new(0).remaining(), Err(()));
        let d = Deadline::new(200_000);
        std::thread::sleep(std::time::Duration::from_millis(50));
        let left = d.remaining().unwrap().unwrap();
        assert!(left > 150_000 && left <= 200_000, "{left} us left");
        std::thread::sleep(std::time::Duration::from_millis(60));
        let later = d.remaining().unwrap().unwrap();
        assert!(later < left - 50_000, "{later} us left after 60 ms");
    }
}
