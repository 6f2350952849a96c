//! DAPL's statistics counters (dat_ib_extensions.h): one array of 64-bit
//! counts per IA, EP and EVD, read by `dat_ib_query_counters` and
//! `dat_ib_print_counters`, and the device counter groups that
//! `dat_ib_start_counter`/`dat_ib_stop_counter` sample into the IA's array.
//!
//! Cost on the fast path: a post or a dequeue adds one plain load and store
//! per counter it moves (`Counters::bump`), no lock and no locked
//! instruction. Each such counter has one writer in the way DAT programs
//! are written (the thread posting on an EP, the thread reaping its EVD),
//! and then the count is exact. Two threads posting on one EP at the same
//! moment can lose an increment; a statistic can afford that, a locked
//! add on every post of every single-threaded program cannot. Counters
//! moved from several threads by design (object creation, connection
//! events from the IA's event thread) use `Counters::add`, off the fast path.

use crate::backend::SendOp;
use dat_abi::status::invalid_arg;
use dat_abi::*;
use std::os::raw::c_int;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

pub const IA_COUNT: usize = DCNT_IA_ALL_COUNTERS as usize;
pub const EP_COUNT: usize = DCNT_EP_ALL_COUNTERS as usize;
pub const EVD_COUNT: usize = DCNT_EVD_ALL_COUNTERS as usize;

pub struct Counters<const N: usize>([AtomicU64; N]);

impl<const N: usize> Counters<N> {
    pub const fn new() -> Self {
        Counters([const { AtomicU64::new(0) }; N])
    }

    /// For a counter with one writer (see the module comment): a load and a
    /// store, which x86 and ARM do as plain moves.
    #[inline(always)]
    pub fn bump(&self, i: u32, by: u64) {
        let c = &self.0[i as usize];
        c.store(c.load(Relaxed).wrapping_add(by), Relaxed);
    }

    /// For a counter several threads move: exact, and never on a post or dequeue.
    pub fn add(&self, i: u32, by: u64) {
        self.0[i as usize].fetch_add(by, Relaxed);
    }

    pub fn set(&self, i: u32, v: u64) {
        self.0[i as usize].store(v, Relaxed);
    }

    #[cfg(test)]
    pub fn get(&self, i: u32) -> u64 {
        self.0[i as usize].load(Relaxed)
    }

    pub fn all(&self) -> &[AtomicU64] {
        &self.0
    }
}

impl<const N: usize> Default for Counters<N> {
    fn default() -> Self {
        Self::new()
    }
}

/// The counter identifiers in index order, as the header spells them; each
/// entry keeps its constant so a table out of order fails to compile.
macro_rules! names {
    ($($n:ident),* $(,)?) => {
        &[$((stringify!($n), $n as u32)),*]
    };
}

