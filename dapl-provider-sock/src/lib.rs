//! `libdaplsock.so.2`: a DAT 2.0 provider over kernel TCP and UDP sockets.
//!
//! For hosts with no RDMA device, kernel module or privilege: dat.conf
//! names it like any provider, with ia_params naming a local IPv4 address
//! or netdev (see `docs/sock.md`). It links no rdma-core library.
//!
//! This crate is the sock backend and nothing else: `sock/` implements
//! `dapl_core::backend::Transport` (reliable connections as TCP streams,
//! UD as UDP datagrams, RDMA semantics enforced in user space by a
//! progress thread per IA). The DAT objects, handles, state machines and
//! event queues are `dapl_core`, instantiated below on `Sock`, so posts and
//! dequeues are static calls into the sock code, with no vtable between.

mod sock;

dapl_core::provider!(sock::Sock, "daplsock");
dapl_core::entry_points!(sock::Sock);
