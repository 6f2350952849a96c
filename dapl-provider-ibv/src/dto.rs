//! What a posted work request remembers until its completion: the wr_id of
//! every verbs request is the address of one of these, so a completion is
//! turned into a DAT event without any lookup or allocation.

use dat_abi::*;
use rdma_core_sys as ibv;

/// `op` for a memory-window bind, which completes as an RMR event.
pub const OP_RMR_BIND: u32 = 0x100;

#[repr(C)]
#[derive(Default)]
pub struct DtoSlot {
    /// The EP handle (or the RMR handle for a bind).
    pub owner: usize,
    pub cookie: u64,
    pub len: u64,
    pub op: u32,
    pub rmr_context: u32,
}

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

/// Fills `ev` from a work completion on the EVD `evd`.
pub fn event_from_wc(wc: &ibv::ibv_wc, evd: DAT_EVD_HANDLE, ev: &mut DAT_EVENT) {
    // SAFETY: every wr_id we post is the address of a live DtoSlot (see ep.rs);
    // slot rings are never freed while their QP can still complete.
    let slot = unsafe { &*(wc.wr_id as *const DtoSlot) };
    ev.evd_handle = evd;
    let status = status_of(wc.status);
    if slot.op == OP_RMR_BIND {
        ev.event_number = DAT_RMR_BIND_COMPLETION_EVENT;
        ev.event_data.rmr_completion_event_data = DAT_RMR_BIND_COMPLETION_EVENT_DATA {
            rmr_handle: slot.owner as DAT_RMR_HANDLE,
            user_cookie: DAT_RMR_COOKIE { as_64: slot.cookie },
            status,
        };
        return;
    }
    let len = if slot.op == DAT_DTO_RECEIVE { wc.byte_len as u64 } else { slot.len };
    ev.event_number = DAT_DTO_COMPLETION_EVENT;
    ev.event_data.dto_completion_event_data = DAT_DTO_COMPLETION_EVENT_DATA {
        ep_handle: slot.owner as DAT_EP_HANDLE,
        user_cookie: DAT_DTO_COOKIE { as_64: slot.cookie },
        status,
        transfered_length: len as DAT_SEG_LENGTH,
        operation: slot.op,
        rmr_context: slot.rmr_context,
    };
}
