//! A queue pair, moved through its states by hand (as DAPL's rdma_cm
//! provider does), so an EP can post receives before it connects and the
//! same QP can be connected through whichever cm id carries the connection.
//! RC for ordinary endpoints; UD for the IB extension's datagram endpoints,
//! which go straight to RTS since they have no single peer. Work requests
//! are built here, on the stack, from the core's neutral descriptions.

use super::Verbs;
use super::mw::Mw;
use dapl_core::backend::{QpCaps, QpOps, SendOp, SendRequest, WindowTarget};
use dat_abi::*;
use rdma_core_sys as ibv;

pub struct Qp {
    pub qp: *mut ibv::ibv_qp,
    /// The device port the QP is bound to in INIT.
    port: u8,
}

// ibv_qp is thread-safe for posting and modifying in rdma-core.
unsafe impl Send for Qp {}
unsafe impl Sync for Qp {}

/// The Q_Key rdma_cm uses in its UDP port space (RDMA_UDP_QKEY), so our UD
/// QPs take datagrams from peers that resolved us through it.
pub const UD_QKEY: u32 = 0x0123_4567;

/// DAT completion flags to verbs send flags.
#[inline]
fn send_flags(flags: DAT_COMPLETION_FLAGS) -> u32 {
    let mut f = 0;
    if flags & (DAT_COMPLETION_SUPPRESS_FLAG | DAT_COMPLETION_UNSIGNALLED_FLAG) == 0 {
        f |= ibv::IBV_SEND_SIGNALED;
    }
    if flags & DAT_COMPLETION_SOLICITED_WAIT_FLAG != 0 {
        f |= ibv::IBV_SEND_SOLICITED;
    }
    if flags & DAT_COMPLETION_BARRIER_FENCE_FLAG != 0 {
        f |= ibv::IBV_SEND_FENCE;
    }
    f
}

/// The remote privileges a window grants, as verbs access flags.
fn window_access(privs: DAT_MEM_PRIV_FLAGS) -> u32 {
    let mut a = 0;
    if privs & DAT_MEM_PRIV_REMOTE_READ_FLAG != 0 {
        a |= ibv::IBV_ACCESS_REMOTE_READ;
    }
    if privs & DAT_MEM_PRIV_REMOTE_WRITE_FLAG != 0 {
        a |= ibv::IBV_ACCESS_REMOTE_WRITE;
    }
    a
}

fn bind_info(target: Option<&WindowTarget<Verbs>>) -> ibv::ibv_mw_bind_info {
    match target {
        Some(t) => ibv::ibv_mw_bind_info { mr: t.mr.0, addr: t.addr, length: t.len, mw_access_flags: window_access(t.privs) },
        None => ibv::ibv_mw_bind_info { mr: std::ptr::null_mut(), addr: 0, length: 0, mw_access_flags: 0 },
    }
}

impl Qp {
    pub fn create(
        pd: *mut ibv::ibv_pd,
        send_cq: *mut ibv::ibv_cq,
        recv_cq: *mut ibv::ibv_cq,
        srq: *mut ibv::ibv_srq,
        caps: &QpCaps,
        port: u8,
        context: DAT_HANDLE,
    ) -> Result<Qp, std::io::Error> {
        // SAFETY: all-zero is a valid init attr before we fill it.
        let mut attr: ibv::ibv_qp_init_attr = unsafe { std::mem::zeroed() };
        attr.qp_context = context;
        attr.send_cq = send_cq;
        attr.recv_cq = recv_cq;
        attr.srq = srq;
        attr.qp_type = if caps.datagram { ibv::IBV_QPT_UD } else { ibv::IBV_QPT_RC };
        attr.cap.max_send_wr = caps.send_wr;
        attr.cap.max_recv_wr = if srq.is_null() { caps.recv_wr } else { 0 };
        attr.cap.max_send_sge = caps.send_sge;
        attr.cap.max_recv_sge = caps.recv_sge;
        // SAFETY: pd and CQs are live objects of the same context.
        let qp = unsafe { ibv::ibv_create_qp(pd, &mut attr) };
        if qp.is_null() { Err(std::io::Error::last_os_error()) } else { Ok(Qp { qp, port }) }
    }

    /// RESET -> INIT on the port, with remote read/write allowed (what the
    /// peer may actually touch is governed by the memory keys it holds).
    fn to_init(&self) -> Result<(), std::io::Error> {
        // SAFETY: all-zero attr, then the INIT fields.
        let mut a: ibv::ibv_qp_attr = unsafe { std::mem::zeroed() };
        a.qp_state = ibv::IBV_QPS_INIT;
        a.pkey_index = 0;
        a.port_num = self.port;
        a.qp_access_flags = ibv::IBV_ACCESS_LOCAL_WRITE | ibv::IBV_ACCESS_REMOTE_READ | ibv::IBV_ACCESS_REMOTE_WRITE
            | ibv::IBV_ACCESS_REMOTE_ATOMIC;
        let mask = ibv::IBV_QP_STATE | ibv::IBV_QP_PKEY_INDEX | ibv::IBV_QP_PORT | ibv::IBV_QP_ACCESS_FLAGS;
        self.modify(&mut a, mask)
    }

