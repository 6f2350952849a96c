//! Connection management: dat_ep_connect / dat_ep_disconnect and the
//! handler the IA's event thread runs for every connection-manager event.

use crate::state::Provider;
use crate::backend::{CmEvent, CmEventKind, ConnIdOps, ConnParams, DeviceOps, IdSlot, QpOps};
use crate::quiesce;
use crate::util::sockaddr_len;
use crate::cr::{self, Cr};
use crate::ep::{self, Ep};
use crate::evd::{self, Evd};
use crate::handle;
use crate::psp::Psp;
use crate::rsp::Rsp;
use dat_abi::status::{error, guard, invalid_arg, invalid_state, no_resources};
use dat_abi::*;
use std::sync::atomic::Ordering;

fn timeout_ms(t: DAT_TIMEOUT) -> i32 {
    if t == DAT_TIMEOUT_INFINITE { 2000 } else { (t / 1000).clamp(100, 60_000) as i32 }
}

#[allow(clippy::too_many_arguments)]
fn start_connect<T: Provider>(
    h: DAT_EP_HANDLE,
    addr: DAT_IA_ADDRESS_PTR,
    qual: DAT_CONN_QUAL,
    timeout: DAT_TIMEOUT,
    psize: DAT_COUNT,
    pdata: DAT_PVOID,
) -> DAT_RETURN {
    let ep = match ep::get::<T>(h) {
        Ok(e) => e,
        Err(e) => return e,
    };
    if addr.is_null() {
        return invalid_arg(DAT_INVALID_ARG2);
    }
    let limit = if ep.is_ud() { T::MAX_UD_CONNECT_PDATA } else { T::MAX_CONNECT_PDATA };
    if psize < 0 || psize as usize > limit {
        return invalid_arg(DAT_INVALID_ARG5);
    }
    if psize > 0 && pdata.is_null() {
        return invalid_arg(DAT_INVALID_ARG6);
    }
    if ep.qp_num().is_none() {
        return invalid_state(DAT_INVALID_STATE_EP_UNCONFIGURED);
    }
    if ep.is_ud() {
        // SAFETY: the consumer gave psize bytes at pdata (checked above).
        let pd = if psize > 0 { unsafe { std::slice::from_raw_parts(pdata as *const u8, psize as usize) } } else { &[] };
        return crate::ud::connect::<T>(ep, h, addr, qual, timeout_ms(timeout), pd);
    }
    if ep.state.compare_exchange(DAT_EP_STATE_UNCONNECTED, DAT_EP_STATE_ACTIVE_CONNECTION_PENDING, Ordering::AcqRel, Ordering::Acquire).is_err() {
        return invalid_state(DAT_INVALID_STATE_EP_CONNECTED);
    }
    // SAFETY: the consumer's sockaddr; its family says how long it is.
    let mut remote: libc::sockaddr_storage = unsafe { std::mem::zeroed() };
    // SAFETY: only the family is read here, then as many bytes as it implies.
    let Some(len) = sockaddr_len(unsafe { (*addr).sa_family }) else {
        ep.state.store(DAT_EP_STATE_UNCONNECTED, Ordering::Release);
        return error(DAT_INVALID_ADDRESS, DAT_INVALID_ADDRESS_MALFORMED);
    };
    // SAFETY: copying `len` bytes the family guarantees exist.
    unsafe { std::ptr::copy_nonoverlapping(addr as *const u8, &mut remote as *mut _ as *mut u8, len) };
    let port = T::port_of(qual);
    // SAFETY: sin_port and sin6_port share an offset.
    unsafe { (*(&mut remote as *mut _ as *mut libc::sockaddr_in)).sin_port = port.to_be() };
    *ep.remote.lock().unwrap_or_else(|e| e.into_inner()) = remote;
    ep.remote_port.store(port as u32, Ordering::Release);
    *ep.connect_pdata.lock().unwrap_or_else(|e| e.into_inner()) = if psize > 0 {
        // SAFETY: the consumer gave psize bytes at pdata.
        unsafe { std::slice::from_raw_parts(pdata as *const u8, psize as usize) }.to_vec()
    } else {
        Vec::new()
    };
    let ms = timeout_ms(timeout);
    ep.timeout_ms.store(ms as u32, Ordering::Release);
    if timeout != DAT_TIMEOUT_INFINITE {
        let due = std::time::Instant::now() + std::time::Duration::from_micros(timeout as u64);
        ep.ia.connects.lock().unwrap_or_else(|e| e.into_inner()).push((h as usize, due));
    }
    let id = match ep.ia.device.create_conn_id(h as usize, false) {
        Ok(id) => id,
        Err(e) => {
            log::warn!("creating a connection id: {e}");
            ep.state.store(DAT_EP_STATE_UNCONNECTED, Ordering::Release);
            return no_resources(DAT_RESOURCE_TEP);
        }
    };
    ep.cm_id.set(Some(id));
    // From the IA address (port 0) to the peer's full sockaddr.
    if let Err(e) = id.resolve_addr(ep.ia.device.address(), &remote, ms) {
        log::warn!("resolving the peer's address: {e}");
        if let Some(id) = ep.cm_id.take() {
            id.destroy();
        }
        ep.state.store(DAT_EP_STATE_UNCONNECTED, Ordering::Release);
        return error(DAT_INVALID_ADDRESS, DAT_INVALID_ADDRESS_UNREACHABLE);
    }
    DAT_SUCCESS
}