pub const IA_NAMES: &[(&str, u32)] = names![
    DCNT_IA_PZ_CREATE, DCNT_IA_PZ_FREE, DCNT_IA_LMR_CREATE, DCNT_IA_LMR_FREE, DCNT_IA_RMR_CREATE,
    DCNT_IA_RMR_FREE, DCNT_IA_PSP_CREATE, DCNT_IA_PSP_CREATE_ANY, DCNT_IA_PSP_FREE, DCNT_IA_RSP_CREATE,
    DCNT_IA_RSP_FREE, DCNT_IA_EVD_CREATE, DCNT_IA_EVD_FREE, DCNT_IA_EP_CREATE, DCNT_IA_EP_FREE,
    DCNT_IA_SRQ_CREATE, DCNT_IA_SRQ_FREE, DCNT_IA_SP_CR, DCNT_IA_SP_CR_ACCEPTED, DCNT_IA_SP_CR_REJECTED,
    DCNT_IA_MEM_ALLOC, DCNT_IA_MEM_ALLOC_DATA, DCNT_IA_MEM_FREE, DCNT_IA_ASYNC_ERROR,
    DCNT_IA_ASYNC_QP_ERROR, DCNT_IA_ASYNC_CQ_ERROR, DCNT_IA_CM_LISTEN, DCNT_IA_CM_REQ_TX,
    DCNT_IA_CM_REQ_RX, DCNT_IA_CM_REP_TX, DCNT_IA_CM_REP_RX, DCNT_IA_CM_RTU_TX, DCNT_IA_CM_RTU_RX,
    DCNT_IA_CM_USER_REJ_TX, DCNT_IA_CM_USER_REJ_RX, DCNT_IA_CM_ACTIVE_EST, DCNT_IA_CM_PASSIVE_EST,
    DCNT_IA_CM_AH_REQ_TX, DCNT_IA_CM_AH_REQ_RX, DCNT_IA_CM_AH_RESOLVED, DCNT_IA_CM_DREQ_TX,
    DCNT_IA_CM_DREQ_RX, DCNT_IA_CM_DREP_TX, DCNT_IA_CM_DREP_RX, DCNT_IA_CM_MRA_TX, DCNT_IA_CM_MRA_RX,
    DCNT_IA_CM_REQ_FULLQ_POLL, DCNT_IA_CM_ERR, DCNT_IA_CM_ERR_REQ_FULLQ, DCNT_IA_CM_ERR_REQ_DUP,
    DCNT_IA_CM_ERR_REQ_RETRY, DCNT_IA_CM_ERR_REP_DUP, DCNT_IA_CM_ERR_REP_RETRY, DCNT_IA_CM_ERR_RTU_DUP,
    DCNT_IA_CM_ERR_RTU_RETRY, DCNT_IA_CM_ERR_REFUSED, DCNT_IA_CM_ERR_RESET, DCNT_IA_CM_ERR_TIMEOUT,
    DCNT_IA_CM_ERR_REJ_TX, DCNT_IA_CM_ERR_REJ_RX, DCNT_IA_CM_ERR_DREQ_DUP, DCNT_IA_CM_ERR_DREQ_RETRY,
    DCNT_IA_CM_ERR_DREP_DUP, DCNT_IA_CM_ERR_DREP_RETRY, DCNT_IA_CM_ERR_MRA_DUP, DCNT_IA_CM_ERR_MRA_RETRY,
    DCNT_IA_CM_ERR_UNEXPECTED, DCNT_IA_LNK_ERR_RCV, DCNT_IA_LNK_ERR_RCV_REM_PHYS,
    DCNT_IA_LNK_ERR_RCV_CONSTRAINT, DCNT_IA_LNK_ERR_XMT_DISCARDS, DCNT_IA_LNK_ERR_XMT_CONTRAINT,
    DCNT_IA_LNK_ERR_INTEGRITY, DCNT_IA_LNK_ERR_EXC_BUF_OVERRUN, DCNT_IA_LNK_WARN_RCV_SW_RELAY,
    DCNT_IA_LNK_WARN_XMT_WAIT, DCNT_IA_DIAG_ERR_RQ_RAE, DCNT_IA_DIAG_ERR_RQ_OOS, DCNT_IA_DIAG_ERR_RQ_RIRE,
    DCNT_IA_DIAG_ERR_RQ_UDSDPRD, DCNT_IA_DIAG_ERR_SQ_RAE, DCNT_IA_DIAG_ERR_SQ_OOS,
    DCNT_IA_DIAG_ERR_SQ_RIRE, DCNT_IA_DIAG_ERR_SQ_RREE, DCNT_IA_DIAG_ERR_SQ_TREE,
];

