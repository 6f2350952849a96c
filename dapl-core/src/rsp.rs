//! Reserved service points: like a PSP, but for one EP and one connection.

use crate::state::Provider;
use crate::ep;
use crate::evd;
use crate::handle::{self, Object};
use crate::ia::Ia;
use crate::backend::{ConnIdOps, IdSlot};
use crate::psp::listen;
use dat_abi::status::{guard, invalid_arg, invalid_state};
use dat_abi::*;
use std::sync::atomic::{AtomicBool, Ordering};

pub struct Rsp<T: Provider> {
    pub ia: &'static Ia<T>,
    ia_handle: usize,
    pub conn_qual: DAT_CONN_QUAL,
    pub evd: usize,
    pub ep: usize,
    /// Set by the first connection request; later ones are rejected.
    pub used: AtomicBool,
    id: IdSlot<T>,
}

pub const RANK: u8 = 10;


impl<T: Provider> Object for Rsp<T> {
    type P = T;
    const TYPE: DAT_HANDLE_TYPE = DAT_HANDLE_TYPE_RSP;
    const INVALID: u32 = DAT_INVALID_HANDLE_RSP;
}

pub unsafe extern "C" fn create<T: Provider>(
    ia_h: DAT_IA_HANDLE,
    qual: DAT_CONN_QUAL,
    ep_h: DAT_EP_HANDLE,
    evd_h: DAT_EVD_HANDLE,
    out: *mut DAT_RSP_HANDLE,
) -> DAT_RETURN {
    guard("dat_rsp_create", || {
        let ia = match handle::get::<Ia<T>>(ia_h) {
            Ok(ia) => ia,
            Err(e) => return e,
        };
        let ep = match ep::get::<T>(ep_h) {
            Ok(e) if std::ptr::eq(e.ia, ia) => e,
            Ok(_) => return dat_abi::status::invalid_handle(DAT_INVALID_HANDLE_EP),
            Err(e) => return e,
        };
        if ep.state.load(Ordering::Acquire) != DAT_EP_STATE_UNCONNECTED {
            return invalid_state(DAT_INVALID_STATE_EP_CONNECTED);
        }
        let evd = match evd::require::<T>(evd_h, DAT_EVD_CR_FLAG, DAT_INVALID_HANDLE_EVD_CR) {
            Ok(e) if std::ptr::eq(e.ia, ia) => e,
            Ok(_) => return dat_abi::status::invalid_handle(DAT_INVALID_HANDLE_EVD_CR),
            Err(e) => return e,
        };
        if out.is_null() {
            return invalid_arg(DAT_INVALID_ARG5);
        }
        let (id, _) = match listen(ia, T::port_of(qual), 0, false) {
            Ok(x) => x,
            Err(e) => return e,
        };
        let h = handle::insert(Rsp {
            ia,
            ia_handle: ia_h as usize,
            conn_qual: qual,
            evd: evd_h as usize,
            ep: ep_h as usize,
            used: AtomicBool::new(false),
            id: IdSlot::new(Some(id)),
        }, ia.table());
        // Its events now name this RSP.
        id.set_context(h as usize);
        evd.users.fetch_add(1, Ordering::AcqRel);
        ep.state.store(DAT_EP_STATE_RESERVED, Ordering::Release);
        ia.adopt::<Rsp<T>>(h, RANK, destroy::<T>);
        // SAFETY: checked non-null.
        unsafe { *out = h };
        DAT_SUCCESS
    })
}

fn destroy<T: Provider>(h: DAT_HANDLE) {
    let Ok(rsp) = handle::get::<Rsp<T>>(h) else { return };
    rsp.ia.disown::<Rsp<T>>(h);
    let id = rsp.id.take();
    let (evd, ep_h) = (rsp.evd, rsp.ep);
    if crate::quiesce::quiesced::<T, _>(|| handle::remove::<Rsp<T>>(h)) {
        if let Some(id) = id {
            id.destroy();
        }
        if let Ok(e) = handle::get::<evd::Evd<T>>(evd as DAT_HANDLE) {
            e.users.fetch_sub(1, Ordering::AcqRel);
        }
        if let Ok(ep) = ep::get::<T>(ep_h as DAT_HANDLE) {
            let _ = ep.state.compare_exchange(DAT_EP_STATE_RESERVED, DAT_EP_STATE_UNCONNECTED, Ordering::AcqRel, Ordering::Acquire);
        }
    }
}

pub unsafe extern "C" fn free<T: Provider>(h: DAT_RSP_HANDLE) -> DAT_RETURN {
    guard("dat_rsp_free", || match handle::get::<Rsp<T>>(h) {
        Ok(_) => {
            destroy::<T>(h);
            DAT_SUCCESS
        }
        Err(e) => e,
    })
}

pub unsafe extern "C" fn query<T: Provider>(h: DAT_RSP_HANDLE, _mask: DAT_RSP_PARAM_MASK, out: *mut DAT_RSP_PARAM) -> DAT_RETURN {
    guard("dat_rsp_query", || {
        let rsp = match handle::get::<Rsp<T>>(h) {
            Ok(r) => r,
            Err(e) => return e,
        };
        // SAFETY: null-checked consumer out-parameter.
        let Some(p) = (unsafe { out.as_mut() }) else { return invalid_arg(DAT_INVALID_ARG3) };
        p.ia_handle = rsp.ia_handle as DAT_IA_HANDLE;
        p.conn_qual = rsp.conn_qual;
        p.evd_handle = rsp.evd as DAT_EVD_HANDLE;
        p.ep_handle = rsp.ep as DAT_EP_HANDLE;
        DAT_SUCCESS
    })
}
