//! The connection manager over TCP: a DAT connection qualifier is a TCP
//! port on the IA address; a connection is one TCP stream, opened with a
//! three-frame handshake that carries the consumer's private data and the
//! QP numbers (REQ, then REP or REJ, then RTU from the active side), and
//! closed with DISC frames both ways (or by the stream's end, when a peer
//! dies). A UD address resolution is the same handshake without the RTU:
//! the REP names the passive QP's UDP port, and the stream closes.
//!
//! Socket work happens on the IA's progress thread (`progress`); the calls
//! here only hand it commands. Events come back through the IA's event
//! queue, which the event thread (`Events`) drains into the core's
//! handlers, so a handler that blocks never stalls the data path.

use super::Sock;
use super::device::{Shared, lock};
use super::eventfd::{drain, eventfd, signal};
use super::progress::Cmd;
use super::ud::Path;
use super::wire::{F_CONSUMER, F_DATAGRAM, Hdr, MAGIC, Op};
use dapl_core::backend::{AsyncEvent, AsyncHandler, CmEvent, CmEventKind, CmHandler, ConnIdOps, ConnParams, Tick};
use std::collections::HashMap;
use std::io;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

/// Private data a consumer may send: exactly what the verbs provider
/// allows (rdma_cm over InfiniBand, less DAPL's reject header), so a
/// program sized for one fits the other and checks of the limits agree.
/// The frames could carry more (up to wire::MAX_CM_PDATA).
pub const MAX_CONNECT_PDATA: usize = 56;
pub const MAX_ACCEPT_PDATA: usize = 196;
pub const MAX_REJECT_PDATA: usize = 144;
pub const MAX_UD_CONNECT_PDATA: usize = 180;
pub const MAX_UD_ACCEPT_PDATA: usize = 136;

/// The TCP port for a connection qualifier: the same mapping DAPL's
/// rdma_cm provider uses for its port space, so dat.conf users who pick
/// qualifiers by port see the port they expect.
pub fn port_of(qual: dat_abi::DAT_CONN_QUAL) -> u16 {
    if qual > 0xffff { ((qual % 32001) + 33534) as u16 } else { qual as u16 }
}

/// An event for the event thread.
pub enum Ev {
    Cm { kind: CmEventKind, id: u64, listen: u64, pdata: Vec<u8>, ud: Option<(Path, u32)> },
    Async(AsyncEvent),
}

#[derive(Default)]
pub struct IdInfo {
    pub local_port: u16,
    pub peer: Option<libc::sockaddr_in>,
    pub dst: Option<libc::sockaddr_in>,
    /// A stream exists for this id (connecting, connected or closing).
    pub connected: bool,
    /// The id owns a listening socket (the progress thread closes it).
    pub listener: bool,
}

pub struct IdState {
    pub shared: Arc<Shared>,
    pub context: AtomicUsize,
    pub datagram: bool,
    pub info: Mutex<IdInfo>,
}

static IDS: Mutex<Option<HashMap<u64, Arc<IdState>>>> = Mutex::new(None);

pub fn state_of(key: u64) -> Option<Arc<IdState>> {
    lock(&IDS).as_ref().and_then(|m| m.get(&key).cloned())
}

/// Forgets the ids of an IA whose threads have stopped. The core destroys
/// every id it heard of; one it never heard of (a request whose event was
/// still queued when the event thread stopped) would keep the IA's shared
/// state, and its two eventfds, for the rest of the process.
pub fn forget_ids_of(shared: &Arc<Shared>) {
    if let Some(m) = lock(&IDS).as_mut() {
        m.retain(|_, st| !Arc::ptr_eq(&st.shared, shared));
    }
}

/// A connection id: a key into the table of live ids, so a stale copy
/// (the core keeps them by value) finds nothing once destroyed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Id(u64);

impl Id {
    pub fn key(&self) -> u64 {
        self.0
    }

    pub fn create(shared: &Arc<Shared>, context: usize, datagram: bool) -> Id {
        Id::insert(IdState { shared: shared.clone(), context: AtomicUsize::new(context), datagram, info: Mutex::new(IdInfo::default()) })
    }