#[allow(clippy::too_many_arguments)]
pub unsafe extern "C" fn connect<T: Provider>(
    h: DAT_EP_HANDLE,
    addr: DAT_IA_ADDRESS_PTR,
    qual: DAT_CONN_QUAL,
    timeout: DAT_TIMEOUT,
    psize: DAT_COUNT,
    pdata: DAT_PVOID,
    _qos: DAT_QOS,
    _flags: DAT_CONNECT_FLAGS,
) -> DAT_RETURN {
    guard("dat_ep_connect", || counted::<T>(h, DCNT_EP_CONNECT, start_connect::<T>(h, addr, qual, timeout, psize, pdata)))
}

/// Moves EP counter `i` when the call it belongs to succeeded.
fn counted<T: Provider>(h: DAT_EP_HANDLE, i: u32, r: DAT_RETURN) -> DAT_RETURN {
    if r == DAT_SUCCESS && let Ok(ep) = ep::get::<T>(h) {
        ep.counters.add(i, 1);
    }
    r
}

pub unsafe extern "C" fn dup_connect<T: Provider>(
    h: DAT_EP_HANDLE,
    dup: DAT_EP_HANDLE,
    timeout: DAT_TIMEOUT,
    psize: DAT_COUNT,
    pdata: DAT_PVOID,
    _qos: DAT_QOS,
) -> DAT_RETURN {
    guard("dat_ep_dup_connect", || {
        // The EP to connect is checked before the model EP's state.
        if let Err(e) = ep::get::<T>(h) {
            return e;
        }
        let other = match ep::get::<T>(dup) {
            Ok(e) => e,
            Err(_) => return dat_abi::status::invalid_handle(DAT_INVALID_HANDLE_EP),
        };
        if other.state.load(Ordering::Acquire) != DAT_EP_STATE_CONNECTED {
            return invalid_state(DAT_INVALID_STATE_EP_UNCONNECTED);
        }
        let remote = *other.remote.lock().unwrap_or_else(|e| e.into_inner());
        let qual = other.remote_port.load(Ordering::Acquire) as DAT_CONN_QUAL;
        counted::<T>(h, DCNT_EP_CONNECT, start_connect::<T>(h, &remote as *const _ as DAT_IA_ADDRESS_PTR, qual, timeout, psize, pdata))
    })
}

