//! `libdaplibv.so.2`: a DAT 2.0 provider over rdma-core verbs and rdma_cm.
//!
//! Named in dat.conf like DAPL's `libdaplofa.so.2`; the registry (ours or
//! the reference) loads it and calls `dat_provider_init` once per entry.
//!
//! This crate is the verbs backend and nothing else: `verbs/` implements
//! `dapl_core::backend::Transport` over libibverbs and librdmacm (every
//! call into them, every verbs type, and rdma_cm's wire conventions shared
//! with DAPL: reject header, qualifier-to-port mapping). The DAT objects,
//! handles, state machines and event queues are `dapl_core`, generic over
//! the transport; the two lines below instantiate it on `Verbs` and export
//! its entry points, so every post and dequeue is a static call into the
//! verbs code, with no vtable between.

// Host unit tests cover the verbs translations only, which leaves parts unused there.
#[cfg_attr(test, allow(dead_code))]
mod verbs;

dapl_core::provider!(verbs::Verbs, "daplibv");
dapl_core::entry_points!(verbs::Verbs);
