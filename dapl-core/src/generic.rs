//! Calls that take a handle of any kind.

use crate::handle;
use crate::state::Provider;
use dat_abi::status::{guard, invalid_arg, invalid_handle};
use dat_abi::*;

pub unsafe extern "C" fn set_consumer_context<T: Provider>(h: DAT_HANDLE, context: DAT_CONTEXT) -> DAT_RETURN {
    guard("dat_set_consumer_context", || {
        if handle::set_context::<T>(h, context) { DAT_SUCCESS } else { invalid_handle(DAT_INVALID_HANDLE1) }
    })
}

pub unsafe extern "C" fn get_consumer_context<T: Provider>(h: DAT_HANDLE, out: *mut DAT_CONTEXT) -> DAT_RETURN {
    guard("dat_get_consumer_context", || {
        let Some(ctx) = handle::context::<T>(h) else { return invalid_handle(DAT_INVALID_HANDLE1) };
        // SAFETY: null checked; the consumer's out-parameter.
        match unsafe { out.as_mut() } {
            Some(out) => {
                *out = ctx;
                DAT_SUCCESS
            }
            None => invalid_arg(DAT_INVALID_ARG2),
        }
    })
}

pub unsafe extern "C" fn get_handle_type<T: Provider>(h: DAT_HANDLE, out: *mut DAT_HANDLE_TYPE) -> DAT_RETURN {
    guard("dat_get_handle_type", || {
        let Some(kind) = handle::kind_of::<T>(h) else { return invalid_handle(DAT_INVALID_HANDLE1) };
        // SAFETY: null checked; the consumer's out-parameter.
        match unsafe { out.as_mut() } {
            Some(out) => {
                *out = kind;
                DAT_SUCCESS
            }
            None => invalid_arg(DAT_INVALID_ARG2),
        }
    })
}