pub unsafe extern "C" fn disconnect<T: Provider>(h: DAT_EP_HANDLE, flags: DAT_CLOSE_FLAGS) -> DAT_RETURN {
    let r = guard("dat_ep_disconnect", || {
        let ep = match ep::get::<T>(h) {
            Ok(e) => e,
            Err(e) => return e,
        };
        if flags != DAT_CLOSE_ABRUPT_FLAG && flags != DAT_CLOSE_GRACEFUL_FLAG {
            return invalid_arg(DAT_INVALID_ARG2);
        }
        match ep.state.load(Ordering::Acquire) {
            DAT_EP_STATE_CONNECTED => {
                ep.state.store(DAT_EP_STATE_DISCONNECT_PENDING, Ordering::Release);
                if flags == DAT_CLOSE_ABRUPT_FLAG {
                    ep.with_qp(|q| q.to_error());
                }
                // DISCONNECTED arrives on the event thread.
                if ep.cm_id.get().is_some_and(|id| id.disconnect().is_err()) {
                    // Already gone on the wire: finish here.
                    finish_disconnect::<T>(ep, h);
                }
                DAT_SUCCESS
            }
            DAT_EP_STATE_ACTIVE_CONNECTION_PENDING | DAT_EP_STATE_COMPLETION_PENDING => {
                ep.break_connection();
                ep.state.store(DAT_EP_STATE_DISCONNECTED, Ordering::Release);
                ep.post_conn_event(h, DAT_CONNECTION_EVENT_DISCONNECTED, &[]);
                DAT_SUCCESS
            }
            DAT_EP_STATE_DISCONNECTED | DAT_EP_STATE_DISCONNECT_PENDING => DAT_SUCCESS,
            DAT_EP_STATE_UNCONNECTED | DAT_EP_STATE_UNCONFIGURED_UNCONNECTED => {
                // Nothing to tear down; an abrupt disconnect still flushes
                // posted receives, and the EP stays usable.
                if flags == DAT_CLOSE_ABRUPT_FLAG {
                    let _ = ep.flush_and_reset(h);
                }
                DAT_SUCCESS
            }
            _ => invalid_state(DAT_INVALID_STATE_EP_UNCONNECTED),
        }
    });
    guard("dat_ep_disconnect", || counted::<T>(h, DCNT_EP_DISCONNECT, r))
}

fn finish_disconnect<T: Provider>(ep: &Ep<T>, h: DAT_EP_HANDLE) {
    ep.with_qp(|q| q.to_error());
    let prev = ep.state.swap(DAT_EP_STATE_DISCONNECTED, Ordering::AcqRel);
    if prev != DAT_EP_STATE_DISCONNECTED {
        ep.post_conn_event(h, DAT_CONNECTION_EVENT_DISCONNECTED, &[]);
        if ep.uses_srq() {
            // DAPL tells an SRQ consumer that the EP's QP will take no more
            // SRQ buffers with an async EP_BROKEN, which its providers raise on
            // the verbs "last WQE reached" event. Soft-RoCE never raises that
            // event (so the reference provider hangs in dtestsrq there); once
            // the QP is in the error state nothing more can land, so we say
            // so at that point on every device.
            post_async::<T>(ep.ia.async_evd(), DAT_ASYNC_ERROR_EP_BROKEN, h);
        }
    }
}

/// Handles one connection event on the CM thread. Returns an id to destroy
/// once the event is acked; `done` is called before the CNO agents run.
pub fn handle_event<T: Provider>(ev: &CmEvent<T>, done: &mut dyn FnMut()) -> Option<T::ConnId> {
    quiesce::with_agents_held(|| {
        let spent = quiesce::cm_busy::<T, _>(|| handle_event_locked::<T>(ev));
        done();
        spent
    })
}

