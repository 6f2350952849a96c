//! A protection domain, and the memory objects made on it.

use super::Verbs;
use super::{ah, mr, mw, srq};
use dapl_core::backend::PdOps;
use dat_abi::DAT_MEM_PRIV_FLAGS;
use rdma_core_sys as ibv;

pub struct Pd {
    pub pd: *mut ibv::ibv_pd,
    /// The device has memory windows, so regions are registered bindable.
    windows: bool,
}

// ibv_pd is used from any thread by rdma-core's design.
unsafe impl Send for Pd {}
unsafe impl Sync for Pd {}

impl Pd {
    pub fn alloc(ctx: *mut ibv::ibv_context, windows: bool) -> std::io::Result<Pd> {
        // SAFETY: ctx is a live verbs context owned by the IA.
        let pd = unsafe { ibv::ibv_alloc_pd(ctx) };
        if pd.is_null() { Err(std::io::Error::last_os_error()) } else { Ok(Pd { pd, windows }) }
    }
}

impl PdOps<Verbs> for Pd {
    fn register(&self, addr: *mut libc::c_void, len: usize, privs: DAT_MEM_PRIV_FLAGS) -> std::io::Result<mr::Mr> {
        // Windows are bound over LMRs, so regions allow it where the device has
        // windows. The kernel pins such a region writable, so read-only memory
        // (which no window could expose for writing anyway) is registered
        // without it.
        let access = mr::access_flags(privs);
        if self.windows {
            match mr::Mr::register(self.pd, addr, len, access | ibv::IBV_ACCESS_MW_BIND) {
                Err(e) if e.raw_os_error() == Some(libc::EFAULT) => mr::Mr::register(self.pd, addr, len, access),
                other => other,
            }
        } else {
            mr::Mr::register(self.pd, addr, len, access)
        }
    }

    fn alloc_mw(&self, type2: bool) -> std::io::Result<mw::Mw> {
        mw::Mw::alloc(self.pd, type2)
    }

    fn create_srq(&self, max_wr: u32, max_sge: u32, limit: u32) -> std::io::Result<srq::VSrq> {
        srq::VSrq::create(self.pd, max_wr, max_sge, limit)
    }

    fn create_ah(&self, path: &ibv::ibv_ah_attr) -> std::io::Result<ah::Ah> {
        ah::create(self.pd, path)
    }
}

impl Drop for Pd {
    fn drop(&mut self) {
        // SAFETY: allocated in alloc(); the PZ frees it only once nothing uses it.
        let rc = unsafe { ibv::ibv_dealloc_pd(self.pd) };
        if rc != 0 {
            log::warn!("ibv_dealloc_pd: {}", std::io::Error::from_raw_os_error(rc));
        }
    }
}
