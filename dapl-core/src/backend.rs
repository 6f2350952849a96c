//! The contract between the provider core and a transport backend.
//!
//! The core (the rest of this crate) keeps DAT's handles, object
//! lifetimes, state machines, event queues and error codes; it reaches the
//! hardware only through the traits here. It is generic over `Transport`,
//! and each backend crate instantiates it on its own type (see
//! `provider!`), so the post and dequeue paths are monomorphised direct
//! (inlinable) calls, never through a vtable. Unit tests instantiate it on
//! `mock`, an in-memory backend.

use dat_abi::*;
use std::io;
use std::sync::Mutex;

/// A transport: the family of objects one backend provides.
pub trait Transport: Sized + 'static {
    /// One opened adapter port, as an IA uses it.
    type Device: DeviceOps<Self> + Send + Sync;
    type Pd: PdOps<Self> + Send + Sync;
    type Mr: MrOps + Send + Sync;
    type Mw: MwOps + Send + Sync;
    type Srq: SrqOps<Self> + Send + Sync;
    /// Where a datagram goes: made from a resolved path to a UD peer.
    type Ah: AhOps + Send + Sync;
    /// What the connection manager learns about the way to a UD peer, from
    /// which an address handle is made.
    type Path;
    /// A completion queue a waiter can sleep on by itself.
    type Cq: CqOps + Send + Sync;
    type Qp: QpOps<Self> + Send + Sync;
    /// One scatter/gather entry in the backend's own layout, so a post
    /// hands the core's list over as it is.
    type Sge: Copy;
    /// One connection (or datagram address resolution) in the connection
    /// manager: a small copyable reference, destroyed explicitly.
    type ConnId: ConnIdOps<Self> + Copy + Send + Sync;
    /// The running thread that delivers an IA's connection and async
    /// events; dropping it stops and joins the thread.
    type Events: Send;

    /// Private data limits of the connection manager's messages.
    const MAX_CONNECT_PDATA: usize;
    const MAX_ACCEPT_PDATA: usize;
    const MAX_REJECT_PDATA: usize;
    /// The same for a datagram address resolution's request and reply.
    const MAX_UD_CONNECT_PDATA: usize;
    const MAX_UD_ACCEPT_PDATA: usize;

    fn sge(addr: u64, len: u32, key: u32) -> Self::Sge;
    /// The transport's port for a DAT connection qualifier.
    fn port_of(qual: DAT_CONN_QUAL) -> u16;
}

/// What an adapter can do, as ia_query and the EP and EVD checks need it.
/// Counts follow the device's own (signed) limits.
#[derive(Clone, Debug, Default)]
pub struct Limits {
    pub vendor_id: u32,
    pub vendor_part_id: u32,
    pub hw_ver: u32,
    /// Dotted firmware version, as the device reports it.
    pub fw_ver: String,
    pub max_qp: i32,
    /// Work requests per queue.
    pub max_qp_wr: i32,
    /// SGEs per send or receive request.
    pub max_sge: i32,
    /// SGEs per RDMA read.
    pub max_sge_rd: i32,
    pub max_cq: i32,
    pub max_cqe: i32,
    pub max_mr: i32,
    pub max_mr_size: u64,
    pub max_pd: i32,
    /// Incoming RDMA reads (and atomics) outstanding per QP.
    pub max_qp_rd_atom: i32,
    /// Incoming RDMA reads outstanding over the whole device.
    pub max_res_rd_atom: i32,
    /// Outgoing RDMA reads outstanding per QP.
    pub max_qp_init_rd_atom: i32,
    pub max_mw: i32,
    pub max_srq: i32,
    pub max_srq_wr: i32,
    pub max_srq_sge: i32,
    /// Largest message on the port.
    pub max_msg_size: u32,
    /// The port's active path MTU in bytes: a datagram fits in one.
    pub mtu: u32,
    /// Remote atomics (compare-and-swap, fetch-and-add).
    pub atomics: bool,
    /// Memory windows, and whether of type 2 (bound by a posted request).
    pub windows: bool,
    pub windows_type2: bool,
}

