//! UD endpoints (IB extension): "connecting" a UD EP resolves an address
//! handle for a peer's UD QP through the connection manager's datagram
//! resolution (on InfiniBand and RoCE, SIDR in rdma_cm's UDP port space), and
//! any number of such resolutions, active and passive, share one EP.
//!
//! Each resolution is a `UdCm` object: it owns the cm id while resolving,
//! then keeps the peer's private data, which the connection event points
//! into, until the consumer calls dat_ib_ud_cm_free (or frees the EP).
//! Address handles are tracked per EP, so dat_ib_ud_ah_free only ever
//! destroys one of ours, once.

use crate::state::Provider;
use crate::ep::{self, Ep};
use crate::evd::{self, Evd};
use crate::handle::{self, Object};
use crate::ia::Ia;
use crate::util::sockaddr_len;
use crate::backend::{AhOps, CmEvent, CmEventKind, ConnIdOps, ConnParams, DeviceOps, IdSlot, PdOps};
use dat_abi::status::{error, invalid_arg, invalid_handle, invalid_state, no_resources};
use dat_abi::*;
use std::sync::Mutex;
use std::sync::atomic::Ordering;


pub struct UdCm<T: Provider> {
    ep: usize,
    ia: &'static Ia<T>,
    id: IdSlot<T>,
    /// Ours while resolving; the peer's once answered (the event points here).
    pdata: Mutex<Vec<u8>>,
    remote: libc::sockaddr_storage,
    timeout_ms: i32,
}

impl<T: Provider> Object for UdCm<T> {
    type P = T;
    const TYPE: DAT_HANDLE_TYPE = DAT_IB_HANDLE_TYPE_EXT;
    const INVALID: u32 = DAT_INVALID_HANDLE_EP;
}

/// Before the EPs they answer for (ep::RANK).
const RANK: u8 = 9;



fn insert<T: Provider>(cm: UdCm<T>) -> DAT_HANDLE {
    let ia = cm.ia;
    let h = handle::insert(cm, ia.table());
    ia.adopt::<UdCm<T>>(h, RANK, destroy::<T>);
    h
}

fn destroy<T: Provider>(h: DAT_HANDLE) {
    let Ok(c) = handle::get::<UdCm<T>>(h) else { return };
    c.ia.disown::<UdCm<T>>(h);
    let id = c.id.take();
    if crate::quiesce::quiesced::<T, _>(|| handle::remove::<UdCm<T>>(h)) && let Some(id) = id {
        id.destroy();
    }
}

/// Releases everything UD an EP being freed still holds.
pub fn forget_ep<T: Provider>(ep_h: DAT_HANDLE) {
    // Destroyed after the lock is dropped, one by one.
    let ahs: Vec<T::Ah> = {
        let mut all = T::state().ahs.lock().unwrap_or_else(|e| e.into_inner());
        let (mine, rest) = std::mem::take(&mut *all).into_iter().partition(|(e, _)| *e == ep_h as usize);
        *all = rest;
        mine.into_iter().map(|(_, a): (usize, T::Ah)| a).collect()
    };
    drop(ahs);
    let Ok(ep) = ep::get::<T>(ep_h) else { return };
    for c in ep.ia.children_of_kind(DAT_IB_HANDLE_TYPE_EXT) {
        if handle::get::<UdCm<T>>(c).is_ok_and(|u| u.ep == ep_h as usize) {
            destroy::<T>(c);
        }
    }
}

