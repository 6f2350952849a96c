//! Connection management: dat_ep_connect / dat_ep_disconnect and the
//! handler the IA's CM thread runs for every rdma_cm event.

use crate::cr::{self, Cr};
use crate::ep::{self, Ep, MAX_CONNECT_PDATA};
use crate::evd::{self, Evd};
use crate::handle;
use crate::psp::{self, Psp};
use crate::rsp::Rsp;
use crate::verbs::cm;
use dat_abi::status::{error, guard, invalid_arg, invalid_state, no_resources};
use dat_abi::*;
use rdma_core_sys as ibv;
use std::sync::Mutex;
use std::sync::atomic::{AtomicPtr, Ordering};

/// IB CM reject reason for "the peer's consumer said no".
const REJ_CONSUMER_DEFINED: i32 = 28;

/// DAPL's rdma_cm provider puts this 4-byte version word before the
/// consumer's private data in a reject, and strips it from one it receives;
/// we do the same so rejects carry the same bytes between the two.
pub const REJECT_HEADER: [u8; 4] = [0x02, 0x00, 0x02, 0x00];

fn timeout_ms(t: DAT_TIMEOUT) -> i32 {
    if t == DAT_TIMEOUT_INFINITE { 2000 } else { (t / 1000).clamp(100, 60_000) as i32 }
}

pub fn sockaddr_len(family: libc::sa_family_t) -> Option<usize> {
    match family as i32 {
        libc::AF_INET => Some(std::mem::size_of::<libc::sockaddr_in>()),
        libc::AF_INET6 => Some(std::mem::size_of::<libc::sockaddr_in6>()),
        _ => None,
    }
}

#[allow(clippy::too_many_arguments)]
fn start_connect(
    h: DAT_EP_HANDLE,
    addr: DAT_IA_ADDRESS_PTR,
    qual: DAT_CONN_QUAL,
    timeout: DAT_TIMEOUT,
    psize: DAT_COUNT,
    pdata: DAT_PVOID,
) -> DAT_RETURN {
    let ep = match ep::get(h) {
        Ok(e) => e,
        Err(e) => return e,
    };
    if addr.is_null() {
        return invalid_arg(DAT_INVALID_ARG2);
    }
    let limit = if ep.is_ud() { crate::ud::MAX_CONNECT_PDATA } else { MAX_CONNECT_PDATA };
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
        return crate::ud::connect(ep, h, addr, qual, timeout_ms(timeout), pd);
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
    let port = psp::port_of(qual);
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
    let id = match cm::create_id(ep.ia.device.channel, h as usize) {
        Ok(id) => id,
        Err(e) => {
            log::warn!("rdma_create_id: {e}");
            ep.state.store(DAT_EP_STATE_UNCONNECTED, Ordering::Release);
            return no_resources(DAT_RESOURCE_TEP);
        }
    };
    ep.cm_id.store(id, Ordering::Release);
    let mut src = *ep.ia.device.addr;
    // SAFETY: src is the IA address (port 0), remote a full sockaddr; id is live.
    let rc = unsafe {
        ibv::rdma_resolve_addr(id, &mut src as *mut _ as *mut libc::sockaddr, &mut remote as *mut _ as *mut libc::sockaddr, ms)
    };
    if rc != 0 {
        let e = std::io::Error::last_os_error();
        log::warn!("rdma_resolve_addr: {e}");
        cm::destroy_id(ep.cm_id.swap(std::ptr::null_mut(), Ordering::AcqRel));
        ep.state.store(DAT_EP_STATE_UNCONNECTED, Ordering::Release);
        return error(DAT_INVALID_ADDRESS, DAT_INVALID_ADDRESS_UNREACHABLE);
    }
    DAT_SUCCESS
}

#[allow(clippy::too_many_arguments)]
pub unsafe extern "C" fn connect(
    h: DAT_EP_HANDLE,
    addr: DAT_IA_ADDRESS_PTR,
    qual: DAT_CONN_QUAL,
    timeout: DAT_TIMEOUT,
    psize: DAT_COUNT,
    pdata: DAT_PVOID,
    _qos: DAT_QOS,
    _flags: DAT_CONNECT_FLAGS,
) -> DAT_RETURN {
    guard("dat_ep_connect", || start_connect(h, addr, qual, timeout, psize, pdata))
}

