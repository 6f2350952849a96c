//! What the diagnostic tools (dat-info, dat-perf) share.

pub mod json;
pub mod maps;

pub use json::Json;