    /// RESET -> INIT -> RTR -> RTS for a UD QP: nothing in these states
    /// depends on a peer, whose address travels in each send instead.
    fn ud_to_rts(&self) -> Result<(), std::io::Error> {
        // SAFETY: all-zero attrs, then each state's fields.
        let mut a: ibv::ibv_qp_attr = unsafe { std::mem::zeroed() };
        a.qp_state = ibv::IBV_QPS_INIT;
        a.pkey_index = 0;
        a.port_num = self.port;
        a.qkey = UD_QKEY;
        self.modify(&mut a, ibv::IBV_QP_STATE | ibv::IBV_QP_PKEY_INDEX | ibv::IBV_QP_PORT | ibv::IBV_QP_QKEY)?;
        // SAFETY: as above.
        let mut a: ibv::ibv_qp_attr = unsafe { std::mem::zeroed() };
        a.qp_state = ibv::IBV_QPS_RTR;
        self.modify(&mut a, ibv::IBV_QP_STATE)?;
        // SAFETY: as above.
        let mut a: ibv::ibv_qp_attr = unsafe { std::mem::zeroed() };
        a.qp_state = ibv::IBV_QPS_RTS;
        a.sq_psn = 1;
        self.modify(&mut a, ibv::IBV_QP_STATE | ibv::IBV_QP_SQ_PSN)
    }

    fn is_ud(&self) -> bool {
        // SAFETY: live QP.
        unsafe { (*self.qp).qp_type == ibv::IBV_QPT_UD }
    }

    /// Moves to `state` with the attributes rdma_cm derives for `id`'s path.
    fn to_state_via(&self, id: *mut ibv::rdma_cm_id, state: u32, adjust: impl FnOnce(&mut ibv::ibv_qp_attr)) -> Result<(), std::io::Error> {
        // SAFETY: all-zero attr; rdma_init_qp_attr fills it for `state`.
        let mut a: ibv::ibv_qp_attr = unsafe { std::mem::zeroed() };
        a.qp_state = state;
        let mut mask: i32 = 0;
        // SAFETY: id is a live cm id with a resolved route or a request.
        if unsafe { ibv::rdma_init_qp_attr(id, &mut a, &mut mask) } != 0 {
            return Err(std::io::Error::last_os_error());
        }
        adjust(&mut a);
        self.modify(&mut a, mask as u32)
    }

    fn modify(&self, a: &mut ibv::ibv_qp_attr, mask: u32) -> Result<(), std::io::Error> {
        // SAFETY: live QP; attr and mask describe a legal transition or the kernel refuses.
        let rc = unsafe { ibv::ibv_modify_qp(self.qp, a, mask as i32) };
        if rc == 0 { Ok(()) } else { Err(std::io::Error::from_raw_os_error(rc)) }
    }

    #[inline]
    fn post(&self, wr: &mut ibv::ibv_send_wr) -> Result<(), i32> {
        let mut bad: *mut ibv::ibv_send_wr = std::ptr::null_mut();
        // SAFETY: live QP; wr and what it points at live on the caller's frame for the call.
        let rc = unsafe { ibv::ibv_post_send(self.qp, wr, &mut bad) };
        if rc == 0 { Ok(()) } else { Err(rc) }
    }

    /// A send request for the window operations, signaled or not.
    #[inline]
    fn window_wr(wr_id: u64, signaled: bool) -> ibv::ibv_send_wr {
        // SAFETY: all-zero is a valid ibv_send_wr before we fill it.
        let mut wr: ibv::ibv_send_wr = unsafe { std::mem::zeroed() };
        wr.wr_id = wr_id;
        wr.send_flags = if signaled { ibv::IBV_SEND_SIGNALED } else { 0 };
        wr
    }
}

impl QpOps<Verbs> for Qp {
    #[inline]
    fn num(&self) -> u32 {
        // SAFETY: live QP.
        unsafe { (*self.qp).qp_num }
    }

    fn prepare(&self) -> std::io::Result<()> {
        if self.is_ud() { self.ud_to_rts() } else { self.to_init() }
    }

    fn to_error(&self) {
        // SAFETY: all-zero attr with the state set.
        let mut a: ibv::ibv_qp_attr = unsafe { std::mem::zeroed() };
        a.qp_state = ibv::IBV_QPS_ERR;
        let _ = self.modify(&mut a, ibv::IBV_QP_STATE);
    }

    fn reset(&self) -> std::io::Result<()> {
        // SAFETY: all-zero attr with the state set.
        let mut a: ibv::ibv_qp_attr = unsafe { std::mem::zeroed() };
        a.qp_state = ibv::IBV_QPS_RESET;
        self.modify(&mut a, ibv::IBV_QP_STATE)?;
        self.prepare()
    }

