//! Endpoints: an RC queue pair plus its connection state, or a UD queue
//! pair (IB extension) that reaches its peers through address handles.
//!
//! The post calls are the fast path: a handle check, a slot claimed from the
//! EP's ring, the SGEs built on the stack and one backend post. No lock, no
//! allocation, no syscall (rxe and real HCAs post from user space).

use crate::state::{Provider, Upcalls};
use crate::dto::Ring;
use crate::evd::{self, Evd};
use crate::handle::{self, Object};
use crate::ia::Ia;
use crate::pz::Pz;
use crate::backend::{Completion, CompletionKind, ConnIdOps, DeviceOps, IdSlot, QpCaps, QpOps, SendOp, SendRequest};
use crate::counters;
use crate::sge::{MAX_IOV, SgeList};
use dat_abi::status::{error, guard, invalid_arg, invalid_handle, invalid_state, no_resources};
use dat_abi::*;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicU32, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

/// How long a reset waits for the device to flush the EP's receives.
const FLUSH_WAIT: Duration = Duration::from_secs(1);

pub struct Ep<T: Provider> {
    pub ia: &'static Ia<T>,
    ia_handle: usize,
    pz: AtomicUsize,
    recv_evd: AtomicUsize,
    req_evd: AtomicUsize,
    pub conn_evd: AtomicUsize,
    srq: usize,
    attr: Mutex<DAT_EP_ATTR>,
    pub state: AtomicU32,
    /// The live QP for posting (null while unconfigured); `qp` owns it.
    qp_ptr: AtomicPtr<T::Qp>,
    qp: Mutex<Option<Box<T::Qp>>>,
    send_ring: Mutex<Option<Ring>>,
    recv_ring: Mutex<Option<Ring>>,
    /// Raw pointers to the rings for the post path, valid while `qp_ptr` is.
    send_ring_ptr: AtomicPtr<Ring>,
    recv_ring_ptr: AtomicPtr<Ring>,
    pub cm_id: IdSlot<T>,
    pub remote: Mutex<libc::sockaddr_storage>,
    pub remote_port: AtomicU32,
    local_port: AtomicU32,
    /// Private data to send with the connect once the route is resolved.
    pub connect_pdata: Mutex<Vec<u8>>,
    /// The peer's private data from the last connection event; the event
    /// points into it until the next one.
    pub peer_pdata: Mutex<Vec<u8>>,
    pub timeout_ms: AtomicU32,
    /// A datagram EP (DAT_IB_SERVICE_TYPE_UD): never connected, always ready.
    pub ud: AtomicBool,
    pub counters: crate::counters::Counters<{ crate::counters::EP_COUNT }>,
}

// The attributes carry the consumer's provider-specific pointers, handed
// back only; all shared state is behind atomics or locks.
unsafe impl<T: Provider> Send for Ep<T> {}
unsafe impl<T: Provider> Sync for Ep<T> {}

pub const RANK: u8 = 8;


impl<T: Provider> Object for Ep<T> {
    type P = T;
    const TYPE: DAT_HANDLE_TYPE = DAT_HANDLE_TYPE_EP;
    const INVALID: u32 = DAT_INVALID_HANDLE_EP;
}

pub fn get<T: Provider>(h: DAT_EP_HANDLE) -> Result<&'static Ep<T>, DAT_RETURN> {
    handle::get::<Ep<T>>(h)
}

fn default_attr<T: Provider>(ia: &Ia<T>) -> DAT_EP_ATTR {
    let d = ia.device.limits();
    DAT_EP_ATTR {
        service_type: DAT_SERVICE_TYPE_RC,
        max_message_size: d.max_msg_size,
        max_rdma_size: d.max_msg_size,
        qos: DAT_QOS_BEST_EFFORT,
        recv_completion_flags: DAT_COMPLETION_DEFAULT_FLAG,
        request_completion_flags: DAT_COMPLETION_DEFAULT_FLAG,
        max_recv_dtos: 64.min(d.max_qp_wr),
        max_request_dtos: 64.min(d.max_qp_wr),
        max_recv_iov: 4.min(d.max_sge),
        max_request_iov: 4.min(d.max_sge),
        max_rdma_read_in: 4.min(d.max_qp_rd_atom),
        max_rdma_read_out: 4.min(d.max_qp_init_rd_atom),
        srq_soft_hw: 0,
        max_rdma_read_iov: 4.min(d.max_sge_rd.max(1)),
        max_rdma_write_iov: 4.min(d.max_sge),
        ep_transport_specific_count: 0,
        ep_transport_specific: std::ptr::null_mut(),
        ep_provider_specific_count: 0,
        ep_provider_specific: std::ptr::null_mut(),
    }
}

/// Checks requested EP attributes against the device; minor = the argument.
fn check_attr<T: Provider>(ia: &Ia<T>, a: &DAT_EP_ATTR, minor: u32) -> Result<(), DAT_RETURN> {
    let d = ia.device.limits();
    // A datagram must fit in one packet of the port's MTU.
    let mtu = u64::from(d.mtu);
    let service = a.service_type == DAT_SERVICE_TYPE_RC
        || (a.service_type == DAT_IB_SERVICE_TYPE_UD && u64::from(a.max_message_size) <= mtu);
    let ok = service
        && (0..=d.max_qp_wr).contains(&a.max_recv_dtos)
        && (0..=d.max_qp_wr).contains(&a.max_request_dtos)
        && (0..=d.max_sge.min(MAX_IOV as i32)).contains(&a.max_recv_iov)
        && (0..=d.max_sge.min(MAX_IOV as i32)).contains(&a.max_request_iov)
        && a.max_rdma_read_in <= d.max_qp_rd_atom.max(0)
        && a.max_rdma_read_out <= d.max_qp_init_rd_atom.max(0)
        && a.max_rdma_read_in >= 0
        && a.max_rdma_read_out >= 0;
    if ok { Ok(()) } else { Err(invalid_arg(minor)) }
}