/// dat_ep_connect on a UD EP: starts resolving the peer's address handle.
pub fn connect<T: Provider>(
    ep: &'static Ep<T>,
    h: DAT_EP_HANDLE,
    addr: DAT_IA_ADDRESS_PTR,
    qual: DAT_CONN_QUAL,
    timeout_ms: i32,
    pdata: &[u8],
) -> DAT_RETURN {
    if pdata.len() > T::MAX_UD_CONNECT_PDATA {
        return invalid_arg(DAT_INVALID_ARG5);
    }
    // SAFETY: the consumer's sockaddr; only its family is read first.
    let Some(len) = sockaddr_len(unsafe { (*addr).sa_family }) else {
        return error(DAT_INVALID_ADDRESS, DAT_INVALID_ADDRESS_MALFORMED);
    };
    // SAFETY: all-zero sockaddr_storage is valid; then `len` bytes its family implies.
    let mut remote: libc::sockaddr_storage = unsafe { std::mem::zeroed() };
    // SAFETY: as above.
    unsafe { std::ptr::copy_nonoverlapping(addr as *const u8, &mut remote as *mut _ as *mut u8, len) };
    // SAFETY: sin_port and sin6_port share an offset.
    unsafe { (*(&mut remote as *mut _ as *mut libc::sockaddr_in)).sin_port = T::port_of(qual).to_be() };
    let cm_h = insert::<T>(UdCm {
        ep: h as usize,
        ia: ep.ia,
        id: IdSlot::new(None),
        pdata: Mutex::new(pdata.to_vec()),
        remote,
        timeout_ms,
    });
    let c = handle::get::<UdCm<T>>(cm_h).expect("just created");
    let id = match ep.ia.device.create_conn_id(cm_h as usize, true) {
        Ok(id) => id,
        Err(e) => {
            log::warn!("creating a datagram resolution id: {e}");
            destroy::<T>(cm_h);
            return no_resources(DAT_RESOURCE_TEP);
        }
    };
    c.id.set(Some(id));
    if let Err(e) = id.resolve_addr(ep.ia.device.address(), &remote, timeout_ms) {
        log::warn!("resolving a UD peer's address: {e}");
        destroy::<T>(cm_h);
        return error(DAT_INVALID_ADDRESS, DAT_INVALID_ADDRESS_UNREACHABLE);
    }
    DAT_SUCCESS
}

/// A connection event on a UD resolution. Returns an id to destroy after the ack.
pub fn cm_event<T: Provider>(ev: &CmEvent<T>, cm_h: DAT_HANDLE) -> Option<T::ConnId> {
    let c = handle::get::<UdCm<T>>(cm_h).ok()?;
    let id = ev.id;
    let done = || c.id.take();
    match ev.kind {
        CmEventKind::AddrResolved => {
            if id.resolve_route(c.timeout_ms).is_err() {
                post_failure::<T>(c, cm_h, DAT_IB_UD_CONNECTION_ERROR_EVENT, DAT_IB_UD_CONNECT_ERROR);
                return done();
            }
            None
        }
        CmEventKind::RouteResolved => {
            let pdata = c.pdata.lock().unwrap_or_else(|e| e.into_inner()).clone();
            let qp_num = ep::get::<T>(c.ep as DAT_HANDLE).ok().and_then(|e| e.qp_num())?;
            let param = ConnParams { pdata: &pdata, responder_resources: 0, initiator_depth: 0, srq: false, qp_num };
            if let Err(e) = id.connect(&param) {
                log::warn!("UD resolution request: {e}");
                post_failure::<T>(c, cm_h, DAT_IB_UD_CONNECTION_ERROR_EVENT, DAT_IB_UD_CONNECT_ERROR);
                return done();
            }
            None
        }
        CmEventKind::Established => {
            *c.pdata.lock().unwrap_or_else(|e| e.into_inner()) = ev.pdata.to_vec();
            let Ok(e) = ep::get::<T>(c.ep as DAT_HANDLE) else { return done() };
            let Some((path, qpn)) = ev.ud_peer else {
                post_failure::<T>(c, cm_h, DAT_IB_UD_CONNECTION_ERROR_EVENT, DAT_IB_UD_CONNECT_ERROR);
                return done();
            };
            let made = e.pz().ok_or(None).and_then(|pz| pz.pd.create_ah(path).map_err(Some));
            match made {
                Ok(a) => {
                    let raw = a.raw();
                    T::state().ahs.lock().unwrap_or_else(|e| e.into_inner()).push((c.ep, a));
                    post_established::<T>(c, cm_h, DAT_IB_UD_REMOTE_AH, raw, qpn);
                }
                Err(err) => {
                    log::warn!("address handle for a UD peer: {err:?}");
                    post_failure::<T>(c, cm_h, DAT_IB_UD_CONNECTION_ERROR_EVENT, DAT_IB_UD_CONNECT_ERROR);
                }
            }
            done()
        }
        CmEventKind::Rejected { .. } => {
            post_failure::<T>(c, cm_h, DAT_IB_UD_CONNECTION_REJECT_EVENT, DAT_IB_UD_CONNECT_REJECT);
            done()
        }
        CmEventKind::Unreachable { .. } | CmEventKind::ConnectError => {
            post_failure::<T>(c, cm_h, DAT_IB_UD_CONNECTION_ERROR_EVENT, DAT_IB_UD_CONNECT_ERROR);
            done()
        }
        _ => None,
    }
}

