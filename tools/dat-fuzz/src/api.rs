//! The DAT calls the fuzzer makes, resolved from a `libdat2.so.2` at run
//! time, so the fuzzer can be pointed at any build of the registry and
//! builds before `tools/link-libdat2.sh` has made ours.

use dat_abi::*;
use std::os::raw::c_char;

macro_rules! api {
    ($($name:ident($($arg:ty),*);)*) => {
        #[allow(non_snake_case)]
        pub struct Api {
            _lib: libloading::Library,
            $(pub $name: unsafe extern "C" fn($($arg),*) -> DAT_RETURN,)*
            /// Variadic, so outside the list.
            pub dat_extension_op: ExtensionOp,
        }

        impl Api {
            pub fn load(path: &std::path::Path) -> Result<Api, libloading::Error> {
                // Global, as if linked: providers find the registry's dat_registry_add_provider by name.
                // SAFETY: loading our registry runs no initialiser that needs more than libc.
                let lib: libloading::Library = unsafe { libloading::os::unix::Library::open(Some(path), libc::RTLD_NOW | libc::RTLD_GLOBAL)? }.into();
                $(
                    // SAFETY: the type is the prototype in include/dat2 for this exported name.
                    let $name = unsafe { *lib.get::<unsafe extern "C" fn($($arg),*) -> DAT_RETURN>(concat!(stringify!($name), "\0").as_bytes())? };
                )*
                // SAFETY: the prototype in include/dat2/dat.h.
                let dat_extension_op = unsafe { *lib.get::<ExtensionOp>(b"dat_extension_op\0")? };
                Ok(Api { _lib: lib, $($name,)* dat_extension_op })
            }
        }
    };
}