impl<T: Provider> Ep<T> {
    /// Creates the QP once a PZ and the DTO EVDs are known.
    fn configure(&self, h: DAT_EP_HANDLE) -> Result<(), DAT_RETURN> {
        let pz_h = self.pz.load(Ordering::Acquire);
        let recv = self.recv_evd.load(Ordering::Acquire);
        let req = self.req_evd.load(Ordering::Acquire);
        if pz_h == 0 || (recv == 0 && req == 0) {
            return Ok(());
        }
        let pz = handle::get::<Pz<T>>(pz_h as DAT_HANDLE).map_err(|_| invalid_handle(DAT_INVALID_HANDLE_PZ))?;
        let cq_of = |e: usize| handle::get::<Evd<T>>(e as DAT_HANDLE).ok().and_then(|e| e.cq.as_ref());
        let recv_cq = cq_of(recv).or(cq_of(req)).ok_or(invalid_handle(DAT_INVALID_HANDLE_EVD_RECV))?;
        let send_cq = cq_of(req).or(cq_of(recv)).ok_or(invalid_handle(DAT_INVALID_HANDLE_EVD_REQUEST))?;
        let attr = *self.attr.lock().unwrap_or_else(|e| e.into_inner());
        let caps = QpCaps {
            send_wr: attr.max_request_dtos.max(1) as u32,
            recv_wr: attr.max_recv_dtos.max(1) as u32,
            send_sge: attr.max_request_iov.max(attr.max_rdma_write_iov).max(attr.max_rdma_read_iov).max(1) as u32,
            recv_sge: attr.max_recv_iov.max(1) as u32,
            datagram: attr.service_type == DAT_IB_SERVICE_TYPE_UD,
        };
        let ud = caps.datagram;
        if ud && self.srq != 0 {
            return Err(invalid_arg(DAT_INVALID_ARG6));
        }
        let srq = if self.srq == 0 {
            None
        } else {
            Some(&crate::srq::get::<T>(self.srq as DAT_HANDLE).map_err(|_| invalid_handle(DAT_INVALID_HANDLE_SRQ))?.srq)
        };
        let qp = self.ia.device.create_qp(&pz.pd, send_cq, recv_cq, srq, &caps, h).map_err(|e| {
            log::warn!("creating a QP: {e}");
            no_resources(DAT_RESOURCE_TEP)
        })?;
        qp.prepare().map_err(|e| {
            log::warn!("QP to {}: {e}", if ud { "RTS (UD)" } else { "INIT" });
            no_resources(DAT_RESOURCE_TEP)
        })?;
        let qp = Box::new(qp);
        self.ud.store(ud, Ordering::Release);
        let send = Ring::new(caps.send_wr);
        let recvr = Ring::new(caps.recv_wr);
        let mut sr = self.send_ring.lock().unwrap_or_else(|e| e.into_inner());
        let mut rr = self.recv_ring.lock().unwrap_or_else(|e| e.into_inner());
        *sr = Some(send);
        *rr = Some(recvr);
        self.send_ring_ptr.store(sr.as_ref().unwrap() as *const Ring as *mut Ring, Ordering::Release);
        self.recv_ring_ptr.store(rr.as_ref().unwrap() as *const Ring as *mut Ring, Ordering::Release);
        self.qp_ptr.store(&*qp as *const T::Qp as *mut T::Qp, Ordering::Release);
        if self.srq != 0 {
            crate::dto::map_qp::<T>(qp.num(), h as usize);
        }
        *self.qp.lock().unwrap_or_else(|e| e.into_inner()) = Some(qp);
        self.state.store(DAT_EP_STATE_UNCONNECTED, Ordering::Release);
        log::debug!("EP {h:p} configured (QP {})", self.qp_num().unwrap_or(0));
        Ok(())
    }

    /// Notes the port of the connection's local end, for dat_ep_query.
    pub fn record_local_port(&self, id: &T::ConnId) {
        let port = id.local_port();
        self.local_port.store(port as u32, Ordering::Release);
    }

    pub fn is_ud(&self) -> bool {
        self.ud.load(Ordering::Acquire)
    }

    /// The EP's protection zone, for address handles.
    pub fn pz(&self) -> Option<&'static Pz<T>> {
        handle::get::<Pz<T>>(self.pz.load(Ordering::Acquire) as DAT_HANDLE).ok()
    }

    pub fn uses_srq(&self) -> bool {
        self.srq != 0
    }

    pub fn qp_num(&self) -> Option<u32> {
        self.qp.lock().unwrap_or_else(|e| e.into_inner()).as_deref().map(|q| q.num())
    }

    pub fn with_qp<R>(&self, f: impl FnOnce(&T::Qp) -> R) -> Option<R> {
        self.qp.lock().unwrap_or_else(|e| e.into_inner()).as_deref().map(f)
    }

    pub fn read_depths(&self) -> (u8, u8) {
        let a = self.attr.lock().unwrap_or_else(|e| e.into_inner());
        (a.max_rdma_read_in.clamp(0, 255) as u8, a.max_rdma_read_out.clamp(0, 255) as u8)
    }

    /// Posts a connection-stream event to this EP's connection EVD.
    pub fn post_conn_event(&self, me: DAT_EP_HANDLE, number: DAT_EVENT_NUMBER, pdata: &[u8]) {
        let evd_h = self.conn_evd.load(Ordering::Acquire) as DAT_EVD_HANDLE;
        let Ok(evd) = handle::get::<Evd<T>>(evd_h) else {
            log::warn!("EP {me:p}: connection event {number:#x} with no connection EVD");
            return;
        };
        // DAT: an event's private data stays valid until the EP is freed or
        // reset, so an event without any (DISCONNECTED after an ESTABLISHED
        // that carried the peer's accept data, both still queued) must not
        // free the buffer the earlier event points at (dat-fuzz finding 7,
        // a use after free memcheck saw). A new connection attempt needs a
        // reset first, so only then is the buffer replaced.
        let mut keep = self.peer_pdata.lock().unwrap_or_else(|e| e.into_inner());
        if !pdata.is_empty() {
            *keep = pdata.to_vec();
        }
        let mut ev = evd::new_event(number);
        ev.event_data.connect_event_data = DAT_CONNECTION_EVENT_DATA {
            ep_handle: me,
            private_data_size: pdata.len() as DAT_COUNT,
            private_data: if pdata.is_empty() { std::ptr::null_mut() } else { keep.as_ptr() as DAT_PVOID },
        };
        drop(keep);
        evd.counters.add(DCNT_EVD_CONN_CALLBACK, 1);
        log::debug!("EP {me:p}: connection event {number:#x} ({} bytes of private data) to EVD {evd_h:p}", pdata.len());
        evd.post(evd_h, ev);
    }

    /// Drops the connection: QP to error (outstanding DTOs flush) and the cm id released.
    pub fn break_connection(&self) {
        self.with_qp(|q| q.to_error());
        if let Some(id) = self.cm_id.take() {
            id.destroy();
        }
    }

    /// Takes the QP through ERROR to RESET, so what is posted completes as
    /// flushed and the EP can connect again. Most verbs providers (mlx4,
    /// mlx5, hns) clean a QP's completions out of its CQs when it enters
    /// RESET, and a device flushes in its own time after the move to ERROR;
    /// so before the RESET the EP's completions are moved off the CQs into
    /// the EVDs' own queues, waiting (a bounded time) for every posted
    /// receive's. None without a QP.
    pub fn flush_and_reset(&self, me: DAT_EP_HANDLE) -> Option<std::io::Result<()>> {
        self.with_qp(|q| q.to_error())?;
        self.keep_completions(me);
        self.with_qp(|q| q.reset())
    }

    fn keep_completions(&self, me: DAT_EP_HANDLE) {
        let evd = |slot: &AtomicUsize| handle::get::<Evd<T>>(slot.load(Ordering::Acquire) as DAT_HANDLE).ok();
        if let Some(recv) = evd(&self.recv_evd) {
            self.await_receives(me, recv);
        }
        // A send ring cannot say what is still to come (unsignaled requests
        // never report): what the CQ holds by now is kept.
        if let Some(req) = evd(&self.req_evd) {
            req.collect(|_| false);
        }
    }

    fn await_receives(&self, me: DAT_EP_HANDLE, recv: &Evd<T>) {
        let ring = self.recv_ring_ptr.load(Ordering::Acquire);
        if self.srq != 0 || ring.is_null() {
            recv.collect(|_| false);
            return;
        }
        // SAFETY: the ring lives as long as the QP, which only dat_ep_free takes.
        let ring = unsafe { &*ring };
        let start = Instant::now();
        loop {
            let out = ring.outstanding();
            // A CQ that overran has lost completions: the count never adds up.
            if recv.collect(|wr_id| ring.holds(wr_id)) >= out || recv.overran.load(Ordering::Acquire) {
                return;
            }
            if start.elapsed() >= FLUSH_WAIT {
                log::warn!("EP {me:p}: {out} receives not flushed by the device in {FLUSH_WAIT:?}; the reset may drop them");
                return;
            }
            std::thread::sleep(Duration::from_micros(100));
        }
    }
}

