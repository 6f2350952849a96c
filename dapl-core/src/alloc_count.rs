//! Tests only: counts the heap allocations a thread makes, so a test can
//! show that a fast path (a wait that finds its event) allocates nothing.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

thread_local! {
    static MADE: Cell<u64> = const { Cell::new(0) };
}

struct Counting;

// SAFETY: every call is passed on to the system allocator unchanged.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        MADE.with(|m| m.set(m.get() + 1));
        // SAFETY: the caller's contract, passed on.
        unsafe { System.alloc(l) }
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        // SAFETY: the caller's contract, passed on.
        unsafe { System.dealloc(p, l) }
    }
    unsafe fn realloc(&self, p: *mut u8, l: Layout, new: usize) -> *mut u8 {
        MADE.with(|m| m.set(m.get() + 1));
        // SAFETY: the caller's contract, passed on.
        unsafe { System.realloc(p, l, new) }
    }
}

#[global_allocator]
static COUNTING: Counting = Counting;

/// Allocations this thread has made so far.
pub fn made() -> u64 {
    MADE.with(|m| m.get())
}
