//! Blocking DAT calls that a consumer may cancel.
//!
//! MPI stacks end their connection thread, which blocks in `dat_evd_wait`,
//! with `pthread_cancel` (MVAPICH2's uDAPL channel at `MPI_Finalize`, with
//! asynchronous cancellation). glibc ends such a thread with a forced unwind
//! that must pass through our frames up to the thread's start: a panic guard
//! that catches it makes glibc abort the whole process ("FATAL: exception not
//! rethrown"). So a blocking call runs its checks and bookkeeping under the
//! guard with cancellation deferred, and sleeps outside the guard, in frames
//! declared `C-unwind` that own nothing but drop guards.

use std::os::raw::c_int;

const PTHREAD_CANCEL_DEFERRED: c_int = 0;

unsafe extern "C-unwind" {
    // Restoring asynchronous cancellation acts on a cancel that came in the
    // meantime, by unwinding from inside this call.
    fn pthread_setcanceltype(kind: c_int, old: *mut c_int) -> c_int;
}

/// Runs `body` with asynchronous cancellation held off, then gives the
/// thread its own cancellation type back. A cancel that arrived meanwhile
/// acts at that point, after `body`: call this outside any panic guard, from
/// an `extern "C-unwind"` entry point.
#[inline]
pub fn deferred<T>(body: impl FnOnce() -> T) -> T {
    let mut old: c_int = PTHREAD_CANCEL_DEFERRED;
    // SAFETY: acts on the calling thread only; `old` is a local.
    unsafe { pthread_setcanceltype(PTHREAD_CANCEL_DEFERRED, &mut old) };
    let r = body();
    if old != PTHREAD_CANCEL_DEFERRED {
        // SAFETY: as above; it may unwind, which this frame lets through.
        unsafe { pthread_setcanceltype(old, std::ptr::null_mut()) };
    }
    r
}
