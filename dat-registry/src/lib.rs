//! `libdat2.so.2`: the DAT 2.0 registry.
//!
//! Reads dat.conf, loads the provider library an IA name maps to, and passes
//! every `dat_*` call to the provider that owns the handle. Linked into the
//! shared object by `tools/link-libdat2.sh`, which gives the exports their
//! `DAT_2.0` versions (see `libdat2.map`).

mod api;
pub mod conf;
mod dispatch;
mod ia_table;
mod library;
mod providers;
mod registry;
pub mod status;

pub use api::*;
