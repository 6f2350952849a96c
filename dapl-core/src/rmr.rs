//! Remote memory regions: memory windows a peer reaches with the context a
//! bind hands out, and loses with an unbind (a zero-length bind).

use crate::state::Provider;
use crate::ep;
use crate::handle::{self, Object};
use crate::ia::Ia;
use crate::lmr::Lmr;
use crate::pz::Pz;
use crate::dto::{OP_RMR_BIND, OP_RMR_QUIET};
use crate::backend::{DeviceOps, MrOps, MwOps, PdOps, QpOps, WindowTarget};
use dat_abi::status::{error, guard, invalid_arg};
use dat_abi::*;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU32, Ordering};

pub struct Rmr<T: Provider> {
    ia: &'static Ia<T>,
    pz: &'static Pz<T>,
    pz_handle: usize,
    mw: T::Mw,
    /// The rkey a peer must use now (0 while unbound).
    context: AtomicU32,
    /// The LMR the window is bound to (0 while unbound), which cannot be
    /// freed while bound.
    lmr: std::sync::atomic::AtomicUsize,
    bound: Mutex<(DAT_LMR_TRIPLET, DAT_MEM_PRIV_FLAGS, DAT_VA_TYPE)>,
}

/// Before the EPs: a type 2 window bound through a QP holds that QP, and
/// destroying the QP first stalls in the device for about 50 s (rxe).
pub const RANK: u8 = 9;


impl<T: Provider> Object for Rmr<T> {
    type P = T;
    const TYPE: DAT_HANDLE_TYPE = DAT_HANDLE_TYPE_RMR;
    const INVALID: u32 = DAT_INVALID_HANDLE_RMR;
}

/// Whether the device offers memory windows at all, and of type 2.
pub fn windows<T: Provider>(ia: &Ia<T>) -> (bool, bool) {
    let l = ia.device.limits();
    (l.windows, l.windows_type2)
}

pub unsafe extern "C" fn create<T: Provider>(pz_h: DAT_PZ_HANDLE, out: *mut DAT_RMR_HANDLE) -> DAT_RETURN {
    guard("dat_rmr_create", || {
        let pz = match handle::get::<Pz<T>>(pz_h) {
            Ok(p) => p,
            Err(e) => return e,
        };
        if out.is_null() {
            return invalid_arg(DAT_INVALID_ARG2);
        }
        let (any, type2) = windows::<T>(pz.ia);
        if !any {
            return error(DAT_MODEL_NOT_SUPPORTED, 0);
        }
        let mw = match pz.pd.alloc_mw(type2) {
            Ok(m) => m,
            Err(e) => {
                log::warn!("allocating a memory window: {e}");
                return dat_abi::status::no_resources(DAT_RESOURCE_MEMORY_REGION);
            }
        };
        pz.users.fetch_add(1, Ordering::AcqRel);
        let ia = pz.ia;
        let h = handle::insert(
            Rmr {
                ia,
                pz,
                pz_handle: pz_h as usize,
                mw,
                context: AtomicU32::new(0),
                lmr: std::sync::atomic::AtomicUsize::new(0),
                bound: Mutex::new((DAT_LMR_TRIPLET::default(), 0, DAT_VA_TYPE_VA)),
            },
            ia.table(),
        );
        ia.adopt::<Rmr<T>>(h, RANK, destroy::<T>);
        // SAFETY: checked non-null.
        unsafe { *out = h };
        DAT_SUCCESS
    })
}

fn destroy<T: Provider>(h: DAT_HANDLE) {
    let Ok(r) = handle::get::<Rmr<T>>(h) else { return };
    r.ia.disown::<Rmr<T>>(h);
    let pz = r.pz;
    let lmr = r.lmr.swap(0, Ordering::AcqRel);
    if handle::remove::<Rmr<T>>(h) {
        pz.users.fetch_sub(1, Ordering::AcqRel);
        if let Ok(l) = handle::get::<Lmr<T>>(lmr as DAT_HANDLE) {
            l.windows.fetch_sub(1, Ordering::AcqRel);
        }
    }
}

pub unsafe extern "C" fn free<T: Provider>(h: DAT_RMR_HANDLE) -> DAT_RETURN {
    guard("dat_rmr_free", || match handle::get::<Rmr<T>>(h) {
        Ok(_) => {
            destroy::<T>(h);
            DAT_SUCCESS
        }
        Err(e) => e,
    })
}

pub unsafe extern "C" fn query<T: Provider>(h: DAT_RMR_HANDLE, _mask: DAT_RMR_PARAM_MASK, out: *mut DAT_RMR_PARAM) -> DAT_RETURN {
    guard("dat_rmr_query", || {
        let r = match handle::get::<Rmr<T>>(h) {
            Ok(r) => r,
            Err(e) => return e,
        };
        // SAFETY: null-checked consumer out-parameter.
        let Some(p) = (unsafe { out.as_mut() }) else { return invalid_arg(DAT_INVALID_ARG3) };
        let (triplet, privs, va) = *r.bound.lock().unwrap_or_else(|e| e.into_inner());
        p.ia_handle = r.pz.ia_handle as DAT_IA_HANDLE;
        p.pz_handle = r.pz_handle as DAT_PZ_HANDLE;
        p.lmr_triplet = triplet;
        p.mem_priv = privs;
        p.rmr_context = r.context.load(Ordering::Acquire);
        p.rmr_scope = DAT_RMR_SCOPE_EP;
        p.va_type = va;
        DAT_SUCCESS
    })
}