/// After an error completion on a connected RC EP: the EP is broken, the
/// consumer hears so on its connection EVD, and the peer is told.
#[cold]
pub fn break_on_error<T: Provider>(h: usize) {
    let Ok(ep) = get::<T>(h as DAT_HANDLE) else { return };
    if ep.ud.load(Ordering::Acquire) {
        return;
    }
    let live = [DAT_EP_STATE_CONNECTED, DAT_EP_STATE_COMPLETION_PENDING];
    let to_down = |s| ep.state.compare_exchange(s, DAT_EP_STATE_DISCONNECTED, Ordering::AcqRel, Ordering::Acquire).is_ok();
    if live.into_iter().any(to_down) {
        log::debug!("EP {:p}: an error completion broke the connection", h as DAT_EP_HANDLE);
        ep.with_qp(|q| q.to_error());
        if let Some(id) = ep.cm_id.get() {
            // The peer's DISCONNECTED follows.
            let _ = id.disconnect();
        }
        ep.post_conn_event(h as DAT_EP_HANDLE, DAT_CONNECTION_EVENT_BROKEN, &[]);
    }
}

#[allow(clippy::too_many_arguments)]
pub fn create_ep<T: Provider>(
    ia_h: DAT_IA_HANDLE,
    pz_h: DAT_PZ_HANDLE,
    recv_h: DAT_EVD_HANDLE,
    req_h: DAT_EVD_HANDLE,
    conn_h: DAT_EVD_HANDLE,
    srq_h: DAT_SRQ_HANDLE,
    attr: *const DAT_EP_ATTR,
) -> Result<DAT_EP_HANDLE, DAT_RETURN> {
    let ia = handle::get::<Ia<T>>(ia_h)?;
    let pz = if pz_h.is_null() {
        None
    } else {
        let pz = handle::get::<Pz<T>>(pz_h)?;
        if !std::ptr::eq(pz.ia, ia) {
            return Err(invalid_handle(DAT_INVALID_HANDLE_PZ));
        }
        Some(pz)
    };
    let opt_evd = |h: DAT_EVD_HANDLE, flag, minor| -> Result<Option<&'static Evd<T>>, DAT_RETURN> {
        if h.is_null() {
            return Ok(None);
        }
        // A DTO EVD of another IA would tie this EP's QP to a CQ of another
        // device context. A connection EVD is only a software queue, and
        // dapltest's limit test shares one across IAs, as DAPL allows.
        match evd::require::<T>(h, flag, minor)? {
            e if flag != DAT_EVD_DTO_FLAG || std::ptr::eq(e.ia, ia) => Ok(Some(e)),
            _ => Err(invalid_handle(minor)),
        }
    };
    let recv = opt_evd(recv_h, DAT_EVD_DTO_FLAG, DAT_INVALID_HANDLE_EVD_RECV)?;
    let req = opt_evd(req_h, DAT_EVD_DTO_FLAG, DAT_INVALID_HANDLE_EVD_REQUEST)?;
    let conn = opt_evd(conn_h, DAT_EVD_CONNECTION_FLAG, DAT_INVALID_HANDLE_EVD_CONN)?;
    let srq = if srq_h.is_null() {
        None
    } else {
        match crate::srq::get::<T>(srq_h) {
            Ok(s) if std::ptr::eq(s.ia, ia) => Some(s),
            _ => return Err(invalid_handle(DAT_INVALID_HANDLE_SRQ)),
        }
    };
    // SAFETY: null-checked consumer attributes, copied.
    let attr = match unsafe { attr.as_ref() } {
        Some(a) => {
            check_attr::<T>(ia, a, DAT_INVALID_ARG6)?;
            *a
        }
        None => default_attr::<T>(ia),
    };
    let h = handle::insert(Ep {
        ia,
        ia_handle: ia_h as usize,
        pz: AtomicUsize::new(pz_h as usize),
        recv_evd: AtomicUsize::new(recv_h as usize),
        req_evd: AtomicUsize::new(req_h as usize),
        conn_evd: AtomicUsize::new(conn_h as usize),
        srq: srq_h as usize,
        attr: Mutex::new(attr),
        state: AtomicU32::new(DAT_EP_STATE_UNCONFIGURED_UNCONNECTED),
        qp_ptr: AtomicPtr::new(std::ptr::null_mut()),
        qp: Mutex::new(None),
        send_ring: Mutex::new(None),
        recv_ring: Mutex::new(None),
        send_ring_ptr: AtomicPtr::new(std::ptr::null_mut()),
        recv_ring_ptr: AtomicPtr::new(std::ptr::null_mut()),
        cm_id: IdSlot::new(None),
        // SAFETY: all-zero sockaddr_storage is valid (AF_UNSPEC).
        remote: Mutex::new(unsafe { std::mem::zeroed() }),
        remote_port: AtomicU32::new(0),
        local_port: AtomicU32::new(0),
        connect_pdata: Mutex::new(Vec::new()),
        peer_pdata: Mutex::new(Vec::new()),
        timeout_ms: AtomicU32::new(0),
        ud: AtomicBool::new(false),
        counters: crate::counters::Counters::new(),
    }, ia.table());
    let ep = get::<T>(h).expect("just created");
    if let Err(e) = ep.configure(h) {
        handle::remove::<Ep<T>>(h);
        return Err(e);
    }
    for e in [recv, req, conn].into_iter().flatten() {
        e.users.fetch_add(1, Ordering::AcqRel);
    }
    if let Some(pz) = pz {
        pz.users.fetch_add(1, Ordering::AcqRel);
    }
    if let Some(s) = srq {
        s.users.fetch_add(1, Ordering::AcqRel);
    }
    ia.adopt::<Ep<T>>(h, RANK, destroy::<T>);
    Ok(h)
}