pub unsafe extern "C" fn dup_connect(
    h: DAT_EP_HANDLE,
    dup: DAT_EP_HANDLE,
    timeout: DAT_TIMEOUT,
    psize: DAT_COUNT,
    pdata: DAT_PVOID,
    _qos: DAT_QOS,
) -> DAT_RETURN {
    guard("dat_ep_dup_connect", || {
        // The EP to connect is checked before the model EP's state.
        if let Err(e) = ep::get(h) {
            return e;
        }
        let other = match ep::get(dup) {
            Ok(e) => e,
            Err(_) => return dat_abi::status::invalid_handle(DAT_INVALID_HANDLE_EP),
        };
        if other.state.load(Ordering::Acquire) != DAT_EP_STATE_CONNECTED {
            return invalid_state(DAT_INVALID_STATE_EP_UNCONNECTED);
        }
        let remote = *other.remote.lock().unwrap_or_else(|e| e.into_inner());
        let qual = other.remote_port.load(Ordering::Acquire) as DAT_CONN_QUAL;
        start_connect(h, &remote as *const _ as DAT_IA_ADDRESS_PTR, qual, timeout, psize, pdata)
    })
}

pub unsafe extern "C" fn disconnect(h: DAT_EP_HANDLE, flags: DAT_CLOSE_FLAGS) -> DAT_RETURN {
    guard("dat_ep_disconnect", || {
        let ep = match ep::get(h) {
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
                let id = ep.cm_id.load(Ordering::Acquire);
                // SAFETY: the connected id; DISCONNECTED arrives on the CM thread.
                if !id.is_null() && unsafe { ibv::rdma_disconnect(id) } != 0 {
                    // Already gone on the wire: finish here.
                    finish_disconnect(ep, h);
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
                    ep.with_qp(|q| {
                        q.to_error();
                        let _ = q.to_reset_and_init(ep.ia.device.port);
                    });
                }
                DAT_SUCCESS
            }
            _ => invalid_state(DAT_INVALID_STATE_EP_UNCONNECTED),
        }
    })
}

fn finish_disconnect(ep: &Ep, h: DAT_EP_HANDLE) {
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
            post_async(ep.ia.async_evd(), DAT_ASYNC_ERROR_EP_BROKEN, h);
        }
    }
}

fn event_pdata(ev: &ibv::rdma_cm_event) -> Vec<u8> {
    // SAFETY: for connection events param.conn is the active member; the
    // private data lives until the event is acked, so it is copied now.
    unsafe {
        let c = &ev.param.conn;
        if c.private_data.is_null() || c.private_data_len == 0 {
            Vec::new()
        } else {
            std::slice::from_raw_parts(c.private_data as *const u8, c.private_data_len as usize).to_vec()
        }
    }
}

/// Held by the CM thread while it works on objects, and by consumer threads
/// while they end one (the object's body is dropped in its slot): a handler
/// never sees an EP, CR, PSP, RSP or UD resolution half torn down. Never
/// held across rdma_destroy_id, which waits on the CM thread.
static CM_BUSY: Mutex<()> = Mutex::new(());

/// Runs `f` (which ends an object the CM thread may be looking at) while
/// no connection event is being handled.
pub fn quiesced<R>(f: impl FnOnce() -> R) -> R {
    let _g = CM_BUSY.lock().unwrap_or_else(|e| e.into_inner());
    f()
}

/// Handles one rdma_cm event on the CM thread. Returns an id to destroy
/// once the event is acked.
pub fn handle_event(ev: &ibv::rdma_cm_event) -> Option<*mut ibv::rdma_cm_id> {
    crate::cno::with_agents_held(|| handle_event_locked(ev))
}

