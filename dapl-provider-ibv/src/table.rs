//! The provider function table the registry dispatches through.
//!
//! Each IA name this library is registered under gets its own copy of the
//! table, with `device_name` set to that name: the reference registry finds
//! the dat.conf entry again by it when an IA closes. A slot left `None`
//! makes the registry answer DAT_NOT_IMPLEMENTED, which is what README's
//! coverage table lists for it.

use crate::{cno, connection, cr, ep, evd, generic, ia, lmr, psp, pz, rmr, rsp, srq};
use crate::cstring;
use dat_abi::*;
use std::ffi::CStr;
use std::sync::Mutex;
use std::sync::atomic::{AtomicPtr, Ordering};

struct Table(DAT_PROVIDER);

// The table is immutable static data; the raw pointers in it are to static strings.
unsafe impl Sync for Table {}

static TEMPLATE: Table = Table(DAT_PROVIDER {
    device_name: std::ptr::null(),
    extension: std::ptr::null_mut(),
    ia_open_func: Some(ia::open),
    ia_query_func: Some(ia::query),
    ia_close_func: Some(ia::close),
    set_consumer_context_func: Some(generic::set_consumer_context),
    get_consumer_context_func: Some(generic::get_consumer_context),
    get_handle_type_func: Some(generic::get_handle_type),
    cno_create_func: Some(cno::create),
    cno_modify_agent_func: Some(cno::modify_agent),
    cno_query_func: Some(cno::query),
    cno_free_func: Some(cno::free),
    // SAFETY (both waits): the same C signature; they are C-unwind only so
    // that a cancelled waiter's unwind may leave through them.
    cno_wait_func: Some(unsafe { std::mem::transmute(cno::wait as unsafe extern "C-unwind" fn(_, _, _) -> _) }),
    evd_create_func: Some(evd::create),
    evd_query_func: Some(evd::query),
    evd_modify_cno_func: Some(evd::modify_cno),
    evd_enable_func: Some(evd::enable),
    evd_disable_func: Some(evd::disable),
    evd_wait_func: Some(unsafe { std::mem::transmute(evd::wait as unsafe extern "C-unwind" fn(_, _, _, _, _) -> _) }),
    evd_resize_func: Some(evd::resize),
    evd_post_se_func: Some(evd::post_se),
    evd_dequeue_func: Some(evd::dequeue),
    evd_free_func: Some(evd::free),
    evd_set_unwaitable_func: Some(evd::set_unwaitable),
    evd_clear_unwaitable_func: Some(evd::clear_unwaitable),
    cr_query_func: Some(cr::query),
    cr_accept_func: Some(cr::accept),
    cr_reject_func: Some(cr::reject),
    cr_handoff_func: Some(cr::handoff),
    ep_create_func: Some(ep::create),
    ep_query_func: Some(ep::query),
    ep_modify_func: Some(ep::modify),
    ep_connect_func: Some(connection::connect),
    ep_dup_connect_func: Some(connection::dup_connect),
    ep_disconnect_func: Some(connection::disconnect),
    ep_post_send_func: Some(ep::post_send),
    ep_post_recv_func: Some(ep::post_recv),
    ep_post_rdma_read_func: Some(ep::post_rdma_read),
    ep_post_rdma_write_func: Some(ep::post_rdma_write),
    ep_get_status_func: Some(ep::get_status),
    ep_free_func: Some(ep::free),
    ep_reset_func: Some(ep::reset),
    ep_recv_query_func: Some(ep::recv_query),
    ep_create_with_srq_func: Some(ep::create_with_srq),
    ep_set_watermark_func: Some(ep::set_watermark),
    srq_create_func: Some(srq::create),
    srq_free_func: Some(srq::free),
    srq_post_recv_func: Some(srq::post_recv),
    srq_query_func: Some(srq::query),
    srq_resize_func: Some(srq::resize),
    srq_set_lw_func: Some(srq::set_lw),
    psp_create_func: Some(psp::create),
    psp_create_any_func: Some(psp::create_any),
    psp_query_func: Some(psp::query),
    psp_free_func: Some(psp::free),
    rsp_create_func: Some(rsp::create),
    rsp_query_func: Some(rsp::query),
    rsp_free_func: Some(rsp::free),
    rmr_create_func: Some(rmr::create),
    rmr_query_func: Some(rmr::query),
    rmr_bind_func: Some(rmr::bind),
    rmr_free_func: Some(rmr::free),
    pz_create_func: Some(pz::create),
    pz_query_func: Some(pz::query),
    pz_free_func: Some(pz::free),
    lmr_create_func: Some(lmr::create),
    lmr_query_func: Some(lmr::query),
    lmr_free_func: Some(lmr::free),
    lmr_sync_rdma_read_func: Some(lmr::sync_rdma_read),
    lmr_sync_rdma_write_func: Some(lmr::sync_rdma_write),
    handle_extendedop_func: Some(crate::extension::daplibv_extension),
    // SAFETY: an all-zero DAT_PROVIDER is all-None function slots and NULL pointers.
    ..unsafe { std::mem::zeroed() }
});

/// Instance tables never go away (handles point at them for as long as
/// the process lives); a name registered again gets its old table back.
const MAX_INSTANCES: usize = 64;
static INSTANCES: [AtomicPtr<DAT_PROVIDER>; MAX_INSTANCES] = [const { AtomicPtr::new(std::ptr::null_mut()) }; MAX_INSTANCES];
static CREATE: Mutex<()> = Mutex::new(());

/// The table for IA name `name`, created on first use; None when full.
pub fn for_instance(name: &str) -> Option<*mut DAT_PROVIDER> {
    let _guard = CREATE.lock().unwrap_or_else(|e| e.into_inner());
    let wanted = cstring(name);
    for slot in &INSTANCES {
        let p = slot.load(Ordering::Acquire);
        if p.is_null() {
            let mut t = Box::new(DAT_PROVIDER { ..TEMPLATE.0 });
            t.device_name = Box::leak(wanted.into_boxed_c_str()).as_ptr();
            let p = Box::into_raw(t);
            slot.store(p, Ordering::Release);
            return Some(p);
        }
        // SAFETY: instance tables are leaked and immutable; device_name is a C string.
        if unsafe { CStr::from_ptr((*p).device_name) } == wanted.as_c_str() {
            return Some(p);
        }
    }
    None
}

/// True when `p` is one of our instance tables.
#[inline]
pub fn is_ours(p: *const DAT_PROVIDER) -> bool {
    !p.is_null() && INSTANCES.iter().any(|s| std::ptr::eq(s.load(Ordering::Acquire), p))
}