pub unsafe extern "C" fn create<T: Provider>(
    ia_h: DAT_IA_HANDLE,
    pz_h: DAT_PZ_HANDLE,
    recv_h: DAT_EVD_HANDLE,
    req_h: DAT_EVD_HANDLE,
    conn_h: DAT_EVD_HANDLE,
    attr: *const DAT_EP_ATTR,
    out: *mut DAT_EP_HANDLE,
) -> DAT_RETURN {
    guard("dat_ep_create", || {
        if out.is_null() {
            return invalid_arg(DAT_INVALID_ARG7);
        }
        match create_ep::<T>(ia_h, pz_h, recv_h, req_h, conn_h, std::ptr::null_mut(), attr) {
            Ok(h) => {
                // SAFETY: checked non-null.
                unsafe { *out = h };
                DAT_SUCCESS
            }
            Err(e) => e,
        }
    })
}

pub fn destroy<T: Provider>(h: DAT_HANDLE) {
    let Ok(ep) = get::<T>(h) else { return };
    ep.ia.disown::<Ep<T>>(h);
    let users: Vec<usize> = [&ep.recv_evd, &ep.req_evd, &ep.conn_evd].iter().map(|a| a.load(Ordering::Acquire)).collect();
    let pz = ep.pz.load(Ordering::Acquire);
    let srq = ep.srq;
    if srq != 0 {
        if let Some(n) = ep.qp_num() {
            crate::dto::unmap_qp::<T>(n);
        }
    }
    let id = ep.cm_id.take();
    ep.qp_ptr.store(std::ptr::null_mut(), Ordering::Release);
    <T::Up as Upcalls<T>>::ep_freed(h);
    if let Some(id) = id {
        // A disconnect request is best effort.
        let _ = id.disconnect();
    }
    if crate::quiesce::quiesced::<T, _>(|| handle::remove::<Ep<T>>(h)) {
        if let Some(id) = id {
            id.destroy();
        }
        for e in users.into_iter().filter(|&e| e != 0) {
            if let Ok(evd) = handle::get::<Evd<T>>(e as DAT_HANDLE) {
                evd.users.fetch_sub(1, Ordering::AcqRel);
            }
        }
        if let Ok(pz) = handle::get::<Pz<T>>(pz as DAT_HANDLE) {
            pz.users.fetch_sub(1, Ordering::AcqRel);
        }
        if let Ok(s) = crate::srq::get::<T>(srq as DAT_HANDLE) {
            s.users.fetch_sub(1, Ordering::AcqRel);
        }
    }
}

pub unsafe extern "C" fn free<T: Provider>(h: DAT_EP_HANDLE) -> DAT_RETURN {
    guard("dat_ep_free", || match get::<T>(h) {
        Ok(_) => {
            destroy::<T>(h);
            DAT_SUCCESS
        }
        Err(e) => e,
    })
}

pub unsafe extern "C" fn query<T: Provider>(h: DAT_EP_HANDLE, _mask: DAT_EP_PARAM_MASK, out: *mut DAT_EP_PARAM) -> DAT_RETURN {
    guard("dat_ep_query", || {
        let ep = match get::<T>(h) {
            Ok(e) => e,
            Err(e) => return e,
        };
        // SAFETY: null-checked consumer out-parameter.
        let Some(p) = (unsafe { out.as_mut() }) else { return invalid_arg(DAT_INVALID_ARG3) };
        p.ia_handle = ep.ia_handle as DAT_IA_HANDLE;
        p.ep_state = ep.state.load(Ordering::Acquire);
        p.local_ia_address_ptr = ep.ia.device.ia_address();
        p.local_port_qual = ep.local_port.load(Ordering::Acquire) as DAT_PORT_QUAL;
        p.remote_ia_address_ptr = &*ep.remote.lock().unwrap_or_else(|e| e.into_inner()) as *const _ as DAT_IA_ADDRESS_PTR;
        p.remote_port_qual = ep.remote_port.load(Ordering::Acquire) as DAT_PORT_QUAL;
        p.pz_handle = ep.pz.load(Ordering::Acquire) as DAT_PZ_HANDLE;
        p.recv_evd_handle = ep.recv_evd.load(Ordering::Acquire) as DAT_EVD_HANDLE;
        p.request_evd_handle = ep.req_evd.load(Ordering::Acquire) as DAT_EVD_HANDLE;
        p.connect_evd_handle = ep.conn_evd.load(Ordering::Acquire) as DAT_EVD_HANDLE;
        p.srq_handle = ep.srq as DAT_SRQ_HANDLE;
        p.ep_attr = *ep.attr.lock().unwrap_or_else(|e| e.into_inner());
        DAT_SUCCESS
    })
}