    pub fn insert(st: IdState) -> Id {
        static NEXT: AtomicU64 = AtomicU64::new(1);
        let key = NEXT.fetch_add(1, Ordering::Relaxed);
        lock(&IDS).get_or_insert_with(HashMap::new).insert(key, Arc::new(st));
        Id(key)
    }

    fn state(&self) -> io::Result<Arc<IdState>> {
        state_of(self.0).ok_or_else(|| io::Error::from_raw_os_error(libc::EBADF))
    }
}

fn tcp_socket() -> io::Result<i32> {
    // SAFETY: a new stream socket, owned by the caller.
    let fd = unsafe { libc::socket(libc::AF_INET, libc::SOCK_STREAM | libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC, 0) };
    if fd < 0 { Err(io::Error::last_os_error()) } else { Ok(fd) }
}

fn set_int(fd: i32, level: i32, opt: i32, v: i32) {
    // SAFETY: an int option on our socket.
    unsafe { libc::setsockopt(fd, level, opt, &v as *const i32 as *const libc::c_void, 4) };
}

/// Stream options every connection gets: no Nagle delay (each frame is a
/// message someone waits for).
pub fn tune(fd: i32) {
    set_int(fd, libc::IPPROTO_TCP, libc::TCP_NODELAY, 1);
}

/// Sends what frames written with MSG_MORE left waiting for a frame that
/// did not come (setting TCP_NODELAY pushes the pending bytes).
pub fn uncork(fd: i32) {
    set_int(fd, libc::IPPROTO_TCP, libc::TCP_NODELAY, 1);
}

fn bind(fd: i32, sa: &libc::sockaddr_in) -> io::Result<()> {
    // SAFETY: binding our socket to a full sockaddr_in.
    let rc = unsafe { libc::bind(fd, sa as *const _ as *const libc::sockaddr, std::mem::size_of::<libc::sockaddr_in>() as u32) };
    if rc == 0 { Ok(()) } else { Err(io::Error::last_os_error()) }
}

/// Why `dial` gave no socket.
pub enum Dial {
    /// Making or binding our socket failed: the caller's error.
    Setup(io::Error),
    /// connect() failed at once (errno): the connection's.
    Failed(i32),
}

/// A socket bound to the IA address `src` and connecting (non-blocking) to
/// `dst`: connected or in progress.
pub fn dial(src: &libc::sockaddr_in, dst: &libc::sockaddr_in) -> Result<i32, Dial> {
    let fd = tcp_socket().map_err(Dial::Setup)?;
    tune(fd);
    // The ephemeral port this end gets may be a qualifier's port some
    // PSP binds later: rdma_cm keeps the two apart, TCP lets the later
    // listener share it only if both sides allow reuse.
    set_int(fd, libc::SOL_SOCKET, libc::SO_REUSEADDR, 1);
    if let Err(e) = bind(fd, src) {
        // SAFETY: ours, not handed on.
        unsafe { libc::close(fd) };
        return Err(Dial::Setup(e));
    }
    // SAFETY: a non-blocking connect of our socket to a full sockaddr_in.
    let rc = unsafe { libc::connect(fd, dst as *const _ as *const libc::sockaddr, std::mem::size_of::<libc::sockaddr_in>() as u32) };
    let err = io::Error::last_os_error().raw_os_error().unwrap_or(0);
    if rc != 0 && err != libc::EINPROGRESS {
        // SAFETY: ours, not handed on.
        unsafe { libc::close(fd) };
        return Err(Dial::Failed(err));
    }
    Ok(fd)
}

pub fn local_port_of(fd: i32) -> u16 {
    // SAFETY: all-zero sockaddr_in, filled by getsockname.
    let mut sa: libc::sockaddr_in = unsafe { std::mem::zeroed() };
    let mut len = std::mem::size_of::<libc::sockaddr_in>() as u32;
    // SAFETY: our socket; sa has room for an IPv4 address.
    unsafe { libc::getsockname(fd, &mut sa as *mut _ as *mut libc::sockaddr, &mut len) };
    u16::from_be(sa.sin_port)
}

