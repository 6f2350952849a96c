//! A completion queue with its own completion channel, so one EVD can sleep
//! on exactly its CQ; and the translation of a verbs work completion into
//! the core's `Completion`.

use dapl_core::backend::{Completion, CompletionKind, CqOps};
use dat_abi::*;
use rdma_core_sys as ibv;
use std::mem::MaybeUninit;
use std::sync::atomic::{AtomicU32, Ordering};

pub struct Cq {
    pub cq: *mut ibv::ibv_cq,
    channel: *mut ibv::ibv_comp_channel,
    /// Events taken off the channel but not yet acknowledged; destroy_cq
    /// blocks until all are acked, so they are acked in batches and at drop.
    unacked: AtomicU32,
}

// ibv_cq and its channel are usable from any thread (the library locks).
unsafe impl Send for Cq {}
unsafe impl Sync for Cq {}

impl Cq {
    pub fn create(ctx: *mut ibv::ibv_context, depth: i32) -> Result<Cq, std::io::Error> {
        // SAFETY: ctx is the IA's live context.
        let channel = unsafe { ibv::ibv_create_comp_channel(ctx) };
        if channel.is_null() {
            return Err(std::io::Error::last_os_error());
        }
        // Non-blocking, so a wait can poll() the fd with a timeout.
        // SAFETY: fd owned by the channel.
        unsafe {
            let fd = (*channel).fd;
            let fl = libc::fcntl(fd, libc::F_GETFL);
            libc::fcntl(fd, libc::F_SETFL, fl | libc::O_NONBLOCK);
        }
        // SAFETY: ctx and channel live; no cq_context needed.
        let cq = unsafe { ibv::ibv_create_cq(ctx, depth.max(1), std::ptr::null_mut(), channel, 0) };
        if cq.is_null() {
            let e = std::io::Error::last_os_error();
            // SAFETY: created above, unused.
            unsafe { ibv::ibv_destroy_comp_channel(channel) };
            return Err(e);
        }
        Ok(Cq { cq, channel, unacked: AtomicU32::new(0) })
    }
}

#[cold]
pub fn status_of(wc_status: u32) -> DAT_DTO_COMPLETION_STATUS {
    match wc_status {
        ibv::IBV_WC_SUCCESS => DAT_DTO_SUCCESS,
        ibv::IBV_WC_WR_FLUSH_ERR => DAT_DTO_ERR_FLUSHED,
        ibv::IBV_WC_LOC_LEN_ERR => DAT_DTO_ERR_LOCAL_LENGTH,
        ibv::IBV_WC_LOC_QP_OP_ERR => DAT_DTO_ERR_LOCAL_EP,
        ibv::IBV_WC_LOC_PROT_ERR | ibv::IBV_WC_LOC_ACCESS_ERR => DAT_DTO_ERR_LOCAL_PROTECTION,
        ibv::IBV_WC_BAD_RESP_ERR => DAT_DTO_ERR_BAD_RESPONSE,
        ibv::IBV_WC_REM_ACCESS_ERR | ibv::IBV_WC_MW_BIND_ERR => DAT_DTO_ERR_REMOTE_ACCESS,
        ibv::IBV_WC_REM_INV_REQ_ERR | ibv::IBV_WC_REM_OP_ERR | ibv::IBV_WC_REM_INV_RD_REQ_ERR
        | ibv::IBV_WC_REM_ABORT_ERR => DAT_DTO_ERR_REMOTE_RESPONDER,
        ibv::IBV_WC_RNR_RETRY_EXC_ERR => DAT_DTO_ERR_RECEIVER_NOT_READY,
        _ => DAT_DTO_ERR_TRANSPORT,
    }
}

const fn kind_of_slow(opcode: u32) -> CompletionKind {
    match opcode {
        ibv::IBV_WC_SEND => CompletionKind::Send,
        ibv::IBV_WC_RDMA_WRITE => CompletionKind::RdmaWrite,
        ibv::IBV_WC_RDMA_READ => CompletionKind::RdmaRead,
        ibv::IBV_WC_COMP_SWAP => CompletionKind::CompareSwap,
        ibv::IBV_WC_FETCH_ADD => CompletionKind::FetchAdd,
        ibv::IBV_WC_BIND_MW => CompletionKind::WindowBind,
        ibv::IBV_WC_LOCAL_INV => CompletionKind::LocalInvalidate,
        ibv::IBV_WC_RECV => CompletionKind::Recv,
        ibv::IBV_WC_RECV_RDMA_WITH_IMM => CompletionKind::RecvRdmaWithImm,
        _ => CompletionKind::Other,
    }
}

/// `kind_of_slow` for every opcode below the table's end, as one load.
const KINDS: [CompletionKind; 136] = {
    let mut t = [CompletionKind::Other; 136];
    let mut i = 0;
    while i < t.len() {
        t[i] = kind_of_slow(i as u32);
        i += 1;
    }
    t
};

#[inline]
fn kind_of(opcode: u32) -> CompletionKind {
    match KINDS.get(opcode as usize) {
        Some(k) => *k,
        None => CompletionKind::Other,
    }
}

