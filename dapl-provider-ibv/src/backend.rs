//! The contract between the provider core and a transport backend.
//!
//! The core (every object module outside `verbs/`) keeps DAT's handles,
//! object lifetimes, state machines, event queues and error codes; it
//! reaches the hardware only through the traits here, on the types the
//! active backend names. `Active` is the one place a backend is chosen:
//! the core's aliases below resolve to its concrete types at compile time,
//! so the post and dequeue paths are direct (inlinable) calls, never
//! through a vtable. A second backend is a module implementing `Transport`
//! and that one line.

use dat_abi::*;
use std::io;

/// The backend the provider is built with.
pub type Active = crate::verbs::Verbs;

pub type Device = <Active as Transport>::Device;
pub type Pd = <Active as Transport>::Pd;
pub type Mr = <Active as Transport>::Mr;
pub type Mw = <Active as Transport>::Mw;
pub type Srq = <Active as Transport>::Srq;
pub type Ah = <Active as Transport>::Ah;
pub type Cq = <Active as Transport>::Cq;
pub type Path = <Active as Transport>::Path;

/// A transport: the family of objects one backend provides.
pub trait Transport: Sized + 'static {
    /// One opened adapter port, as an IA uses it.
    type Device: DeviceOps<Self> + Send + Sync;
    type Pd: PdOps<Self> + Send + Sync;
    type Mr: MrOps + Send + Sync;
    type Mw: MwOps + Send + Sync;
    type Srq: SrqOps + Send + Sync;
    /// Where a datagram goes: made from a resolved path to a UD peer.
    type Ah: AhOps + Send + Sync;
    /// What the connection manager learns about the way to a UD peer, from
    /// which an address handle is made.
    type Path;
    /// A completion queue a waiter can sleep on by itself.
    type Cq: CqOps + Send + Sync;
}

pub trait DeviceOps<T: Transport> {
    fn alloc_pd(&self) -> io::Result<T::Pd>;
    fn create_cq(&self, depth: i32) -> io::Result<T::Cq>;
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
}

pub trait SrqOps {
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
    /// A descriptor that turns readable when an armed completion arrives.
    fn fd(&self) -> i32;
    /// Consumes pending wakeups without blocking.
    fn drain_events(&self);
    fn resize(&self, depth: i32) -> bool;
    /// The DAT handle async events about this queue will name.
    fn set_context(&self, h: DAT_HANDLE);
}

