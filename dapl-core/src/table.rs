//! The provider function table the registry dispatches through.
//!
//! Each IA name this library is registered under gets its own copy of the
//! table, with `device_name` set to that name: the reference registry finds
//! the dat.conf entry again by it when an IA closes. A slot left `None`
//! makes the registry answer DAT_NOT_IMPLEMENTED, which is what README's
//! coverage table lists for it.

use crate::state::Provider;
use crate::{cno, connection, cr, ep, evd, extension, generic, ia, lmr, open, psp, pz, rmr, rsp, srq};
use dat_abi::*;

/// The provider table of transport `T`: every DAT call it implements,
/// instantiated for `T`.
fn template<T: Provider>() -> DAT_PROVIDER {
    DAT_PROVIDER {
        device_name: std::ptr::null(),
        extension: std::ptr::null_mut(),
        ia_open_func: Some(open::open::<T>),
        ia_query_func: Some(ia::query::<T>),
        ia_close_func: Some(ia::close::<T>),
        set_consumer_context_func: Some(generic::set_consumer_context::<T>),
        get_consumer_context_func: Some(generic::get_consumer_context::<T>),
        get_handle_type_func: Some(generic::get_handle_type::<T>),
        cno_create_func: Some(cno::create::<T>),
        cno_modify_agent_func: Some(cno::modify_agent::<T>),
        cno_query_func: Some(cno::query::<T>),
        cno_free_func: Some(cno::free::<T>),
        // SAFETY (both waits): the same C signature; they are C-unwind only so
        // that a cancelled waiter's unwind may leave through them.
        cno_wait_func: Some(unsafe {
            std::mem::transmute::<unsafe extern "C-unwind" fn(_, _, _) -> _, unsafe extern "C" fn(_, _, _) -> _>(cno::wait::<T>)
        }),
        evd_create_func: Some(evd::create::<T>),
        evd_query_func: Some(evd::query::<T>),
        evd_modify_cno_func: Some(evd::modify_cno::<T>),
        evd_enable_func: Some(evd::enable::<T>),
        evd_disable_func: Some(evd::disable::<T>),
        evd_wait_func: Some(unsafe {
            std::mem::transmute::<unsafe extern "C-unwind" fn(_, _, _, _, _) -> _, unsafe extern "C" fn(_, _, _, _, _) -> _>(evd::wait::<T>)
        }),
        evd_resize_func: Some(evd::resize::<T>),
        evd_post_se_func: Some(evd::post_se::<T>),
        evd_dequeue_func: Some(evd::dequeue::<T>),
        evd_free_func: Some(evd::free::<T>),
        evd_set_unwaitable_func: Some(evd::set_unwaitable::<T>),
        evd_clear_unwaitable_func: Some(evd::clear_unwaitable::<T>),
        cr_query_func: Some(cr::query::<T>),
        cr_accept_func: Some(cr::accept::<T>),
        cr_reject_func: Some(cr::reject::<T>),
        cr_handoff_func: Some(cr::handoff::<T>),
        ep_create_func: Some(ep::create::<T>),
        ep_query_func: Some(ep::query::<T>),
        ep_modify_func: Some(ep::modify::<T>),
        ep_connect_func: Some(connection::connect::<T>),
        ep_dup_connect_func: Some(connection::dup_connect::<T>),
        ep_disconnect_func: Some(connection::disconnect::<T>),
        ep_post_send_func: Some(ep::post_send::<T>),
        ep_post_recv_func: Some(ep::post_recv::<T>),
        ep_post_rdma_read_func: Some(ep::post_rdma_read::<T>),
        ep_post_rdma_write_func: Some(ep::post_rdma_write::<T>),
        ep_get_status_func: Some(ep::get_status::<T>),
        ep_free_func: Some(ep::free::<T>),
        ep_reset_func: Some(ep::reset::<T>),
        ep_recv_query_func: Some(ep::recv_query::<T>),
        ep_create_with_srq_func: Some(ep::create_with_srq::<T>),
        ep_set_watermark_func: Some(ep::set_watermark::<T>),
        srq_create_func: Some(srq::create::<T>),
        srq_free_func: Some(srq::free::<T>),
        srq_post_recv_func: Some(srq::post_recv::<T>),
        srq_query_func: Some(srq::query::<T>),
        srq_resize_func: Some(srq::resize::<T>),
        srq_set_lw_func: Some(srq::set_lw::<T>),
        psp_create_func: Some(psp::create::<T>),
        psp_create_any_func: Some(psp::create_any::<T>),
        psp_query_func: Some(psp::query::<T>),
        psp_free_func: Some(psp::free::<T>),
        rsp_create_func: Some(rsp::create::<T>),
        rsp_query_func: Some(rsp::query::<T>),
        rsp_free_func: Some(rsp::free::<T>),
        rmr_create_func: Some(rmr::create::<T>),
        rmr_query_func: Some(rmr::query::<T>),
        rmr_bind_func: Some(rmr::bind::<T>),
        rmr_free_func: Some(rmr::free::<T>),
        pz_create_func: Some(pz::create::<T>),
        pz_query_func: Some(pz::query::<T>),
        pz_free_func: Some(pz::free::<T>),
        lmr_create_func: Some(lmr::create::<T>),
        lmr_query_func: Some(lmr::query::<T>),
        lmr_free_func: Some(lmr::free::<T>),
        lmr_sync_rdma_read_func: Some(lmr::sync_rdma_read::<T>),
        lmr_sync_rdma_write_func: Some(lmr::sync_rdma_write::<T>),
        handle_extendedop_func: Some(extension::daplibv_extension),
        // SAFETY: an all-zero DAT_PROVIDER is all-None function slots and NULL pointers.
        ..unsafe { std::mem::zeroed() }
    }
}

/// The table for IA name `name`, created on first use; None when full.
pub fn for_instance<T: Provider>(name: &str) -> Option<*mut DAT_PROVIDER> {
    T::state().tables.find_or_add(name, template::<T>)
}
