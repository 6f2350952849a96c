//! Connection requests: an incoming connect waiting for accept or reject.

use crate::state::Provider;
use crate::backend::{ConnIdOps, ConnParams, DeviceOps, IdSlot, QpOps};
use crate::ep;
use crate::handle::{self, Object};
use crate::ia::Ia;
use dat_abi::status::{error, guard, invalid_arg, invalid_handle, invalid_state};
use dat_abi::*;
use std::sync::atomic::Ordering;

pub struct Cr<T: Provider> {
    pub ia: &'static Ia<T>,
    pub id: IdSlot<T>,
    pub pdata: Vec<u8>,
    pub remote: Box<libc::sockaddr_storage>,
    pub remote_port: u16,
    /// The EP to use: the RSP's, or one the provider made (PSP_PROVIDER_FLAG).
    pub ep: usize,
}

pub const RANK: u8 = 10;


impl<T: Provider> Object for Cr<T> {
    type P = T;
    const TYPE: DAT_HANDLE_TYPE = DAT_HANDLE_TYPE_CR;
    const INVALID: u32 = DAT_INVALID_HANDLE_CR;
}

pub fn insert<T: Provider>(cr: Cr<T>) -> DAT_CR_HANDLE {
    let ia = cr.ia;
    let h = handle::insert(cr, ia.table());
    ia.adopt::<Cr<T>>(h, RANK, destroy::<T>);
    h
}

/// Frees a CR; its cm id is rejected and destroyed unless an accept took it.
pub fn destroy<T: Provider>(h: DAT_HANDLE) {
    let Ok(cr) = handle::get::<Cr<T>>(h) else { return };
    cr.ia.disown::<Cr<T>>(h);
    let id = cr.id.take();
    if crate::quiesce::quiesced::<T, _>(|| handle::remove::<Cr<T>>(h)) && let Some(id) = id {
        // A pending request nobody accepted.
        id.reject(None);
        id.destroy();
    }
}

/// Removes a CR and hands back its id, neither rejected nor destroyed.
pub fn discard<T: Provider>(h: DAT_HANDLE) -> Option<T::ConnId> {
    let cr = handle::get::<Cr<T>>(h).ok()?;
    cr.ia.disown::<Cr<T>>(h);
    let id = cr.id.take();
    handle::remove::<Cr<T>>(h);
    id
}

pub unsafe extern "C" fn query<T: Provider>(h: DAT_CR_HANDLE, _mask: DAT_CR_PARAM_MASK, out: *mut DAT_CR_PARAM) -> DAT_RETURN {
    guard("dat_cr_query", || {
        let cr = match handle::get::<Cr<T>>(h) {
            Ok(c) => c,
            Err(e) => return e,
        };
        // SAFETY: null-checked consumer out-parameter.
        let Some(p) = (unsafe { out.as_mut() }) else { return invalid_arg(DAT_INVALID_ARG3) };
        p.remote_ia_address_ptr = &*cr.remote as *const _ as DAT_IA_ADDRESS_PTR;
        p.remote_port_qual = cr.remote_port as DAT_PORT_QUAL;
        p.private_data_size = cr.pdata.len() as DAT_COUNT;
        p.private_data = if cr.pdata.is_empty() { std::ptr::null_mut() } else { cr.pdata.as_ptr() as DAT_PVOID };
        p.local_ep_handle = cr.ep as DAT_EP_HANDLE;
        DAT_SUCCESS
    })
}

