//! Public service points: listen on a connection qualifier, turn each
//! incoming request into a CR on the PSP's EVD.

use crate::state::Provider;
use crate::backend::{ConnIdOps, DeviceOps, IdSlot};
use crate::evd;
use crate::handle::{self, Object};
use crate::ia::Ia;
use dat_abi::status::{error, guard, invalid_arg, no_resources};
use dat_abi::*;
use std::sync::atomic::Ordering;

pub struct Psp<T: Provider> {
    pub ia: &'static Ia<T>,
    pub ia_handle: usize,
    pub conn_qual: DAT_CONN_QUAL,
    pub evd: usize,
    pub flags: DAT_PSP_FLAGS,
    id: IdSlot<T>,
    /// The same port for datagram resolutions, where UD EPs find us.
    ud_id: IdSlot<T>,
}

pub const RANK: u8 = 10;


impl<T: Provider> Object for Psp<T> {
    type P = T;
    const TYPE: DAT_HANDLE_TYPE = DAT_HANDLE_TYPE_PSP;
    const INVALID: u32 = DAT_INVALID_HANDLE_PSP;
}

/// A connection id bound to the IA address on `port` (0: any) and
/// listening, with `context` as its owner. Returns the id and the port it got.
pub fn listen<T: Provider>(ia: &Ia<T>, port: u16, context: usize, datagram: bool) -> Result<(T::ConnId, u16), DAT_RETURN> {
    ia.device.listen(port, context, datagram).map_err(|e| {
        if e.raw_os_error() == Some(libc::EADDRINUSE) {
            // Not always another service point: on a TCP backend any socket
            // of this host holding the port (one in TIME_WAIT without
            // SO_REUSEADDR, say) refuses it too.
            log::info!("port {port} is taken (another service point, or a socket on this host): DAT_CONN_QUAL_IN_USE");
            error(DAT_CONN_QUAL_IN_USE, 0)
        } else {
            log::warn!("listening on port {port}: {e}");
            no_resources(DAT_RESOURCE_TEP)
        }
    })
}

fn create_psp<T: Provider>(ia_h: DAT_IA_HANDLE, qual: Option<DAT_CONN_QUAL>, evd_h: DAT_EVD_HANDLE, flags: DAT_PSP_FLAGS)
    -> Result<(DAT_PSP_HANDLE, DAT_CONN_QUAL), DAT_RETURN>
{
    let ia = handle::get::<Ia<T>>(ia_h)?;
    let evd = evd::require::<T>(evd_h, DAT_EVD_CR_FLAG, DAT_INVALID_HANDLE_EVD_CR)?;
    if !std::ptr::eq(evd.ia, ia) {
        // Another IA's EVD: its CM thread and device are not this IA's.
        return Err(dat_abi::status::invalid_handle(DAT_INVALID_HANDLE_EVD_CR));
    }
    if flags != DAT_PSP_CONSUMER_FLAG && flags != DAT_PSP_PROVIDER_FLAG {
        return Err(invalid_arg(DAT_INVALID_ARG4));
    }
    let (id, port) = listen::<T>(ia, qual.map_or(0, T::port_of), 0, false)?;
    log::debug!("PSP listening on port {port} for conn_qual {qual:?}");
    let conn_qual = qual.unwrap_or(port as DAT_CONN_QUAL);
    // UD requests come through the UDP space; a PSP without one still serves RC.
    let ud_id = listen::<T>(ia, port, 0, true).map(|(id, _)| id).map_err(|e| {
        log::debug!("PSP on port {port}: no UD listener ({e:#x})");
    }).ok();
    let h = handle::insert(
        Psp { ia, ia_handle: ia_h as usize, conn_qual, evd: evd_h as usize, flags, id: IdSlot::new(Some(id)), ud_id: IdSlot::new(ud_id) },
        ia.table(),
    );
    // Events on the ids now name this PSP.
    id.set_context(h as usize);
    if let Some(u) = ud_id {
        u.set_context(h as usize);
    }
    evd.users.fetch_add(1, Ordering::AcqRel);
    ia.adopt::<Psp<T>>(h, RANK, destroy::<T>);
    Ok((h, conn_qual))
}