pub trait DeviceOps<T: Transport> {
    /// Opens what an IA's dat.conf ia_params name.
    fn open(params: &str) -> Result<T::Device, DAT_RETURN>;
    /// The adapter's name, for ia_query and logs.
    fn name(&self) -> &str;
    fn limits(&self) -> &Limits;
    /// The IA address (a sockaddr DAT hands out by pointer).
    fn ia_address(&self) -> DAT_IA_ADDRESS_PTR;
    /// Provider-specific attributes describing the device and port, as
    /// DAPL's providers publish them (name, value).
    fn describe(&self) -> Vec<(&'static str, String)>;
    /// The IA address as a sockaddr, for binding and resolving from it.
    fn address(&self) -> &libc::sockaddr_storage;
    fn alloc_pd(&self) -> io::Result<T::Pd>;
    /// A connection id whose events name `context` (a DAT handle), for a
    /// connection or, with `datagram`, a UD address resolution.
    fn create_conn_id(&self, context: usize, datagram: bool) -> io::Result<T::ConnId>;
    /// An id bound to the IA address on `port` (0: any) and listening; its
    /// events name `context`. Returns it and the port it got.
    fn listen(&self, port: u16, context: usize, datagram: bool) -> io::Result<(T::ConnId, u16)>;
    /// Starts the thread that hands this IA's connection events to `on_cm`
    /// and the device's async events to `on_async`, and runs `tick` between.
    fn start_events(&self, on_cm: CmHandler<T>, on_async: AsyncHandler, tick: Tick) -> io::Result<T::Events>;
    fn create_cq(&self, depth: i32) -> io::Result<T::Cq>;
    /// A queue pair on `pd`; `context` is the DAT handle async events about
    /// it will name. Receives go to `srq` when there is one.
    fn create_qp(
        &self,
        pd: &T::Pd,
        send_cq: &T::Cq,
        recv_cq: &T::Cq,
        srq: Option<&T::Srq>,
        caps: &QpCaps,
        context: DAT_HANDLE,
    ) -> io::Result<T::Qp>;
    /// The device's own counts for one DAT counter group (DCNT_IA_CM,
    /// _LNK, _DIAG), as (IA counter index, value); what it does not keep
    /// is left out.
    fn group_counters(&self, group: DAT_IA_COUNTER_TYPE) -> Vec<(u32, u64)> {
        let _ = group;
        Vec::new()
    }
}

pub trait PdOps<T: Transport> {
    /// Registers [addr, addr+len) with the DAT privileges `privs`.
    fn register(&self, addr: *mut libc::c_void, len: usize, privs: DAT_MEM_PRIV_FLAGS) -> io::Result<T::Mr>;
    /// A memory window: type 2 (bound by a posted request) if asked, else type 1.
    fn alloc_mw(&self, type2: bool) -> io::Result<T::Mw>;
    fn create_srq(&self, max_wr: u32, max_sge: u32, limit: u32) -> io::Result<T::Srq>;
    fn create_ah(&self, path: &T::Path) -> io::Result<T::Ah>;
}

pub trait MrOps {
    fn lkey(&self) -> u32;
    fn rkey(&self) -> u32;
}

pub trait MwOps {
    fn is_type2(&self) -> bool;
    fn rkey(&self) -> u32;
    /// The key a type 2 bind gives the window next: a new one each time,
    /// so the previous binding's key stops working.
    fn next_rkey(&self) -> u32;
    /// Records the key a posted type 2 bind gave the window.
    fn set_rkey(&self, rkey: u32);
}

pub trait SrqOps<T: Transport> {
    /// Posts one receive; Err carries an errno.
    fn post_recv(&self, wr_id: u64, sges: &[T::Sge]) -> Result<(), i32>;
    /// The DAT handle async events about this SRQ will name.
    fn set_context(&self, h: DAT_HANDLE);
    fn resize(&self, max_wr: u32) -> io::Result<()>;
    fn set_limit(&self, limit: u32) -> io::Result<()>;
}

pub trait AhOps {
    /// The value a consumer's DAT_IB_ADDR_HANDLE carries for this handle.
    fn raw(&self) -> *mut libc::c_void;
}

/// What kind of work request a completion finished. Only receives are told
/// apart by the core (a receive consumed by an RDMA write with immediate
/// data reports differently); the rest is for logs and backends.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum CompletionKind {
    #[default]
    Other,
    Send,
    RdmaWrite,
    RdmaRead,
    CompareSwap,
    FetchAdd,
    WindowBind,
    LocalInvalidate,
    Recv,
    /// A receive consumed by the peer's RDMA write with immediate data.
    RecvRdmaWithImm,
}

/// One work completion, as the core reads it. The backend's poll fills it
/// on the caller's stack from its own record.
#[derive(Clone, Copy, Debug, Default)]
pub struct Completion {
    /// The value the core posted the request with.
    pub wr_id: u64,
    pub status: DAT_DTO_COMPLETION_STATUS,
    pub kind: CompletionKind,
    /// Bytes that arrived (receives).
    pub byte_len: u32,
    /// Immediate data, when the completion carries some.
    pub imm: Option<u32>,
    /// The local queue pair the request was posted on.
    pub qp_num: u32,
    /// The sender's queue pair (UD receives).
    pub src_qp: u32,
}

