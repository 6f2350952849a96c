//! A registered memory region.

use dapl_core::backend::MrOps;
use dat_abi::*;
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
}

impl MrOps for Mr {
    #[inline]
    fn lkey(&self) -> u32 {
        // SAFETY: live MR.
        unsafe { (*self.0).lkey }
    }

    #[inline]
    fn rkey(&self) -> u32 {
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

/// DAT privileges to verbs access flags. Local write is asked for only when
/// granted (or implied by remote write, which verbs require it for), so
/// read-only memory can be registered as a send source.
pub fn access_flags(privs: DAT_MEM_PRIV_FLAGS) -> u32 {
    let mut a = 0;
    if privs & (DAT_MEM_PRIV_LOCAL_WRITE_FLAG | DAT_MEM_PRIV_REMOTE_WRITE_FLAG) != 0 {
        a |= ibv::IBV_ACCESS_LOCAL_WRITE;
    }
    if privs & DAT_MEM_PRIV_REMOTE_READ_FLAG != 0 {
        a |= ibv::IBV_ACCESS_REMOTE_READ;
    }
    if privs & DAT_MEM_PRIV_REMOTE_WRITE_FLAG != 0 {
        a |= ibv::IBV_ACCESS_REMOTE_WRITE;
    }
    // The IB extension's atomic privilege; verbs require local write with it.
    if privs & DAT_IB_MEM_PRIV_REMOTE_ATOMIC != 0 {
        a |= ibv::IBV_ACCESS_REMOTE_ATOMIC | ibv::IBV_ACCESS_LOCAL_WRITE;
    }
    a
}


#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn privileges_to_access_flags() {
        assert_eq!(access_flags(DAT_MEM_PRIV_LOCAL_READ_FLAG), 0);
        assert_eq!(access_flags(DAT_MEM_PRIV_LOCAL_WRITE_FLAG), ibv::IBV_ACCESS_LOCAL_WRITE);
        assert_eq!(
            access_flags(DAT_MEM_PRIV_REMOTE_WRITE_FLAG),
            ibv::IBV_ACCESS_LOCAL_WRITE | ibv::IBV_ACCESS_REMOTE_WRITE
        );
        assert_eq!(access_flags(DAT_MEM_PRIV_REMOTE_READ_FLAG), ibv::IBV_ACCESS_REMOTE_READ);
        assert_eq!(
            access_flags(DAT_MEM_PRIV_ALL_FLAG),
            ibv::IBV_ACCESS_LOCAL_WRITE | ibv::IBV_ACCESS_REMOTE_WRITE | ibv::IBV_ACCESS_REMOTE_READ
        );
        assert_eq!(
            access_flags(DAT_MEM_PRIV_REMOTE_READ_FLAG | DAT_IB_MEM_PRIV_REMOTE_ATOMIC),
            ibv::IBV_ACCESS_REMOTE_READ | ibv::IBV_ACCESS_REMOTE_ATOMIC | ibv::IBV_ACCESS_LOCAL_WRITE
        );
    }
}