/// Ports whose listening socket a destroyed id left for the progress
/// thread to close: a listen on one waits for that close rather than find
/// the port taken (a PSP freed and created again at once; conformance
/// flush_before_reset met it).
static CLOSING: Mutex<Vec<u16>> = Mutex::new(Vec::new());
static CLOSED: Condvar = Condvar::new();
const CLOSE_WAIT: Duration = Duration::from_secs(2);

/// Closes a listening socket (on the progress thread, which owns it) and
/// lets a listen waiting for its port go on.
pub fn close_listener(fd: i32) {
    let port = local_port_of(fd);
    // SAFETY: the listening socket the progress thread owned; closed once.
    unsafe { libc::close(fd) };
    let mut closing = lock(&CLOSING);
    if let Some(i) = closing.iter().position(|&p| p == port) {
        closing.swap_remove(i);
    }
    drop(closing);
    CLOSED.notify_all();
}

/// Binds the IA address on `port` and listens; the progress thread takes
/// the socket from here.
pub fn listen(shared: &Arc<Shared>, port: u16, context: usize, datagram: bool) -> io::Result<(Id, u16)> {
    let slot = datagram as usize;
    if port != 0 {
        let closing = lock(&CLOSING);
        let _ = CLOSED.wait_timeout_while(closing, CLOSE_WAIT, |c| c.contains(&port));
    }
    if port != 0 {
        let mut ports = lock(&shared.ports);
        if let Some(e) = ports.get_mut(&port) {
            if e[slot] != 0 {
                return Err(io::Error::from_raw_os_error(libc::EADDRINUSE));
            }
            // The other kind already listens here: share its socket.
            let id = Id::create(shared, context, datagram);
            e[slot] = id.0;
            if let Ok(st) = id.state() {
                lock(&st.info).local_port = port;
            }
            return Ok((id, port));
        }
    }
    let fd = tcp_socket()?;
    // Rebinding a port whose old connections linger in TIME_WAIT is fine;
    // two listeners on one port still collide.
    set_int(fd, libc::SOL_SOCKET, libc::SO_REUSEADDR, 1);
    let mut sa = shared.addr;
    sa.sin_port = port.to_be();
    // SAFETY: listen on our bound socket.
    if let Err(e) = bind(fd, &sa).and_then(|_| if unsafe { libc::listen(fd, 1024) } == 0 { Ok(()) } else { Err(io::Error::last_os_error()) }) {
        // SAFETY: ours, not handed on.
        unsafe { libc::close(fd) };
        return Err(e);
    }
    let got = local_port_of(fd);
    let id = Id::create(shared, context, datagram);
    if let Ok(st) = id.state() {
        let mut info = lock(&st.info);
        info.local_port = got;
        info.listener = true;
    }
    let mut e = [0u64; 2];
    e[slot] = id.0;
    lock(&shared.ports).insert(got, e);
    shared.command(Cmd::Listen { id: id.0, fd });
    Ok((id, got))
}

fn post(st: &IdState, key: u64, kind: CmEventKind) {
    st.shared.post_event(Ev::Cm { kind, id: key, listen: 0, pdata: Vec::new(), ud: None });
}

/// The event a failed connect() gives, as rdma_cm reports it: nobody
/// listening is a reject by the peer's side (not its consumer).
pub fn connect_failure(errno: i32) -> CmEventKind {
    match errno {
        libc::ECONNREFUSED | libc::ECONNRESET | libc::EPIPE | 0 => CmEventKind::Rejected { by_consumer: false },
        libc::ETIMEDOUT => CmEventKind::Unreachable { timed_out: true },
        _ => CmEventKind::Unreachable { timed_out: false },
    }
}

impl ConnIdOps<Sock> for Id {
    fn set_context(&self, context: usize) {
        if let Ok(st) = self.state() {
            st.context.store(context, Ordering::Release);
        }
    }

    fn is_datagram(&self) -> bool {
        self.state().is_ok_and(|s| s.datagram)
    }