pub trait CqOps {
    /// Takes one completion off the queue; false when it is empty.
    fn poll(&self, out: &mut Completion) -> bool;
    /// Asks for a wakeup on the next completion (any, or solicited only).
    fn arm(&self, solicited_only: bool) -> bool;
    /// Before a waiter clears its wakeups and arms: a moment's look for a
    /// completion, for a backend whose completions a waiter's own passes
    /// move (the sock provider's rings); true when one is there for `poll`.
    /// A device's completions need no such help: the default looks not at all.
    fn linger(&self) -> bool {
        false
    }
    /// A descriptor that turns readable when an armed completion arrives.
    fn fd(&self) -> i32;
    /// Consumes pending wakeups without blocking.
    fn drain_events(&self);
    fn resize(&self, depth: i32) -> bool;
    /// The DAT handle async events about this queue will name.
    fn set_context(&self, h: DAT_HANDLE);
}

/// Sizes of a queue pair's work queues.
pub struct QpCaps {
    pub send_wr: u32,
    pub recv_wr: u32,
    pub send_sge: u32,
    pub recv_sge: u32,
    /// Unreliable datagram (the IB extension's UD EPs) rather than reliable connected.
    pub datagram: bool,
}

/// The operation a send-queue request performs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SendOp {
    Send,
    RdmaWrite,
    RdmaRead,
    RdmaWriteImm,
    CompareSwap,
    FetchAdd,
}

/// A send-queue request besides its SGEs and wr_id.
pub struct SendRequest<'a> {
    pub op: SendOp,
    /// The remote buffer of an RDMA or atomic operation.
    pub remote: Option<&'a DAT_RMR_TRIPLET>,
    /// Immediate data, passed on unswapped as DAPL does.
    pub imm: u32,
    /// Compare-or-add and swap operands of an atomic.
    pub atomic: (u64, u64),
    /// The destination of a datagram send.
    pub ud: Option<&'a DAT_IB_ADDR_HANDLE>,
}

impl SendRequest<'_> {
    pub const fn plain(op: SendOp) -> Self {
        SendRequest { op, remote: None, imm: 0, atomic: (0, 0), ud: None }
    }
}

/// The memory a window is bound over: a region, and the range in it.
pub struct WindowTarget<'a, T: Transport> {
    pub mr: &'a T::Mr,
    pub addr: u64,
    pub len: u64,
    /// The remote privileges (DAT flags) the binding grants.
    pub privs: DAT_MEM_PRIV_FLAGS,
}

pub trait QpOps<T: Transport> {
    fn num(&self) -> u32;
    /// Readies a new QP: able to take receives (connected) or to send and
    /// receive (datagram).
    fn prepare(&self) -> io::Result<()>;
    /// Into the error state: outstanding requests complete as flushed.
    fn to_error(&self);
    /// Back through reset to what `prepare` gives.
    fn reset(&self) -> io::Result<()>;
    /// Errs carry an errno.
    fn post_send(&self, wr_id: u64, sges: &[T::Sge], req: &SendRequest, flags: DAT_COMPLETION_FLAGS) -> Result<(), i32>;
    fn post_recv(&self, wr_id: u64, sges: &[T::Sge]) -> Result<(), i32>;
    /// Invalidates a type 2 window's `rkey` through the send queue.
    fn post_invalidate(&self, wr_id: u64, signaled: bool, rkey: u32) -> Result<(), i32>;
    /// Binds a type 2 window with key `rkey` through the send queue.
    fn post_bind(&self, wr_id: u64, signaled: bool, mw: &T::Mw, rkey: u32, target: &WindowTarget<T>) -> Result<(), i32>;
    /// Binds (or with no target, unbinds) a type 1 window.
    fn bind_type1(&self, wr_id: u64, signaled: bool, mw: &T::Mw, target: Option<&WindowTarget<T>>) -> Result<(), i32>;
    /// Ready to send and receive on the connection `id` carries, with the
    /// given incoming and outgoing RDMA read depths.
    fn connect_via(&self, id: &T::ConnId, responder: u8, initiator: u8) -> io::Result<()>;
}

/// What a connect or accept sends besides the QP.
pub struct ConnParams<'a> {
    pub pdata: &'a [u8],
    /// Incoming RDMA reads we take, and outgoing ones we issue.
    pub responder_resources: u8,
    pub initiator_depth: u8,
    /// The QP takes its receives from an SRQ.
    pub srq: bool,
    pub qp_num: u32,
}