api! {
    dat_ia_openv(*const c_char, DAT_COUNT, *mut DAT_EVD_HANDLE, *mut DAT_IA_HANDLE, DAT_UINT32, DAT_UINT32, DAT_BOOLEAN);
    dat_ia_close(DAT_IA_HANDLE, DAT_CLOSE_FLAGS);
    dat_ia_query(DAT_IA_HANDLE, *mut DAT_EVD_HANDLE, DAT_IA_ATTR_MASK, *mut DAT_IA_ATTR, DAT_PROVIDER_ATTR_MASK, *mut DAT_PROVIDER_ATTR);
    dat_registry_list_providers(DAT_COUNT, *mut DAT_COUNT, *mut *mut DAT_PROVIDER_INFO);
    dat_pz_create(DAT_IA_HANDLE, *mut DAT_PZ_HANDLE);
    dat_pz_free(DAT_PZ_HANDLE);
    dat_pz_query(DAT_PZ_HANDLE, DAT_PZ_PARAM_MASK, *mut DAT_PZ_PARAM);
    dat_cno_create(DAT_IA_HANDLE, DAT_OS_WAIT_PROXY_AGENT, *mut DAT_CNO_HANDLE);
    dat_cno_free(DAT_CNO_HANDLE);
    dat_evd_create(DAT_IA_HANDLE, DAT_COUNT, DAT_CNO_HANDLE, DAT_EVD_FLAGS, *mut DAT_EVD_HANDLE);
    dat_evd_free(DAT_EVD_HANDLE);
    dat_evd_query(DAT_EVD_HANDLE, DAT_EVD_PARAM_MASK, *mut DAT_EVD_PARAM);
    dat_evd_dequeue(DAT_EVD_HANDLE, *mut DAT_EVENT);
    dat_evd_wait(DAT_EVD_HANDLE, DAT_TIMEOUT, DAT_COUNT, *mut DAT_EVENT, *mut DAT_COUNT);
    dat_evd_resize(DAT_EVD_HANDLE, DAT_COUNT);
    dat_evd_post_se(DAT_EVD_HANDLE, *const DAT_EVENT);
    dat_evd_enable(DAT_EVD_HANDLE);
    dat_evd_disable(DAT_EVD_HANDLE);
    dat_evd_set_unwaitable(DAT_EVD_HANDLE);
    dat_evd_clear_unwaitable(DAT_EVD_HANDLE);
    dat_lmr_create(DAT_IA_HANDLE, DAT_MEM_TYPE, DAT_REGION_DESCRIPTION, DAT_VLEN, DAT_PZ_HANDLE, DAT_MEM_PRIV_FLAGS,
        DAT_VA_TYPE, *mut DAT_LMR_HANDLE, *mut DAT_LMR_CONTEXT, *mut DAT_RMR_CONTEXT, *mut DAT_VLEN, *mut DAT_VADDR);
    dat_lmr_free(DAT_LMR_HANDLE);
    dat_lmr_query(DAT_LMR_HANDLE, DAT_LMR_PARAM_MASK, *mut DAT_LMR_PARAM);
    dat_rmr_create(DAT_PZ_HANDLE, *mut DAT_RMR_HANDLE);
    dat_rmr_free(DAT_RMR_HANDLE);
    dat_rmr_query(DAT_RMR_HANDLE, DAT_RMR_PARAM_MASK, *mut DAT_RMR_PARAM);
    dat_rmr_bind(DAT_RMR_HANDLE, DAT_LMR_HANDLE, *const DAT_LMR_TRIPLET, DAT_MEM_PRIV_FLAGS, DAT_VA_TYPE, DAT_EP_HANDLE,
        DAT_RMR_COOKIE, DAT_COMPLETION_FLAGS, *mut DAT_RMR_CONTEXT);
    dat_ep_create(DAT_IA_HANDLE, DAT_PZ_HANDLE, DAT_EVD_HANDLE, DAT_EVD_HANDLE, DAT_EVD_HANDLE, *const DAT_EP_ATTR, *mut DAT_EP_HANDLE);
    dat_ep_create_with_srq(DAT_IA_HANDLE, DAT_PZ_HANDLE, DAT_EVD_HANDLE, DAT_EVD_HANDLE, DAT_EVD_HANDLE, DAT_SRQ_HANDLE,
        *const DAT_EP_ATTR, *mut DAT_EP_HANDLE);
    dat_ep_free(DAT_EP_HANDLE);
    dat_ep_query(DAT_EP_HANDLE, DAT_EP_PARAM_MASK, *mut DAT_EP_PARAM);
    dat_ep_reset(DAT_EP_HANDLE);
    dat_ep_get_status(DAT_EP_HANDLE, *mut DAT_EP_STATE, *mut DAT_BOOLEAN, *mut DAT_BOOLEAN);
    dat_ep_connect(DAT_EP_HANDLE, DAT_IA_ADDRESS_PTR, DAT_CONN_QUAL, DAT_TIMEOUT, DAT_COUNT, DAT_PVOID, DAT_QOS, DAT_CONNECT_FLAGS);
    dat_ep_disconnect(DAT_EP_HANDLE, DAT_CLOSE_FLAGS);
    dat_ep_post_send(DAT_EP_HANDLE, DAT_COUNT, *mut DAT_LMR_TRIPLET, DAT_DTO_COOKIE, DAT_COMPLETION_FLAGS);
    dat_ep_post_recv(DAT_EP_HANDLE, DAT_COUNT, *mut DAT_LMR_TRIPLET, DAT_DTO_COOKIE, DAT_COMPLETION_FLAGS);
    dat_ep_post_rdma_read(DAT_EP_HANDLE, DAT_COUNT, *mut DAT_LMR_TRIPLET, DAT_DTO_COOKIE, *const DAT_RMR_TRIPLET, DAT_COMPLETION_FLAGS);
    dat_ep_post_rdma_write(DAT_EP_HANDLE, DAT_COUNT, *mut DAT_LMR_TRIPLET, DAT_DTO_COOKIE, *const DAT_RMR_TRIPLET, DAT_COMPLETION_FLAGS);
    dat_srq_create(DAT_IA_HANDLE, DAT_PZ_HANDLE, *mut DAT_SRQ_ATTR, *mut DAT_SRQ_HANDLE);
    dat_srq_free(DAT_SRQ_HANDLE);
    dat_srq_query(DAT_SRQ_HANDLE, DAT_SRQ_PARAM_MASK, *mut DAT_SRQ_PARAM);
    dat_srq_post_recv(DAT_SRQ_HANDLE, DAT_COUNT, *mut DAT_LMR_TRIPLET, DAT_DTO_COOKIE);
    dat_psp_create(DAT_IA_HANDLE, DAT_CONN_QUAL, DAT_EVD_HANDLE, DAT_PSP_FLAGS, *mut DAT_PSP_HANDLE);
    dat_psp_free(DAT_PSP_HANDLE);
    dat_psp_query(DAT_PSP_HANDLE, DAT_PSP_PARAM_MASK, *mut DAT_PSP_PARAM);
    dat_rsp_create(DAT_IA_HANDLE, DAT_CONN_QUAL, DAT_EP_HANDLE, DAT_EVD_HANDLE, *mut DAT_RSP_HANDLE);
    dat_rsp_free(DAT_RSP_HANDLE);
    dat_cr_accept(DAT_CR_HANDLE, DAT_EP_HANDLE, DAT_COUNT, DAT_PVOID);
    dat_cr_reject(DAT_CR_HANDLE, DAT_COUNT, DAT_PVOID);
    dat_cr_query(DAT_CR_HANDLE, DAT_CR_PARAM_MASK, *mut DAT_CR_PARAM);
    dat_set_consumer_context(DAT_HANDLE, DAT_CONTEXT);
    dat_get_consumer_context(DAT_HANDLE, *mut DAT_CONTEXT);
    dat_get_handle_type(DAT_HANDLE, *mut DAT_HANDLE_TYPE);
    dat_ep_modify(DAT_EP_HANDLE, DAT_EP_PARAM_MASK, *const DAT_EP_PARAM);
    dat_ep_dup_connect(DAT_EP_HANDLE, DAT_EP_HANDLE, DAT_TIMEOUT, DAT_COUNT, DAT_PVOID, DAT_QOS);
    dat_ep_recv_query(DAT_EP_HANDLE, *mut DAT_COUNT, *mut DAT_COUNT);
    dat_ep_set_watermark(DAT_EP_HANDLE, DAT_COUNT, DAT_COUNT);
    dat_cno_wait(DAT_CNO_HANDLE, DAT_TIMEOUT, *mut DAT_EVD_HANDLE);
    dat_cno_query(DAT_CNO_HANDLE, DAT_CNO_PARAM_MASK, *mut DAT_CNO_PARAM);
    dat_evd_modify_cno(DAT_EVD_HANDLE, DAT_CNO_HANDLE);
    dat_cr_handoff(DAT_CR_HANDLE, DAT_CONN_QUAL);
    dat_psp_create_any(DAT_IA_HANDLE, *mut DAT_CONN_QUAL, DAT_EVD_HANDLE, DAT_PSP_FLAGS, *mut DAT_PSP_HANDLE);
    dat_rsp_query(DAT_RSP_HANDLE, DAT_RSP_PARAM_MASK, *mut DAT_RSP_PARAM);
    dat_srq_resize(DAT_SRQ_HANDLE, DAT_COUNT);
    dat_srq_set_lw(DAT_SRQ_HANDLE, DAT_COUNT);
    dat_lmr_sync_rdma_read(DAT_IA_HANDLE, *const DAT_LMR_TRIPLET, DAT_VLEN);
    dat_lmr_sync_rdma_write(DAT_IA_HANDLE, *const DAT_LMR_TRIPLET, DAT_VLEN);
}

