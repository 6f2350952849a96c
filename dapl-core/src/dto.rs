//! What a posted work request remembers until its completion: the wr_id of
//! every backend request is the address of one of these slots, so a completion
//! becomes a DAT event with no lookup and no allocation.

use crate::state::{Provider, Upcalls};
use dat_abi::*;
use crate::backend::{Completion, CompletionKind};
use std::cell::UnsafeCell;
use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

/// `op` for a memory-window bind, which completes as an RMR event.
pub const OP_RMR_BIND: u32 = 0x100;
/// `op` for the invalidate a rebind of a bound type 2 window posts first:
/// unsignaled, and no event of its own when it fails (the bind behind it
/// is flushed and reports, once, under the same cookie).
pub const OP_RMR_QUIET: u32 = 0x101;
/// `op` for a receive posted to an SRQ: the EP is found from the QP number.
pub const OP_SRQ_RECV: u32 = 0x200;

#[derive(Default)]
pub struct DtoSlot {
    /// The EP handle (the RMR handle for a bind); 0 once the owner is gone,
    /// so a late completion from a freed EP is dropped, not misreported.
    pub owner: usize,
    pub cookie: u64,
    pub len: u64,
    pub op: u32,
    pub rmr_context: u32,
    /// Claimed for a request that will complete and whose completion has
    /// not been read yet: the slot must not be claimed again until it is.
    pub busy: AtomicBool,
}

pub struct SlotCell(UnsafeCell<DtoSlot>);

// A slot is written only by the thread whose claim set its `busy` (which
// only a read completion clears); it is read only after the hardware
// reports its completion.
unsafe impl Sync for SlotCell {}

/// A ring of slots for one work queue. Slots are handed out round-robin;
/// the ring is twice the queue depth. A queue's depth does not bound the
/// slots in use: a backend may free a queue entry when it writes the
/// completion (rxe, sock), not when the consumer reads it, so a consumer
/// whose reaper lags can post again while older completions still wait in
/// the CQ. A claim that would land on such a slot passes over it to the
/// next; only when every slot waits to be read is the post refused (with
/// DAT_INSUFFICIENT_RESOURCES, as DAPL's cookie buffer refuses it), never
/// is a cookie not yet reported overwritten.
pub struct Ring {
    slots: &'static [SlotCell],
    /// `slots.len() - 1`; the length is a power of two.
    mask: usize,
    next: AtomicUsize,
}

static RETIRED: Mutex<VecDeque<&'static [SlotCell]>> = Mutex::new(VecDeque::new());

impl Ring {
    /// A ring for a queue of `depth`; its memory is never freed, only reused
    /// by a later EP, because completions can outlive the EP that posted.
    pub fn new(depth: u32) -> Ring {
        let size = (depth as usize * 2).next_power_of_two().max(2);
        let reused = {
            let mut r = RETIRED.lock().unwrap_or_else(|e| e.into_inner());
            r.iter().position(|s| s.len() == size).and_then(|i| r.remove(i))
        };
        let slots = reused.unwrap_or_else(|| {
            let v: Vec<SlotCell> = (0..size).map(|_| SlotCell(UnsafeCell::new(DtoSlot::default()))).collect();
            &*Box::leak(v.into_boxed_slice())
        });
        for cell in slots {
            // SAFETY: a reused ring's unread completions are its old EP's,
            // which no longer reads the slots; a new ring's are unshared.
            unsafe { (*cell.0.get()).busy.store(false, Ordering::Release) };
        }
        Ring { slots, mask: size - 1, next: AtomicUsize::new(0) }
    }