pub unsafe extern "C" fn accept<T: Provider>(h: DAT_CR_HANDLE, ep_h: DAT_EP_HANDLE, psize: DAT_COUNT, pdata: DAT_PVOID) -> DAT_RETURN {
    guard("dat_cr_accept", || {
        let cr = match handle::get::<Cr<T>>(h) {
            Ok(c) => c,
            Err(e) => return e,
        };
        let ep_h = if ep_h.is_null() { cr.ep as DAT_EP_HANDLE } else { ep_h };
        // The EP must be the CR's IA's, as for an RSP: the connection lives
        // in that IA's connection manager, and an EP of another IA never
        // heard of its end (found by dat-fuzz: closing the CR's IA left the
        // other IA's EP connected, and then stuck disconnecting).
        let ep = match ep::get::<T>(ep_h) {
            Ok(e) if std::ptr::eq(e.ia, cr.ia) => e,
            Ok(_) => return invalid_handle(DAT_INVALID_HANDLE_EP),
            Err(e) => return e,
        };
        if psize < 0 || psize as usize > T::MAX_ACCEPT_PDATA {
            return invalid_arg(DAT_INVALID_ARG3);
        }
        if psize > 0 && pdata.is_null() {
            return invalid_arg(DAT_INVALID_ARG4);
        }
        if cr.id.get().is_some_and(|id| id.is_datagram()) {
            // A UD request is an address resolution: answered, not connected.
            let r = crate::ud::accept::<T>(crate::ud::Request { id: &cr.id, pdata: &cr.pdata, remote: &cr.remote }, ep_h, ep, psize, pdata);
            if r == DAT_SUCCESS {
                cr.ia.counters.add(DCNT_IA_SP_CR_ACCEPTED, 1);
                cr.ia.disown::<Cr<T>>(h);
                crate::quiesce::quiesced::<T, _>(|| handle::remove::<Cr<T>>(h));
            }
            return r;
        }
        // A connection needs a connected-service EP: a UD one is refused
        // here, as `ud::accept` refuses an RC one for a UD request (its QP
        // cannot be connected; found by dat-fuzz, it reached the QP and
        // came back as DAT_INTERNAL_ERROR).
        if ep.is_ud() {
            return invalid_handle(DAT_INVALID_HANDLE_EP);
        }
        // Claimed in one step: a dat_ep_connect on this EP from another
        // thread meanwhile must find it taken, not start a second
        // connection on the QP this accept is moving.
        let claim = |from| ep.state.compare_exchange(from, DAT_EP_STATE_COMPLETION_PENDING, Ordering::AcqRel, Ordering::Acquire).is_ok();
        let Some(st) = [DAT_EP_STATE_UNCONNECTED, DAT_EP_STATE_RESERVED].into_iter().find(|&s| claim(s)) else {
            return invalid_state(DAT_INVALID_STATE_EP_CONNECTED);
        };
        let give_back = |r: DAT_RETURN| {
            ep.state.store(st, Ordering::Release);
            r
        };
        let Some(qp_num) = ep.qp_num() else { return give_back(invalid_state(DAT_INVALID_STATE_EP_UNCONFIGURED)) };
        // Taking the id makes a second accept of this CR fail cleanly.
        let Some(id) = cr.id.take() else { return give_back(invalid_state(0)) };
        let (resp, init) = ep.read_depths();
        let moved = ep.with_qp(|q| q.connect_via(&id, resp, init));
        if !matches!(moved, Some(Ok(()))) {
            cr.id.set(Some(id));
            // EINVAL from the connection manager's QP attributes: it no
            // longer holds the request acceptable (rdma_cm: the requester
            // left or it timed out, and its event may still be on its way).
            // A state of the CR, not a fault of ours (dat-fuzz over verbs).
            if matches!(&moved, Some(Err(e)) if e.raw_os_error() == Some(libc::EINVAL)) {
                log::info!("accept: the request can no longer be accepted (its requester left?)");
                return give_back(invalid_state(0));
            }
            log::warn!("accept: QP to RTS failed: {moved:?}");
            return give_back(error(DAT_INTERNAL_ERROR, 0));
        }
        let pdata: &[u8] = if psize > 0 {
            // SAFETY: the consumer gave psize bytes at pdata (checked above).
            unsafe { std::slice::from_raw_parts(pdata as *const u8, psize as usize) }
        } else {
            &[]
        };
        let param = ConnParams {
            pdata,
            responder_resources: resp.max(1),
            initiator_depth: init.max(1),
            srq: ep.uses_srq(),
            qp_num,
        };
        *ep.remote.lock().unwrap_or_else(|e| e.into_inner()) = *cr.remote;
        ep.remote_port.store(cr.remote_port as u32, Ordering::Release);
        ep.cm_id.set(Some(id));
        // The id now belongs to the EP; its events name the EP.
        id.set_context(ep_h as usize);
        if let Err(e) = id.accept(&param) {
            log::warn!("accept: {e}");
            ep.cm_id.set(None);
            // The QP back to reset before the EP is given back: a connect
            // from another thread may claim the EP as soon as it is. Its
            // receives complete flushed rather than vanish in the reset.
            let _ = ep.flush_and_reset(ep_h);
            ep.state.store(st, Ordering::Release);
            id.destroy();
            crate::quiesce::quiesced::<T, _>(|| handle::remove::<Cr<T>>(h));
            return error(DAT_INTERNAL_ERROR, 0);
        }
        cr.ia.counters.add(DCNT_IA_SP_CR_ACCEPTED, 1);
        cr.ia.disown::<Cr<T>>(h);
        crate::quiesce::quiesced::<T, _>(|| handle::remove::<Cr<T>>(h));
        DAT_SUCCESS
    })
}

