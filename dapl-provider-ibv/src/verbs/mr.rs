//! A registered memory region.

use rdma_core_sys as ibv;

pub struct Mr(pub *mut ibv::ibv_mr);

// ibv_mr is immutable after registration.
unsafe impl Send for Mr {}
unsafe impl Sync for Mr {}

impl Mr {
    pub fn register(pd: *mut ibv::ibv_pd, addr: *mut libc::c_void, len: usize, access: u32) -> Result<Mr, std::io::Error> {
        // SAFETY: pd is live; the consumer vouches for [addr, addr+len).
        let mr = unsafe { ibv::ibv_reg_mr_iova2(pd, addr, len, addr as u64, access) };
        if mr.is_null() { Err(std::io::Error::last_os_error()) } else { Ok(Mr(mr)) }
    }

    pub fn lkey(&self) -> u32 {
        // SAFETY: live MR.
        unsafe { (*self.0).lkey }
    }

    pub fn rkey(&self) -> u32 {
        // SAFETY: live MR.
        unsafe { (*self.0).rkey }
    }
}

impl Drop for Mr {
    fn drop(&mut self) {
        // SAFETY: registered in register(); freed once.
        let rc = unsafe { ibv::ibv_dereg_mr(self.0) };
        if rc != 0 {
            log::warn!("ibv_dereg_mr: {}", std::io::Error::from_raw_os_error(rc));
        }
    }
}
