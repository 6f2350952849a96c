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
//! samples). Here unlocking is a plain release store; a taker that finds
//! the lock held spins briefly, then yields its CPU, then naps, since the
//! holder may be a thread pinned to the same CPU that lost it mid-section.
//! Nobody sleeps on it, so nobody needs waking.

use std::cell::UnsafeCell;
use std::ops::{Deref, DerefMut};
use std::sync::atomic::{AtomicBool, Ordering};

pub struct SpinLock<T> {
    locked: AtomicBool,
    val: UnsafeCell<T>,
}

// SAFETY: the value is reached only through a guard, and one guard exists
// at a time (the flag's Acquire swap and Release store order the accesses).
unsafe impl<T: Send> Sync for SpinLock<T> {}
// SAFETY: as a Mutex<T>: moving the lock moves the value.
unsafe impl<T: Send> Send for SpinLock<T> {}

pub struct SpinGuard<'a, T> {
    lock: &'a SpinLock<T>,
}

impl<T> SpinLock<T> {
    pub const fn new(val: T) -> SpinLock<T> {
        SpinLock { locked: AtomicBool::new(false), val: UnsafeCell::new(val) }
    }

    #[inline]
    pub fn try_lock(&self) -> Option<SpinGuard<'_, T>> {
        if self.locked.load(Ordering::Relaxed) || self.locked.swap(true, Ordering::Acquire) {
            return None;
        }
        Some(SpinGuard { lock: self })
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
        let mut tries = 0u32;
        loop {
            if let Some(g) = self.try_lock() {
                return g;
            }
            tries = tries.saturating_add(1);
            if tries < 64 {
                std::hint::spin_loop();
            } else if tries < 128 {
                std::thread::yield_now();
            } else {
                // A long hold (the engine moving a large transfer): do
                // not spin a CPU away on it.
                std::thread::sleep(std::time::Duration::from_micros(20));
            }
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
        self.lock.locked.store(false, Ordering::Release);
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