    /// Claims the next free slot, fills it and returns the wr_id for it;
    /// None if every slot's last completion is still unread. `completes`: the
    /// request will report a completion (false for an unsignaled one, whose
    /// slot is read only if it fails).
    #[inline]
    pub fn claim(&self, owner: usize, cookie: u64, len: u64, op: u32, rmr_context: u32, completes: bool) -> Option<u64> {
        let mut tries = 0;
        let slot = loop {
            let n = self.next.fetch_add(1, Ordering::Relaxed);
            // SAFETY: the mask keeps the index below the (power of two) length.
            let slot = unsafe { self.slots.get_unchecked(n & self.mask) }.0.get();
            // Taken in one step, not looked at and then set: a poster held up
            // between its index and this (preempted while the others went
            // round the ring) would otherwise fill the slot beside the one
            // whose index came round to it, and one cookie was reported twice
            // and another never (conformance threads_one_ep in CI, stop 36).
            // SAFETY: a shared view of the flag only; the reaper clears it through the same kind of view.
            if unsafe { (*slot).busy.compare_exchange(false, true, Ordering::Acquire, Ordering::Relaxed) }.is_ok() {
                break slot;
            }
            tries += 1;
            if tries == self.slots.len() {
                self.give_back(n);
                return None;
            }
            // One reaper that stalls between polling a completion and reading
            // its slot (preempted, under load) must not refuse every poster:
            // the index is spent, the next slot is tried.
        };
        // SAFETY: index n is ours until its completion (see SlotCell), and
        // its last completion was read.
        unsafe {
            (*slot).owner = owner;
            (*slot).cookie = cookie;
            (*slot).len = len;
            (*slot).op = op;
            (*slot).rmr_context = rmr_context;
            if !completes {
                // An unsignaled request's slot is read only if it fails.
                (*slot).busy.store(false, Ordering::Release);
            }
        }
        // Its completion may be polled on another thread: the device carries the edge.
        crate::tsan::release(slot);
        Some(slot as u64)
    }

    /// Takes back a claim (`wr_id`) whose post the queue refused.
    #[inline]
    pub fn unclaim(&self, wr_id: u64) {
        // SAFETY: wr_id is the slot claim() just returned; nothing else holds it.
        unsafe { (*(wr_id as *const DtoSlot)).busy.store(false, Ordering::Release) };
        let n = self.next.load(Ordering::Relaxed).wrapping_sub(1);
        // Only the last claim can be handed back; an earlier one is skipped.
        if self.slots[n & self.mask].0.get() as u64 == wr_id {
            self.give_back(n);
        }
    }

    /// Undoes claim index `n`. If another poster claimed after it, handing
    /// it back would give that claim's slot a second owner: the index then
    /// stays spent.
    #[inline]
    fn give_back(&self, n: usize) {
        let _ = self.next.compare_exchange(n.wrapping_add(1), n, Ordering::Relaxed, Ordering::Relaxed);
    }

    pub fn capacity(&self) -> usize {
        self.slots.len()
    }

    /// Claims whose completion has not been read yet: the slots still
    /// held. An unsignaled request holds none (it never reports), so a send
    /// ring counts the signaled ones; on RC a later signaled request's
    /// completion also says the unsignaled ones before it are done.
    /// Counted here, on the rare queries that ask, rather than kept as a
    /// counter every completion would bump with a locked instruction (one
    /// per message on each side of an on-node stream, where each costs
    /// 14-19 ns while the peer polls a line this thread just wrote).
    pub fn outstanding(&self) -> usize {
        // SAFETY: a shared view of each flag only, as the claim takes.
        self.slots.iter().filter(|c| unsafe { (*c.0.get()).busy.load(Ordering::Acquire) }).count()
    }

    /// Whether `wr_id` names one of this ring's slots.
    pub fn holds(&self, wr_id: u64) -> bool {
        let start = self.slots.as_ptr() as u64;
        (start..start + std::mem::size_of_val(self.slots) as u64).contains(&wr_id)
    }
}

impl Drop for Ring {
    fn drop(&mut self) {
        for cell in self.slots {
            // SAFETY: the owner is gone; late completions only read `owner`.
            unsafe { (*cell.0.get()).owner = 0 };
        }
        RETIRED.lock().unwrap_or_else(|e| e.into_inner()).push_back(self.slots);
    }
}

/// Notes the EP behind QP `qp_num`, which takes its receives from an SRQ:
/// their completions name the QP, not the EP.
pub fn map_qp<T: Provider>(qp_num: u32, ep: usize) {
    T::state().srq_qps.lock().unwrap_or_else(|e| e.into_inner()).get_or_insert_with(HashMap::new).insert(qp_num, ep);
}

