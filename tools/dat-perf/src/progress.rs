//! A progress line on stderr for runs long enough to wonder about.

use std::io::{IsTerminal, Write};
use std::time::{Duration, Instant};

pub struct Progress {
    label: String,
    total: u64,
    enabled: bool,
    tty: bool,
    started: Instant,
    last: Instant,
    calls: u32,
    shown: bool,
}

/// Quiet for this long, so short runs print nothing.
const AFTER: Duration = Duration::from_secs(2);

impl Progress {
    pub fn new(label: String, total: u64, enabled: bool) -> Progress {
        let now = Instant::now();
        Progress { label, total, enabled, tty: std::io::stderr().is_terminal(), started: now, last: now, calls: 0, shown: false }
    }

    /// Cheap enough for a hot loop: the clock is read every 256th call.
    pub fn tick(&mut self, done: u64) {
        self.calls = self.calls.wrapping_add(1);
        if !self.enabled || self.calls & 255 != 0 {
            return;
        }
        let now = Instant::now();
        // A terminal gets a line redrawn every second; a log a line every 10 s.
        let every = if self.tty { Duration::from_secs(1) } else { Duration::from_secs(10) };
        if now - self.started < AFTER || now - self.last < every {
            return;
        }
        self.last = now;
        let line = format!("{}: {done}/{} iterations, {:.0} s", self.label, self.total, (now - self.started).as_secs_f64());
        let mut e = std::io::stderr();
        if self.tty {
            let _ = write!(e, "\r{line}\x1b[K");
        } else {
            let _ = writeln!(e, "{line}");
        }
        self.shown = true;
    }
}

impl Drop for Progress {
    fn drop(&mut self) {
        if self.shown && self.tty {
            let _ = write!(std::io::stderr(), "\r\x1b[K");
        }
    }
}
