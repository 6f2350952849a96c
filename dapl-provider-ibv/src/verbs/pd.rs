//! A protection domain.

use rdma_core_sys as ibv;

pub struct Pd(pub *mut ibv::ibv_pd);

// ibv_pd is used from any thread by rdma-core's design.
unsafe impl Send for Pd {}
unsafe impl Sync for Pd {}

impl Pd {
    pub fn alloc(ctx: *mut ibv::ibv_context) -> Option<Pd> {
        // SAFETY: ctx is a live verbs context owned by the IA.
        let pd = unsafe { ibv::ibv_alloc_pd(ctx) };
        (!pd.is_null()).then_some(Pd(pd))
    }
}

impl Drop for Pd {
    fn drop(&mut self) {
        // SAFETY: allocated in alloc(); the PZ frees it only once nothing uses it.
        let rc = unsafe { ibv::ibv_dealloc_pd(self.0) };
        if rc != 0 {
            log::warn!("ibv_dealloc_pd: {}", std::io::Error::from_raw_os_error(rc));
        }
    }
}