pub fn unmap_qp<T: Provider>(qp_num: u32) {
    if let Some(m) = T::state().srq_qps.lock().unwrap_or_else(|e| e.into_inner()).as_mut() {
        m.remove(&qp_num);
    }
}

pub fn ep_of_qp<T: Provider>(qp_num: u32) -> usize {
    T::state().srq_qps.lock().unwrap_or_else(|e| e.into_inner()).as_ref().and_then(|m| m.get(&qp_num).copied()).unwrap_or(0)
}

/// Fills `ev` from a work completion on the EVD `evd`; false if the
/// completion belongs to an EP that has since been freed.
#[inline(always)]
pub fn event_from_completion<T: Provider>(wc: &Completion, evd: DAT_EVD_HANDLE, ev: &mut DAT_EVENT) -> bool {
    // SAFETY: every wr_id we post is the address of a slot in a ring whose
    // memory is never freed (see Ring::new).
    let cell = unsafe { &*(wc.wr_id as *const DtoSlot) };
    crate::tsan::acquire(cell);
    // Read out before the slot is handed back for the next claim.
    let (owner, cookie, len, op, rmr_context) = (cell.owner, cell.cookie, cell.len, cell.op, cell.rmr_context);
    cell.busy.store(false, Ordering::Release);
    if owner == 0 {
        return false;
    }
    ev.evd_handle = evd;
    // The usual case, a plain DTO that succeeded, here; the rest out of line.
    let plain = wc.status == DAT_DTO_SUCCESS
        && op < DAT_DTO_EXTENSION_BASE
        && wc.imm.is_none()
        && wc.kind != CompletionKind::RecvRdmaWithImm;
    if !plain {
        // By value: the copy is made here, on the rare path, so the usual
        // one keeps the completion in registers.
        if op == OP_RMR_QUIET {
            quiet_failed(owner, wc.status);
            return false;
        }
        other_event::<T>(*wc, &Posted { owner, cookie, len, op, rmr_context }, ev);
        return true;
    }
    let len = if op == DAT_DTO_RECEIVE {
        <T::Up as Upcalls<T>>::ep_received(owner, wc, false);
        wc.byte_len as u64
    } else {
        len
    };
    ev.event_number = DAT_DTO_COMPLETION_EVENT;
    ev.event_data.dto_completion_event_data = DAT_DTO_COMPLETION_EVENT_DATA {
        ep_handle: owner as DAT_EP_HANDLE,
        user_cookie: DAT_DTO_COOKIE { as_64: cookie },
        status: DAT_DTO_SUCCESS,
        transfered_length: len as DAT_SEG_LENGTH,
        operation: op,
        rmr_context,
    };
    true
}

/// What a completion's slot held.
struct Posted {
    owner: usize,
    cookie: u64,
    len: u64,
    op: u32,
    rmr_context: u32,
}

