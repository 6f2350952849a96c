//! Protection zones: a backend protection domain.

use crate::state::Provider;
use crate::handle::{self, Object};
use crate::ia::Ia;
use crate::backend::{DeviceOps};
use dat_abi::status::{guard, invalid_arg, invalid_state, no_resources};
use dat_abi::*;
use std::sync::atomic::{AtomicUsize, Ordering};

pub struct Pz<T: Provider> {
    pub ia: &'static Ia<T>,
    pub ia_handle: usize,
    pub pd: T::Pd,
    /// LMRs, RMRs, EPs and SRQs using this PZ; it cannot be freed while any do.
    pub users: AtomicUsize,
}

/// Abrupt IA close frees PZs after everything that can use them.
pub const RANK: u8 = 1;


impl<T: Provider> Object for Pz<T> {
    type P = T;
    const TYPE: DAT_HANDLE_TYPE = DAT_HANDLE_TYPE_PZ;
    const INVALID: u32 = DAT_INVALID_HANDLE_PZ;
}

pub unsafe extern "C" fn create<T: Provider>(ia_h: DAT_IA_HANDLE, out: *mut DAT_PZ_HANDLE) -> DAT_RETURN {
    guard("dat_pz_create", || {
        let ia = match handle::get::<Ia<T>>(ia_h) {
            Ok(ia) => ia,
            Err(e) => return e,
        };
        if out.is_null() {
            return invalid_arg(DAT_INVALID_ARG2);
        }
        let pd = match ia.device.alloc_pd() {
            Ok(pd) => pd,
            Err(e) => {
                log::warn!("allocating a protection domain: {e}");
                return no_resources(DAT_RESOURCE_PROTECTION_DOMAIN);
            }
        };
        let h = handle::insert(Pz { ia, ia_handle: ia_h as usize, pd, users: AtomicUsize::new(0) }, ia.table());
        ia.adopt::<Pz<T>>(h, RANK, destroy::<T>);
        // SAFETY: checked non-null.
        unsafe { *out = h };
        DAT_SUCCESS
    })
}

fn destroy<T: Provider>(h: DAT_HANDLE) {
    if let Ok(pz) = handle::get::<Pz<T>>(h) {
        pz.ia.disown::<Pz<T>>(h);
        handle::remove::<Pz<T>>(h);
    }
}

pub unsafe extern "C" fn query<T: Provider>(h: DAT_PZ_HANDLE, _mask: DAT_PZ_PARAM_MASK, out: *mut DAT_PZ_PARAM) -> DAT_RETURN {
    guard("dat_pz_query", || {
        let pz = match handle::get::<Pz<T>>(h) {
            Ok(pz) => pz,
            Err(e) => return e,
        };
        // SAFETY: null-checked consumer out-parameter.
        match unsafe { out.as_mut() } {
            Some(p) => {
                p.ia_handle = pz.ia_handle as DAT_IA_HANDLE;
                DAT_SUCCESS
            }
            None => invalid_arg(DAT_INVALID_ARG3),
        }
    })
}

pub unsafe extern "C" fn free<T: Provider>(h: DAT_PZ_HANDLE) -> DAT_RETURN {
    guard("dat_pz_free", || {
        let pz = match handle::get::<Pz<T>>(h) {
            Ok(pz) => pz,
            Err(e) => return e,
        };
        if pz.users.load(Ordering::Acquire) != 0 {
            return invalid_state(DAT_INVALID_STATE_PZ_IN_USE);
        }
        destroy::<T>(h);
        DAT_SUCCESS
    })
}
