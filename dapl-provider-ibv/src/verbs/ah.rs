//! Address handles: where a UD send goes.

use rdma_core_sys as ibv;

/// Creates an address handle on `pd` for the path rdma_cm resolved.
pub fn create(pd: *mut ibv::ibv_pd, attr: &ibv::ibv_ah_attr) -> std::io::Result<*mut ibv::ibv_ah> {
    let mut a = *attr;
    // SAFETY: live PD; the attributes are copied by the call.
    let ah = unsafe { ibv::ibv_create_ah(pd, &mut a) };
    if ah.is_null() { Err(std::io::Error::last_os_error()) } else { Ok(ah) }
}

pub fn destroy(ah: *mut ibv::ibv_ah) {
    // SAFETY: an AH from create(); callers destroy each one once.
    let rc = unsafe { ibv::ibv_destroy_ah(ah) };
    if rc != 0 {
        log::warn!("ibv_destroy_ah: {}", std::io::Error::from_raw_os_error(rc));
    }
}