#[allow(clippy::too_many_arguments)]
pub unsafe extern "C" fn bind<T: Provider>(
    h: DAT_RMR_HANDLE,
    lmr_h: DAT_LMR_HANDLE,
    triplet: *const DAT_LMR_TRIPLET,
    privs: DAT_MEM_PRIV_FLAGS,
    va_type: DAT_VA_TYPE,
    ep_h: DAT_EP_HANDLE,
    cookie: DAT_RMR_COOKIE,
    flags: DAT_COMPLETION_FLAGS,
    out: *mut DAT_RMR_CONTEXT,
) -> DAT_RETURN {
    guard("dat_rmr_bind", || {
        let r = match handle::get::<Rmr<T>>(h) {
            Ok(r) => r,
            Err(e) => return e,
        };
        let ep = match ep::get::<T>(ep_h) {
            Ok(e) => e,
            Err(e) => return e,
        };
        // SAFETY: null-checked consumer triplet.
        let Some(t) = (unsafe { triplet.as_ref() }).copied() else { return invalid_arg(DAT_INVALID_ARG3) };
        if va_type != DAT_VA_TYPE_VA {
            return invalid_arg(DAT_INVALID_ARG5);
        }
        let signaled = flags & (DAT_COMPLETION_SUPPRESS_FLAG | DAT_COMPLETION_UNSIGNALLED_FLAG) == 0;
        // SAFETY: plain 8-byte union.
        let cookie = unsafe { cookie.as_64 };
        let unbind = t.segment_length == 0;
        let (target, lkey_ok, in_range) = if unbind {
            (None, true, true)
        } else {
            let lmr = match handle::get::<Lmr<T>>(lmr_h) {
                Ok(l) => l,
                Err(e) => return e,
            };
            let inside = lmr.contains(t.virtual_address, t.segment_length as u64);
            let target = WindowTarget { mr: &lmr.mr, addr: t.virtual_address, len: t.segment_length as u64, privs };
            (Some(target), lmr.mr.lkey() == t.lmr_context, inside)
        };
        if !lkey_ok {
            return invalid_arg(DAT_INVALID_ARG3);
        }
        if !in_range {
            return error(DAT_LENGTH_ERROR, 0);
        }
        let new_key = if r.mw.is_type2() {
            let current = r.context.load(Ordering::Acquire);
            let posted = if unbind {
                if current == 0 {
                    // Nothing to invalidate, but the consumer still gets the
                    // completion it asked for, through the same EVD.
                    return match ep.post_window_event(h, cookie, signaled) {
                        Ok(()) => DAT_SUCCESS,
                        Err(e) => e,
                    };
                }
                ep.post_window_op(h as usize, cookie, OP_RMR_BIND, signaled, |qp, wr_id, signaled| qp.post_invalidate(wr_id, signaled, current))
                    .map(|_| 0)
            } else {
                if current != 0 {
                    // A bound type 2 window must be invalidated before it is
                    // bound again; the QP runs the two in order.
                    if let Err(e) = ep.post_window_op(h as usize, cookie, OP_RMR_QUIET, false, |qp, wr_id, signaled| {
                        qp.post_invalidate(wr_id, signaled, current)
                    }) {
                        return e;
                    }
                }
                // Every bind takes a new 8-bit key, so an old rkey stops working.
                let key = r.mw.next_rkey();
                let Some(target) = target.as_ref() else { return invalid_arg(DAT_INVALID_ARG3) };
                ep.post_window_op(h as usize, cookie, OP_RMR_BIND, signaled, |qp, wr_id, signaled| {
                    qp.post_bind(wr_id, signaled, &r.mw, key, target)
                })
                .map(|_| {
                    r.mw.set_rkey(key);
                    key
                })
            };
            match posted {
                Ok(k) => k,
                Err(e) => return e,
            }
        } else {
            // The same checks and slot handling as a type 2 bind; a bind the
            // device refuses is the target's fault, as DAPL reports it.
            let mut refused = false;
            let posted = ep.post_window_op(h as usize, cookie, OP_RMR_BIND, signaled, |qp, wr_id, signaled| {
                qp.bind_type1(wr_id, signaled, &r.mw, target.as_ref()).inspect_err(|&rc| {
                    log::warn!("binding a type 1 window: {}", std::io::Error::from_raw_os_error(rc));
                    refused = true;
                })
            });
            match posted {
                Ok(()) => {}
                Err(_) if refused => return invalid_arg(DAT_INVALID_ARG3),
                Err(e) => return e,
            }
            if unbind { 0 } else { r.mw.rkey() }
        };
        r.context.store(new_key, Ordering::Release);
        let new_lmr = if unbind { 0 } else { lmr_h as usize };
        let old_lmr = r.lmr.swap(new_lmr, Ordering::AcqRel);
        if let Ok(l) = handle::get::<Lmr<T>>(new_lmr as DAT_HANDLE) {
            l.windows.fetch_add(1, Ordering::AcqRel);
        }
        if let Ok(l) = handle::get::<Lmr<T>>(old_lmr as DAT_HANDLE) {
            l.windows.fetch_sub(1, Ordering::AcqRel);
        }
        *r.bound.lock().unwrap_or_else(|e| e.into_inner()) = (t, if unbind { 0 } else { privs }, va_type);
        // SAFETY: optional consumer out-parameter, null-checked.
        if let Some(o) = unsafe { out.as_mut() } {
            *o = new_key;
        }
        DAT_SUCCESS
    })
}
