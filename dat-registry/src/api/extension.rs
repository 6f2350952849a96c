//! `dat_extension_op`: the C shim in csrc/ captures the variadic arguments;
//! this routes them to the provider that owns the handle.

use crate::dispatch::{self, guard};
use crate::status::NOT_IMPLEMENTED;
use dat_abi::*;

/// # Safety
/// `args` is the caller's live va_list, forwarded untouched.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn dat_registry_forward_extension(
    handle: DAT_HANDLE,
    op: DAT_EXTENDED_OP,
    args: *mut __va_list_tag,
) -> DAT_RETURN {
    guard("dat_extension_op", || {
        // Extension ops take IA handles too (counters, UD address queries).
        let (table, h) = match dispatch::ia_or_object(handle, DAT_INVALID_HANDLE1) {
            Ok(target) => target,
            Err(e) => return e,
        };
        match table.handle_extendedop_func {
            // SAFETY: a registered provider's entry, with the consumer's arguments.
            Some(f) => unsafe { f(h, op, args) },
            None => NOT_IMPLEMENTED,
        }
    })
}

/// dat_ib_open_query: opens the named IA and reads its attributes in one
/// call. The IA is an ordinary one, so dat_ib_close_query, dat_ia_query and
/// dat_ia_close all work on the handle it returns.
///
/// # Safety
/// `name` a C string; the out-pointers the consumer's.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn dat_registry_open_query(
    name: *const std::os::raw::c_char,
    ia: *mut DAT_IA_HANDLE,
    ia_mask: DAT_IA_ATTR_MASK,
    ia_attr: *mut DAT_IA_ATTR,
    pr_mask: DAT_PROVIDER_ATTR_MASK,
    pr_attr: *mut DAT_PROVIDER_ATTR,
) -> DAT_RETURN {
    guard("dat_ib_open_query", || {
        if ia.is_null() {
            return crate::status::invalid_arg(DAT_INVALID_ARG2);
        }
        let mut async_evd: DAT_EVD_HANDLE = std::ptr::null_mut();
        // SAFETY: dat_ia_openv checks the name and the out-pointers.
        let r = unsafe {
            crate::api::ia::dat_ia_openv(name as DAT_NAME_PTR, 8, &mut async_evd, ia, DAT_VERSION_MAJOR, DAT_VERSION_MINOR, 0)
        };
        if r != DAT_SUCCESS {
            return r;
        }
        // SAFETY: the IA just opened; the attribute pointers are the consumer's.
        let r = unsafe { crate::api::forward::dat_ia_query(*ia, std::ptr::null_mut(), ia_mask, ia_attr, pr_mask, pr_attr) };
        if r != DAT_SUCCESS {
            // SAFETY: closing the IA we opened above.
            unsafe {
                crate::api::ia::dat_ia_close(*ia, DAT_CLOSE_ABRUPT_FLAG);
                *ia = std::ptr::null_mut();
            }
        }
        r
    })
}

/// dat_ib_close_query: an abrupt close of an IA from dat_ib_open_query.
///
/// # Safety
/// Any handle value; it is validated.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn dat_registry_close_query(ia: DAT_HANDLE) -> DAT_RETURN {
    // SAFETY: dat_ia_close validates the handle.
    guard("dat_ib_close_query", || unsafe { crate::api::ia::dat_ia_close(ia, DAT_CLOSE_ABRUPT_FLAG) })
}