fn handle_event_locked(ev: &ibv::rdma_cm_event) -> Option<*mut ibv::rdma_cm_id> {
    let _g = CM_BUSY.lock().unwrap_or_else(|e| e.into_inner());
    let id = ev.id;
    log::debug!("rdma_cm event {} status {} on id {id:p}", ev.event, ev.status);
    if ev.event == ibv::RDMA_CM_EVENT_CONNECT_REQUEST {
        return connect_request(ev);
    }
    // SAFETY: every id we create carries its owner's handle as context.
    let owner = unsafe { (*id).context } as DAT_HANDLE;
    match handle::kind_of(owner) {
        Some(DAT_HANDLE_TYPE_EP) => ep_event(ev, owner),
        Some(DAT_IB_HANDLE_TYPE_EXT) => crate::ud::cm_event(ev, owner),
        Some(DAT_HANDLE_TYPE_CR) => {
            // The requester gave up before we accepted: the CR stays for the
            // consumer, and accepting it will fail.
            if let Ok(cr) = handle::get::<Cr>(owner) {
                if matches!(ev.event, ibv::RDMA_CM_EVENT_DISCONNECTED | ibv::RDMA_CM_EVENT_CONNECT_ERROR) {
                    return Some(cr.id.swap(std::ptr::null_mut(), Ordering::AcqRel)).filter(|p| !p.is_null());
                }
            }
            None
        }
        _ => {
            log::debug!("rdma_cm event {} for an object that is gone", ev.event);
            None
        }
    }
}

fn ep_event(ev: &ibv::rdma_cm_event, h: DAT_EP_HANDLE) -> Option<*mut ibv::rdma_cm_id> {
    let ep = ep::get(h).ok()?;
    let id = ev.id;
    let ms = ep.timeout_ms.load(Ordering::Acquire) as i32;
    let fail = |number: DAT_EVENT_NUMBER| fail_with(ep, h, number, &event_pdata(ev));
    match ev.event {
        ibv::RDMA_CM_EVENT_ADDR_RESOLVED => {
            // SAFETY: live id with a resolved address.
            if unsafe { ibv::rdma_resolve_route(id, ms) } != 0 {
                return fail(DAT_CONNECTION_EVENT_UNREACHABLE);
            }
            None
        }
        ibv::RDMA_CM_EVENT_ROUTE_RESOLVED => {
            let pdata = ep.connect_pdata.lock().unwrap_or_else(|e| e.into_inner()).clone();
            let (resp, init) = ep.rdma_depths();
            // SAFETY: all-zero conn param, then our fields.
            let mut param: ibv::rdma_conn_param = unsafe { std::mem::zeroed() };
            param.private_data = if pdata.is_empty() { std::ptr::null() } else { pdata.as_ptr() as *const libc::c_void };
            param.private_data_len = pdata.len() as u8;
            param.responder_resources = resp.max(1);
            param.initiator_depth = init.max(1);
            param.retry_count = 7;
            param.rnr_retry_count = 7;
            param.srq = ep.uses_srq() as u8;
            param.qp_num = ep.qp_num()?;
            // SAFETY: live id with a route; pdata outlives the call.
            if unsafe { ibv::rdma_connect(id, &mut param) } != 0 {
                log::warn!("rdma_connect: {}", std::io::Error::last_os_error());
                return fail(DAT_CONNECTION_EVENT_UNREACHABLE);
            }
            None
        }
        ibv::RDMA_CM_EVENT_CONNECT_RESPONSE => {
            let (resp, init) = ep.rdma_depths();
            let moved = ep.with_qp(|q| {
                q.to_state_via(id, ibv::IBV_QPS_RTR, |a| a.max_dest_rd_atomic = resp.max(1))
                    .and_then(|_| q.to_state_via(id, ibv::IBV_QPS_RTS, |a| a.max_rd_atomic = init.max(1)))
            });
            if !matches!(moved, Some(Ok(()))) {
                log::warn!("connect: QP to RTS failed: {moved:?}");
                // SAFETY: tell the peer before giving up.
                unsafe { ibv::rdma_reject(id, std::ptr::null(), 0) };
                return fail(DAT_CONNECTION_EVENT_BROKEN);
            }
            // SAFETY: live id after a connect response.
            unsafe { ibv::rdma_establish(id) };
            ep.record_local_port(id);
            ep.state.store(DAT_EP_STATE_CONNECTED, Ordering::Release);
            ep.post_conn_event(h, DAT_CONNECTION_EVENT_ESTABLISHED, &event_pdata(ev));
            None
        }
        ibv::RDMA_CM_EVENT_ESTABLISHED => {
            ep.record_local_port(id);
            // Only from the accepted state: an EP the consumer disconnected,
            // or an error completion broke, meanwhile stays down.
            let accepted = DAT_EP_STATE_COMPLETION_PENDING;
            if ep.state.compare_exchange(accepted, DAT_EP_STATE_CONNECTED, Ordering::AcqRel, Ordering::Acquire).is_ok() {
                ep.post_conn_event(h, DAT_CONNECTION_EVENT_ESTABLISHED, &event_pdata(ev));
            }
            None
        }
        ibv::RDMA_CM_EVENT_REJECTED => {
            let passive = ep.state.load(Ordering::Acquire) == DAT_EP_STATE_COMPLETION_PENDING;
            fail(if passive {
                DAT_CONNECTION_EVENT_ACCEPT_COMPLETION_ERROR
            } else if ev.status == REJ_CONSUMER_DEFINED {
                // The consumer's data follows DAPL's reject header.
                let pdata = event_pdata(ev);
                let body = pdata.strip_prefix(&REJECT_HEADER[..]).unwrap_or(&pdata).to_vec();
                return fail_with(ep, h, DAT_CONNECTION_EVENT_PEER_REJECTED, &body);
            } else {
                DAT_CONNECTION_EVENT_NON_PEER_REJECTED
            })
        }
        ibv::RDMA_CM_EVENT_ADDR_ERROR | ibv::RDMA_CM_EVENT_ROUTE_ERROR | ibv::RDMA_CM_EVENT_UNREACHABLE => {
            fail(if ev.status == -libc::ETIMEDOUT { DAT_CONNECTION_EVENT_TIMED_OUT } else { DAT_CONNECTION_EVENT_UNREACHABLE })
        }
        ibv::RDMA_CM_EVENT_CONNECT_ERROR => {
            let passive = ep.state.load(Ordering::Acquire) == DAT_EP_STATE_COMPLETION_PENDING;
            fail(if passive { DAT_CONNECTION_EVENT_ACCEPT_COMPLETION_ERROR } else { DAT_CONNECTION_EVENT_BROKEN })
        }
        ibv::RDMA_CM_EVENT_DISCONNECTED => {
            // Answer the peer's disconnect request: without our reply its
            // side waits out the CM timeout (about a minute) before its id
            // can be destroyed.
            // SAFETY: the live id of this connection; a second call is harmless.
            unsafe { ibv::rdma_disconnect(id) };
            finish_disconnect(ep, h);
            None
        }
        ibv::RDMA_CM_EVENT_DEVICE_REMOVAL => {
            post_async(ep.ia.async_evd(), DAT_ASYNC_ERROR_IA_CATASTROPHIC, h);
            fail(DAT_CONNECTION_EVENT_BROKEN)
        }
        _ => None,
    }
}