/// `event_from_completion` for all but a plain successful DTO: errors
/// (which break the connection), window binds, SRQ receives, immediate
/// data and the IB extension's operations.
#[cold]
#[inline(never)]
fn other_event<T: Provider>(wc: Completion, slot: &Posted, ev: &mut DAT_EVENT) {
    let wc = &wc;
    let status = wc.status;
    if slot.op == OP_RMR_BIND {
        ev.event_number = DAT_RMR_BIND_COMPLETION_EVENT;
        ev.event_data.rmr_completion_event_data = DAT_RMR_BIND_COMPLETION_EVENT_DATA {
            rmr_handle: slot.owner as DAT_RMR_HANDLE,
            user_cookie: DAT_RMR_COOKIE { as_64: slot.cookie },
            status,
        };
        return;
    }
    let (owner, op) = if slot.op == OP_SRQ_RECV {
        (ep_of_qp::<T>(wc.qp_num), DAT_DTO_RECEIVE)
    } else {
        (slot.owner, slot.op)
    };
    if status != DAT_DTO_SUCCESS && status != DAT_DTO_ERR_FLUSHED {
        // An error completion leaves the QP in error: the connection is gone.
        <T::Up as Upcalls<T>>::ep_broken(owner);
    }
    let received = op == DAT_DTO_RECEIVE || op == DAT_IB_DTO_RECV_UD;
    let len = if received { wc.byte_len as u64 } else { slot.len };
    if received && status == DAT_DTO_SUCCESS {
        <T::Up as Upcalls<T>>::ep_received(owner, wc, op == DAT_IB_DTO_RECV_UD);
    }
    // Immediate data or an IB extension operation makes it an extended event.
    let ext = if status != DAT_DTO_SUCCESS {
        (op >= DAT_DTO_EXTENSION_BASE).then_some((op, None, 0))
    } else {
        extended(wc, op)
    };
    ev.event_number = if ext.is_some() { DAT_IB_DTO_EVENT } else { DAT_DTO_COMPLETION_EVENT };
    ev.event_data.dto_completion_event_data = DAT_DTO_COMPLETION_EVENT_DATA {
        ep_handle: owner as DAT_EP_HANDLE,
        user_cookie: DAT_DTO_COOKIE { as_64: slot.cookie },
        status,
        transfered_length: len as DAT_SEG_LENGTH,
        operation: ext.map_or(op, |e| e.0),
        rmr_context: slot.rmr_context,
    };
    if let Some((_, kind, qpn)) = ext {
        let x = ext_data(ev);
        x.type_ = kind.unwrap_or(0);
        x.status = if status == DAT_DTO_SUCCESS { DAT_OP_SUCCESS } else { DAT_IB_OP_ERR };
        // DAPL hands the immediate word on as it arrives, so we do too (no byte swap).
        x.val.immed.data = wc.imm.unwrap_or(0);
        x.__bindgen_anon_1.remote_ah = DAT_IB_ADDR_HANDLE { ah: std::ptr::null_mut(), qpn, ..Default::default() };
    }
}

/// The invalidate ahead of a rebind failed (it completes only then): no
/// event of its own, the bind behind it reports, flushed.
#[cold]
#[inline(never)]
fn quiet_failed(rmr: usize, status: DAT_DTO_COMPLETION_STATUS) {
    log::warn!("RMR {rmr:#x}: invalidating the window before its rebind failed (status {status}); the bind is flushed");
}

/// The IB-extension view of a DTO completion: (the DTO type to report, the
/// extension type, the source QP for UD). None for a plain DTO.
#[inline]
fn extended(wc: &Completion, op: u32) -> Option<(u32, Option<DAT_IB_EXT_TYPE>, u32)> {
    let imm = wc.imm.is_some();
    match op {
        DAT_DTO_RECEIVE if wc.kind == CompletionKind::RecvRdmaWithImm => {
            Some((DAT_IB_DTO_RECV_IMMED, Some(DAT_IB_RDMA_WRITE_IMMED_DATA), 0))
        }
        DAT_DTO_RECEIVE if imm => Some((DAT_IB_DTO_RECV_MSG_IMMED, Some(DAT_IB_RECV_IMMED_DATA), 0)),
        DAT_DTO_RECEIVE => None,
        DAT_IB_DTO_RECV_UD => {
            let op = if imm { DAT_IB_DTO_RECV_UD_IMMED } else { DAT_IB_DTO_RECV_UD };
            Some((op, Some(DAT_IB_UD_RECV), wc.src_qp))
        }
        DAT_IB_DTO_RDMA_WRITE_IMMED => Some((op, Some(DAT_IB_RDMA_WRITE_IMMED), 0)),
        DAT_IB_DTO_FETCH_ADD => Some((op, Some(DAT_IB_FETCH_AND_ADD), 0)),
        DAT_IB_DTO_CMP_SWAP => Some((op, Some(DAT_IB_CMP_AND_SWAP), 0)),
        DAT_IB_DTO_SEND_UD => Some((op, Some(DAT_IB_UD_SEND), 0)),
        _ => None,
    }
}

/// The extension area of an event, as DAT_IB_EXTENSION_EVENT_DATA.
pub fn ext_data(ev: &mut DAT_EVENT) -> &mut DAT_IB_EXTENSION_EVENT_DATA {
    const _: () = assert!(
        std::mem::size_of::<DAT_IB_EXTENSION_EVENT_DATA>() <= std::mem::size_of::<[DAT_UINT64; 8]>()
    );
    // SAFETY: the 64-byte, 8-aligned extension area holds the whole struct
    // (checked above), and every bit pattern of it is valid.
    unsafe { &mut *(ev.event_extension_data.as_mut_ptr() as *mut DAT_IB_EXTENSION_EVENT_DATA) }
}

