//! Happens-before edges that run through the kernel or the device, told to
//! ThreadSanitizer. A request's slot is filled by the posting thread and
//! read by the thread that polls its completion, which the device hands it
//! (the wr_id); a connection id's state is written before a call into
//! rdma_cm and read by the CM thread when the kernel's event about it
//! arrives. The sanitizer sees neither edge and reports each such read as a
//! race. Only `tools/tsan/run.sh` builds with `--cfg tsan`; in every other
//! build these are empty and inline away.

#[cfg(tsan)]
unsafe extern "C" {
    fn __tsan_acquire(addr: *mut std::ffi::c_void);
    fn __tsan_release(addr: *mut std::ffi::c_void);
}

/// What this thread wrote so far is published through `addr` (before the
/// call that hands it to the kernel or the device).
#[inline(always)]
pub fn release<T>(addr: *const T) {
    #[cfg(tsan)]
    // SAFETY: the runtime only keys its bookkeeping on the address.
    unsafe {
        __tsan_release(addr as *mut std::ffi::c_void)
    };
    let _ = addr;
}

/// What was published through `addr` is seen by this thread (after the
/// kernel or the device handed `addr` back).
#[inline(always)]
pub fn acquire<T>(addr: *const T) {
    #[cfg(tsan)]
    // SAFETY: as in `release`.
    unsafe {
        __tsan_acquire(addr as *mut std::ffi::c_void)
    };
    let _ = addr;
}
