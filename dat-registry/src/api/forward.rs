//! Entry points that only route a call to the provider owning the handle.
//!
//! Each is checked at compile time against the provider table's function
//! type from the headers, so a signature cannot drift from the C view.

use crate::dispatch;
use dat_abi::*;

macro_rules! forward {
    ($( $name:ident: $fty:ident via $member:ident, $resolve:ident($minor:ident)
        ($h:ident : $hty:ty $(, $a:ident : $t:ty)* $(,)?); )*) => { $(
        #[unsafe(no_mangle)]
        /// # Safety
        /// The DAT 2.0 contract for this call: pointers valid as documented.
        pub unsafe extern "C" fn $name($h: $hty $(, $a: $t)*) -> DAT_RETURN {
            // Anything the fast way does not find is decided in full, under
            // the guard, by `full`, which has this call's own signature.
            #[cold]
            #[inline(never)]
            unsafe extern "C" fn full($h: $hty $(, $a: $t)*) -> DAT_RETURN {
                match dispatch::checked(stringify!($name), $h, $minor, dispatch::$resolve, |t| t.$member) {
                    // SAFETY: the table is a registered provider's, and the
                    // arguments are the consumer's, passed on unchanged.
                    (Some(f), h) => unsafe { f(h as DAT_HANDLE $(, $a)*) },
                    (None, e) => e as DAT_RETURN,
                }
            }
            // The common case: loads and compares that cannot panic (see
            // dispatch.rs) pick the provider's function. Either way one call
            // ends this function: a jump, with the arguments where they came.
            let (f, h): (unsafe extern "C" fn($hty $(, $t)*) -> DAT_RETURN, $hty) = match fast!($resolve, $h) {
                // SAFETY: a registered provider's table, static data of its library.
                Some((table, h)) => match unsafe { (*table).$member } {
                    Some(f) => (f, h),
                    None => (full, $h),
                },
                None => (full, $h),
            };
            // SAFETY: as above.
            unsafe { f(h $(, $a)*) }
        }
        const _: $fty = Some($name);
    )* };
}

/// The fast resolution that matches each full one.
macro_rules! fast {
    (object, $h:ident) => { dispatch::fast_object($h).map(|t| (t, $h)) };
    (ia_or_object, $h:ident) => { dispatch::fast_ia_or_object($h) };
}

