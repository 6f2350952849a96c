//! An eventfd: how software events and unwaitable/trigger calls wake a
//! thread sleeping in dat_evd_wait or dat_cno_wait.

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

/// Sleeps until one of `fds` is readable or `timeout_us` passes (None:
/// forever). Returns false on timeout.
pub fn sleep_on(fds: &[i32], timeout_us: Option<u64>) -> bool {
    sleep_on_which(fds, timeout_us) != 0
}

/// As `sleep_on`, saying which of the first 64 descriptors turned readable
/// (bit i for fds[i]); 0 on timeout.
pub fn sleep_on_which(fds: &[i32], timeout_us: Option<u64>) -> u64 {
    let mut pfds: [libc::pollfd; 3] = [libc::pollfd { fd: -1, events: libc::POLLIN, revents: 0 }; 3];
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
        // SAFETY: poll over our own array.
        let n = unsafe { libc::poll(set.as_mut_ptr(), set.len() as libc::nfds_t, ms) };
        if n >= 0 {
            return set.iter().take(64).enumerate().filter(|(_, p)| p.revents != 0).fold(0, |m, (i, _)| m | 1 << i);
        }
        if std::io::Error::last_os_error().raw_os_error() != Some(libc::EINTR) {
            return 0;
        }
    }
}

/// When a DAT wait with a timeout in microseconds must give up.
pub struct Deadline(Option<std::time::Instant>);

impl Deadline {
    pub fn new(timeout_us: dat_abi::DAT_TIMEOUT) -> Deadline {
        Deadline((timeout_us != dat_abi::DAT_TIMEOUT_INFINITE)
            .then(|| std::time::Instant::now() + std::time::Duration::from_micros(timeout_us as u64)))
    }

    /// Microseconds left (None: no limit), or Err once it has passed.
    pub fn remaining(&self) -> Result<Option<u64>, ()> {
        match self.0 {
            None => Ok(None),
            Some(d) => {
                let now = std::time::Instant::now();
                if now >= d { Err(()) } else { Ok(Some((d - now).as_micros() as u64)) }
            }
        }
    }
}