pub unsafe extern "C" fn create<T: Provider>(
    ia_h: DAT_IA_HANDLE,
    qual: DAT_CONN_QUAL,
    evd_h: DAT_EVD_HANDLE,
    flags: DAT_PSP_FLAGS,
    out: *mut DAT_PSP_HANDLE,
) -> DAT_RETURN {
    guard("dat_psp_create", || {
        if out.is_null() {
            return invalid_arg(DAT_INVALID_ARG5);
        }
        match create_psp::<T>(ia_h, Some(qual), evd_h, flags) {
            Ok((h, _)) => {
                // SAFETY: checked non-null.
                unsafe { *out = h };
                DAT_SUCCESS
            }
            Err(e) => e,
        }
    })
}

pub unsafe extern "C" fn create_any<T: Provider>(
    ia_h: DAT_IA_HANDLE,
    qual: *mut DAT_CONN_QUAL,
    evd_h: DAT_EVD_HANDLE,
    flags: DAT_PSP_FLAGS,
    out: *mut DAT_PSP_HANDLE,
) -> DAT_RETURN {
    guard("dat_psp_create_any", || {
        if qual.is_null() {
            return invalid_arg(DAT_INVALID_ARG2);
        }
        if out.is_null() {
            return invalid_arg(DAT_INVALID_ARG5);
        }
        match create_psp::<T>(ia_h, None, evd_h, flags) {
            Ok((h, q)) => {
                if let Ok(p) = handle::get::<Psp<T>>(h) {
                    p.ia.counters.add(DCNT_IA_PSP_CREATE_ANY, 1);
                }
                // SAFETY: both checked non-null.
                unsafe {
                    *out = h;
                    *qual = q;
                }
                DAT_SUCCESS
            }
            Err(e) => e,
        }
    })
}

fn destroy<T: Provider>(h: DAT_HANDLE) {
    let Ok(psp) = handle::get::<Psp<T>>(h) else { return };
    psp.ia.disown::<Psp<T>>(h);
    let id = psp.id.take();
    let ud_id = psp.ud_id.take();
    let evd = psp.evd;
    if crate::quiesce::quiesced::<T, _>(|| handle::remove::<Psp<T>>(h)) {
        for id in [id, ud_id].into_iter().flatten() {
            id.destroy();
        }
        if let Ok(e) = handle::get::<evd::Evd<T>>(evd as DAT_HANDLE) {
            e.users.fetch_sub(1, Ordering::AcqRel);
        }
    }
}

pub unsafe extern "C" fn free<T: Provider>(h: DAT_PSP_HANDLE) -> DAT_RETURN {
    guard("dat_psp_free", || match handle::get::<Psp<T>>(h) {
        Ok(_) => {
            destroy::<T>(h);
            DAT_SUCCESS
        }
        Err(e) => e,
    })
}

pub unsafe extern "C" fn query<T: Provider>(h: DAT_PSP_HANDLE, _mask: DAT_PSP_PARAM_MASK, out: *mut DAT_PSP_PARAM) -> DAT_RETURN {
    guard("dat_psp_query", || {
        let psp = match handle::get::<Psp<T>>(h) {
            Ok(p) => p,
            Err(e) => return e,
        };
        // SAFETY: null-checked consumer out-parameter.
        let Some(p) = (unsafe { out.as_mut() }) else { return invalid_arg(DAT_INVALID_ARG3) };
        p.ia_handle = psp.ia_handle as DAT_IA_HANDLE;
        p.conn_qual = psp.conn_qual;
        p.evd_handle = psp.evd as DAT_EVD_HANDLE;
        p.psp_flags = psp.flags;
        DAT_SUCCESS
    })
}
