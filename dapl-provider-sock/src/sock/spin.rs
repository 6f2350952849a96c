//! The lock of the data path's short critical sections (a send or receive
//! queue, a completion ring, the socket engine).
//!
//! `std::sync::Mutex` takes a locked compare-exchange to lock and a locked
//! swap to unlock (the swap tells whether a sleeper must be woken). A
//! message passed sets and releases about ten such locks on each side,
//! and on the benchmark host those twenty locked instructions, each
//! waiting for the stores before it to reach the other process's CPU,
//! were the largest part of a polling process's time (perf: the
//! compare-exchange and the swap carried most of every queue function's
//! samples). Here unlocking is a plain release store, then a plain load of
//! a waiter count that is nonzero only while someone sleeps on the lock.
//!
//! A taker that finds it held spins a little, then sleeps on the lock word
//! (futex) until the holder wakes it, or at most `NAP_NS`: the holder's
//! load of the count can miss a waiter that arrived just as it unlocked
//! (no fence pairs them), and the nap bounds that. Yielding instead (an
//! earlier version) left a progress thread pinned beside a polling
//! consumer waiting for the engine for many time slices: a 1,000-message
//! TCP ping-pong took 7.7 µs a message instead of 5.6.
use std::cell::UnsafeCell;
use std::ops::{Deref, DerefMut};
use std::sync::atomic::{AtomicU32, Ordering};

pub struct SpinLock<T> {
    /// 0 free, 1 held: a futex word.
    state: AtomicU32,
    /// Takers asleep on `state`, or about to be.
    waiters: AtomicU32,
    val: UnsafeCell<T>,
}

// SAFETY: the value is reached only through a guard, and one guard exists
// at a time (the state's Acquire swap and Release store order the accesses).
unsafe impl<T: Send> Sync for SpinLock<T> {}
// SAFETY: as a Mutex<T>: moving the lock moves the value.
unsafe impl<T: Send> Send for SpinLock<T> {}

pub struct SpinGuard<'a, T> {
    lock: &'a SpinLock<T>,
}

/// The longest a taker sleeps before it looks again on its own.
const NAP_NS: i64 = 50_000;

impl<T> SpinLock<T> {
    pub const fn new(val: T) -> SpinLock<T> {
        SpinLock { state: AtomicU32::new(0), waiters: AtomicU32::new(0), val: UnsafeCell::new(val) }
    }

    #[inline]
    pub fn try_lock(&self) -> Option<SpinGuard<'_, T>> {
        if self.state.load(Ordering::Relaxed) != 0 || self.state.swap(1, Ordering::Acquire) != 0 {
            return None;
        }
        Some(SpinGuard { lock: self })
    }

    /// `try_lock` that also stands back while someone sleeps on the lock:
    /// for takers with nothing they must do (a consumer's pass), so that a
    /// progress thread waiting for the engine gets it at the next unlock
    /// instead of losing it again and again to a consumer that polls in a
    /// loop (meanwhile its rings stayed flagged for doorbells, and a
    /// 1,000-message ping-pong paid one at every message).
    #[inline]
    pub fn try_lock_polite(&self) -> Option<SpinGuard<'_, T>> {
        if self.waiters.load(Ordering::Relaxed) != 0 {
            return None;
        }
        self.try_lock()
    }

    #[inline]
    pub fn lock(&self) -> SpinGuard<'_, T> {
        if let Some(g) = self.try_lock() {
            return g;
        }
        self.lock_contended()
    }

    #[cold]
    fn lock_contended(&self) -> SpinGuard<'_, T> {
        for _ in 0..64 {
            std::hint::spin_loop();
            if let Some(g) = self.try_lock() {
                return g;
            }
        }
        loop {
            self.waiters.fetch_add(1, Ordering::SeqCst);
            if let Some(g) = self.try_lock() {
                self.waiters.fetch_sub(1, Ordering::Relaxed);
                return g;
            }
            let nap = libc::timespec { tv_sec: 0, tv_nsec: NAP_NS };
            // SAFETY: a futex wait on our own aligned word, with a timeout; the
            // kernel returns at once if the word is no longer 1.
            unsafe { libc::syscall(libc::SYS_futex, self.state.as_ptr(), libc::FUTEX_WAIT | libc::FUTEX_PRIVATE_FLAG, 1u32, &nap as *const libc::timespec) };
            self.waiters.fetch_sub(1, Ordering::Relaxed);
            if let Some(g) = self.try_lock() {
                return g;
            }
        }
    }

    #[inline]
    fn unlock(&self) {
        self.state.store(0, Ordering::Release);
        if self.waiters.load(Ordering::Relaxed) != 0 {
            // SAFETY: waking one sleeper on our own word.
            unsafe { libc::syscall(libc::SYS_futex, self.state.as_ptr(), libc::FUTEX_WAKE | libc::FUTEX_PRIVATE_FLAG, 1u32) };
        }
    }
}

impl<T> Deref for SpinGuard<'_, T> {
    type Target = T;
    #[inline]
    fn deref(&self) -> &T {
        // SAFETY: this guard is the only one (see the Sync impl).
        unsafe { &*self.lock.val.get() }
    }
}

impl<T> DerefMut for SpinGuard<'_, T> {
    #[inline]
    fn deref_mut(&mut self) -> &mut T {
        // SAFETY: as in deref, and we hold it mutably.
        unsafe { &mut *self.lock.val.get() }
    }
}

impl<T> Drop for SpinGuard<'_, T> {
    #[inline]
    fn drop(&mut self) {
        self.lock.unlock();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn excludes_and_counts_every_increment() {
        let l = Arc::new(SpinLock::new(0u64));
        let threads: Vec<_> = (0..4)
            .map(|_| {
                let l = l.clone();
                std::thread::spawn(move || {
                    for _ in 0..100_000 {
                        *l.lock() += 1;
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        assert_eq!(*l.lock(), 400_000);
        let g = l.lock();
        assert!(l.try_lock().is_none());
        drop(g);
        assert!(l.try_lock().is_some());
    }
}
