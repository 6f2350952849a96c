//! dat_ia_open: an IA assembled from the floors below, with its event
//! thread feeding the connection state machines and async errors.

use crate::async_error;
use crate::backend::{DeviceOps, Tick};
use crate::connection;
use crate::evd;
use crate::handle;
use crate::ia::{self, Ia};
use crate::instance;
use crate::state::Provider;
use dat_abi::status::{guard, invalid_arg, not_found};
use dat_abi::*;
use std::ffi::CStr;

pub unsafe extern "C" fn open<T: Provider>(
    name: DAT_NAME_PTR,
    async_qlen: DAT_COUNT,
    async_evd: *mut DAT_EVD_HANDLE,
    ia_out: *mut DAT_IA_HANDLE,
) -> DAT_RETURN {
    guard("dat_ia_open", || {
        if name.is_null() {
            return invalid_arg(DAT_INVALID_ARG1);
        }
        if async_evd.is_null() {
            return invalid_arg(DAT_INVALID_ARG3);
        }
        if ia_out.is_null() {
            return invalid_arg(DAT_INVALID_ARG4);
        }
        // SAFETY: non-null; the registry passes the consumer's C string.
        let name = unsafe { CStr::from_ptr(name) }.to_string_lossy().into_owned();
        let (Some(params), Some(table)) = (instance::params::<T>(&name), T::state().tables.find(&name)) else {
            return not_found(DAT_NAME_NOT_REGISTERED);
        };
        let device = match T::Device::open(&params) {
            Ok(d) => d,
            Err(e) => return e,
        };
        // SAFETY: checked non-null above; the consumer's in/out handle.
        let given = unsafe { *async_evd };
        let given_evd = if given.is_null() {
            None
        } else {
            match evd::require::<T>(given, DAT_EVD_ASYNC_FLAG, DAT_INVALID_HANDLE_EVD_ASYNC) {
                Ok(_) => Some(given),
                Err(e) => return e,
            }
        };
        let h = ia::insert::<T>(name, table, device, given);
        let ia = handle::get::<Ia<T>>(h).expect("just created");
        let me = h as usize;
        let tick: Tick = Box::new(move || connection::expire_connects::<T>(me));
        match ia.device.start_events(connection::handle_event::<T>, async_error::handle_event::<T>, tick) {
            Ok(t) => ia.set_events(t),
            Err(e) => {
                log::error!("cannot start the connection thread: {e}");
                ia::discard::<T>(h);
                return dat_abi::status::no_resources(DAT_RESOURCE_MEMORY);
            }
        }
        if given_evd.is_none() {
            match evd::create_evd::<T>(ia, h, async_qlen.max(8), std::ptr::null_mut(), DAT_EVD_ASYNC_FLAG) {
                Ok(e) => {
                    ia.set_own_async_evd(e);
                    // SAFETY: checked non-null above.
                    unsafe { *async_evd = e };
                }
                Err(e) => {
                    ia::discard::<T>(h);
                    return e;
                }
            }
        }
        // SAFETY: checked non-null above.
        unsafe { *ia_out = h };
        DAT_SUCCESS
    })
}
