//! The sock backend: DAT over plain kernel sockets, for hosts with no RDMA
//! device, kernel module or privilege. Reliable connections are TCP
//! streams, UD endpoints UDP sockets; RDMA semantics (keys, rights,
//! placement, ordering, completions) are enforced here, in user space.
//!
//! Threads. Each IA (one `Device`) has a socket engine (`progress`) that
//! owns all the IA's sockets and rings, transmits posted requests and
//! places arriving data straight into registered memory. A consumer's post
//! or empty poll runs it on the consumer's thread when it is free; a
//! progress thread runs it the rest of the time, asleep in epoll over the
//! sockets and an eventfd doorbell. A target therefore sees RDMA writes
//! land without calling DAT, as with a NIC, which MPI's eager-RDMA
//! polling relies on. A second thread per IA (`cm::Events`) hands
//! connection and async events to the core, so a handler that blocks
//! never holds up data. UD sends go out directly with one sendmsg.
//!
//! Layout: `device` (ia_params, limits, per-IA shared state), `cm`
//! (connection ids, listen, the handshake's calls, the event thread),
//! `wire` (frame format), `progress` (the socket engine), `shm` (the
//! on-node mapping, rings and cross-memory attach), `qp` (queues and
//! QP states), `srq`, `cq`, `keys` (PD, MR, MW and the key tables), `ud`,
//! `tail` (the last bytes of a write, placed last and whole), `ticker`
//! (the thread's tick, which polling consumers push back), `hash` (the
//! maps' hasher), `slab` (the engine's connections by token).
//!
//! On-node path (`shm`): when the handshake finds both ends on one host
//! (boot id, network namespace, uid), the connection's frames move
//! through two shared-memory rings instead of the TCP stream, which stays
//! for the handshake, as doorbell and to see the peer die; large RDMA
//! transfers go by reference, the target pulling or pushing the bytes with
//! cross-memory attach after its key checks, if a probe found it allowed.
//! The same frames and the same code serve both paths, so their semantics
//! agree. `DAPL_SOCK_SHM=0` and `DAPL_SOCK_CMA=0` turn either off.

pub mod clock;
pub mod cm;
pub mod conn;
pub mod cq;
pub mod device;
pub mod eventfd;
pub mod hash;
pub mod inbound;
pub mod keys;
pub mod outbound;
pub mod progress;
pub mod qp;
pub mod role;
pub mod shm;
pub mod slab;
pub mod spin;
pub mod srq;
pub mod tail;
pub mod ticker;
pub mod tune;
pub mod ud;
pub mod wire;

use dapl_core::backend::Transport;

/// Sockets as a `Transport`.
pub struct Sock;

impl Transport for Sock {
    type Device = device::Device;
    type Pd = keys::Pd;
    type Mr = keys::Mr;
    type Mw = keys::Mw;
    type Srq = srq::Srq;
    type Ah = ud::Ah;
    type Path = ud::Path;
    type Cq = cq::Cq;
    type Qp = qp::Qp;
    type Sge = qp::Sge;
    type ConnId = cm::Id;
    type Events = cm::Events;

    const MAX_CONNECT_PDATA: usize = cm::MAX_CONNECT_PDATA;
    const MAX_ACCEPT_PDATA: usize = cm::MAX_ACCEPT_PDATA;
    const MAX_REJECT_PDATA: usize = cm::MAX_REJECT_PDATA;
    const MAX_UD_CONNECT_PDATA: usize = cm::MAX_UD_CONNECT_PDATA;
    const MAX_UD_ACCEPT_PDATA: usize = cm::MAX_UD_ACCEPT_PDATA;

    #[inline]
    fn sge(addr: u64, len: u32, key: u32) -> qp::Sge {
        qp::Sge { addr, len, key }
    }

    fn port_of(qual: dat_abi::DAT_CONN_QUAL) -> u16 {
        cm::port_of(qual)
    }
}