pub unsafe extern "C" fn modify<T: Provider>(h: DAT_EP_HANDLE, mask: DAT_EP_PARAM_MASK, param: *const DAT_EP_PARAM) -> DAT_RETURN {
    guard("dat_ep_modify", || {
        let ep = match get::<T>(h) {
            Ok(e) => e,
            Err(e) => return e,
        };
        // SAFETY: null-checked consumer parameters.
        let Some(p) = (unsafe { param.as_ref() }) else { return invalid_arg(DAT_INVALID_ARG3) };
        let state = ep.state.load(Ordering::Acquire);
        if state != DAT_EP_STATE_UNCONNECTED && state != DAT_EP_STATE_UNCONFIGURED_UNCONNECTED {
            return invalid_state(DAT_INVALID_STATE_EP_CONNECTED);
        }
        let settable = (DAT_EP_FIELD_PZ_HANDLE | DAT_EP_FIELD_RECV_EVD_HANDLE | DAT_EP_FIELD_REQUEST_EVD_HANDLE
            | DAT_EP_FIELD_CONNECT_EVD_HANDLE | DAT_EP_FIELD_EP_ATTR_ALL) as DAT_EP_PARAM_MASK;
        if mask & !settable != 0 {
            return invalid_arg(DAT_INVALID_ARG2);
        }
        if mask & DAT_EP_FIELD_EP_ATTR_ALL as DAT_EP_PARAM_MASK != 0 {
            if let Err(e) = check_attr::<T>(ep.ia, &p.ep_attr, DAT_INVALID_ARG3) {
                return e;
            }
        }
        // Posted receives would be lost with the QP they sit on.
        let posted = ep.recv_ring.lock().unwrap_or_else(|e| e.into_inner()).as_ref().map_or(0, |r| r.outstanding());
        if posted != 0 {
            return invalid_state(DAT_INVALID_STATE_EP_UNCONNECTED);
        }
        // Every new handle is checked before anything changes: a refused
        // modify must leave the EP as it was (dat-fuzz finding 4: a bad EVD
        // after a good PZ left the new PZ recorded, the QP still on the old
        // one's PD, and the old PZ free to be freed under it). A PZ of
        // another IA is refused as dat_ep_create refuses it.
        let evd_ok = |new: DAT_HANDLE, flag: DAT_EVD_FLAGS, minor: u32| -> Result<(), DAT_RETURN> {
            if !new.is_null() {
                let e = evd::require::<T>(new, flag, minor)?;
                if flag == DAT_EVD_DTO_FLAG && !std::ptr::eq(e.ia, ep.ia) {
                    return Err(invalid_handle(minor));
                }
            }
            Ok(())
        };
        let checked = (|| {
            if mask & DAT_EP_FIELD_PZ_HANDLE as DAT_EP_PARAM_MASK != 0 {
                match handle::get::<Pz<T>>(p.pz_handle) {
                    Ok(pz) if std::ptr::eq(pz.ia, ep.ia) => {}
                    _ => return Err(invalid_handle(DAT_INVALID_HANDLE_PZ)),
                }
            }
            if mask & DAT_EP_FIELD_RECV_EVD_HANDLE as DAT_EP_PARAM_MASK != 0 {
                evd_ok(p.recv_evd_handle, DAT_EVD_DTO_FLAG, DAT_INVALID_HANDLE_EVD_RECV)?;
            }
            if mask & DAT_EP_FIELD_REQUEST_EVD_HANDLE as DAT_EP_PARAM_MASK != 0 {
                evd_ok(p.request_evd_handle, DAT_EVD_DTO_FLAG, DAT_INVALID_HANDLE_EVD_REQUEST)?;
            }
            if mask & DAT_EP_FIELD_CONNECT_EVD_HANDLE as DAT_EP_PARAM_MASK != 0 {
                evd_ok(p.connect_evd_handle, DAT_EVD_CONNECTION_FLAG, DAT_INVALID_HANDLE_EVD_CONN)?;
            }
            Ok(())
        })();
        if let Err(e) = checked {
            return e;
        }
        let swap = |slot: &AtomicUsize, new: DAT_HANDLE, flag: DAT_EVD_FLAGS, minor: u32| -> Result<(), DAT_RETURN> {
            if !new.is_null() {
                let e = evd::require::<T>(new, flag, minor)?;
                if flag == DAT_EVD_DTO_FLAG && !std::ptr::eq(e.ia, ep.ia) {
                    return Err(invalid_handle(minor));
                }
                e.users.fetch_add(1, Ordering::AcqRel);
            }
            let old = slot.swap(new as usize, Ordering::AcqRel);
            if let Ok(e) = handle::get::<Evd<T>>(old as DAT_HANDLE) {
                e.users.fetch_sub(1, Ordering::AcqRel);
            }
            Ok(())
        };
        let r = (|| {
            if mask & DAT_EP_FIELD_PZ_HANDLE as DAT_EP_PARAM_MASK != 0 {
                let pz = handle::get::<Pz<T>>(p.pz_handle).map_err(|_| invalid_handle(DAT_INVALID_HANDLE_PZ))?;
                pz.users.fetch_add(1, Ordering::AcqRel);
                if let Ok(old) = handle::get::<Pz<T>>(ep.pz.swap(p.pz_handle as usize, Ordering::AcqRel) as DAT_HANDLE) {
                    old.users.fetch_sub(1, Ordering::AcqRel);
                }
            }
            if mask & DAT_EP_FIELD_RECV_EVD_HANDLE as DAT_EP_PARAM_MASK != 0 {
                swap(&ep.recv_evd, p.recv_evd_handle, DAT_EVD_DTO_FLAG, DAT_INVALID_HANDLE_EVD_RECV)?;
            }
            if mask & DAT_EP_FIELD_REQUEST_EVD_HANDLE as DAT_EP_PARAM_MASK != 0 {
                swap(&ep.req_evd, p.request_evd_handle, DAT_EVD_DTO_FLAG, DAT_INVALID_HANDLE_EVD_REQUEST)?;
            }
            if mask & DAT_EP_FIELD_CONNECT_EVD_HANDLE as DAT_EP_PARAM_MASK != 0 {
                swap(&ep.conn_evd, p.connect_evd_handle, DAT_EVD_CONNECTION_FLAG, DAT_INVALID_HANDLE_EVD_CONN)?;
            }
            if mask & DAT_EP_FIELD_EP_ATTR_ALL as DAT_EP_PARAM_MASK != 0 {
                *ep.attr.lock().unwrap_or_else(|e| e.into_inner()) = p.ep_attr;
            }
            // The QP is rebuilt with whatever changed.
            ep.qp_ptr.store(std::ptr::null_mut(), Ordering::Release);
            *ep.qp.lock().unwrap_or_else(|e| e.into_inner()) = None;
            ep.configure(h)
        })();
        match r {
            Ok(()) => DAT_SUCCESS,
            Err(e) => e,
        }
    })
}

/// The DAT_INVALID_STATE minor for posting on an EP in state `s`.
/// Sends may go out once connected, and on the passive side as soon as
/// the accept has put the QP in RTS: the peer may send as soon as it sees
/// ESTABLISHED, and a consumer answering that message before its own
/// ESTABLISHED arrives (which rdma_cm only delivers on the RTU) must not be
/// refused. DAPL posts straight to the QP there too.
#[inline]
pub fn may_post(s: DAT_EP_STATE) -> bool {
    s == DAT_EP_STATE_CONNECTED || s == DAT_EP_STATE_COMPLETION_PENDING
}

