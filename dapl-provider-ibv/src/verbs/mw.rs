//! A memory window.

use dapl_core::backend::MwOps;
use rdma_core_sys as ibv;

pub struct Mw(pub *mut ibv::ibv_mw);

// ibv_mw is only passed back to verbs calls, which serialise on the QP.
unsafe impl Send for Mw {}
unsafe impl Sync for Mw {}

impl Mw {
    /// Type 2 windows where the device has them (bound by a posted work
    /// request, rkey chosen by us), else type 1 (bound through ibv_bind_mw).
    pub fn alloc(pd: *mut ibv::ibv_pd, type2: bool) -> Result<Mw, std::io::Error> {
        let kind = if type2 { ibv::IBV_MW_TYPE_2 } else { ibv::IBV_MW_TYPE_1 };
        // SAFETY: live PD; the inline helper checks the device op exists.
        let mw = unsafe { ibv::ibv_alloc_mw(pd, kind) };
        if mw.is_null() { Err(std::io::Error::last_os_error()) } else { Ok(Mw(mw)) }
    }
}

impl MwOps for Mw {
    fn is_type2(&self) -> bool {
        // SAFETY: live MW.
        unsafe { (*self.0).type_ == ibv::IBV_MW_TYPE_2 }
    }

    fn rkey(&self) -> u32 {
        // SAFETY: live MW.
        unsafe { (*self.0).rkey }
    }

    fn next_rkey(&self) -> u32 {
        ibv::ibv_inc_rkey(self.rkey())
    }

    /// Records the rkey a posted type 2 bind gave the window. The provider
    /// library sends `mw->rkey` with the next bind, and the device refuses a
    /// bind that names a key the window no longer has (rxe: MW_BIND_ERR).
    fn set_rkey(&self, rkey: u32) {
        // SAFETY: live MW; rkey is the consumer-maintained field for type 2 windows.
        unsafe { (*self.0).rkey = rkey }
    }
}

impl Drop for Mw {
    fn drop(&mut self) {
        // SAFETY: allocated in alloc(); freed once.
        let rc = unsafe { ibv::ibv_dealloc_mw(self.0) };
        if rc != 0 {
            log::warn!("ibv_dealloc_mw: {}", std::io::Error::from_raw_os_error(rc));
        }
    }
}