/// The request a UD dat_cr_accept answers: its id (taken on success), the
/// peer's private data and address.
pub struct Request<'a, T: Provider> {
    pub id: &'a IdSlot<T>,
    pub pdata: &'a [u8],
    pub remote: &'a libc::sockaddr_storage,
}

/// dat_cr_accept of a UD request: answers the resolution with the EP's QP.
pub fn accept<T: Provider>(cr: Request<T>, ep_h: DAT_EP_HANDLE, ep: &'static Ep<T>, psize: DAT_COUNT, pdata: DAT_PVOID) -> DAT_RETURN {
    if !ep.is_ud() {
        return invalid_handle(DAT_INVALID_HANDLE_EP);
    }
    if psize as usize > T::MAX_UD_ACCEPT_PDATA {
        return invalid_arg(DAT_INVALID_ARG3);
    }
    let Some(qp_num) = ep.qp_num() else { return invalid_state(DAT_INVALID_STATE_EP_UNCONFIGURED) };
    let Some(id) = cr.id.take() else { return invalid_state(0) };
    let pdata: &[u8] = if psize > 0 {
        // SAFETY: the consumer gave psize bytes at pdata (checked by the caller).
        unsafe { std::slice::from_raw_parts(pdata as *const u8, psize as usize) }
    } else {
        &[]
    };
    let rc = id.accept(&ConnParams { pdata, responder_resources: 0, initiator_depth: 0, srq: false, qp_num });
    // The reply carried everything; the request id has no further use.
    id.destroy();
    if let Err(e) = rc {
        log::warn!("answering a UD resolution: {e}");
        return error(DAT_INTERNAL_ERROR, 0);
    }
    let cm_h = insert::<T>(UdCm {
        ep: ep_h as usize,
        ia: ep.ia,
        id: IdSlot::new(None),
        pdata: Mutex::new(cr.pdata.to_vec()),
        remote: *cr.remote,
        timeout_ms: 0,
    });
    let c = handle::get::<UdCm<T>>(cm_h).expect("just created");
    // A SIDR request does not carry the requester's QP number, so this side
    // has no address handle for it: the peer is reached by connecting to it.
    post_established::<T>(c, cm_h, DAT_IB_UD_PASSIVE_REMOTE_AH, std::ptr::null_mut(), 0);
    DAT_SUCCESS
}

fn conn_event<T: Provider>(c: &UdCm<T>, cm_h: DAT_HANDLE, number: DAT_EVENT_NUMBER, kind: DAT_IB_EXT_TYPE) -> (DAT_EVD_HANDLE, DAT_EVENT) {
    let pdata = c.pdata.lock().unwrap_or_else(|e| e.into_inner());
    let mut e = evd::new_event(number);
    e.event_data.connect_event_data = DAT_CONNECTION_EVENT_DATA {
        ep_handle: c.ep as DAT_EP_HANDLE,
        private_data_size: pdata.len() as DAT_COUNT,
        // The UdCm keeps these bytes until dat_ib_ud_cm_free.
        private_data: if pdata.is_empty() { std::ptr::null_mut() } else { pdata.as_ptr() as DAT_PVOID },
    };
    let x = crate::dto::ext_data(&mut e);
    x.type_ = kind;
    x.status = DAT_OP_SUCCESS;
    x.context = DAT_CONTEXT { as_ptr: cm_h };
    let evd_h = ep::get::<T>(c.ep as DAT_HANDLE).map_or(std::ptr::null_mut(), |ep| ep.conn_evd.load(Ordering::Acquire) as DAT_EVD_HANDLE);
    (evd_h, e)
}