/// The CM thread's tick: ends active connects still pending past their
/// timeout with DAT_CONNECTION_EVENT_TIMED_OUT. Returns µs to the next one.
pub fn expire_connects(ia_h: usize) -> Option<u64> {
    crate::cno::with_agents_held(|| expire_locked(ia_h))
}

fn expire_locked(ia_h: usize) -> Option<u64> {
    let _g = CM_BUSY.lock().unwrap_or_else(|e| e.into_inner());
    let ia = handle::get::<crate::ia::Ia>(ia_h as DAT_HANDLE).ok()?;
    let now = std::time::Instant::now();
    let pending = |h: usize| ep::get(h as DAT_HANDLE).is_ok_and(|e| e.state.load(Ordering::Acquire) == DAT_EP_STATE_ACTIVE_CONNECTION_PENDING);
    let (due, next) = {
        let mut list = ia.connects.lock().unwrap_or_else(|e| e.into_inner());
        list.retain(|&(h, _)| pending(h));
        let due: Vec<usize> = list.iter().filter(|(_, t)| *t <= now).map(|(h, _)| *h).collect();
        list.retain(|(_, t)| *t > now);
        (due, list.iter().map(|(_, t)| *t - now).min())
    };
    for h in due {
        let Ok(e) = ep::get(h as DAT_HANDLE) else { continue };
        log::debug!("EP {h:#x}: connect timed out");
        if let Some(id) = fail_with(e, h as DAT_HANDLE, DAT_CONNECTION_EVENT_TIMED_OUT, &[]) {
            cm::destroy_id(id);
        }
    }
    next.map(|d| d.as_micros() as u64 + 1)
}

