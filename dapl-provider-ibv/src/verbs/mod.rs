//! The verbs backend: rdma-core devices, protection domains, memory regions,
//! queues and rdma_cm. Everything that calls libibverbs or librdmacm lives
//! under here, and the core reaches it only through `dapl_core::backend`.

pub mod ah;
pub mod cm;
pub mod counters;
pub mod cq;
pub mod device;
pub mod mr;
pub mod mw;
pub mod pd;
pub mod qp;
pub mod srq;

use dapl_core::backend::Transport;

/// rdma-core's libibverbs and librdmacm, as a `Transport`.
pub struct Verbs;

impl Transport for Verbs {
    type Device = device::Device;
    type Pd = pd::Pd;
    type Mr = mr::Mr;
    type Mw = mw::Mw;
    type Srq = srq::VSrq;
    type Ah = ah::Ah;
    type Path = rdma_core_sys::ibv_ah_attr;
    type Cq = cq::Cq;
    type Qp = qp::Qp;
    type Sge = rdma_core_sys::ibv_sge;
    type ConnId = cm::CmId;
    type Events = cm::CmThread;

    const MAX_CONNECT_PDATA: usize = cm::MAX_CONNECT_PDATA;
    const MAX_ACCEPT_PDATA: usize = cm::MAX_ACCEPT_PDATA;
    const MAX_REJECT_PDATA: usize = cm::MAX_REJECT_PDATA;
    const MAX_UD_CONNECT_PDATA: usize = cm::MAX_UD_CONNECT_PDATA;
    const MAX_UD_ACCEPT_PDATA: usize = cm::MAX_UD_ACCEPT_PDATA;

    #[inline]
    fn sge(addr: u64, len: u32, key: u32) -> rdma_core_sys::ibv_sge {
        rdma_core_sys::ibv_sge { addr, length: len, lkey: key }
    }

    fn port_of(qual: dat_abi::DAT_CONN_QUAL) -> u16 {
        cm::port_of(qual)
    }
}