#[cfg(test)]
mod tests {
    use super::*;

    type T = crate::mock::Mock;

    fn wc(wr_id: u64, status: DAT_DTO_COMPLETION_STATUS, byte_len: u32) -> Completion {
        Completion { wr_id, status, byte_len, ..Default::default() }
    }

    #[test]
    fn completions_become_events() {
        let ring = Ring::new(4);
        assert_eq!(ring.capacity(), 8);
        let send = ring.claim(0x1000, 42, 300, DAT_DTO_SEND, 0, true).unwrap();
        let recv = ring.claim(0x1000, 43, 4096, DAT_DTO_RECEIVE, 0, true).unwrap();
        // SAFETY: DAT_EVENT is plain C data.
        let mut ev: DAT_EVENT = unsafe { std::mem::zeroed() };
        assert!(event_from_completion::<T>(&wc(send, DAT_DTO_SUCCESS, 0), 0x2000 as DAT_EVD_HANDLE, &mut ev));
        // SAFETY: the event number says which member is filled.
        let d = unsafe { ev.event_data.dto_completion_event_data };
        assert_eq!(ev.event_number, DAT_DTO_COMPLETION_EVENT);
        assert_eq!((d.ep_handle as usize, unsafe { d.user_cookie.as_64 }, d.transfered_length), (0x1000, 42, 300));
        assert_eq!((d.status, d.operation), (DAT_DTO_SUCCESS, DAT_DTO_SEND));
        // A receive reports the bytes that arrived, not the buffer size.
        assert!(event_from_completion::<T>(&wc(recv, DAT_DTO_ERR_FLUSHED, 17), 0x2000 as DAT_EVD_HANDLE, &mut ev));
        // SAFETY: as above.
        let d = unsafe { ev.event_data.dto_completion_event_data };
        assert_eq!((d.transfered_length, d.status, d.operation), (17, DAT_DTO_ERR_FLUSHED, DAT_DTO_RECEIVE));
        assert_eq!(ring.outstanding(), 0);
        // Out until read: a signaled request and a receive; an unsignaled
        // request never reports, so it is not counted.
        let signaled = ring.claim(0x1000, 45, 1, DAT_DTO_SEND, 0, true).unwrap();
        ring.claim(0x1000, 46, 1, DAT_DTO_SEND, 0, false).unwrap();
        let recv = ring.claim(0x1000, 47, 64, DAT_DTO_RECEIVE, 0, true).unwrap();
        assert_eq!(ring.outstanding(), 2);
        assert!(event_from_completion::<T>(&wc(recv, DAT_DTO_ERR_FLUSHED, 0), 0x2000 as DAT_EVD_HANDLE, &mut ev));
        assert_eq!(ring.outstanding(), 1);
        assert!(event_from_completion::<T>(&wc(signaled, DAT_DTO_SUCCESS, 0), 0x2000 as DAT_EVD_HANDLE, &mut ev));
        assert_eq!(ring.outstanding(), 0);
        // Once the owner is gone, a late completion is dropped.
        let late = ring.claim(0x1000, 44, 1, DAT_DTO_SEND, 0, true).unwrap();
        drop(ring);
        assert!(!event_from_completion::<T>(&wc(late, DAT_DTO_ERR_FLUSHED, 0), 0x2000 as DAT_EVD_HANDLE, &mut ev));
    }