/// Ends a connection attempt with `number`; the spent id is handed back to
/// be destroyed after the event's ack.
fn fail_with(ep: &Ep, h: DAT_EP_HANDLE, number: DAT_EVENT_NUMBER, pdata: &[u8]) -> Option<*mut ibv::rdma_cm_id> {
    ep.with_qp(|q| q.to_error());
    ep.state.store(DAT_EP_STATE_DISCONNECTED, Ordering::Release);
    ep.post_conn_event(h, number, pdata);
    let spent = ep.cm_id.swap(std::ptr::null_mut(), Ordering::AcqRel);
    (!spent.is_null()).then_some(spent)
}

fn post_async(evd_h: DAT_EVD_HANDLE, number: DAT_EVENT_NUMBER, about: DAT_HANDLE) {
    if let Ok(evd) = handle::get::<Evd>(evd_h) {
        let mut e = evd::new_event(number);
        e.event_data.asynch_error_event_data = DAT_ASYNCH_ERROR_EVENT_DATA { dat_handle: about, reason: 0 };
        evd.post(evd_h, e);
    }
}

/// A request on a PSP or RSP becomes a CR on its EVD.
fn connect_request(ev: &ibv::rdma_cm_event) -> Option<*mut ibv::rdma_cm_id> {
    let id = ev.id;
    // SAFETY: listening ids carry their PSP/RSP handle as context.
    let sp = unsafe { (*ev.listen_id).context } as DAT_HANDLE;
    let refuse = || {
        log::debug!("connection request on {sp:p} refused");
        // SAFETY: a request id we will not use.
        unsafe { ibv::rdma_reject(id, std::ptr::null(), 0) };
        Some(id)
    };
    let ud = cm::is_ud(id);
    let (ia, evd_h, qual, ep_h) = match handle::kind_of(sp) {
        Some(DAT_HANDLE_TYPE_PSP) => {
            let Ok(p) = handle::get::<Psp>(sp) else { return refuse() };
            if ud && p.flags == DAT_PSP_PROVIDER_FLAG {
                // The EP it would make is RC; a UD peer needs a UD EP.
                return refuse();
            }
            let ep_h = if p.flags == DAT_PSP_PROVIDER_FLAG {
                // The provider makes the EP; the consumer configures it before accepting.
                match ep::create_ep(p.ia_handle as DAT_IA_HANDLE, std::ptr::null_mut(), std::ptr::null_mut(), std::ptr::null_mut(),
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
            let Ok(r) = handle::get::<Rsp>(sp) else { return refuse() };
            if r.used.swap(true, Ordering::AcqRel) {
                return refuse();
            }
            (r.ia, r.evd, r.conn_qual, r.ep)
        }
        _ => return refuse(),
    };
    // SAFETY: the request id's peer address, copied by family length.
    let mut remote: libc::sockaddr_storage = unsafe { std::mem::zeroed() };
    // SAFETY: rdma_get_peer_addr returns a pointer into the live id.
    let peer = unsafe { ibv::rdma_get_peer_addr(id) } as *const libc::sockaddr_storage;
    if !peer.is_null() {
        // SAFETY: reading a sockaddr of the length its family implies.
        unsafe {
            if let Some(len) = sockaddr_len((*peer).ss_family) {
                std::ptr::copy_nonoverlapping(peer as *const u8, &mut remote as *mut _ as *mut u8, len);
            }
        }
    }
    // SAFETY: sin_port/sin6_port share an offset.
    let remote_port = u16::from_be(unsafe { (*(&remote as *const _ as *const libc::sockaddr_in)).sin_port });
    let cr_h = cr::insert(Cr {
        ia,
        id: AtomicPtr::new(id),
        pdata: event_pdata(ev),
        remote: Box::new(remote),
        remote_port,
        ep: ep_h,
    });
    // SAFETY: the id's events now name the CR.
    unsafe { (*id).context = cr_h };
    let Ok(evd) = handle::get::<Evd>(evd_h as DAT_HANDLE) else {
        return refuse_cr(cr_h);
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
        return refuse_cr(cr_h);
    }
    None
}

/// Drops a CR made for the current event; its id is rejected now and
/// destroyed after the ack (destroying it here would wait on ourselves).
fn refuse_cr(cr_h: DAT_CR_HANDLE) -> Option<*mut ibv::rdma_cm_id> {
    let id = cr::discard(cr_h)?;
    // SAFETY: the request id of the event being handled.
    unsafe { ibv::rdma_reject(id, std::ptr::null(), 0) };
    Some(id)
}