pub const EP_NAMES: &[(&str, u32)] = names![
    DCNT_EP_CONNECT, DCNT_EP_DISCONNECT, DCNT_EP_POST_SEND, DCNT_EP_POST_SEND_DATA, DCNT_EP_POST_SEND_UD,
    DCNT_EP_POST_SEND_UD_DATA, DCNT_EP_POST_RECV, DCNT_EP_POST_RECV_DATA, DCNT_EP_POST_WRITE,
    DCNT_EP_POST_WRITE_DATA, DCNT_EP_POST_WRITE_IMM, DCNT_EP_POST_WRITE_IMM_DATA, DCNT_EP_POST_READ,
    DCNT_EP_POST_READ_DATA, DCNT_EP_POST_CMP_SWAP, DCNT_EP_POST_FETCH_ADD, DCNT_EP_RECV, DCNT_EP_RECV_DATA,
    DCNT_EP_RECV_UD, DCNT_EP_RECV_UD_DATA, DCNT_EP_RECV_IMM, DCNT_EP_RECV_IMM_DATA, DCNT_EP_RECV_RDMA_IMM,
    DCNT_EP_RECV_RDMA_IMM_DATA,
];

pub const EVD_NAMES: &[(&str, u32)] = names![
    DCNT_EVD_WAIT, DCNT_EVD_WAIT_BLOCKED, DCNT_EVD_WAIT_NOTIFY, DCNT_EVD_DEQUEUE, DCNT_EVD_DEQUEUE_FOUND,
    DCNT_EVD_DEQUEUE_NOT_FOUND, DCNT_EVD_DEQUEUE_POLL, DCNT_EVD_DEQUEUE_POLL_FOUND, DCNT_EVD_CONN_CALLBACK,
    DCNT_EVD_DTO_CALLBACK,
];

const fn in_order(names: &[(&str, u32)], len: usize) -> bool {
    let mut i = 0;
    while i < names.len() {
        if names[i].1 as usize != i {
            return false;
        }
        i += 1;
    }
    i == len
}
const _: () = assert!(in_order(IA_NAMES, IA_COUNT) && in_order(EP_NAMES, EP_COUNT) && in_order(EVD_NAMES, EVD_COUNT));
// Every counted operation is followed by its byte counter; ep_post and
// received rely on it.
const _: () = assert!(
    DCNT_EP_POST_SEND_DATA == DCNT_EP_POST_SEND + 1
        && DCNT_EP_POST_SEND_UD_DATA == DCNT_EP_POST_SEND_UD + 1
        && DCNT_EP_POST_RECV_DATA == DCNT_EP_POST_RECV + 1
        && DCNT_EP_POST_WRITE_DATA == DCNT_EP_POST_WRITE + 1
        && DCNT_EP_POST_WRITE_IMM_DATA == DCNT_EP_POST_WRITE_IMM + 1
        && DCNT_EP_POST_READ_DATA == DCNT_EP_POST_READ + 1
        && DCNT_EP_RECV_DATA == DCNT_EP_RECV + 1
        && DCNT_EP_RECV_UD_DATA == DCNT_EP_RECV_UD + 1
        && DCNT_EP_RECV_IMM_DATA == DCNT_EP_RECV_IMM + 1
        && DCNT_EP_RECV_RDMA_IMM_DATA == DCNT_EP_RECV_RDMA_IMM + 1
);

/// The IA counters an object of `kind` moves when it is created (the
/// first) and freed (the second); connection requests count as CRs arriving.
#[inline]
pub const fn lifetime_counters(kind: DAT_HANDLE_TYPE) -> Option<(u32, Option<u32>)> {
    Some(match kind {
        DAT_HANDLE_TYPE_PZ => (DCNT_IA_PZ_CREATE, Some(DCNT_IA_PZ_FREE)),
        DAT_HANDLE_TYPE_LMR => (DCNT_IA_LMR_CREATE, Some(DCNT_IA_LMR_FREE)),
        DAT_HANDLE_TYPE_RMR => (DCNT_IA_RMR_CREATE, Some(DCNT_IA_RMR_FREE)),
        DAT_HANDLE_TYPE_PSP => (DCNT_IA_PSP_CREATE, Some(DCNT_IA_PSP_FREE)),
        DAT_HANDLE_TYPE_RSP => (DCNT_IA_RSP_CREATE, Some(DCNT_IA_RSP_FREE)),
        DAT_HANDLE_TYPE_EVD => (DCNT_IA_EVD_CREATE, Some(DCNT_IA_EVD_FREE)),
        DAT_HANDLE_TYPE_EP => (DCNT_IA_EP_CREATE, Some(DCNT_IA_EP_FREE)),
        DAT_HANDLE_TYPE_SRQ => (DCNT_IA_SRQ_CREATE, Some(DCNT_IA_SRQ_FREE)),
        DAT_HANDLE_TYPE_CR => (DCNT_IA_SP_CR, None),
        _ => return None,
    })
}

