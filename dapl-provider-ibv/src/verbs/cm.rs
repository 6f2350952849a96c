//! The rdma_cm side: one event channel per IA and the thread that reads
//! it (and the device's async events), cm ids, and the translation of
//! rdma_cm and verbs async events into the core's terms. DAPL's rdma_cm
//! conventions (its reject header, its qualifier-to-port mapping) live here
//! too, so a connection between us and the reference provider carries the
//! same bytes on the wire.

use super::Verbs;
use dapl_core::backend::{AsyncEvent, AsyncHandler, CmEvent, CmEventKind, CmHandler, ConnIdOps, ConnParams, Tick};
use dapl_core::wake::{self, Wake};
use dat_abi::DAT_CONN_QUAL;
use rdma_core_sys as ibv;
use std::ptr::NonNull;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;

/// IB CM reject reason for "the peer's consumer said no".
const REJ_CONSUMER_DEFINED: i32 = 28;

/// DAPL's rdma_cm provider puts this 4-byte version word before the
/// consumer's private data in a reject, and strips it from one it receives;
/// we do the same so rejects carry the same bytes between the two.
pub const REJECT_HEADER: [u8; 4] = [0x02, 0x00, 0x02, 0x00];

/// rdma_cm's private data limits for RC on InfiniBand (REQ and REP); a
/// reject carries 148 bytes, less DAPL's header.
pub const MAX_CONNECT_PDATA: usize = 56;
pub const MAX_ACCEPT_PDATA: usize = 196;
pub const MAX_REJECT_PDATA: usize = 148 - REJECT_HEADER.len();
/// Private data a SIDR request carries after rdma_cm's own header (216 - 36),
/// and a SIDR reply.
pub const MAX_UD_CONNECT_PDATA: usize = 180;
pub const MAX_UD_ACCEPT_PDATA: usize = 136;

/// The rdma_cm port for a connection qualifier, mapped as DAPL's rdma_cm
/// provider maps it, so the two listen and connect on the same port: a
/// qualifier that fits in 16 bits is the port; a larger one is folded into
/// the range 33534..=65534.
pub fn port_of(qual: DAT_CONN_QUAL) -> u16 {
    if qual > 0xffff { ((qual % 32001) + 33534) as u16 } else { qual as u16 }
}

/// An rdma_cm id.
#[derive(Clone, Copy, Debug)]
pub struct CmId(NonNull<ibv::rdma_cm_id>);

// rdma_cm ids are used from the consumer's threads and the CM thread;
// librdmacm serialises what it must, and the core hands each id over whole.
unsafe impl Send for CmId {}
unsafe impl Sync for CmId {}

impl CmId {
    pub fn as_ptr(&self) -> *mut ibv::rdma_cm_id {
        self.0.as_ptr()
    }
}

fn conn_param(p: &ConnParams) -> ibv::rdma_conn_param {
    // SAFETY: all-zero conn param, then our fields.
    let mut param: ibv::rdma_conn_param = unsafe { std::mem::zeroed() };
    param.private_data = if p.pdata.is_empty() { std::ptr::null() } else { p.pdata.as_ptr() as *const libc::c_void };
    param.private_data_len = p.pdata.len() as u8;
    param.qp_num = p.qp_num;
    param
}

fn check(rc: i32) -> std::io::Result<()> {
    if rc == 0 { Ok(()) } else { Err(std::io::Error::last_os_error()) }
}

/// The edge from a consumer's call into rdma_cm to the CM thread, which
/// gets the kernel's event about it (`dapl_core::tsan`).
static CM_EDGE: u8 = 0;

/// Before a call whose event the CM thread will handle.
fn to_cm_thread() {
    dapl_core::tsan::release(&CM_EDGE);
}

impl ConnIdOps<Verbs> for CmId {
    fn set_context(&self, context: usize) {
        // SAFETY: our live id; the context is ours to set.
        unsafe { (*self.as_ptr()).context = context as *mut libc::c_void };
        to_cm_thread();
    }

    fn is_datagram(&self) -> bool {
        // SAFETY: a live id.
        unsafe { (*self.as_ptr()).ps == ibv::RDMA_PS_UDP }
    }