pub unsafe extern "C" fn reject<T: Provider>(h: DAT_CR_HANDLE, psize: DAT_COUNT, pdata: DAT_PVOID) -> DAT_RETURN {
    guard("dat_cr_reject", || {
        let cr = match handle::get::<Cr<T>>(h) {
            Ok(c) => c,
            Err(e) => return e,
        };
        if psize < 0 || psize as usize > T::MAX_REJECT_PDATA {
            return invalid_arg(DAT_INVALID_ARG2);
        }
        if psize > 0 && pdata.is_null() {
            return invalid_arg(DAT_INVALID_ARG3);
        }
        if let Some(id) = cr.id.take() {
            let reason: &[u8] = if psize > 0 {
                // SAFETY: the consumer gave psize bytes at pdata.
                unsafe { std::slice::from_raw_parts(pdata as *const u8, psize as usize) }
            } else {
                &[]
            };
            id.reject(Some(reason));
            id.destroy();
        }
        cr.ia.counters.add(DCNT_IA_SP_CR_REJECTED, 1);
        cr.ia.disown::<Cr<T>>(h);
        crate::quiesce::quiesced::<T, _>(|| handle::remove::<Cr<T>>(h));
        DAT_SUCCESS
    })
}

/// Passes a pending request to the PSP of this IA that listens on `qual`:
/// a new connection-request event for the same CR arrives on that PSP's EVD.
pub unsafe extern "C" fn handoff<T: Provider>(h: DAT_CR_HANDLE, qual: DAT_CONN_QUAL) -> DAT_RETURN {
    guard("dat_cr_handoff", || {
        let cr = match handle::get::<Cr<T>>(h) {
            Ok(c) => c,
            Err(e) => return e,
        };
        if cr.id.get().is_none() {
            return invalid_state(0);
        }
        let target = cr.ia.children_of_kind(DAT_HANDLE_TYPE_PSP).into_iter()
            .find(|&p| handle::get::<crate::psp::Psp<T>>(p).is_ok_and(|p| p.conn_qual == qual));
        let Some(psp_h) = target else { return invalid_arg(DAT_INVALID_ARG2) };
        let Ok(psp) = handle::get::<crate::psp::Psp<T>>(psp_h) else { return invalid_arg(DAT_INVALID_ARG2) };
        let Ok(evd) = handle::get::<crate::evd::Evd<T>>(psp.evd as DAT_HANDLE) else { return invalid_state(0) };
        let mut e = crate::evd::new_event(DAT_CONNECTION_REQUEST_EVENT);
        e.event_data.cr_arrival_event_data = DAT_CR_ARRIVAL_EVENT_DATA {
            sp_handle: DAT_SP_HANDLE { psp_handle: psp_h },
            local_ia_address_ptr: cr.ia.device.ia_address(),
            conn_qual: qual,
            cr_handle: h,
            truncate_flag: DAT_FALSE as _,
        };
        if evd.post(psp.evd as DAT_HANDLE, e) { DAT_SUCCESS } else { error(DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_TEVD) }
    })
}