    #[inline]
    fn post_send(&self, wr_id: u64, sges: &[ibv::ibv_sge], req: &SendRequest, flags: DAT_COMPLETION_FLAGS) -> Result<(), i32> {
        // SAFETY: all-zero is a valid ibv_send_wr before we fill it.
        let mut wr: ibv::ibv_send_wr = unsafe { std::mem::zeroed() };
        wr.wr_id = wr_id;
        // Verbs only reads the list, through a pointer it declares mutable.
        wr.sg_list = sges.as_ptr() as *mut ibv::ibv_sge;
        wr.num_sge = sges.len() as i32;
        wr.send_flags = send_flags(flags);
        wr.opcode = match req.op {
            SendOp::Send => ibv::IBV_WR_SEND,
            SendOp::RdmaWrite => ibv::IBV_WR_RDMA_WRITE,
            SendOp::RdmaRead => ibv::IBV_WR_RDMA_READ,
            SendOp::RdmaWriteImm => ibv::IBV_WR_RDMA_WRITE_WITH_IMM,
            SendOp::CompareSwap => ibv::IBV_WR_ATOMIC_CMP_AND_SWP,
            SendOp::FetchAdd => ibv::IBV_WR_ATOMIC_FETCH_AND_ADD,
        };
        match (req.op, req.remote) {
            (SendOp::CompareSwap | SendOp::FetchAdd, Some(r)) => {
                wr.wr.atomic = ibv::ibv_send_wr__bindgen_ty_2__bindgen_ty_2 {
                    remote_addr: r.virtual_address,
                    compare_add: req.atomic.0,
                    swap: req.atomic.1,
                    rkey: r.rmr_context,
                };
            }
            (_, Some(r)) => {
                wr.wr.rdma = ibv::ibv_send_wr__bindgen_ty_2__bindgen_ty_1 { remote_addr: r.virtual_address, rkey: r.rmr_context };
            }
            _ => {}
        }
        if let Some(a) = req.ud {
            wr.wr.ud = ibv::ibv_send_wr__bindgen_ty_2__bindgen_ty_3 { ah: a.ah as *mut ibv::ibv_ah, remote_qpn: a.qpn, remote_qkey: UD_QKEY };
        }
        wr.__bindgen_anon_1.imm_data = req.imm;
        self.post(&mut wr)
    }

    #[inline]
    fn post_recv(&self, wr_id: u64, sges: &[ibv::ibv_sge]) -> Result<(), i32> {
        let mut wr = ibv::ibv_recv_wr { wr_id, next: std::ptr::null_mut(), sg_list: sges.as_ptr() as *mut ibv::ibv_sge, num_sge: sges.len() as i32 };
        let mut bad: *mut ibv::ibv_recv_wr = std::ptr::null_mut();
        // SAFETY: live QP; wr and SGEs live for the call.
        let rc = unsafe { ibv::ibv_post_recv(self.qp, &mut wr, &mut bad) };
        if rc == 0 { Ok(()) } else { Err(rc) }
    }

    fn post_invalidate(&self, wr_id: u64, signaled: bool, rkey: u32) -> Result<(), i32> {
        let mut wr = Self::window_wr(wr_id, signaled);
        wr.opcode = ibv::IBV_WR_LOCAL_INV;
        wr.__bindgen_anon_1.invalidate_rkey = rkey;
        self.post(&mut wr)
    }

    fn post_bind(&self, wr_id: u64, signaled: bool, mw: &Mw, rkey: u32, target: &WindowTarget<Verbs>) -> Result<(), i32> {
        let mut wr = Self::window_wr(wr_id, signaled);
        wr.opcode = ibv::IBV_WR_BIND_MW;
        wr.__bindgen_anon_2.bind_mw = ibv::ibv_send_wr__bindgen_ty_4__bindgen_ty_1 { mw: mw.0, rkey, bind_info: bind_info(Some(target)) };
        self.post(&mut wr)
    }

    fn bind_type1(&self, wr_id: u64, signaled: bool, mw: &Mw, target: Option<&WindowTarget<Verbs>>) -> Result<(), i32> {
        let mut b = ibv::ibv_mw_bind {
            wr_id,
            send_flags: if signaled { ibv::IBV_SEND_SIGNALED } else { 0 },
            bind_info: bind_info(target),
        };
        // SAFETY: live QP and MW; the provider copies the request.
        let rc = unsafe { ibv::ibv_bind_mw(self.qp, mw.0, &mut b) };
        if rc == 0 { Ok(()) } else { Err(rc) }
    }

    fn connect_via(&self, id: &super::cm::CmId, responder: u8, initiator: u8) -> std::io::Result<()> {
        self.to_state_via(id.as_ptr(), ibv::IBV_QPS_RTR, |a| a.max_dest_rd_atomic = responder.max(1))
            .and_then(|_| self.to_state_via(id.as_ptr(), ibv::IBV_QPS_RTS, |a| a.max_rd_atomic = initiator.max(1)))
    }
}

impl Drop for Qp {
    fn drop(&mut self) {
        // SAFETY: created by create(); destroyed once.
        let rc = unsafe { ibv::ibv_destroy_qp(self.qp) };
        if rc != 0 {
            log::warn!("ibv_destroy_qp: {}", std::io::Error::from_raw_os_error(rc));
        }
    }
}