    /// A backend may free a queue entry before its completion is read (the
    /// reaper lags): the ring then refuses a claim rather than overwrite
    /// the cookie that completion will report.
    #[test]
    fn unread_completions_are_never_overwritten() {
        let ring = Ring::new(2);
        let cap = ring.capacity() as u64;
        let ids: Vec<u64> = (0..cap).map(|c| ring.claim(0x1000, c, 1, DAT_DTO_SEND, 0, true).unwrap()).collect();
        assert!(ring.claim(0x1000, 99, 1, DAT_DTO_SEND, 0, true).is_none(), "slot 0's completion is unread");
        // SAFETY: DAT_EVENT is plain C data.
        let mut ev: DAT_EVENT = unsafe { std::mem::zeroed() };
        assert!(event_from_completion::<T>(&wc(ids[0], DAT_DTO_SUCCESS, 0), 0x2000 as DAT_EVD_HANDLE, &mut ev));
        // SAFETY: the event number says which member is filled.
        assert_eq!(unsafe { ev.event_data.dto_completion_event_data.user_cookie.as_64 }, 0);
        // Read, slot 0 takes the next claim; an unsignaled one does not hold its slot.
        let again = ring.claim(0x1000, cap, 1, DAT_DTO_SEND, 0, false).unwrap();
        assert_eq!(again, ids[0]);
        for id in &ids[1..] {
            assert!(event_from_completion::<T>(&wc(*id, DAT_DTO_SUCCESS, 0), 0x2000 as DAT_EVD_HANDLE, &mut ev));
        }
        assert!(ring.claim(0x1000, cap + 1, 1, DAT_DTO_SEND, 0, true).is_some());
        // A claim the queue refused gives its slot back.
        let refused = ring.claim(0x1000, cap + 2, 1, DAT_DTO_SEND, 0, true).unwrap();
        ring.unclaim(refused);
        assert_eq!(ring.claim(0x1000, cap + 3, 1, DAT_DTO_SEND, 0, true), Some(refused));
    }

    /// One completion left unread does not refuse the posts after it: the
    /// claim passes over its slot, and what is out stays counted right.
    #[test]
    fn an_unread_slot_is_passed_over() {
        let ring = Ring::new(2);
        let cap = ring.capacity();
        // SAFETY: DAT_EVENT is plain C data.
        let mut ev: DAT_EVENT = unsafe { std::mem::zeroed() };
        let stuck = ring.claim(0x1000, 0, 1, DAT_DTO_SEND, 0, true).unwrap();
        for c in 1..(3 * cap as u64) {
            let id = ring.claim(0x1000, c, 1, DAT_DTO_SEND, 0, true).expect("a free slot exists");
            assert_ne!(id, stuck, "the unread slot is never handed out again");
            assert!(event_from_completion::<T>(&wc(id, DAT_DTO_SUCCESS, 0), 0x2000 as DAT_EVD_HANDLE, &mut ev));
            // SAFETY: the event number says which member is filled.
            assert_eq!(unsafe { ev.event_data.dto_completion_event_data.user_cookie.as_64 }, c);
        }
        assert_eq!(ring.outstanding(), 1, "only the stuck request is out");
        assert!(event_from_completion::<T>(&wc(stuck, DAT_DTO_SUCCESS, 0), 0x2000 as DAT_EVD_HANDLE, &mut ev));
        assert_eq!(ring.outstanding(), 0);
    }

    /// Posters racing on one ring never share a slot, even when one is held
    /// up between taking its index and claiming the slot while the others
    /// go round (two slots here, so they go round in two claims).
    #[test]
    fn racing_posters_never_share_a_slot() {
        use std::sync::atomic::AtomicU32;
        let ring = Ring::new(1);
        let base = ring.slots.as_ptr() as u64;
        let held: Vec<AtomicU32> = (0..ring.capacity()).map(|_| AtomicU32::new(0)).collect();
        std::thread::scope(|s| {
            for t in 0..8u64 {
                let (ring, held) = (&ring, &held);
                s.spawn(move || {
                    for i in 0..20_000u64 {
                        let cookie = t << 32 | i;
                        let Some(id) = ring.claim(0x1000, cookie, 1, DAT_DTO_SEND, 0, true) else { continue };
                        let k = (id - base) as usize / std::mem::size_of::<SlotCell>();
                        assert_eq!(held[k].swap(1, Ordering::SeqCst), 0, "slot {k} handed to two posters");
                        // SAFETY: the slot claim() gave us; only its completion reads it.
                        let cell = unsafe { &*(id as *const DtoSlot) };
                        std::hint::spin_loop();
                        assert_eq!(cell.cookie, cookie, "slot {k}: our cookie was overwritten");
                        held[k].store(0, Ordering::SeqCst);
                        // The reaper's part: read, the slot is free again.
                        cell.busy.store(false, Ordering::Release);
                    }
                });
            }
        });
    }
}