/// The core's view of one verbs work completion.
#[inline]
pub fn completion_of(wc: &ibv::ibv_wc) -> Completion {
    let imm = if wc.wc_flags & ibv::IBV_WC_WITH_IMM != 0 {
        // SAFETY: the immediate word is valid whenever the flag says so.
        Some(unsafe { wc.__bindgen_anon_1.imm_data })
    } else {
        None
    };
    Completion {
        wr_id: wc.wr_id,
        status: if wc.status == ibv::IBV_WC_SUCCESS { DAT_DTO_SUCCESS } else { status_of(wc.status) },
        kind: kind_of(wc.opcode),
        byte_len: wc.byte_len,
        imm,
        qp_num: wc.qp_num,
        src_qp: wc.src_qp,
    }
}

impl CqOps for Cq {
    #[inline]
    fn poll(&self, out: &mut Completion) -> bool {
        let mut wc = MaybeUninit::<ibv::ibv_wc>::uninit();
        // SAFETY: live CQ; one entry into wc, which is read only if reported.
        if unsafe { ibv::ibv_poll_cq(self.cq, 1, wc.as_mut_ptr()) } <= 0 {
            return false;
        }
        // SAFETY: the poll above filled the entry it reported.
        *out = completion_of(unsafe { wc.assume_init_ref() });
        true
    }

    fn arm(&self, solicited_only: bool) -> bool {
        // SAFETY: live CQ.
        unsafe { ibv::ibv_req_notify_cq(self.cq, solicited_only as i32) == 0 }
    }

    fn fd(&self) -> i32 {
        // SAFETY: live channel.
        unsafe { (*self.channel).fd }
    }

    fn drain_events(&self) {
        loop {
            let mut cq: *mut ibv::ibv_cq = std::ptr::null_mut();
            let mut ctx: *mut libc::c_void = std::ptr::null_mut();
            // SAFETY: live channel; the fd is non-blocking, so this returns at once.
            if unsafe { ibv::ibv_get_cq_event(self.channel, &mut cq, &mut ctx) } != 0 {
                break;
            }
            if self.unacked.fetch_add(1, Ordering::AcqRel) + 1 >= 64 {
                let n = self.unacked.swap(0, Ordering::AcqRel);
                // SAFETY: acknowledging events we took from this CQ.
                unsafe { ibv::ibv_ack_cq_events(self.cq, n) };
            }
        }
    }

    fn resize(&self, depth: i32) -> bool {
        // SAFETY: live CQ.
        unsafe { ibv::ibv_resize_cq(self.cq, depth) == 0 }
    }

    fn set_context(&self, h: DAT_HANDLE) {
        // SAFETY: cq_context is ours to set; async events about this CQ carry it.
        unsafe { (*self.cq).cq_context = h };
    }
}

impl Drop for Cq {
    fn drop(&mut self) {
        // SAFETY: all events are acked first, as destroy_cq requires; both objects are ours.
        unsafe {
            ibv::ibv_ack_cq_events(self.cq, self.unacked.swap(0, Ordering::AcqRel));
            let rc = ibv::ibv_destroy_cq(self.cq);
            if rc != 0 {
                log::warn!("ibv_destroy_cq: {}", std::io::Error::from_raw_os_error(rc));
            }
            ibv::ibv_destroy_comp_channel(self.channel);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn verbs_status_to_dat_status() {
        assert_eq!(status_of(ibv::IBV_WC_REM_ACCESS_ERR), DAT_DTO_ERR_REMOTE_ACCESS);
        assert_eq!(status_of(ibv::IBV_WC_LOC_LEN_ERR), DAT_DTO_ERR_LOCAL_LENGTH);
        assert_eq!(status_of(ibv::IBV_WC_RNR_RETRY_EXC_ERR), DAT_DTO_ERR_RECEIVER_NOT_READY);
        assert_eq!(status_of(ibv::IBV_WC_RETRY_EXC_ERR), DAT_DTO_ERR_TRANSPORT);
    }

    #[test]
    fn the_opcode_table_says_what_the_match_says() {
        for op in 0..400 {
            assert_eq!(kind_of(op), kind_of_slow(op), "opcode {op}");
        }
        assert_eq!(kind_of(ibv::IBV_WC_RECV_RDMA_WITH_IMM), CompletionKind::RecvRdmaWithImm);
    }

    #[test]
    fn work_completions_translate() {
        // SAFETY: plain C data.
        let mut wc: ibv::ibv_wc = unsafe { std::mem::zeroed() };
        wc.wr_id = 7;
        wc.status = ibv::IBV_WC_SUCCESS;
        wc.opcode = ibv::IBV_WC_RECV_RDMA_WITH_IMM;
        wc.wc_flags = ibv::IBV_WC_WITH_IMM;
        wc.__bindgen_anon_1.imm_data = 0x1234;
        wc.byte_len = 9;
        wc.src_qp = 5;
        let c = completion_of(&wc);
        assert_eq!((c.wr_id, c.status, c.kind, c.imm, c.byte_len, c.src_qp),
            (7, DAT_DTO_SUCCESS, CompletionKind::RecvRdmaWithImm, Some(0x1234), 9, 5));
        wc.wc_flags = 0;
        assert_eq!(completion_of(&wc).imm, None);
    }
}