#[cold]
fn not_connected_minor(s: DAT_EP_STATE) -> u32 {
    match s {
        DAT_EP_STATE_DISCONNECTED | DAT_EP_STATE_DISCONNECT_PENDING => DAT_INVALID_STATE_EP_DISCONNECTED,
        DAT_EP_STATE_ACTIVE_CONNECTION_PENDING => DAT_INVALID_STATE_EP_ACTCONNPENDING,
        DAT_EP_STATE_PASSIVE_CONNECTION_PENDING => DAT_INVALID_STATE_EP_PASSCONNPENDING,
        DAT_EP_STATE_COMPLETION_PENDING => DAT_INVALID_STATE_EP_COMPLPENDING,
        DAT_EP_STATE_UNCONFIGURED_UNCONNECTED => DAT_INVALID_STATE_EP_UNCONFIGURED,
        _ => DAT_INVALID_STATE_EP_UNCONNECTED,
    }
}

#[cold]
fn post_error(rc: i32) -> DAT_RETURN {
    match rc {
        libc::ENOMEM => no_resources(DAT_RESOURCE_TEP),
        libc::EINVAL => invalid_arg(DAT_INVALID_ARG2),
        _ => invalid_state(DAT_INVALID_STATE_EP_DISCONNECTED),
    }
}

/// A send-queue request and the DTO type its completion reports.
pub struct Request<'a> {
    pub send: SendRequest<'a>,
    pub op: DAT_DTOS,
}

impl<'a> Request<'a> {
    pub const fn plain(kind: SendOp, op: DAT_DTOS) -> Self {
        Request { send: SendRequest::plain(kind), op }
    }

    pub const fn new(send: SendRequest<'a>, op: DAT_DTOS) -> Self {
        Request { send, op }
    }
}

/// Inlined into each entry point, so that the request's constant parts
/// (operation, DTO type, counter) fold away.
#[inline(always)]
pub fn post_request<T: Provider>(
    h: DAT_EP_HANDLE,
    n: DAT_COUNT,
    iov: *const DAT_LMR_TRIPLET,
    cookie: DAT_DTO_COOKIE,
    req: &Request,
    flags: DAT_COMPLETION_FLAGS,
) -> DAT_RETURN {
    let ep = match get::<T>(h) {
        Ok(e) => e,
        Err(e) => return e,
    };
    let ud = ep.ud.load(Ordering::Relaxed);
    if req.send.ud.is_some() != ud {
        // A datagram needs a UD EP and an address; a UD EP has no connection.
        return if ud { invalid_state(DAT_INVALID_STATE_EP_UNCONNECTED) } else { invalid_handle(DAT_INVALID_HANDLE_EP) };
    }
    if !ud {
        let s = ep.state.load(Ordering::Acquire);
        if !may_post(s) {
            return invalid_state(not_connected_minor(s));
        }
    }
    let (qp, ring) = match ep.send_queue() {
        Ok(q) => q,
        Err(e) => return e,
    };
    let mut list = SgeList::<T>::new();
    let Some((count, len)) = list.fill(n, iov) else { return invalid_arg(DAT_INVALID_ARG2) };
    let completes = flags & (DAT_COMPLETION_SUPPRESS_FLAG | DAT_COMPLETION_UNSIGNALLED_FLAG) == 0;
    // SAFETY: DAT_DTO_COOKIE is an 8-byte union of plain values.
    let Some(wr_id) = ring.claim(h as usize, unsafe { cookie.as_64 }, len, req.op, req.send.remote.map_or(0, |r| r.rmr_context), completes) else {
        return post_error(libc::ENOMEM);
    };
    match qp.post_send(wr_id, list.as_slice(count), &req.send, flags) {
        Ok(()) => {
            ep.count_post(&req.send.op, ud, len);
            DAT_SUCCESS
        }
        Err(rc) => {
            ring.unclaim(wr_id);
            post_error(rc)
        }
    }
}

impl<T: Provider> Ep<T> {
    /// The QP and ring to post sends on, or why the EP has none yet.
    #[inline]
    fn send_queue(&self) -> Result<(&T::Qp, &Ring), DAT_RETURN> {
        let qp = self.qp_ptr.load(Ordering::Acquire);
        let ring = self.send_ring_ptr.load(Ordering::Acquire);
        if qp.is_null() || ring.is_null() {
            return Err(invalid_state(DAT_INVALID_STATE_EP_UNCONFIGURED));
        }
        // SAFETY: the boxed QP and the ring live until the EP is freed or
        // modified, which DAT forbids racing with a post on it.
        Ok(unsafe { (&*qp, &*ring) })
    }

    /// Posts a memory-window work request (bind or invalidate) for the RMR
    /// `owner` on this connected EP; its completion is an RMR bind event on
    /// the request EVD, which must carry that stream.
    pub fn post_window_op(
        &self,
        owner: usize,
        cookie: u64,
        op: u32,
        signaled: bool,
        post: impl FnOnce(&T::Qp, u64, bool) -> Result<(), i32>,
    ) -> Result<(), DAT_RETURN> {
        if !may_post(self.state.load(Ordering::Acquire)) {
            return Err(invalid_state(DAT_INVALID_STATE_EP_UNCONNECTED));
        }
        let req = handle::get::<Evd<T>>(self.req_evd.load(Ordering::Acquire) as DAT_HANDLE)
            .map_err(|_| invalid_state(DAT_INVALID_STATE_EP_EVD_REQUEST))?;
        if req.flags & DAT_EVD_RMR_BIND_FLAG == 0 {
            return Err(invalid_state(DAT_INVALID_STATE_EP_EVD_REQUEST));
        }
        let (qp, ring) = self.send_queue()?;
        let wr_id = ring.claim(owner, cookie, 0, op, 0, signaled).ok_or_else(|| post_error(libc::ENOMEM))?;
        post(qp, wr_id, signaled).map_err(|rc| {
            ring.unclaim(wr_id);
            post_error(rc)
        })
    }

