//! The last bytes of an RDMA write, placed last and whole.
//!
//! MPI eager-RDMA channels (MVAPICH2's fast path) spin on the last word of
//! a receive slot and, once it is non-zero, read the message in front of
//! it: they need that word to appear after every byte before it, and in
//! one piece. A NIC gives both. Our bytes arrive in pieces (ring wraps,
//! partial reads, one memcpy whose stores may land out of order), so the
//! last bytes of every write are held back in a side buffer and stored
//! here once the rest is in place: the bytes before the last aligned word
//! first, then that word with a single store.

use std::sync::atomic::{fence, AtomicU32, AtomicU64, Ordering};

/// How many trailing bytes of a write are held back.
pub const HELD: usize = 8;

/// The trailing bytes of a `len`-byte write that are held back.
#[inline]
pub fn held(len: u64) -> usize {
    (len as usize).min(HELD)
}

/// Stores `bytes` at `dst`, where the write they end had its other bytes
/// placed already: those become visible first, the last aligned word of
/// the write in one store, after everything else.
pub fn publish(dst: u64, bytes: &[u8]) {
    let n = bytes.len();
    let end = dst + n as u64;
    // Whole-word stores only where the word is aligned: that is what a
    // poller reads in one load, and an unaligned atomic store is not one.
    let word = if n == 8 && end % 8 == 0 {
        8
    } else if n >= 4 && end % 4 == 0 {
        4
    } else {
        0
    };
    // SAFETY: dst..end is the tail of a destination the caller checked
    // against its key (or a local segment) when the frame arrived.
    unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), dst as *mut u8, n - word) };
    fence(Ordering::Release);
    match word {
        // SAFETY: aligned (checked above), inside the checked destination.
        8 => unsafe { AtomicU64::from_ptr((end - 8) as *mut u64) }
            .store(u64::from_ne_bytes(bytes[n - 8..].try_into().unwrap_or_default()), Ordering::Release),
        // SAFETY: as above.
        4 => unsafe { AtomicU32::from_ptr((end - 4) as *mut u32) }
            .store(u32::from_ne_bytes(bytes[n - 4..].try_into().unwrap_or_default()), Ordering::Release),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_tail_lands_whole_at_its_place() {
        for off in 0..8usize {
            for n in 1..=HELD {
                let mut buf = [0u8; 32];
                let src: Vec<u8> = (1..=n as u8).collect();
                let dst = buf.as_mut_ptr() as u64 + off as u64;
                publish(dst, &src);
                assert_eq!(&buf[off..off + n], &src[..], "offset {off}, {n} bytes");
                assert!(buf[..off].iter().chain(&buf[off + n..]).all(|&b| b == 0), "offset {off}, {n} bytes: outside touched");
            }
        }
    }

    #[test]
    fn held_is_at_most_the_write() {
        assert_eq!(held(0), 0);
        assert_eq!(held(3), 3);
        assert_eq!(held(4096), HELD);
    }
}