    fn resolve_addr(&self, _src: &libc::sockaddr_storage, dst: &libc::sockaddr_storage, _timeout_ms: i32) -> io::Result<()> {
        let st = self.state()?;
        if dst.ss_family as i32 != libc::AF_INET {
            return Err(io::Error::from_raw_os_error(libc::EAFNOSUPPORT));
        }
        // SAFETY: the family says this is a sockaddr_in.
        let sin = unsafe { *(dst as *const _ as *const libc::sockaddr_in) };
        lock(&st.info).dst = Some(sin);
        post(&st, self.0, CmEventKind::AddrResolved);
        Ok(())
    }

    fn resolve_route(&self, _timeout_ms: i32) -> io::Result<()> {
        let st = self.state()?;
        post(&st, self.0, CmEventKind::RouteResolved);
        Ok(())
    }

    fn connect(&self, p: &ConnParams) -> io::Result<()> {
        let st = self.state()?;
        let dst = lock(&st.info).dst.ok_or_else(|| io::Error::from_raw_os_error(libc::EDESTADDRREQ))?;
        // Refused at once (nobody listens yet): the progress thread dials
        // again for a while (fd -1), as for a refusal it sees itself.
        let fd = match dial(&st.shared.addr, &dst) {
            Ok(fd) => fd,
            Err(Dial::Failed(libc::ECONNREFUSED)) => -1,
            Err(Dial::Failed(errno)) => {
                post(&st, self.0, connect_failure(errno));
                return Ok(());
            }
            Err(Dial::Setup(e)) => return Err(e),
        };
        let mut h = Hdr::new(Op::Req);
        h.flags = if st.datagram { F_DATAGRAM } else { 0 };
        h.imm = p.qp_num;
        h.a = MAGIC;
        h.b = ((p.responder_resources as u64) << 8) | p.initiator_depth as u64;
        {
            let mut i = lock(&st.info);
            i.connected = true;
            i.peer = Some(dst);
            i.local_port = local_port_of(fd);
        }
        st.shared.command(Cmd::Connect { id: self.0, fd, frame: h.frame(p.pdata) });
        Ok(())
    }

    fn accept(&self, p: &ConnParams) -> io::Result<()> {
        let st = self.state()?;
        let mut h = Hdr::new(Op::Rep);
        h.imm = p.qp_num;
        if st.datagram {
            let qp = super::qp::find(p.qp_num).ok_or_else(|| io::Error::from_raw_os_error(libc::EINVAL))?;
            h.a = qp.udp_port as u64;
        }
        st.shared.command(Cmd::Accept { id: self.0, frame: h.frame(p.pdata) });
        Ok(())
    }

    fn reject(&self, consumer_pdata: Option<&[u8]>) {
        let Ok(st) = self.state() else { return };
        let mut h = Hdr::new(Op::Rej);
        if consumer_pdata.is_some() {
            h.flags = F_CONSUMER;
        }
        st.shared.command(Cmd::Reject { id: self.0, frame: h.frame(consumer_pdata.unwrap_or(&[])) });
    }

    fn establish(&self) {
        if let Ok(st) = self.state() {
            st.shared.command(Cmd::Establish { id: self.0 });
        }
    }

    fn disconnect(&self) -> io::Result<()> {
        let st = self.state()?;
        if !lock(&st.info).connected {
            return Err(io::Error::from_raw_os_error(libc::ENOTCONN));
        }
        st.shared.command(Cmd::Disconnect { id: self.0 });
        Ok(())
    }

    fn local_port(&self) -> u16 {
        self.state().map_or(0, |s| lock(&s.info).local_port)
    }

    fn peer_address(&self) -> libc::sockaddr_storage {
        // SAFETY: all-zero is a valid (AF_UNSPEC) sockaddr_storage.
        let mut ss: libc::sockaddr_storage = unsafe { std::mem::zeroed() };
        if let Some(p) = self.state().ok().and_then(|s| lock(&s.info).peer) {
            // SAFETY: sockaddr_storage is larger and as aligned as sockaddr_in.
            unsafe { *(&mut ss as *mut _ as *mut libc::sockaddr_in) = p };
        }
        ss
    }