fn post_established<T: Provider>(c: &UdCm<T>, cm_h: DAT_HANDLE, kind: DAT_IB_EXT_TYPE, a: *mut libc::c_void, qpn: u32) {
    let (evd_h, mut e) = conn_event::<T>(c, cm_h, DAT_IB_UD_CONNECTION_EVENT_ESTABLISHED as DAT_EVENT_NUMBER, kind);
    let x = crate::dto::ext_data(&mut e);
    // SAFETY: all-zero is a valid address handle before we fill it.
    let mut remote: DAT_IB_ADDR_HANDLE = unsafe { std::mem::zeroed() };
    remote.ah = a as *mut _;
    remote.qpn = qpn;
    let n = std::mem::size_of_val(&remote.ia_addr).min(std::mem::size_of_val(&c.remote));
    // SAFETY: copying the peer's sockaddr into the 28-byte DAT_SOCK_ADDR6 room.
    unsafe { std::ptr::copy_nonoverlapping(&c.remote as *const _ as *const u8, &mut remote.ia_addr as *mut _ as *mut u8, n) };
    x.__bindgen_anon_1.remote_ah = remote;
    post::<T>(evd_h, e);
}

fn post_failure<T: Provider>(c: &UdCm<T>, cm_h: DAT_HANDLE, number: u32, kind: DAT_IB_EXT_TYPE) {
    let (evd_h, e) = conn_event::<T>(c, cm_h, number as DAT_EVENT_NUMBER, kind);
    post::<T>(evd_h, e);
}

fn post<T: Provider>(evd_h: DAT_EVD_HANDLE, e: DAT_EVENT) {
    match handle::get::<Evd<T>>(evd_h) {
        Ok(evd) => {
            evd.post(evd_h, e);
        }
        Err(_) => log::warn!("UD connection event {:#x} with no connection EVD", e.event_number),
    }
}

/// dat_ib_ud_cm_free: the consumer is done with a resolution's event data.
pub fn cm_free<T: Provider>(ep_h: DAT_EP_HANDLE, cm_h: DAT_HANDLE) -> DAT_RETURN {
    if let Err(e) = ep::get::<T>(ep_h) {
        return e;
    }
    match handle::get::<UdCm<T>>(cm_h) {
        Ok(c) if c.ep == ep_h as usize => {
            destroy::<T>(cm_h);
            DAT_SUCCESS
        }
        _ => invalid_arg(DAT_INVALID_ARG3),
    }
}

/// dat_ib_ud_ah_free: destroys an address handle this EP was given. A null
/// one (the passive side's) is accepted and nothing happens.
pub fn ah_free<T: Provider>(ep_h: DAT_EP_HANDLE, remote: *const DAT_IB_ADDR_HANDLE) -> DAT_RETURN {
    if let Err(e) = ep::get::<T>(ep_h) {
        return e;
    }
    // SAFETY: null-checked consumer pointer.
    let Some(r) = (unsafe { remote.as_ref() }) else { return invalid_arg(DAT_INVALID_ARG3) };
    if r.ah.is_null() {
        return DAT_SUCCESS;
    }
    let found = {
        let mut all = T::state().ahs.lock().unwrap_or_else(|e| e.into_inner());
        all.iter().position(|(e, a)| *e == ep_h as usize && std::ptr::eq(a.raw() as *const u8, r.ah as *const u8)).map(|i| all.swap_remove(i))
    };
    match found {
        Some((_, a)) => {
            drop(a);
            DAT_SUCCESS
        }
        None => invalid_arg(DAT_INVALID_ARG3),
    }
}
