//! The clock of the data path: read on every pass, post and doorbell
//! decision, so it must be cheap. `clock_gettime` through the vDSO cost
//! about 21 ns on the benchmark host and was an eighth of a polling
//! process's time; the CPU's time-stamp counter costs about 9.
//!
//! Two readings:
//! - `ticks()`: the raw counter, the same in every process of the host, so
//!   it is what one process stamps in shared memory and another compares
//!   (`shm`, a reader's last look). Durations against it go through
//!   `ticks_of_ns`.
//! - `now_ns()`: nanoseconds for this process's own timers (RNR delays,
//!   doorbell deadlines, the idle yield, the tick). Its origin is this
//!   process's own; it is never compared across processes.
//!
//! The counter is used only where the kernel itself keeps time with it
//! (clocksource `tsc`: invariant and synchronised across CPUs); anywhere
//! else both readings are CLOCK_MONOTONIC in nanoseconds.

use std::sync::OnceLock;

struct Scale {
    tsc: bool,
    /// Nanoseconds per tick, times 2^32.
    ns_per_tick: u64,
    /// Ticks per nanosecond, times 2^32.
    ticks_per_ns: u64,
}

fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: reading a clock into our timespec.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

#[cfg(target_arch = "x86_64")]
#[inline]
fn counter() -> u64 {
    // SAFETY: rdtsc has no preconditions on x86_64.
    unsafe { core::arch::x86_64::_rdtsc() }
}

#[cfg(not(target_arch = "x86_64"))]
#[inline]
fn counter() -> u64 {
    monotonic_ns()
}

/// A kernel reading and the counter at the same moment: of a few tries,
/// the one with the least counter time around the kernel's read.
fn pair() -> (u64, u64) {
    let mut best = (u64::MAX, 0, 0);
    for _ in 0..8 {
        let a = counter();
        let n = monotonic_ns();
        let b = counter();
        let span = b.wrapping_sub(a);
        if span < best.0 {
            best = (span, n, a + span / 2);
        }
    }
    (best.1, best.2)
}

fn kernel_uses_tsc() -> bool {
    cfg!(target_arch = "x86_64")
        && std::fs::read_to_string("/sys/devices/system/clocksource/clocksource0/current_clocksource").is_ok_and(|s| s.trim() == "tsc")
}

fn scale() -> &'static Scale {
    static S: OnceLock<Scale> = OnceLock::new();
    S.get_or_init(|| {
        let one = Scale { tsc: false, ns_per_tick: 1 << 32, ticks_per_ns: 1 << 32 };
        if !kernel_uses_tsc() {
            return one;
        }
        // 1 ms against CLOCK_MONOTONIC, each end the best bracketed
        // reading of a few (a vCPU can lose its CPU between two reads): the
        // rate within a few parts in ten thousand, which only stretches
        // our own durations by as much.
        let (n0, c0) = pair();
        let mut n1 = n0;
        while n1 - n0 < 1_000_000 {
            std::hint::spin_loop();
            n1 = monotonic_ns();
        }
        let (n1, c1) = pair();
        let (dn, dc) = ((n1 - n0) as u128, (c1.wrapping_sub(c0)) as u128);
        if dc == 0 {
            return one;
        }
        Scale { tsc: true, ns_per_tick: ((dn << 32) / dc) as u64, ticks_per_ns: ((dc << 32) / dn) as u64 }
    })
}

/// Calibrates now (at IA open, a millisecond once per process), so no
/// data-path call pays for it.
pub fn init() {
    scale();
}

/// The host-wide counter (see the module docs).
#[inline]
pub fn ticks() -> u64 {
    if scale().tsc { counter() } else { monotonic_ns() }
}

/// A duration in nanoseconds as ticks.
#[inline]
pub fn ticks_of_ns(ns: u64) -> u64 {
    ((ns as u128 * scale().ticks_per_ns as u128) >> 32) as u64
}

/// This process's nanoseconds, from a `ticks()` reading.
#[inline]
pub fn ns_of(ticks: u64) -> u64 {
    let s = scale();
    if s.tsc { ((ticks as u128 * s.ns_per_tick as u128) >> 32) as u64 } else { ticks }
}

/// This process's nanoseconds (see the module docs).
#[inline]
pub fn now_ns() -> u64 {
    ns_of(ticks())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_step_with_the_kernel_clock() {
        init();
        let (n0, t0) = (monotonic_ns(), now_ns());
        std::thread::sleep(std::time::Duration::from_millis(20));
        let (n1, t1) = (monotonic_ns(), now_ns());
        let (dn, dt) = ((n1 - n0) as i64, (t1 - t0) as i64);
        assert!((dn - dt).abs() < dn / 100, "kernel {dn} ns, ours {dt} ns");
        let w = ticks_of_ns(1_000_000);
        assert!((ns_of(w) as i64 - 1_000_000).abs() < 1_000, "1 ms is {w} ticks, back {} ns", ns_of(w));
    }
}
