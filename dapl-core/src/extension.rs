//! The IB extensions (dat_ib_extensions.h) behind dat_extension_op: RDMA
//! write with immediate data, atomics, UD sends, the UD resolution frees and
//! the open/close query pair. csrc/extension_args.c unpacks the variadic
//! arguments and calls in here with plain types.

use crate::state::Provider;
use crate::backend::{SendOp, SendRequest};
use crate::ep::{self, Request};
use crate::ia;
use crate::open;
use dat_abi::status::{guard, invalid_arg};
use dat_abi::*;
use std::os::raw::{c_char, c_int};

unsafe extern "C" {
    /// The table's handle_extendedop_func (csrc/extension_args.c).
    pub fn daplibv_extension(handle: DAT_HANDLE, op: DAT_EXTENDED_OP, args: *mut __va_list_tag) -> DAT_RETURN;
}

/// Mirrors `struct daplibv_ext_post` in csrc/extension_args.c.
#[repr(C)]
pub struct ExtPost {
    pub(crate) segments: DAT_COUNT,
    pub(crate) local: *mut DAT_LMR_TRIPLET,
    pub(crate) cookie: DAT_UINT64,
    pub(crate) remote: *const DAT_RMR_TRIPLET,
    pub(crate) cmp_add: DAT_UINT64,
    pub(crate) swap: DAT_UINT64,
    pub(crate) immed: DAT_UINT32,
    pub(crate) ah: *const DAT_IB_ADDR_HANDLE,
    pub(crate) flags: DAT_COMPLETION_FLAGS,
}

/// # Safety
/// `p` points at the arguments the C side unpacked for this call.
pub unsafe fn ext_post<T: Provider>(h: DAT_HANDLE, op: c_int, p: *const ExtPost) -> DAT_RETURN {
    guard("dat_extension_op", || {
        // The EP first, as every post does: an atomic's argument checks below
        // must not answer for a freed or wrong-type handle (dat-fuzz finding 3).
        if let Err(e) = ep::get::<T>(h) {
            return e;
        }
        // SAFETY: the C caller passes its stack struct.
        let p = unsafe { &*p };
        // SAFETY: null-checked consumer triplet.
        let remote = unsafe { p.remote.as_ref() };
        let cookie = DAT_DTO_COOKIE { as_64: p.cookie };
        let req = match op as u32 {
            DAT_IB_RDMA_WRITE_IMMED_OP => match remote.ok_or(invalid_arg(DAT_INVALID_ARG5)) {
                Ok(r) => Request::new(
                    SendRequest { remote: Some(r), imm: p.immed, ..SendRequest::plain(SendOp::RdmaWriteImm) },
                    DAT_IB_DTO_RDMA_WRITE_IMMED,
                ),
                Err(e) => return e,
            },
            DAT_IB_CMP_AND_SWAP_OP | DAT_IB_FETCH_AND_ADD_OP => {
                let r = match remote.ok_or(invalid_arg(DAT_INVALID_ARG5)) {
                    Ok(r) => r,
                    Err(e) => return e,
                };
                // Atomics work on one aligned 64-bit word at each end.
                if r.virtual_address % 8 != 0 {
                    return invalid_arg(DAT_INVALID_ARG5);
                }
                // SAFETY: null-checked consumer triplet.
                match unsafe { p.local.as_ref() } {
                    Some(l) if l.segment_length >= 8 && l.virtual_address % 8 == 0 => {}
                    _ => return invalid_arg(DAT_INVALID_ARG3),
                }
                let (opcode, dto) = if op as u32 == DAT_IB_CMP_AND_SWAP_OP {
                    (SendOp::CompareSwap, DAT_IB_DTO_CMP_SWAP)
                } else {
                    (SendOp::FetchAdd, DAT_IB_DTO_FETCH_ADD)
                };
                return ep::post_request::<T>(h, 1, p.local, cookie, &Request::new(SendRequest {
                    remote: Some(r),
                    atomic: (p.cmp_add, p.swap),
                    ..SendRequest::plain(opcode)
                }, dto), p.flags);
            }
            DAT_IB_UD_SEND_OP => {
                // SAFETY: null-checked consumer address handle.
                match unsafe { p.ah.as_ref() } {
                    Some(a) if !a.ah.is_null() => Request::new(SendRequest { ud: Some(a), ..SendRequest::plain(SendOp::Send) }, DAT_IB_DTO_SEND_UD),
                    _ => return invalid_arg(DAT_INVALID_ARG4),
                }
            }
            _ => return dat_abi::status::NOT_IMPLEMENTED,
        };
        ep::post_request::<T>(h, p.segments, p.local, cookie, &req, p.flags)
    })
}

