//! The verbs backend: rdma-core devices, protection domains, memory regions.
//! Everything that calls libibverbs or librdmacm lives under here.

pub mod ah;
pub mod cm;
pub mod cq;
pub mod device;
pub mod mr;
pub mod mw;
pub mod pd;
pub mod qp;
pub mod srq;
