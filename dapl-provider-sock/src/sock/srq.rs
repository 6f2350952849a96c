//! Receive queues: the ring a QP or an SRQ keeps its posted receives in,
//! and the shared receive queue with its limit event.

use super::Sock;
use super::device::Shared;
use super::keys::Pd;
use super::qp::Sge;
use super::spin::SpinLock;
use dapl_core::backend::{AsyncEvent, SrqOps};
use dat_abi::*;
use std::io;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicUsize, Ordering};
use std::sync::Arc;

/// One posted receive, as the progress thread takes it.
#[derive(Default)]
pub struct RecvWqe {
    pub wr_id: u64,
    pub sges: Vec<Sge>,
}

/// A ring of posted receives; every slot and its SGEs exist from creation.
pub struct RecvRing {
    cap: usize,
    /// Slots are a power of two (at least `cap`), as the send queue's.
    mask: u64,
    nsge: usize,
    head: u64,
    tail: u64,
    ids: Vec<u64>,
    counts: Vec<u32>,
    sges: Vec<Sge>,
}

impl RecvRing {
    pub fn new(cap: usize, nsge: usize) -> RecvRing {
        let slots = cap.max(1).next_power_of_two();
        RecvRing { cap, mask: slots as u64 - 1, nsge, head: 0, tail: 0, ids: vec![0; slots], counts: vec![0; slots], sges: vec![Sge::default(); slots * nsge] }
    }

    #[inline]
    fn slot(&self, i: u64) -> usize {
        (i & self.mask) as usize
    }

    pub fn len(&self) -> usize {
        (self.head - self.tail) as usize
    }

    #[inline]
    pub fn push(&mut self, wr_id: u64, sges: &[Sge]) -> Result<(), i32> {
        if self.len() >= self.cap {
            return Err(libc::ENOMEM);
        }
        if sges.len() > self.nsge {
            return Err(libc::EINVAL);
        }
        let s = self.slot(self.head);
        self.ids[s] = wr_id;
        self.counts[s] = sges.len() as u32;
        if let [one] = sges {
            // The usual receive: one segment, without a call to memcpy.
            self.sges[s * self.nsge] = *one;
        } else {
            self.sges[s * self.nsge..s * self.nsge + sges.len()].copy_from_slice(sges);
        }
        self.head += 1;
        Ok(())
    }

    pub fn pop(&mut self, out: &mut RecvWqe) -> bool {
        if self.head == self.tail {
            return false;
        }
        let s = self.slot(self.tail);
        out.wr_id = self.ids[s];
        out.sges.clear();
        let n = self.counts[s] as usize;
        if n == 1 && out.sges.capacity() > 0 {
            // The usual receive: one segment, without the slice copy's
            // length checks and growth path.
            out.sges.push(self.sges[s * self.nsge]);
        } else {
            out.sges.extend_from_slice(&self.sges[s * self.nsge..s * self.nsge + n]);
        }
        self.tail += 1;
        true
    }

    pub fn clear(&mut self) {
        self.tail = self.head;
    }

    /// A ring of `cap` slots holding what this one holds; None if it does not fit.
    fn resized(&self, cap: usize) -> Option<RecvRing> {
        if cap < self.len() {
            return None;
        }
        let mut r = RecvRing::new(cap, self.nsge);
        for i in self.tail..self.head {
            let s = self.slot(i);
            let n = self.counts[s] as usize;
            let _ = r.push(self.ids[s], &self.sges[s * self.nsge..s * self.nsge + n]);
        }
        Some(r)
    }
}

pub struct SrqInner {
    ring: SpinLock<RecvRing>,
    /// Armed limit (0: disarmed): falling below it raises the limit event once.
    limit: AtomicU32,
    context: AtomicUsize,
    pub starved: AtomicBool,
    /// The DAT SRQ went (`Shared::forget_async`): no more async events.
    gone: AtomicBool,
    shared: Arc<Shared>,
}

