//! The provider function table the registry dispatches through.
//!
//! One static table serves every IA name this library is registered under;
//! `ia_open` finds the instance by name. A slot left `None` makes the
//! registry answer DAT_NOT_IMPLEMENTED, which is what README's coverage
//! table lists for it.

use crate::{generic, ia, lmr, pz};
use dat_abi::*;

struct Table(DAT_PROVIDER);

// The table is immutable static data; the raw pointers in it are to static strings.
unsafe impl Sync for Table {}

static TABLE: Table = Table(DAT_PROVIDER {
    device_name: c"daplibv".as_ptr(),
    extension: std::ptr::null_mut(),
    ia_open_func: Some(ia::open),
    ia_query_func: Some(ia::query),
    ia_close_func: Some(ia::close),
    set_consumer_context_func: Some(generic::set_consumer_context),
    get_consumer_context_func: Some(generic::get_consumer_context),
    get_handle_type_func: Some(generic::get_handle_type),
    pz_create_func: Some(pz::create),
    pz_query_func: Some(pz::query),
    pz_free_func: Some(pz::free),
    lmr_create_func: Some(lmr::create),
    lmr_query_func: Some(lmr::query),
    lmr_free_func: Some(lmr::free),
    lmr_sync_rdma_read_func: Some(lmr::sync_rdma_read),
    lmr_sync_rdma_write_func: Some(lmr::sync_rdma_write),
    // SAFETY: an all-zero DAT_PROVIDER is all-None function slots and NULL pointers.
    ..unsafe { std::mem::zeroed() }
});

/// Our table's address: the first word of every handle we hand out.
pub fn provider() -> *mut DAT_PROVIDER {
    &TABLE.0 as *const DAT_PROVIDER as *mut DAT_PROVIDER
}
