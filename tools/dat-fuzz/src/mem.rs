//! The memory a sequence registers, laid out so that wrong writes show.
//!
//! ```text
//! [ read-only block | read-write block | canary | slack ]
//! ```
//! LMRs over the read-only block are always registered without any write
//! right (local, remote or atomic), and LMRs over the read-write block stay
//! inside it. The canary is registered once per sequence, remote-writable,
//! on a PZ of its own, and its rkey is never handed to any request. So no
//! access the providers may honour can change the read-only block or the
//! canary: both are compared with their first contents after every
//! completion and at the end of the sequence. The slack is never
//! registered; segments that run past an LMR land there rather than in
//! someone else's heap. The progress thread of the sock provider writes
//! into this memory while the fuzzer runs, so it is only ever read
//! through volatile loads.

pub const RO: usize = 64 << 10;
pub const RW: usize = 64 << 10;
pub const CANARY: usize = 4 << 10;
const SLACK: usize = 8 << 10;
pub const TOTAL: usize = RO + RW + CANARY + SLACK;

pub struct Mem {
    buf: Box<[u8]>,
    first: Box<[u8]>,
}

fn pattern(seed: u64, i: usize) -> u8 {
    let x = (i as u64 ^ seed).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    (x >> 56) as u8
}

impl Mem {
    pub fn new(seed: u64) -> Mem {
        let buf: Box<[u8]> = (0..TOTAL).map(|i| pattern(seed, i)).collect();
        let first = buf.clone();
        Mem { buf, first }
    }

    pub fn base(&self) -> u64 {
        self.buf.as_ptr() as u64
    }

    pub fn ptr(&mut self, offset: usize) -> *mut u8 {
        // SAFETY: callers stay inside the buffer (offset < TOTAL).
        unsafe { self.buf.as_mut_ptr().add(offset.min(TOTAL - 1)) }
    }

    pub fn ro(&self) -> (u64, u64) {
        (self.base(), RO as u64)
    }

    pub fn canary(&self) -> (u64, u64) {
        (self.base() + (RO + RW) as u64, CANARY as u64)
    }

    /// Whether [addr, addr+len) lies in the buffer.
    pub fn holds(&self, addr: u64, len: u64) -> bool {
        addr >= self.base() && len <= TOTAL as u64 && addr - self.base() <= (TOTAL as u64) - len
    }

    /// The bytes at [addr, addr+len), if they are ours.
    pub fn read(&self, addr: u64, len: u64) -> Option<Vec<u8>> {
        if !self.holds(addr, len) {
            return None;
        }
        let p = addr as *const u8;
        // SAFETY: inside our buffer (checked); volatile because the provider's threads write here.
        Some((0..len as usize).map(|i| unsafe { std::ptr::read_volatile(p.add(i)) }).collect())
    }

    /// The first offset of the read-only block or the canary that changed.
    pub fn guarded_change(&self) -> Option<(&'static str, usize, u8, u8)> {
        let p = self.buf.as_ptr();
        let check = |from: usize, to: usize| {
            // SAFETY: in the buffer; volatile for the same reason as `read`.
            (from..to).find(|&i| unsafe { std::ptr::read_volatile(p.add(i)) } != self.first[i])
        };
        if let Some(i) = check(0, RO) {
            // SAFETY: as above.
            return Some(("read-only block", i, self.first[i], unsafe { std::ptr::read_volatile(p.add(i)) }));
        }
        check(RO + RW, RO + RW + CANARY).map(|i| {
            // SAFETY: as above.
            ("canary", i - RO - RW, self.first[i], unsafe { std::ptr::read_volatile(p.add(i)) })
        })
    }
}
