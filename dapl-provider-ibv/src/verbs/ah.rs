//! Address handles: where a UD send goes.

use dapl_core::backend::AhOps;
use rdma_core_sys as ibv;

pub struct Ah(*mut ibv::ibv_ah);

// An ibv_ah is immutable after creation and only read by posts.
unsafe impl Send for Ah {}
unsafe impl Sync for Ah {}

/// Creates an address handle on `pd` for the path rdma_cm resolved.
pub fn create(pd: *mut ibv::ibv_pd, attr: &ibv::ibv_ah_attr) -> std::io::Result<Ah> {
    let mut a = *attr;
    // SAFETY: live PD; the attributes are copied by the call.
    let ah = unsafe { ibv::ibv_create_ah(pd, &mut a) };
    if ah.is_null() { Err(std::io::Error::last_os_error()) } else { Ok(Ah(ah)) }
}

impl AhOps for Ah {
    #[inline]
    fn raw(&self) -> *mut libc::c_void {
        self.0 as *mut libc::c_void
    }
}

impl Drop for Ah {
    fn drop(&mut self) {
        // SAFETY: an AH from create(), destroyed once with its owner.
        let rc = unsafe { ibv::ibv_destroy_ah(self.0) };
        if rc != 0 {
            log::warn!("ibv_destroy_ah: {}", std::io::Error::from_raw_os_error(rc));
        }
    }
}