forward! {
    dat_ia_query: DAT_IA_QUERY_FUNC via ia_query_func, ia_or_object(DAT_INVALID_HANDLE_IA)
        (ia: DAT_IA_HANDLE, evd: *mut DAT_EVD_HANDLE, ia_mask: DAT_IA_ATTR_MASK,
         ia_attr: *mut DAT_IA_ATTR, prov_mask: DAT_PROVIDER_ATTR_MASK, prov_attr: *mut DAT_PROVIDER_ATTR);
    dat_set_consumer_context: DAT_SET_CONSUMER_CONTEXT_FUNC via set_consumer_context_func,
        ia_or_object(DAT_INVALID_HANDLE1) (h: DAT_HANDLE, context: DAT_CONTEXT);
    dat_get_consumer_context: DAT_GET_CONSUMER_CONTEXT_FUNC via get_consumer_context_func,
        ia_or_object(DAT_INVALID_HANDLE1) (h: DAT_HANDLE, context: *mut DAT_CONTEXT);
    dat_get_handle_type: DAT_GET_HANDLE_TYPE_FUNC via get_handle_type_func,
        ia_or_object(DAT_INVALID_HANDLE1) (h: DAT_HANDLE, kind: *mut DAT_HANDLE_TYPE);

    dat_cno_create: DAT_CNO_CREATE_FUNC via cno_create_func, ia_or_object(DAT_INVALID_HANDLE_IA)
        (ia: DAT_IA_HANDLE, agent: DAT_OS_WAIT_PROXY_AGENT, cno: *mut DAT_CNO_HANDLE);
    dat_cno_modify_agent: DAT_CNO_MODIFY_AGENT_FUNC via cno_modify_agent_func, object(DAT_INVALID_HANDLE_CNO)
        (cno: DAT_CNO_HANDLE, agent: DAT_OS_WAIT_PROXY_AGENT);
    dat_cno_query: DAT_CNO_QUERY_FUNC via cno_query_func, object(DAT_INVALID_HANDLE_CNO)
        (cno: DAT_CNO_HANDLE, mask: DAT_CNO_PARAM_MASK, param: *mut DAT_CNO_PARAM);
    dat_cno_free: DAT_CNO_FREE_FUNC via cno_free_func, object(DAT_INVALID_HANDLE_CNO) (cno: DAT_CNO_HANDLE);

    dat_cr_query: DAT_CR_QUERY_FUNC via cr_query_func, object(DAT_INVALID_HANDLE_CR)
        (cr: DAT_CR_HANDLE, mask: DAT_CR_PARAM_MASK, param: *mut DAT_CR_PARAM);
    dat_cr_accept: DAT_CR_ACCEPT_FUNC via cr_accept_func, object(DAT_INVALID_HANDLE_CR)
        (cr: DAT_CR_HANDLE, ep: DAT_EP_HANDLE, size: DAT_COUNT, pdata: DAT_PVOID);
    dat_cr_reject: DAT_CR_REJECT_FUNC via cr_reject_func, object(DAT_INVALID_HANDLE_CR)
        (cr: DAT_CR_HANDLE, size: DAT_COUNT, pdata: DAT_PVOID);
    dat_cr_handoff: DAT_CR_HANDOFF_FUNC via cr_handoff_func, object(DAT_INVALID_HANDLE_CR)
        (cr: DAT_CR_HANDLE, qual: DAT_CONN_QUAL);

    dat_evd_create: DAT_EVD_CREATE_FUNC via evd_create_func, ia_or_object(DAT_INVALID_HANDLE_IA)
        (ia: DAT_IA_HANDLE, qlen: DAT_COUNT, cno: DAT_CNO_HANDLE, flags: DAT_EVD_FLAGS, evd: *mut DAT_EVD_HANDLE);
    dat_evd_query: DAT_EVD_QUERY_FUNC via evd_query_func, object(DAT_INVALID_HANDLE_EVD_REQUEST)
        (evd: DAT_EVD_HANDLE, mask: DAT_EVD_PARAM_MASK, param: *mut DAT_EVD_PARAM);
    dat_evd_modify_cno: DAT_EVD_MODIFY_CNO_FUNC via evd_modify_cno_func, object(DAT_INVALID_HANDLE_EVD_REQUEST)
        (evd: DAT_EVD_HANDLE, cno: DAT_CNO_HANDLE);
    dat_evd_enable: DAT_EVD_ENABLE_FUNC via evd_enable_func, object(DAT_INVALID_HANDLE_EVD_REQUEST) (evd: DAT_EVD_HANDLE);
    dat_evd_disable: DAT_EVD_DISABLE_FUNC via evd_disable_func, object(DAT_INVALID_HANDLE_EVD_REQUEST) (evd: DAT_EVD_HANDLE);
    dat_evd_resize: DAT_EVD_RESIZE_FUNC via evd_resize_func, object(DAT_INVALID_HANDLE_EVD_REQUEST)
        (evd: DAT_EVD_HANDLE, qlen: DAT_COUNT);
    dat_evd_post_se: DAT_EVD_POST_SE_FUNC via evd_post_se_func, object(DAT_INVALID_HANDLE_EVD_REQUEST)
        (evd: DAT_EVD_HANDLE, event: *const DAT_EVENT);
    dat_evd_dequeue: DAT_EVD_DEQUEUE_FUNC via evd_dequeue_func, object(DAT_INVALID_HANDLE_EVD_REQUEST)
        (evd: DAT_EVD_HANDLE, event: *mut DAT_EVENT);
    dat_evd_free: DAT_EVD_FREE_FUNC via evd_free_func, object(DAT_INVALID_HANDLE_EVD_REQUEST) (evd: DAT_EVD_HANDLE);
    dat_evd_set_unwaitable: DAT_EVD_SET_UNWAITABLE_FUNC via evd_set_unwaitable_func,
        object(DAT_INVALID_HANDLE_EVD_REQUEST) (evd: DAT_EVD_HANDLE);
    dat_evd_clear_unwaitable: DAT_EVD_CLEAR_UNWAITABLE_FUNC via evd_clear_unwaitable_func,
        object(DAT_INVALID_HANDLE_EVD_REQUEST) (evd: DAT_EVD_HANDLE);

    dat_ep_create: DAT_EP_CREATE_FUNC via ep_create_func, ia_or_object(DAT_INVALID_HANDLE_IA)
        (ia: DAT_IA_HANDLE, pz: DAT_PZ_HANDLE, recv_evd: DAT_EVD_HANDLE, req_evd: DAT_EVD_HANDLE,
         conn_evd: DAT_EVD_HANDLE, attr: *const DAT_EP_ATTR, ep: *mut DAT_EP_HANDLE);
    dat_ep_create_with_srq: DAT_EP_CREATE_WITH_SRQ_FUNC via ep_create_with_srq_func, ia_or_object(DAT_INVALID_HANDLE_IA)
        (ia: DAT_IA_HANDLE, pz: DAT_PZ_HANDLE, recv_evd: DAT_EVD_HANDLE, req_evd: DAT_EVD_HANDLE,
         conn_evd: DAT_EVD_HANDLE, srq: DAT_SRQ_HANDLE, attr: *const DAT_EP_ATTR, ep: *mut DAT_EP_HANDLE);
    dat_ep_query: DAT_EP_QUERY_FUNC via ep_query_func, object(DAT_INVALID_HANDLE_EP)
        (ep: DAT_EP_HANDLE, mask: DAT_EP_PARAM_MASK, param: *mut DAT_EP_PARAM);
    dat_ep_modify: DAT_EP_MODIFY_FUNC via ep_modify_func, object(DAT_INVALID_HANDLE_EP)
        (ep: DAT_EP_HANDLE, mask: DAT_EP_PARAM_MASK, param: *const DAT_EP_PARAM);
    dat_ep_connect: DAT_EP_CONNECT_FUNC via ep_connect_func, object(DAT_INVALID_HANDLE_EP)
        (ep: DAT_EP_HANDLE, addr: DAT_IA_ADDRESS_PTR, qual: DAT_CONN_QUAL, timeout: DAT_TIMEOUT,
         psize: DAT_COUNT, pdata: DAT_PVOID, qos: DAT_QOS, flags: DAT_CONNECT_FLAGS);
    dat_ep_dup_connect: DAT_EP_DUP_CONNECT_FUNC via ep_dup_connect_func, object(DAT_INVALID_HANDLE_EP)
        (ep: DAT_EP_HANDLE, dup: DAT_EP_HANDLE, timeout: DAT_TIMEOUT, psize: DAT_COUNT, pdata: DAT_PVOID, qos: DAT_QOS);
    dat_ep_disconnect: DAT_EP_DISCONNECT_FUNC via ep_disconnect_func, object(DAT_INVALID_HANDLE_EP)
        (ep: DAT_EP_HANDLE, flags: DAT_CLOSE_FLAGS);
    dat_ep_post_send: DAT_EP_POST_SEND_FUNC via ep_post_send_func, object(DAT_INVALID_HANDLE_EP)
        (ep: DAT_EP_HANDLE, n: DAT_COUNT, iov: *mut DAT_LMR_TRIPLET, cookie: DAT_DTO_COOKIE, flags: DAT_COMPLETION_FLAGS);
    dat_ep_post_recv: DAT_EP_POST_RECV_FUNC via ep_post_recv_func, object(DAT_INVALID_HANDLE_EP)
        (ep: DAT_EP_HANDLE, n: DAT_COUNT, iov: *mut DAT_LMR_TRIPLET, cookie: DAT_DTO_COOKIE, flags: DAT_COMPLETION_FLAGS);
    dat_ep_post_rdma_read: DAT_EP_POST_RDMA_READ_FUNC via ep_post_rdma_read_func, object(DAT_INVALID_HANDLE_EP)
        (ep: DAT_EP_HANDLE, n: DAT_COUNT, iov: *mut DAT_LMR_TRIPLET, cookie: DAT_DTO_COOKIE,
         remote: *const DAT_RMR_TRIPLET, flags: DAT_COMPLETION_FLAGS);
    dat_ep_post_rdma_write: DAT_EP_POST_RDMA_WRITE_FUNC via ep_post_rdma_write_func, object(DAT_INVALID_HANDLE_EP)
        (ep: DAT_EP_HANDLE, n: DAT_COUNT, iov: *mut DAT_LMR_TRIPLET, cookie: DAT_DTO_COOKIE,
         remote: *const DAT_RMR_TRIPLET, flags: DAT_COMPLETION_FLAGS);
    dat_ep_get_status: DAT_EP_GET_STATUS_FUNC via ep_get_status_func, object(DAT_INVALID_HANDLE_EP)
        (ep: DAT_EP_HANDLE, state: *mut DAT_EP_STATE, recv_idle: *mut DAT_BOOLEAN, req_idle: *mut DAT_BOOLEAN);
    dat_ep_free: DAT_EP_FREE_FUNC via ep_free_func, object(DAT_INVALID_HANDLE_EP) (ep: DAT_EP_HANDLE);
    dat_ep_reset: DAT_EP_RESET_FUNC via ep_reset_func, object(DAT_INVALID_HANDLE_EP) (ep: DAT_EP_HANDLE);
    dat_ep_recv_query: DAT_EP_RECV_QUERY_FUNC via ep_recv_query_func, object(DAT_INVALID_HANDLE_EP)
        (ep: DAT_EP_HANDLE, nbufs: *mut DAT_COUNT, bufsize: *mut DAT_COUNT);
    dat_ep_set_watermark: DAT_EP_SET_WATERMARK_FUNC via ep_set_watermark_func, object(DAT_INVALID_HANDLE_EP)
        (ep: DAT_EP_HANDLE, soft_high: DAT_COUNT, hard_high: DAT_COUNT);

    dat_lmr_create: DAT_LMR_CREATE_FUNC via lmr_create_func, ia_or_object(DAT_INVALID_HANDLE_IA)
        (ia: DAT_IA_HANDLE, mem_type: DAT_MEM_TYPE, region: DAT_REGION_DESCRIPTION, len: DAT_VLEN,
         pz: DAT_PZ_HANDLE, privs: DAT_MEM_PRIV_FLAGS, va_type: DAT_VA_TYPE, lmr: *mut DAT_LMR_HANDLE,
         lmr_ctx: *mut DAT_LMR_CONTEXT, rmr_ctx: *mut DAT_RMR_CONTEXT, reg_len: *mut DAT_VLEN,
         reg_addr: *mut DAT_VADDR);
    dat_lmr_query: DAT_LMR_QUERY_FUNC via lmr_query_func, object(DAT_INVALID_HANDLE_LMR)
        (lmr: DAT_LMR_HANDLE, mask: DAT_LMR_PARAM_MASK, param: *mut DAT_LMR_PARAM);
    dat_lmr_free: DAT_LMR_FREE_FUNC via lmr_free_func, object(DAT_INVALID_HANDLE_LMR) (lmr: DAT_LMR_HANDLE);
    dat_lmr_sync_rdma_read: DAT_LMR_SYNC_RDMA_READ_FUNC via lmr_sync_rdma_read_func, ia_or_object(DAT_INVALID_HANDLE_IA)
        (ia: DAT_IA_HANDLE, iov: *const DAT_LMR_TRIPLET, n: DAT_VLEN);
    dat_lmr_sync_rdma_write: DAT_LMR_SYNC_RDMA_WRITE_FUNC via lmr_sync_rdma_write_func, ia_or_object(DAT_INVALID_HANDLE_IA)
        (ia: DAT_IA_HANDLE, iov: *const DAT_LMR_TRIPLET, n: DAT_VLEN);

    dat_rmr_create: DAT_RMR_CREATE_FUNC via rmr_create_func, object(DAT_INVALID_HANDLE_PZ)
        (pz: DAT_PZ_HANDLE, rmr: *mut DAT_RMR_HANDLE);
    dat_rmr_query: DAT_RMR_QUERY_FUNC via rmr_query_func, object(DAT_INVALID_HANDLE_RMR)
        (rmr: DAT_RMR_HANDLE, mask: DAT_RMR_PARAM_MASK, param: *mut DAT_RMR_PARAM);
    dat_rmr_bind: DAT_RMR_BIND_FUNC via rmr_bind_func, object(DAT_INVALID_HANDLE_RMR)
        (rmr: DAT_RMR_HANDLE, lmr: DAT_LMR_HANDLE, iov: *const DAT_LMR_TRIPLET, privs: DAT_MEM_PRIV_FLAGS,
         va_type: DAT_VA_TYPE, ep: DAT_EP_HANDLE, cookie: DAT_RMR_COOKIE, flags: DAT_COMPLETION_FLAGS,
         ctx: *mut DAT_RMR_CONTEXT);
    dat_rmr_free: DAT_RMR_FREE_FUNC via rmr_free_func, object(DAT_INVALID_HANDLE_RMR) (rmr: DAT_RMR_HANDLE);

    dat_psp_create: DAT_PSP_CREATE_FUNC via psp_create_func, ia_or_object(DAT_INVALID_HANDLE_IA)
        (ia: DAT_IA_HANDLE, qual: DAT_CONN_QUAL, evd: DAT_EVD_HANDLE, flags: DAT_PSP_FLAGS, psp: *mut DAT_PSP_HANDLE);
    dat_psp_create_any: DAT_PSP_CREATE_ANY_FUNC via psp_create_any_func, ia_or_object(DAT_INVALID_HANDLE_IA)
        (ia: DAT_IA_HANDLE, qual: *mut DAT_CONN_QUAL, evd: DAT_EVD_HANDLE, flags: DAT_PSP_FLAGS, psp: *mut DAT_PSP_HANDLE);
    dat_psp_query: DAT_PSP_QUERY_FUNC via psp_query_func, object(DAT_INVALID_HANDLE_PSP)
        (psp: DAT_PSP_HANDLE, mask: DAT_PSP_PARAM_MASK, param: *mut DAT_PSP_PARAM);
    dat_psp_free: DAT_PSP_FREE_FUNC via psp_free_func, object(DAT_INVALID_HANDLE_PSP) (psp: DAT_PSP_HANDLE);

    dat_rsp_create: DAT_RSP_CREATE_FUNC via rsp_create_func, ia_or_object(DAT_INVALID_HANDLE_IA)
        (ia: DAT_IA_HANDLE, qual: DAT_CONN_QUAL, ep: DAT_EP_HANDLE, evd: DAT_EVD_HANDLE, rsp: *mut DAT_RSP_HANDLE);
    dat_rsp_query: DAT_RSP_QUERY_FUNC via rsp_query_func, object(DAT_INVALID_HANDLE_RSP)
        (rsp: DAT_RSP_HANDLE, mask: DAT_RSP_PARAM_MASK, param: *mut DAT_RSP_PARAM);
    dat_rsp_free: DAT_RSP_FREE_FUNC via rsp_free_func, object(DAT_INVALID_HANDLE_RSP) (rsp: DAT_RSP_HANDLE);

    dat_pz_create: DAT_PZ_CREATE_FUNC via pz_create_func, ia_or_object(DAT_INVALID_HANDLE_IA)
        (ia: DAT_IA_HANDLE, pz: *mut DAT_PZ_HANDLE);
    dat_pz_query: DAT_PZ_QUERY_FUNC via pz_query_func, object(DAT_INVALID_HANDLE_PZ)
        (pz: DAT_PZ_HANDLE, mask: DAT_PZ_PARAM_MASK, param: *mut DAT_PZ_PARAM);
    dat_pz_free: DAT_PZ_FREE_FUNC via pz_free_func, object(DAT_INVALID_HANDLE_PZ) (pz: DAT_PZ_HANDLE);

    dat_srq_create: DAT_SRQ_CREATE_FUNC via srq_create_func, ia_or_object(DAT_INVALID_HANDLE_IA)
        (ia: DAT_IA_HANDLE, pz: DAT_PZ_HANDLE, attr: *mut DAT_SRQ_ATTR, srq: *mut DAT_SRQ_HANDLE);
    dat_srq_free: DAT_SRQ_FREE_FUNC via srq_free_func, object(DAT_INVALID_HANDLE_SRQ) (srq: DAT_SRQ_HANDLE);
    dat_srq_post_recv: DAT_SRQ_POST_RECV_FUNC via srq_post_recv_func, object(DAT_INVALID_HANDLE_SRQ)
        (srq: DAT_SRQ_HANDLE, n: DAT_COUNT, iov: *mut DAT_LMR_TRIPLET, cookie: DAT_DTO_COOKIE);
    dat_srq_query: DAT_SRQ_QUERY_FUNC via srq_query_func, object(DAT_INVALID_HANDLE_SRQ)
        (srq: DAT_SRQ_HANDLE, mask: DAT_SRQ_PARAM_MASK, param: *mut DAT_SRQ_PARAM);
    dat_srq_resize: DAT_SRQ_RESIZE_FUNC via srq_resize_func, object(DAT_INVALID_HANDLE_SRQ)
        (srq: DAT_SRQ_HANDLE, qlen: DAT_COUNT);
    dat_srq_set_lw: DAT_SRQ_SET_LW_FUNC via srq_set_lw_func, object(DAT_INVALID_HANDLE_SRQ)
        (srq: DAT_SRQ_HANDLE, low_watermark: DAT_COUNT);
}