    fn destroy(self) {
        let st = lock(&IDS).as_mut().and_then(|m| m.remove(&self.0));
        if let Some(st) = st {
            let mut ports = lock(&st.shared.ports);
            let (port, listener) = {
                let info = lock(&st.info);
                (info.local_port, info.listener)
            };
            if listener {
                lock(&CLOSING).push(port);
            }
            if let Some(e) = ports.get_mut(&port) {
                for k in e.iter_mut().filter(|k| **k == self.0) {
                    *k = 0;
                }
                if *e == [0, 0] {
                    ports.remove(&port);
                }
            }
            drop(ports);
            st.shared.command(Cmd::Destroy { id: self.0 });
        }
    }
}

/// The thread that hands an IA's connection and async events to the core.
pub struct Events {
    stop: Arc<AtomicBool>,
    wake: i32,
    thread: Option<JoinHandle<()>>,
}

/// `done`: the event thread is past its use of the object an async event
/// names (a free of it waits for that, `Shared::forget_async`).
fn dispatch(ev: Ev, on_cm: CmHandler<Sock>, on_async: AsyncHandler, done: &mut dyn FnMut()) {
    match ev {
        Ev::Async(a) => {
            if std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| on_async(&a, done))).is_err() {
                log::error!("async event handler panicked; event {a:?} dropped");
            }
        }
        Ev::Cm { kind, id, listen, pdata, ud } => {
            let Some(st) = state_of(id) else {
                log::debug!("sock: {kind:?} for a destroyed id");
                return;
            };
            let context = if kind == CmEventKind::ConnectRequest {
                match state_of(listen) {
                    Some(l) => l.context.load(Ordering::Acquire),
                    None => {
                        // The listener went away meanwhile: nobody to ask.
                        let id = Id(id);
                        id.reject(None);
                        id.destroy();
                        return;
                    }
                }
            } else {
                st.context.load(Ordering::Acquire)
            };
            let ud_peer = ud.as_ref().map(|(p, q)| (p, *q));
            let e = CmEvent { kind, id: Id(id), context, pdata: &pdata, ud_peer };
            log::debug!("sock: {kind:?} on id {id} for {context:#x}");
            // Destroying a sock id does not wait for this thread: nothing to acknowledge.
            match std::panic::catch_unwind(|| on_cm(&e, &mut || {})) {
                Ok(Some(spent)) => spent.destroy(),
                Ok(None) => {}
                Err(_) => log::error!("connection event handler panicked; {kind:?} dropped"),
            }
        }
    }
}

impl Events {
    pub fn start(shared: Arc<Shared>, on_cm: CmHandler<Sock>, on_async: AsyncHandler, tick: Tick) -> io::Result<Events> {
        let stop = Arc::new(AtomicBool::new(false));
        let wake = eventfd()?;
        let s = stop.clone();
        let thread = std::thread::Builder::new().name("daplsock-cm".into()).spawn(move || {
            super::role::become_event_thread();
            while !s.load(Ordering::Acquire) {
                let next = tick();
                let mut fds = [
                    libc::pollfd { fd: shared.ev_fd, events: libc::POLLIN, revents: 0 },
                    libc::pollfd { fd: wake, events: libc::POLLIN, revents: 0 },
                ];
                let ms = next.map_or(-1, |us| us.div_ceil(1000).min(i32::MAX as u64) as i32);
                // SAFETY: poll over our own array.
                unsafe { libc::poll(fds.as_mut_ptr(), 2, ms) };
                drain(shared.ev_fd);
                loop {
                    let ev = {
                        let mut q = lock(&shared.events);
                        let ev = q.pop_front();
                        if let Some(Ev::Async(a)) = &ev {
                            shared.dispatching.store(a.context(), Ordering::Release);
                        }
                        ev
                    };
                    match ev {
                        Some(ev) => dispatch(ev, on_cm, on_async, &mut || shared.dispatching.store(0, Ordering::Release)),
                        None => break,
                    }
                    shared.dispatching.store(0, Ordering::Release);
                }
            }
        })?;
        Ok(Events { stop, wake, thread: Some(thread) })
    }
}

impl Drop for Events {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Release);
        signal(self.wake);
        if let Some(t) = self.thread.take() {
            if t.thread().id() != std::thread::current().id() {
                let _ = t.join();
            }
        }
        // SAFETY: our eventfd; the thread is gone.
        unsafe { libc::close(self.wake) };
    }
}