fn handle_event_locked<T: Provider>(ev: &CmEvent<T>) -> Option<T::ConnId> {
    log::debug!("connection event {:?} for {:#x}", ev.kind, ev.context);
    if ev.kind == CmEventKind::ConnectRequest {
        return connect_request::<T>(ev);
    }
    // Every id we create carries its owner's handle as context.
    let owner = ev.context as DAT_HANDLE;
    match handle::kind_of::<T>(owner) {
        Some(DAT_HANDLE_TYPE_EP) => ep_event::<T>(ev, owner),
        Some(DAT_IB_HANDLE_TYPE_EXT) => crate::ud::cm_event::<T>(ev, owner),
        Some(DAT_HANDLE_TYPE_CR) => {
            // The requester gave up before we accepted: the CR stays for the
            // consumer, and accepting it will fail.
            if let Ok(cr) = handle::get::<Cr<T>>(owner) {
                if matches!(ev.kind, CmEventKind::Disconnected | CmEventKind::ConnectError | CmEventKind::Rejected { .. }) {
                    return cr.id.take();
                }
            }
            None
        }
        _ => {
            log::debug!("connection event {:?} for an object that is gone", ev.kind);
            None
        }
    }
}

fn ep_event<T: Provider>(ev: &CmEvent<T>, h: DAT_EP_HANDLE) -> Option<T::ConnId> {
    let ep = ep::get::<T>(h).ok()?;
    let id = ev.id;
    let ms = ep.timeout_ms.load(Ordering::Acquire) as i32;
    let fail = |number: DAT_EVENT_NUMBER| fail_with::<T>(ep, h, number, ev.pdata);
    match ev.kind {
        CmEventKind::AddrResolved => {
            if id.resolve_route(ms).is_err() {
                return fail(DAT_CONNECTION_EVENT_UNREACHABLE);
            }
            None
        }
        CmEventKind::RouteResolved => {
            let pdata = ep.connect_pdata.lock().unwrap_or_else(|e| e.into_inner()).clone();
            let (resp, init) = ep.read_depths();
            let param = ConnParams {
                pdata: &pdata,
                responder_resources: resp.max(1),
                initiator_depth: init.max(1),
                srq: ep.uses_srq(),
                qp_num: ep.qp_num()?,
            };
            if let Err(e) = id.connect(&param) {
                log::warn!("connect: {e}");
                return fail(DAT_CONNECTION_EVENT_UNREACHABLE);
            }
            None
        }
        CmEventKind::ConnectResponse => {
            let (resp, init) = ep.read_depths();
            let moved = ep.with_qp(|q| q.connect_via(&id, resp, init));
            if !matches!(moved, Some(Ok(()))) {
                log::warn!("connect: QP to RTS failed: {moved:?}");
                // Tell the peer before giving up.
                id.reject(None);
                return fail(DAT_CONNECTION_EVENT_BROKEN);
            }
            id.establish();
            ep.record_local_port(&id);
            ep.state.store(DAT_EP_STATE_CONNECTED, Ordering::Release);
            ep.ia.counters.add(DCNT_IA_CM_ACTIVE_EST, 1);
            ep.post_conn_event(h, DAT_CONNECTION_EVENT_ESTABLISHED, ev.pdata);
            None
        }
        CmEventKind::Established => {
            ep.record_local_port(&id);
            // Only from the accepted state: an EP the consumer disconnected,
            // or an error completion broke, meanwhile stays down.
            let accepted = DAT_EP_STATE_COMPLETION_PENDING;
            match ep.state.compare_exchange(accepted, DAT_EP_STATE_CONNECTED, Ordering::AcqRel, Ordering::Acquire) {
                Ok(_) => {
                    ep.ia.counters.add(DCNT_IA_CM_PASSIVE_EST, 1);
                    ep.post_conn_event(h, DAT_CONNECTION_EVENT_ESTABLISHED, ev.pdata);
                }
                Err(now) => log::debug!("EP {h:p}: passive ESTABLISHED not reported, the EP is in state {now}"),
            }
            None
        }
        CmEventKind::Rejected { by_consumer } => {
            let passive = ep.state.load(Ordering::Acquire) == DAT_EP_STATE_COMPLETION_PENDING;
            // A consumer's reject carries its reason as the private data.
            fail(if passive {
                DAT_CONNECTION_EVENT_ACCEPT_COMPLETION_ERROR
            } else if by_consumer {
                DAT_CONNECTION_EVENT_PEER_REJECTED
            } else {
                DAT_CONNECTION_EVENT_NON_PEER_REJECTED
            })
        }
        CmEventKind::Unreachable { timed_out } => {
            fail(if timed_out { DAT_CONNECTION_EVENT_TIMED_OUT } else { DAT_CONNECTION_EVENT_UNREACHABLE })
        }
        CmEventKind::ConnectError => {
            let passive = ep.state.load(Ordering::Acquire) == DAT_EP_STATE_COMPLETION_PENDING;
            fail(if passive { DAT_CONNECTION_EVENT_ACCEPT_COMPLETION_ERROR } else { DAT_CONNECTION_EVENT_BROKEN })
        }
        CmEventKind::Disconnected => {
            // Answer the peer's disconnect request: without our reply its
            // side waits out the CM timeout (about a minute) before its id
            // can be destroyed. A second disconnect is harmless.
            let _ = id.disconnect();
            finish_disconnect::<T>(ep, h);
            None
        }
        CmEventKind::DeviceRemoval => {
            post_async::<T>(ep.ia.async_evd(), DAT_ASYNC_ERROR_IA_CATASTROPHIC, h);
            fail(DAT_CONNECTION_EVENT_BROKEN)
        }
        _ => None,
    }
}