    fn resolve_addr(&self, src: &libc::sockaddr_storage, dst: &libc::sockaddr_storage, timeout_ms: i32) -> std::io::Result<()> {
        let (mut src, mut dst) = (*src, *dst);
        to_cm_thread();
        // SAFETY: live id; both are full sockaddrs of their family, copied by the call.
        check(unsafe {
            ibv::rdma_resolve_addr(self.as_ptr(), &mut src as *mut _ as *mut libc::sockaddr, &mut dst as *mut _ as *mut libc::sockaddr, timeout_ms)
        })
    }

    fn resolve_route(&self, timeout_ms: i32) -> std::io::Result<()> {
        to_cm_thread();
        // SAFETY: live id with a resolved address.
        check(unsafe { ibv::rdma_resolve_route(self.as_ptr(), timeout_ms) })
    }

    fn connect(&self, p: &ConnParams) -> std::io::Result<()> {
        let mut param = conn_param(p);
        if !self.is_datagram() {
            param.responder_resources = p.responder_resources;
            param.initiator_depth = p.initiator_depth;
            param.retry_count = 7;
            param.rnr_retry_count = 7;
            param.srq = p.srq as u8;
        }
        to_cm_thread();
        // SAFETY: live id with a route; the private data outlives the call (it is copied).
        check(unsafe { ibv::rdma_connect(self.as_ptr(), &mut param) })
    }

    fn accept(&self, p: &ConnParams) -> std::io::Result<()> {
        let mut param = conn_param(p);
        if !self.is_datagram() {
            param.responder_resources = p.responder_resources;
            param.initiator_depth = p.initiator_depth;
            param.rnr_retry_count = 7;
            param.srq = p.srq as u8;
        }
        to_cm_thread();
        // SAFETY: a live request id; the reply is built before this returns.
        check(unsafe { ibv::rdma_accept(self.as_ptr(), &mut param) })
    }

    fn reject(&self, consumer_pdata: Option<&[u8]>) {
        to_cm_thread();
        match consumer_pdata {
            Some(pdata) => {
                let mut wire = REJECT_HEADER.to_vec();
                wire.extend_from_slice(pdata);
                // SAFETY: a pending request id; librdmacm copies the data.
                unsafe { ibv::rdma_reject(self.as_ptr(), wire.as_ptr() as *const libc::c_void, wire.len() as u8) };
            }
            // SAFETY: a pending request id.
            None => unsafe {
                ibv::rdma_reject(self.as_ptr(), std::ptr::null(), 0);
            },
        }
    }

    fn establish(&self) {
        to_cm_thread();
        // SAFETY: live id after a connect response.
        unsafe { ibv::rdma_establish(self.as_ptr()) };
    }

    fn disconnect(&self) -> std::io::Result<()> {
        to_cm_thread();
        // SAFETY: a live id; disconnecting twice is harmless.
        check(unsafe { ibv::rdma_disconnect(self.as_ptr()) })
    }

    fn local_port(&self) -> u16 {
        // SAFETY: a live, bound or connected id.
        u16::from_be(unsafe { ibv::rdma_get_src_port(self.as_ptr()) })
    }

    fn peer_address(&self) -> libc::sockaddr_storage {
        // SAFETY: all-zero is a valid (AF_UNSPEC) sockaddr_storage.
        let mut remote: libc::sockaddr_storage = unsafe { std::mem::zeroed() };
        // SAFETY: rdma_get_peer_addr returns a pointer into the live id.
        let peer = unsafe { ibv::rdma_get_peer_addr(self.as_ptr()) } as *const libc::sockaddr_storage;
        if !peer.is_null() {
            // SAFETY: reading a sockaddr of the length its family implies.
            unsafe {
                if let Some(len) = dapl_core::util::sockaddr_len((*peer).ss_family) {
                    std::ptr::copy_nonoverlapping(peer as *const u8, &mut remote as *mut _ as *mut u8, len);
                }
            }
        }
        remote
    }

    fn destroy(self) {
        // SAFETY: an id we created; rdma_destroy_id waits for its events' acks,
        // which the CM thread gives without taking any of our locks.
        unsafe { ibv::rdma_destroy_id(self.as_ptr()) };
    }
}