/// `dat_extension_op` is variadic, so it is bound apart from the table above.
pub type ExtensionOp = unsafe extern "C" fn(DAT_HANDLE, DAT_EXTENDED_OP, ...) -> DAT_RETURN;


/// The live-object counters `libdaplmock.so.2` exports.
pub struct Live {
    _lib: libloading::Library,
    f: unsafe extern "C" fn(*mut usize, usize) -> usize,
}

pub const LIVE_KINDS: [&str; 7] = ["pd", "qp", "id", "cq", "mr", "mw", "srq"];

impl Live {
    /// Binds to the copy the registry loaded (RTLD_NOLOAD would fail if it hasn't).
    pub fn attach(path: &std::path::Path) -> Result<Live, libloading::Error> {
        // SAFETY: the provider is already loaded by the registry; this only takes a reference.
        let lib = unsafe { libloading::os::unix::Library::open(Some(path), libc::RTLD_NOW | libc::RTLD_NOLOAD)? };
        let lib: libloading::Library = lib.into();
        // SAFETY: the signature of daplmock_live_objects in dapl-provider-mock.
        let f = unsafe { *lib.get::<unsafe extern "C" fn(*mut usize, usize) -> usize>(b"daplmock_live_objects\0")? };
        Ok(Live { _lib: lib, f })
    }

    pub fn read(&self) -> [usize; 7] {
        let mut out = [0usize; 7];
        // SAFETY: seven writable slots.
        unsafe { (self.f)(out.as_mut_ptr(), out.len()) };
        out
    }
}