/// An extension op this core does not implement (the collectives, unknown
/// numbers), on handle `h`: DAT_INVALID_HANDLE unless `h` is a live object
/// of this provider, DAT_NOT_IMPLEMENTED otherwise. The registry lets a
/// freed handle through (its slot still names our table), so the check is ours.
pub fn unsupported<T: Provider>(h: DAT_HANDLE) -> DAT_RETURN {
    guard("dat_extension_op", || match crate::handle::kind_of::<T>(h) {
        Some(_) => dat_abi::status::NOT_IMPLEMENTED,
        None => dat_abi::status::invalid_handle(DAT_INVALID_HANDLE1),
    })
}

/// # Safety
/// `name` a C string; the out-pointers are the consumer's.
pub unsafe fn open_query<T: Provider>(
    name: *const c_char,
    ia_out: *mut DAT_IA_HANDLE,
    ia_mask: DAT_IA_ATTR_MASK,
    ia_attr: *mut DAT_IA_ATTR,
    pr_mask: DAT_PROVIDER_ATTR_MASK,
    pr_attr: *mut DAT_PROVIDER_ATTR,
) -> DAT_RETURN {
    guard("dat_ib_open_query", || {
        if ia_out.is_null() {
            return invalid_arg(DAT_INVALID_ARG2);
        }
        if ia_attr.is_null() && pr_attr.is_null() {
            return invalid_arg(DAT_INVALID_ARG4);
        }
        let mut async_evd: DAT_EVD_HANDLE = std::ptr::null_mut();
        // SAFETY: ia_out checked non-null; ia::open validates the rest.
        unsafe {
            let r = open::open::<T>(name as DAT_NAME_PTR, 8, &mut async_evd, ia_out);
            if r != DAT_SUCCESS {
                return r;
            }
            let r = ia::query::<T>(*ia_out, std::ptr::null_mut(), ia_mask, ia_attr, pr_mask, pr_attr);
            if r != DAT_SUCCESS {
                ia::close::<T>(*ia_out, DAT_CLOSE_ABRUPT_FLAG);
                *ia_out = std::ptr::null_mut();
            }
            r
        }
    })
}

/// # Safety
/// Any handle value; it is validated.
pub unsafe fn close_query<T: Provider>(h: DAT_HANDLE) -> DAT_RETURN {
    // SAFETY: ia::close validates the handle.
    guard("dat_ib_close_query", || unsafe { ia::close::<T>(h, DAT_CLOSE_ABRUPT_FLAG) })
}

/// # Safety
/// Any handle values; they are validated.
pub unsafe fn ud_cm_free<T: Provider>(ep_h: DAT_HANDLE, cm: *mut std::ffi::c_void) -> DAT_RETURN {
    guard("dat_ib_ud_cm_free", || crate::ud::cm_free::<T>(ep_h, cm as DAT_HANDLE))
}

/// # Safety
/// `ah` null or the consumer's copy of an address handle.
pub unsafe fn ud_ah_free<T: Provider>(ep_h: DAT_HANDLE, ah: *const DAT_IB_ADDR_HANDLE) -> DAT_RETURN {
    guard("dat_ib_ud_ah_free", || crate::ud::ah_free::<T>(ep_h, ah))
}