/// The CM thread's tick: ends active connects still pending past their
/// timeout with DAT_CONNECTION_EVENT_TIMED_OUT. Returns µs to the next one.
pub fn expire_connects<T: Provider>(ia_h: usize) -> Option<u64> {
    quiesce::cm_busy::<T, _>(|| expire_locked::<T>(ia_h))
}

fn expire_locked<T: Provider>(ia_h: usize) -> Option<u64> {
    let ia = handle::get::<crate::ia::Ia<T>>(ia_h as DAT_HANDLE).ok()?;
    let now = std::time::Instant::now();
    let pending = |h: usize| ep::get::<T>(h as DAT_HANDLE).is_ok_and(|e| e.state.load(Ordering::Acquire) == DAT_EP_STATE_ACTIVE_CONNECTION_PENDING);
    let (due, next) = {
        let mut list = ia.connects.lock().unwrap_or_else(|e| e.into_inner());
        list.retain(|&(h, _)| pending(h));
        let due: Vec<usize> = list.iter().filter(|(_, t)| *t <= now).map(|(h, _)| *h).collect();
        list.retain(|(_, t)| *t > now);
        (due, list.iter().map(|(_, t)| *t - now).min())
    };
    for h in due {
        let Ok(e) = ep::get::<T>(h as DAT_HANDLE) else { continue };
        log::debug!("EP {h:#x}: connect timed out");
        if let Some(id) = fail_with::<T>(e, h as DAT_HANDLE, DAT_CONNECTION_EVENT_TIMED_OUT, &[]) {
            id.destroy();
        }
    }
    next.map(|d| d.as_micros() as u64 + 1)
}

/// Ends a connection attempt with `number`; the spent id is handed back to
/// be destroyed after the event's ack.
fn fail_with<T: Provider>(ep: &Ep<T>, h: DAT_EP_HANDLE, number: DAT_EVENT_NUMBER, pdata: &[u8]) -> Option<T::ConnId> {
    ep.with_qp(|q| q.to_error());
    // Taken before the event is out: a consumer that sees it may reset the
    // EP and accept on it at once (MVAPICH2 does, after a PEER_REJECTED),
    // and a take after that would end the new connection instead.
    let id = ep.cm_id.take();
    ep.state.store(DAT_EP_STATE_DISCONNECTED, Ordering::Release);
    ep.post_conn_event(h, number, pdata);
    id
}