/// The EP counter a successful post of `op` moves; the next index counts its
/// bytes, except for the atomics (`false`), which move a fixed 8.
#[inline(always)]
pub fn ep_post(op: &SendOp, ud: bool) -> (u32, bool) {
    match op {
        SendOp::Send if ud => (DCNT_EP_POST_SEND_UD, true),
        SendOp::Send => (DCNT_EP_POST_SEND, true),
        SendOp::RdmaWrite => (DCNT_EP_POST_WRITE, true),
        SendOp::RdmaWriteImm => (DCNT_EP_POST_WRITE_IMM, true),
        SendOp::RdmaRead => (DCNT_EP_POST_READ, true),
        SendOp::CompareSwap => (DCNT_EP_POST_CMP_SWAP, false),
        SendOp::FetchAdd => (DCNT_EP_POST_FETCH_ADD, false),
    }
}

/// The indexes `cntr` selects: one counter, or all of them when it is the
/// `*_ALL_COUNTERS` value of the handle's kind.
pub fn selection(cntr: c_int, len: usize) -> Result<std::ops::Range<usize>, DAT_RETURN> {
    match usize::try_from(cntr) {
        Ok(n) if n == len => Ok(0..len),
        Ok(n) if n < len => Ok(n..n + 1),
        _ => Err(invalid_arg(DAT_INVALID_ARG3)),
    }
}

pub fn read(c: &AtomicU64, reset: bool) -> u64 {
    if reset { c.swap(0, Relaxed) } else { c.load(Relaxed) }
}

/// What a started device counter group read at its start.
pub type Baseline = std::sync::Mutex<Vec<(DAT_IA_COUNTER_TYPE, Vec<(u32, u64)>)>>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn selection_is_one_or_all() {
        assert_eq!(selection(3, 10), Ok(3..4));
        assert_eq!(selection(10, 10), Ok(0..10));
        assert_eq!(selection(11, 10), Err(invalid_arg(DAT_INVALID_ARG3)));
        assert_eq!(selection(-1, 10), Err(invalid_arg(DAT_INVALID_ARG3)));
    }

    #[test]
    fn bump_add_and_reset() {
        let c: Counters<4> = Counters::new();
        c.bump(1, 5);
        c.bump(1, 2);
        c.add(2, 3);
        assert_eq!((c.get(0), c.get(1), c.get(2)), (0, 7, 3));
        assert_eq!(read(&c.all()[1], true), 7);
        assert_eq!(c.get(1), 0);
    }

    #[test]
    fn posts_count_their_bytes_next_to_them() {
        assert_eq!(ep_post(&SendOp::Send, false), (DCNT_EP_POST_SEND, true));
        assert_eq!(ep_post(&SendOp::Send, true), (DCNT_EP_POST_SEND_UD, true));
        assert_eq!(ep_post(&SendOp::FetchAdd, false), (DCNT_EP_POST_FETCH_ADD, false));
        assert_eq!(EP_NAMES[DCNT_EP_POST_WRITE_IMM as usize + 1].0, "DCNT_EP_POST_WRITE_IMM_DATA");
        assert_eq!(IA_NAMES.last().map(|n| n.0), Some("DCNT_IA_DIAG_ERR_SQ_TREE"));
    }
}