    /// Completes a window operation that needed no work request (unbinding
    /// an unbound window): the RMR bind event goes straight to the request EVD.
    pub fn post_window_event(&self, rmr: DAT_RMR_HANDLE, cookie: u64, signaled: bool) -> Result<(), DAT_RETURN> {
        if !may_post(self.state.load(Ordering::Acquire)) {
            return Err(invalid_state(DAT_INVALID_STATE_EP_UNCONNECTED));
        }
        let req_h = self.req_evd.load(Ordering::Acquire) as DAT_HANDLE;
        let req = handle::get::<Evd<T>>(req_h).map_err(|_| invalid_state(DAT_INVALID_STATE_EP_EVD_REQUEST))?;
        if req.flags & DAT_EVD_RMR_BIND_FLAG == 0 {
            return Err(invalid_state(DAT_INVALID_STATE_EP_EVD_REQUEST));
        }
        if signaled {
            let mut e = evd::new_event(DAT_RMR_BIND_COMPLETION_EVENT);
            e.event_data.rmr_completion_event_data = DAT_RMR_BIND_COMPLETION_EVENT_DATA {
                rmr_handle: rmr,
                user_cookie: DAT_RMR_COOKIE { as_64: cookie },
                status: DAT_DTO_SUCCESS,
            };
            if !req.post(req_h, e) {
                return Err(no_resources(DAT_RESOURCE_TEVD));
            }
        }
        Ok(())
    }
}

pub unsafe extern "C" fn post_send<T: Provider>(
    h: DAT_EP_HANDLE,
    n: DAT_COUNT,
    iov: *mut DAT_LMR_TRIPLET,
    cookie: DAT_DTO_COOKIE,
    flags: DAT_COMPLETION_FLAGS,
) -> DAT_RETURN {
    guard("dat_ep_post_send", || post_request::<T>(h, n, iov, cookie, &Request::plain(SendOp::Send, DAT_DTO_SEND), flags))
}

/// RDMA read and write differ only in opcode and DTO type (inlined into
/// each, under its own guard, so both are constants there).
#[allow(clippy::too_many_arguments)]
#[inline(always)]
fn post_rdma<T: Provider>(
    h: DAT_EP_HANDLE,
    n: DAT_COUNT,
    iov: *mut DAT_LMR_TRIPLET,
    cookie: DAT_DTO_COOKIE,
    remote: *const DAT_RMR_TRIPLET,
    kind: SendOp,
    op: DAT_DTOS,
    flags: DAT_COMPLETION_FLAGS,
) -> DAT_RETURN {
    // SAFETY: null-checked consumer triplet.
    let Some(r) = (unsafe { remote.as_ref() }) else { return invalid_arg(DAT_INVALID_ARG5) };
    post_request::<T>(h, n, iov, cookie, &Request::new(SendRequest { remote: Some(r), ..SendRequest::plain(kind) }, op), flags)
}

pub unsafe extern "C" fn post_rdma_write<T: Provider>(
    h: DAT_EP_HANDLE,
    n: DAT_COUNT,
    iov: *mut DAT_LMR_TRIPLET,
    cookie: DAT_DTO_COOKIE,
    remote: *const DAT_RMR_TRIPLET,
    flags: DAT_COMPLETION_FLAGS,
) -> DAT_RETURN {
    guard("dat_ep_post_rdma_write", || {
        post_rdma::<T>(h, n, iov, cookie, remote, SendOp::RdmaWrite, DAT_DTO_RDMA_WRITE, flags)
    })
}

pub unsafe extern "C" fn post_rdma_read<T: Provider>(
    h: DAT_EP_HANDLE,
    n: DAT_COUNT,
    iov: *mut DAT_LMR_TRIPLET,
    cookie: DAT_DTO_COOKIE,
    remote: *const DAT_RMR_TRIPLET,
    flags: DAT_COMPLETION_FLAGS,
) -> DAT_RETURN {
    guard("dat_ep_post_rdma_read", || {
        post_rdma::<T>(h, n, iov, cookie, remote, SendOp::RdmaRead, DAT_DTO_RDMA_READ, flags)
    })
}

pub unsafe extern "C" fn post_recv<T: Provider>(
    h: DAT_EP_HANDLE,
    n: DAT_COUNT,
    iov: *mut DAT_LMR_TRIPLET,
    cookie: DAT_DTO_COOKIE,
    _flags: DAT_COMPLETION_FLAGS,
) -> DAT_RETURN {
    guard("dat_ep_post_recv", || {
        let ep = match get::<T>(h) {
            Ok(e) => e,
            Err(e) => return e,
        };
        if ep.srq != 0 {
            // Receives for this EP go to its SRQ.
            return invalid_state(DAT_INVALID_STATE_SRQ_IN_USE);
        }
        let qp = ep.qp_ptr.load(Ordering::Acquire);
        let ring = ep.recv_ring_ptr.load(Ordering::Acquire);
        if qp.is_null() || ring.is_null() {
            return invalid_state(DAT_INVALID_STATE_EP_UNCONFIGURED);
        }
        let mut list = SgeList::<T>::new();
        let Some((count, len)) = list.fill(n, iov) else { return invalid_arg(DAT_INVALID_ARG2) };
        // SAFETY: the ring lives as long as the QP.
        let ring = unsafe { &*ring };
        // A UD receive says so in its slot, so its completion reports the sender's QP.
        let op = if ep.ud.load(Ordering::Relaxed) { DAT_IB_DTO_RECV_UD } else { DAT_DTO_RECEIVE };
        // SAFETY: plain 8-byte union.
        let Some(wr_id) = ring.claim(h as usize, unsafe { cookie.as_64 }, len, op, 0, true) else {
            return post_error(libc::ENOMEM);
        };
        // SAFETY: as in send_queue.
        let qp = unsafe { &*qp };
        if let Err(rc) = qp.post_recv(wr_id, list.as_slice(count)) {
            ring.unclaim(wr_id);
            return post_error(rc);
        }
        ep.counters.bump(DCNT_EP_POST_RECV, 1);
        ep.counters.bump(DCNT_EP_POST_RECV_DATA, len);
        DAT_SUCCESS
    })
}

pub unsafe extern "C" fn get_status<T: Provider>(
    h: DAT_EP_HANDLE,
    state: *mut DAT_EP_STATE,
    recv_idle: *mut DAT_BOOLEAN,
    req_idle: *mut DAT_BOOLEAN,
) -> DAT_RETURN {
    guard("dat_ep_get_status", || {
        let ep = match get::<T>(h) {
            Ok(e) => e,
            Err(e) => return e,
        };
        let idle = |r: &Mutex<Option<Ring>>| {
            r.lock().unwrap_or_else(|e| e.into_inner()).as_ref().is_none_or(|r| r.outstanding() == 0)
        };
        // SAFETY: each out-pointer is optional and null-checked.
        unsafe {
            if let Some(s) = state.as_mut() {
                *s = ep.state.load(Ordering::Acquire);
            }
            if let Some(b) = recv_idle.as_mut() {
                *b = idle(&ep.recv_ring) as DAT_BOOLEAN;
            }
            if let Some(b) = req_idle.as_mut() {
                *b = idle(&ep.send_ring) as DAT_BOOLEAN;
            }
        }
        DAT_SUCCESS
    })
}

