//! A shared receive queue.

use dapl_core::backend::SrqOps;
use dat_abi::DAT_HANDLE;
use rdma_core_sys as ibv;

pub struct VSrq(pub *mut ibv::ibv_srq);

// ibv_srq is thread-safe for posting in rdma-core.
unsafe impl Send for VSrq {}
unsafe impl Sync for VSrq {}

impl VSrq {
    pub fn create(pd: *mut ibv::ibv_pd, max_wr: u32, max_sge: u32, limit: u32) -> Result<VSrq, std::io::Error> {
        // SAFETY: all-zero init attr, then the limits.
        let mut a: ibv::ibv_srq_init_attr = unsafe { std::mem::zeroed() };
        a.attr.max_wr = max_wr;
        a.attr.max_sge = max_sge;
        a.attr.srq_limit = limit;
        // SAFETY: pd is a live protection domain.
        let srq = unsafe { ibv::ibv_create_srq(pd, &mut a) };
        if srq.is_null() { Err(std::io::Error::last_os_error()) } else { Ok(VSrq(srq)) }
    }

    fn modify(&self, max_wr: u32, limit: u32, mask: u32) -> Result<(), std::io::Error> {
        // SAFETY: all-zero attr with the fields the mask names.
        let mut a: ibv::ibv_srq_attr = unsafe { std::mem::zeroed() };
        a.max_wr = max_wr;
        a.srq_limit = limit;
        // SAFETY: live SRQ.
        let rc = unsafe { ibv::ibv_modify_srq(self.0, &mut a, mask as i32) };
        if rc == 0 { Ok(()) } else { Err(std::io::Error::from_raw_os_error(rc)) }
    }

}

impl SrqOps<super::Verbs> for VSrq {
    #[inline]
    fn post_recv(&self, wr_id: u64, sges: &[ibv::ibv_sge]) -> Result<(), i32> {
        let mut wr = ibv::ibv_recv_wr { wr_id, next: std::ptr::null_mut(), sg_list: sges.as_ptr() as *mut ibv::ibv_sge, num_sge: sges.len() as i32 };
        let mut bad: *mut ibv::ibv_recv_wr = std::ptr::null_mut();
        // SAFETY: live SRQ; wr and SGEs live for the call.
        let rc = unsafe { ibv::ibv_post_srq_recv(self.0, &mut wr, &mut bad) };
        if rc == 0 { Ok(()) } else { Err(rc) }
    }

    fn set_context(&self, h: DAT_HANDLE) {
        // SAFETY: srq_context is ours to set; async events about this SRQ carry it.
        unsafe { (*self.0).srq_context = h };
    }

    fn resize(&self, max_wr: u32) -> Result<(), std::io::Error> {
        self.modify(max_wr, 0, ibv::IBV_SRQ_MAX_WR)
    }

    fn set_limit(&self, limit: u32) -> Result<(), std::io::Error> {
        self.modify(0, limit, ibv::IBV_SRQ_LIMIT)
    }
}

impl Drop for VSrq {
    fn drop(&mut self) {
        // SAFETY: created in create(); destroyed once, after its QPs.
        let rc = unsafe { ibv::ibv_destroy_srq(self.0) };
        if rc != 0 {
            log::warn!("ibv_destroy_srq: {}", std::io::Error::from_raw_os_error(rc));
        }
    }
}
