//! A queue pair, moved through its states by hand (as DAPL's rdma_cm
//! provider does), so an EP can post receives before it connects and the
//! same QP can be connected through whichever cm id carries the connection.
//! RC for ordinary endpoints; UD for the IB extension's datagram endpoints,
//! which go straight to RTS since they have no single peer.

use rdma_core_sys as ibv;

pub struct Qp(pub *mut ibv::ibv_qp);

// ibv_qp is thread-safe for posting and modifying in rdma-core.
unsafe impl Send for Qp {}
unsafe impl Sync for Qp {}

pub struct Caps {
    pub send_wr: u32,
    pub recv_wr: u32,
    pub send_sge: u32,
    pub recv_sge: u32,
    /// IBV_QPT_RC or IBV_QPT_UD.
    pub qp_type: u32,
}

/// The Q_Key rdma_cm uses in its UDP port space (RDMA_UDP_QKEY), so our UD
/// QPs take datagrams from peers that resolved us through it.
pub const UD_QKEY: u32 = 0x0123_4567;

impl Qp {
    pub fn create(
        pd: *mut ibv::ibv_pd,
        send_cq: *mut ibv::ibv_cq,
        recv_cq: *mut ibv::ibv_cq,
        srq: *mut ibv::ibv_srq,
        caps: &Caps,
    ) -> Result<Qp, std::io::Error> {
        // SAFETY: all-zero is a valid init attr before we fill it.
        let mut attr: ibv::ibv_qp_init_attr = unsafe { std::mem::zeroed() };
        attr.send_cq = send_cq;
        attr.recv_cq = recv_cq;
        attr.srq = srq;
        attr.qp_type = caps.qp_type;
        attr.cap.max_send_wr = caps.send_wr;
        attr.cap.max_recv_wr = if srq.is_null() { caps.recv_wr } else { 0 };
        attr.cap.max_send_sge = caps.send_sge;
        attr.cap.max_recv_sge = caps.recv_sge;
        // SAFETY: pd and CQs are live objects of the same context.
        let qp = unsafe { ibv::ibv_create_qp(pd, &mut attr) };
        if qp.is_null() { Err(std::io::Error::last_os_error()) } else { Ok(Qp(qp)) }
    }

    pub fn num(&self) -> u32 {
        // SAFETY: live QP.
        unsafe { (*self.0).qp_num }
    }

    /// RESET -> INIT on `port`, with remote read/write allowed (what the
    /// peer may actually touch is governed by the memory keys it holds).
    pub fn to_init(&self, port: u8) -> Result<(), std::io::Error> {
        // SAFETY: all-zero attr, then the INIT fields.
        let mut a: ibv::ibv_qp_attr = unsafe { std::mem::zeroed() };
        a.qp_state = ibv::IBV_QPS_INIT;
        a.pkey_index = 0;
        a.port_num = port;
        a.qp_access_flags = ibv::IBV_ACCESS_LOCAL_WRITE | ibv::IBV_ACCESS_REMOTE_READ | ibv::IBV_ACCESS_REMOTE_WRITE
            | ibv::IBV_ACCESS_REMOTE_ATOMIC;
        let mask = ibv::IBV_QP_STATE | ibv::IBV_QP_PKEY_INDEX | ibv::IBV_QP_PORT | ibv::IBV_QP_ACCESS_FLAGS;
        self.modify(&mut a, mask)
    }

    /// RESET -> INIT -> RTR -> RTS for a UD QP: nothing in these states
    /// depends on a peer, whose address travels in each send instead.
    pub fn ud_to_rts(&self, port: u8) -> Result<(), std::io::Error> {
        // SAFETY: all-zero attrs, then each state's fields.
        let mut a: ibv::ibv_qp_attr = unsafe { std::mem::zeroed() };
        a.qp_state = ibv::IBV_QPS_INIT;
        a.pkey_index = 0;
        a.port_num = port;
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

    pub fn is_ud(&self) -> bool {
        // SAFETY: live QP.
        unsafe { (*self.0).qp_type == ibv::IBV_QPT_UD }
    }

    /// Moves to `state` with the attributes rdma_cm derives for `id`'s path.
    pub fn to_state_via(&self, id: *mut ibv::rdma_cm_id, state: u32, adjust: impl FnOnce(&mut ibv::ibv_qp_attr)) -> Result<(), std::io::Error> {
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

    pub fn to_error(&self) {
        // SAFETY: all-zero attr with the state set.
        let mut a: ibv::ibv_qp_attr = unsafe { std::mem::zeroed() };
        a.qp_state = ibv::IBV_QPS_ERR;
        let _ = self.modify(&mut a, ibv::IBV_QP_STATE);
    }

    pub fn to_reset_and_init(&self, port: u8) -> Result<(), std::io::Error> {
        // SAFETY: all-zero attr with the state set.
        let mut a: ibv::ibv_qp_attr = unsafe { std::mem::zeroed() };
        a.qp_state = ibv::IBV_QPS_RESET;
        self.modify(&mut a, ibv::IBV_QP_STATE)?;
        if self.is_ud() { self.ud_to_rts(port) } else { self.to_init(port) }
    }

    fn modify(&self, a: &mut ibv::ibv_qp_attr, mask: u32) -> Result<(), std::io::Error> {
        // SAFETY: live QP; attr and mask describe a legal transition or the kernel refuses.
        let rc = unsafe { ibv::ibv_modify_qp(self.0, a, mask as i32) };
        if rc == 0 { Ok(()) } else { Err(std::io::Error::from_raw_os_error(rc)) }
    }
}

impl Drop for Qp {
    fn drop(&mut self) {
        // SAFETY: created by create(); destroyed once.
        let rc = unsafe { ibv::ibv_destroy_qp(self.0) };
        if rc != 0 {
            log::warn!("ibv_destroy_qp: {}", std::io::Error::from_raw_os_error(rc));
        }
    }
}
