//! The SGE list of one post, built on the stack from the consumer's
//! triplets in the backend's own layout.

use crate::backend::Transport;
use dat_abi::*;

/// Most SGEs one post may carry; the device limit is usually lower.
pub const MAX_IOV: usize = 32;

/// A post's SGE list on the stack. Left uninitialised past the entries a
/// post fills: clearing all 32 would cost a 512-byte memset per post.
pub struct SgeList<T: Transport>([std::mem::MaybeUninit<T::Sge>; MAX_IOV]);

impl<T: Transport> SgeList<T> {
    #[inline]
    pub fn new() -> Self {
        SgeList([const { std::mem::MaybeUninit::uninit() }; MAX_IOV])
    }

    /// Fills the list from the consumer's triplets: (count, total bytes), or
    /// None if the count or the triplet pointer is bad.
    #[inline(always)]
    pub fn fill(&mut self, n: DAT_COUNT, iov: *const DAT_LMR_TRIPLET) -> Option<(usize, u64)> {
        if n == 1 && !iov.is_null() {
            // The usual post: one segment, without the loop's checks.
            // SAFETY: the consumer gave one triplet at iov.
            let t = unsafe { &*iov };
            self.0[0].write(T::sge(t.virtual_address, t.segment_length, t.lmr_context));
            return Some((1, t.segment_length as u64));
        }
        // Negative counts are huge as u32.
        if n as u32 > MAX_IOV as u32 || (n != 0 && iov.is_null()) {
            return None;
        }
        let mut total = 0u64;
        for (i, slot) in self.0.iter_mut().enumerate().take(n as usize) {
            // SAFETY: the consumer gave n triplets at iov.
            let t = unsafe { &*iov.add(i) };
            slot.write(T::sge(t.virtual_address, t.segment_length, t.lmr_context));
            total += t.segment_length as u64;
        }
        Some((n as usize, total))
    }

    /// The first `count` entries, which `fill` wrote.
    #[inline]
    pub fn as_slice(&self, count: usize) -> &[T::Sge] {
        let count = count.min(MAX_IOV);
        // SAFETY: fill initialised the first `count` entries (callers pass
        // what it returned), and MaybeUninit<X> has X's layout.
        unsafe { std::slice::from_raw_parts(self.0.as_ptr() as *const T::Sge, count) }
    }
}