pub trait ConnIdOps<T: Transport> {
    /// Makes the id's events name `context` (a DAT handle) from now on.
    fn set_context(&self, context: usize);
    /// A datagram (UD) address resolution, not a connection.
    fn is_datagram(&self) -> bool;
    fn resolve_addr(&self, src: &libc::sockaddr_storage, dst: &libc::sockaddr_storage, timeout_ms: i32) -> io::Result<()>;
    fn resolve_route(&self, timeout_ms: i32) -> io::Result<()>;
    fn connect(&self, p: &ConnParams) -> io::Result<()>;
    fn accept(&self, p: &ConnParams) -> io::Result<()>;
    /// Refuses a request: for the consumer with its private data, or for
    /// the provider with none.
    fn reject(&self, consumer_pdata: Option<&[u8]>);
    /// Tells the connection manager the active side is ready.
    fn establish(&self);
    fn disconnect(&self) -> io::Result<()>;
    /// The local port of a bound or connected id.
    fn local_port(&self) -> u16;
    /// The peer of a request or connection (AF_UNSPEC if unknown).
    fn peer_address(&self) -> libc::sockaddr_storage;
    /// Releases the id; blocks until its events are acknowledged, so never
    /// from inside the event handler.
    fn destroy(self);
}

/// A connection-manager event, in the core's terms.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CmEventKind {
    AddrResolved,
    RouteResolved,
    /// Address or route resolution failed, or the peer is unreachable.
    Unreachable { timed_out: bool },
    ConnectRequest,
    /// The passive side accepted (the active side must now establish).
    ConnectResponse,
    ConnectError,
    /// The peer refused: its consumer (private data then holds its reason),
    /// or its provider or transport.
    Rejected { by_consumer: bool },
    Established,
    Disconnected,
    DeviceRemoval,
    Other,
}

pub struct CmEvent<'a, T: Transport> {
    pub kind: CmEventKind,
    /// The id the event is about (for a connect request, the new one).
    pub id: T::ConnId,
    /// The context of `id`, or for a connect request, of the listening id.
    pub context: usize,
    /// The peer's private data, valid for the handler's call only.
    pub pdata: &'a [u8],
    /// For an established datagram resolution: the path to the peer and its QP.
    pub ud_peer: Option<(&'a T::Path, u32)>,
}

/// Handles one connection event; an id it returns is destroyed once the
/// event is acknowledged. The handler calls `done` (once) when it no longer
/// reads the event, and the backend acknowledges the event there: CNO
/// agents the event fires run after that, so an agent may wait for a
/// thread destroying the id the event names (rdma_destroy_id waits for
/// the acknowledgement).
pub type CmHandler<T> = fn(&CmEvent<T>, &mut dyn FnMut()) -> Option<<T as Transport>::ConnId>;

/// A device event not tied to one work request. Contexts are the DAT
/// handles the objects were given.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AsyncEvent {
    /// A completion queue overran.
    CqError { context: usize },
    /// A QP failed; `code` is the backend's, for logs.
    QpError { context: usize, code: u32 },
    SrqLimitReached { context: usize },
    SrqError { context: usize },
    Other { code: u32 },
}

impl AsyncEvent {
    /// The handle the event names (0: none).
    pub fn context(&self) -> usize {
        match *self {
            AsyncEvent::CqError { context }
            | AsyncEvent::QpError { context, .. }
            | AsyncEvent::SrqLimitReached { context }
            | AsyncEvent::SrqError { context } => context,
            AsyncEvent::Other { .. } => 0,
        }
    }
}

/// Handles one device async event, calling `done` (once) when it no longer
/// reads the object the event names, as `CmHandler` (a destroy of a verbs
/// CQ, QP or SRQ waits for its events' acknowledgement).
pub type AsyncHandler = fn(&AsyncEvent, &mut dyn FnMut());

/// Runs between event waits; returns how long (µs) until it wants to run again.
pub type Tick = Box<dyn Fn() -> Option<u64> + Send>;

/// Where an object keeps its connection id: taken and replaced whole, so
/// two threads never both release one.
pub struct IdSlot<T: Transport>(Mutex<Option<T::ConnId>>);

impl<T: Transport> IdSlot<T> {
    pub const fn new(id: Option<T::ConnId>) -> Self {
        IdSlot(Mutex::new(id))
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Option<T::ConnId>> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub fn take(&self) -> Option<T::ConnId> {
        self.lock().take()
    }

    pub fn set(&self, id: Option<T::ConnId>) {
        *self.lock() = id;
    }

    pub fn get(&self) -> Option<T::ConnId> {
        *self.lock()
    }
}