pub unsafe extern "C" fn reset<T: Provider>(h: DAT_EP_HANDLE) -> DAT_RETURN {
    guard("dat_ep_reset", || {
        let ep = match get::<T>(h) {
            Ok(e) => e,
            Err(e) => return e,
        };
        match ep.state.load(Ordering::Acquire) {
            DAT_EP_STATE_DISCONNECTED => {}
            // DAT: already unconnected, a no-op that leaves receives posted
            // for the next connection where they are (as DAPL does).
            DAT_EP_STATE_UNCONNECTED | DAT_EP_STATE_UNCONFIGURED_UNCONNECTED => return DAT_SUCCESS,
            DAT_EP_STATE_ACTIVE_CONNECTION_PENDING => return invalid_state(DAT_INVALID_STATE_EP_ACTCONNPENDING),
            DAT_EP_STATE_PASSIVE_CONNECTION_PENDING => return invalid_state(DAT_INVALID_STATE_EP_PASSCONNPENDING),
            DAT_EP_STATE_COMPLETION_PENDING => return invalid_state(DAT_INVALID_STATE_EP_COMPLPENDING),
            DAT_EP_STATE_DISCONNECT_PENDING => return invalid_state(DAT_INVALID_STATE_EP_DISCPENDING),
            DAT_EP_STATE_RESERVED => return invalid_state(DAT_INVALID_STATE_EP_RESERVED),
            _ => return invalid_state(DAT_INVALID_STATE_EP_CONNECTED),
        }
        if let Some(id) = ep.cm_id.take() {
            id.destroy();
        }
        match ep.flush_and_reset(h) {
            Some(Ok(())) | None => {
                let unconfigured = ep.qp_ptr.load(Ordering::Acquire).is_null();
                ep.state.store(
                    if unconfigured { DAT_EP_STATE_UNCONFIGURED_UNCONNECTED } else { DAT_EP_STATE_UNCONNECTED },
                    Ordering::Release,
                );
                DAT_SUCCESS
            }
            Some(Err(e)) => {
                log::warn!("EP reset: {e}");
                error(DAT_INTERNAL_ERROR, 0)
            }
        }
    })
}

pub unsafe extern "C" fn recv_query<T: Provider>(h: DAT_EP_HANDLE, nbufs: *mut DAT_COUNT, bufsize: *mut DAT_COUNT) -> DAT_RETURN {
    guard("dat_ep_recv_query", || {
        let ep = match get::<T>(h) {
            Ok(e) => e,
            Err(e) => return e,
        };
        let outstanding = ep.recv_ring.lock().unwrap_or_else(|e| e.into_inner()).as_ref()
            .map_or(0, |r| r.outstanding());
        // SAFETY: optional out-pointers, null-checked.
        unsafe {
            if let Some(n) = nbufs.as_mut() {
                *n = outstanding as DAT_COUNT;
            }
            if let Some(b) = bufsize.as_mut() {
                *b = DAT_VALUE_UNKNOWN as DAT_COUNT;
            }
        }
        DAT_SUCCESS
    })
}

#[allow(clippy::too_many_arguments)]
pub unsafe extern "C" fn create_with_srq<T: Provider>(
    ia_h: DAT_IA_HANDLE,
    pz_h: DAT_PZ_HANDLE,
    recv_h: DAT_EVD_HANDLE,
    req_h: DAT_EVD_HANDLE,
    conn_h: DAT_EVD_HANDLE,
    srq_h: DAT_SRQ_HANDLE,
    attr: *const DAT_EP_ATTR,
    out: *mut DAT_EP_HANDLE,
) -> DAT_RETURN {
    guard("dat_ep_create_with_srq", || {
        if srq_h.is_null() {
            return invalid_handle(DAT_INVALID_HANDLE_SRQ);
        }
        if out.is_null() {
            return invalid_arg(DAT_INVALID_ARG8);
        }
        match create_ep::<T>(ia_h, pz_h, recv_h, req_h, conn_h, srq_h, attr) {
            Ok(h) => {
                // SAFETY: checked non-null.
                unsafe { *out = h };
                DAT_SUCCESS
            }
            Err(e) => e,
        }
    })
}

pub unsafe extern "C" fn set_watermark<T: Provider>(h: DAT_EP_HANDLE, soft: DAT_COUNT, hard: DAT_COUNT) -> DAT_RETURN {
    guard("dat_ep_set_watermark", || {
        let ep = match get::<T>(h) {
            Ok(e) => e,
            Err(e) => return e,
        };
        if ep.srq == 0 {
            // Watermarks only mean something for an EP on an SRQ.
            return invalid_state(DAT_INVALID_STATE_EP_RECV_WATERMARK);
        }
        if soft < 0 || hard < 0 {
            return invalid_arg(DAT_INVALID_ARG2);
        }
        ep.attr.lock().unwrap_or_else(|e| e.into_inner()).srq_soft_hw = soft;
        DAT_SUCCESS
    })
}

impl<T: Provider> Ep<T> {
    #[inline(always)]
    pub fn count_post(&self, op: &SendOp, ud: bool, bytes: u64) {
        let (i, data) = counters::ep_post(op, ud);
        self.counters.bump(i, 1);
        if data {
            self.counters.bump(i + 1, bytes);
        }
    }
}

/// Counts a successful receive completion on its EP, by what filled it.
/// Runs on the thread reaping the EVD, the one writer of these counters.
#[inline]
pub fn received<T: Provider>(owner: usize, wc: &Completion, ud: bool) {
    // The owner is the EP handle the post recorded (or the SRQ's map: also
    // a handle the core recorded; 0 when its QP is no longer mapped), maybe
    // freed since.
    if owner == 0 {
        return;
    }
    let Some(ep) = handle::get_recorded::<Ep<T>>(owner) else { return };
    let i = if wc.kind == CompletionKind::RecvRdmaWithImm {
        DCNT_EP_RECV_RDMA_IMM
    } else if ud {
        DCNT_EP_RECV_UD
    } else if wc.imm.is_some() {
        DCNT_EP_RECV_IMM
    } else {
        DCNT_EP_RECV
    };
    ep.counters.bump(i, 1);
    ep.counters.bump(i + 1, u64::from(wc.byte_len));
}