fn post_async<T: Provider>(evd_h: DAT_EVD_HANDLE, number: DAT_EVENT_NUMBER, about: DAT_HANDLE) {
    if let Ok(evd) = handle::get::<Evd<T>>(evd_h) {
        let mut e = evd::new_event(number);
        e.event_data.asynch_error_event_data = DAT_ASYNCH_ERROR_EVENT_DATA { dat_handle: about, reason: 0 };
        evd.post(evd_h, e);
    }
}

/// A request on a PSP or RSP becomes a CR on its EVD.
fn connect_request<T: Provider>(ev: &CmEvent<T>) -> Option<T::ConnId> {
    let id = ev.id;
    // Listening ids carry their PSP/RSP handle as context.
    let sp = ev.context as DAT_HANDLE;
    let refuse = || {
        log::debug!("connection request on {sp:p} refused");
        id.reject(None);
        Some(id)
    };
    let ud = id.is_datagram();
    let (ia, evd_h, qual, ep_h) = match handle::kind_of::<T>(sp) {
        Some(DAT_HANDLE_TYPE_PSP) => {
            let Ok(p) = handle::get::<Psp<T>>(sp) else { return refuse() };
            if ud && p.flags == DAT_PSP_PROVIDER_FLAG {
                // The EP it would make is RC; a UD peer needs a UD EP.
                return refuse();
            }
            let ep_h = if p.flags == DAT_PSP_PROVIDER_FLAG {
                // The provider makes the EP; the consumer configures it before accepting.
                match ep::create_ep::<T>(p.ia_handle as DAT_IA_HANDLE, std::ptr::null_mut(), std::ptr::null_mut(), std::ptr::null_mut(),
                    std::ptr::null_mut(), std::ptr::null_mut(), std::ptr::null()) {
                    Ok(h) => h as usize,
                    Err(_) => return refuse(),
                }
            } else {
                0
            };
            (p.ia, p.evd, p.conn_qual, ep_h)
        }
        Some(DAT_HANDLE_TYPE_RSP) => {
            let Ok(r) = handle::get::<Rsp<T>>(sp) else { return refuse() };
            if r.used.swap(true, Ordering::AcqRel) {
                return refuse();
            }
            (r.ia, r.evd, r.conn_qual, r.ep)
        }
        _ => return refuse(),
    };
    let remote = id.peer_address();
    // SAFETY: sin_port/sin6_port share an offset in a sockaddr_storage.
    let remote_port = u16::from_be(unsafe { (*(&remote as *const _ as *const libc::sockaddr_in)).sin_port });
    let cr_h = cr::insert::<T>(Cr {
        ia,
        id: IdSlot::new(Some(id)),
        pdata: ev.pdata.to_vec(),
        remote: Box::new(remote),
        remote_port,
        ep: ep_h,
    });
    // The id's events now name the CR.
    id.set_context(cr_h as usize);
    let Ok(evd) = handle::get::<Evd<T>>(evd_h as DAT_HANDLE) else {
        return refuse_cr::<T>(cr_h);
    };
    let number = if ud { DAT_IB_UD_CONNECTION_REQUEST_EVENT as DAT_EVENT_NUMBER } else { DAT_CONNECTION_REQUEST_EVENT };
    let mut e = evd::new_event(number);
    e.event_data.cr_arrival_event_data = DAT_CR_ARRIVAL_EVENT_DATA {
        sp_handle: DAT_SP_HANDLE { psp_handle: sp },
        local_ia_address_ptr: ia.device.ia_address(),
        conn_qual: qual,
        cr_handle: cr_h,
        truncate_flag: DAT_FALSE as _,
    };
    if !evd.post(evd_h as DAT_HANDLE, e) {
        return refuse_cr::<T>(cr_h);
    }
    None
}

/// Drops a CR made for the current event; its id is rejected now and
/// destroyed after the ack (destroying it here would wait on ourselves).
fn refuse_cr<T: Provider>(cr_h: DAT_CR_HANDLE) -> Option<T::ConnId> {
    let id = cr::discard::<T>(cr_h)?;
    id.reject(None);
    Some(id)
}