/// Creates a cm id on `channel` whose context is `context` (a DAT handle),
/// in port space `ps` (RDMA_PS_TCP for RC, RDMA_PS_UDP for UD resolution).
pub fn create_id(channel: *mut ibv::rdma_event_channel, context: usize, ps: u32) -> std::io::Result<CmId> {
    let mut id: *mut ibv::rdma_cm_id = std::ptr::null_mut();
    to_cm_thread();
    // SAFETY: live channel; id receives the new id.
    if unsafe { ibv::rdma_create_id(channel, &mut id, context as *mut libc::c_void, ps) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    NonNull::new(id).map(CmId).ok_or_else(|| std::io::Error::from_raw_os_error(libc::ENOMEM))
}

/// Creates an id, binds it to `addr` with `port` and listens on it.
pub fn listen(channel: *mut ibv::rdma_event_channel, addr: &libc::sockaddr_storage, port: u16, context: usize, ps: u32)
    -> std::io::Result<(CmId, u16)>
{
    let id = create_id(channel, context, ps)?;
    let mut addr = *addr;
    // SAFETY: sin_port and sin6_port sit at the same offset in both families.
    unsafe { (*(&mut addr as *mut _ as *mut libc::sockaddr_in)).sin_port = port.to_be() };
    // SAFETY: live id; addr is a valid sockaddr of the IA's family.
    let bound = unsafe { ibv::rdma_bind_addr(id.as_ptr(), &mut addr as *mut _ as *mut libc::sockaddr) } == 0;
    to_cm_thread();
    // SAFETY: bound id.
    if !bound || unsafe { ibv::rdma_listen(id.as_ptr(), 128) } != 0 {
        let e = std::io::Error::last_os_error();
        id.destroy();
        return Err(e);
    }
    Ok((id, id.local_port()))
}

fn kind_of(ev: &ibv::rdma_cm_event) -> CmEventKind {
    match ev.event {
        ibv::RDMA_CM_EVENT_ADDR_RESOLVED => CmEventKind::AddrResolved,
        ibv::RDMA_CM_EVENT_ROUTE_RESOLVED => CmEventKind::RouteResolved,
        ibv::RDMA_CM_EVENT_ADDR_ERROR | ibv::RDMA_CM_EVENT_ROUTE_ERROR | ibv::RDMA_CM_EVENT_UNREACHABLE => {
            CmEventKind::Unreachable { timed_out: ev.status == -libc::ETIMEDOUT }
        }
        ibv::RDMA_CM_EVENT_CONNECT_REQUEST => CmEventKind::ConnectRequest,
        ibv::RDMA_CM_EVENT_CONNECT_RESPONSE => CmEventKind::ConnectResponse,
        ibv::RDMA_CM_EVENT_CONNECT_ERROR => CmEventKind::ConnectError,
        ibv::RDMA_CM_EVENT_REJECTED => CmEventKind::Rejected { by_consumer: ev.status == REJ_CONSUMER_DEFINED },
        ibv::RDMA_CM_EVENT_ESTABLISHED => CmEventKind::Established,
        ibv::RDMA_CM_EVENT_DISCONNECTED => CmEventKind::Disconnected,
        ibv::RDMA_CM_EVENT_DEVICE_REMOVAL => CmEventKind::DeviceRemoval,
        _ => CmEventKind::Other,
    }
}

/// Hands one rdma_cm event to the core's handler, in its terms.
fn dispatch(ev: &ibv::rdma_cm_event, handler: CmHandler<Verbs>, done: &mut dyn FnMut()) -> Option<CmId> {
    let id = CmId(NonNull::new(ev.id)?);
    log::debug!("rdma_cm event {} status {} on id {:p}", ev.event, ev.status, ev.id);
    let kind = kind_of(ev);
    // SAFETY: param.conn and param.ud begin alike (private data and its
    // length), and the data lives until the event is acked, after the handler.
    let raw = unsafe {
        let c = &ev.param.conn;
        if c.private_data.is_null() || c.private_data_len == 0 {
            &[][..]
        } else {
            std::slice::from_raw_parts(c.private_data as *const u8, c.private_data_len as usize)
        }
    };
    // The consumer's reason follows DAPL's reject header.
    let pdata = match kind {
        CmEventKind::Rejected { by_consumer: true } => raw.strip_prefix(&REJECT_HEADER[..]).unwrap_or(raw),
        _ => raw,
    };
    // SAFETY: for a connect request the listening id is set; it and the
    // request's id are live until the ack. Their contexts are DAT handles.
    let context = unsafe {
        if kind == CmEventKind::ConnectRequest && !ev.listen_id.is_null() {
            (*ev.listen_id).context as usize
        } else {
            (*ev.id).context as usize
        }
    };
    let ud_peer = (kind == CmEventKind::Established && id.is_datagram()).then(|| {
        // SAFETY: for an established UDP-space id, param.ud is the member rdma_cm filled.
        let ud = unsafe { &ev.param.ud };
        (&ud.ah_attr, ud.qp_num)
    });
    handler(&CmEvent { kind, id, context, pdata, ud_peer }, done)
}

/// An rdma_cm event, acknowledged once: when its handler is done with it
/// (before the CNO agents it fired run), else when this goes.
struct CmAck(*mut ibv::rdma_cm_event);

impl CmAck {
    fn ack(&mut self) {
        if !self.0.is_null() {
            // SAFETY: the event we got, acked once (its data is not read after).
            unsafe { ibv::rdma_ack_cm_event(self.0) };
            self.0 = std::ptr::null_mut();
        }
    }
}

impl Drop for CmAck {
    fn drop(&mut self) {
        self.ack();
    }
}

/// A verbs async event, acknowledged once, as `CmAck`.
struct AsyncAck(ibv::ibv_async_event, bool);

impl AsyncAck {
    fn ack(&mut self) {
        if !self.1 {
            // SAFETY: acking the event we got, once (destroying its object waits for this).
            unsafe { ibv::ibv_ack_async_event(&mut self.0) };
            self.1 = true;
        }
    }
}

impl Drop for AsyncAck {
    fn drop(&mut self) {
        self.ack();
    }
}

fn async_event_of(ev: &ibv::ibv_async_event) -> AsyncEvent {
    // SAFETY: the union member is the one event_type names; the object it
    // points at stays alive until the event is acked.
    unsafe {
        match ev.event_type {
            ibv::IBV_EVENT_CQ_ERR => AsyncEvent::CqError { context: (*ev.element.cq).cq_context as usize },
            ibv::IBV_EVENT_QP_FATAL | ibv::IBV_EVENT_QP_REQ_ERR | ibv::IBV_EVENT_QP_ACCESS_ERR | ibv::IBV_EVENT_PATH_MIG_ERR => {
                AsyncEvent::QpError { context: (*ev.element.qp).qp_context as usize, code: ev.event_type }
            }
            ibv::IBV_EVENT_SRQ_LIMIT_REACHED => AsyncEvent::SrqLimitReached { context: (*ev.element.srq).srq_context as usize },
            ibv::IBV_EVENT_SRQ_ERR => AsyncEvent::SrqError { context: (*ev.element.srq).srq_context as usize },
            other => AsyncEvent::Other { code: other },
        }
    }
}

pub struct CmThread {
    /// Stop; its wake; and "the IA was closed on this thread itself" (by a
    /// CNO agent), when the channel is gone as soon as the handler returns.
    stop: Arc<(AtomicBool, Wake, AtomicBool)>,
    thread: Option<JoinHandle<()>>,
}

struct Channel(*mut ibv::rdma_event_channel);

// The channel is only read by the CM thread; it outlives the thread (joined in drop).
unsafe impl Send for Channel {}

struct Ctx(*mut ibv::ibv_context);

// The verbs context outlives the thread (the IA joins it before closing the device).
unsafe impl Send for Ctx {}

fn set_nonblocking(fd: i32) {
    // SAFETY: plain fcntl on a descriptor we were given.
    unsafe {
        let fl = libc::fcntl(fd, libc::F_GETFL);
        libc::fcntl(fd, libc::F_SETFL, fl | libc::O_NONBLOCK);
    }
}

impl CmThread {
    /// One thread per IA: it reads the IA's rdma_cm events, the device's
    /// verbs async events, and runs `tick` (connect timeouts) on time.
    pub fn start(
        channel: *mut ibv::rdma_event_channel,
        handler: CmHandler<Verbs>,
        ctx: *mut ibv::ibv_context,
        on_async: AsyncHandler,
        tick: Tick,
    ) -> std::io::Result<CmThread> {
        let wake = Wake::new().ok_or_else(std::io::Error::last_os_error)?;
        let stop = Arc::new((AtomicBool::new(false), wake, AtomicBool::new(false)));
        // SAFETY: channel fd owned by the IA's device; made non-blocking so the
        // thread can also watch its stop signal.
        let fd = unsafe { (*channel).fd };
        set_nonblocking(fd);
        // SAFETY: the context's async fd; other IAs on the device may read it
        // too, and every event names its object, so any reader can route it.
        let async_fd = unsafe { (*ctx).async_fd };
        set_nonblocking(async_fd);
        let ch = Channel(channel);
        let vctx = Ctx(ctx);
        let s = stop.clone();
        let thread = std::thread::Builder::new().name("daplibv-cm".into()).spawn(move || {
            let (ch, vctx) = (ch, vctx);
            while !s.0.load(Ordering::Acquire) {
                let next = tick();
                wake::sleep_on_which(&[fd, async_fd, s.1.fd()], next);
                loop {
                    let mut ev: *mut ibv::rdma_cm_event = std::ptr::null_mut();
                    // SAFETY: non-blocking read of the next event on our channel.
                    if unsafe { ibv::rdma_get_cm_event(ch.0, &mut ev) } != 0 {
                        break;
                    }
                    dapl_core::tsan::acquire(&CM_EDGE);
                    let mut ack = CmAck(ev);
                    // SAFETY: a valid event until acked, which the handler
                    // asks for once it no longer reads it.
                    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| dispatch(unsafe { &*ev }, handler, &mut || ack.ack())));
                    drop(ack);
                    // A CNO agent may have closed the IA on this thread: its
                    // channel is gone, and with it what a destroy would use.
                    let closed = s.2.load(Ordering::Acquire);
                    match r {
                        Ok(Some(id)) if !closed => id.destroy(),
                        Ok(Some(_)) => log::debug!("IA closed by a CNO agent on the CM thread: the spent id goes with its channel"),
                        Ok(None) => {}
                        Err(_) => log::error!("connection event handler panicked; event dropped"),
                    }
                    if closed {
                        return;
                    }
                }
                loop {
                    // SAFETY: all-zero is a valid event for the library to fill.
                    let mut ev: ibv::ibv_async_event = unsafe { std::mem::zeroed() };
                    // SAFETY: non-blocking read on the live context.
                    if unsafe { ibv::ibv_get_async_event(vctx.0, &mut ev) } != 0 {
                        break;
                    }
                    let a = async_event_of(&ev);
                    let mut ack = AsyncAck(ev, false);
                    if std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| on_async(&a, &mut || ack.ack()))).is_err() {
                        log::error!("async event handler panicked; event dropped");
                    }
                    drop(ack);
                    if s.2.load(Ordering::Acquire) {
                        return;
                    }
                }
            }
        })?;
        Ok(CmThread { stop, thread: Some(thread) })
    }
}

impl Drop for CmThread {
    fn drop(&mut self) {
        self.stop.0.store(true, Ordering::Release);
        self.stop.1.signal();
        if let Some(t) = self.thread.take() {
            if t.thread().id() != std::thread::current().id() {
                let _ = t.join();
            } else {
                self.stop.2.store(true, Ordering::Release);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::port_of;

    #[test]
    fn qualifiers_map_to_ports_like_dapl() {
        assert_eq!(port_of(45248), 45248);
        assert_eq!(port_of(0xffff), 0xffff);
        assert_eq!(port_of(0x12345), ((0x12345u64 % 32001) + 33534) as u16);
        assert_eq!(port_of(0x12345), 44097);
        assert!(port_of(u64::MAX) >= 33534);
    }
}