impl SrqInner {
    pub fn take(&self, out: &mut RecvWqe) -> bool {
        let (got, left) = {
            let mut r = self.ring.lock();
            (r.pop(out), r.len())
        };
        let limit = self.limit.load(Ordering::Acquire);
        if got && limit > 0 && (left as u32) < limit && self.limit.swap(0, Ordering::AcqRel) != 0 {
            self.shared.post_async(&self.gone, AsyncEvent::SrqLimitReached { context: self.context.load(Ordering::Acquire) });
        }
        got
    }
}

pub struct Srq(pub Arc<SrqInner>);

impl Drop for Srq {
    fn drop(&mut self) {
        // QPs that took receives from it may hold the queue a while yet.
        self.0.shared.forget_async(&self.0.gone, self.0.context.load(Ordering::Acquire));
    }
}

impl Srq {
    pub fn create(pd: &Pd, max_wr: u32, max_sge: u32, limit: u32) -> io::Result<Srq> {
        if max_sge as usize > super::device::MAX_SGE {
            return Err(io::Error::from_raw_os_error(libc::EINVAL));
        }
        Ok(Srq(Arc::new(SrqInner {
            ring: SpinLock::new(RecvRing::new(max_wr.max(1) as usize, max_sge.max(1) as usize)),
            limit: AtomicU32::new(limit),
            context: AtomicUsize::new(0),
            gone: AtomicBool::new(false),
            starved: AtomicBool::new(false),
            shared: pd.shared.clone(),
        })))
    }
}

impl SrqOps<Sock> for Srq {
    #[inline]
    fn post_recv(&self, wr_id: u64, sges: &[Sge]) -> Result<(), i32> {
        self.0.ring.lock().push(wr_id, sges)?;
        // A plain load first, as for a QP's receive queue.
        if self.0.starved.load(Ordering::Acquire) && self.0.starved.swap(false, Ordering::SeqCst) {
            self.0.shared.kick();
        }
        Ok(())
    }

    fn set_context(&self, h: DAT_HANDLE) {
        self.0.context.store(h as usize, Ordering::Release);
    }

    fn resize(&self, max_wr: u32) -> io::Result<()> {
        let mut r = self.0.ring.lock();
        match r.resized(max_wr.max(1) as usize) {
            Some(n) => {
                *r = n;
                Ok(())
            }
            None => Err(io::Error::from_raw_os_error(libc::EINVAL)),
        }
    }

    fn set_limit(&self, limit: u32) -> io::Result<()> {
        self.0.limit.store(limit, Ordering::Release);
        // Already below the new limit: verbs raises the event at once.
        let left = self.0.ring.lock().len() as u32;
        if limit > 0 && left < limit && self.0.limit.swap(0, Ordering::AcqRel) != 0 {
            self.0.shared.post_async(&self.0.gone, AsyncEvent::SrqLimitReached { context: self.0.context.load(Ordering::Acquire) });
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_ring_of_three_holds_three_in_order_across_its_wrap() {
        // 3 slots asked for, 4 allocated: the 4th must still be refused.
        let mut r = RecvRing::new(3, 2);
        let mut out = RecvWqe { wr_id: 0, sges: Vec::new() };
        let (mut next, mut expect) = (0u64, 0u64);
        for round in 0..50u64 {
            while r.push(next, &[Sge { addr: next, len: 1, key: 7 }, Sge { addr: !next, len: 2, key: 7 }]).is_ok() {
                next += 1;
            }
            assert_eq!(r.len(), 3, "round {round}");
            for _ in 0..1 + round % 3 {
                assert!(r.pop(&mut out));
                assert_eq!((out.wr_id, out.sges.len(), out.sges[0].addr, out.sges[1].addr), (expect, 2, expect, !expect));
                expect += 1;
            }
        }
        let bigger = r.resized(5).unwrap();
        assert_eq!(bigger.len(), r.len());
        assert!(r.resized(r.len() - 1).is_none());
    }
}
